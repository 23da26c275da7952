"""State schema of the CPR society graph.

A CPR society batch holds ``S`` replicate societies of ``N`` agents side by side; every
per-agent field is an ``(S, N)`` numpy array and every per-society field an ``(S,)`` array,
so one graph invocation advances all replicates (and, for sweeps, all conditions) at once.
LangGraph's checkpoint serializer stores numpy arrays natively.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from cooplab.graphs.state import AppendLog


class CPRState(TypedDict, total=False):
    # bookkeeping
    seed: int  # the run's seed; every draw derives from (seed, round, phase)
    round: int  # current round t (1-based); > max_round once the run is over
    max_round: int  # the largest round cap in the batch
    params: dict[str, np.ndarray]  # per-society parameter arrays, shape (S,)
    condition: np.ndarray  # (S,) condition index of each society
    replicate: np.ndarray  # (S,) replicate index within its condition
    # resource
    R: np.ndarray  # (S,) stock at the start of the round, R(t)
    R_plus: np.ndarray  # (S,) stock after the harvest, R^+(t)
    # agents
    alive: np.ndarray  # (S, N) bool
    e: np.ndarray  # (S, N) effort trait e_i
    m: np.ndarray  # (S, N) monitoring propensity m_i
    p: np.ndarray  # (S, N) punishment propensity p_i
    g: np.ndarray  # (S, N) personal normative belief g_i (a harvest cap)
    P: np.ndarray  # (S, N) wealth P_i
    P_bar: np.ndarray  # (S, N) smoothed payoff (EMA of per-round payoffs)
    effort: np.ndarray  # (S, N) effort actually exerted this round e_i(t)
    h: np.ndarray  # (S, N) harvest h_i(t)
    B: np.ndarray  # (S, N) 1 if i punished someone this round
    V: np.ndarray  # (S, N) 1 if i was punished this round
    I: np.ndarray  # (S, N) int8, 1 if i inspected someone this round (0 where punishment is off; LLM: always 0)
    tau_V: np.ndarray  # (S, N) lowest threshold among the inspectors who fined i this round (+inf: not fined)
    payoff: np.ndarray  # (S, N) this round's payoff pi_i = h_i - c - gamma B_i - beta V_i (0: dead or finished)
    n_inspections: np.ndarray  # (S,) inspections made this round
    n_violations: np.ndarray  # (S,) violations found by inspectors this round
    proposals: np.ndarray  # (S, N) proposed caps g*_i(t+1)
    G: np.ndarray  # (S,) group norm G(t) in force (NaN: no group norm)
    # outcome
    active: np.ndarray  # (S,) bool, False once the society has collapsed or hit its cap
    T_s: np.ndarray  # (S,) survival time (0 while running)
    collapse: np.ndarray  # (S,) 0 running/cap, 1 stock <= R_min, 2 starvation
    eta_sum: np.ndarray  # (S,) running sum of eta(t) over the rounds lived
    history: AppendLog  # one record per round
    # LLM agents (absent or empty for rule-based runs)
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
