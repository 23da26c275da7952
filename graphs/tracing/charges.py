"""What the ledger charged for each traced model call, read back from a run directory.

An ``llm`` run's token counts are what the model reported; the ledger (``ledger.parquet`` or
``ledger.csv``) holds what the run was charged: at most the call's output cap, at the run's prices.
Each model call's metadata carries the ledger's ``call_id`` (:mod:`.labels`), so the two can be put
side by side: :func:`ledger_charges` reads the charged model calls, :func:`match_charges` gives each
traced call its charge, :func:`ledger_totals` sums what the ledger charged for tokens. Every value
read is checked: a missing or unreadable file, or a row that is not a sound charge, is left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from cooplab.graphs.rundir import read_json, read_table

from .labels import CALL_ID, is_cached

PER_1K = Decimal(1000)
MAX_COUNT = 10**12  #: token counts above this are not believed (a damaged file)


@dataclass(frozen=True)
class Charge:
    """One model call as the ledger charged it (costs in USD; the split into prompt and completion
    is None when the run's prices do not reproduce the row's cost)."""

    input_tokens: int
    output_tokens: int
    cost: Decimal
    prompt_cost: Decimal | None = None
    completion_cost: Decimal | None = None
    cached: bool = False


def count(v: Any) -> int | None:
    """A token count: a whole number from 0 to :data:`MAX_COUNT` (an int, a whole float, whole-number
    text), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, float) and (not math.isfinite(v) or v != int(v)):
        return None
    try:
        n = int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return n if 0 <= n <= MAX_COUNT else None


def _money(v: Any) -> Decimal | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        d = Decimal(str(v))
    except (InvalidOperation, ValueError):
        return None
    return d if d.is_finite() and d >= 0 else None


def money_pair(v: Any) -> tuple[Decimal, Decimal] | None:
    """Two amounts (a list or tuple of two finite numbers of at least 0, e.g. a price in and out), or None."""
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        return None
    a, b = _money(v[0]), _money(v[1])
    return None if a is None or b is None else (a, b)


def split_cost(input_tokens: int, output_tokens: int, prices: tuple[Decimal, Decimal]) -> tuple[Decimal, Decimal]:
    """The prompt and completion costs (USD) of a call's tokens at ``prices`` per 1K input and output tokens."""
    return Decimal(input_tokens) * prices[0] / PER_1K, Decimal(output_tokens) * prices[1] / PER_1K


def run_dir_of(path: str | Path) -> Path:
    """The run directory of a run directory or of a file in it (its traces.jsonl)."""
    p = Path(path)
    return p.parent if p.is_file() else p


def run_prices(run_dir: str | Path) -> dict[str | None, tuple[Decimal, Decimal]]:
    """The run's prices per 1K input and output tokens from its config.json: by model id from
    ``llm.prices`` (what each model was charged), and under ``None`` the run-wide
    ``llm.price_in``/``price_out`` when both are set (runs made before prices were per model).
    Empty when the file or the values cannot be read."""
    try:
        cfg = read_json(run_dir_of(run_dir) / "config.json")
    except (OSError, ValueError):  # RunDirError is a ValueError
        return {}
    return config_prices(cfg)


def config_prices(cfg: Any) -> dict[str | None, tuple[Decimal, Decimal]]:
    """The prices of :func:`run_prices` from a run's configuration already read (any value: what is
    not a sound price is left out)."""
    llm = cfg.get("llm") if isinstance(cfg, dict) else None
    if not isinstance(llm, dict):
        return {}
    out: dict[str | None, tuple[Decimal, Decimal]] = {}
    per_model = llm.get("prices")
    if isinstance(per_model, dict):
        for model, pair in per_model.items():
            if isinstance(model, str) and (prices := money_pair(pair)) is not None:
                out[model] = prices
    run_wide = money_pair([llm.get("price_in"), llm.get("price_out")])
    if run_wide is not None:
        out[None] = run_wide
    return out


def ledger_rows(run_dir: str | Path) -> list[dict[str, Any]] | None:
    """The rows of the run's ledger table, or None when it has none (or it cannot be read)."""
    try:
        return read_table(run_dir_of(run_dir), "ledger").to_dict("records")
    except Exception:  # noqa: BLE001 - no table (RunDirError) or a damaged one: nothing charged is known
        return None


def _charge(
    row: Mapping[str, Any], by_model: Mapping[str | None, tuple[Decimal, Decimal]]
) -> tuple[str, Charge] | None:
    """(call id, charge) of a sound token row, else None; its prompt and completion costs when
    the prices of its model (else the run-wide ones) reproduce its cost."""
    if row.get("kind", "tokens") != "tokens" or not isinstance(row.get("call_id"), str) or not row["call_id"]:
        return None
    tin, tout, cost = count(row.get("input_tokens")), count(row.get("output_tokens")), _money(row.get("cost_usd_exact"))
    if tin is None or tout is None or cost is None:
        return None
    pc = cc = None
    prices = by_model.get(row.get("model")) if isinstance(row.get("model"), str) else None
    prices = prices or by_model.get(None)
    if prices is not None:
        pc, cc = split_cost(tin, tout, prices)
        if pc + cc != cost:
            pc = cc = None
    return row["call_id"], Charge(tin, tout, cost, pc, cc, cached=row.get("cached") is True or row.get("cached") == 1)


def ledger_charges(
    run_dir: str | Path,
    rows: list[dict[str, Any]] | None = None,
    prices: Mapping[str | None, tuple[Decimal, Decimal]] | None = None,
) -> dict[str, list[Charge]]:
    """The ledger's charges of model calls by call id, in ledger order (a call paid again after a
    resume, or replayed from the cache, has more than one). ``rows``: the ledger's rows if read;
    ``prices``: the run's prices if read (:func:`config_prices`)."""
    prices = run_prices(run_dir) if prices is None else prices
    out: dict[str, list[Charge]] = {}
    for row in (ledger_rows(run_dir) if rows is None else rows) or []:
        got = _charge(row, prices) if isinstance(row, Mapping) else None
        if got is not None:
            out.setdefault(got[0], []).append(got[1])
    return out


def match_charges(runs: Iterable[Mapping[str, Any]], charges: Mapping[str, list[Charge]]) -> dict[str, Charge]:
    """Each traced model call's charge, by run id: the ``llm`` runs that ended without error and
    were not answered from the cache (a replay costs nothing), in start order, take the live (not
    replayed) charges of their ``call_id`` in ledger order."""
    left = {k: [c for c in v if not c.cached] for k, v in charges.items()}
    calls = [
        r
        for r in runs
        if isinstance(r, Mapping) and r.get("run_type") == "llm" and not r.get("error") and not _replayed(r)
    ]
    calls.sort(key=lambda r: str(r.get("start_time") or ""))
    out: dict[str, Charge] = {}
    for r in calls:
        extra = r.get("extra")
        extra = extra if isinstance(extra, Mapping) else {}
        md = extra.get("metadata")
        md = md if isinstance(md, Mapping) else {}
        call_id = md.get(CALL_ID)
        queue = left.get(call_id) if isinstance(call_id, str) else None
        if queue:
            out[str(r.get("id"))] = queue.pop(0)
    return out


def _replayed(run: Mapping[str, Any]) -> bool:
    extra = run.get("extra")
    extra = extra if isinstance(extra, Mapping) else {}
    md = extra.get("metadata")
    return is_cached(md if isinstance(md, Mapping) else None)


def ledger_totals(run_dir: str | Path) -> dict[str, Any] | None:
    """What the ledger charged for model calls: calls, input and output tokens, cost (USD, float),
    replays from the cache included as the ledger counts them; None without a ledger table."""
    rows = ledger_rows(run_dir)
    if rows is None:
        return None
    return charge_totals(ledger_charges(run_dir, rows))


def charge_totals(charges: Mapping[str, list[Charge]]) -> dict[str, Any]:
    """The totals of :func:`ledger_totals` over charges already read (:func:`ledger_charges`)."""
    tin = tout = calls = 0
    cost = Decimal(0)
    for ch in (c for cs in charges.values() for c in cs):
        tin, tout, cost, calls = tin + ch.input_tokens, tout + ch.output_tokens, cost + ch.cost, calls + 1
    return {
        "calls": calls,
        "input_tokens": tin,
        "output_tokens": tout,
        "total_tokens": tin + tout,
        "cost_usd": float(cost),
    }
