"""Calls paid before a resume and never checkpointed (the ledger journal's *unrecorded* calls) are
held: counted against the budget at once, but visible in ``spent`` only when their cached replay
reaches them, so a resumed run shows its agents the spending the original run showed at that
point (a prompt that shows the budget is then the same prompt, and the cache replays it)."""

from decimal import Decimal

import pytest

from cooplab.graphs.ledger import BudgetExhausted, Ledger, Rates


def _paid(ledger: Ledger, call_id: str, tokens_in: int = 1000, tokens_out: int = 0):
    return ledger.charge(
        call_id=call_id, model="m", agent="a", round=1, phase="p", input_tokens=tokens_in, output_tokens=tokens_out
    ).as_dict()


def _ledger(budget: str | None = None) -> Ledger:
    return Ledger(budget=None if budget is None else Decimal(budget), default_rates=Rates(Decimal("1"), Decimal("1")))


def test_a_held_call_is_in_spent_only_once_its_replay_adopts_it():
    first = _ledger()
    recorded = [_paid(first, "c1")]
    unrecorded = [_paid(first, "c2")]  # paid, then the process was killed before a checkpoint
    resumed = _ledger()
    resumed.restore(recorded, unrecorded)
    assert resumed.spent == Decimal("1") and resumed.held == Decimal("1")  # what the first run showed before c2
    assert resumed.totals()["cost_usd"] == "2" and resumed.totals()["calls"] == 2  # but it was paid
    with resumed.recording() as rows:
        e = resumed.charge(
            call_id="c2", model="m", agent="a", round=1, phase="p", input_tokens=1000, output_tokens=0, cached=True
        )
    assert not e.cached and [r.call_id for r in rows] == ["c2"]  # charged as the live call it was, once
    assert resumed.spent == Decimal("2") and resumed.held == 0 and resumed.totals()["cost_usd"] == "2"
    assert resumed.settle() == []


def test_held_calls_count_against_the_budget_and_unadopted_ones_are_settled():
    first = _ledger()
    recorded, unrecorded = [_paid(first, "c1")], [_paid(first, "c2")]
    resumed = _ledger("2.5")
    resumed.restore(recorded, unrecorded)
    with pytest.raises(BudgetExhausted, match="paid before the resume"):
        resumed.reserve(Decimal("0.6"))  # 1 spent + 1 held + 0.6 > 2.5
    res = resumed.reserve(Decimal("0.5"))
    resumed.charge(
        call_id="c2-again", model="m", agent="a", round=1, phase="p", input_tokens=500, output_tokens=0, reservation=res
    )
    left = resumed.settle()  # no cache: c2 was paid twice, and both payments are kept
    assert [e.call_id for e in left] == ["c2"]
    assert resumed.spent == Decimal("2.5") and resumed.held == 0
    assert [e.call_id for e in resumed.entries] == ["c1", "c2-again", "c2"]
