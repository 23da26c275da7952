"""The phase nodes of the CPR society (Gupta et al. 2025, §3.1): harvest, punish, environment,
learn, propose, vote.

Each factory takes a policy (a rule from :mod:`cooplab.tasks.cpr.rules`, or an LLM policy) and returns a LangGraph
node ``state -> update``. Nodes own the bookkeeping that every policy shares: a seeded
generator per (round, phase), masking of dead agents and finished societies, and the
per-society switches (punishment off from a given round, group norm on or off).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cooplab.graphs.nodes import PolicyResult, is_async_policy, llm_node, running_agents
from cooplab.graphs.rng import phase_rng
from cooplab.tasks.cpr import rules as rb
from cooplab.tasks.cpr import world

__all__ = ["PolicyResult", "environment_node", "harvest_node", "is_async_policy", "learn_node", "llm_node", "propose_node",
           "punish_node", "punishment_enabled", "running_agents", "threshold", "vote_node"]

State = Mapping[str, Any]


def harvest_node(effort_policy: Callable = rb.capped_effort) -> Callable[..., Any]:
    def apply(state: State, effort_raw: np.ndarray) -> dict:
        run = running_agents(state)
        effort = np.where(run, np.clip(np.nan_to_num(effort_raw, nan=0.0), 0.0, 1.0), 0.0)
        h = world.ration(world.harvest(state["params"]["alpha"], effort, state["R"]), state["R"])
        R_plus = np.where(state["active"], world.post_harvest_stock(state["R"], h), state["R_plus"])
        return {"effort": effort, "h": h, "R_plus": R_plus}

    if is_async_policy(effort_policy):
        return llm_node("harvest", effort_policy, apply)

    def harvest(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], "harvest")
        return apply(state, effort_policy(state, rng))

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
    def apply(state: State, out: dict) -> dict:
        on = punishment_enabled(state)
        return {
            "B": np.where(on[:, None], out["B"], 0).astype(np.int8),
            "V": np.where(on[:, None], out["V"], 0).astype(np.int8),
            "n_inspections": np.where(on, out["n_inspections"], 0),
            "n_violations": np.where(on, out["n_violations"], 0),
        }

    if is_async_policy(policy):
        return llm_node("punish", policy, apply)

    def punish(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], "punish")
        return apply(state, policy(state, threshold(state), rng))

    return punish


def environment_node(end_on_starvation: bool = True) -> Callable[[State], dict]:
    """Consumption and payoffs, starvation, logistic regrowth, metrics, and the round record."""

    def environment(state: State) -> dict:
        P = state["params"]
        t = int(state["round"])
        active = state["active"]
        run = running_agents(state)
        B = state.get("B", np.zeros_like(state["h"], dtype=np.int8))
        V = state.get("V", np.zeros_like(state["h"], dtype=np.int8))
        payoff = np.where(run, world.round_payoff(state["h"], P["c"], P["gamma"], P["beta"], B, V), 0.0)
        wealth = state["P"] + payoff
        starved = run & (wealth < 0)
        alive = state["alive"] & ~starved
        P_bar = np.where(run, world.smoothed_payoff(state["P_bar"], payoff, P["ema"]), state["P_bar"])
        R_next = np.where(active, world.logistic_regrowth(state["R_plus"], P["r"], P["K"]), state["R"])
        H = state["h"].sum(axis=1)
        eta_t = world.efficiency_t(H, P["r"], P["K"])
        depleted = state["R_plus"] <= P["R_min"]
        died = starved.any(axis=1) if end_on_starvation else ~alive.any(axis=1)
        collapsed = active & (depleted | died)
        T_s = np.where(collapsed, t, state["T_s"])
        collapse = np.where(collapsed, np.where(depleted, 1, 2), state["collapse"])
        still = active & ~collapsed
        capped = still & (t >= P["T"])
        T_s = np.where(capped, t, T_s)
        eta_sum = state["eta_sum"] + np.where(active, eta_t, 0.0)
        n_alive_run = run.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            def mean_alive(x: np.ndarray) -> np.ndarray:
                return np.where(n_alive_run > 0, (x * run).sum(axis=1) / np.maximum(n_alive_run, 1), np.nan)

            record = {
                "round": t,
                "active": active.copy(),
                "R": state["R"].copy(),
                "R_plus": state["R_plus"].copy(),
                "H": H,
                "eta_t": eta_t,
                "G": state["G"].copy(),
                "n_alive": alive.sum(axis=1) * active,
                "mean_effort": mean_alive(state["effort"]),
                "mean_e": mean_alive(state["e"]),
                "mean_g": mean_alive(state["g"]),
                "mean_m": mean_alive(state["m"]),
                "mean_P": mean_alive(wealth),
                "n_inspections": state.get("n_inspections", np.zeros_like(H)) * active,
                "n_violations": state.get("n_violations", np.zeros_like(H)) * active,
                "n_punished": V.sum(axis=1) * active,
                "compliance": mean_alive(state["h"] <= threshold(state) + 1e-12),
            }
        memory = {}
        if "h_recent" in state:  # LLM agents see their last few rounds: shift in this round's outcomes
            for key, now in (("h_recent", state["h"]), ("effort_recent", state["effort"]), ("V_recent", V.astype(float))):
                old = state[key]
                memory[key] = np.where(run[..., None], np.concatenate([now[..., None], old[..., :-1]], axis=2), old)
        return {
            **memory,
            "P": np.where(run, wealth, state["P"]),
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

    return environment


def learn_node(rule: Callable = rb.payoff_biased_imitation) -> Callable[[State], dict]:
    def learn(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], "learn")
        out = rule(state, rng)
        run = running_agents(state)
        return {k: np.where(run, out[k], state[k]) for k in ("e", "m", "g")}

    return learn


def propose_node(policy: Callable = rb.propose_own_cap) -> Callable[..., Any]:
    """Rule policies return numeric proposals; LLM policies return texts (in ``updates``)."""
    if is_async_policy(policy):
        return llm_node("propose", policy)

    def propose(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], "propose")
        return {"proposals": np.where(running_agents(state), policy(state, rng), np.nan)}

    return propose


def vote_node(rule: Callable = rb.median_vote) -> Callable[..., Any]:
    if is_async_policy(rule):
        return llm_node("vote", rule)

    def vote(state: State) -> dict:
        rng = phase_rng(state["seed"], state["round"], "vote")
        G_new = rule(state["proposals"], running_agents(state), rng)
        gd = state["params"]["group_decision"].astype(bool)
        return {"G": np.where(state["active"] & gd & np.isfinite(G_new), G_new, state["G"])}

    return vote
