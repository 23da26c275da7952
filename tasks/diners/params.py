"""The settings of a Diner's Dilemma run, as config.json's ``params`` holds them.

Sources: the paper's §3 (the Fermi imitation rule, accumulated utility) and §4 (the two initial
combinations, the punishment costs 3:1, 6:1 and unstated, ten iterations, the meal's costs and
values). ``cooplab params diners`` lists them; ``cooplab run diners`` sets them from its options
(``--pk 6:1`` sets ``pk``, ``p``, ``k`` and ``costs_stated``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cooplab.tasks.diners import model as dm


def _src(source: str) -> dict[str, str]:
    return {"source": source}


class DinersParams(BaseModel):
    """Everything a diners run is set up with (the values are checked by
    :meth:`cooplab.tasks.diners.task.DinersTask.check_config`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    combination: int | None = Field(1, description="the paper's initial combination 1 or 2 (null: groups given by hand)",
                                    json_schema_extra=_src("paper §4"))
    pk: str = Field("3:1", description="punishment costs as given (unstated, 3:1, 6:1 or P:K)", json_schema_extra=_src("paper §4"))
    groups: list[list[str]] = Field(default_factory=lambda: [list(g) for g in dm.COMBINATIONS[1]],
                                    description="initial strategies, group by group (--combination 1|2 or --groups)",
                                    json_schema_extra=_src("paper §4"))
    p: float = Field(3.0, description="cost to the punished of one punishment (--pk P:K)", json_schema_extra=_src("paper §4 (3:1, 6:1, unstated)"))
    k: float = Field(1.0, description="cost to the punisher of one punishment", json_schema_extra=_src("paper §4"))
    costs_stated: bool = Field(True, description="whether LLM agents are told p and k (--pk unstated: no)", json_schema_extra=_src("paper §4"))
    beta: float = Field(1.0, description="selection strength of the Fermi imitation rule", json_schema_extra=_src("paper §3 (beta = 1)"))
    accumulate: bool = Field(True, description="pi is the accumulated utility (false: this iteration's only)", json_schema_extra=_src("paper §3"))
    meal: dict[str, float] = Field(default_factory=lambda: dict(dm.MEAL), description="the meals' costs and values (c_b, v_b, c_p, v_p)",
                                   json_schema_extra=_src("paper (the dilemma's meal costs and values)"))
    iterations: int = Field(10, description="iterations of the game", json_schema_extra=_src("paper §4 (10)"))
    replicates: int = Field(200, description="independent replicates (the CLI's default: 200 rule-based, 1 LLM)",
                            json_schema_extra=_src("cooplab"))
