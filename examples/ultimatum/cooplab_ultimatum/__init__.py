"""A repeated ultimatum game as a cooplab task: the example of a task that lives outside cooplab.

The game is that of Güth, Schmittberger and Schwarze (1982), "An experimental analysis of
ultimatum bargaining" (Journal of Economic Behavior and Organization 3: 367-388): a proposer
offers a responder part of a pie; if the responder accepts, the pie is split as offered, otherwise
both get nothing. Here ``replicates`` societies of ``n_players`` play ``rounds`` rounds, all
vectorized with numpy; each round every society is paired anew at random (the first of a pair
proposes). Every draw comes from ``phase_rng(seed, round, phase)``, so a resumed run draws what
the uninterrupted run drew.

Rule players carry an offer share p and an acceptance threshold q (accept iff offer >= q), drawn
uniformly within ``spread`` of ``offer`` and ``threshold``. After each round a share ``imitation``
of them compare their payoff of the round with a random peer's and copy the peer's (p, q), plus
Gaussian noise, with the Fermi probability of selection strength ``beta``: a simplified version of
the evolutionary ultimatum game of Nowak, Page and Sigmund (2000), "Fairness versus reason in the
ultimatum game" (Science 289: 1773-1775), without their reputation; as they found, selection then
drives offers and thresholds down, slowly (a mean offer of 0.40 falls to about 0.33 in 1,000
rounds, 20 societies of 20 players, default rule parameters).

LLM players (:mod:`cooplab_ultimatum.llm`) decide every offer and every response; an answer still
invalid after three attempts falls back to the player's rule (offer p; accept iff the offer is at
least q). LLM players do not imitate. Tables: ``games`` (one row per game) and ``rounds`` (per
replicate and round: mean offer share, acceptance rate, mean payoff per player).
"""

from __future__ import annotations

from typing import Any, TypedDict

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from cooplab.world import (
    AppendLog,
    RunInfo,
    Task,
    TaskConfig,
    imitation_probability,
    phase_rng,
    runfiles,
    sample_peer,
    write_table,
)

MAX_GAMES = 10_000_000  # replicates x n_players / 2 x rounds: the history must fit in memory


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # a typo or "5" for 5 is an error, not a guess
    n_players: int = Field(
        4, ge=2, le=1_000, multiple_of=2, description="players per society (even: all are paired each round)"
    )
    replicates: int = Field(1, ge=1, le=1_000, description="independent societies run side by side")
    rounds: int = Field(10, ge=1, le=100_000, description="rounds of the game")
    pie: float = Field(10.0, gt=0, le=1e6, description="coins to divide in each game")
    offer: float = Field(0.4, ge=0, le=1, description="rule players' mean initial offer, as a share of the pie")
    threshold: float = Field(0.3, ge=0, le=1, description="rule players' mean initial acceptance threshold (share)")
    spread: float = Field(0.1, ge=0, le=0.5, description="initial traits are uniform within +-spread of the means")
    imitation: float = Field(
        0.1, ge=0, le=1, description="share of rule players who may imitate a peer each round (0: fixed)"
    )
    beta: float = Field(1.0, ge=0, le=100, description="selection strength of the Fermi imitation rule (per coin)")
    noise: float = Field(0.02, ge=0, le=0.5, description="s.d. of the noise added to imitated traits")

    @field_validator("rounds")
    @classmethod
    def _fits(cls, rounds: int, info: ValidationInfo) -> int:
        games = info.data.get("replicates", 1) * info.data.get("n_players", 2) // 2 * rounds
        if games > MAX_GAMES:
            raise ValueError(f"replicates x n_players / 2 x rounds must be at most {MAX_GAMES:,} games, got {games:,}")
        return rounds


class Results(runfiles.Results):
    """What a run writes in summary.json beside the runner's fields (its status, seed, ledger ...):
    one field per entry, typed and bounded, validated when the file is written and read."""

    replicates: runfiles.Count
    n_players: runfiles.Count
    pie: float = Field(gt=0)
    rounds_completed: runfiles.Count
    mean_offer: runfiles.Share | None = Field(description="mean offer as a share of the pie (null before any round)")
    mean_offer_last_round: runfiles.Share | None
    acceptance_rate: runfiles.Share | None
    mean_payoff: float | None = Field(ge=0, description="coins per player per round")


class State(TypedDict):
    """The graph's state. Every key is there when a node reads it: init_state sets the first nine, and
    each round's pair, offer and respond nodes set the round's keys before the nodes after them read them
    (a node returns only the keys it changes)."""

    seed: int
    round: int  # the round being played (1-based); > max_round when the run is over
    max_round: int
    p: np.ndarray  # (S, N) offer share of each player's rule
    q: np.ndarray  # (S, N) acceptance threshold of each player's rule
    earned: np.ndarray  # (S, N) coins earned so far
    proposer: np.ndarray  # (S, N/2) this round's pairs: proposer k meets responder k
    responder: np.ndarray
    offer: np.ndarray  # (S, N/2) share offered
    accepted: np.ndarray  # (S, N/2) bool
    history: AppendLog  # one record per round (checkpoints store only the new record)
    decisions: AppendLog  # LLM runs: one row per decision
    ledger: AppendLog  # LLM runs: the credit ledger's audit trail


# --- one round: pair, offer, respond, settle (the nodes of the graph) ----------------------
def of(state: State, trait: str, who: str) -> np.ndarray:
    """(S, N/2) ``trait`` of this round's proposers or responders."""
    return np.take_along_axis(state[trait], state[who], axis=1)


def pair(state: State) -> dict:
    S, N = state["p"].shape
    order = phase_rng(state["seed"], state["round"], "pair").permuted(np.tile(np.arange(N), (S, 1)), axis=1)
    return {"proposer": order[:, 0::2], "responder": order[:, 1::2]}


def rule_offer(state: State) -> dict:
    return {"offer": of(state, "p", "proposer")}


def rule_respond(state: State) -> dict:
    return {"accepted": state["offer"] >= of(state, "q", "responder")}


def settle_node(P: Params, imitate: bool):
    def settle(state: State) -> dict:
        t, (S, N), acc, share = int(state["round"]), state["p"].shape, state["accepted"].astype(bool), state["offer"]
        gain = np.zeros((S, N))
        np.put_along_axis(gain, state["proposer"], np.where(acc, P.pie * (1 - share), 0.0), axis=1)
        np.put_along_axis(gain, state["responder"], np.where(acc, P.pie * share, 0.0), axis=1)
        earned, p, q = state["earned"] + gain, state["p"], state["q"]
        if imitate and P.imitation > 0:  # Nowak, Page and Sigmund (2000): copy a more successful peer
            rng = phase_rng(state["seed"], t, "imitate")
            peer = sample_peer(np.ones((S, N), dtype=bool), rng)
            pr = imitation_probability(np.take_along_axis(gain, peer, axis=1), gain, P.beta)
            copy = (rng.random((S, N)) < P.imitation) & (rng.random((S, N)) < pr)
            p, q = (
                np.where(copy, np.clip(np.take_along_axis(x, peer, axis=1) + rng.normal(0, P.noise, (S, N)), 0, 1), x)
                for x in (p, q)
            )
        record = {
            "round": t,
            "proposer": state["proposer"],
            "responder": state["responder"],
            "offer": share,
            "accepted": acc,
        }
        return {"earned": earned, "p": p, "q": q, "history": [record], "round": t + 1}

    return settle


# --- the task ------------------------------------------------------------------------------
class UltimatumTask(Task):
    name = "ultimatum"
    title = "A repeated ultimatum game (Güth, Schmittberger and Schwarze 1982) with rule or LLM players."
    Params = Params
    Results = Results
    state_schema = State
    round_node = "settle"

    def n_agents(self, config: TaskConfig[Params]) -> int:
        return config.params.n_players

    def init_state(self, config: TaskConfig[Params]) -> dict[str, Any]:
        P, seed = config.params, config.seed
        rng = phase_rng(seed, 0, "traits")
        draw = lambda m: np.clip(m + rng.uniform(-P.spread, P.spread, (P.replicates, P.n_players)), 0.0, 1.0)  # noqa: E731
        return {
            "seed": seed,
            "round": 1,
            "max_round": P.rounds,
            "p": draw(P.offer),
            "q": draw(P.threshold),
            "earned": np.zeros((P.replicates, P.n_players)),
            "history": [],
            "decisions": [],
            "ledger": [],
        }

    def phases(self, config: TaskConfig[Params]) -> dict[str, Any]:
        P = config.params
        if config.agents == "llm":  # the LLM stack is imported only for LLM runs
            from cooplab_ultimatum.llm import llm_offer, llm_respond

            return {
                "pair": pair,
                "offer": llm_offer(P.pie),
                "respond": llm_respond(P.pie),
                "settle": settle_node(P, imitate=False),
            }
        return {"pair": pair, "offer": rule_offer, "respond": rule_respond, "settle": settle_node(P, imitate=True)}

    def outputs(self, final, config: TaskConfig[Params], run: RunInfo) -> Results:
        P, hist = config.params, final.get("history") or []
        S, M = P.replicates, P.n_players // 2
        col = lambda k: np.array([h[k] for h in hist]).ravel()  # noqa: E731 - (rounds, S, M) -> one value per game
        games = pd.DataFrame(
            {
                "round": np.repeat([h["round"] for h in hist], S * M).astype(int),
                "replicate": np.tile(np.repeat(np.arange(S), M), len(hist)),
                "proposer": col("proposer"),
                "responder": col("responder"),
                "share": col("offer"),
                "accepted": col("accepted").astype(bool),
            }
        )
        games["offer"] = games["share"] * P.pie
        rounds = games.groupby(["replicate", "round"], as_index=False).agg(
            mean_share=("share", "mean"), acceptance=("accepted", "mean")
        )
        rounds["mean_payoff"] = rounds["acceptance"] * P.pie / 2  # per player: each game splits the pie between two
        write_table(games, run.out, "games", csv=run.csv)
        write_table(rounds, run.out, "rounds", csv=run.csv)
        mean = lambda x: float(x.mean()) if len(x) else None  # noqa: E731
        last = games[games["round"] == len(hist)]
        return Results.of(
            {
                "replicates": S,
                "n_players": P.n_players,
                "pie": P.pie,
                "rounds_completed": len(hist),
                "mean_offer": mean(games["share"]),
                "mean_offer_last_round": mean(last["share"]),
                "acceptance_rate": mean(games["accepted"]),
                "mean_payoff": mean(games["accepted"] * P.pie / 2),
            }
        )

    def report(self, summary: runfiles.RunSummary[Results]) -> list[str]:
        r = summary.results
        if r is None or r.mean_offer is None or r.mean_offer_last_round is None:
            return [f"ultimatum: no round completed (status {summary.status})"]
        return [
            f"ultimatum: {r.rounds_completed} rounds, {r.replicates} x {r.n_players} players: mean offer "
            f"{r.mean_offer:.3f} of the pie (last round {r.mean_offer_last_round:.3f}), acceptance rate "
            f"{r.acceptance_rate or 0.0:.3f}, mean payoff {r.mean_payoff or 0.0:.3f} coins per player per round",
            "tables: summary.json, games.*, rounds.*",
        ]


TASK = UltimatumTask()
