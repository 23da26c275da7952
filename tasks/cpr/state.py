"""State schema of the CPR society graph, and the running block.

A CPR society batch holds ``S`` societies of ``N`` agents side by side (replicates and, for
sweeps, conditions), so one graph invocation advances all of them at once.

**The running block.** While a run goes on, every per-society array of the state (shape
``(n,)``, per agent ``(n, N)``, the parameter arrays in ``params`` too) holds only the ``n``
societies that were still running when the last round ended: ``rows`` gives their indices in the
batch (sorted), ``n_societies`` is ``S``. At the end of each round the ``environment`` node drops
the societies that finished from the block and appends their final values to ``finished`` (an
append-only log, one entry per round in which some finished); ``ended`` holds their agents'
arrays as that round left them (their last round, for viewers of a checkpoint; None after a
round in which none left). A node therefore computes only on
running societies, with no gathering or scattering of rows, and every array it reads lines up
with every other. In the round in which the last societies finish, the environment node puts
the batch back together, so the state the graph returns has every array over all ``S``
societies (``rows`` then lists them all), exactly as if no society had ever been dropped:
finished societies keep their final traits, wealth, stock, norm, survival time, and hold the
fill values of :data:`ROUND_FILL` in the fields of one round. :func:`full_state` does the same for
any state (a checkpoint's, an interrupted run's). A state without ``rows`` (written before the
block existed) holds the whole batch, finished societies masked by ``active``; a state holding
LLM agents' texts is never compacted (its lists are indexed by society).

Random draws do not depend on the block: each per-society array is drawn for all ``S``
societies and the block's rows are used (:class:`~cooplab.graphs.rng.RowSubsetGenerator`), so
a run gives the numbers it gave when every society was computed every round.

The per-round ``history`` records hold the societies running at the start of the round (their
batch indices in ``rows``); ``metrics.history_frame`` reads them, ``metrics.full_history``
spreads them over the whole batch. LangGraph's checkpoint serializer stores numpy arrays natively.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np

from cooplab.graphs.state import AppendLog


class CPRState(TypedDict, total=False):
    # bookkeeping
    seed: int  # the run's seed; every draw derives from (seed, round, phase)
    round: int  # current round t (1-based); > max_round once the run is over
    max_round: int  # the largest round cap in the batch
    n_societies: int  # S, the societies of the batch
    rows: np.ndarray  # (n,) batch indices of the societies in the block (see the module docstring)
    params: dict[str, np.ndarray]  # per-society parameter arrays, shape (n,)
    condition: np.ndarray  # (n,) condition index of each society
    replicate: np.ndarray  # (n,) replicate index within its condition
    # resource
    R: np.ndarray  # (n,) stock at the start of the round, R(t)
    R_plus: np.ndarray  # (n,) stock after the harvest, R^+(t)
    # agents
    alive: np.ndarray  # (n, N) bool
    e: np.ndarray  # (n, N) effort trait e_i
    m: np.ndarray  # (n, N) monitoring propensity m_i
    p: np.ndarray  # (n, N) punishment propensity p_i
    g: np.ndarray  # (n, N) personal normative belief g_i (a harvest cap)
    P: np.ndarray  # (n, N) wealth P_i
    P_bar: np.ndarray  # (n, N) smoothed payoff (EMA of per-round payoffs)
    effort: np.ndarray  # (n, N) effort actually exerted this round e_i(t)
    h: np.ndarray  # (n, N) harvest h_i(t)
    B: np.ndarray  # (n, N) 1 if i punished someone this round
    V: np.ndarray  # (n, N) 1 if i was punished this round
    I: np.ndarray  # noqa: E741 (the paper's name) (n, N) int8, 1 if i inspected someone this round (0 where punishment is off; LLM: always 0)
    tau_V: np.ndarray  # (n, N) lowest threshold among the inspectors who fined i this round (+inf: not fined)
    payoff: np.ndarray  # (n, N) this round's payoff pi_i = h_i - c - gamma B_i - beta V_i (0: dead or finished)
    n_inspections: np.ndarray  # (n,) inspections made this round
    n_violations: np.ndarray  # (n,) violations found by inspectors this round
    proposals: np.ndarray  # (n, N) proposed caps g*_i(t+1)
    G: np.ndarray  # (n,) group norm G(t) in force (NaN: no group norm)
    # outcome
    active: np.ndarray  # (n,) bool, False once the society has collapsed or hit its cap
    T_s: np.ndarray  # (n,) survival time (0 while running)
    collapse: np.ndarray  # (n,) 0 running/cap, 1 stock <= R_min, 2 starvation
    eta_sum: np.ndarray  # (n,) running sum of eta(t) over the rounds lived
    history: AppendLog  # one record per round: the societies running at its start (``rows``) and their metrics
    finished: AppendLog  # the final values of the societies dropped from the block, one entry per round
    ended: (
        dict[str, np.ndarray] | None
    )  # the societies that left the block this round (``rows``) and their agents' arrays then
    # LLM agents (absent or empty for rule-based runs; such a state is never compacted)
    h_recent: np.ndarray  # (S, N, K) harvests of the last K rounds, newest first
    effort_recent: np.ndarray  # (S, N, K) efforts of the last K rounds
    V_recent: np.ndarray  # (S, N, K) 1 where the agent was fined
    beliefs: list[list[str]]  # (S x N) personal normative beliefs in words
    beliefs_initial: list[list[str]]  # (S x N) the templates drawn at the start
    proposal_texts: list[list[str | None]]  # (S x N) this round's proposed group norms
    norm_text: list[str | None]  # (S,) the adopted group norm, broadcast verbatim
    agent_types: list[list[str]]  # (S x N) altruistic | selfish
    norm_history: AppendLog  # adopted norm per society and round
    decisions: AppendLog  # one row per decision
    ledger: AppendLog  # the credit ledger's audit trail


#: what a society that finished before the batch's last round holds in the fields of one round
#: (the nodes of the rounds after its end wrote these; its last round's values are not kept)
ROUND_FILL: dict[str, Any] = {
    "effort": 0.0,
    "h": 0.0,
    "B": 0,
    "V": 0,
    "I": 0,
    "tau_V": np.inf,
    "payoff": 0.0,
    "n_inspections": 0,
    "n_violations": 0,
    "proposals": np.nan,
    "active": False,
}
#: the per-society fields a finished society keeps (its final values, in ``finished``)
KEPT = (
    "condition",
    "replicate",
    "R",
    "R_plus",
    "alive",
    "e",
    "m",
    "p",
    "g",
    "P",
    "P_bar",
    "G",
    "T_s",
    "collapse",
    "eta_sum",
)
#: every per-society field of the block (besides ``params``)
BLOCK = KEPT + tuple(ROUND_FILL)
#: fields of LLM agents: a state holding them keeps the whole batch (lists indexed by society)
LLM_FIELDS = (
    "beliefs",
    "beliefs_initial",
    "proposal_texts",
    "norm_text",
    "agent_types",
    "h_recent",
    "effort_recent",
    "V_recent",
)


def n_societies(state: Mapping[str, Any]) -> int:
    """S, the societies of the batch (also for a state written before the block existed)."""
    S = state.get("n_societies")
    return int(S) if S is not None else int(len(state["active"]))


def is_whole(state: Mapping[str, Any]) -> bool:
    """Whether the state's arrays cover the whole batch (no society has been dropped)."""
    rows = state.get("rows")
    return rows is None or len(rows) == n_societies(state)


def compactable(state: Mapping[str, Any]) -> bool:
    """Whether finished societies may be dropped from the state's arrays (no LLM agents' lists)."""
    return not any(k in state for k in LLM_FIELDS)


def take_block(values: Mapping[str, Any], keep: np.ndarray) -> dict[str, Any]:
    """The fields of the block (and ``params``) present in ``values``, at the block rows ``keep``."""
    out: dict[str, Any] = {k: np.take(values[k], keep, axis=0) for k in BLOCK if k in values}
    out["params"] = {k: np.take(v, keep) for k, v in values["params"].items()}
    return out


def ended(values: Mapping[str, Any], gone: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
    """What ``ended`` holds after a round in which the block rows ``gone`` left the block: their
    batch indices (``rows``) and every per-agent array of the block at their rows, as the round
    left them (the last round of these societies, for viewers of the checkpoints)."""
    out = {"rows": rows[gone]}
    out.update((k, np.take(values[k], gone, axis=0)) for k in BLOCK if k in values and np.ndim(values[k]) == 2)
    return out


def finished_entry(values: Mapping[str, Any], gone: np.ndarray, rows: np.ndarray) -> dict[str, Any]:
    """The entry of ``finished`` for the block rows ``gone`` (batch indices ``rows[gone]``): their
    kept fields and parameters, the arrays of one dtype and shape stacked into one (``packed``: a
    list of ``{"names", "data"}``; parameters named ``params.NAME``). Few arrays, not dozens: a
    checkpoint serializes each array on its own, at a cost per array."""
    parts: dict[tuple[str, tuple[int, ...]], list[tuple[str, np.ndarray]]] = {}
    for k, v in [(k, values[k]) for k in KEPT if k in values] + [
        (f"params.{k}", v) for k, v in values["params"].items()
    ]:
        a = np.take(v, gone, axis=0)
        parts.setdefault((a.dtype.str, a.shape[1:]), []).append((k, a))
    return {
        "rows": rows[gone],
        "packed": [
            {"names": [k for k, _ in group], "data": np.stack([a for _, a in group])} for group in parts.values()
        ],
    }


def unpacked(entry: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The fields of an entry of ``finished`` by name (parameters as ``params.NAME``)."""
    return {name: group["data"][i] for group in entry["packed"] for i, name in enumerate(group["names"])}


def whole_batch(values: Mapping[str, Any], finished: list[dict[str, Any]], S: int) -> dict[str, Any]:
    """The fields of the block over the whole batch: the block's rows from ``values`` (with its
    ``rows``), every finished society's final values from ``finished``, the fill values of
    :data:`ROUND_FILL` in their fields of one round."""
    rows = values["rows"]
    done = [(f["rows"], unpacked(f)) for f in finished if len(f["rows"])]
    gone = np.concatenate([r for r, _ in done]) if done else np.zeros(0, dtype=np.int64)
    if len(rows) + len(gone) != S:
        raise ValueError(
            f"the state's running block ({len(rows)} societies) and its finished ones ({len(gone)}) "
            f"do not make up its batch of {S}"
        )
    where = np.argsort(np.concatenate([gone, rows]), kind="stable")  # batch order of [finished..., block...]

    def spread(name: str, block: np.ndarray, fill: Any = None) -> np.ndarray:
        if fill is not None:
            head = np.full((len(gone), *block.shape[1:]), fill, dtype=block.dtype)
        else:
            head = np.concatenate([f[name] for _, f in done]) if done else block[:0]
        return np.take(np.concatenate([head, block]), where, axis=0)

    out: dict[str, Any] = {k: spread(k, values[k], ROUND_FILL.get(k)) for k in BLOCK if k in values}
    out["params"] = {k: spread(f"params.{k}", v) for k, v in values["params"].items()}
    out["rows"] = np.arange(S)
    return out


def full_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """The state with every per-society array over the whole batch (see the module docstring);
    the state itself (as a dict) when it already covers the batch."""
    if is_whole(state):
        return dict(state)
    return {**state, **whole_batch(state, list(state.get("finished") or []), n_societies(state))}
