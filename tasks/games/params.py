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

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

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

MAX_GROUP = 1_000  #: players per group
MAX_GROUPS = 100  #: groups per game
MAX_ROUNDS = 10_000  #: rounds per simulation (every round is checkpointed)
MAX_SIMULATIONS = 100_000  #: simulations per run
MAX_CELLS = 10_000_000  #: simulations x players, and simulations x rounds (memory)
MAX_SANCTION_CELLS = 100_000_000  #: simulations x players^2 x rounds of a CPR-with-sanctioning run (memory)
MAX_TOKENS = 1_000_000  #: any token amount (endowments, pools, thresholds)
MAX_FACTOR = 1e6  #: any multiplier, weight, cost or reward

PAPER = "paper §3.1.1"


def _f(default: Any, description: str, source: str = PAPER, **kw: Any) -> Any:
    return Field(default, description=description, json_schema_extra={"source": source}, **kw)


GroupSize = Annotated[int, Field(ge=2, le=MAX_GROUP)]


class GameParams(BaseModel):
    """What every game has: the groups, the rounds, the simulations."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    GAME: ClassVar[str] = ""
    #: the name of the primary metric (§3.1.3) and the action it averages
    METRIC: ClassVar[str] = ""

    group_sizes: list[GroupSize] = Field(default_factory=lambda: [5, 5], min_length=1, max_length=MAX_GROUPS,
                                         description="players per group, group by group (--group-size K: K players in each of 2 groups)",
                                         json_schema_extra={"source": "paper §3.1 (2 groups of 5); Table 4 sweeps"})
    rounds: int = _f(3, "rounds per simulation", "paper §3.1 (3 rounds)", ge=1, le=MAX_ROUNDS)
    simulations: int = _f(50, "simulations run side by side", "paper §3.1 (50 simulations)", ge=1, le=MAX_SIMULATIONS)
    near_pareto: float = _f(0.2, "a simulation is near-Pareto when its Pareto proximity is at most this", "paper App. G (within 20%)",
                            ge=0.0, le=1.0)

    @property
    def n_players(self) -> int:
        return sum(self.group_sizes)

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
    max_effort: int = _f(10, "largest effort e_i (efforts are 0..max_effort)", ge=1, le=MAX_TOKENS)
    min_weight: float = _f(2.0, "weight of the global minimum effort in the payoff", ge=0.0, le=MAX_FACTOR)
    effort_cost: float = _f(1.0, "cost of one unit of one's own effort", ge=0.0, le=MAX_FACTOR)

    def check_game(self) -> None:
        if not self.min_weight > self.effort_cost > 0:
            raise ValueError(f"min_weight ({self.min_weight:g}) must exceed effort_cost ({self.effort_cost:g}) > 0: otherwise high effort "
                             "never pays and the game has no coordination problem")


class CPRParams(GameParams):
    """u_i = x_i + multiplier * max(0, capacity - sum_j x_j) / N, x_i in {0..max_extract} (Ostrom 1990)."""

    GAME = "cpr"
    METRIC = "extraction"
    capacity: int = _f(100, "tokens in the shared pool C (refilled every round)", ge=1, le=MAX_TOKENS)
    max_extract: int = _f(10, "largest extraction x_i (extractions are 0..max_extract)", ge=1, le=MAX_TOKENS)
    multiplier: float = _f(3.0, "the pool left after extraction is multiplied by this and split among all N players", ge=0.0, le=MAX_FACTOR)

    def check_game(self) -> None:
        N = self.n_players
        if not 1 < self.multiplier < N:
            raise ValueError(f"multiplier ({self.multiplier:g}) must be above 1 and below the number of players N = {N}: otherwise "
                             "restraint is not efficient (<= 1) or extraction is not individually tempting (>= N)")
        if self.multiplier * self.capacity < N * self.max_extract:
            raise ValueError(f"multiplier x capacity ({self.multiplier * self.capacity:g}) must be at least N x max_extract "
                             f"({N * self.max_extract}): otherwise emptying the pool is the social optimum")


class CPRSanctionParams(CPRParams):
    """The CPR round, then sanctions within one's own group: u_i = u_i^CPR - sanction_cost * sum_j s_ij
    - sanction_damage * sum_j s_ji (Casari and Plott 2003; Fehr and Gächter 2000)."""

    GAME = "cpr-sanction"
    sanction_cost: float = _f(1.0, "cost to the sanctioner of one sanction token", ge=0.0, le=MAX_FACTOR)
    sanction_damage: float = _f(2.0, "payoff a sanctioned player loses per token received", ge=0.0, le=MAX_FACTOR)
    max_sanction: int = _f(10, "sanction tokens a player may spend per round, over all targets", "ours (the paper states no cap)",
                           ge=0, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _sanction_size(self) -> "CPRSanctionParams":
        cells = self.simulations * self.n_players ** 2 * self.rounds
        if cells > MAX_SANCTION_CELLS:
            raise ValueError(f"simulations x players^2 x rounds must be at most {MAX_SANCTION_CELLS:,} (memory: the sanction matrices), "
                             f"got {cells:,}")
        return self

    def check_game(self) -> None:
        super().check_game()
        if self.sanction_cost <= 0:
            raise ValueError(f"sanction_cost ({self.sanction_cost:g}) must be above 0: a free sanction is no dilemma of enforcement")


class CollectiveRiskParams(GameParams):
    """R rounds of contributions c_i in {0..endowment} from a per-round endowment; if sum over players
    and rounds reaches threshold, all keep their savings, else all lose them with loss_probability
    (Milinski et al. 2008)."""

    GAME = "collective-risk"
    METRIC = "contribution"
    rounds: int = _f(10, "rounds R of one game (contributions add up over them)", "paper §3.1.1 (R = 10)", ge=1, le=MAX_ROUNDS)
    endowment: int = _f(10, "tokens each player receives per round (contributions are 0..endowment)", ge=1, le=MAX_TOKENS)
    threshold: int = _f(100, "total contributions T (all players, all rounds) that avert the loss", ge=1, le=MAX_TOKENS)
    loss_probability: float = _f(0.5, "probability that everyone loses all savings when the threshold is missed", ge=0.0, le=1.0)
    pareto_reference: float | None = _f(None, "the Pareto value of the metric (contribution per round) that proximity is measured "
                                        "from; null: the fair share threshold / (N x rounds), 1.0 at the defaults (the paper "
                                        "writes about 1.25, the fair share of 8 players)", "ours (paper §3.1.1: T/(N R) ~ 1.25)",
                                        gt=0.0, le=MAX_TOKENS)

    def check_game(self) -> None:
        if self.pareto_reference is not None and self.pareto_reference > self.endowment:
            raise ValueError(f"pareto_reference ({self.pareto_reference:g}) must be at most the endowment ({self.endowment}): a "
                             "contribution per round cannot exceed it")
        N, R, E, T, p = self.n_players, self.rounds, self.endowment, self.threshold, self.loss_probability
        if T > p * N * R * E:
            raise ValueError(f"threshold ({T}) must be at most loss_probability x N x rounds x endowment ({p * N * R * E:g}): otherwise "
                             "meeting it costs more than the expected loss and free-riding is the social optimum")
        if T < p * R * E:
            raise ValueError(f"threshold ({T}) must be at least loss_probability x rounds x endowment ({p * R * E:g}): otherwise one "
                             "player prefers to meet it alone and free-riding is no equilibrium")


class ORingParams(GameParams):
    """w_i in {0..max_withdraw} from a pool shared by everyone; q_i = w_i / max_withdraw;
    P_g = scale * (pool - sum w) / pool * prod_{i in g} q_i; success iff min_g P_g >= success_threshold;
    u_i = reward / N * 1[success] - withdraw_cost * w_i (Kremer 1993)."""

    GAME = "o-ring"
    METRIC = "withdrawal"
    pool: int = _f(200, "units in the pool shared by all players (refilled every round)", ge=1, le=MAX_TOKENS)
    max_withdraw: int = _f(10, "largest withdrawal w_i; quality q_i = w_i / max_withdraw", ge=1, le=MAX_TOKENS)
    scale: float = _f(1000.0, "production scale: P_g = scale x (pool remaining / pool) x product of the group's qualities",
                      gt=0.0, le=MAX_FACTOR)
    success_threshold: float = _f(50.0, "every group's production must reach this for the system to succeed", gt=0.0, le=MAX_FACTOR)
    reward: float = _f(200.0, "reward split equally among all N players when the system succeeds", ge=0.0, le=MAX_FACTOR)
    withdraw_cost: float = _f(1.0, "cost of one unit withdrawn", gt=0.0, le=MAX_FACTOR)
    pareto_reference: float | None = _f(None, "the Pareto value of the metric (withdrawal per player) that proximity is measured "
                                        "from; null: the cheapest successful withdrawal t*/N, 6 at the defaults (the paper "
                                        "says only 'High')", "ours (paper Table 3: High)", gt=0.0, le=MAX_TOKENS)

    def check_game(self) -> None:
        from cooplab.tasks.games.equilibria import oring_min_total

        if self.pareto_reference is not None and self.pareto_reference > self.max_withdraw:
            raise ValueError(f"pareto_reference ({self.pareto_reference:g}) must be at most max_withdraw ({self.max_withdraw}): a "
                             "withdrawal cannot exceed it")

        if self.n_players * self.max_withdraw > 10 * MAX_TOKENS:
            raise ValueError("N x max_withdraw must be at most 10,000,000")
        t = oring_min_total(self)
        if t is None:
            raise ValueError(f"no withdrawals reach success_threshold ({self.success_threshold:g}) in every group with groups "
                             f"{self.group_sizes}, pool {self.pool} and scale {self.scale:g} (Table 4 sweeps O-Ring over 3, 5, 8 per group)")
        if self.reward <= self.withdraw_cost * t:
            raise ValueError(f"reward ({self.reward:g}) must exceed the cheapest success's cost ({self.withdraw_cost * t:g}): "
                             "otherwise failing is the social optimum")


class PublicGoodsParams(GameParams):
    """Endowment split into keep k_i, group pool g_i (x group_multiplier, split in the group) and global
    pool n_i (x global_multiplier, split among all N); k + g + n = endowment (Isaac and Walker 1988)."""

    GAME = "public-goods"
    METRIC = "group_pool"
    endowment: int = _f(10, "tokens each player splits into keep, group pool and global pool", ge=1, le=MAX_TOKENS)
    group_multiplier: float = _f(2.0, "the group pool is multiplied by this and split equally within the group", ge=0.0, le=MAX_FACTOR)
    global_multiplier: float = _f(1.5, "the global pool is multiplied by this and split equally among all N players", ge=0.0, le=MAX_FACTOR)

    def check_game(self) -> None:
        small = min(self.group_sizes)
        if not self.group_multiplier > max(1.0, self.global_multiplier):
            raise ValueError(f"group_multiplier ({self.group_multiplier:g}) must exceed 1 and global_multiplier "
                             f"({self.global_multiplier:g}): the group pool is the socially best channel (paper: 2.0 > 1.5 > 1)")
        if self.group_multiplier >= small:
            raise ValueError(f"group_multiplier ({self.group_multiplier:g}) must be below the smallest group's size ({small}): "
                             "otherwise giving to the group pool pays for itself and keeping is no equilibrium")
        if self.global_multiplier >= self.n_players:
            raise ValueError(f"global_multiplier ({self.global_multiplier:g}) must be below N = {self.n_players}")


MODELS: dict[str, type[GameParams]] = {m.GAME: m for m in (WeakestLinkParams, CPRParams, CPRSanctionParams, CollectiveRiskParams,
                                                           ORingParams, PublicGoodsParams)}


def model_of(game: str) -> type[GameParams]:
    if game not in MODELS:
        raise ValueError(f"game must be one of {', '.join(GAMES)}, got {game!r}")
    return MODELS[game]


def table4_params(game: str, **overrides: Any) -> list[GameParams]:
    """The parameters of each point of ``game``'s group-size sweep (Appendix Table 4: two groups of
    each size), other fields from ``overrides`` or the defaults."""
    return [model_of(game)(**{**overrides, "group_sizes": [k, k]}) for k in TABLE4[game]]
