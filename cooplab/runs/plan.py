"""Plan a study before paying for it: the calls, tokens and cost of a run or sweep, from a short pilot.

:func:`plan` takes a sweep (a :class:`~cooplab.runs.grid.GridSweep`, its JSON object, or a sweep
file) or one run's keywords, and for every distinct grid point (a *cell shape*: the cells that
differ only in their seed make the same calls) runs a **pilot**: the cell with its first seed,
at most ``pilot_rounds`` rounds, the response cache off, in a temporary folder, on the cell's own
model when it costs nothing (``local``, ``scripted:``, ``builtin:``, ``ollama:``) or on
``pilot_model`` (a scripted model that answers validly). The pilot's ledger says, per round and
phase, how many model calls the cell made and how many input and output tokens they took. The plan
extrapolates that to the configured rounds, phase by phase (:func:`extrapolate`):

* the pilot's last round stands for the run's last round (which often makes fewer calls);
* every round in between makes each phase's calls as often as the pilot's earlier rounds did on
  average, at the phase's latest tokens per call, growing per round as they grew between the
  pilot's two rounds before its last (a two-round pilot: between its two rounds; prompts that
  carry a growing history; never shrinking);
* charges outside any round (a summary, a judge at the end) are counted once; a run no longer
  than the pilot is the pilot.

Every seed of a grid point is predicted the same, so a cell's numbers times its seeds make the
grid point's share of the total. The cost is the tokens at each model's price (the ledger's rates,
:mod:`cooplab.agents.prices`); ``at_prices`` gives the whole study's cost at every listed model's
price too. A society that collapses before its last round (CPR) stops making calls, so where the
task can end early the prediction is an upper bound. Output tokens depend on what a model answers:
a pilot on a scripted model predicts the prompts, not another model's answers' length.

A scripted pilot counts tokens the way the priced model would where its tokenizer can be had
here: an OpenAI model's encoding (``o200k_base``, ``cl100k_base``, :mod:`cooplab.agents.tokenizers`,
pinned files fetched by ``cooplab models fetch tiktoken``). Other models' cells are counted with
cooplab's own count (words and punctuation marks), and the plan says so in its notes.

With ``difference`` the plan also says how many seeds per cell find that difference in
``outcome`` at the power asked (:mod:`cooplab.evals.power`), from the per-seed values of an
earlier sweep (``variance_from``: its folder with ``table.csv``) or of the pilot (``pilot_seeds``
of 2 or more; the pilot's outcome is over its few rounds, not the configured ones).
"""

from __future__ import annotations

import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Mapping

from cooplab.limits import ConfigError, show

#: model kinds a pilot may run on as they are (they cost nothing but time)
FREE_KINDS = ("local", "scripted", "builtin", "ollama")
#: the pilot's rounds by default
PILOT_ROUNDS = 4
#: most pilot seeds
MAX_PILOT_SEEDS = 50
#: summary fields that say a society can end before its last round (its number of rounds is then a bound)
_ENDS_EARLY = ("survival_time",)


def _sweep_of(spec: Any, where: str):
    """A GridSweep from a sweep (object, dict, file) or one run's keywords (a dict with ``task`` and no grid keys)."""
    from cooplab.runs import grid

    if isinstance(spec, grid.GridSweep):
        return spec
    if isinstance(spec, (str, Path)):
        p = Path(spec)
        if not p.is_file():
            raise ConfigError(
                f"{where}: no such file {p} (give a sweep file: docs/scale.md, or a run's keywords as JSON)"
            )
        from cooplab.limits import parse_json

        try:
            raw = parse_json(p.read_text(encoding="utf-8"), f"{where} {p}")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {where} {p}: {exc}") from None
        base = p.resolve().parent
        if isinstance(raw, dict) and not (set(raw) & {"fixed", "grid", "seeds", "out"}) and "task" in raw:
            return _run_sweep(raw, where, base)
        if isinstance(raw, dict) and "out" not in raw:
            return grid.load(
                {**raw, "out": str(Path(tempfile.gettempdir()) / "cooplab-plan")}, f"{where} {p}", base=base
            )
        return grid.load_file(p)[0]
    if isinstance(spec, Mapping):
        raw = dict(spec)
        if not (set(raw) & {"fixed", "grid", "seeds", "out"}) and "task" in raw:
            return _run_sweep(raw, where, None)
        if "out" not in raw:
            raw["out"] = str(Path(tempfile.gettempdir()) / "cooplab-plan")
        return grid.load(raw, where)
    raise ConfigError(
        f"{where} must be a sweep (file, dict or GridSweep) or a run's keywords with task, got {show(spec)}"
    )


def _run_sweep(raw: dict[str, Any], where: str, base: Path | None):
    """One run's keywords as a sweep of one cell."""
    from cooplab.runs import grid

    kw = {k: v for k, v in raw.items() if k not in ("task", "seed", "out", "force", "quiet")}
    seed = raw.get("seed", 0)
    return grid.load(
        {
            "task": raw["task"],
            "out": str(Path(tempfile.gettempdir()) / "cooplab-plan"),
            "fixed": kw,
            "seeds": [seed],
            "analysis": False,
        },
        where,
        base=base,
    )


def _spec(text: Any):
    from cooplab.agents.models.spec import parse_model_spec

    return parse_model_spec(str(text))


def _free(model: Any) -> bool:
    if model is None:
        return True  # the task's default decides (rule-based agents make no calls)
    try:
        return _spec(model).kind in FREE_KINDS
    except Exception:  # noqa: BLE001 - an unparsable spec fails in the config check with its own message
        return False


def _counted_as(priced_model: Any) -> tuple[str | None, str | None]:
    """(the encoding a scripted pilot counts ``priced_model``'s tokens with, why it cannot): the
    model's own tokenizer where cooplab has it (see the module), else (None, the reason or None)."""
    from cooplab.agents import tokenizers

    enc = tokenizers.encoding_for(priced_model if isinstance(priced_model, str) else None)
    if enc is None:
        return None, None
    try:
        tokenizers.load(enc)
    except tokenizers.TokenizerUnavailable as exc:
        return None, f"{priced_model}'s tokenizer {enc} is not available here ({exc})"
    return enc, None


def _pilot_model(pilot_model: str, encoding: str | None) -> Any:
    """What a pilot runs on: the spec itself, or (when the priced model's tokens can be counted)
    a fresh scripted model object counting with ``encoding`` (fresh per pilot, so its answers
    start from the script's first, as a model made from the spec does)."""
    if encoding is None:
        return pilot_model
    from cooplab.agents.models.factory import make_chat_model
    from cooplab.agents.models.scripted import ScriptedChatModel

    spec = _spec(pilot_model)
    if spec.kind not in ("scripted", "builtin"):
        return pilot_model
    model = make_chat_model(spec)
    if not isinstance(model, ScriptedChatModel):
        return pilot_model
    model.tokenizer = encoding
    return model


def _configured_rounds(task: str, kw: dict[str, Any]) -> int | None:
    from cooplab.runs import registry
    from cooplab.runs.config import RunConfig

    if isinstance(kw.get("rounds"), int) and not isinstance(kw.get("rounds"), bool):
        return kw["rounds"]
    cfg = RunConfig.from_keywords(task, **kw).to_config(registry.get(task))
    r = (cfg.get("params") or {}).get("rounds")
    return r if isinstance(r, int) and not isinstance(r, bool) else None


def _points(sw) -> list[dict[str, Any]]:
    """One entry per grid point: its keywords (first seed), its seeds and its cells' names."""
    from cooplab.runs import grid

    by: dict[str, dict[str, Any]] = {}
    for c in grid.cells(sw):
        labels = {k: v for k, v in c["labels"].items() if k != "seed"}
        key = grid.json.dumps(labels, sort_keys=True, default=str)
        p = by.setdefault(key, {"labels": labels, "keywords": c["keywords"], "seeds": [], "cells": []})
        p["seeds"].append(c["labels"]["seed"])
        p["cells"].append(c["name"])
    return list(by.values())


def _per_round(ledger) -> tuple[dict[int, dict[str, dict[str, int]]], dict[str, int], list[str]]:
    """The pilot's model calls by round and phase: ``{round: {phase: {calls, input_tokens,
    output_tokens}}}``, the same summed outside any round, and the models charged."""
    import pandas as pd

    rounds: dict[int, dict[str, dict[str, int]]] = {}
    outside = {"calls": 0, "input_tokens": 0, "output_tokens": 0}
    if ledger is None or len(ledger) == 0:
        return rounds, outside, []
    df = ledger[ledger["kind"] == "tokens"] if "kind" in ledger.columns else ledger
    for r, ph, i, o in zip(df["round"], df["phase"], df["input_tokens"], df["output_tokens"], strict=False):
        if pd.isna(r):
            slot = outside
        else:
            slot = rounds.setdefault(int(r), {}).setdefault(
                str(ph), {"calls": 0, "input_tokens": 0, "output_tokens": 0}
            )
        slot["calls"] += 1
        slot["input_tokens"] += int(i)
        slot["output_tokens"] += int(o)
    return rounds, outside, sorted({str(m) for m in df["model"]})


_FIELDS = ("calls", "input_tokens", "output_tokens")


def _sum(phases: dict[str, dict[str, int]]) -> dict[str, int]:
    return {k: sum(v[k] for v in phases.values()) for k in _FIELDS}


def extrapolate(
    rounds: dict[int, dict[str, dict[str, int]]], outside: dict[str, int], target: int | None
) -> dict[str, int]:
    """A cell's calls and tokens over ``target`` rounds from its pilot's, phase by phase (see the
    module): the pilot's last round stands for the run's last round (a last round often makes
    fewer calls: no proposal after it); every round in between makes each phase's calls as often
    as the pilot's earlier rounds did on average, at that phase's latest tokens per call, growing
    per round as they grew between the pilot's two rounds before its last."""
    keys = sorted(rounds)
    total = {k: outside[k] + sum(_sum(rounds[r])[k] for r in keys) for k in _FIELDS}
    if target is None or not keys or target <= len(keys):
        return total
    last = rounds[keys[-1]]
    body = [rounds[r] for r in keys[:-1]] or [last]  # the rounds that were not the pilot's last

    def per_call(r: dict[str, dict[str, int]], ph: str, k: str) -> float | None:
        v = r.get(ph)
        return v[k] / v["calls"] if v and v["calls"] else None

    def grow(ph: str, k: str) -> float:
        # the two rounds before the pilot's last; a pilot of two rounds: its two rounds (same phase, per call)
        a_r, b_r = (body[-2], body[-1]) if len(body) >= 2 else (body[-1], last) if len(keys) >= 2 else (last, last)
        a, b = per_call(a_r, ph, k), per_call(b_r, ph, k)
        return max(b - a, 0.0) if a is not None and b is not None else 0.0

    more = target - len(keys)  # rounds to add before the last
    phases = sorted({ph for r in body for ph in r})
    for ph in phases:
        calls = sum(r.get(ph, {}).get("calls", 0) for r in body) / len(body)  # a phase not every round has: its share
        seen = [r for r in body if per_call(r, ph, "calls") is not None]
        total["calls"] += round(more * calls)
        for k in _FIELDS[1:]:
            base = per_call(seen[-1], ph, k)
            assert base is not None  # a round in seen has calls of ph: per_call is a number for every field
            total[k] += round(sum(calls * (base + grow(ph, k) * j) for j in range(1, more + 1)))
    for ph, v in last.items():  # the last round, that many rounds later
        for k in _FIELDS[1:]:
            total[k] += round(v["calls"] * grow(ph, k) * more)
    return total


def _cost(tokens_in: int, tokens_out: int, price: tuple[float, float] | list[float]) -> float:
    return float(
        (Decimal(tokens_in) * Decimal(str(price[0])) + Decimal(tokens_out) * Decimal(str(price[1]))) / Decimal(1000)
    )


def _at_prices(tokens_in: int, tokens_out: int) -> dict[str, float]:
    from cooplab.agents.prices import LIST_PRICES, NOMINAL

    out = {
        f"{kind}:{name}": _cost(tokens_in, tokens_out, p)
        for kind, table in LIST_PRICES.items()
        for name, p in table.items()
    }
    out["nominal (local, scripted, self-hosted)"] = _cost(tokens_in, tokens_out, NOMINAL)
    return out


def plan(
    spec: Any,
    *,
    pilot_model: str | None = None,
    pilot_rounds: int = PILOT_ROUNDS,
    pilot_seeds: int = 1,
    outcome: str | None = None,
    difference: float | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    paired: bool = False,
    variance_from: str | Path | None = None,
    log: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:
    """Predict a sweep's (or run's) model calls, tokens and cost from a pilot, and optionally the
    seeds per cell for a difference in an outcome (see the module). ``spec``: a sweep file, a
    sweep as a dict or :class:`~cooplab.runs.grid.GridSweep`, or one run's keywords (a dict with
    ``task``). Returns ``{"task", "cells", "total", "points": [...], "at_prices", "notes", "power"?}``.
    Bad input is a one-line :class:`~cooplab.limits.ConfigError` before any pilot runs."""
    from cooplab.evals import power as pw
    from cooplab.limits import check
    from cooplab.runs import api

    if isinstance(pilot_rounds, bool) or not isinstance(pilot_rounds, int) or pilot_rounds < 1:
        raise ConfigError(f"pilot_rounds must be a whole number of at least 1, got {show(pilot_rounds)}")
    check("pilot_rounds", pilot_rounds, "rounds")
    if isinstance(pilot_seeds, bool) or not isinstance(pilot_seeds, int) or not 1 <= pilot_seeds <= MAX_PILOT_SEEDS:
        raise ConfigError(f"pilot_seeds must be a whole number from 1 to {MAX_PILOT_SEEDS}, got {show(pilot_seeds)}")
    if difference is not None or outcome is not None:
        if outcome is None or not isinstance(outcome, str) or not outcome.strip():
            raise ConfigError(
                "a difference needs the outcome it is in (outcome, a column of the sweep's table such as "
                "survival_time.mean)"
            )
        if difference is None:
            raise ConfigError("an outcome needs the difference to find in it (difference, in the outcome's units)")
        try:
            pw.check_inputs(difference, 1.0, alpha, power)
        except pw.PowerError as exc:
            raise ConfigError(str(exc)) from None
        if variance_from is None and pilot_seeds < 2:
            raise ConfigError(
                "the seeds per cell need the outcome's spread: give an earlier sweep's folder (variance_from) or "
                "at least 2 pilot seeds (pilot_seeds)"
            )
        if variance_from is not None and not (Path(variance_from) / "table.csv").is_file():
            raise ConfigError(
                f"{variance_from} has no table.csv; give the folder of a finished sweep ('cooplab sweep' writes "
                "OUT/table.csv)"
            )
    if pilot_model is not None:
        try:
            _spec(pilot_model)
        except Exception as exc:  # noqa: BLE001 - the model module's one-line error
            raise ConfigError(f"pilot model: {exc}") from None
    sw = _sweep_of(spec, "plan")
    from cooplab.runs import grid

    grid.jobs(sw, "plan")  # every cell's config checked before any pilot runs
    points = _points(sw)
    for p in points:
        kw = p["keywords"]
        if not _free(kw.get("model")) and pilot_model is None:
            raise ConfigError(
                f"the cells use {kw.get('model')}, which costs money: give a pilot model that answers validly "
                f"(pilot_model / --pilot-model, e.g. scripted:FILE or builtin:NAME); nothing was run"
            )
        p["rounds"] = _configured_rounds(sw.task, {k: v for k, v in kw.items() if k != "seed"})

    out_points, pilot_rows, notes = [], [], []
    total = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    ends_early = False
    with tempfile.TemporaryDirectory(prefix="cooplab-plan-") as tmp:
        for i, p in enumerate(points):
            kw = dict(p["keywords"])
            priced_model = kw.get("model")
            encoding = None
            scripted_pilot = pilot_model is not None and kw.get("agents", "llm") != "rule"
            if scripted_pilot:
                encoding, why_not = _counted_as(priced_model)
                if why_not is not None and why_not not in notes:
                    notes.append(f"{why_not}: its tokens are cooplab's own count")
                kw.pop("agent_models", None)
                kw.pop("agent_model", None)
            kw["cache"] = "off"
            kw.pop("budget", None)
            if p["rounds"] is not None:
                kw["rounds"] = min(pilot_rounds, p["rounds"])
            seeds = list(p["seeds"])[:pilot_seeds]
            extra = [max(seeds) + k for k in range(1, pilot_seeds - len(seeds) + 1)]
            shape = None
            for s in seeds + extra:
                log(
                    f"pilot {i + 1}/{len(points)} seed {s}: "
                    f"{', '.join(f'{k}={v}' for k, v in p['labels'].items()) or 'the run'}"
                )
                if scripted_pilot:
                    assert pilot_model is not None  # (scripted_pilot says so)
                    kw["model"] = _pilot_model(pilot_model, encoding)
                r = api.run(task=sw.task, out=Path(tmp) / f"p{i}-s{s}", quiet=True, **{**kw, "seed": s})
                if r.status not in ("completed",):
                    raise ConfigError(
                        f"the pilot of {p['cells'][0]} ended {r.status!r}{': ' + r.stopped if r.stopped else ''}; "
                        f"give a pilot model that answers validly (--pilot-model)"
                    )
                summary = r.summary.model_dump(mode="json") if hasattr(r.summary, "model_dump") else dict(r.summary)
                pilot_rows.append({**{k: v for k, v in p["labels"].items()}, "seed": s, **_flatten(summary)})
                ends_early = ends_early or any(k in summary or k in (summary.get("results") or {}) for k in _ENDS_EARLY)
                if shape is None:
                    shape = _per_round(r.ledger)
                    prices = (r.config.get("llm") or {}).get("prices") or {}
            assert shape is not None  # the pilot ran at least one seed
            rounds, outside, models = shape
            counts = extrapolate(rounds, outside, p["rounds"])
            if pilot_model is None or priced_model is None:
                price = _ledger_price(models, prices)
            else:
                from cooplab.agents.prices import price_of

                pr = price_of(_spec(priced_model), kw.get("price_in"), kw.get("price_out"))
                price = list(pr) if pr is not None else [0.0, 0.0]
                if pr is None:
                    notes.append(
                        f"{priced_model} has no list price: its cost is reported as 0 (give price_in and price_out)"
                    )
            cell = {**counts, "cost_usd": _cost(counts["input_tokens"], counts["output_tokens"], price)}
            n = len(p["seeds"])
            for k in ("calls", "input_tokens", "output_tokens"):
                total[k] += cell[k] * n
            total["cost_usd"] += cell["cost_usd"] * n
            out_points.append(
                {
                    "labels": p["labels"],
                    "cells": p["cells"],
                    "seeds": n,
                    "model": priced_model,
                    "price_per_1k": price,
                    "rounds": p["rounds"],
                    "pilot_rounds": len(rounds),
                    # who counted the pilot's tokens: the priced model's own encoding, the pilot
                    # model itself, or cooplab's own count
                    "tokens_counted_by": encoding or ("cooplab" if scripted_pilot else "the model"),
                    "pilot": {
                        "by_round": {str(k): v for k, v in sorted(rounds.items())},
                        "outside_rounds": outside,
                        "models": models,
                    },
                    "per_cell": cell,
                }
            )
    if ends_early:
        notes.append(
            "a society that collapses before its last round makes no more calls: these numbers are an upper bound"
        )
    if pilot_model is not None:
        notes.append(
            f"the pilot ran on {pilot_model}: input tokens follow the prompts; output tokens are that model's "
            "answers, which another model may make longer or shorter"
        )
        counted = sorted({p["tokens_counted_by"] for p in out_points} - {"cooplab", "the model"})
        if counted:
            notes.append(
                f"tokens counted with {', '.join(counted)}, the priced model's own tokenizer (chat framing as OpenAI "
                "counts it)"
            )
        if any(p["tokens_counted_by"] == "cooplab" for p in out_points):
            notes.append(
                "where no tokenizer of the priced model is at hand, tokens are cooplab's own count (words and "
                "punctuation marks); a real tokenizer gives somewhat more"
            )
    result: dict[str, Any] = {
        "task": sw.task,
        "cells": sum(p["seeds"] for p in out_points),
        "grid_points": len(out_points),
        "total": total,
        "points": out_points,
        "at_prices": _at_prices(total["input_tokens"], total["output_tokens"]),
        "upper_bound": ends_early,
        "notes": notes,
    }
    if difference is not None and outcome is not None:  # (checked above: a difference comes with its outcome)
        result["power"] = _power(sw, pilot_rows, outcome, difference, alpha, power, paired, variance_from)
    return result


def _ledger_price(models: list[str], prices: dict[str, Any]) -> list[float]:
    """The price of a pilot's (only or first) model, as its config recorded it (the rates the run charged)."""
    for m in models:
        p = prices.get(m)
        if isinstance(p, (list, tuple)) and len(p) == 2:
            return [float(p[0]), float(p[1])]
    from cooplab.agents.prices import NOMINAL

    return list(NOMINAL)


def _flatten(summary: dict[str, Any]) -> dict[str, Any]:
    from cooplab.runs.sweeps import flatten_summary as flat

    return flat(summary)


def _power(
    sw,
    pilot_rows: list[dict[str, Any]],
    outcome: str,
    difference: float,
    alpha: float,
    power: float,
    paired: bool,
    variance_from: str | Path | None,
) -> dict[str, Any]:
    from cooplab.evals import power as pw

    if variance_from is not None:
        import pandas as pd

        df = pd.read_csv(Path(variance_from) / "table.csv")
        if outcome not in df.columns:
            raise ConfigError(
                f"{variance_from}/table.csv has no column {outcome!r}; its numeric columns: "
                f"{', '.join(c for c in df.columns if df[c].dtype.kind in 'if')[:300]}"
            )
        if "seed" not in df.columns:
            raise ConfigError(f"{variance_from}/table.csv has no seed column (is it a sweep's table?)")
        labels = [
            c
            for c in df.columns
            if c not in ("cell", "seed", "status") and c in set(sw.grid) | {k.removeprefix("set.") for k in sw.grid}
        ]
        rows, source = df.to_dict("records"), f"{variance_from}/table.csv"
    else:
        rows, source = pilot_rows, f"the pilot ({len(pilot_rows)} runs)"
        labels = [k.removeprefix("set.") for k in sw.grid]
        if not any(outcome in r for r in rows):
            raise ConfigError(
                f"the pilot's summaries have no {outcome!r}; e.g. "
                f"{', '.join(sorted(k for k, v in rows[0].items() if isinstance(v, float))[:8])}"
            )
    try:
        spread = pw.outcome_sd(rows, outcome, by=labels, paired=paired)
        need = pw.seeds_needed(difference, spread["sd"], alpha=alpha, power=power, paired=paired)
    except pw.PowerError as exc:
        raise ConfigError(str(exc)) from None
    return {**need, "outcome": outcome, "sd_from": source, "sd_df": spread["df"], "configured_seeds": len(sw.seeds)}


__all__ = ["FREE_KINDS", "PILOT_ROUNDS", "extrapolate", "plan"]
