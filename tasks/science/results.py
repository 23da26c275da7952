"""What a science run writes in summary.json beside the runner's fields (``ScienceTask.Results``):
the condition, the heuristic scores of the final paper (and the judge's), the teams' passes,
requests and tool loops, and what each team spent."""

from __future__ import annotations

from pydantic import Field

from cooplab.graphs.runfiles import Count, FileModel, JudgeLedger, Name, Results, Seconds, Text, Usd


class Scores(FileModel):
    completeness: float | None
    quality: float | None
    accuracy: float | None = Field(description="null when the data came without a truth to score against")


class Judge(FileModel):
    """The LLM judge's scores of the final paper (or its one-line error), and what it cost on its own ledger."""

    judge: Name = Field(description="the judge's model")
    k: Count | None = None
    completeness: float | None = None
    quality: float | None = None
    accuracy: float | None = None
    std: dict[Name, float | None] | None = None
    n_fallback: Count | None = None
    error: Text | None = None
    budget_usd: Usd | None
    cost_usd: Usd
    ledger: JudgeLedger


class Stop(FileModel):
    """Why the teams stopped before the end (their budget)."""

    reason: Name
    detail: Text | None = None
    node: Name
    team: Name


class ScienceResults(Results):
    """A science run's results."""

    since_v1 = {"pipeline": None}  # runs made before the solo pipeline existed were teams

    science_task: Name = Field(description="the dataset's task (custom: your own data)")
    judge: Judge | None = Field(description="null without a judge")
    team: Name = Field(description="llm, or a built-in scripted team (oracle, garbage)")
    pipeline: Name | None = Field(description="teams or solo")
    team_size: Count
    visibility: Name = Field(description="what the agents see of the budget")
    prompt: Name
    scores: Scores = Field(description="the heuristic scorer's scores of the final paper")
    scored: Text = Field(description="what was scored")
    facts: dict[Name, Name] = Field(description="fact -> found, missed, ...")
    passes: list[Name] = Field(description="team#visit, in order")
    artifacts: dict[Name, Count] = Field(description="artifact -> versions written")
    requests: Count
    requests_refused: Count
    messages: Count
    tool_loops: Count
    loop_stops: dict[Name, Count] = Field(description="tool loops by how they ended")
    cost_by_team_usd: dict[Name, Usd]
    sandbox_seconds_by_team: dict[Name, Seconds]
    stop: Stop | None
