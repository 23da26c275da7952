"""The parameters of the six behavioral games (paper §3.1.1 and Appendix B): one pydantic model
per game, every constant a field with the paper's value as its default.

Common to every game: ``group_sizes`` (default two groups of five, §3.1), ``rounds`` (3; Collective
Risk: its R = 10 rounds), ``simulations`` (50) and ``near_pareto`` (0.2: "within 20% of Pareto",
Appendix G). Players are numbered group by group: with ``group_sizes = [5, 5]`` players 0..4 are
group 0 and 5..9 group 1.

Each model also checks that its constants keep the game the dilemma the paper describes, i.e.
that the Nash and Pareto references derived in :mod:`cooplab.tasks.games.equilibria` hold (for
instance, CPR needs 1 < multiplier < N: otherwise restraint is either not efficient or not a
dilemma). A value that breaks this is refused with one line naming the fields.

Group sizes: the paper's prompts name inconsistent member counts (4, 5, 8, "7 other
participants"); here the configured sizes are always the ones used. :data:`TABLE4` holds the
group-size sweep of Appendix Table 4 for each game (both groups of the same size), and
:func:`table4_params` the parameters of every point of a game's sweep.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, model_validator

from cooplab.graphs.invaders import Invader, InvaderWhenSet
from cooplab.limits import MAX_FACTOR, MAX_GROUP, MAX_GROUPS, MAX_SIMULATIONS, MAX_TOKENS, RULES  # noqa: F401 - the games' caps

GAMES = ("weakest-link", "cpr", "cpr-sanction", "collective-risk", "o-ring", "public-goods")
#: LLM players' prompt conditions (Appendix B): standard, alternate wording, chain of thought, theory of mind
PROMPTS = ("standard", "alternate", "cot", "tom")

#: Appendix Table 4: the group sizes (agents per group, two groups of equal size) of each game's sweep
TABLE4: dict[str, tuple[int, ...]] = {
    "weakest-link": (3, 5, 8, 10),
    "collective-risk": (3, 5, 8, 10),
    "o-ring": (3, 5, 8),
    "public-goods": (3, 4, 5, 8, 10),
    "cpr": (3, 5, 8, 10),
    "cpr-sanction": (5,),
}

MAX_ROUNDS = 10_000  #: rounds per simulation (every round is checkpointed)
MAX_CELLS = 10_000_000  #: simulations x players, and simulations x rounds (memory)
MAX_SANCTION_CELLS = 100_000_000  #: simulations x players^2 x rounds of a CPR-with-sanctioning run (memory)

PAPER = "paper §3.1.1"


def _f(default: Any, description: str, source: str = PAPER, **kw: Any) -> Any:
    return Field(default, description=description, json_schema_extra={"source": source}, **kw)


GroupSize = Annotated[int, RULES["group-size"]]
#: the games' number types: every bound from the caps table (cooplab/limits.py, RULES)
Tokens = Annotated[int, RULES["tokens"]]
SomeTokens = Annotated[int, RULES["tokens"].within(1)]
Factor = Annotated[float, RULES["factor"]]
PositiveFactor = Annotated[float, RULES["factor"].within(0, lo_open=True)]
Probability = Annotated[float, RULES["share"]]
Reference = Annotated[float | None, RULES["factor"].within(0, lo_open=True, optional=True)]


class GameParams(BaseModel):
    """What every game has: the groups, the rounds, the simulations."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    GAME: ClassVar[str] = ""
    #: the name of the primary metric (§3.1.3) and the action it averages
    METRIC: ClassVar[str] = ""

    group_sizes: list[GroupSize] = Field(
        default_factory=lambda: [5, 5],
        min_length=1,
        max_length=MAX_GROUPS,
        description="players per group, group by group (--group-size K: K players in each of 2 groups)",
        json_schema_extra={"source": "paper §3.1 (2 groups of 5); Table 4 sweeps"},
    )
    rounds: Annotated[int, RULES["rounds"]] = _f(3, "rounds per simulation", "paper §3.1 (3 rounds)")
    simulations: Annotated[int, RULES["simulations"]] = _f(
        50, "simulations run side by side", "paper §3.1 (50 simulations)"
    )
    near_pareto: Probability = _f(
        0.2, "a simulation is near-Pareto when its Pareto proximity is at most this", "paper App. G (within 20%)"
    )

    @property
    def n_players(self) -> int:
        return sum(self.group_sizes)

    @property
    def n_agents(self) -> int:
        return self.n_players

    @model_validator(mode="after")
    def _sizes(self) -> "GameParams":
        S, N, R = self.simulations, self.n_players, self.rounds
        if S * N > MAX_CELLS:
            raise ValueError(f"simulations x players must be at most {MAX_CELLS:,} (memory), got {S} x {N}")
        if S * R > MAX_CELLS:
            raise ValueError(f"simulations x rounds must be at most {MAX_CELLS:,} (memory), got {S} x {R}")
        self.check_game()
        return self

    def check_game(self) -> None:
        """Raise ValueError (one line, naming the fields) if the constants break the game's structure."""


class WeakestLinkParams(GameParams):
    """u_i = min_weight * min_j e_j - effort_cost * e_i, e_i in {0..max_effort} (Van Huyck et al. 1990)."""

    GAME = "weakest-link"
    METRIC = "effort"
    max_effort: SomeTokens = _f(10, "largest effort e_i (efforts are 0..max_effort)")
    min_weight: Factor = _f(2.0, "weight of the global minimum effort in the payoff")
    effort_cost: Factor = _f(1.0, "cost of one unit of one's own effort")

    def check_game(self) -> None:
        if not self.min_weight > self.effort_cost > 0:
            raise ValueError(
                f"min_weight ({self.min_weight:g}) must exceed effort_cost ({self.effort_cost:g}) > 0: otherwise high "
                "effort "
                "never pays and the game has no coordination problem"
            )


class CPRParams(GameParams):
    """u_i = x_i + multiplier * max(0, capacity - sum_j x_j) / N, x_i in {0..max_extract} (Ostrom 1990)."""

    GAME = "cpr"
    METRIC = "extraction"
    capacity: SomeTokens = _f(100, "tokens in the shared pool C (refilled every round)")
    max_extract: SomeTokens = _f(10, "largest extraction x_i (extractions are 0..max_extract)")
    multiplier: Factor = _f(3.0, "the pool left after extraction is multiplied by this and split among all N players")

    def check_game(self) -> None:
        N = self.n_players
        if not 1 < self.multiplier < N:
            raise ValueError(
                f"multiplier ({self.multiplier:g}) must be above 1 and below the number of players N = {N}: otherwise "
                "restraint is not efficient (<= 1) or extraction is not individually tempting (>= N)"
            )
        if self.multiplier * self.capacity < N * self.max_extract:
            raise ValueError(
                f"multiplier x capacity ({self.multiplier * self.capacity:g}) must be at least N x max_extract "
                f"({N * self.max_extract}): otherwise emptying the pool is the social optimum"
            )


class CPRSanctionParams(CPRParams):
    """The CPR round, then sanctions within one's own group: u_i = u_i^CPR - sanction_cost * sum_j s_ij
    - sanction_damage * sum_j s_ji (Casari and Plott 2003; Fehr and Gächter 2000)."""

    GAME = "cpr-sanction"
    sanction_cost: Factor = _f(1.0, "cost to the sanctioner of one sanction token")
    sanction_damage: Factor = _f(2.0, "payoff a sanctioned player loses per token received")
    max_sanction: Tokens = _f(
        10, "sanction tokens a player may spend per round, over all targets", "ours (the paper states no cap)"
    )

    @model_validator(mode="after")
    def _sanction_size(self) -> "CPRSanctionParams":
        cells = self.simulations * self.n_players**2 * self.rounds
        if cells > MAX_SANCTION_CELLS:
            raise ValueError(
                f"simulations x players^2 x rounds must be at most {MAX_SANCTION_CELLS:,} (memory: the sanction "
                "matrices), "
                f"got {cells:,}"
            )
        return self

    def check_game(self) -> None:
        super().check_game()
        if self.sanction_cost <= 0:
            raise ValueError(
                f"sanction_cost ({self.sanction_cost:g}) must be above 0: a free sanction is no dilemma of enforcement"
            )


class CollectiveRiskParams(GameParams):
    """R rounds of contributions c_i in {0..endowment} from a per-round endowment; if sum over players
    and rounds reaches threshold, all keep their savings, else all lose them with loss_probability
    (Milinski et al. 2008)."""

    GAME = "collective-risk"
    METRIC = "contribution"
    rounds: Annotated[int, RULES["rounds"]] = _f(
        10, "rounds R of one game (contributions add up over them)", "paper §3.1.1 (R = 10)"
    )
    endowment: SomeTokens = _f(10, "tokens each player receives per round (contributions are 0..endowment)")
    threshold: SomeTokens = _f(100, "total contributions T (all players, all rounds) that avert the loss")
    loss_probability: Probability = _f(0.5, "probability that everyone loses all savings when the threshold is missed")
    pareto_reference: Reference = _f(
        None,
        "the Pareto value of the metric (contribution per round) that proximity is measured "
        "from; null: the fair share threshold / (N x rounds), 1.0 at the defaults (the paper "
        "writes about 1.25, the fair share of 8 players)",
        "ours (paper §3.1.1: T/(N R) ~ 1.25)",
    )

    def check_game(self) -> None:
        if self.pareto_reference is not None and self.pareto_reference > self.endowment:
            raise ValueError(
                f"pareto_reference ({self.pareto_reference:g}) must be at most the endowment ({self.endowment}): a "
                "contribution per round cannot exceed it"
            )
        N, R, E, T, p = self.n_players, self.rounds, self.endowment, self.threshold, self.loss_probability
        if T > p * N * R * E:
            raise ValueError(
                f"threshold ({T}) must be at most loss_probability x N x rounds x endowment ({p * N * R * E:g}): "
                "otherwise "
                "meeting it costs more than the expected loss and free-riding is the social optimum"
            )
        if T < p * R * E:
            raise ValueError(
                f"threshold ({T}) must be at least loss_probability x rounds x endowment ({p * R * E:g}): otherwise "
                "one "
                "player prefers to meet it alone and free-riding is no equilibrium"
            )


class ORingParams(GameParams):
    """w_i in {0..max_withdraw} from a pool shared by everyone; q_i = w_i / max_withdraw;
    P_g = scale * (pool - sum w) / pool * prod_{i in g} q_i; success iff min_g P_g >= success_threshold;
    u_i = reward / N * 1[success] - withdraw_cost * w_i (Kremer 1993)."""

    GAME = "o-ring"
    METRIC = "withdrawal"
    pool: SomeTokens = _f(200, "units in the pool shared by all players (refilled every round)")
    max_withdraw: SomeTokens = _f(10, "largest withdrawal w_i; quality q_i = w_i / max_withdraw")
    scale: PositiveFactor = _f(
        1000.0, "production scale: P_g = scale x (pool remaining / pool) x product of the group's qualities"
    )
    success_threshold: PositiveFactor = _f(50.0, "every group's production must reach this for the system to succeed")
    reward: Factor = _f(200.0, "reward split equally among all N players when the system succeeds")
    withdraw_cost: PositiveFactor = _f(1.0, "cost of one unit withdrawn")
    pareto_reference: Reference = _f(
        None,
        "the Pareto value of the metric (withdrawal per player) that proximity is measured "
        "from; null: the cheapest successful withdrawal t*/N, 6 at the defaults (the paper "
        "says only 'High')",
        "ours (paper Table 3: High)",
    )

    def check_game(self) -> None:
        from cooplab.tasks.games.equilibria import oring_min_total

        if self.pareto_reference is not None and self.pareto_reference > self.max_withdraw:
            raise ValueError(
                f"pareto_reference ({self.pareto_reference:g}) must be at most max_withdraw ({self.max_withdraw}): a "
                "withdrawal cannot exceed it"
            )

        if self.n_players * self.max_withdraw > 10 * MAX_TOKENS:
            raise ValueError("N x max_withdraw must be at most 10,000,000")
        t = oring_min_total(self)
        if t is None:
            raise ValueError(
                f"no withdrawals reach success_threshold ({self.success_threshold:g}) in every group with groups "
                f"{self.group_sizes}, pool {self.pool} and scale {self.scale:g} (Table 4 sweeps O-Ring over 3, 5, 8 "
                "per group)"
            )
        if self.reward <= self.withdraw_cost * t:
            raise ValueError(
                f"reward ({self.reward:g}) must exceed the cheapest success's cost ({self.withdraw_cost * t:g}): "
                "otherwise failing is the social optimum"
            )


class PublicGoodsParams(GameParams):
    """Endowment split into keep k_i, group pool g_i (x group_multiplier, split in the group) and global
    pool n_i (x global_multiplier, split among all N); k + g + n = endowment (Isaac and Walker 1988)."""

    GAME = "public-goods"
    METRIC = "group_pool"
    endowment: SomeTokens = _f(10, "tokens each player splits into keep, group pool and global pool")
    group_multiplier: Factor = _f(2.0, "the group pool is multiplied by this and split equally within the group")
    global_multiplier: Factor = _f(1.5, "the global pool is multiplied by this and split equally among all N players")

    def check_game(self) -> None:
        small = min(self.group_sizes)
        if not self.group_multiplier > max(1.0, self.global_multiplier):
            raise ValueError(
                f"group_multiplier ({self.group_multiplier:g}) must exceed 1 and global_multiplier "
                f"({self.global_multiplier:g}): the group pool is the socially best channel (paper: 2.0 > 1.5 > 1)"
            )
        if self.group_multiplier >= small:
            raise ValueError(
                f"group_multiplier ({self.group_multiplier:g}) must be below the smallest group's size ({small}): "
                "otherwise giving to the group pool pays for itself and keeping is no equilibrium"
            )
        if self.global_multiplier >= self.n_players:
            raise ValueError(f"global_multiplier ({self.global_multiplier:g}) must be below N = {self.n_players}")


MODELS: dict[str, type[GameParams]] = {
    m.GAME: m
    for m in (WeakestLinkParams, CPRParams, CPRSanctionParams, CollectiveRiskParams, ORingParams, PublicGoodsParams)
}


def model_of(game: str) -> type[GameParams]:
    if game not in MODELS:
        raise ValueError(f"game must be one of {', '.join(GAMES)}, got {game!r}")
    return MODELS[game]


#: the run's settings beside the game's parameters (config.json's ``params``)
RUN_SETTINGS = ("game", "players", "script", "script_file", "prompt", "deliberation", "invader")
#: who plays: LLM players (exactly when the run's agents are llm) or reference players
PLAYERS = ("llm", "nash", "pareto", "random", "scripted")


def invader_kinds(llm_players: bool) -> tuple[str, ...]:
    """Reference players take the rule-based invaders; LLM players those too (the seat is then played
    by the rule, not asked) and an invader of another model."""
    return ("greedy", "defector", "free-rider", "model") if llm_players else ("greedy", "defector", "free-rider")


class GameRun(InvaderWhenSet):
    """What a game run sets beside the game's parameters: which game, who plays, LLM players'
    prompt and deliberation, scripted players' script (validated, so the run resumes without the
    file) and the file it came from."""

    game: Literal["weakest-link", "cpr", "cpr-sanction", "collective-risk", "o-ring", "public-goods"] = Field(
        "weakest-link", description="the game (--game)", json_schema_extra={"source": PAPER}
    )
    players: Literal["llm", "nash", "pareto", "random", "scripted"] = Field(
        "nash",
        description="who plays: llm (exactly when the run's agents are llm), nash, pareto, random or scripted "
        "(--players)",
        json_schema_extra={"source": "paper §3.1.2 (the reference players are ours)"},
    )
    script: dict[str, Any] | None = Field(
        None,
        description="scripted players' script, validated (null unless players is scripted)",
        json_schema_extra={"source": "cooplab"},
    )
    script_file: StrictStr | None = Field(
        None, description="the file the script came from", json_schema_extra={"source": "cooplab"}
    )
    prompt: Literal["standard", "alternate", "cot", "tom"] = Field(
        "standard",
        description="LLM players' prompt condition (--prompt)",
        json_schema_extra={"source": "paper Appendix B"},
    )
    deliberation: StrictBool = Field(
        False,
        description="LLM players exchange one message within their group before each decision",
        json_schema_extra={"source": "paper §3.1.2"},
    )
    invader: Invader | None = Field(
        None,
        description="a player replaced at round K by an invader (--invader KIND@K[:AGENT]; "
        "tasks/games/invaders.py; none: no invader)",
        json_schema_extra={"source": "cooplab"},
    )

    @model_validator(mode="before")
    @classmethod
    def _players_of_agents(cls, data: Any, info: Any) -> Any:
        """Players default to the kind of agents: llm for LLM agents, nash for rule-based ones."""
        agents = (info.context or {}).get("agents")
        if isinstance(data, dict) and "players" not in data and agents is not None:
            return {**data, "players": "llm" if agents == "llm" else "nash"}
        return data

    @model_validator(mode="after")
    def _who_plays(self, info: Any) -> "GameRun":
        from cooplab.limits import cross
        from cooplab.tasks.games import players as pl

        agents = (info.context or {}).get("agents")
        if agents is not None and (self.players == "llm") != (agents == "llm"):
            raise ValueError(
                f"agents is {agents!r} but players is {self.players!r}: players is llm exactly when agents is llm"
            )
        if self.players != "llm" and (self.prompt != "standard" or self.deliberation):
            raise cross(("prompt", "deliberation"), "<prompt> and <deliberation> apply to <players> llm only")
        if self.players == "scripted":
            try:
                pl.check_script(self.script, self, where="script")
            except pl.ScriptError as exc:
                raise ValueError(str(exc)) from None
        elif self.script is not None:
            raise ValueError(f"script must be null unless players is scripted, got {type(self.script).__name__}")
        if self.invader is not None and isinstance(self, GameParams):  # a game's settings: seat and round in range
            from cooplab.graphs.invaders import check_in

            check_in(
                self.invader,
                n_agents=self.n_players,
                rounds=self.rounds,
                agents="llm" if self.players == "llm" else "rule",
                kinds=invader_kinds(self.players == "llm"),
            )
        return self


def _settings(model: type[GameParams]) -> type[GameParams]:
    """The settings of a run of ``model``'s game: the run's (:class:`GameRun`) and the game's parameters."""
    return type(
        f"{model.__name__.removesuffix('Params')}GameSettings",
        (model, GameRun),
        {
            "__annotations__": {"game": Literal[model.GAME]},
            "game": Field(model.GAME, description="the game (--game)", json_schema_extra={"source": PAPER}),
            "__module__": __name__,
            "__doc__": f"Every setting of a run of {model.GAME}: :class:`GameRun` and :class:`{model.__name__}`.",
        },
    )


#: game -> the settings of a run of it (config.json's ``params``)
SETTINGS: dict[str, type[GameParams]] = {game: _settings(model) for game, model in MODELS.items()}
globals().update({m.__name__: m for m in SETTINGS.values()})  # importable by name (pickling, docs)


class GameSettings(GameRun):
    """Every setting of a game run: validating it (``GameSettings.model_validate(raw)``) returns the
    settings of the game ``raw`` names (:data:`SETTINGS`), default weakest-link."""

    variants: ClassVar[dict[str, type[GameParams]]] = SETTINGS
    variant_key: ClassVar[str] = "game"

    @model_validator(mode="wrap")
    @classmethod
    def _by_game(cls, data: Any, handler: Any, info: Any) -> Any:
        if cls is GameSettings:
            game = data.get("game", "weakest-link") if isinstance(data, dict) else getattr(data, "game", None)
            if game in SETTINGS:
                return SETTINGS[game].model_validate(
                    data.model_dump() if isinstance(data, BaseModel) else data, context=info.context
                )
        return handler(data)


def table4_params(game: str, **overrides: Any) -> list[GameParams]:
    """The parameters of each point of ``game``'s group-size sweep (Appendix Table 4: two groups of
    each size), other fields from ``overrides`` or the defaults."""
    return [model_of(game)(**{**overrides, "group_sizes": [k, k]}) for k in TABLE4[game]]
