"""What a game run writes in summary.json beside the runner's fields (``GameTask.Results``): the
primary metric with its Nash and Pareto references, Pareto proximity, payoffs, the game's own
outcomes, the share of fallback decisions and the bootstrap convergence (Appendix D)."""

from __future__ import annotations

from pydantic import Field, model_validator

from cooplab.graphs.runfiles import Count, FileModel, Name, Number, PathText, Results, Share, Text


class Metric(FileModel):
    """The game's primary metric over the simulations (mean, 95% interval, s.d.), with its references."""

    name: Name
    label: Text
    nash: float | None
    pareto: float | None
    pareto_basis: Text | None = Field(
        None, description="where the Pareto value comes from (runs made before it was recorded lack it)"
    )
    mean: float | None
    ci95: list[float | None] | None
    sd: float | None


class Proximity(FileModel):
    """Pareto proximity: min(1, |metric - pareto| / |nash - pareto|), 0 at the Pareto value."""

    mean: float | None
    ci95: list[float | None] | None
    near_pareto_share: Share | None
    near_pareto_threshold: Number
    normalization: Text
    raw_distance_mean: float | None = None
    beyond_nash_share: Share | None = None


class Payoff(FileModel):
    mean_total_per_player: float | None
    ci95: list[float | None] | None
    mean_per_player_per_round: float | None


class Sanctions(FileModel):
    tokens_given_per_player_round: float | None
    tokens_received_per_player_round: float | None
    share_sanctioning: Share | None
    share_sanctioned: Share | None
    dropped_out_of_group: Count
    players: Count


class Outcomes(FileModel):
    """The game's own outcomes (each game has some of these)."""

    mean_min_effort: float | None = None  # weakest link
    sanctions: Sanctions | None = None  # CPR with sanctioning
    game_over: bool | None = None  # collective risk
    threshold_met_rate: Share | None = None
    savings_lost_rate: Share | None = None
    expected_payoff_per_player: float | None = None
    mean_total_contributed: float | None = None
    threshold: Number | None = None
    success_rate: Share | None = None  # o-ring
    mean_global_pool_contribution: float | None = None  # public goods
    mean_keep: float | None = None


class FallbackPhase(FileModel):
    decisions: Count
    fallbacks: Count


class Fallback(FileModel):
    """The share of the game's play decisions that fell back to the documented default."""

    decisions: Count
    fallbacks: Count
    share: Share
    by_phase: dict[Name, FallbackPhase]


class Convergence(FileModel):
    """Bootstrap convergence of the metric's mean (sample sizes kept in summary.json)."""

    resamples: Count
    n: list[Count]
    mae: list[float | None]
    mae_sd_units: list[float | None]


class GameResults(Results):
    """A game run's results."""

    since_v1 = {
        "fallback": None
    }  # runs before the share was recorded: computed from decisions (evals.bayes.fallback_of)

    game: Name
    players: Name = Field(description="llm, or the reference players (nash, pareto, random, scripted)")
    script_file: PathText | None = Field(description="the scripted players' file")
    decision: Name = Field(description="the play decision of the primary metric")
    group_sizes: list[Count]
    n_players: Count
    rounds: Count
    simulations: Count
    prompt: Name | None = Field(None, description="LLM players: the prompt condition")
    deliberation: bool | None = Field(None, description="LLM players: whether they talked before playing")
    messages: Count | None = Field(None, description="LLM players: messages of the deliberation")
    rounds_completed: Count
    fallback: Fallback | None
    metric: Metric
    pareto_proximity: Proximity | None
    payoff: Payoff | None
    outcomes: Outcomes
    convergence: Convergence | None = None

    @model_validator(mode="after")
    def _llm_fields(self) -> "GameResults":
        if self.players == "llm":
            for name in ("prompt", "deliberation", "messages"):
                if getattr(self, name) is None:
                    raise ValueError(f"{name}: required for LLM players (players llm)")
        return self
