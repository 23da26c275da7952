"""Benchmark: the Fig. 3 sweep of the CPR fishery ABM, three ways, in one process.

    .venv/bin/python benchmarks/bench_cpr.py            # full run, writes the "## CPR ABM" section of
    benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_cpr.py --quick    # smoke run (few replicates); writes nothing unless --out is
    given

The workload is the grid of ``cooplab.tasks.cpr.validation.experiment_fig3``: 11 beta x 10 r
cells (FIG3_BETAS x FIG3_RS), mixed population, default parameters otherwise (N = 10 agents,
T = 50 rounds), 100 replicate societies per cell = 11,000 societies.

1. cooplab      ``run_cpr`` over all conditions x replicates in ONE graph invocation, with an
                InMemorySaver checkpointer and durability="exit" (as tasks/cpr/validation.py runs it);
                also once without a checkpointer, for information.
2. numpy floor  one plain Python loop over rounds, no LangGraph: the same equations
                (cooplab.tasks.cpr.model) and policies (cooplab.tasks.cpr.rules), on compacted
                arrays of the running societies only (as cooplab's nodes compute only those),
                drawing from the same per-(seed, round, phase) generators in the same order and
                shapes (per-society arrays drawn for all S societies, running rows used), so it
                must reproduce cooplab's survival times exactly (asserted, society by society). It skips what is not
                part of the
                model: LangGraph, the per-round history record (17 metrics/round), and the
                propose/vote generators that the default policies never draw from.
3. Mesa         a Mesa 3 model per society, one ``mesa.Agent`` per fisher, agents stepped
                with ``AgentSet.do`` each phase, scalar Python arithmetic, its own random
                streams (``Model.random``). By default the full sweep (all replicates of all
                cells, society after society, one pass = one replicate of every cell); if
                ``--mesa-max-seconds`` cuts it short after a whole pass, the row says SUBSET
                (all cells stay equally represented). Its mean survival time is compared with
                cooplab's on the same cells (stratified z-test over cells).
4. (info only) ``run_compact``: the same model in numpy on the running societies only, drawing
                only for them (other random streams, checked statistically) with shortcuts of the
                default society. Not a target: it shows the price of exactness (drawing for all S).

Agent-steps = sum over societies and over the rounds actually simulated (up to and including
the collapse round or the round cap) of the living agents at the start of the round; the same
count for all three (cooplab's is derived from its history record, the floor and Mesa count
as they go). Fast variants are repeated ``--repeats`` times (median reported).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as _dt
import gc
import io
import math
import os
import platform
import pstats
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, cast

import mesa
import numpy as np
from langgraph.checkpoint.memory import InMemorySaver

from cooplab.agents.rule_based import count_rows, row_sum, take_peers
from cooplab.graphs.nodes import where
from cooplab.graphs.rng import RowSubsetGenerator, phase_rng
from cooplab.tasks.cpr import model as world
from cooplab.tasks.cpr import phases as ph
from cooplab.tasks.cpr import rules as rb
from cooplab.tasks.cpr.params import CPRParams, make_params, population_ranges
from cooplab.tasks.cpr.society import Condition, init_state, phases_for_batch, run_cpr
from cooplab.tasks.cpr.validation import FIG3_BETAS, FIG3_POP, FIG3_RS

SECTION = "## CPR ABM"
#: issue 41, point 4: cooplab's time at most this multiple of the exact numpy floor's ...
TARGET_FLOOR = 1.3
#: ... and its agent-steps per second at least this multiple of Mesa's
TARGET_MESA = 50.0
HERE = Path(__file__).resolve().parent


# ------------------------------------------------------------------------------------------
# workload
# ------------------------------------------------------------------------------------------
def fig3_conditions() -> tuple[list[Condition], list[dict[str, float]]]:
    """The Fig. 3 grid exactly as validation.experiment_fig3 builds it (r-major, then beta)."""
    conds, meta = [], []
    for r in FIG3_RS:
        for beta in FIG3_BETAS:
            conds.append(Condition(make_params(r=r, beta=beta), FIG3_POP))
            meta.append({"r": r, "beta": beta})
    return conds, meta


# ------------------------------------------------------------------------------------------
# 1. cooplab
# ------------------------------------------------------------------------------------------
def cooplab_agent_steps(final: dict[str, Any], N: int) -> int:
    """Living agents at the start of each simulated round, from cooplab's history record.

    Each round's record covers the societies running at its start (``rows``; a record written
    before the running block existed: those ``active``); their living agents at the start of round
    t are the ``n_alive`` recorded (after starvation) at the end of round t-1; N at t = 1."""
    S = len(final["T_s"])
    prev = np.full(S, N, dtype=np.int64)
    total = 0
    for rec in final["history"]:
        rows = np.asarray(rec["rows"]) if "rows" in rec else np.flatnonzero(rec["active"])
        n_alive = np.asarray(rec["n_alive"], dtype=np.int64)
        total += int(prev[rows].sum())
        prev[rows] = n_alive if "rows" in rec else n_alive[rows]
    return total


def run_cooplab(conds: list[Condition], replicates: int, seed: int, checkpointer: bool) -> dict[str, Any]:
    saver = InMemorySaver() if checkpointer else None
    t0 = time.perf_counter()
    c0 = time.process_time()
    final: dict[str, Any] = dict(run_cpr(conds, replicates, seed, checkpointer=saver, durability="exit"))
    wall = time.perf_counter() - t0
    N = conds[0].params.N
    return {
        "wall": wall,
        "cpu": time.process_time() - c0,
        "agent_steps": cooplab_agent_steps(final, N),
        "T_s": np.asarray(final["T_s"], dtype=int),
        "eta_sum": np.asarray(final["eta_sum"], dtype=float),
        "condition": np.asarray(final["condition"]),
        "rounds": int(final["round"]) - 1,
    }


# ------------------------------------------------------------------------------------------
# 1b. cooplab of another checkout (--baseline): the "before" of a change, in the same run
# ------------------------------------------------------------------------------------------
#: what the baseline's worker process runs: it imports cooplab from the package tree given in
#: argv[1], answers "warm" and "run REPS SEED" lines on stdin with one JSON line each (its own
#: wall and CPU time of run_cpr, as run_cooplab measures them here) and writes each run's survival
#: times and efficiency sums to the .npz named in the answer
BASELINE_WORKER = r"""
import gc, json, os, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import cooplab
from langgraph.checkpoint.memory import InMemorySaver
from cooplab.tasks.cpr.params import make_params
from cooplab.tasks.cpr.society import Condition, run_cpr
from cooplab.tasks.cpr.validation import FIG3_BETAS, FIG3_POP, FIG3_RS
assert os.path.realpath(cooplab.__file__).startswith(os.path.realpath(sys.argv[2])), cooplab.__file__
conds = [Condition(make_params(r=r, beta=beta), FIG3_POP) for r in FIG3_RS for beta in FIG3_BETAS]
print(json.dumps({"ready": cooplab.__file__}), flush=True)
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "warm":
        run_cpr(conds[:2], 2, int(cmd[1]), checkpointer=InMemorySaver(), durability="exit")
        print(json.dumps({"warm": True}), flush=True)
    elif cmd[0] == "run":
        reps, seed = int(cmd[1]), int(cmd[2])
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        final = run_cpr(conds, reps, seed, checkpointer=InMemorySaver(), durability="exit")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        fd, path = tempfile.mkstemp(suffix=".npz")
        os.close(fd)
        np.savez(path, T_s=np.asarray(final["T_s"], dtype=int), eta_sum=np.asarray(final["eta_sum"], dtype=float))
        del final
        print(json.dumps({"wall": wall, "cpu": cpu, "file": path}), flush=True)
"""


class Baseline:
    """cooplab from another checkout (``--baseline DIR``: a git worktree of an older commit, say),
    run in a worker process of the same interpreter that imports cooplab from that checkout; each
    call of :meth:`run` times one ``run_cpr`` of the Fig. 3 sweep there, between this process's own
    repeats (nothing runs in both processes at once). The checkout's package tree is assembled from
    its pyproject's ``package-dir`` with symbolic links in a temporary folder."""

    def __init__(self, checkout: Path, seed: int) -> None:
        import json
        import tempfile
        import tomllib

        self.checkout = Path(checkout).resolve()
        meta = tomllib.loads((self.checkout / "pyproject.toml").read_text())
        dirs = meta["tool"]["setuptools"]["package-dir"]
        self._tmp = tempfile.TemporaryDirectory(prefix="cooplab-baseline-")
        root = Path(self._tmp.name) / "cooplab"
        root.mkdir()
        for item in (self.checkout / dirs["cooplab"]).iterdir():
            (root / item.name).symlink_to(item)
        for name, rel in dirs.items():
            if name.count(".") == 1 and not (root / name.split(".")[1]).exists():
                (root / name.split(".")[1]).symlink_to(self.checkout / rel)
        self.commit = git_commit(self.checkout)
        self._json = json
        self.proc = subprocess.Popen(
            [sys.executable, "-c", BASELINE_WORKER, self._tmp.name, str(self.checkout)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=self._tmp.name,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are PIPEs
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        self._ask(None)  # ready
        self._ask(f"warm {seed}")

    def _ask(self, line: str | None) -> dict[str, Any]:
        if line is not None:
            self._stdin.write(line + "\n")
            self._stdin.flush()
        answer = self._stdout.readline()
        if not answer:
            raise RuntimeError(f"the baseline worker ({self.checkout}) stopped; see its error above")
        return self._json.loads(answer)

    def run(self, replicates: int, seed: int) -> dict[str, Any]:
        res = self._ask(f"run {replicates} {seed}")
        with np.load(res["file"]) as d:
            out = {"wall": res["wall"], "cpu": res["cpu"], "T_s": d["T_s"], "eta_sum": d["eta_sum"]}
        os.unlink(res["file"])
        return out

    def close(self) -> None:
        self._stdin.close()
        self.proc.wait(timeout=60)
        self._tmp.cleanup()


# ------------------------------------------------------------------------------------------
# 2. plain numpy floor
# ------------------------------------------------------------------------------------------
def run_floor(conds: list[Condition], replicates: int, seed: int) -> dict[str, Any]:
    """The same model as cooplab's CPR graph (all phases on), as one plain loop over rounds.

    Node for node it performs cooplab's phase computations (tasks/cpr/phases.py) with the same
    policies (tasks/cpr/rules.py) and equations (tasks/cpr/model.py), and draws from
    ``phase_rng(seed, round, phase)`` exactly as the nodes do: harvest and punish with the
    round t, learn with t + 1 (the environment node advances ``round`` before learn runs).
    Individual learning (cooplab's ``adapt`` node, deterministic) runs between the environment
    step and learn, on the societies still running, with the same rule (``rb.individual_learning``).
    Like cooplab's nodes it computes only the societies still running, but more directly: it
    keeps compacted arrays of the running societies from round to round (dropping the finished
    ones once, at the end of the round; no per-phase gather and scatter), and draws each
    per-society random array for the whole batch through the same ``RowSubsetGenerator``
    (all S rows drawn, the running ones used), which is what keeps the numbers identical."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    st: dict[str, Any] = dict(init_state(conds, replicates, seed))
    S = len(st["active"])
    seed_ = st["seed"]
    max_round = st["max_round"]
    T_s_all = np.zeros(S, dtype=int)
    eta_sum_all = np.zeros(S)
    ids = np.arange(S)  # the running societies; st holds their rows only
    per_society = [k for k, v in st.items() if isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == S]
    agent_steps = 0
    t = int(st["round"])
    while True:
        P = st["params"]
        alive, R = st["alive"], st["R"]  # every society in st is running: run == alive
        agent_steps += int(alive.sum())
        # --- harvest: capped effort, harvest, ration, post-harvest stock
        rng = running_rows_rng(seed_, t, "harvest", ids, S)
        effort = where(alive, np.clip(rb.capped_effort(st, rng), 0.0, 1.0), 0.0)
        h = world.ration(world.harvest(P["alpha"], effort, R), R)
        R_plus = world.post_harvest_stock(R, h)
        st["effort"], st["h"], st["R_plus"] = effort, h, R_plus
        # --- punish: sample a peer, inspect with m_i, punish violations of G with p_i
        rng = running_rows_rng(seed_, t, "punish", ids, S)
        out = rb.sample_inspect_punish(st, ph.threshold(st), rng)
        on = (P["punishment"].astype(bool) & (t < P["punish_off_round"]))[:, None]
        if on.all():  # as the node: in force everywhere, nothing to mask
            B, V, st["I"], st["tau_V"] = out["B"], out["V"], out["I"], out["tau_V"]
        else:
            B = np.where(on, out["B"], 0).astype(np.int8)
            V = np.where(on, out["V"], 0).astype(np.int8)
            st["I"], st["tau_V"] = np.where(on, out["I"], 0).astype(np.int8), np.where(on, out["tau_V"], np.inf)
        st["B"], st["V"] = B, V
        # --- environment: payoff, starvation, regrowth, collapse / cap
        payoff = where(alive, world.round_payoff(h, P["c"], P["gamma"], P["beta"], B, V), 0.0)
        st["payoff"] = payoff
        wealth = st["P"] + payoff
        starved = alive & (wealth < 0)
        st["alive"] = alive & ~starved
        st["P_bar"] = where(alive, world.smoothed_payoff(st["P_bar"], payoff, P["ema"]), st["P_bar"])
        st["P"] = where(alive, wealth, st["P"])
        st["R"] = world.logistic_regrowth(R_plus, P["r"], P["K"])
        eta_sum_all[ids] = eta_sum_all[ids] + world.efficiency_t(row_sum(h), P["r"], P["K"])
        done = (R_plus <= P["R_min"]) | (count_rows(starved) > 0) | (t >= P["T"])
        T_s_all[ids[done]] = t
        if done.any():  # drop the finished societies
            keep = np.flatnonzero(~done)
            ids = ids[keep]
            drop_finished(st, keep, per_society)
        t += 1
        st["round"] = t
        if not ids.size:
            break
        alive = st["alive"]
        # --- adapt: individual learning (deterministic; societies with it on and il_rate > 0)
        il = st["params"]["individual_learning"].astype(bool) & (st["params"]["il_rate"] > 0)
        if il.any():
            out = rb.individual_learning(st)
            run = alive & il[:, None]
            for k in ("e", "m", "p", "g"):
                st[k] = where(run, out[k], st[k])
        # --- learn: payoff-biased imitation with mutation (synchronous)
        rng = running_rows_rng(seed_, t, "learn", ids, S)
        out = rb.payoff_biased_imitation(st, rng)
        for k in ("e", "m", "g"):
            st[k] = where(alive, out[k], st[k])
        # --- propose own cap, median vote (neither policy draws random numbers)
        G_new = world.median_norm(where(alive, st["g"], np.nan), alive)
        gd = st["params"]["group_decision"].astype(bool)
        st["G"] = np.where(gd & np.isfinite(G_new), G_new, st["G"])
        if t > max_round:
            break
    wall = time.perf_counter() - t0
    return {
        "wall": wall,
        "cpu": time.process_time() - c0,
        "agent_steps": agent_steps,
        "T_s": T_s_all,
        "eta_sum": eta_sum_all,
        "rounds": t - 1,
    }


def running_rows_rng(seed: int, t: int, phase: str, ids: np.ndarray, S: int) -> np.random.Generator:
    """The generator of ``phase`` in round ``t`` as cooplab's nodes hand it to the rules for the running
    societies ``ids`` of ``S`` (``phases.phase_generator``): per-society arrays drawn for all S rows, the
    running ones returned. ``RowSubsetGenerator`` is a facade of a Generator with exactly the draws the
    rules make (random, integers, standard_normal), so it is cast to the type the rules take."""
    return cast(np.random.Generator, RowSubsetGenerator(phase_rng(seed, t, phase), ids, S))


def drop_finished(st: dict[str, Any], keep: np.ndarray, per_society: list[str]) -> None:
    """The floor's compaction: keep the rows ``keep`` of every per-society array and parameter."""
    for k in per_society:
        st[k] = np.take(st[k], keep, axis=0)
    st["params"] = {k: np.take(v, keep) for k, v in st["params"].items()}


def run_compact(conds: list[Condition], replicates: int, seed: int) -> dict[str, Any]:
    """INFORMATION ONLY, not the floor: the same model in numpy that drops finished societies
    from the arrays and exploits that, with ``end_on_starvation``, every agent of a running
    society is alive (so a uniform peer is ``(i + U{1..N-1}) mod N``, no rejection loop, and the
    vote is a plain median). Its draws have other shapes than cooplab's, so it uses other random
    streams (still from ``phase_rng``): it is checked statistically, not exactly. It shows how
    much of the floor's time goes to societies that have already finished. Individual learning
    is mirrored equation for equation (the violated norm is G, every inspector's threshold here)."""
    if not all(c.params.punishment and c.params.social_learning and c.params.group_decision for c in conds):
        raise ValueError("run_compact implements the default society (all phases on)")
    t0 = time.perf_counter()
    c0 = time.process_time()
    st: dict[str, Any] = dict(init_state(conds, replicates, seed))
    P = st["params"]
    S, N = st["alive"].shape
    ids: np.ndarray = np.arange(S)
    T_s = np.zeros(S, dtype=int)
    eta_sum = np.zeros(S)
    e, m, p, g, W, Pb = st["e"], st["m"], st["p"], st["g"], st["P"], st["P_bar"]
    R, G = st["R"].copy(), st["G"].copy()
    names = (
        "alpha",
        "c",
        "gamma",
        "beta",
        "r",
        "K",
        "R_min",
        "ema",
        "delta",
        "sigma",
        "learn_prob",
        "T",
        "punish_off_round",
        "il_rate",
    )
    prm = {k: P[k].copy() for k in names}
    prm["we"], prm["wg"] = P["e_max"] - P["e_min"], P["g_max"] - P["g_min"]
    prm["il_rate"] = np.where(P["individual_learning"].astype(bool), prm["il_rate"], 0.0)  # lambda = 0: no change
    ar = np.arange(N)[None, :]
    agent_steps, t = 0, 1
    while ids.size:
        n = ids.size
        agent_steps += n * N
        q = {k: v[:, None] for k, v in prm.items()}
        # harvest
        aR = (prm["alpha"] * R)[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            eff = np.where(aR > 0, np.minimum(e, g / aR), 0.0)
        np.clip(eff, 0.0, 1.0, out=eff)
        h = q["alpha"] * eff * R[:, None]
        H = row_sum(h)
        over = H > R
        if over.any():
            h = h * np.where(over, R / np.where(H > 0, H, 1.0), 1.0)[:, None]
            H = row_sum(h)
        Rp = np.maximum(0.0, R - H)
        # punish
        rng = phase_rng(seed, t, "punish")
        j = (ar + rng.integers(1, N, size=(n, N))) % N
        u = rng.random((2, n, N))
        on = t < q["punish_off_round"]
        insp = (u[0] < m) & on
        pun = insp & (take_peers(h, j) > G[:, None]) & (u[1] < p)
        V = np.zeros((n, N))
        V[np.broadcast_to(np.arange(n)[:, None], (n, N))[pun], j[pun]] = 1.0
        # environment
        pay = h - q["c"] - q["gamma"] * pun - q["beta"] * V
        W = W + pay
        Pb = (1.0 - q["ema"]) * Pb + q["ema"] * pay
        R = Rp + prm["r"] * Rp * (1.0 - Rp / prm["K"])
        eta_sum[ids] += H / (prm["r"] * prm["K"] / 4.0)
        done: np.ndarray = (Rp <= prm["R_min"]) | (count_rows(W < 0) > 0) | (t >= prm["T"])
        t += 1
        if done.any():
            T_s[ids[done]] = t - 1
            keep = ~done
            ids, e, m, p, g, W, Pb, R, G, insp, pun, V, pay = (
                x[keep] for x in (ids, e, m, p, g, W, Pb, R, G, insp, pun, V, pay)
            )
            prm = {k: v[keep] for k, v in prm.items()}
            q = {k: v[:, None] for k, v in prm.items()}
            n = ids.size
            if not n:
                break
        # adapt: individual learning; the violated norm is G (every inspector's threshold here)
        lam = q["il_rate"]
        s = np.clip(pay / q["c"], -1.0, 1.0)
        fined = V == 1
        g_new = np.where(fined, g - lam * np.maximum(g - G[:, None], 0.0), g)
        e = np.clip(np.where(fined, (1.0 - lam) * e, np.where(pay < 0, e + lam * (1.0 - e), e)), 0.0, 1.0)
        m = np.clip(np.where(insp, rb.reinforce(m, s, lam), m), 0.0, 1.0)
        p = np.clip(np.where(pun, rb.reinforce(p, s, lam), p), 0.0, 1.0)
        g = np.maximum(g_new, 0.0)
        # learn (synchronous; mutation drawn for adopters only)
        rng = phase_rng(seed, t, "learn")
        k = (ar + rng.integers(1, N, size=(n, N))) % N
        u = rng.random((2, n, N))
        z = np.clip(q["delta"] * (take_peers(Pb, k) - Pb), -500.0, 500.0)
        adopt = (u[0] < q["learn_prob"]) & (u[1] < 1.0 / (1.0 + np.exp(-z)))
        rows, cols = np.nonzero(adopt)
        if rows.size:
            zz = rng.standard_normal((3, rows.size))
            src = k[rows, cols]
            sg = prm["sigma"][rows]
            e, m, g = e.copy(), m.copy(), g.copy()
            e[rows, cols] = np.clip(e[rows, src] + zz[0] * sg * prm["we"][rows], 0.0, 1.0)
            m[rows, cols] = np.clip(m[rows, src] + zz[1] * sg, 0.0, 1.0)
            g[rows, cols] = np.maximum(g[rows, src] + zz[2] * sg * prm["wg"][rows], 0.0)
        # propose own cap + median vote
        G = world.median_norm(g, np.ones(g.shape, dtype=bool))  # np.median of every row
    return {
        "wall": time.perf_counter() - t0,
        "cpu": time.process_time() - c0,
        "agent_steps": agent_steps,
        "T_s": T_s,
        "eta_sum": eta_sum,
    }


# ------------------------------------------------------------------------------------------
# 3. Mesa
# ------------------------------------------------------------------------------------------
class Fisher(mesa.Agent):
    """One fisher: traits (effort e, monitoring m, punishing p, personal cap g), wealth and
    smoothed payoff; the phase methods are called by ``FisheryModel.step`` on all agents
    (fish, monitor, settle, adapt = individual learning, consider_imitation + adopt)."""

    model: FisheryModel  # (mesa.Agent types it as any Model)

    def __init__(self, model: "FisheryModel", e: float, m: float, p: float, g: float) -> None:
        super().__init__(model)
        self.e, self.m, self.p, self.g = e, m, p, g
        self.wealth = model.prm.P0
        self.p_bar = 0.0
        self.effort = 0.0
        self.h = 0.0
        self.punished_someone = False
        self.was_punished = False
        self.inspected = False
        self.tau = math.inf  # the lowest threshold among the inspectors who fined it this round
        self.payoff = 0.0
        self.new_traits: tuple[float, float, float] | None = None

    def random_peer(self) -> "Fisher | None":
        others = [a for a in cast("Sequence[Fisher]", self.model.agents) if a is not self]  # all Fishers
        return self.random.choice(others) if others else None

    def fish(self) -> None:
        """Capped effort e_i(t) = min(e_i, g_i / (alpha R)); harvest h_i = alpha e_i(t) R."""
        model = self.model
        R, alpha = model.R, model.prm.alpha
        cap = self.g / (alpha * R) if R > 0 else 0.0
        self.effort = min(1.0, max(0.0, min(self.e, cap)))
        self.h = alpha * self.effort * R
        self.punished_someone = self.was_punished = self.inspected = False
        self.tau = math.inf

    def monitor(self) -> None:
        """Sample a peer; inspect with prob. m; punish a violation (h_j > threshold) with prob. p."""
        peer = self.random_peer()
        if peer is None:
            return
        if self.random.random() < self.m:
            self.inspected = True
            thr = self.model.threshold(self)
            if peer.h > thr and self.random.random() < self.p:
                self.punished_someone = True
                peer.was_punished = True
                peer.tau = min(peer.tau, thr)

    def settle(self) -> None:
        """pi_i = h_i - c - gamma B_i - beta V_i; wealth and smoothed payoff."""
        prm = self.model.prm
        payoff = self.h - prm.c - prm.gamma * self.punished_someone - prm.beta * self.was_punished
        self.payoff = payoff
        self.wealth += payoff
        self.p_bar = (1.0 - prm.ema) * self.p_bar + prm.ema * payoff

    def adapt(self) -> None:
        """Individual learning (Bush-Mosteller, aspiration = subsistence), from the round's own
        consequences: a fine moves the cap toward the violated norm and lowers effort; a payoff
        below 0 (not fined) raises effort; monitoring and punishing, if done, are reinforced by
        the stimulus s = clip(payoff / c, -1, 1)."""
        lam = self.model.prm.il_rate
        s = min(1.0, max(-1.0, self.payoff / self.model.prm.c))

        def reinforce(x: float) -> float:
            return x + lam * s * (1.0 - x) if s >= 0 else x + lam * s * x

        e, m, p, g = self.e, self.m, self.p, self.g
        if self.was_punished:
            g = g - lam * max(g - self.tau, 0.0)
            e = (1.0 - lam) * e
        elif self.payoff < 0:
            e = e + lam * (1.0 - e)
        if self.inspected:
            m = reinforce(m)
        if self.punished_someone:
            p = reinforce(p)
        self.e, self.m, self.p, self.g = (
            min(1.0, max(0.0, e)),
            min(1.0, max(0.0, m)),
            min(1.0, max(0.0, p)),
            max(0.0, g),
        )

    def consider_imitation(self) -> None:
        """With prob. learn_prob meet a random peer; copy (e, m, g) with the logit probability,
        each copied trait mutated by N(0, (sigma * initial range width)^2) and clipped."""
        self.new_traits = None
        prm = self.model.prm
        if self.random.random() >= prm.learn_prob:
            return
        peer = self.random_peer()
        if peer is None:
            return
        z = max(-500.0, min(500.0, prm.delta * (peer.p_bar - self.p_bar)))
        if self.random.random() < 1.0 / (1.0 + math.exp(-z)):
            gauss = self.random.gauss
            self.new_traits = (
                min(1.0, max(0.0, peer.e + gauss(0.0, prm.sigma * (prm.e_max - prm.e_min)))),
                min(1.0, max(0.0, peer.m + gauss(0.0, prm.sigma * 1.0))),
                max(0.0, peer.g + gauss(0.0, prm.sigma * (prm.g_max - prm.g_min))),
            )

    def adopt(self) -> None:
        if self.new_traits is not None:
            self.e, self.m, self.g = self.new_traits


class FisheryModel(mesa.Model):
    """One CPR society (Gupta et al. 2025) as a Mesa model; ``step`` is one round."""

    def __init__(self, prm: CPRParams, population: str, seed: int) -> None:
        super().__init__(rng=seed)
        self.prm = prm
        self.t = 1
        self.R = prm.R0
        self.T_s = 0
        self.collapse = 0
        self.eta_sum = 0.0
        self.agent_steps = 0
        for rg in population_ranges(prm, population):
            u = self.random.uniform
            Fisher(self, u(*rg.e), u(*prm.m_range), u(*prm.p_range), u(*rg.g))
        self.G = statistics.median(a.g for a in self.fishers()) if prm.group_decision else math.nan

    def fishers(self) -> Sequence[Fisher]:
        """The agents, all Fishers (``__init__`` makes no other; AgentSet types them as any Agent)."""
        return cast("Sequence[Fisher]", self.agents)

    def threshold(self, inspector: Fisher) -> float:
        return self.G if (self.prm.group_decision and not math.isnan(self.G)) else inspector.g

    def step(self) -> None:
        prm, t = self.prm, self.t
        agents, fishers = self.agents, self.fishers()
        self.agent_steps += len(agents)
        # harvest
        agents.do("fish")
        H = sum(a.h for a in fishers)
        if H > self.R:  # ration
            scale = self.R / H
            for a in fishers:
                a.h *= scale
            H = sum(a.h for a in fishers)
        R_plus = max(0.0, self.R - H)
        # punish
        if prm.punishment and (prm.punish_off_round is None or t < prm.punish_off_round):
            agents.do("monitor")
        # environment
        agents.do("settle")
        starved = [a for a in fishers if a.wealth < 0]
        for a in starved:
            a.remove()
        self.R = R_plus + prm.r * R_plus * (1.0 - R_plus / prm.K)
        self.eta_sum += H / (prm.r * prm.K / 4.0)
        if R_plus <= prm.R_min or starved:
            self.T_s, self.collapse, self.running = t, (1 if R_plus <= prm.R_min else 2), False
            return
        if t >= prm.T:
            self.T_s, self.running = t, False
            return
        # adapt (individual learning)
        if prm.individual_learning and prm.il_rate > 0:
            agents.do("adapt")
        # learn
        if prm.social_learning:
            agents.do("consider_imitation")
            agents.do("adopt")
        # propose + vote
        if prm.group_decision and len(agents):
            self.G = statistics.median(a.g for a in fishers)
        self.t += 1


def run_mesa(conds: list[Condition], seed: int, passes: int, max_seconds: float) -> dict[str, Any]:
    """``passes`` whole passes (one replicate of every cell per pass), stopping early after a
    whole pass once ``max_seconds`` have elapsed (then the result covers a subset)."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    T_s: list[int] = []
    cell: list[int] = []
    eta: list[float] = []
    agent_steps = 0
    rep = 0
    while True:
        for ci, c in enumerate(conds):
            s = int(np.random.SeedSequence([seed, ci, rep]).generate_state(1)[0])
            model = FisheryModel(c.params, c.population, s)
            while model.running:
                model.step()
            T_s.append(model.T_s)
            eta.append(model.eta_sum / max(model.T_s, 1))
            cell.append(ci)
            agent_steps += model.agent_steps
        rep += 1
        elapsed = time.perf_counter() - t0
        if rep >= passes or elapsed >= max_seconds:
            break
    return {
        "wall": time.perf_counter() - t0,
        "cpu": time.process_time() - c0,
        "agent_steps": agent_steps,
        "T_s": np.asarray(T_s, dtype=int),
        "condition": np.asarray(cell),
        "passes": rep,
        "societies": len(T_s),
    }


def stratified_compare(a_T: np.ndarray, a_cell: np.ndarray, b_T: np.ndarray, b_cell: np.ndarray) -> dict[str, float]:
    """Mean T_s of A and B over the cells both cover (each cell weighted equally) and a
    z-test of the difference: var = sum_c (s_A,c^2 / n_A,c + s_B,c^2 / n_B,c) / C^2."""
    cells = sorted(set(a_cell.tolist()) & set(b_cell.tolist()))
    ma, mb, var = [], [], 0.0
    for c in cells:
        xa, xb = a_T[a_cell == c].astype(float), b_T[b_cell == c].astype(float)
        ma.append(xa.mean())
        mb.append(xb.mean())
        var += (xa.var(ddof=1) / xa.size if xa.size > 1 else 0.0) + (xb.var(ddof=1) / xb.size if xb.size > 1 else 0.0)
    C = len(cells)
    diff = float(np.mean(ma) - np.mean(mb))
    se = math.sqrt(var) / C
    z = diff / se if se > 0 else (0.0 if diff == 0 else math.inf)
    p = math.erfc(abs(z) / math.sqrt(2.0))
    # per-cell agreement: share of cells whose difference is within 2 combined standard errors
    within = 0
    for c, x, y in zip(cells, ma, mb, strict=False):
        xa, xb = a_T[a_cell == c].astype(float), b_T[b_cell == c].astype(float)
        s = math.sqrt(
            (xa.var(ddof=1) / xa.size if xa.size > 1 else 0.0) + (xb.var(ddof=1) / xb.size if xb.size > 1 else 0.0)
        )
        within += abs(x - y) <= 2 * s + 1e-12
    return {
        "cells": C,
        "mean_a": float(np.mean(ma)),
        "mean_b": float(np.mean(mb)),
        "diff": diff,
        "se": se,
        "z": z,
        "p": p,
        "cells_within_2se": int(within),
    }


# ------------------------------------------------------------------------------------------
# profiling
# ------------------------------------------------------------------------------------------
NODE_NAMES = ("harvest", "punish", "environment", "adapt", "learn", "propose", "vote")


def profile_cooplab(conds: list[Condition], replicates: int, seed: int, top: int = 25) -> tuple[str, list[str]]:
    """cProfile one cooplab run; attribute its time to the phase nodes (and, inside them, the
    policies and the history record) vs. LangGraph, init, compile and the exit checkpoint.
    The exit checkpoint is serialized on a LangGraph background thread, which cProfile does not
    trace; the main thread's wait for it shows up under the pregel loop's ``__exit__``."""
    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    run_cpr(conds, replicates, seed, checkpointer=InMemorySaver(), durability="exit")
    pr.disable()
    wall = time.perf_counter() - t0
    st = pstats.Stats(pr)
    total: float = st.total_tt  # pyright: ignore[reportAttributeAccessIssue]  # set by Stats, not in typeshed

    def cum(file_suffix: str, names: tuple[str, ...]) -> float:
        out = 0.0
        for (fn, _line, name), (_cc, _nc, _tt, ct, _callers) in st.stats.items():  # pyright: ignore[reportAttributeAccessIssue]  # set by Stats, not in typeshed
            if fn.replace(os.sep, "/").endswith(file_suffix) and name in names:
                out += ct
        return out

    nodes = {n: cum("tasks/cpr/phases.py", (n,)) for n in NODE_NAMES}
    parts = [
        ("  policies: payoff_biased_imitation", cum("tasks/cpr/rules.py", ("payoff_biased_imitation",))),
        ("  policies: sample_inspect_punish", cum("tasks/cpr/rules.py", ("sample_inspect_punish",))),
        ("  policies: individual_learning", cum("tasks/cpr/rules.py", ("individual_learning",))),
        ("    of which sample_peer (both)", cum("agents/rule_based.py", ("sample_peer",))),
        ("  history record: mean_alive helpers", cum("tasks/cpr/phases.py", ("mean_alive",))),
        ("  vote: median_norm", cum("tasks/cpr/model.py", ("median_norm",))),
    ]
    in_nodes = sum(nodes.values())
    init = cum("tasks/cpr/society.py", ("init_state",))
    compile_ = cum("tasks/cpr/society.py", ("build_cpr_graph",))
    exit_wait = cum("langgraph/pregel/_loop.py", ("__exit__",))
    lg = total - in_nodes - init - compile_ - exit_wait
    summary = [f"cProfile of one cooplab run: profiled wall {wall:.2f} s, profiler total {total:.2f} s"]
    for n in NODE_NAMES:
        summary.append(f"node {n:<12s} {nodes[n]:7.3f} s ({100 * nodes[n] / total:4.1f}%)")
    for label, v in parts:
        summary.append(f"{label:<40s} {v:7.3f} s ({100 * v / total:4.1f}%)")
    summary += [
        f"init_state {init:7.3f} s; graph compile {compile_:7.3f} s",
        f"exit checkpoint (main thread waiting on the saver) {exit_wait:7.3f} s ({100 * exit_wait / total:4.1f}%)",
        f"LangGraph per-step machinery (rest) {lg:7.3f} s ({100 * lg / total:4.1f}%)",
    ]
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(top)
    return "\n".join(summary) + "\n\n" + buf.getvalue(), summary


class SplitTimer:
    """Exclusive CPU time (``time.thread_time``, per thread) of nested categories of calls: a
    call's time goes to its category, minus the time of the wrapped calls it makes. The wrappers
    cost about a microsecond per call (a few thousand calls per run)."""

    def __init__(self) -> None:
        self.acc: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._local = threading.local()

    def wrap(self, category: str, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = self._local.__dict__.setdefault("stack", [])
            now = time.thread_time()
            if stack:  # pause the caller's category
                self.acc[stack[-1][0]] = self.acc.get(stack[-1][0], 0.0) + now - stack[-1][1]
            stack.append([category, now])
            try:
                return fn(*args, **kwargs)
            finally:
                end = time.thread_time()
                cat, start = stack.pop()
                self.acc[cat] = self.acc.get(cat, 0.0) + end - start
                self.calls[cat] = self.calls.get(cat, 0) + 1
                if stack:
                    stack[-1][1] = end

        timed.__name__ = getattr(fn, "__name__", category)
        return timed


#: the categories of the CPU split, in the order of the table
SPLIT_ROWS = (
    ("policies", "rule policies (the model's arithmetic: rules.py, median vote)"),
    ("draws", "random draws (phase generators, whole-batch draws, running rows taken)"),
    ("bookkeeping", "node / loop bookkeeping (masks, payoffs, stock, collapse)"),
    ("init", "init_state (the initial batch)"),
    (
        "regroup",
        "finished societies leave the arrays (cooplab: the running block, their final values logged, the batch put "
        "back together at the end; floor: its compaction)",
    ),
    ("record", "cooplab: the per-round history record (17 metrics)"),
    ("checkpoint", "cooplab: exit checkpoint, serialization (InMemorySaver, its thread)"),
    ("langgraph", "cooplab: LangGraph (graph compilation, the steps between the nodes, checkpoint bookkeeping)"),
)


def langgraph_alone(conds: list[Condition], seed: int, repeats: int = 3) -> dict[str, float]:
    """LangGraph's own cost per superstep with no array work between the steps: the node updates of a
    small batch (one replicate a cell) are recorded, then replayed through the same graph (each node
    returns its recorded update), with the InMemorySaver exit checkpoint; best of ``repeats``. What a
    superstep costs does not depend on the size of the arrays it carries."""
    import collections

    from cooplab.tasks.cpr.society import build_cpr_graph

    nodes = phases_for_batch([c.params for c in conds])
    log: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)

    def recorder(name: str, node: Any) -> Any:
        def rec(state: Any) -> dict[str, Any]:
            update = node(state)
            log[name].append(update)
            return update

        rec.__name__ = name
        return rec

    def replayer(name: str) -> Any:
        updates = iter(log[name])

        def replay(state: Any) -> dict[str, Any]:
            return next(updates)

        replay.__name__ = name
        return replay

    run_cpr(conds, 1, seed, phases=collections.OrderedDict((k, recorder(k, f)) for k, f in nodes.items()))
    steps = sum(len(v) for v in log.values())
    best = math.inf
    for _ in range(repeats):
        graph = build_cpr_graph(collections.OrderedDict((k, replayer(k)) for k in nodes), checkpointer=InMemorySaver())
        state = init_state(conds, 1, seed)
        gc.collect()
        c0 = time.process_time()
        graph.invoke(state, {"configurable": {"thread_id": "replay"}, "recursion_limit": 10_000}, durability="exit")
        best = min(best, time.process_time() - c0)
    return {"steps": steps, "cpu": best}


def time_split(conds: list[Condition], replicates: int, seed: int) -> dict[str, dict[str, float]]:
    """The CPU time of one checkpointed cooplab run and one floor run split by what it is spent on
    (exclusive times from :class:`SplitTimer`; the floor's untimed rest is its bookkeeping, cooplab's
    is LangGraph). The same policies, generators and equations run in both (asserted)."""
    import collections

    from cooplab.graphs import rng as grng
    from cooplab.tasks.cpr import society

    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, value: Any) -> None:
        saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    out: dict[str, dict[str, float]] = {}
    survival: dict[str, np.ndarray] = {}  # each instrumented run's T_s, compared at the end
    for which in ("cooplab", "floor"):
        timer = SplitTimer()
        W = timer.wrap
        try:
            for meth in ("random", "integers", "standard_normal"):
                patch(grng.RowSubsetGenerator, meth, W("draws", getattr(grng.RowSubsetGenerator, meth)))
            patch(ph, "phase_rng", W("draws", ph.phase_rng))
            here = sys.modules[__name__]
            patch(here, "phase_rng", W("draws", phase_rng))
            patch(here, "init_state", W("init", init_state))  # the floor's
            patch(society, "init_state", W("init", society.init_state))  # run_cpr's
            if which == "cooplab":
                patch(ph, "_regroup", W("regroup", ph._regroup))
                patch(ph, "round_record", W("record", ph.round_record))
                for meth in ("put", "put_writes"):
                    patch(InMemorySaver, meth, W("checkpoint", getattr(InMemorySaver, meth)))
                pol = lambda f, W=W: W("policies", f)  # noqa: E731
                nodes = collections.OrderedDict(
                    harvest=ph.harvest_node(pol(rb.capped_effort)),
                    punish=ph.punish_node(pol(rb.sample_inspect_punish)),
                    environment=ph.environment_node(),
                    adapt=ph.adapt_node(pol(rb.individual_learning)),
                    learn=ph.learn_node(pol(rb.payoff_biased_imitation)),
                    propose=ph.propose_node(pol(rb.propose_own_cap)),
                    vote=ph.vote_node(pol(rb.median_vote)),
                )
                assert list(nodes) == list(phases_for_batch([c.params for c in conds])), "not the benchmark's graph"
                phases = collections.OrderedDict((k, W("bookkeeping", f)) for k, f in nodes.items())
                gc.collect()
                c0 = time.process_time()
                final = run_cpr(conds, replicates, seed, phases=phases, checkpointer=InMemorySaver(), durability="exit")
                total = time.process_time() - c0
                T_s = np.asarray(final.get("T_s"))
            else:
                for name in (
                    "capped_effort",
                    "sample_inspect_punish",
                    "individual_learning",
                    "payoff_biased_imitation",
                ):
                    patch(rb, name, W("policies", getattr(rb, name)))
                patch(world, "median_norm", W("policies", world.median_norm))
                patch(here, "drop_finished", W("regroup", drop_finished))
                gc.collect()
                res = run_floor(conds, replicates, seed)
                total, T_s = res["cpu"], res["T_s"]
        finally:
            for owner, name, value in reversed(saved):
                setattr(owner, name, value)
            saved.clear()
        split = {k: timer.acc.get(k, 0.0) for k, _ in SPLIT_ROWS}
        rest = total - sum(split.values())
        split["langgraph" if which == "cooplab" else "bookkeeping"] += rest
        split["total"] = total
        survival[which] = T_s
        out[which] = split
    assert np.array_equal(survival["cooplab"], survival["floor"]), "the instrumented runs disagree"
    return out


def split_table(split: dict[str, dict[str, float]], mesa_cpu_per_step: float, agent_steps: int) -> list[str]:
    """The CPU split as a markdown table, with what each part costs against the floor and Mesa."""
    c, f = split["cooplab"], split["floor"]
    lines = ["| part | cooplab CPU s | floor CPU s | cooplab - floor |", "|---|---:|---:|---:|"]
    for key, label in SPLIT_ROWS:
        lines.append(f"| {label} | {c[key]:.3f} | {f[key]:.3f} | {c[key] - f[key]:+.3f} |")
    lines.append(f"| **total** | **{c['total']:.3f}** | **{f['total']:.3f}** | **{c['total'] - f['total']:+.3f}** |")
    budget_floor = TARGET_FLOOR * f["total"]
    budget_mesa = mesa_cpu_per_step * agent_steps / TARGET_MESA
    lines += [
        "",
        f"In this instrumented pair of runs: cooplab/floor {c['total'] / f['total']:.2f}x; the {TARGET_FLOOR}x target "
        "leaves cooplab "
        f"{budget_floor:.3f} s CPU, the {TARGET_MESA:g}x Mesa target {budget_mesa:.3f} s CPU (Mesa: "
        f"{mesa_cpu_per_step * 1e6:.1f} us CPU per "
        "agent-step in this benchmark).",
    ]
    return lines


# ------------------------------------------------------------------------------------------
# reporting
# ------------------------------------------------------------------------------------------
def machine_info() -> dict[str, str]:
    def v(pkg: str) -> str:
        try:
            return version(pkg)
        except Exception:  # noqa: BLE001
            return "?"

    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    lscpu = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    lscpu = {k.strip(): v.strip() for k, v in lscpu.items()}

    return {
        "uname": " ".join(platform.uname()),
        "uname_a": subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout.strip(),
        "nproc": str(os.cpu_count()),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "langgraph": v("langgraph"),
        "langgraph-checkpoint": v("langgraph-checkpoint"),
        "mesa": mesa.__version__,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "cpu_model": lscpu.get("Model name", "?"),
        "cpus": lscpu.get("CPU(s)", str(os.cpu_count())),
        "uptime": uptime(),
        "commit": git_commit(HERE.parent),
    }


def uptime() -> str:
    """``uptime``'s line (the load averages of the last 1, 5 and 15 minutes)."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def git_commit(path: Path) -> str:
    """The short commit of the checkout at ``path`` (with ``+changes`` when its tree differs from it)."""
    try:
        sha = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return (sha or "?") + (" +changes" if dirty else "")


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def replace_section(path: Path, text: str) -> None:
    """Replace the ``## CPR ABM`` section of ``path`` (up to the next ``## `` heading) or
    append it; every other section is kept as is. The file is re-read just before writing."""
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    pat = re.compile(r"^## CPR ABM[^\n]*\n.*?(?=^## |\Z)", re.S | re.M)
    body = text.rstrip("\n") + "\n\n"
    if pat.search(old):
        new = pat.sub(lambda _m: body, old, count=1)
    else:
        new = old.rstrip("\n") + "\n\n" + body
    path.write_text(new.rstrip("\n") + "\n")


# ------------------------------------------------------------------------------------------
# the run: measured sections, then the report
# ------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument(
        "--quick", action="store_true", help="smoke variant: 3 replicates/cell; no file written unless --out"
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="results file (default benchmarks/RESULTS.md; none for --quick)"
    )
    ap.add_argument("--replicates", type=int, default=None, help="replicates per cell (default 100; 3 with --quick)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats of cooplab and the floor (median)")
    ap.add_argument(
        "--mesa-reps",
        type=int,
        default=None,
        help="Mesa: replicates per cell (default: the same as --replicates, i.e. the full sweep)",
    )
    ap.add_argument(
        "--mesa-max-seconds",
        type=float,
        default=600.0,
        help="Mesa: stop after the whole pass (one replicate of every cell) that crosses this wall time; the result is "
        "then a subset",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout of cooplab (e.g. a git worktree of the commit before a change): its run_cpr is timed "
        "in a worker process between this checkout's repeats, and reported beside it (before / after)",
    )
    ap.add_argument(
        "--profile",
        choices=("auto", "always", "never"),
        default="always",
        help="split the CPU time of one more cooplab run and floor run by cause (written to the results) and "
        "cProfile one more cooplab run (printed) (auto: only if a target is missed)",
    )
    return ap.parse_args(argv)


@dataclass
class Repeats:
    """The timed runs: per repeat cooplab, the floor, the compacted numpy variant (info) and, with
    ``--baseline``, the other checkout's cooplab; and one cooplab run without a checkpointer."""

    coop: list[dict[str, Any]]
    floor: list[dict[str, Any]]
    compact: list[dict[str, Any]]
    base: list[dict[str, Any]]
    base_commit: str | None
    nock: dict[str, Any]


def time_repeats(conds: list[Condition], reps: int, seed: int, repeats: int, baseline: Path | None) -> Repeats:
    """Warm up (not timed), then ``repeats`` timed rounds of cooplab, the floor, the compacted variant
    and the baseline checkout, one after the other; then cooplab once without a checkpointer."""
    run_cpr(conds[:2], 2, seed, checkpointer=InMemorySaver(), durability="exit")
    run_floor(conds[:2], 2, seed)
    run_compact(conds[:2], 2, seed)
    base = Baseline(baseline, seed) if baseline is not None else None

    coop_runs: list[dict[str, Any]] = []
    floor_runs: list[dict[str, Any]] = []
    compact_runs: list[dict[str, Any]] = []
    base_runs: list[dict[str, Any]] = []
    for i in range(repeats):
        gc.collect()
        coop_runs.append(run_cooplab(conds, reps, seed, checkpointer=True))
        gc.collect()
        floor_runs.append(run_floor(conds, reps, seed))
        gc.collect()
        compact_runs.append(run_compact(conds, reps, seed))
        if base is not None:
            base_runs.append(base.run(reps, seed))
        print(
            f"  repeat {i + 1}/{repeats}: cooplab {coop_runs[-1]['wall']:.3f} s, floor "
            f"{floor_runs[-1]['wall']:.3f} s, "
            f"compacted numpy (info) {compact_runs[-1]['wall']:.3f} s"
            + (f", baseline cooplab {base_runs[-1]['wall']:.3f} s" if base is not None else ""),
            flush=True,
        )
    if base is not None:
        base.close()
    gc.collect()
    coop_nock = run_cooplab(conds, reps, seed, checkpointer=False)
    print(f"  cooplab without checkpointer (once): {coop_nock['wall']:.3f} s", flush=True)
    commit = base.commit if base is not None else None
    return Repeats(coop_runs, floor_runs, compact_runs, base_runs, commit, coop_nock)


def check_exact(rr: Repeats) -> None:
    """The floor reproduces cooplab society by society; cooplab's runs and the baseline's agree."""
    ref = rr.coop[0]
    for r in rr.coop[1:] + [rr.nock]:
        assert np.array_equal(r["T_s"], ref["T_s"]), "cooplab runs disagree with each other"
    for r in rr.base:
        assert np.array_equal(r["T_s"], ref["T_s"]), "the baseline checkout's T_s differs from this one's"
        assert np.array_equal(r["eta_sum"], ref["eta_sum"]), (
            "the baseline checkout's efficiency sums differ from this one's"
        )
    for r in rr.floor:
        assert np.array_equal(r["T_s"], ref["T_s"]), "numpy floor T_s differs from cooplab"
        assert r["T_s"].mean() == ref["T_s"].mean()
        assert np.allclose(r["eta_sum"], ref["eta_sum"], rtol=1e-12, atol=1e-12), "numpy floor efficiency differs"
        assert r["agent_steps"] == ref["agent_steps"], "agent-step counts differ"


def measure_mesa(conds: list[Condition], seed: int, mesa_reps: int, max_seconds: float) -> dict[str, Any]:
    print(
        f"  Mesa: {mesa_reps} replicates x {len(conds)} cells (stopping after a whole pass past {max_seconds:g} s)",
        flush=True,
    )
    gc.collect()
    return run_mesa(conds, seed, mesa_reps, max_seconds)


def median_wall(runs: list[dict[str, Any]]) -> float:
    return statistics.median(r["wall"] for r in runs)


def median_cpu(runs: list[dict[str, Any]]) -> float:
    return statistics.median(r["cpu"] for r in runs)


def repeat_ratios(
    runs: list[dict[str, Any]], floor_runs: list[dict[str, Any]], agent_steps: int, mesa: dict[str, Any]
) -> dict[str, list[float]]:
    """Per repeat (the cooplab run and the floor run of the same repeat, next to each other in time):
    time over the floor's, and agent-steps/s over Mesa's; on wall and on CPU time."""
    mesa_rate, mesa_cpu_rate = mesa["agent_steps"] / mesa["wall"], mesa["agent_steps"] / mesa["cpu"]
    return {
        "floor_wall": [r["wall"] / f["wall"] for r, f in zip(runs, floor_runs, strict=False)],
        "floor_cpu": [r["cpu"] / f["cpu"] for r, f in zip(runs, floor_runs, strict=False)],
        "mesa_wall": [agent_steps / r["wall"] / mesa_rate for r in runs],
        "mesa_cpu": [agent_steps / r["cpu"] / mesa_cpu_rate for r in runs],
    }


@dataclass
class Summary:
    """What the report says about the runs: medians, ratios against the targets, the Mesa comparison."""

    S: int
    agent_steps: int
    rounds: int
    coop_mean_T: float
    floor_mean_T: float
    coop_wall: float
    floor_wall: float
    compact_wall: float
    coop_cpu: float
    floor_cpu: float
    compact_cpu: float
    mesa_rate: float
    compact_steps: int
    compact_rate: float
    after: dict[str, list[float]]
    before: dict[str, list[float]] | None
    time_ratio: float
    speed_ratio: float
    cpu_time_ratio: float
    cpu_speed_ratio: float
    ok1: bool
    ok2: bool
    subset: bool
    mesa_label: str
    cmp_mesa: dict[str, float]
    cmp_compact: dict[str, float]


def summarize(rr: Repeats, mz: dict[str, Any], S: int, C: int) -> Summary:
    ref = rr.coop[0]
    agent_steps = ref["agent_steps"]
    subset = mz["societies"] < S
    mesa_label = (
        f"Mesa {mesa.__version__} (SUBSET: {mz['passes']} rep/cell x {C} cells)"
        if subset
        else f"Mesa {mesa.__version__} (full sweep)"
    )
    compact_wall = median_wall(rr.compact)
    compact_steps = rr.compact[0]["agent_steps"]
    after = repeat_ratios(rr.coop, rr.floor, agent_steps, mz)
    time_ratio, speed_ratio = statistics.median(after["floor_wall"]), statistics.median(after["mesa_wall"])
    return Summary(
        S=S,
        agent_steps=agent_steps,
        rounds=ref["rounds"],
        coop_mean_T=float(ref["T_s"].mean()),
        floor_mean_T=float(rr.floor[0]["T_s"].mean()),
        coop_wall=median_wall(rr.coop),
        floor_wall=median_wall(rr.floor),
        compact_wall=compact_wall,
        coop_cpu=median_cpu(rr.coop),
        floor_cpu=median_cpu(rr.floor),
        compact_cpu=median_cpu(rr.compact),
        mesa_rate=mz["agent_steps"] / mz["wall"],
        compact_steps=compact_steps,
        compact_rate=compact_steps / compact_wall,
        after=after,
        before=repeat_ratios(rr.base, rr.floor, agent_steps, mz) if rr.base else None,
        time_ratio=time_ratio,
        speed_ratio=speed_ratio,
        cpu_time_ratio=statistics.median(after["floor_cpu"]),
        cpu_speed_ratio=statistics.median(after["mesa_cpu"]),
        ok1=time_ratio <= TARGET_FLOOR,
        ok2=speed_ratio >= TARGET_MESA,
        subset=subset,
        mesa_label=mesa_label,
        cmp_mesa=stratified_compare(mz["T_s"], mz["condition"], ref["T_s"], ref["condition"]),
        cmp_compact=stratified_compare(rr.compact[0]["T_s"], ref["condition"], ref["T_s"], ref["condition"]),
    )


def table_row(label: str, soc: int, steps: int, wall: float, timings: str, cpu: float, meanT: float) -> tuple[str, ...]:
    return (
        label,
        f"{soc:,}",
        f"{steps:,}",
        f"{wall:.3f}",
        timings,
        fmt_rate(steps / wall),
        f"{cpu:.3f}",
        fmt_rate(steps / cpu),
        f"{meanT:.4f}",
    )


def walls(runs: list[dict[str, Any]]) -> str:
    return f"median of {len(runs)}: " + ", ".join(f"{r['wall']:.3f}" for r in runs)


def results_table(rr: Repeats, mz: dict[str, Any], sm: Summary, here: str) -> list[str]:
    """The markdown table of the variants: societies, agent-steps, times and rates, mean T_s."""
    S, steps = sm.S, sm.agent_steps
    rows = [
        table_row(
            f"cooplab (run_cpr, InMemorySaver, durability=exit; {here})",
            S,
            steps,
            sm.coop_wall,
            walls(rr.coop),
            sm.coop_cpu,
            sm.coop_mean_T,
        )
    ]
    if rr.base:
        rows.append(
            table_row(
                f"cooplab BEFORE (the same; baseline checkout {rr.base_commit})",
                S,
                steps,
                median_wall(rr.base),
                walls(rr.base),
                median_cpu(rr.base),
                float(rr.base[0]["T_s"].mean()),
            )
        )
    rows += [
        table_row(
            "cooplab, no checkpointer (info)",
            S,
            steps,
            rr.nock["wall"],
            "1 run",
            rr.nock["cpu"],
            float(rr.nock["T_s"].mean()),
        ),
        table_row(
            "plain numpy floor (same generators)",
            S,
            steps,
            sm.floor_wall,
            walls(rr.floor),
            sm.floor_cpu,
            sm.floor_mean_T,
        ),
        table_row(
            "info: numpy, finished societies dropped (own streams)",
            S,
            sm.compact_steps,
            sm.compact_wall,
            walls(rr.compact),
            sm.compact_cpu,
            float(rr.compact[0]["T_s"].mean()),
        ),
        table_row(
            sm.mesa_label, mz["societies"], mz["agent_steps"], mz["wall"], "1 run", mz["cpu"], float(mz["T_s"].mean())
        ),
    ]
    head = (
        "variant",
        "societies",
        "agent-steps",
        "wall s",
        "timings",
        "agent-steps/s",
        "CPU s",
        "agent-steps/CPU-s",
        "mean T_s",
    )
    table = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return table + ["| " + " | ".join(r) + " |" for r in rows]


def span(xs: list[float], fmt: str) -> str:
    return f"{format(min(xs), fmt)} / {format(statistics.median(xs), fmt)}"


def ratio_table(sm: Summary, base_commit: str | None, here: str) -> list[str]:
    """The markdown table of the ratios against the targets, before (the baseline) and after."""
    rhead = (
        "cooplab",
        "time / floor's, wall (min / median)",
        "time / floor's, CPU (min / median)",
        "agent-steps/s / Mesa's, wall (min / median)",
        "agent-steps/s / Mesa's, CPU (min / median)",
    )
    rtable = ["| " + " | ".join(rhead) + " |", "|" + "|".join("---" for _ in rhead) + "|"]
    labelled: list[tuple[str, dict[str, list[float]]]] = []
    if sm.before is not None:
        labelled.append((f"before (baseline checkout {base_commit})", sm.before))
    labelled.append((f"after ({here})", sm.after))
    for label, r in labelled:
        rtable.append(
            f"| {label} | {span(r['floor_wall'], '.2f')} | {span(r['floor_cpu'], '.2f')} | "
            f"{span(r['mesa_wall'], ',.1f')} | {span(r['mesa_cpu'], ',.1f')} |"
        )
    rtable.append(f"| target (issue 41, point 4) | <= {TARGET_FLOOR} | | >= {TARGET_MESA:g} | |")
    return rtable


def command_line(args: argparse.Namespace) -> str:
    """The command line of this run as the report quotes it."""
    how = f" --baseline {args.baseline}" if args.baseline is not None else ""
    return (
        "`.venv/bin/python benchmarks/bench_cpr.py"
        + (" --quick" if args.quick else "")
        + ("" if args.replicates is None else f" --replicates {args.replicates}")
        + ("" if args.repeats == 3 else f" --repeats {args.repeats}")
        + ("" if args.mesa_reps is None else f" --mesa-reps {args.mesa_reps}")
        + ("" if args.mesa_max_seconds == 600.0 else f" --mesa-max-seconds {args.mesa_max_seconds:g}")
        + how
        + "`"
    )


def report_lines(
    args: argparse.Namespace,
    started: _dt.datetime,
    info: dict[str, str],
    conds: list[Condition],
    reps: int,
    rr: Repeats,
    mz: dict[str, Any],
    sm: Summary,
    table: list[str],
    rtable: list[str],
) -> list[str]:
    """The results section: how it was run, the two tables, and what they say."""
    C, N, T = len(conds), conds[0].params.N, conds[0].params.T
    S, agent_steps, rounds = sm.S, sm.agent_steps, sm.rounds
    cmp_, cmp_c = sm.cmp_mesa, sm.cmp_compact
    return [
        SECTION,
        "",
        f"Run {started:%Y-%m-%d %H:%M UTC} with "
        + command_line(args)
        + (" (QUICK SMOKE RUN, not the benchmark)" if args.quick else "")
        + ".",
        "",
        f"- Machine: {info['cpu_model']} (lscpu), {info['cpus']} CPUs, shared with other engineers' jobs; "
        f"`{info['uname_a']}`.",
        f"- Load (`uptime`) at the start: `{info['uptime']}`; at the end: `{uptime()}`. Timings on this machine are "
        "noisy, so "
        "every ratio below is taken within one repeat (the runs of a repeat follow each other) and reported as min / "
        "median "
        "over the repeats; CPU time (`time.process_time`) is the steadier measure when the load is high.",
        f"- Python {info['python']}, numpy {info['numpy']}, langgraph {info['langgraph']} "
        f"(langgraph-checkpoint {info['langgraph-checkpoint']}), mesa {info['mesa']}",
        f"- Workload: Fig. 3 grid of `tasks/cpr/validation.py` ({len(FIG3_BETAS)} beta x {len(FIG3_RS)} r = {C} cells, "
        "mixed population, "
        f"default parameters), N = {N} agents, T = {T} rounds, {reps} replicates/cell = {S:,} societies, seed "
        f"{args.seed}. "
        f"The batch ran {rounds} graph rounds (until every society had collapsed or hit the cap).",
        "- Agent-steps: sum over societies and simulated rounds (collapse round included) of the agents alive at the "
        "start of the round; counted the same way for all variants. Wall time of cooplab and the floor includes "
        "`init_state` (and, for cooplab, graph compilation and the exit checkpoint).",
        *(
            [
                f"- Before and after in the same run: `--baseline {args.baseline}` is another checkout of cooplab "
                "(commit "
                f"{rr.base_commit}); its `run_cpr` ran the same workload in a worker process of the same interpreter "
                "that imports "
                "cooplab from that checkout, timed there as here, once per repeat after this checkout's runs (never at "
                "the same time). "
                f"Its survival times and efficiency sums equal this checkout's, society by society (asserted)."
            ]
            if rr.base
            else []
        ),
        "",
        *table,
        "",
        *rtable,
        "",
        f"- **cooplab / numpy-floor time ratio: {sm.time_ratio:.2f}x** (median over the repeats, wall; CPU "
        f"{sm.cpu_time_ratio:.2f}x; "
        f"target <= {TARGET_FLOOR}x): " + ("**met**" if sm.ok1 else "**NOT met**"),
        f"- **cooplab / Mesa speed ratio (agent-steps/s): {sm.speed_ratio:,.1f}x** (median, wall; CPU "
        f"{sm.cpu_speed_ratio:,.1f}x; "
        f"target >= {TARGET_MESA:g}x): " + ("**met**" if sm.ok2 else "**NOT met**"),
        f"- Floor exactness: same seed, same `phase_rng(seed, round, phase)` generators in the same order; survival "
        f"times equal society by society for all {S:,} societies (mean T_s {sm.coop_mean_T:.4f} in both), "
        "per-society efficiency sums equal to 1e-12, agent-step counts equal (asserted in the script).",
        (
            f"- Mesa was measured on a SUBSET: {mz['passes']} whole pass(es) of one replicate per cell over all {C} "
            "cells "
            f"= {mz['societies']:,} of the {S:,} societies"
            if sm.subset
            else f"- Mesa ran the same full sweep ({mz['societies']:,} societies, one `mesa.Model` each, run one after "
            "another)"
        )
        + f" ({mz['agent_steps']:,} agent-steps, {mz['wall']:.1f} s, model construction included); it uses its "
        "own random streams (`Model.random`, seeded per society), so it matches cooplab only statistically. "
        f"Mean T_s on the same {cmp_['cells']} cells, cells weighted equally: Mesa {cmp_['mean_a']:.3f} vs cooplab "
        f"{cmp_['mean_b']:.3f} (difference {cmp_['diff']:+.3f} +- {cmp_['se']:.3f} s.e., stratified z = "
        f"{cmp_['z']:.2f}, "
        f"p = {cmp_['p']:.2g}); {cmp_['cells_within_2se']}/{cmp_['cells']} cells differ by less than 2 s.e.",
        "- The floor omits what is not model semantics: LangGraph itself, cooplab's per-round history record "
        "(17 metrics per round for the running societies) and the propose/vote generators that the default policies "
        "never use. "
        "cooplab and the floor both compute only the societies still running and drop the finished ones from their "
        "arrays at "
        "the end of each round (cooplab: the state's running block, `tasks/cpr/state.py`; the floor: its own compacted "
        "arrays), "
        "and both draw every per-society random array for all S societies and use the running rows, which keeps their "
        "random draws identical to each other and to the earlier masked code.",
        f"- Info row (not a target): the same model in numpy computing only the societies still running "
        f"({sm.compact_wall:.3f} s, {sm.compact_rate / sm.mesa_rate:,.1f}x Mesa's agent-steps/s). It draws other "
        "random streams, so it "
        f"is checked statistically: mean T_s {cmp_c['mean_a']:.3f} vs cooplab {cmp_c['mean_b']:.3f} (z = "
        f"{cmp_c['z']:.2f}, "
        f"p = {cmp_c['p']:.2g}). Live agent-steps are {agent_steps:,} of the {S * N * rounds:,} agent slots of "
        "the "
        f"batch's rounds ({100 * agent_steps / (S * N * rounds):.0f}%); cooplab and the floor compute only the "
        "live "
        "societies, but still draw the random arrays for all slots (the price of exact reproduction).",
        f"- cooplab over the floor (from the medians): {sm.coop_wall - sm.floor_wall:+.3f} s wall "
        f"({sm.coop_wall / sm.floor_wall - 1:+.0%}), "
        f"{sm.coop_cpu - sm.floor_cpu:+.3f} s CPU (split by cause below). The InMemorySaver exit checkpoint accounts "
        "for about "
        f"{sm.coop_cpu - rr.nock['cpu']:+.3f} s CPU (checkpointed median minus the single uncheckpointed run; wall: "
        f"{sm.coop_wall - rr.nock['wall']:+.3f} s, noisier).",
    ]


def cpu_split_lines(
    conds: list[Condition], reps: int, seed: int, mz: dict[str, Any], sm: Summary
) -> tuple[list[str], str]:
    """One more cooplab run and floor run with their CPU time split by cause, LangGraph's own cost
    per superstep, and a cProfile of one more cooplab run: the lines for the results section and the
    text printed (the split and the profile)."""
    split = time_split(conds, reps, seed)
    mesa_cpu_per_step = mz["cpu"] / mz["agent_steps"]
    lines = [
        "",
        "Where the CPU time goes: one more checkpointed cooplab run and one floor run, each call timed with "
        "`time.thread_time` (exclusive times of nested calls; the untimed rest is LangGraph for cooplab, "
        "bookkeeping for "
        "the floor):",
        "",
        *split_table(split, mesa_cpu_per_step, sm.agent_steps),
    ]
    alone = langgraph_alone(conds, seed)
    lg_real = split["cooplab"]["langgraph"]
    steps = sm.rounds * len(phases_for_batch([c.params for c in conds]))
    lines += [
        "",
        "LangGraph itself: replaying the node updates of a small batch (one replicate a cell) through the same "
        "graph, "
        f"with no array work between the steps, costs {alone['cpu']:.3f} s CPU for {alone['steps']} supersteps "
        f"({1e6 * alone['cpu'] / alone['steps']:.0f} us each, the exit checkpoint of that small state included); "
        "in the "
        f"run above the untimed rest is {lg_real:.3f} s for {steps} node steps "
        f"({1e6 * lg_real / steps:.0f} us each): the same Python work runs slower after each node's "
        "numpy work has pushed it out of the CPU caches.",
    ]
    prof_text, _summary = profile_cooplab(conds, reps, seed)
    prof_text = "\n".join(split_table(split, mesa_cpu_per_step, sm.agent_steps)) + "\n\n" + prof_text
    return lines, prof_text


def print_summary(table: list[str], rtable: list[str], sm: Summary, prof_text: str | None) -> None:
    print()
    print("\n".join(table))
    print()
    print("\n".join(rtable))
    print()
    print(
        f"cooplab/floor time ratio {sm.time_ratio:.2f}x (target <= {TARGET_FLOOR}x: {'met' if sm.ok1 else 'NOT met'}); "
        f"cooplab/Mesa speed ratio {sm.speed_ratio:,.1f}x (target >= {TARGET_MESA:g}x: "
        f"{'met' if sm.ok2 else 'NOT met'})"
    )
    print(f"on CPU time: cooplab/floor {sm.cpu_time_ratio:.2f}x, cooplab/Mesa {sm.cpu_speed_ratio:,.1f}x")
    cmp_ = sm.cmp_mesa
    print(
        f"mean T_s: cooplab {sm.coop_mean_T:.4f} == floor {sm.floor_mean_T:.4f} (exact, all {sm.S} societies); "
        f"Mesa{' (subset)' if sm.subset else ''} {cmp_['mean_a']:.3f} vs cooplab same cells {cmp_['mean_b']:.3f}, "
        f"z = {cmp_['z']:.2f}, p = {cmp_['p']:.2g}"
    )
    if prof_text:
        print()
        print(prof_text)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    reps: int = args.replicates or (3 if args.quick else 100)
    mesa_reps: int = args.mesa_reps if args.mesa_reps is not None else reps
    out: Path | None = args.out if args.out is not None else (None if args.quick else HERE / "RESULTS.md")
    conds, _meta = fig3_conditions()
    C, N, T = len(conds), conds[0].params.N, conds[0].params.T
    S = C * reps
    started = _dt.datetime.now(_dt.timezone.utc)
    info = machine_info()
    print(
        f"CPR Fig. 3 benchmark: {len(FIG3_BETAS)} beta x {len(FIG3_RS)} r = {C} cells x {reps} replicates = {S} "
        "societies, "
        f"N = {N}, T = {T}, seed {args.seed}",
        flush=True,
    )
    print("machine: " + info["uname_a"] + f" | nproc {info['nproc']} | load {info['load']}", flush=True)

    rr = time_repeats(conds, reps, args.seed, args.repeats, args.baseline)
    check_exact(rr)
    mz = measure_mesa(conds, args.seed, mesa_reps, args.mesa_max_seconds)
    sm = summarize(rr, mz, S, C)
    here = f"this checkout, {info['commit']}"
    table = results_table(rr, mz, sm, here)
    rtable = ratio_table(sm, rr.base_commit, here)
    lines = report_lines(args, started, info, conds, reps, rr, mz, sm, table, rtable)
    prof_text = None
    if args.profile == "always" or (args.profile == "auto" and not (sm.ok1 and sm.ok2)):
        more, prof_text = cpu_split_lines(conds, reps, args.seed, mz, sm)
        lines += more
    section = "\n".join(lines) + "\n"

    print_summary(table, rtable, sm, prof_text)
    if out is not None:
        replace_section(Path(out), section)
        print(f"wrote section '{SECTION}' of {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
