"""The settings of a Diner's Dilemma run, as config.json's ``params`` holds them.

Sources: the paper's §3 (the Fermi imitation rule, accumulated utility) and §4 (the two initial
combinations, the punishment costs 3:1, 6:1 and unstated, ten iterations, the meal's costs and
values). ``cooplab params diners`` lists them; ``cooplab run diners`` sets them from its options
(``--pk 6:1`` sets ``pk``, ``p``, ``k`` and ``costs_stated``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator, model_validator
from pydantic.config import JsonDict

from cooplab.graphs.invaders import Invader, InvaderWhenSet
from cooplab.limits import RULES
from cooplab.tasks.diners import model as dm


def _src(source: str) -> JsonDict:
    return {"source": source}


#: a cost or a value (>= 0; magnitude capped by the caps table)
Amount = Annotated[float, RULES["param"].within(0)]


class Meal(BaseModel):
    """The two meals' costs and values (paper: the budget and the premium meal)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    c_b: Amount = Field(default=dm.MEAL["c_b"], description="cost of the budget meal", json_schema_extra=_src("paper"))
    v_b: Amount = Field(default=dm.MEAL["v_b"], description="value of the budget meal", json_schema_extra=_src("paper"))
    c_p: Amount = Field(default=dm.MEAL["c_p"], description="cost of the premium meal", json_schema_extra=_src("paper"))
    v_p: Amount = Field(
        default=dm.MEAL["v_p"], description="value of the premium meal", json_schema_extra=_src("paper")
    )


def invader_kinds(agents: str | None) -> tuple[str, ...]:
    """Rule-based diners take the rule-based invaders (tasks/diners/invaders.py); LLM diners those and
    an invader of another model."""
    return ("greedy", "defector", "free-rider", "model") if agents == "llm" else ("greedy", "defector", "free-rider")


class DinersParams(InvaderWhenSet):
    """Everything a diners run is set up with (config.json's ``params``; ``cooplab run diners``
    sets it from its options: ``--pk 6:1`` sets ``pk``, ``p``, ``k`` and ``costs_stated``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    combination: Annotated[int | None, RULES["combination"].within(optional=True)] = Field(
        1,
        description="the paper's initial combination 1 or 2 (null: groups given by hand)",
        json_schema_extra=_src("paper §4"),
    )
    pk: StrictStr = Field(
        "3:1", description="punishment costs as given (unstated, 3:1, 6:1 or P:K)", json_schema_extra=_src("paper §4")
    )
    groups: list[list[StrictStr]] = Field(
        default_factory=lambda: [list(g) for g in dm.COMBINATIONS[1]],
        description="initial strategies, group by group (--combination 1|2 or --groups)",
        json_schema_extra=_src("paper §4"),
    )
    p: Amount = Field(
        3.0,
        description="cost to the punished of one punishment (--pk P:K)",
        json_schema_extra=_src("paper §4 (3:1, 6:1, unstated)"),
    )
    k: Amount = Field(1.0, description="cost to the punisher of one punishment", json_schema_extra=_src("paper §4"))
    costs_stated: StrictBool = Field(
        True, description="whether LLM agents are told p and k (--pk unstated: no)", json_schema_extra=_src("paper §4")
    )
    beta: Annotated[float, RULES["beta"]] = Field(
        1.0, description="selection strength of the Fermi imitation rule", json_schema_extra=_src("paper §3 (beta = 1)")
    )
    accumulate: StrictBool = Field(
        True,
        description="pi is the accumulated utility (false: this iteration's only)",
        json_schema_extra=_src("paper §3"),
    )
    meal: Meal = Field(
        default_factory=Meal,
        description="the meals' costs and values (c_b, v_b, c_p, v_p)",
        json_schema_extra=_src("paper (the dilemma's meal costs and values)"),
    )
    iterations: Annotated[int, RULES["iterations"]] = Field(
        10, description="iterations of the game", json_schema_extra=_src("paper §4 (10)")
    )
    replicates: Annotated[int, RULES["replicates"]] = Field(
        200,
        description="independent replicates (the CLI's default: 200 rule-based, 1 LLM)",
        json_schema_extra=_src("cooplab"),
    )
    invader: Invader | None = Field(
        None,
        description="a diner replaced at iteration K by an invader (--invader KIND@K[:AGENT]; "
        "tasks/diners/invaders.py; none: no invader)",
        json_schema_extra=_src("cooplab"),
    )

    @field_validator("groups")
    @classmethod
    def _groups(cls, groups: list[list[str]]) -> list[list[str]]:
        dm.parse_groups(";".join(",".join(g) for g in groups))  # strategies known, sizes within the caps (one line)
        return groups

    @model_validator(mode="after")
    def _condition(self) -> "DinersParams":
        from cooplab.limits import ConfigError, check_size, cross

        self.condition().validate()  # the meal still a dilemma at every group size (one line)
        try:
            check_size(
                self.replicates,
                self.n_agents,
                self.iterations,
                names=("<replicates>", "diners", "<iterations>"),
                diners=True,
            )
        except ConfigError as exc:
            raise cross(("replicates", "iterations"), str(exc)) from None
        return self

    @model_validator(mode="after")
    def _invader(self, info: Any) -> "DinersParams":
        """An invader's seat and iteration within the society these settings describe."""
        if self.invader is not None:
            from cooplab.graphs.invaders import check_in

            agents = (info.context or {}).get("agents")
            check_in(
                self.invader,
                n_agents=self.n_agents,
                rounds=self.iterations,
                agents=agents,
                kinds=invader_kinds(agents or "llm"),
            )
        return self

    @property
    def n_agents(self) -> int:
        return sum(len(g) for g in self.groups)

    def condition(self) -> Any:
        """The :class:`~cooplab.tasks.diners.society.Condition` these settings describe."""
        from cooplab.tasks.diners.society import Condition

        return Condition(
            tuple(tuple(g) for g in self.groups),
            float(self.p),
            float(self.k),
            bool(self.costs_stated),
            float(self.beta),
            accumulate=bool(self.accumulate),
            meal=self.meal.model_dump(),
        )
