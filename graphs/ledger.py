"""The credit-budget ledger: one per run, shared by every node through the runtime context.

Each model call is charged its tokens at per-model rates (default: $0.0005 per 1K input and
$0.003 per 1K output tokens, the science-team paper's rates). Amounts are ``Decimal`` so the
sum of charges equals tokens x rates to the cent and beyond. Safe under concurrency: a call
first *reserves* an upper bound of its cost; the reservation is refused when the budget cap
would be exceeded (counting other calls' in-flight reservations), and on completion the
actual cost is *committed* and the reservation released. Spending therefore never exceeds
the cap: a charge larger than its reservation is refused (the model layer makes reservations
true upper bounds, see ``agents/usage.py``), and a charge without a reservation (a cached replay,
whose cost is known exactly) is checked against the cap under the same lock. Budgets and rates
must be finite and non-negative.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

PER_1K = Decimal(1000)
DEFAULT_RATES = (Decimal("0.0005"), Decimal("0.003"))  # USD per 1K input, per 1K output tokens


class BudgetExhausted(RuntimeError):
    """The budget cap leaves no room for another call."""


def _amount(value: Any, what: str) -> Decimal:
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


@dataclass(frozen=True)
class Rates:
    input_per_1k: Decimal = DEFAULT_RATES[0]
    output_per_1k: Decimal = DEFAULT_RATES[1]

    def __post_init__(self) -> None:
        object.__setattr__(self, "input_per_1k", _amount(self.input_per_1k, "the input price per 1K tokens"))
        object.__setattr__(self, "output_per_1k", _amount(self.output_per_1k, "the output price per 1K tokens"))

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        """cost = input_tokens / 1000 * rate_in + output_tokens / 1000 * rate_out."""
        return (Decimal(int(input_tokens)) * self.input_per_1k + Decimal(int(output_tokens)) * self.output_per_1k) / PER_1K


@dataclass
class Entry:
    call_id: str
    model: str
    agent: str
    round: int
    phase: str
    input_tokens: int
    output_tokens: int
    cost: str  # Decimal as text: exact
    cached: bool = False
    usage_error: str | None = None  # the endpoint reported impossible usage; charged at the call's bound

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Reservation:
    amount: Decimal
    done: bool = False


@dataclass
class Ledger:
    budget: Decimal | None = None
    rates: dict[str, Rates] = field(default_factory=dict)
    default_rates: Rates = field(default_factory=Rates)
    entries: list[Entry] = field(default_factory=list)
    _spent: Decimal = Decimal(0)
    _reserved: Decimal = Decimal(0)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.budget is not None:
            self.budget = _amount(self.budget, "the budget")
        for name, r in [("default", self.default_rates), *self.rates.items()]:
            if not isinstance(r, Rates):
                raise ValueError(f"rates for {name} must be Rates, got {type(r).__name__}")

    # --- rates ---------------------------------------------------------------------------
    def rates_for(self, model: str) -> Rates:
        return self.rates.get(model, self.default_rates)

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> Decimal:
        return self.rates_for(model).cost(input_tokens, output_tokens)

    # --- concurrency-safe charging -------------------------------------------------------
    def _check_room(self, amount: Decimal) -> None:  # under the lock
        if self.budget is not None and self._spent + self._reserved + amount > self.budget:
            raise BudgetExhausted(
                f"budget ${self.budget} exhausted: spent ${self._spent:.6f}, in flight ${self._reserved:.6f}, next call up to ${amount:.6f}"
            )

    def reserve(self, amount: Decimal) -> Reservation:
        """Hold ``amount`` for an upcoming call or raise :class:`BudgetExhausted`."""
        amount = _amount(amount, "a reservation")
        with self._lock:
            self._check_room(amount)
            self._reserved += amount
            return Reservation(amount)

    def release(self, res: Reservation) -> None:
        with self._lock:
            if not res.done:
                self._reserved -= res.amount
                res.done = True

    def commit(self, res: Reservation | None, entry: Entry) -> Entry:
        """Record a finished call: release its reservation and add its actual cost. The cost may
        not exceed the reservation; without one (a cached replay: the cost is known exactly) it
        must fit the cap, else :class:`BudgetExhausted` and nothing is recorded."""
        cost = _amount(Decimal(entry.cost), "a charge")
        with self._lock:
            if res is not None:
                if res.done:
                    raise ValueError("the reservation of this charge was already used or released")
                self._reserved -= res.amount
                res.done = True
                if cost > res.amount:
                    raise ValueError(f"a charge of ${cost} exceeds its reservation of ${res.amount}")
            else:
                self._check_room(cost)
            self._spent += cost
            self.entries.append(entry)
        return entry

    def charge(self, *, call_id: str, model: str, agent: str, round: int, phase: str, input_tokens: int, output_tokens: int,
               cached: bool = False, reservation: Reservation | None = None, usage_error: str | None = None) -> Entry:
        cost = self.cost(model, input_tokens, output_tokens)
        e = Entry(call_id, model, agent, int(round), phase, int(input_tokens), int(output_tokens), str(cost), cached, usage_error)
        return self.commit(reservation, e)

    # --- state -----------------------------------------------------------------------------
    @property
    def spent(self) -> Decimal:
        return self._spent

    @property
    def in_flight(self) -> Decimal:
        return self._reserved

    @property
    def remaining(self) -> Decimal | None:
        return None if self.budget is None else self.budget - self._spent

    def restore(self, entries: list[dict[str, Any]]) -> None:
        """Rebuild from the audit trail kept in a checkpoint (on resume)."""
        with self._lock:
            self.entries = [Entry(**e) for e in entries]
            self._spent = sum((Decimal(e.cost) for e in self.entries), Decimal(0))
            self._reserved = Decimal(0)

    def totals(self) -> dict[str, Any]:
        with self._lock:
            ins = sum(e.input_tokens for e in self.entries)
            outs = sum(e.output_tokens for e in self.entries)
            return {
                "calls": len(self.entries),
                "cached_calls": sum(e.cached for e in self.entries),
                "usage_errors": sum(e.usage_error is not None for e in self.entries),
                "input_tokens": ins,
                "output_tokens": outs,
                "cost_usd": str(self._spent),
                "cost_usd_float": float(self._spent),
                "budget_usd": None if self.budget is None else str(self.budget),
                "rates_per_1k": {
                    "default": [str(self.default_rates.input_per_1k), str(self.default_rates.output_per_1k)],
                    **{m: [str(r.input_per_1k), str(r.output_per_1k)] for m, r in self.rates.items()},
                },
            }
