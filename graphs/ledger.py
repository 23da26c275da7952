"""The credit-budget ledger: one per run, shared by every node through the runtime context.

Each model call is charged its tokens at per-model rates (default: $0.0005 per 1K input and
$0.003 per 1K output tokens, the science-team paper's rates). Other resources are charged as
*units* of a kind (``charge_units``: e.g. ``sandbox_seconds`` of code execution) at a per-kind
rate, zero by default, so one ledger can account for compute as well as tokens. Amounts are
``Decimal`` so the sum of charges equals tokens x rates (and units x rates) to the cent and
beyond.

Safe under concurrency: a call first *reserves* an upper bound of its cost; the reservation is
refused when the budget cap would be exceeded (counting other calls' in-flight reservations),
and on completion the actual cost is *committed* and the reservation released. Spending
therefore never exceeds the cap: a charge larger than its reservation is refused (the model
layer makes reservations true upper bounds, see ``agents/usage.py``), and a charge without a
reservation (a cached replay, whose cost is known exactly) is checked against the cap under the
same lock. A charge that does not fit raises :class:`BudgetExhausted` and records nothing.

What a node charged reaches the run's state through :meth:`Ledger.recording` (see
``cooplab.graphs.nodes.charged``), so every checkpoint holds the audit trail a resumed run
restores the ledger from. A node that fails or is killed leaves no update, yet its calls were
paid: so every charge is also appended, as it is made, to the run's :class:`LedgerJournal`, and a
resumed ledger holds the checkpoint's entries plus the journal's entries no checkpoint holds
(*unrecorded*). A cached replay of an unrecorded call is charged as that call (once, as it was
paid), so a resumed run with a cache has the ledger of an uninterrupted one; without a cache the
resumed node pays again, and both payments are in the ledger.

Callers are identified by a string agent id (``"data.lead"``, ``"society 3 / agent 7"``; the
society decisions use ``"{society}:{agent}"``), an optional team and an optional round. Budgets,
rates and units must be finite and non-negative (``ValueError`` otherwise).
"""

from __future__ import annotations

import json
import logging
import operator
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import MISSING, dataclass, field, fields
from decimal import Decimal
from pathlib import Path
from typing import Any

PER_1K = Decimal(1000)
DEFAULT_RATES = (Decimal("0.0005"), Decimal("0.003"))  # USD per 1K input, per 1K output tokens
TOKENS = "tokens"  # the kind of a model call's entry


def call_id_of(key: str) -> str:
    """The ledger's id of a model call with the cache key ``key`` (also in the call's trace metadata)."""
    return key[:16]


#: the open :meth:`Ledger.recording` blocks of the current context: (ledger, the entries it collects)
_RECORDINGS: ContextVar[tuple[tuple["Ledger", list["Entry"]], ...]] = ContextVar(
    "cooplab_ledger_recordings", default=()
)


class BudgetExhausted(RuntimeError):
    """The budget cap leaves no room for another call."""


def checked_amount(value: Any, what: str) -> Decimal:
    """A finite, non-negative amount as ``Decimal`` (floats via their shortest text), else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (Decimal, int, float, str)):
        raise ValueError(f"{what} must be a number, got {value!r}")
    try:
        d = value if isinstance(value, Decimal) else Decimal(str(value).strip())
    except ArithmeticError:
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if not d.is_finite():
        raise ValueError(f"{what} must be finite, got {value}")
    if d < 0:
        raise ValueError(f"{what} must not be negative, got {value}")
    return d


def _count(value: Any, what: str) -> int:
    """A non-negative integer count (ints and numpy integers; no bools, floats or strings)."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None
    if n < 0:
        raise ValueError(f"{what} must not be negative, got {n}")
    return n


def _round(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"a round must be an integer or None, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"a round must be an integer or None, got {value!r}") from None


def _text(value: Any, what: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {value!r}")
    if nonempty and not value.strip():
        raise ValueError(f"{what} must not be empty")
    return value


def _optional_text(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string or None, got {value!r}")
    return value


def _kind(value: Any) -> str:
    kind = _text(value, "a charge's kind", nonempty=True)
    if kind == TOKENS:
        raise ValueError("the kind 'tokens' is reserved for model calls (use Ledger.charge)")
    return kind


@dataclass(frozen=True, init=False)
class Rates:
    """USD per 1K input and per 1K output tokens, held as exact Decimals. Given as Decimals, ints,
    numeric text or floats (a float by its shortest text: 0.1 is Decimal("0.1")); a price that is
    not a finite, non-negative number is a ValueError."""

    input_per_1k: Decimal
    output_per_1k: Decimal

    def __init__(
        self,
        input_per_1k: Decimal | float | str = DEFAULT_RATES[0],
        output_per_1k: Decimal | float | str = DEFAULT_RATES[1],
    ) -> None:
        object.__setattr__(self, "input_per_1k", checked_amount(input_per_1k, "the input price per 1K tokens"))
        object.__setattr__(self, "output_per_1k", checked_amount(output_per_1k, "the output price per 1K tokens"))

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        """cost = input_tokens / 1000 * rate_in + output_tokens / 1000 * rate_out."""
        return (
            Decimal(int(input_tokens)) * self.input_per_1k + Decimal(int(output_tokens)) * self.output_per_1k
        ) / PER_1K


@dataclass
class Entry:
    """One charge. Flat (every field a plain value): the entries become a Parquet table.

    ``kind`` is ``"tokens"`` for a model call (``input_tokens``/``output_tokens`` set, ``units``
    and ``rate`` None) or another kind (e.g. ``"sandbox_seconds"``: ``units`` charged at ``rate``
    per unit, both Decimal text; the token counts are 0). ``cost`` is Decimal text: exact."""

    call_id: str
    model: str
    agent: str
    round: int | None
    phase: str
    input_tokens: int
    output_tokens: int
    cost: str  # Decimal as text: exact
    cached: bool = False
    usage_error: str | None = None  # the endpoint reported impossible usage; charged at the call's bound
    team: str | None = None
    kind: str = TOKENS
    units: str | None = None  # non-token charges: the units charged (Decimal text)
    rate: str | None = None  # non-token charges: the price of one unit (Decimal text)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "Entry":
        """An entry from an audit-trail row, also one written before the ``team``/``kind``/
        ``units``/``rate`` fields existed (they get their defaults). Unknown or missing required
        fields and malformed values raise ValueError."""
        if not isinstance(row, dict):
            raise ValueError(f"a ledger row must be a mapping, got {type(row).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(row) - names)
        if unknown:
            raise ValueError(f"a ledger row has unknown fields {unknown}")
        required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
        missing = sorted(n for n in required if n not in row)
        if missing:
            raise ValueError(f"a ledger row lacks {missing}")
        e = cls(**row)
        e.round = _round(e.round)
        e.input_tokens = _count(e.input_tokens, "input tokens")
        e.output_tokens = _count(e.output_tokens, "output tokens")
        e.cost = str(checked_amount(e.cost, "a row's cost"))
        _text(e.kind, "a charge's kind", nonempty=True)
        for name in ("units", "rate"):
            v = getattr(e, name)
            if v is not None:
                setattr(e, name, str(checked_amount(v, f"a row's {name}")))
        e.cached = bool(e.cached)
        return e


@dataclass
class Reservation:
    amount: Decimal
    done: bool = False
    call_id: str | None = None  # a model call's id: its grant and release are journaled (see Ledger.reserve)


@dataclass
class Ledger:
    budget: Decimal | None = None
    rates: dict[str, Rates] = field(default_factory=dict)
    default_rates: Rates = field(default_factory=Rates)
    entries: list[Entry] = field(default_factory=list)
    #: price of one unit per non-token kind (e.g. ``{"sandbox_seconds": Decimal("0.0001")}``); 0 for other kinds
    unit_rates: dict[str, Decimal] = field(default_factory=dict)
    #: called with every entry committed (a :class:`LedgerJournal`'s ``append``), outside the lock
    on_commit: Callable[["Entry"], Any] | None = field(default=None, repr=False)
    #: called with every budget decision on a model call (a :class:`LedgerJournal`'s ``record``): a
    #: reservation granted or released, a call refused; written before the call is sent or refused
    on_decision: Callable[[dict[str, Any]], Any] | None = field(default=None, repr=False)
    _spent: Decimal = Decimal(0)
    _reserved: Decimal = Decimal(0)
    _by_agent: dict[str, list] = field(default_factory=dict, repr=False)  # agent -> [cost, tokens]
    _unrecorded: dict[str, list["Entry"]] = field(
        default_factory=dict, repr=False
    )  # call id -> paid calls no checkpoint holds
    _held: Decimal = Decimal(0)  # their cost: counted against the budget, not yet in ``spent`` (see restore)
    _granted: dict[str, list[Decimal]] = field(
        default_factory=dict, repr=False
    )  # call id -> reservations an interrupted process held
    _refused: dict[str, str] = field(default_factory=dict, repr=False)  # call id -> why this budget refused it before
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.budget is not None:
            self.budget = checked_amount(self.budget, "the budget")
        for name, r in [("default", self.default_rates), *self.rates.items()]:
            if not isinstance(r, Rates):
                raise ValueError(f"rates for {name} must be Rates, got {type(r).__name__}")
        if not isinstance(self.unit_rates, dict):
            raise ValueError(
                f"unit_rates must be a mapping of kind -> price per unit, got {type(self.unit_rates).__name__}"
            )
        self.unit_rates = {
            _kind(k): checked_amount(v, f"the price of one {k!s} unit") for k, v in self.unit_rates.items()
        }
        if self.entries:
            self.restore([e.as_dict() if isinstance(e, Entry) else e for e in self.entries])

    # --- rates ---------------------------------------------------------------------------
    def rates_for(self, model: str) -> Rates:
        return self.rates.get(model, self.default_rates)

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> Decimal:
        return self.rates_for(model).cost(input_tokens, output_tokens)

    def unit_rate(self, kind: str) -> Decimal:
        """The price of one unit of ``kind`` (0 unless set in ``unit_rates``)."""
        return self.unit_rates.get(_kind(kind), Decimal(0))

    def unit_cost(self, kind: str, units: Any, rate: Any = None) -> Decimal:
        """``units`` x the kind's rate (or ``rate`` when given); both finite and non-negative."""
        u = checked_amount(units, f"the {kind!s} units")
        r = self.unit_rate(kind) if rate is None else checked_amount(rate, f"the price of one {kind!s} unit")
        return u * r

    # --- concurrency-safe charging -------------------------------------------------------
    def _check_room(self, amount: Decimal) -> None:  # under the lock
        if self.budget is not None and self._spent + self._held + self._reserved + amount > self.budget:
            held = f", paid before the resume ${self._held:.6f}" if self._held else ""
            raise BudgetExhausted(
                f"budget ${self.budget} exhausted: spent ${self._spent:.6f}{held}, in flight ${self._reserved:.6f}, "
                f"next call up to ${amount:.6f}"
            )

    def reserve(self, amount: Decimal, call_id: str | None = None) -> Reservation:
        """Hold ``amount`` for an upcoming call or raise :class:`BudgetExhausted`. With ``call_id``
        (a model call's id) the decision is journaled (:attr:`on_decision`) before it returns, and
        the decisions an interrupted process made are kept (see :meth:`restore`): a call refused
        under this budget is refused again, a call whose reservation was held takes it over
        without a new check, so a resumed run decides as the uninterrupted one did."""
        amount = checked_amount(amount, "a reservation")
        decision: dict[str, Any] | None = None
        refused: BudgetExhausted | None = None
        with self._lock:
            if call_id is not None and call_id in self._refused:
                raise BudgetExhausted(self._refused[call_id])
            held = self._granted.get(call_id) if call_id is not None else None
            if held and call_id is not None:  # (held only under a call id)
                was = held.pop(0)  # already counted in ``_reserved``: the interrupted process's grant
                if not held:
                    del self._granted[call_id]
                if amount > was:
                    self._reserved -= was
                    try:
                        self._check_room(amount)
                    except BudgetExhausted:
                        self._reserved += was
                        self._granted.setdefault(call_id, []).insert(0, was)
                        raise
                    self._reserved += amount
                else:
                    self._reserved += amount - was
                return Reservation(amount, call_id=call_id)
            try:
                self._check_room(amount)
            except BudgetExhausted as exc:
                refused = exc
                if call_id is not None:
                    decision = {
                        "event": "refuse",
                        "call_id": call_id,
                        "amount": str(amount),
                        "budget": str(self.budget),
                        "message": str(exc),
                    }
            else:
                self._reserved += amount
                if call_id is not None:
                    decision = {"event": "reserve", "call_id": call_id, "amount": str(amount)}
        if decision is not None and self.on_decision is not None:
            self.on_decision(decision)
        if refused is not None:
            raise refused
        return Reservation(amount, call_id=call_id)

    def release(self, res: Reservation) -> None:
        with self._lock:
            if res.done:
                return
            self._reserved -= res.amount
            res.done = True
        if res.call_id is not None and self.on_decision is not None:
            self.on_decision({"event": "release", "call_id": res.call_id})

    def _account(self, entry: Entry, cost: Decimal) -> None:  # under the lock
        self._spent += cost
        self.entries.append(entry)
        tot = self._by_agent.get(entry.agent)
        if tot is None:
            tot = self._by_agent[entry.agent] = [Decimal(0), 0]
        tot[0] += cost
        tot[1] += entry.input_tokens + entry.output_tokens

    def commit(self, res: Reservation | None, entry: Entry) -> Entry:
        """Record a finished call: release its reservation and add its actual cost. The cost may
        not exceed the reservation; without one (a cached replay: the cost is known exactly) it
        must fit the cap, else :class:`BudgetExhausted` and nothing is recorded."""
        cost = checked_amount(Decimal(entry.cost), "a charge")
        decision: dict[str, Any] | None = None
        with self._lock:
            if res is not None:
                if res.done:
                    raise ValueError("the reservation of this charge was already used or released")
                self._reserved -= res.amount
                res.done = True
                if cost > res.amount:
                    raise ValueError(f"a charge of ${cost} exceeds its reservation of ${res.amount}")
            else:
                model_call = entry.kind == TOKENS and bool(entry.call_id)
                if model_call and entry.call_id in self._refused:
                    raise BudgetExhausted(self._refused[entry.call_id])
                try:
                    self._check_room(cost)
                except BudgetExhausted as exc:
                    if not model_call:
                        raise
                    decision = {
                        "event": "refuse",
                        "call_id": entry.call_id,
                        "amount": str(cost),
                        "budget": str(self.budget),
                        "message": str(exc),
                    }
            if decision is None:
                self._account(entry, cost)
                self._record(entry)
        if decision is not None:
            if self.on_decision is not None:
                self.on_decision(decision)
            raise BudgetExhausted(decision["message"])
        if self.on_commit is not None:
            self.on_commit(entry)
        return entry

    def _record(self, entry: Entry) -> None:  # under the lock
        for ledger, rows in _RECORDINGS.get():
            if ledger is self:
                rows.append(entry)

    def _adopt(self, call_id: str) -> Entry | None:
        """An unrecorded call with this id, now accounted and recorded (the open recordings get
        it) at the point of the run where it was first made, or None."""
        with self._lock:
            waiting = self._unrecorded.get(call_id)
            if not waiting:
                return None
            entry = waiting.pop(0)
            self._held -= Decimal(entry.cost)
            self._account(entry, Decimal(entry.cost))
            self._record(entry)
            return entry

    def settle(self) -> list[Entry]:
        """Account the unrecorded calls no replay adopted (a resume without a cache paid for them
        again): both payments end in the ledger. Returns them. Called when a run ends."""
        with self._lock:
            left = [e for waiting in self._unrecorded.values() for e in waiting]
            for e in left:
                self._account(e, Decimal(e.cost))
            self._unrecorded = {}
            self._held = Decimal(0)
        self.forget_granted()
        return left

    def forget_granted(self) -> int:
        """Drop the reservations an interrupted process held that no call of the resumed run took
        over (the runner calls it once the interrupted node has finished: a call it did not make
        again will not be made). Returns how many were dropped."""
        with self._lock:
            left = [a for amounts in self._granted.values() for a in amounts]
            self._reserved -= sum(left, Decimal(0))
            self._granted = {}
            return len(left)

    @contextmanager
    def recording(self) -> Iterator[list[Entry]]:
        """The entries this ledger records inside the block, in the current context and the tasks
        and threads started from it (they inherit it), and nowhere else: a node's own charges,
        whatever other nodes charge at the same time. Recordings nest."""
        rows: list[Entry] = []
        token = _RECORDINGS.set(_RECORDINGS.get() + ((self, rows),))
        try:
            yield rows
        finally:
            _RECORDINGS.reset(token)

    def charge(
        self,
        *,
        call_id: str,
        model: str,
        agent: str,
        round: int | None,
        phase: str,
        input_tokens: int,
        output_tokens: int,
        cached: bool = False,
        reservation: Reservation | None = None,
        usage_error: str | None = None,
        team: str | None = None,
    ) -> Entry:
        """Charge one model call its tokens at the model's rates (kind ``"tokens"``). A cached
        replay of a call paid in an interrupted process and never checkpointed is that call: its
        entry, already counted, is recorded and returned instead of a new charge."""
        if cached:
            adopted = self._adopt(call_id)
            if adopted is not None:
                return adopted
        input_tokens = _count(input_tokens, "input tokens")
        output_tokens = _count(output_tokens, "output tokens")
        cost = self.cost(model, input_tokens, output_tokens)
        e = Entry(
            _text(call_id, "a call id"),
            _text(model, "a model id"),
            _text(agent, "an agent id", nonempty=True),
            _round(round),
            _text(phase, "a phase"),
            input_tokens,
            output_tokens,
            str(cost),
            bool(cached),
            usage_error,
            _optional_text(team, "a team"),
        )
        return self.commit(reservation, e)

    def charge_units(
        self,
        kind: str,
        units: Any,
        *,
        agent: str,
        team: str | None = None,
        round: int | None = None,
        phase: str = "",
        rate: Any = None,
        reservation: Reservation | None = None,
        call_id: str = "",
        model: str = "",
        note: str | None = None,
    ) -> Entry:
        """Charge ``units`` of a non-token ``kind`` (e.g. ``"sandbox_seconds"``) at the kind's rate
        from ``unit_rates`` (zero by default) or at ``rate``. Through the same cap as model calls:
        with a ``reservation`` (from :meth:`reserve` of an upper bound, e.g. the sandbox timeout x
        rate) the cost may not exceed it; without one it must fit the budget. A charge that does not
        fit raises :class:`BudgetExhausted` and records nothing. ``note`` lands in ``usage_error``
        (e.g. units clamped to their bound)."""
        kind = _kind(kind)
        u = checked_amount(units, f"the {kind} units")
        r = self.unit_rate(kind) if rate is None else checked_amount(rate, f"the price of one {kind} unit")
        e = Entry(
            _text(call_id, "a call id"),
            _text(model, "a model id"),
            _text(agent, "an agent id", nonempty=True),
            _round(round),
            _text(phase, "a phase"),
            0,
            0,
            str(u * r),
            False,
            _optional_text(note, "a note"),
            _optional_text(team, "a team"),
            kind,
            str(u),
            str(r),
        )
        return self.commit(reservation, e)

    # --- state -----------------------------------------------------------------------------
    @property
    def spent(self) -> Decimal:
        return self._spent

    @property
    def in_flight(self) -> Decimal:
        return self._reserved

    @property
    def held(self) -> Decimal:
        """Calls paid before a resume and not yet replayed (see :meth:`restore`)."""
        return self._held

    @property
    def remaining(self) -> Decimal | None:
        return None if self.budget is None else self.budget - self._spent

    def agent_spent(self, agent: str) -> tuple[Decimal, int]:
        """(cost, tokens) charged to ``agent`` so far (restored entries included)."""
        with self._lock:
            tot = self._by_agent.get(agent)
            return (tot[0], tot[1]) if tot else (Decimal(0), 0)

    def restore(
        self,
        entries: Sequence[dict[str, Any]],
        unrecorded: Sequence[dict[str, Any]] = (),
        *,
        granted: Sequence[tuple[str, Any]] = (),
        refused: dict[str, str] | None = None,
    ) -> None:
        """Rebuild from the audit trail kept in a checkpoint (on resume), plus the ``unrecorded``
        charges of interrupted processes (:meth:`LedgerJournal.unrecorded`). An unrecorded model
        call is *held*: it counts against the budget at once, but enters ``spent`` and
        ``entries`` only when a cached replay of it is charged (:meth:`charge` adopts it), so the
        resumed run reaches that call with the spending, and the prompts that show it, of the
        run that first made it; what no replay adopts is accounted by :meth:`settle`. Other
        unrecorded charges (sandbox seconds) are accounted at once. Rows written before the
        ``team``/``kind``/``units``/``rate`` fields existed get their defaults.

        ``granted`` (call id, amount): reservations of model calls an interrupted process held
        (granted, neither charged nor released), counted as in flight at once, so that the resumed
        ledger is the ledger of the moment of the interruption; the call that is made again takes
        its reservation over (:meth:`reserve`). ``refused`` (call id -> message): calls this budget
        refused, refused again (a budget stop is where the uninterrupted run stopped, however its
        calls are replayed). :meth:`LedgerJournal.decisions` reads both."""
        rebuilt = [Entry.from_dict(e) for e in entries]
        waiting = [Entry.from_dict(e) for e in unrecorded]
        grants: dict[str, list[Decimal]] = {}
        for call_id, amount in granted:
            grants.setdefault(_text(call_id, "a call id"), []).append(checked_amount(amount, "a held reservation"))
        refusals = {_text(k, "a call id"): _text(v, "a refusal") for k, v in (refused or {}).items()}
        with self._lock:
            self.entries = []
            self._spent = Decimal(0)
            self._by_agent = {}
            self._unrecorded = {}
            self._held = Decimal(0)
            for e in rebuilt + [e for e in waiting if e.kind != TOKENS]:
                self._account(e, Decimal(e.cost))
            for e in waiting:
                if e.kind == TOKENS:
                    self._unrecorded.setdefault(e.call_id, []).append(e)
                    self._held += Decimal(e.cost)
            self._granted = grants
            self._refused = refusals
            self._reserved = sum((a for amounts in grants.values() for a in amounts), Decimal(0))

    def totals(self) -> dict[str, Any]:
        """What the ledger holds, held calls included (they were paid)."""
        with self._lock:
            held = [e for waiting in self._unrecorded.values() for e in waiting]
            everything = self.entries + held
            spent = self._spent + self._held
            calls = [e for e in everything if e.kind == TOKENS]
            ins = sum(e.input_tokens for e in calls)
            outs = sum(e.output_tokens for e in calls)
            by_kind: dict[str, dict[str, Any]] = {}
            for e in everything:
                k = by_kind.setdefault(e.kind, {"entries": 0, "units": Decimal(0), "cost": Decimal(0)})
                k["entries"] += 1
                k["units"] += Decimal(e.input_tokens + e.output_tokens) if e.kind == TOKENS else Decimal(e.units or 0)
                k["cost"] += Decimal(e.cost)
            return {
                "calls": len(calls),
                "cached_calls": sum(e.cached for e in calls),
                "usage_errors": sum(e.usage_error is not None for e in calls),
                "input_tokens": ins,
                "output_tokens": outs,
                "cost_usd": str(spent),
                "cost_usd_float": float(spent),
                "budget_usd": None if self.budget is None else str(self.budget),
                "rates_per_1k": {
                    "default": [str(self.default_rates.input_per_1k), str(self.default_rates.output_per_1k)],
                    **{m: [str(r.input_per_1k), str(r.output_per_1k)] for m, r in self.rates.items()},
                },
                # per kind: entries, units (tokens in + out for "tokens", e.g. seconds otherwise), cost
                "by_kind": {
                    kind: {"entries": v["entries"], "units": str(v["units"]), "cost_usd": str(v["cost"])}
                    for kind, v in sorted(by_kind.items())
                },
                "unit_rates": {k: str(v) for k, v in sorted(self.unit_rates.items())},
            }


# --- the journal of every charge ----------------------------------------------------------------
#: the journal's file in a run directory
JOURNAL_FILE = "ledger-journal.jsonl"
logger = logging.getLogger("cooplab.graphs.ledger")


class LedgerJournal:
    """Every charge of a run's ledger, one JSON line each, appended as it is committed (a
    :attr:`Ledger.on_commit`): the record of what was paid even when the node that paid it never
    reached a checkpoint (a model that stopped the run, ``kill -9``). A line cut short by a kill is
    skipped; a journal that cannot be written is reported once and the run goes on."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._warned = False
        self._tail_checked = False
        self._fh: Any = None  # kept open between lines (two a model call); :meth:`close` ends it

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as fh:
            fh.seek(-1, 2)
            return fh.read(1) == b"\n"

    def append(self, entry: Entry) -> None:
        self._write(json.dumps(entry.as_dict(), sort_keys=True) + "\n")

    def record(self, decision: dict[str, Any]) -> None:
        """Append a budget decision on a model call (:attr:`Ledger.on_decision`): ``{"event":
        "reserve" | "release" | "refuse", "call_id": ..., ...}``."""
        self._write(json.dumps(decision, sort_keys=True) + "\n")

    def _write(self, line: str) -> None:
        """Append ``line`` and hand it to the system at once (a killed process loses no whole line). The
        file stays open between lines: opening and closing it cost about twice the write."""
        with self._lock:
            try:
                if self._fh is None:
                    self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
                    if not self._tail_checked:  # a line a kill cut short must not swallow the next one
                        self._tail_checked = True
                        if self._fh.tell() and not self._ends_with_newline():
                            line = "\n" + line
                self._fh.write(line)
                self._fh.flush()
            except OSError as exc:
                self._drop()
                if not self._warned:
                    self._warned = True
                    logger.warning(
                        "the ledger journal %s cannot be written (%s): calls paid by a node that does not finish "
                        "will be missing from a resumed run's ledger",
                        self.path,
                        exc.strerror or exc,
                    )

    def _drop(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            try:
                fh.close()
            except OSError:
                pass

    def close(self) -> None:
        """Close the file (a later line opens it again)."""
        with self._lock:
            self._drop()

    def _lines(self) -> list[dict[str, Any]]:
        """Every whole line as a JSON object, in order (a line cut short by a kill is skipped)."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        rows = []
        for line in text.splitlines():
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(row, dict):
                rows.append(row)
        return rows

    def entries(self) -> list[dict[str, Any]]:
        """The journal's entries (none when there is no journal yet)."""
        return [e for _, e in self._parsed() if e is not None]

    def _parsed(self) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        out = []
        for row in self._lines():
            if "event" in row:
                out.append((row, None))
                continue
            try:
                out.append((row, Entry.from_dict(row).as_dict()))
            except (ValueError, TypeError):  # damaged: not an entry
                continue
        return out

    def decisions(self, budget: Decimal | None) -> tuple[list[tuple[str, Decimal]], dict[str, str]]:
        """(the reservations of model calls still held when the journal ends: granted, neither
        charged nor released, as (call id, amount); the calls refused under ``budget``, call id ->
        message). A run resumed with a raised budget has no refusals: its calls are decided anew.
        Damaged lines are skipped."""
        held: dict[str, list[Decimal]] = {}
        refused: dict[str, str] = {}
        for row, entry in self._parsed():
            cid = row.get("call_id")
            if not isinstance(cid, str) or not cid or len(cid) > 200:
                continue
            if entry is not None:  # a live model call's charge ends its reservation
                if entry["kind"] == TOKENS and not entry["cached"] and held.get(cid):
                    held[cid].pop(0)
                continue
            event = row.get("event")
            if event == "reserve":
                try:
                    held.setdefault(cid, []).append(checked_amount(row.get("amount"), "a held reservation"))
                except ValueError:
                    continue
            elif event == "release" and held.get(cid):
                held[cid].pop(0)
            elif (
                event == "refuse"
                and budget is not None
                and row.get("budget") == str(budget)
                and isinstance(row.get("message"), str)
            ):
                refused[cid] = row["message"][:1000]
        return [(cid, a) for cid, amounts in held.items() for a in amounts], refused

    def unrecorded(self, recorded: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The journal's entries that ``recorded`` (a checkpoint's audit trail) does not hold,
        counted as a multiset: a call paid twice and checkpointed once is unrecorded once."""
        held = Counter(_canonical(Entry.from_dict(e).as_dict()) for e in recorded)
        out = []
        for row in self.entries():
            key = _canonical(row)
            if held[key]:
                held[key] -= 1
            else:
                out.append(row)
        return out


def _canonical(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True)


def close_journal(ledger: Ledger) -> None:
    """Close the file of the :class:`LedgerJournal` that journals ``ledger`` (its ``on_commit``), if any."""
    book = getattr(ledger.on_commit, "__self__", None)
    if isinstance(book, LedgerJournal):
        book.close()
