"""The phase nodes of the CPR society (Gupta et al. 2025, §3.1): harvest, punish, environment,
adapt (individual learning), learn, propose, vote.

Each factory takes a policy (a rule from :mod:`cooplab.tasks.cpr.rules`, or an LLM policy) and returns a LangGraph
node ``state -> update``. Nodes own the bookkeeping that every policy shares: a seeded
generator per (round, phase), masking of dead agents, and the per-society switches
(punishment off from a given round, group norm on or off).

Nodes compute on the state's running block (:mod:`cooplab.tasks.cpr.state`): the societies
still running when the last round ended, dropped from the arrays by the ``environment`` node as
they finish. Their generator (:func:`phase_generator`) draws every per-society random array for
the whole batch (same shapes, same order) and hands back the block's rows, so a run gives exactly
the numbers it gave when finished societies were computed and masked. Societies of the block that
are not running (those that finished this round, and every finished society of a state that
keeps the whole batch: LLM runs, states written before the block) are masked by ``active``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cooplab.agents.rule_based import count_rows, row_sum
from cooplab.graphs.nodes import PolicyResult, is_async_policy, llm_node, running_agents, where
from cooplab.graphs.rng import RowSubsetGenerator, phase_rng
from cooplab.tasks.cpr import model
from cooplab.tasks.cpr import rules as rb
from cooplab.tasks.cpr import state as block

__all__ = [
    "PolicyResult",
    "adapt_node",
    "environment_node",
    "harvest_node",
    "individual_learning_enabled",
    "is_async_policy",
    "learn_node",
    "llm_node",
    "phase_generator",
    "propose_node",
    "punish_node",
    "punishment_enabled",
    "round_record",
    "running_agents",
    "threshold",
    "vote_node",
]

State = Mapping[str, Any]


def phase_generator(state: State, phase: str) -> Any:
    """The generator of ``phase`` in this round for the societies of the block: per-society arrays
    are drawn for the whole batch and the block's rows handed back (the plain generator when the
    block is the whole batch)."""
    rng = phase_rng(state["seed"], state["round"], phase)
    return rng if block.is_whole(state) else RowSubsetGenerator(rng, state["rows"], block.n_societies(state))


def harvest_node(effort_policy: Callable = rb.capped_effort) -> Callable[..., Any]:
    def apply(state: State, effort_raw: np.ndarray) -> dict:
        run = running_agents(state)
        effort = np.clip(effort_raw, 0.0, 1.0)  # a new array: NaN (no answer) becomes 0 in place
        np.nan_to_num(effort, copy=False, nan=0.0)
        effort = where(run, effort, 0.0)
        h = model.ration(model.harvest(state["params"]["alpha"], effort, state["R"]), state["R"])
        R_plus = model.post_harvest_stock(state["R"], h)
        if not state["active"].all():  # finished societies keep their stock
            R_plus = np.where(state["active"], R_plus, state["R_plus"])
        return {"effort": effort, "h": h, "R_plus": R_plus}

    if is_async_policy(effort_policy):
        return llm_node("harvest", effort_policy, apply)

    def harvest(state: State) -> dict:
        return apply(state, effort_policy(state, phase_generator(state, "harvest")))

    return harvest


def punishment_enabled(state: State) -> np.ndarray:
    """(S,) whether punishment is in force this round: on, and before ``punish_off_round``."""
    P = state["params"]
    return P["punishment"].astype(bool) & (state["round"] < P["punish_off_round"]) & state["active"]


def threshold(state: State) -> np.ndarray:
    """(S, N) violation threshold per inspector: the group norm G where one is in force,
    else the inspector's own personal normative belief g_i (no shared norm: OSL, Neither)."""
    gd = state["params"]["group_decision"].astype(bool) & np.isfinite(state["G"])
    return np.where(gd[:, None], state["G"][:, None], state["g"])


def punish_node(policy: Callable = rb.sample_inspect_punish) -> Callable[..., Any]:
    """B, V, I (inspected someone) and tau_V (the norm a fined agent violated, +inf if not fined)
    for individual learning. A policy that does not report I or tau_V (the LLM punish policy)
    gets 0 and +inf."""

    def apply(state: State, out: dict) -> dict:
        on = punishment_enabled(state)
        shape = state["alive"].shape
        I = out.get("I", np.zeros(shape, dtype=np.int8))  # noqa: E741 (the paper's name)
        tau_V = out.get("tau_V", np.full(shape, np.inf))
        if on.all():  # in force everywhere: nothing to mask (the same numbers, no copies)
            return {
                "B": np.asarray(out["B"]).astype(np.int8, copy=False),
                "V": np.asarray(out["V"]).astype(np.int8, copy=False),
                "I": np.asarray(I).astype(np.int8, copy=False),
                "tau_V": np.asarray(tau_V).astype(float, copy=False),
                "n_inspections": np.asarray(out["n_inspections"]),
                "n_violations": np.asarray(out["n_violations"]),
            }
        return {
            "B": np.where(on[:, None], out["B"], 0).astype(np.int8),
            "V": np.where(on[:, None], out["V"], 0).astype(np.int8),
            "I": np.where(on[:, None], I, 0).astype(np.int8),
            "tau_V": np.where(on[:, None], tau_V, np.inf).astype(float),
            "n_inspections": np.where(on, out["n_inspections"], 0),
            "n_violations": np.where(on, out["n_violations"], 0),
        }

    if is_async_policy(policy):
        return llm_node("punish", policy, apply)

    def punish(state: State) -> dict:
        return apply(state, policy(state, threshold(state), phase_generator(state, "punish")))

    return punish


def environment_node(end_on_starvation: bool = True, *, compact: bool = True) -> Callable[[State], dict]:
    """Consumption and payoffs, starvation, logistic regrowth, metrics, and the round record; then
    the societies that finished leave the running block (``compact``; never in a state holding LLM
    agents' texts), and in the round in which the last of them finishes the batch is put back
    together (:mod:`cooplab.tasks.cpr.state`)."""

    def environment(state: State) -> dict:
        P = state["params"]
        t = int(state["round"])
        active = state["active"]
        run = running_agents(state)
        h = state["h"]
        B = state["B"] if "B" in state else np.zeros_like(h, dtype=np.int8)
        V = state["V"] if "V" in state else np.zeros_like(h, dtype=np.int8)
        payoff = where(run, model.round_payoff(h, P["c"], P["gamma"], P["beta"], B, V), 0.0)
        wealth = state["P"] + payoff
        starved = run & (wealth < 0)
        alive = state["alive"] & ~starved
        P_bar = where(run, model.smoothed_payoff(state["P_bar"], payoff, P["ema"]), state["P_bar"])
        died = count_rows(starved) > 0 if end_on_starvation else count_rows(alive) == 0
        n_alive_run = count_rows(run)
        R_next = model.logistic_regrowth(state["R_plus"], P["r"], P["K"])
        H = row_sum(h)  # the harvest node leaves finished societies' catches at 0
        eta_t = model.efficiency_t(H, P["r"], P["K"])
        depleted = state["R_plus"] <= P["R_min"]
        collapsed = active & (depleted | died)
        T_s = np.where(collapsed, t, state["T_s"])
        collapse = np.where(collapsed, np.where(depleted, 1, 2), state["collapse"])
        still = active & ~collapsed
        capped = still & (t >= P["T"])
        T_s = np.where(capped, t, T_s)
        if active.all():
            eta_sum = state["eta_sum"] + eta_t
        else:  # finished societies keep their stock and their sum
            R_next = np.where(active, R_next, state["R"])
            eta_sum = state["eta_sum"] + np.where(active, eta_t, 0.0)
        record = round_record(state, t, H, eta_t, alive, wealth, V, run, n_alive_run)
        memory = {}
        if "h_recent" in state:  # LLM agents see their last few rounds: shift in this round's outcomes
            for key, now in (("h_recent", h), ("effort_recent", state["effort"]), ("V_recent", V.astype(float))):
                old = state[key]
                memory[key] = np.where(run[..., None], np.concatenate([now[..., None], old[..., :-1]], axis=2), old)
        update = {
            **memory,
            "payoff": payoff,
            "P": where(run, wealth, state["P"]),
            "P_bar": P_bar,
            "alive": alive,
            "R": R_next,
            "T_s": T_s,
            "collapse": collapse,
            "eta_sum": eta_sum,
            "active": still & ~capped,
            "round": t + 1,
            "history": [record],
        }
        return {**update, **_regroup(state, update, compact)}

    return environment


def _regroup(state: State, update: dict, compact: bool) -> dict:
    """The block after the environment step: the societies that finished leave it (their final
    values go to ``finished``); once none runs, the whole batch is put back together."""
    going_on = update["active"]
    none_left = {"ended": None} if state.get("ended") is not None else {}
    if going_on.all():
        return none_left
    S = block.n_societies(state)
    values = {**state, **update}
    rows = state.get("rows")
    if rows is None:  # a state written before the block existed: the whole batch
        rows = np.arange(S)
    if not going_on.any():  # the last round: every array over the whole batch again
        if len(rows) == S:
            return none_left
        return {**block.whole_batch({**values, "rows": rows}, list(state.get("finished") or []), S), **none_left}
    if not compact or not block.compactable(state):
        return none_left
    keep, gone = np.flatnonzero(going_on), np.flatnonzero(~going_on)
    return {
        **block.take_block(values, keep),
        "rows": rows[keep],
        "n_societies": S,
        "finished": [block.finished_entry(values, gone, rows)],
        "ended": block.ended(values, gone, rows),
    }


def _count(x: np.ndarray, most: int, *, sure: bool = False) -> np.ndarray:
    """Counts of agents (0 to ``most``) in the smallest integer type that holds them: a record is
    kept in the checkpoints, and readers widen its integers to int64 (``metrics.full_history``).
    Unless ``sure``, values outside that range (or not integers) are kept as they are."""
    x = np.asarray(x)
    if x.dtype.kind not in "iu" or (not sure and x.size and (x.min() < 0 or x.max() > most)):
        return x
    return x.astype(np.int8 if most <= 127 else np.int16 if most <= 32767 else np.int32)


def round_record(
    state: State,
    t: int,
    H: np.ndarray,
    eta_t: np.ndarray,
    alive: np.ndarray,
    wealth: np.ndarray,
    V: np.ndarray,
    run: np.ndarray,
    n_alive_run: np.ndarray,
) -> dict:
    """The environment's record of round ``t`` (an entry of ``history``) for the societies running
    at its start: their batch indices (``rows``), the stock, norm and activity at the start of
    the round, the catch and its efficiency, and per society counts and means over the living
    agents (NaN means where nobody lives). Batch indices and counts are stored in the smallest
    integer type that holds them; readers widen them."""
    active = state["active"]
    N = alive.shape[1]
    rows = state.get("rows")
    if rows is None:
        rows = np.arange(len(active))
    if active.all():

        def at(x: np.ndarray) -> np.ndarray:
            return x
    else:  # a state that keeps finished societies: record the running ones
        idx = np.flatnonzero(active)
        rows, run, n_alive_run = rows[idx], run[idx], n_alive_run[idx]

        def at(x: np.ndarray) -> np.ndarray:
            return np.take(x, idx, axis=0)

    with np.errstate(invalid="ignore", divide="ignore"):
        n_or_1 = np.maximum(n_alive_run, 1)
        some_alive = n_alive_run > 0
        run_all = run.all()  # then x * run is x

        def mean_alive(x: np.ndarray) -> np.ndarray:  # the sums are those of (x * run).sum(axis=1), faster
            if x.dtype == np.bool_:
                total = count_rows(x if run_all else x & run)
            else:
                total = row_sum(np.ascontiguousarray(x) if run_all else x * run)
            return np.where(some_alive, total / n_or_1, np.nan)

        h, G = at(state["h"]), at(state["G"])
        gd = at(state["params"]["group_decision"]).astype(bool) & np.isfinite(G)
        if gd.all():  # a group norm everywhere: the threshold of every inspector (the same numbers, no (n, N) array)
            complied = h <= (G + 1e-12)[:, None]
        else:
            complied = h <= np.where(gd[:, None], G[:, None], at(state["g"])) + 1e-12

        def counts(key: str) -> np.ndarray:  # of the punish node (zeros without one)
            return _count(at(state[key]) if key in state else np.zeros_like(at(H)), N)

        return {
            "round": t,
            "rows": rows.astype(np.int32) if len(rows) and rows[-1] < 2**31 else rows,
            "R": at(state["R"]),
            "R_plus": at(state["R_plus"]),
            "H": at(H),
            "eta_t": at(eta_t),
            "G": G,
            "n_alive": _count(count_rows(at(alive)), N, sure=True),
            "mean_effort": mean_alive(at(state["effort"])),
            "mean_e": mean_alive(at(state["e"])),
            "mean_g": mean_alive(at(state["g"])),
            "mean_m": mean_alive(at(state["m"])),
            "mean_P": mean_alive(at(wealth)),
            "n_inspections": counts("n_inspections"),
            "n_violations": counts("n_violations"),
            "n_punished": _count(count_rows(at(V)), N, sure=True),
            "compliance": mean_alive(complied),
        }


def individual_learning_enabled(state: State) -> np.ndarray:
    """(S,) whether individual learning runs in a society: switched on, a positive rate, running."""
    P = state["params"]
    return P["individual_learning"].astype(bool) & (P["il_rate"] > 0) & state["active"]


def adapt_node(rule: Callable = rb.individual_learning) -> Callable[[State], dict]:
    """Individual learning (``adapt``): after the environment step (which leaves this round's
    payoffs, and B, V, I, tau_V from the punish node, in the state) and before social learning.
    Deterministic (no random draws, so no other phase's stream moves). Only the living agents of
    running societies where individual learning is on change; a society with
    ``individual_learning`` off or ``il_rate`` 0 keeps its traits exactly."""
    keys = ("e", "m", "p", "g")

    def adapt(state: State) -> dict:
        on = individual_learning_enabled(state)
        if not on.any():
            return {}
        out = rule(state)
        keep = running_agents(state)
        if not on.all():
            keep = keep & on[:, None]
        return {k: where(keep, out[k], state[k]) for k in keys}

    return adapt


def learn_node(rule: Callable = rb.payoff_biased_imitation) -> Callable[[State], dict]:
    """Social learning; societies whose ``social_learning`` is off keep their traits (a batch may
    mix them: the rule still draws for every society, so the others' numbers do not change)."""

    def learn(state: State) -> dict:
        if not state["active"].any():
            return {}
        out = rule(state, phase_generator(state, "learn"))
        run = running_agents(state)
        social = state["params"]["social_learning"].astype(bool)
        if not social.all():
            run = run & social[:, None]
        return {k: where(run, out[k], state[k]) for k in ("e", "m", "g")}

    return learn


def propose_node(policy: Callable = rb.propose_own_cap) -> Callable[..., Any]:
    """Rule policies return numeric proposals; LLM policies return texts (in ``updates``)."""
    if is_async_policy(policy):
        return llm_node("propose", policy)

    def propose(state: State) -> dict:
        if not state["active"].any():
            return {"proposals": np.full(state["alive"].shape, np.nan)}
        return {"proposals": where(running_agents(state), policy(state, phase_generator(state, "propose")), np.nan)}

    return propose


def vote_node(rule: Callable = rb.median_vote) -> Callable[..., Any]:
    if is_async_policy(rule):
        return llm_node("vote", rule)

    def vote(state: State) -> dict:
        if not state["active"].any():
            return {}
        G_new = rule(state["proposals"], running_agents(state), phase_generator(state, "vote"))
        gd = state["params"]["group_decision"].astype(bool)
        return {"G": np.where(state["active"] & gd & np.isfinite(G_new), G_new, state["G"])}

    return vote
