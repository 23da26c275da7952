"""The phase nodes of the CPR society (Gupta et al. 2025, §3.1): harvest, punish, environment,
adapt (individual learning), learn, propose, vote.

Each factory takes a policy (a rule from :mod:`cooplab.tasks.cpr.rules`, or an LLM policy) and returns a LangGraph
node ``state -> update``. Nodes own the bookkeeping that every policy shares: a seeded
generator per (round, phase), masking of dead agents, and the per-society switches
(punishment off from a given round, group norm on or off).

Rule nodes compute only the societies still running: once some have finished, the policy sees
a :class:`~cooplab.graphs.nodes.SocietyRows` view of the running societies and a
:class:`~cooplab.graphs.rng.RowSubsetGenerator` that draws every per-society random array
for the whole batch (same shapes, same order) and hands back the running rows, so a run gives
exactly the numbers it gave when finished societies were computed and masked; the results are
scattered back into the full ``(S, ...)`` arrays, finished societies keeping their values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cooplab.graphs.nodes import (
    PolicyResult,
    SocietyRows,
    is_async_policy,
    llm_node,
    running_agents,
    running_societies,
    scatter,
    where,
)
from cooplab.agents.rule_based import count_rows, row_sum
from cooplab.graphs.rng import RowSubsetGenerator, phase_rng
from cooplab.tasks.cpr import rules as rb
from cooplab.tasks.cpr import model

__all__ = ["PolicyResult", "adapt_node", "environment_node", "harvest_node", "individual_learning_enabled", "is_async_policy",
           "learn_node", "llm_node", "propose_node", "punish_node", "punishment_enabled", "round_record", "running_agents", "threshold",
           "vote_node"]

State = Mapping[str, Any]


def harvest_node(effort_policy: Callable = rb.capped_effort) -> Callable[..., Any]:
    def apply(state: State, effort_raw: np.ndarray) -> dict:
        run = running_agents(state)
        effort = where(run, np.clip(np.nan_to_num(effort_raw, nan=0.0), 0.0, 1.0), 0.0)
        h = model.ration(model.harvest(state["params"]["alpha"], effort, state["R"]), state["R"])
        R_plus = np.where(state["active"], model.post_harvest_stock(state["R"], h), state["R_plus"])
        return {"effort": effort, "h": h, "R_plus": R_plus}

    if is_async_policy(effort_policy):
        return llm_node("harvest", effort_policy, apply)

    def harvest(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], "harvest")
        live = running_societies(state)
        if live is None:
            return apply(state, effort_policy(state, rng))
        sub = SocietyRows(state, live)
        part = apply(sub, effort_policy(sub, RowSubsetGenerator(rng, live, len(state["active"]))))
        shape = state["alive"].shape  # finished societies exert no effort, catch nothing
        return {"effort": scatter(np.zeros(shape), live, part["effort"], copy=False),
                "h": scatter(np.zeros(shape), live, part["h"], copy=False),
                "R_plus": scatter(state["R_plus"], live, part["R_plus"])}

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


#: what the punish node writes where punishment is off or the society has finished
PUNISH_FILL = {"B": 0, "V": 0, "I": 0, "tau_V": np.inf, "n_inspections": 0, "n_violations": 0}


def punish_node(policy: Callable = rb.sample_inspect_punish) -> Callable[..., Any]:
    """B, V, I (inspected someone) and tau_V (the norm a fined agent violated, +inf if not fined)
    for individual learning. A policy that does not report I or tau_V (the LLM punish policy)
    gets 0 and +inf."""

    def apply(state: State, out: dict) -> dict:
        on = punishment_enabled(state)
        shape = state["alive"].shape
        I = out.get("I", np.zeros(shape, dtype=np.int8))
        tau_V = out.get("tau_V", np.full(shape, np.inf))
        counts = {"n_inspections": np.where(on, out["n_inspections"], 0), "n_violations": np.where(on, out["n_violations"], 0)}
        if on.all():  # in force everywhere: nothing to mask (the same numbers, no copies)
            return {"B": np.asarray(out["B"]).astype(np.int8, copy=False), "V": np.asarray(out["V"]).astype(np.int8, copy=False),
                    "I": np.asarray(I).astype(np.int8, copy=False), "tau_V": np.asarray(tau_V).astype(float, copy=False), **counts}
        return {
            "B": np.where(on[:, None], out["B"], 0).astype(np.int8),
            "V": np.where(on[:, None], out["V"], 0).astype(np.int8),
            "I": np.where(on[:, None], I, 0).astype(np.int8),
            "tau_V": np.where(on[:, None], tau_V, np.inf).astype(float),
            **counts,
        }

    if is_async_policy(policy):
        return llm_node("punish", policy, apply)

    def punish(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], "punish")
        live = running_societies(state)
        if live is None:
            return apply(state, policy(state, threshold(state), rng))
        sub = SocietyRows(state, live)
        part = apply(sub, policy(sub, threshold(sub), RowSubsetGenerator(rng, live, len(state["active"]))))
        S = len(state["active"])
        return {k: scatter(np.full((S, *v.shape[1:]), PUNISH_FILL[k], dtype=v.dtype), live, v, copy=False) for k, v in part.items()}

    return punish


def environment_node(end_on_starvation: bool = True) -> Callable[[State], dict]:
    """Consumption and payoffs, starvation, logistic regrowth, metrics, and the round record."""

    def environment(state: State) -> dict:
        P = state["params"]
        t = int(state["round"])
        active = state["active"]
        S = len(active)
        live = running_societies(state)
        # per-agent work on the running societies only (v: a view of them, or the whole state)
        v = state if live is None else SocietyRows(state, live)

        def full(part: np.ndarray, fill: Any) -> np.ndarray:  # finished societies get ``fill``
            if live is None:
                return part
            return scatter(np.full((S, *part.shape[1:]), fill, dtype=part.dtype), live, part, copy=False)

        def kept(key: str, part: np.ndarray) -> np.ndarray:  # finished societies keep state[key]
            return part if live is None else scatter(state[key], live, part)

        Pv = v["params"]
        run = running_agents(v)
        h = v["h"]
        B = v.get("B", np.zeros_like(h, dtype=np.int8))
        V = v.get("V", np.zeros_like(h, dtype=np.int8))
        payoff = where(run, model.round_payoff(h, Pv["c"], Pv["gamma"], Pv["beta"], B, V), 0.0)
        wealth = v["P"] + payoff
        starved = run & (wealth < 0)
        alive_v = v["alive"] & ~starved
        P_bar = where(run, model.smoothed_payoff(v["P_bar"], payoff, Pv["ema"]), v["P_bar"])
        died_v = count_rows(starved) > 0 if end_on_starvation else count_rows(alive_v) == 0
        n_alive_run = count_rows(run)
        # per-society bookkeeping on the whole batch (cheap (S,) arrays)
        R_next = np.where(active, model.logistic_regrowth(state["R_plus"], P["r"], P["K"]), state["R"])
        H = full(row_sum(h), 0.0)  # the harvest node leaves finished societies' catches at 0
        eta_t = model.efficiency_t(H, P["r"], P["K"])
        depleted = state["R_plus"] <= P["R_min"]
        died = full(died_v, False)
        collapsed = active & (depleted | died)
        T_s = np.where(collapsed, t, state["T_s"])
        collapse = np.where(collapsed, np.where(depleted, 1, 2), state["collapse"])
        still = active & ~collapsed
        capped = still & (t >= P["T"])
        T_s = np.where(capped, t, T_s)
        eta_sum = state["eta_sum"] + np.where(active, eta_t, 0.0)
        record = round_record(state, v, full, t, H, eta_t, alive_v, wealth, V, run, n_alive_run)
        memory = {}
        if "h_recent" in state:  # LLM agents see their last few rounds: shift in this round's outcomes
            for key, now in (("h_recent", h), ("effort_recent", v["effort"]), ("V_recent", V.astype(float))):
                old = v[key]
                memory[key] = kept(key, np.where(run[..., None], np.concatenate([now[..., None], old[..., :-1]], axis=2), old))
        return {
            **memory,
            "payoff": full(payoff, 0.0),
            "P": kept("P", where(run, wealth, v["P"])),
            "P_bar": kept("P_bar", P_bar),
            "alive": kept("alive", alive_v),
            "R": R_next,
            "T_s": T_s,
            "collapse": collapse,
            "eta_sum": eta_sum,
            "active": still & ~capped,
            "round": t + 1,
            "history": [record],
        }

    return environment


def round_record(state: State, v: State, full: Callable[[np.ndarray, Any], np.ndarray], t: int, H: np.ndarray,
                 eta_t: np.ndarray, alive_v: np.ndarray, wealth: np.ndarray, V: np.ndarray, run: np.ndarray,
                 n_alive_run: np.ndarray) -> dict:
    """The environment's record of round ``t`` (the ``history``): the stock, norm and activity at
    the start of the round, the catch and its efficiency, and per society counts and means over
    the living agents of the running societies (``v``: their rows; ``full`` spreads a per-society
    array of them over the batch with a fill for the others; NaN means where nobody lives)."""
    active = state["active"]
    with np.errstate(invalid="ignore", divide="ignore"):
        n_or_1 = np.maximum(n_alive_run, 1)
        some_alive = n_alive_run > 0
        run_all = run.all()  # then x * run is x

        def mean_alive(x: np.ndarray) -> np.ndarray:  # the sums are those of (x * run).sum(axis=1), faster
            if x.dtype == np.bool_:
                total = count_rows(x if run_all else x & run)
            else:
                total = row_sum(np.ascontiguousarray(x) if run_all else x * run)
            return full(np.where(some_alive, total / n_or_1, np.nan), np.nan)

        return {
            "round": t,
            "active": active.copy(),
            "R": state["R"].copy(),
            "R_plus": state["R_plus"].copy(),
            "H": H,
            "eta_t": eta_t,
            "G": state["G"].copy(),
            "n_alive": full(count_rows(alive_v), 0) * active,
            "mean_effort": mean_alive(v["effort"]),
            "mean_e": mean_alive(v["e"]),
            "mean_g": mean_alive(v["g"]),
            "mean_m": mean_alive(v["m"]),
            "mean_P": mean_alive(wealth),
            "n_inspections": state.get("n_inspections", np.zeros_like(H)) * active,
            "n_violations": state.get("n_violations", np.zeros_like(H)) * active,
            "n_punished": full(count_rows(V), 0) * active,
            "compliance": mean_alive(v["h"] <= threshold(v) + 1e-12),
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
        live = running_societies(state)
        if live is None:  # every society runs: the whole batch, masked
            out = rule(state)
            keep = running_agents(state) & on[:, None]
            return {k: where(keep, out[k], state[k]) for k in keys}
        rows = np.flatnonzero(on)
        if len(rows) == len(live):  # on <= active: the running societies (share the rows gathered for them)
            rows = live
        sub = SocietyRows(state, rows)
        out = rule(sub)
        run = running_agents(sub)
        return {k: scatter(state[k], rows, where(run, out[k], sub[k])) for k in keys}

    return adapt


def learn_node(rule: Callable = rb.payoff_biased_imitation) -> Callable[[State], dict]:
    """Social learning; societies whose ``social_learning`` is off keep their traits (a batch may
    mix them: the rule still draws for every society, so the others' numbers do not change)."""

    def learners(s: State) -> np.ndarray:
        return running_agents(s) & s["params"]["social_learning"].astype(bool)[:, None]

    def learn(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], "learn")
        live = running_societies(state)
        if live is None:
            out = rule(state, rng)
            run = learners(state)
            return {k: where(run, out[k], state[k]) for k in ("e", "m", "g")}
        if not live.size:
            return {}
        sub = SocietyRows(state, live)
        out = rule(sub, RowSubsetGenerator(rng, live, len(state["active"])))
        run = learners(sub)
        return {k: scatter(state[k], live, where(run, out[k], sub[k])) for k in ("e", "m", "g")}

    return learn


def propose_node(policy: Callable = rb.propose_own_cap) -> Callable[..., Any]:
    """Rule policies return numeric proposals; LLM policies return texts (in ``updates``)."""
    if is_async_policy(policy):
        return llm_node("propose", policy)

    def propose(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], "propose")
        live = running_societies(state)
        if live is None:
            return {"proposals": where(running_agents(state), policy(state, rng), np.nan)}
        sub = SocietyRows(state, live)
        part = where(running_agents(sub), policy(sub, RowSubsetGenerator(rng, live, len(state["active"]))), np.nan)
        return {"proposals": scatter(np.full(state["alive"].shape, np.nan), live, part, copy=False)}

    return propose


def vote_node(rule: Callable = rb.median_vote) -> Callable[..., Any]:
    if is_async_policy(rule):
        return llm_node("vote", rule)

    def vote(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], "vote")
        live = running_societies(state)
        if live is None:
            G_new = rule(state["proposals"], running_agents(state), rng)
            gd = state["params"]["group_decision"].astype(bool)
            return {"G": np.where(state["active"] & gd & np.isfinite(G_new), G_new, state["G"])}
        sub = SocietyRows(state, live)
        G_new = rule(sub["proposals"], running_agents(sub), RowSubsetGenerator(rng, live, len(state["active"])))
        gd = sub["params"]["group_decision"].astype(bool)
        return {"G": scatter(state["G"], live, np.where(gd & np.isfinite(G_new), G_new, sub["G"]))}

    return vote
