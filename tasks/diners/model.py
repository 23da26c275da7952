"""The Diner's Dilemma with punishment and metanorms (issue 6), each rule in one place.

Arrays are shaped ``(S, N)`` per agent and ``(S, N, N)`` per ordered pair (``[s, i, j]``: agent
``i`` acts on agent ``j``), where ``S`` is the number of replicate societies run side by side.
Per-society parameters are ``(S,)`` arrays or plain floats.

The game (documented with its inequalities in docs/diners.md)
--------------------------------------------------------------
A group of ``n`` diners splits its bill equally. A budget meal costs ``c_b`` and is worth
``v_b`` to its eater, a premium meal costs ``c_p`` and is worth ``v_p``. An agent's meal
utility is its own meal's value minus the equal share of the group's bill. With the defaults
(``c_b, v_b, c_p, v_p = 4, 6, 12, 10``; ``n = 4``) it is a true n-player Diner's Dilemma:

* defecting pays individually, whatever the others order:
  ``v_p - c_p / n > v_b - c_b / n``  <=>  ``v_p - v_b > (c_p - c_b) / n``   (4 > 2);
* everyone is worse off when all defect than when all cooperate:
  ``v_p - c_p < v_b - c_b``  <=>  ``v_p - v_b < c_p - c_b``   (4 < 8).

Strategies (Boyd & Richerson 1992 as worded in the paper, §3.1)
---------------------------------------------------------------
P  Cooperator-Punisher: always cooperates; punishes every defector of its group.
R1 Reluctant Cooperator: defects until punished, then cooperates for good; never punishes.
E  Easy-going Cooperator: always cooperates; never punishes.
M  Moralist: always cooperates; punishes every defector, every non-punisher, and everyone who
   fails to punish non-punishers (see :func:`metanorm_targets`).
D  Defector: always defects; never punishes (not in the paper's combinations; for experiments).
"""

from __future__ import annotations

import numpy as np

from cooplab.agents.rule_based import col, imitation_probability

Array = np.ndarray

STRATEGIES = ("P", "R1", "E", "M", "D")
CODE = {name: i for i, name in enumerate(STRATEGIES)}
P, R1, E, M, D = (CODE[s] for s in STRATEGIES)
STRATEGY_NAMES = {
    "P": "Cooperator-Punisher",
    "R1": "Reluctant Cooperator",
    "E": "Easy-going Cooperator",
    "M": "Moralist",
    "D": "Defector",
}

# The paper's two initial combinations (§4): groups of four, listed group by group.
COMBINATIONS = {
    1: (("M", "P", "E", "R1"), ("M", "M", "P", "R1")),
    2: (("R1", "R1", "E", "M"), ("R1", "P", "P", "M")),
}
# The three punishment settings: name -> (p, k, stated in the prompts?). "unstated" gives the
# LLM no numbers; its utility bookkeeping (and the rule-based analog) uses p = k = 1: a
# punishment then costs the punished no more than the punisher (our choice, docs/diners.md).
PK_SETTINGS = {"unstated": (1.0, 1.0, False), "3:1": (3.0, 1.0, True), "6:1": (6.0, 1.0, True)}
VENUES = ("pub", "café")
MEAL = {"c_b": 4.0, "v_b": 6.0, "c_p": 12.0, "v_p": 10.0}
# Our free choices for the paper's six conditions (docs/diners.md; `cooplab figures diners --set`,
# mapped by `cooplab calibrate diners`): the menu, the p and k of the "unstated" setting, and the
# memory of the score pi (pi <- memory * pi + u: 1 = accumulated since iteration 1, 0 = the last
# iteration's utility only).
CHOICES = {**MEAL, "unstated_p": PK_SETTINGS["unstated"][0], "unstated_k": PK_SETTINGS["unstated"][1], "memory": 1.0}


MAX_GROUPS = 100  # group numbers are stored as int8


class DinersError(ValueError):
    """A user-facing problem with a composition or a parameter (one line)."""


def parse_groups(text: str) -> tuple[tuple[str, ...], ...]:
    """``"M,P,E,R1;M,M,P,R1"`` -> (("M","P","E","R1"), ("M","M","P","R1")). Case-insensitive."""
    groups = []
    for part in (text or "").split(";"):
        names = tuple(x.strip().upper() for x in part.split(",") if x.strip())
        if not names:
            raise DinersError(
                f"--groups {text!r}: every group needs at least one strategy (groups are separated by ';')"
            )
        bad = [x for x in names if x not in CODE]
        if bad:
            raise DinersError(f"--groups: unknown strategy {bad[0]!r}; use {', '.join(STRATEGIES)}")
        groups.append(names)
    if len(groups) < 1 or any(len(g) < 2 for g in groups):
        raise DinersError(f"--groups {text!r}: every group needs at least two diners")
    from cooplab.limits import MAX_DINERS

    n = sum(len(g) for g in groups)
    if len(groups) > MAX_GROUPS or n > MAX_DINERS:
        raise DinersError(
            f"--groups: at most {MAX_GROUPS} groups and {MAX_DINERS} diners in all, got {len(groups)} groups and {n} "
            "diners"
        )
    return tuple(groups)


def parse_pk(text: str) -> tuple[float, float, bool]:
    """``unstated`` | ``P:K`` (e.g. ``3:1``) -> (p, k, stated)."""
    t = (text or "").strip().lower()
    if t in PK_SETTINGS:
        return PK_SETTINGS[t]
    try:
        a, b = t.split(":")
        p, k = float(a), float(b)
    except ValueError:
        raise DinersError(f"--pk {text!r}: use unstated, 3:1, 6:1 or any P:K with numbers") from None
    from cooplab.limits import MAX_PARAM

    if not (0 <= p <= MAX_PARAM and 0 <= k <= MAX_PARAM):  # also refuses nan and inf
        raise DinersError(f"--pk {text!r}: p and k must be finite numbers in [0, {MAX_PARAM:g}], e.g. 3:1")
    return p, k, True


def parse_choices(items: list[str] | None, group_sizes: tuple[int, ...] = (4,)) -> dict[str, float]:
    """``--set name=value`` (repeatable) -> our free choices (:data:`CHOICES`) to change. The menu
    that results must be a Diner's Dilemma for every group size; ``memory`` is in [0, 1]."""
    from cooplab.limits import MAX_PARAM

    out: dict[str, float] = {}
    for item in items or []:
        name, sep, text = str(item).partition("=")
        name = name.strip()
        if not sep or not name:
            raise DinersError(f"--set {item!r}: use name=value, e.g. --set c_p=16")
        if name not in CHOICES:
            raise DinersError(f"--set {name}: unknown choice; use {', '.join(CHOICES)}")
        try:
            v = float(text)
        except ValueError:
            raise DinersError(f"--set {name}={text}: not a number") from None
        hi = 1.0 if name == "memory" else MAX_PARAM
        if not 0 <= v <= hi:  # also refuses nan and inf
            raise DinersError(f"--set {name}: must be a number in [0, {hi:g}], got {text}")
        out[name] = v
    ch = {**CHOICES, **out}
    for n in group_sizes:
        check_dilemma(ch["c_b"], ch["v_b"], ch["c_p"], ch["v_p"], n)
    return out


def check_dilemma(c_b: float, v_b: float, c_p: float, v_p: float, n: int) -> None:
    """Raise unless the menu makes a true n-player Diner's Dilemma for a group of ``n``."""
    if not (c_p > c_b and v_p > v_b):
        raise DinersError("the premium meal must cost more and be worth more than the budget meal")
    if not v_p - v_b > (c_p - c_b) / n:
        raise DinersError(
            f"defecting must pay individually: need v_p - v_b > (c_p - c_b) / n, got {v_p - v_b} <= {(c_p - c_b) / n}"
        )
    if not v_p - v_b < c_p - c_b:
        raise DinersError(
            f"all-defect must be worse than all-cooperate: need v_p - v_b < c_p - c_b, got {v_p - v_b} >= {c_p - c_b}"
        )


# --- the phases' rules ---------------------------------------------------------------------
def same_group(group: Array) -> Array:
    """(S, N, N) True where i and j eat together (i != j)."""
    N = group.shape[1]
    return (group[:, :, None] == group[:, None, :]) & ~np.eye(N, dtype=bool)[None]


def venue_of_groups(n_groups: int, round_: int) -> Array:
    """Venue index of each group in iteration ``round_`` (1-based): groups rotate through the
    venues every iteration; with two groups the pub and the café swap."""
    return (np.arange(n_groups) + (int(round_) - 1)) % n_groups


def rule_orders(strategy: Array, reformed: Array) -> Array:
    """(S, N) True = defect (premium). D always defects; R1 defects until it has been punished."""
    return (strategy == D) | ((strategy == R1) & ~reformed)


def rule_punish(strategy: Array, defect: Array, same: Array) -> Array:
    """Stage 2: P and M punish every defector of their group (never themselves)."""
    punisher = (strategy == P) | (strategy == M)
    return punisher[:, :, None] & defect[:, None, :] & same


def non_punishers(defect: Array, punish1: Array, same: Array) -> Array:
    """(S, N) first-order non-punishers: agents who left some defector of their group (other
    than themselves) unpunished in stage 2. Nobody is a non-punisher where nobody defected."""
    return np.asarray((same & defect[:, None, :] & ~punish1).any(axis=2))


def metanorm_targets(strategy: Array, defect: Array, punish1: Array, same: Array) -> Array:
    """(S, N) whom a Moralist of the group punishes in stage 3 (the metanorm):

    * non-punishers (:func:`non_punishers`), and
    * those who fail to punish non-punishers: every agent, other than a Moralist, whose group
      holds a non-punisher other than itself. Only Moralists punish non-punishers, and stage 3
      is simultaneous, so whether an agent would punish non-punishers is given by its strategy.

    In the paper's example (group M, P, E, R1 with R1 defecting) E is a non-punisher and P and
    R1 fail to punish E, so the Moralist punishes E, P and R1 in stage 3."""
    np1 = non_punishers(defect, punish1, same)
    fails2 = (strategy != M) & (same & np1[:, None, :]).any(axis=2)
    return np1 | fails2


def rule_metanorm(strategy: Array, defect: Array, punish1: Array, same: Array) -> Array:
    """Stage 3: each Moralist punishes every metanorm target of its group, at most once each."""
    targets = metanorm_targets(strategy, defect, punish1, same)
    return (strategy == M)[:, :, None] & targets[:, None, :] & same


def meal_utility(defect: Array, group: Array, c_b, v_b, c_p, v_p) -> Array:
    """u_i = value of i's meal - (sum of the group's meal costs) / (group size)."""
    cost = np.where(defect, col(c_p), col(c_b))
    value = np.where(defect, col(v_p), col(v_b))
    S, N = group.shape
    share = np.zeros((S, N))
    for g in np.unique(group):
        mask = group == g
        n = mask.sum(axis=1, keepdims=True)
        total = np.where(mask, cost, 0.0).sum(axis=1, keepdims=True)
        share = np.where(mask, total / np.maximum(n, 1), share)
    return value - share


def utility(defect: Array, group: Array, punish1: Array, punish2: Array, params: dict) -> dict[str, Array]:
    """Stage 4: u_i = meal value - bill share - k * (punishments given) - p * (punishments received)."""
    given = punish1.sum(axis=2) + punish2.sum(axis=2)
    received = punish1.sum(axis=1) + punish2.sum(axis=1)
    meal = meal_utility(defect, group, params["c_b"], params["v_b"], params["c_p"], params["v_p"])
    u = meal - col(params["k"]) * given - col(params["p"]) * received
    return {"meal": meal, "given": given, "received": received, "utility": u}


def fermi_update(strategy: Array, score: Array, role: Array, u: Array, beta) -> dict[str, Array]:
    """Stage 5: agent A adopts its role model B's strategy with probability
    1 / (1 + exp(-beta (pi_B - pi_A))) (the paper's Eq. 1: the CPR logit rule, reused).
    Synchronous: everyone compares the scores and strategies held at the start of the stage."""
    has = role >= 0
    rr = np.where(has, role, 0)
    prob = imitation_probability(np.take_along_axis(score, rr, axis=1), score, beta)
    adopt = has & (u < prob)
    new = np.where(adopt, np.take_along_axis(strategy, rr, axis=1), strategy)
    return {"prob": np.where(has, prob, 0.0), "adopt": adopt, "strategy": new}
