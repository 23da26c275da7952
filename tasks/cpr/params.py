"""Parameters of the CPR fishery society (Gupta et al. 2025, §3.1 and §4.1).

Every parameter has the paper's name where the paper names it, a default, a meaning and a
``source``: ``paper`` when the seed text gives the value, ``chosen`` with a reason when the
paper is silent (its appendix Table 2 is not in the seed). ``cooplab params cpr`` prints
this table and ``docs/cpr.md`` reproduces it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    model_serializer,
    model_validator,
)

from cooplab.graphs.invaders import Invader
from cooplab.limits import RULES

Env = Literal["harsh", "rich"]
Population = Literal["altruistic", "selfish", "mixed"]
Ablation = Literal["full", "osl", "ogd", "neither"]

#: growth rate r for the two environments of §4.1 (paper: harsh r = 0.2, rich r = 0.6)
ENVIRONMENTS: dict[str, float] = {"harsh": 0.2, "rich": 0.6}

#: The paper's ablations (§4.2.5) as presets of the two alignment switches. Individual learning
#: (``individual_learning``, on by default) is not part of them: it stays on in all four, so
#: ``neither`` means individual learning only, and a preset such as ``v1`` that switches it off
#: composes with any ablation.
ABLATIONS: dict[str, dict[str, bool]] = {
    "full": {"social_learning": True, "group_decision": True},
    "osl": {"social_learning": True, "group_decision": False},
    "ogd": {"social_learning": False, "group_decision": True},
    "neither": {"social_learning": False, "group_decision": False},
}


def _f(default: Any, description: str, source: str, **kw: Any) -> Any:
    return Field(default, description=description, json_schema_extra={"source": source}, **kw)


#: the number types of the parameters: every bound from the caps table (cooplab/limits.py, RULES)
Real = Annotated[float, RULES["param"].within(0)]  # a real >= 0 (magnitude capped)
Positive = Annotated[float, RULES["param"].within(0, lo_open=True)]
Share = Annotated[float, RULES["share"]]
PositiveShare = Annotated[float, RULES["share"].within(0, lo_open=True)]


class CPRParams(BaseModel):
    """All numeric parameters of one CPR society. Names follow the paper's symbols."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False, defer_build=True)

    # --- population and horizon -------------------------------------------------------
    N: Annotated[int, RULES["n-agents"]] = _f(10, "number of agents", "paper §4.1: all simulations use 10 agents")
    T: Annotated[int, RULES["rounds"]] = _f(50, "round cap", "paper §4.2: runs are capped at 50 rounds")
    # --- resource (§3.1.2) ------------------------------------------------------------
    K: Positive = _f(
        1000.0,
        "carrying capacity of the stock",
        "chosen: sets the fish unit so that beta = 10 is about one round's catch, not a death sentence",
    )
    R0: Real = _f(1000.0, "initial stock R(1)", "chosen: the lake starts full (R0 = K)")
    r: Real = _f(0.2, "intrinsic growth rate (harsh 0.2, rich 0.6)", "paper §4.1: harsh r = 0.2, rich r = 0.6")
    R_min: Real = _f(
        71.0, "collapse threshold on the post-harvest stock", "chosen, calibrated (docs/cpr.md); v1: 50, 5% of K"
    )
    # --- technology and economy (§3.1.1) ----------------------------------------------
    alpha: PositiveShare = _f(
        0.082,
        "productivity: h_i = alpha * e_i * R",
        "chosen, calibrated (docs/cpr.md): 10 agents at full effort take 82% of the stock per round; v1: 0.1, they can "
        "empty the lake in one round",
    )
    c: Positive = _f(
        3.1,
        "fixed consumption per agent per round",
        "chosen, calibrated (docs/cpr.md): 62% of the harsh lake's per-capita MSY rK/4N = 5 (21% of the rich lake's "
        "15); v1: 4.0 (80%)",
    )
    P0: Real = _f(
        38.0,
        "initial wealth P_i(1)",
        "chosen, calibrated (docs/cpr.md): 12 rounds of consumption, or almost four beta = 10 fines; v1: 20",
    )
    # --- sanctions ----------------------------------------------------------------------
    beta: Real = _f(10.0, "penalty paid by a punished agent", "paper Fig. 2 uses beta = 10 and 14")
    gamma: Real = _f(
        7.2,
        "cost paid by a punisher",
        "chosen, calibrated (docs/cpr.md): fee:fine about 3:4 at beta = 10; v1: 1.0, a tenth of beta",
    )
    punishment: StrictBool = _f(True, "punishment phase on/off", "paper §4.1 (a)")
    punish_off_round: Annotated[int | None, RULES["rounds"].within(optional=True)] = _f(
        None, "from this round on punishment is disabled (none: never)", "paper Fig. 2 disables it at t = 15"
    )
    # --- social learning (§3.1.3) ---------------------------------------------------------
    social_learning: StrictBool = _f(True, "payoff-biased imitation on/off", "paper §4.2.5 ablations")
    delta: Real = _f(
        0.86,
        "selection strength of the logit imitation rule (per fish)",
        "chosen, calibrated (docs/cpr.md): a 5-fish payoff gap gives Pr = 0.99; v1: 0.2 (0.73)",
    )
    sigma: Real = _f(
        0.096,
        "mutation s.d., as a fraction of each trait's initial general range",
        "chosen, calibrated (docs/cpr.md): small exploration; v1: 0.05",
    )
    learn_prob: Share = _f(
        0.62,
        "probability that an agent revises its strategy in a round",
        "chosen, calibrated (docs/cpr.md); v1: 0.2, the paper says agents 'occasionally' revise",
    )
    ema: PositiveShare = _f(
        0.78,
        "weight of the newest round in the smoothed payoff P_bar",
        "chosen, calibrated (docs/cpr.md): the paper suggests an exponential moving average; v1: 0.5",
    )
    # --- individual learning (abstract; §4.2.5 "individual history and environmental feedback")
    individual_learning: StrictBool = _f(
        True,
        "individual (reinforcement) learning from one's own payoff, fines and sanctions on/off",
        "paper abstract ('agents also individually learn from the consequences of harvesting, monitoring, and "
        "punishing') "
        "and §4.2.5 (Neither: 'individual history and environmental feedback')",
    )
    il_rate: Share = _f(
        0.43,
        "learning rate lambda of individual learning (Bush-Mosteller; 0 = off)",
        "chosen, calibrated (docs/cpr.md): a fine closes 43% of the gap to the violated norm; first version: 0.2",
    )
    # --- group decision (§3.1.3) ------------------------------------------------------------
    group_decision: StrictBool = _f(True, "propose -> vote (median) group norm on/off", "paper §4.2.5 ablations")
    # --- initial trait ranges of §4.1 (c): general range, split into altruistic/selfish halves
    e_min: Share = _f(
        0.082,
        "lower end of the general initial effort range",
        "chosen, calibrated (docs/cpr.md): alpha e K = 6.7, about twice subsistence at full stock; v1: 0.04, "
        "subsistence (alpha e K = c)",
    )
    g_min: Real = _f(
        0.13,
        "lower end of the general initial cap range",
        "chosen, calibrated (docs/cpr.md); v1: 4.0, subsistence, g = c",
    )
    e_max: Share = _f(
        0.98,
        "upper end of the general initial effort range",
        "chosen, calibrated (docs/cpr.md); v1: 1.0, the physical maximum",
    )
    g_max: Positive = _f(
        18.0,
        "upper end of the general initial cap range",
        "chosen, calibrated (docs/cpr.md): just above the rich per-capita MSY (rK/4N = 15); v1: 30",
    )
    m_range: tuple[Share, Share] = _f(
        (0.0, 0.42),
        "initial monitoring propensity range",
        "chosen, calibrated (docs/cpr.md); v1: the full unit interval",
    )
    p_range: tuple[Share, Share] = _f(
        (0.0, 0.55),
        "initial punishment propensity range",
        "chosen, calibrated (docs/cpr.md); v1: the full unit interval",
    )

    @model_validator(mode="after")
    def _check(self) -> "CPRParams":
        for name in ("m_range", "p_range"):
            lo, hi = getattr(self, name)
            if not (0.0 <= lo <= hi <= 1.0):
                raise ValueError(f"{name} must be a range inside [0, 1] with low <= high, got ({lo}, {hi})")
        if self.e_min > self.e_max or self.g_min > self.g_max:
            raise ValueError("the initial ranges need e_min <= e_max and g_min <= g_max")
        if self.R0 > self.K:
            raise ValueError(f"R0 ({self.R0}) must not exceed the carrying capacity K ({self.K})")
        return self

    @property
    def H_opt(self) -> float:
        """Maximum sustainable yield of the logistic model: max_R r R (1 - R/K) = r K / 4."""
        return self.r * self.K / 4.0


#: Named parameter sets. ``v1``: the model as it was before individual learning was added
#: (issue 14): the defaults of that version, written out so that later changes of the defaults
#: do not move it, with ``individual_learning`` off (it reproduces v1's numbers bit for bit).
#: A preset holds the model's calibration only (the "chosen" values and the individual-learning
#: switch); what the paper gives or the experiments set (r by the environment, beta, N, T, the
#: ablation switches, punishment and its off round) is left to them: a preset that held beta would
#: override the beta of every condition of Figs. 2 and 3 (tested).
PRESETS: dict[str, dict[str, Any]] = {
    "v1": {
        "K": 1000.0,
        "R0": 1000.0,
        "R_min": 50.0,
        "alpha": 0.1,
        "c": 4.0,
        "P0": 20.0,
        "gamma": 1.0,
        "delta": 0.2,
        "sigma": 0.05,
        "learn_prob": 0.2,
        "ema": 0.5,
        "e_min": 0.04,
        "g_min": 4.0,
        "e_max": 1.0,
        "g_max": 30.0,
        "m_range": (0.0, 1.0),
        "p_range": (0.0, 1.0),
        "individual_learning": False,
        "il_rate": 0.2,
    },
    # sample 69 of `cooplab calibrate cpr --samples 128 --seed 0` (design 273f6afda7b54c0d), rounded to
    # two significant digits: claims c1 and c2 hold at seeds 0, 1 and 2 (docs/cpr.md, "Calibration").
    "calibrated": {
        "K": 1000.0,
        "R0": 1000.0,
        "R_min": 86.0,
        "alpha": 0.13,
        "c": 7.8,
        "P0": 54.0,
        "gamma": 4.7,
        "delta": 0.4,
        "sigma": 0.019,
        "learn_prob": 0.89,
        "ema": 0.31,
        "e_min": 0.016,
        "g_min": 1.4,
        "e_max": 0.96,
        "g_max": 17.0,
        "m_range": (0.0, 0.78),
        "p_range": (0.0, 0.58),
        "individual_learning": True,
        "il_rate": 0.24,
    },
    # sample 112 of the same design, rounded: claims a (punishment) and c1 hold at seeds 0, 1 and 2.
    # The defaults of CPRParams since issue 14 (docs/cpr.md says why this one; pinned here so that a
    # later change of the defaults does not move it; a test checks that they are equal today)
    "calibrated-punishment": {
        "K": 1000.0,
        "R0": 1000.0,
        "R_min": 71.0,
        "alpha": 0.082,
        "c": 3.1,
        "P0": 38.0,
        "gamma": 7.2,
        "delta": 0.86,
        "sigma": 0.096,
        "learn_prob": 0.62,
        "ema": 0.78,
        "e_min": 0.082,
        "g_min": 0.13,
        "e_max": 0.98,
        "g_max": 18.0,
        "m_range": (0.0, 0.42),
        "p_range": (0.0, 0.55),
        "individual_learning": True,
        "il_rate": 0.43,
    },
}


def preset_values(name: str) -> dict[str, Any]:
    """The parameter values of the preset ``name`` (a copy; merge CLI choices over it)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return dict(PRESETS[name])


#: a run's settings beside the society's parameters: the environment and ablation the parameters
#: came from, who the agents are, how many societies, and the preset if one was used
RUN_SETTINGS = ("env", "ablation", "population", "replicates", "invader", "preset")  # config.json's order


def invader_kinds(agents: str | None) -> tuple[str, ...]:
    """Rule-based societies take the rule-based invaders; LLM societies those too (the seat is played by
    the rule, never asked: tasks/cpr/llm.py) and an invader of another model."""
    return ("greedy", "defector", "free-rider", "model") if agents == "llm" else ("greedy", "defector", "free-rider")


class CPRSettings(CPRParams):
    """Every setting of a CPR run (config.json's ``params``): the society's parameters
    (:class:`CPRParams`) and, beside them, the environment and ablation they came from, the
    population, the number of societies and the preset, if one was used (``cooplab run cpr``'s
    ``--env``, ``--ablation``, ``--population``, ``--replicates``, ``--preset``)."""

    env: Literal["harsh", "rich"] | None = _f("harsh", "environment the growth rate r came from (--env)", "paper §4.1")
    ablation: Literal["full", "osl", "ogd", "neither"] | None = _f(
        "full", "ablation the two alignment switches came from (--ablation)", "paper §4.2.5"
    )
    population: Literal["altruistic", "selfish", "mixed"] = _f(
        "mixed", "who the agents are: altruistic, selfish or half and half", "paper §4.1 (c)"
    )
    replicates: Annotated[int, RULES["replicates"]] = _f(
        1, "independent societies run side by side (the CLI's default: 100 rule-based, 1 LLM)", "cooplab"
    )
    preset: StrictStr | None = _f(
        None, "the named parameter set the values started from (--preset; none: the defaults)", "cooplab"
    )
    invader: Invader | None = _f(
        None,
        "an agent replaced at round K by an invader (--invader KIND@K[:AGENT]; tasks/cpr/invaders.py; "
        "none: no invader)",
        "cooplab",
    )

    @model_validator(mode="before")
    @classmethod
    def _stored_v1(cls, data: Any, info: Any) -> Any:
        """A stored run written before individual learning existed ran the v1 model: it resumes as such."""
        if isinstance(data, dict) and (info.context or {}).get("stored") and "individual_learning" not in data:
            return {**data, "individual_learning": False}
        return data

    @model_validator(mode="after")
    def _fits(self, info: Any) -> "CPRSettings":
        from cooplab.graphs.invaders import check_in
        from cooplab.limits import ConfigError, check_size, cross

        try:
            check_size(self.replicates, self.N, self.T, names=("<replicates>", "<N>", "<T>"))
        except ConfigError as exc:
            raise cross(("replicates", "N", "T"), str(exc)) from None
        agents = (info.context or {}).get("agents")
        check_in(self.invader, n_agents=self.N, rounds=self.T, agents=agents, kinds=invader_kinds(agents))
        return self

    @model_serializer(mode="wrap")
    def _in_order(self, handler: Any) -> dict[str, Any]:
        """config.json's order: the run's settings first (no preset when none was used), then the parameters."""
        out = handler(self)
        run = {k: out[k] for k in RUN_SETTINGS if k in out and not (k in ("preset", "invader") and out[k] is None)}
        return {**run, **{k: v for k, v in out.items() if k not in RUN_SETTINGS}}

    @property
    def n_agents(self) -> int:
        return self.N

    @property
    def model_params(self) -> CPRParams:
        """The society's parameters alone (without the run's settings)."""
        return CPRParams.model_construct(**{k: getattr(self, k) for k in CPRParams.model_fields})


class InitialRange(BaseModel):
    model_config = ConfigDict(defer_build=True)

    e: tuple[float, float]
    g: tuple[float, float]


def population_ranges(params: CPRParams, population: str) -> list[InitialRange]:
    """Per-agent initial ranges. Altruists draw effort and cap from the lower half of the
    general range, selfish agents from the upper half (paper §4.1 (c): 'defined by their
    harvest thresholds', 'all in the initial range of a general agent'); ``mixed`` is half
    and half (the first N//2 agents altruistic)."""
    mid_e, mid_g = (params.e_min + params.e_max) / 2, (params.g_min + params.g_max) / 2
    lo_e, hi_e = (params.e_min, mid_e), (mid_e, params.e_max)
    lo_g, hi_g = (params.g_min, mid_g), (mid_g, params.g_max)
    alt, sel = InitialRange(e=lo_e, g=lo_g), InitialRange(e=hi_e, g=hi_g)
    if population == "altruistic":
        return [alt] * params.N
    if population == "selfish":
        return [sel] * params.N
    if population == "mixed":
        return [alt] * (params.N // 2) + [sel] * (params.N - params.N // 2)
    if population == "general":
        return [InitialRange(e=(params.e_min, params.e_max), g=(params.g_min, params.g_max))] * params.N
    raise ValueError(f"unknown population {population!r}; choose altruistic, selfish, mixed or general")


def agent_types(N: int, population: str) -> list[str]:
    """altruistic / selfish label of each agent (mixed: the first N//2 are altruists)."""
    if population in ("altruistic", "selfish"):
        return [population] * N
    if population == "mixed":
        return ["altruistic"] * (N // 2) + ["selfish"] * (N - N // 2)
    raise ValueError(f"population {population!r} has no LLM belief types; choose altruistic, selfish or mixed")


class ParamError(ValueError):
    """A user-facing, one-line parameter error."""


def parse_set(items: Sequence[str] | None) -> dict[str, Any]:
    """Parse ``--set name=value`` items into a dict with values parsed as JSON where possible."""
    import json

    out: dict[str, Any] = {}
    known = CPRParams.model_fields
    for item in items or []:
        if "=" not in item:
            raise ParamError(f"--set expects name=value, got {item!r}")
        name, raw = item.split("=", 1)
        name = name.strip()
        if name not in known:
            raise ParamError(f"unknown parameter {name!r} in --set; run 'cooplab params cpr' to list them")
        raw = raw.strip()
        if raw.lower() in ("none", "null", ""):
            value: Any = None
        elif raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        else:
            try:
                value = json.loads(raw if not raw.startswith("(") else "[" + raw[1:-1] + "]")
            except json.JSONDecodeError:
                value = raw
        out[name] = value
    return out


def make_params(**values: Any) -> CPRParams:
    """Build validated parameters; a bad value is one readable line (:class:`ParamError`)."""
    from cooplab.limits import explain

    try:
        return CPRParams(**values)
    except ValidationError as exc:
        raise ParamError(explain(exc)) from None


def params_table() -> list[dict[str, Any]]:
    """Rows of (name, default, meaning, source) for docs and ``cooplab params``."""
    rows = []
    for name, f in CPRParams.model_fields.items():
        default = f.default
        if isinstance(default, float) and math.isfinite(default):
            default = default
        rows.append(
            {
                "name": name,
                "default": default,
                "meaning": f.description,
                "source": (f.json_schema_extra or {}).get("source", ""),
            }
        )
    return rows
