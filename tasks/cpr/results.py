"""What a CPR run writes in summary.json beside the runner's fields (``CPRTask.Results``): the
society's outcomes of paper §3.2 over its replicate societies (:func:`cooplab.tasks.cpr.outcomes.summarize`)."""

from __future__ import annotations

from pydantic import Field

from cooplab.graphs.runfiles import Count, FileModel, Name, Results


class MeanSem(FileModel):
    """Mean over the societies, its standard error (ddof 1) and the normal 95% half-width (null with
    fewer than two societies; the mean is null without any)."""

    mean: float | None
    sem: float | None = Field(ge=0)
    ci95: float | None = Field(ge=0)
    n: Count = Field(description="societies")


class SurvivalTime(MeanSem):
    values: list[Count] = Field(description="T_s of each society, in rounds")


class Efficiency(MeanSem):
    values: list[float] = Field(description="eta of each society")


class CPRResults(Results):
    """A CPR run's results."""

    env: Name = Field(description="the environment (harsh, rich, ...)")
    population: Name = Field(description="the population's mix of types")
    ablation: Name = Field(description="which institutions the society has")
    replicates: Count = Field(description="replicate societies")
    n_agents: Count = Field(description="agents per society")
    rounds_completed: Count = Field(description="rounds every running society completed")
    survival_time: SurvivalTime = Field(
        description="T_s: rounds until the resource collapsed or an agent starved (the round cap if neither)"
    )
    efficiency: Efficiency = Field(
        description="eta: mean harvest over the rounds lived, as a share of the optimum rK/4"
    )
    collapse: dict[Name, Count] = Field(description="societies by how they ended")
    agent_steps: Count = Field(description="agent-rounds lived, summed over the societies")
    censored: bool | None = Field(
        None,
        description="a run that stopped early: whether societies were still running (their T_s is "
        "the last completed round)",
    )
