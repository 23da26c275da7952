"""What a Diner's Dilemma run writes in summary.json beside the runner's fields (``DinersTask.Results``)."""

from __future__ import annotations

from pydantic import Field

from cooplab.graphs.runfiles import Count, Name, Number, Results, Share


class DinersResults(Results):
    """A diners run's results: the condition, and the strategy shares (mean over replicates)."""

    combination: int | None = Field(description="the paper's initial combination (1 or 2), null for groups given")
    groups: list[list[Name]] = Field(description="the strategies of each group")
    pk: Name | None = Field(description="the price ratio as p:k")
    p: Number = Field(description="price of the premium meal")
    k: Number = Field(description="price of the budget meal")
    costs_stated: bool = Field(description="whether the punishment costs are told to the diners")
    beta: Number = Field(description="selection strength of the Fermi rule")
    replicates: Count
    n_agents: Count = Field(description="diners per society")
    iterations_completed: Count
    final_shares: dict[Name, float] = Field(description="strategy -> its share at the last iteration")
    final_shares_sd: dict[Name, float] = Field(description="strategy -> s.d. of that share over replicates")
    shares_by_iteration: dict[str, dict[Name, float]] = Field(description="iteration -> strategy -> share")
    decision_accuracy: Share | None = Field(
        None, description="LLM runs: share of orders that follow the diner's strategy"
    )
    decision_accuracy_n: Count | None = None
    decision_accuracy_by_strategy: dict[Name, Share] | None = None
    punishment_accuracy: Share | None = Field(
        None, description="LLM runs: share of punishment decisions that follow the strategy"
    )
    punishment_accuracy_n: Count | None = None
    punishment_accuracy_by_strategy: dict[Name, Share] | None = None
