"""The ledger journals its budget decisions on model calls (issue 37, point 5): a reservation
granted or released, a call refused. A resumed ledger is then the ledger of the moment of the
interruption: the reservations an interrupted process held are in flight again (and taken over by
the call made again, without a new check), and a call the budget refused is refused again, so a
budget stop is where the uninterrupted run stopped however the calls before it are replayed."""

from decimal import Decimal

import pytest

from cooplab.graphs.ledger import BudgetExhausted, Ledger, LedgerJournal, Rates


def _ledger(budget: str | None, journal: LedgerJournal | None = None) -> Ledger:
    led = Ledger(budget=None if budget is None else Decimal(budget), default_rates=Rates(Decimal("1"), Decimal("1")))
    if journal is not None:
        led.on_commit, led.on_decision = journal.append, journal.record
    return led


def _charge(led: Ledger, call_id: str, res=None, tokens: int = 100, cached: bool = False):
    return led.charge(
        call_id=call_id,
        model="m",
        agent="a",
        round=1,
        phase="p",
        input_tokens=tokens,
        output_tokens=0,
        reservation=res,
        cached=cached,
    )


def _resumed(journal: LedgerJournal, budget: str, entries=()) -> Ledger:
    led = _ledger(budget, journal)
    granted, refused = journal.decisions(led.budget)
    led.restore(list(entries), journal.unrecorded(list(entries)), granted=granted, refused=refused)
    return led


def test_a_refused_call_is_journaled_and_refused_again_after_a_resume(tmp_path):
    journal = LedgerJournal(tmp_path / "j.jsonl")
    first = _ledger("1", journal)
    a = first.reserve(Decimal("0.6"), "a")
    with pytest.raises(BudgetExhausted) as refused:
        first.reserve(Decimal("0.5"), "b")  # 0.6 in flight + 0.5 > 1
    _charge(first, "a", a)  # a costs 0.1 in the end: now 0.5 would fit
    # the process is killed here; resumed, "a" replays from the cache and "b" is asked again
    resumed = _resumed(journal, "1")
    assert resumed.held == Decimal("0.1")
    _charge(resumed, "a", cached=True)  # adopted: the live call it was
    with pytest.raises(BudgetExhausted) as again:
        resumed.reserve(Decimal("0.5"), "b")
    assert str(again.value) == str(refused.value)  # the same stop, the same words
    resumed.reserve(Decimal("0.5"), "c")  # a call never decided before is decided on the numbers
    # a raised budget forgets the refusals: the call is decided anew
    raised = _resumed(journal, "2")
    raised.reserve(Decimal("0.5"), "b")


def test_a_cached_replay_refused_before_is_refused_again(tmp_path):
    journal = LedgerJournal(tmp_path / "j.jsonl")
    first = _ledger("0.05", journal)
    with pytest.raises(BudgetExhausted):
        _charge(first, "x", cached=True)  # a replay costing 0.1 does not fit 0.05
    resumed = _resumed(journal, "0.05")
    with pytest.raises(BudgetExhausted):
        _charge(resumed, "x", cached=True)
    assert resumed.spent == 0 and resumed.entries == []


def test_held_reservations_are_in_flight_again_and_taken_over_without_a_check(tmp_path):
    journal = LedgerJournal(tmp_path / "j.jsonl")
    first = _ledger("1", journal)
    first.reserve(Decimal("0.4"), "a")
    b = first.reserve(Decimal("0.4"), "b")
    _charge(first, "b", b)  # b answered (0.1); a is still at the model when the process is killed
    resumed = _resumed(journal, "1")
    assert resumed.in_flight == Decimal("0.4") and resumed.held == Decimal(
        "0.1"
    )  # the ledger of the moment of the kill
    with pytest.raises(BudgetExhausted):
        resumed.reserve(Decimal("0.6"), "new")  # 0.1 paid + 0.4 held + 0.6 > 1: as the uninterrupted run saw it
    res = resumed.reserve(Decimal("0.4"), "a")  # a, made again, takes its reservation over
    assert resumed.in_flight == Decimal("0.4")
    _charge(resumed, "a", res)
    assert resumed.in_flight == 0
    # a reservation released (the call failed) is not held by a later resume
    again = _resumed(journal, "1")
    assert again.in_flight == 0


def test_a_reservation_no_call_takes_over_is_dropped_when_the_node_is_done(tmp_path):
    journal = LedgerJournal(tmp_path / "j.jsonl")
    first = _ledger("1", journal)
    first.reserve(Decimal("0.7"), "retry-of-an-answer-that-changed")
    resumed = _resumed(journal, "1")
    assert resumed.in_flight == Decimal("0.7")
    assert resumed.forget_granted() == 1 and resumed.in_flight == 0
    resumed.reserve(Decimal("0.9"), "next")


def test_released_reservations_and_damaged_lines(tmp_path):
    path = tmp_path / "j.jsonl"
    journal = LedgerJournal(path)
    first = _ledger("1", journal)
    first.release(first.reserve(Decimal("0.3"), "failed"))
    first.reserve(Decimal("0.2"), "open")
    with open(path, "a") as fh:
        fh.write(
            '{"event": "reserve", "call_id": "x", "amount": "-1"}\n{"event": "reserve", "call_id": "y", "amount": '
            '"NaN"}\n'
            '{"event": "refuse", "call_id": 7, "budget": "1", "message": "m"}\n[1, 2]\n{"event": "reser'
        )  # cut by a kill
    granted, refused = journal.decisions(Decimal("1"))
    assert granted == [("open", Decimal("0.2"))] and refused == {}
    _charge(
        _ledger("1", LedgerJournal(path)), "later"
    )  # the next process: the line cut short does not swallow its first
    assert [e["call_id"] for e in journal.entries()] == ["later"]


def test_the_cap_holds_under_a_journal_of_held_reservations(tmp_path):
    """Whatever the journal holds, spent + in flight never passes the budget."""
    journal = LedgerJournal(tmp_path / "j.jsonl")
    first = _ledger("1", journal)
    for i in range(3):
        first.reserve(Decimal("0.3"), f"c{i}")
    resumed = _resumed(journal, "1")
    assert resumed.in_flight == Decimal("0.9")
    with pytest.raises(BudgetExhausted):
        resumed.reserve(Decimal("0.2"), "d")
    res = resumed.reserve(Decimal("0.35"), "c0")  # made again with a larger bound: only the difference is checked
    assert resumed.in_flight == Decimal("0.95")
    with pytest.raises(BudgetExhausted):
        resumed.reserve(Decimal("0.4"), "c1")  # 0.95 - 0.3 + 0.4 > 1: refused, and its old reservation kept
    assert resumed.in_flight == Decimal("0.95")
    resumed.release(res)
    assert resumed.in_flight == Decimal("0.6")


def test_the_journal_file_stays_open_and_every_line_is_out_at_once(tmp_path, caplog):
    """The journal keeps its file open between lines; each line reaches the file as it is written (a
    reader, or a process killed right after, sees it), closing is safe twice, and a later line opens
    the file again. A journal that cannot be written warns once and the ledger goes on."""
    from cooplab.graphs.ledger import close_journal

    path = tmp_path / "j.jsonl"
    journal = LedgerJournal(path)
    ledger = _ledger("1", journal)
    ledger.reserve(Decimal("0.1"), "a")
    assert path.read_text().count("\n") == 1 and journal._fh is not None  # written through, file kept
    first = journal._fh
    _charge(ledger, "b")
    assert journal._fh is first and [e["call_id"] for e in journal.entries()] == ["b"]
    close_journal(ledger)
    close_journal(ledger)
    assert journal._fh is None and first.closed
    _charge(ledger, "c")
    assert [e["call_id"] for e in journal.entries()] == ["b", "c"] and journal._fh is not None
    close_journal(Ledger())  # a ledger without a journal: nothing to close
    journal.close()

    bad = LedgerJournal(tmp_path)  # a folder: never writable as a file
    broken = _ledger("1", bad)
    with caplog.at_level("WARNING", logger="cooplab.graphs.ledger"):
        _charge(broken, "d")
        _charge(broken, "e")
    assert len([r for r in caplog.records if "cannot be written" in r.getMessage()]) == 1
    assert bad._fh is None and len(broken.entries) == 2
