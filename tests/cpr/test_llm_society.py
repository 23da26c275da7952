"""The LLM CPR society (paper Figs. 8-11) with scripted models: what each prompt shows and
hides, call counts per condition, voting and ties, agents dying mid-run."""

import asyncio
import json

import numpy as np
import pandas as pd
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from cooplab.agents.decisions import LLMService
from cooplab.agents.models import ModelSpec, ScriptedChatModel
from cooplab.evals.typed import as_frame, column, tuples
from cooplab.graphs.context import CoopContext
from cooplab.graphs.society import build_society
from cooplab.tasks.cpr import llm as la
from cooplab.tasks.cpr.params import ABLATIONS, make_params
from cooplab.tasks.cpr.society import Condition
from cooplab.tasks.cpr.state import CPRState
from cooplab.tasks.cpr.task import init_llm_state, llm_phases

ANSWERS = {
    "harvest": ['{"effort": 0.1}', '{"effort": 0.3}'],
    "punish": ['{"punish": null}', '{"punish": 1}', '{"punish": 2}'],
    "propose": [
        '{"belief": "Take little.", "proposal": "Nobody takes more than ten tonnes."}',
        '{"belief": "Take what you need.", "proposal": "Fish freely while stocks are high."}',
    ],
    "vote": ['{"vote": 1}', '{"vote": 2}'],
}


class Recorder(ScriptedChatModel):
    """Scripted answers by phase, picked by prompt hash; records every prompt it is shown."""

    seen: list = []

    def _answer(self, messages, kwargs):
        self.seen.append((kwargs.get("phase"), [str(m.content) for m in messages]))
        return super()._answer(messages, kwargs)


def run_society(ablation="full", N=4, T=3, population="mixed", answers=ANSWERS, **params):
    p = make_params(N=N, T=T, r=0.6, **ABLATIONS[ablation], **params)
    model = Recorder(by_phase=answers, select="prompt_hash", seen=[])
    svc = LLMService(models={"default": (ModelSpec("scripted", "rec"), model)})
    phases = llm_phases(p)
    graph = build_society(phases, CPRState, checkpointer=InMemorySaver(), context_schema=CoopContext)
    state = init_llm_state([Condition(p, population)], 1, 5)
    final = asyncio.run(
        graph.ainvoke(state, {"configurable": {"thread_id": "t"}, "recursion_limit": 500}, context=CoopContext(llm=svc))
    )
    return final, model.seen, svc


def calls_per_round(final):
    d = pd.DataFrame(final["decisions"])
    return d.groupby("round").size().to_dict(), d


@pytest.mark.parametrize("ablation,per_agent", [("full", 4), ("ogd", 4), ("osl", 2), ("neither", 2)])
def test_calls_per_agent_per_round_by_condition(ablation, per_agent):
    final, seen, svc = run_society(ablation, N=4, T=3)
    counts, d = calls_per_round(final)
    lived = int(final["T_s"][0])
    assert lived == 3
    options = {h["round"]: h["options"] for h in final.get("norm_history", [])}
    for r in range(1, lived):
        if per_agent == 4:  # effort, punish, propose, and a vote when there are 2+ distinct proposals
            assert counts[r] == 4 * 3 + (4 if options[r] > 1 else 0)
        else:
            assert counts[r] == 4 * 2
    assert counts[lived] == 4 * 2  # the last round has no propose/vote: nothing left to govern
    if per_agent == 4:
        assert any(v > 1 for v in options.values())  # votes did happen
    assert len(seen) == d["attempts"].sum()  # model calls == attempts recorded


def test_payoff_function_and_dynamics_never_appear_in_any_prompt():
    _, seen, _ = run_society("full")
    text = "\n".join("\n".join(msgs) for _, msgs in seen).lower()
    for secret in (
        "alpha",
        "logistic",
        "regrow",
        "carrying capacity",
        "r * ",
        "h_i",
        "payoff",
        "0.6",
        "beta",
        "gamma",
        "consum",
    ):
        assert secret not in text, secret


def test_peer_summaries_appear_only_where_social_learning_is_on():
    for ablation, shown in (("full", True), ("osl", True), ("ogd", False), ("neither", False)):
        _, seen, _ = run_society(ablation, T=3)
        effort_prompts = [m[-1] for ph, m in seen if ph == "harvest" and "Round 1." not in m[-1]]
        assert effort_prompts
        has_peers = ["other fishers did last round" in p for p in effort_prompts]
        assert all(has_peers) if shown else not any(has_peers), ablation


def test_every_prompt_of_a_phase_begins_with_what_does_not_change():
    """The system prompt, then the phase's instructions and answer format, then the round's
    numbers: a model that keeps what it read reuses all of the fixed part of an agent's prompt
    (issue 41, point 5)."""
    _, seen, _ = run_society("full", T=3)
    for phase in ("harvest", "punish", "propose", "vote"):
        prompts = [m[1] for ph, m in seen if ph == phase]  # (m[-1] of a retry is the feedback on the invalid answer)
        head = prompts[0].split("\n\n")[0]
        assert len(prompts) > 1 and "Reply with one JSON object" in head, phase
        assert all(p.startswith(head + "\n\n") for p in prompts), phase  # the same instructions, then what changes
        assert not any(
            ch.isdigit() for ch in head.replace("0 (stay home)", "").replace("1 (fish", "").replace("from 0 to 1", "")
        ), phase


def test_winning_norm_is_broadcast_verbatim_next_round():
    final, seen, _ = run_society("full", T=3)
    adopted = {h["round"]: h["norm"] for h in final["norm_history"]}
    assert adopted[1] in ("Nobody takes more than ten tonnes.", "Fish freely while stocks are high.")
    round2 = [m[-1] for ph, m in seen if ph in ("harvest", "punish") and ("Round 2." in m[-1])]
    assert round2 and all(f'"{adopted[1]}"' in p for p in round2)
    round1 = [m[-1] for ph, m in seen if ph == "harvest" and "Round 1." in m[-1]]
    assert all("has not adopted any rule yet" in p for p in round1)


def test_no_shared_norm_in_osl_and_neither():
    for ablation in ("osl", "neither"):
        final, seen, _ = run_society(ablation)
        assert not final.get("norm_history")
        assert all("no shared rule" in m[-1] for ph, m in seen if ph == "harvest")


def test_voting_plurality_and_seeded_tie_break():
    rng = np.random.default_rng(0)
    assert la.plurality_winner(["a", "b", "c"], [2, 2, 1], rng) == ("b", False)
    picks = {la.plurality_winner(["a", "b", "c"], [1, 2, 3, 1, 2], np.random.default_rng(s))[0] for s in range(40)}
    assert picks == {"a", "b"}  # only the tied leaders can win, each sometimes
    w1 = la.plurality_winner(["a", "b"], [1, 2], np.random.default_rng(7))
    assert w1 == la.plurality_winner(["a", "b"], [1, 2], np.random.default_rng(7)) and w1[1] is True
    assert la.distinct_proposals(["x", None, "y", "x"]) == ["x", "y"]


def test_vote_ties_in_a_run_are_recorded():
    answers = {**ANSWERS, "vote": ['{"vote": 1}', '{"vote": 2}']}
    final, _, _ = run_society("full", N=4, T=4, answers=answers)
    hist = pd.DataFrame(final["norm_history"])
    assert {"tie", "votes", "options"} <= set(hist.columns)
    for row in tuples(hist):
        counts = dict(json.loads(row.votes))
        if row.options > 1 and counts:
            top = max(counts.values())
            assert row.tie == (sum(1 for c in counts.values() if c == top) > 1)


def test_invalid_ids_fall_back_and_unknown_fisher_is_never_fined():
    answers = {**ANSWERS, "punish": ['{"punish": 99}'], "vote": ['{"vote": 17}']}
    final, _, _ = run_society("full", T=2, answers=answers)
    d = pd.DataFrame(final["decisions"])
    pun = as_frame(d[d.phase == "punish"])
    assert column(pun, "fallback_used").all() and (column(pun, "attempts") == 3).all()
    assert all(p == {"punish": None} for p in pun["parsed"])
    vote = as_frame(d[d.phase == "vote"])
    assert column(vote, "fallback_used").all()


def test_an_agent_who_starves_is_never_asked_again_and_the_run_ends():
    # agent 0 starts broke and stays home: it starves in round 1; the society collapses then
    answers = {**ANSWERS, "harvest": ['{"effort": 0.0}']}
    p = make_params(N=3, T=5, r=0.6, P0=1.0)
    model = Recorder(by_phase=answers, select="prompt_hash", seen=[])
    svc = LLMService(models={"default": (ModelSpec("scripted", "rec"), model)})
    graph = build_society(llm_phases(p), CPRState, checkpointer=InMemorySaver(), context_schema=CoopContext)
    state = init_llm_state([Condition(p, "mixed")], 1, 1)
    final = asyncio.run(
        graph.ainvoke(state, {"configurable": {"thread_id": "d"}, "recursion_limit": 500}, context=CoopContext(llm=svc))
    )
    assert final["T_s"][0] == 1 and final["collapse"][0] == 2
    d = pd.DataFrame(final["decisions"])
    assert set(d["round"]) == {1} and set(d["phase"]) == {"harvest", "punish"}  # no vote after the collapse


def test_initial_beliefs_follow_types():
    bank = la.belief_bank()
    final, _, _ = run_society("neither", N=6, T=1, population="mixed")
    types = final["agent_types"][0]
    assert types == ["altruistic"] * 3 + ["selfish"] * 3
    for t, b in zip(types, final["beliefs"][0], strict=False):
        assert b in bank[t]
    assert len(bank["altruistic"]) >= 3 and len(bank["selfish"]) >= 3


def test_finished_societies_in_a_replicate_batch_are_never_asked_again():
    # one batch: a broke condition whose societies starve in round 1 (effort 0), and a rich one that runs to T
    answers = {**ANSWERS, "harvest": ['{"effort": 0.0}']}
    conds = [
        Condition(make_params(N=3, T=4, r=0.6, P0=1.0), "mixed"),
        Condition(make_params(N=3, T=4, r=0.6, P0=1000.0), "mixed"),
    ]
    model = Recorder(by_phase=answers, select="prompt_hash", seen=[])
    svc = LLMService(models={"default": (ModelSpec("scripted", "rec"), model)})
    graph = build_society(
        llm_phases(conds[0].params), CPRState, checkpointer=InMemorySaver(), context_schema=CoopContext
    )
    state = init_llm_state(conds, 2, 1)
    final = asyncio.run(
        graph.ainvoke(state, {"configurable": {"thread_id": "b"}, "recursion_limit": 500}, context=CoopContext(llm=svc))
    )
    assert final["T_s"].tolist() == [1, 1, 4, 4] and final["collapse"].tolist() == [2, 2, 0, 0]
    d = pd.DataFrame(final["decisions"])
    assert set(d.loc[d["society"] < 2, "round"]) == {1}  # the starved societies: asked in round 1 only
    assert set(d.loc[d["society"] >= 2, "round"]) == {1, 2, 3, 4}  # the others keep being asked
    starved = d[d["society"] < 2]
    assert len(starved) == 2 * 3 * 2 and set(starved["phase"]) == {
        "harvest",
        "punish",
    }  # 2 societies x 3 agents x 2 phases


class _NoWalk(np.ndarray):
    """The living agents of a society, which may be indexed but never walked through one by one."""

    def __iter__(self):
        raise AssertionError("the peer draw walked through every living agent")


def _peers_before(rng, alive_idx, i, k=la.N_PEERS_SHOWN):
    """The peer draw as it was written first (a list of every other living agent)."""
    others = [int(j) for j in alive_idx if j != i]
    return sorted(rng.choice(others, size=min(k, len(others)), replace=False).tolist()) if others else []


def test_peer_draw_touches_only_the_drawn_peers_and_draws_what_it_always_drew():
    """A decision's peer draw costs the same in a society of 10 or of 10,000 (it never walks the
    living agents), and it draws the same peers and leaves the generator where the list-based
    draw did, so seeded runs keep their results."""
    r = np.random.default_rng(3)
    for trial in range(400):
        n = int(r.integers(1, 40)) if trial % 4 else int(r.integers(2_000, 12_000))
        alive = np.flatnonzero(r.random(n) < 0.3 + 0.7 * r.random())
        i = int(alive[r.integers(len(alive))]) if len(alive) and trial % 5 else int(r.integers(n))
        seed = int(r.integers(1 << 30))
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        got = la._peers(a, alive.view(_NoWalk), i)
        assert got == _peers_before(b, alive, i) and all(type(j) is int for j in got)
        assert a.random() == b.random()
