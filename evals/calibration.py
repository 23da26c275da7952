"""What every ``cooplab calibrate TASK`` shares: the design, the checkpoint, the execution and the
analysis of a map of where in the space of our free ("chosen") parameters a paper's claims hold
(docs/calibrate.md). It lies below the tasks (they import it) and runs nothing itself: the engine's job
executor is passed in (:class:`~cooplab.graphs.jobs.Jobs`). A task supplies only its space (:class:`Dim` rows), what one
sample computes
(a batch function, ``"module:function"``, that evaluates values with the task's own figures code)
and a :class:`Spec` naming its claims; ``tasks/cpr/calibrate.py`` and ``tasks/diners/calibrate.py``
are the two users.

* **The design**: seeded Latin hypercube blocks (``scipy.stats.qmc.LatinHypercube``). Block k is an
  LHS of ``block`` points drawn from ``default_rng([seed, k])``; ``block`` is the sample count of the
  run that created OUT, so a fresh ``--samples N`` is one LHS of N points and ``--samples 2N`` on
  the same OUT appends a second LHS of N points (the first N samples are a prefix of the design).
  ``OUT/design.json`` records it; a rerun with another design is refused in one line.
* **The checkpoint**: every finished sample is appended at once to OUT/samples.jsonl (one locked
  write, fsync), so a rerun of the same command skips it; a worker killed at any moment loses at
  most the samples it was computing, and a line torn by a killed writer is ignored and cut.
* **Execution**: the samples still to do are cut into batches; a batch is a function job of the
  executor the caller passes in (:class:`~cooplab.graphs.jobs.Jobs`: the engine's :mod:`cooplab.runs.sweeps`), so it
  runs in
  a thread (``local``) or as a Ray task.
* **Analysis** (:func:`analyze`): shares of the space where each claim holds, alone and jointly,
  with 95% Wilson intervals; first-order sensitivity indices (SALib RBD-FAST on the given sample,
  and the moment-independent delta when there are enough samples); a claim-holds map over the two
  most influential parameters of each claim, a sensitivity bar chart, the best region, report.md.

This module imports no task and no engine module (the layers point one way: tasks import it).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import socket
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cooplab.graphs import rundir
from cooplab.graphs.jobs import Jobs
from cooplab.limits import parse_json

#: RBD-FAST harmonics: min(10, N // 8), so that the bias correction 2M/N stays <= 1/4
RBD_MAX_M = 10
#: the delta index (SALib.analyze.delta) needs classes of at least 10 samples: only from this many samples on
DELTA_MIN_SAMPLES = 50
SAMPLES = "samples.jsonl"
EVENTS = "events.jsonl"
#: one line per invocation of the command (what it evaluated, how fast)
RUNS = "runs.jsonl"
#: columns of samples.csv that say when and where a sample ran, not what it computed
VOLATILE = ("eval_seconds", "evaluated_at", "pid", "host")
NUMBER_WORDS = {
    2: "two",
    3: "three",
    4: "four",
    5: "five",
    6: "six",
    7: "seven",
    8: "eight",
    9: "nine",
    10: "ten",
    12: "twelve",
}


class CalibrateError(ValueError):
    """A calibration that cannot run (bad options, an OUT holding another design); one line."""


@dataclass(frozen=True)
class Dim:
    """One dimension of the space: a parameter sampled uniformly in [low, high], or log-uniformly
    when ``log``; ``field`` is what it sets in the task's parameters (default: ``name``)."""

    name: str
    low: float
    high: float
    why: str
    log: bool = False
    field: str = ""

    @property
    def target(self) -> str:
        return self.field or self.name

    def value(self, u: np.ndarray | float) -> np.ndarray | float:
        """Unit-cube coordinate(s) -> parameter value(s)."""
        if self.log:
            lo, hi = math.log10(self.low), math.log10(self.high)
            return 10 ** (lo + np.asarray(u) * (hi - lo))
        return self.low + np.asarray(u) * (self.high - self.low)


@dataclass(frozen=True)
class Spec:
    """What a task's calibration is, for the shared code: its claims and how to name and report them."""

    task: str  # "cpr", "diners": design.json's identity and the sweep jobs' task
    title: str  # report.md's heading
    command: str  # the figures command whose experiments one sample runs (report text)
    claims: tuple[str, ...]  # claim ids: columns holds_ID and effect_ID
    effects: dict[str, str]  # claim id -> what its signed effect size is
    fn: str  # the batch function of the sweep jobs, "module:function"
    labels: dict[str, str] = field(default_factory=dict)  # claim id -> label in reports (default "(ID)")
    scalars: tuple[str, ...] = ()  # further per-sample numbers whose sensitivity is analysed
    recorded: tuple[str, ...] = ()  # further per-sample numbers recorded in samples.csv only
    joint_key: str = "all_claims"  # summary.json key of the joint share ("all_five")
    effect_unit: str = ""  # the effect sizes' unit (figures)
    #: (df, wall seconds or None) -> the throughput record of summary.json
    throughput: Callable[[Any, float | None], dict[str, Any]] | None = None
    #: df -> further summary.json entries; summary -> further report.md lines (before "Runs")
    summary_extra: Callable[[Any], dict[str, Any]] | None = None
    report_extra: Callable[[dict[str, Any]], list[str]] | None = None

    @property
    def outputs(self) -> tuple[str, ...]:
        """The outputs whose sensitivity is analysed: the scalars and each claim's effect."""
        return (*self.scalars, *(f"effect_{c}" for c in self.claims))

    def label(self, claim: str) -> str:
        return self.labels.get(claim, f"({claim})")

    @property
    def n_word(self) -> str:
        return NUMBER_WORDS.get(len(self.claims), str(len(self.claims)))


# --- the design --------------------------------------------------------------------------------
def _lhs(d: int, rng: np.random.Generator):
    from scipy.stats import qmc

    try:
        return qmc.LatinHypercube(d=d, rng=rng)
    except TypeError:  # SciPy < 1.15 calls it seed
        # the installed SciPy's stubs name it rng only; SciPy < 1.15 takes seed
        return qmc.LatinHypercube(d=d, seed=rng)  # pyright: ignore[reportCallIssue]


def unit_design(seed: int, n: int, block: int, d: int) -> np.ndarray:
    """The first ``n`` points of the design in the unit cube: LHS blocks of ``block`` points, block k
    drawn from ``default_rng([seed, k])``. ``unit_design(s, m, b, d)[:n] == unit_design(s, n, b, d)``."""
    blocks = [_lhs(d, np.random.default_rng([int(seed), k])).random(block) for k in range(math.ceil(n / block))]
    return np.vstack(blocks)[:n] if blocks else np.zeros((0, d))


def design_values(u: np.ndarray, dims: list[Dim]) -> np.ndarray:
    return np.column_stack([dims[j].value(u[:, j]) for j in range(len(dims))]) if len(u) else np.zeros((0, len(dims)))


def versions() -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, Any] = {"cooplab": rundir.code_version(), "python": sys.version.split()[0]}
    for dist in ("numpy", "scipy", "pandas", "langgraph", "SALib"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def design_id(ident: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def differences(old: dict[str, Any], new: dict[str, Any]) -> str:
    parts = []
    for k in sorted(set(old) | set(new)):
        if old.get(k) != new.get(k):
            a, b = old.get(k), new.get(k)
            parts.append(
                f"{k} {a} -> {b}"
                if not isinstance(a, (list, dict)) and not isinstance(b, (list, dict))
                else f"{k} differs"
            )
    return ", ".join(parts)


def prepare(
    out: Path,
    *,
    samples: int,
    seed: int,
    dims: list[Dim],
    identity: Callable[[int], dict[str, Any]],
    fields: dict[str, Any],
) -> dict[str, Any]:
    """Create OUT and its design.json, or check that OUT holds the same design (extending it when
    ``samples`` is larger). ``identity(block)``: what makes two designs the same design (everything
    but the number of samples), as JSON; ``fields``: further entries of the record (replicates, the
    space table, the fixed parameters, ...). Refuses, with one line and without touching OUT, a
    different design, a smaller sample count, an OUT that is a file or another program's directory."""
    out = Path(out)
    path = out / "design.json"
    if out.exists() and not out.is_dir():
        raise CalibrateError(f"--out {out} is a file, not a directory")
    old = None
    if path.exists():
        try:
            old = parse_json(path.read_bytes(), str(path), error=ValueError)
            if not isinstance(old, dict) or "identity" not in old:
                raise ValueError
        except (OSError, UnicodeDecodeError, ValueError):
            raise CalibrateError(f"{path} is not a calibration design (unreadable); use another --out") from None
    elif out.exists() and any(
        p.name not in (".lock", "design.json.tmp") for p in out.iterdir()
    ):  # .tmp: killed while creating it
        raise CalibrateError(
            f"--out {out} is a non-empty directory without design.json (not a calibration); use another --out"
        )
    block = int(old["identity"].get("block", samples)) if old else samples
    ident = json.loads(
        json.dumps(identity(block))
    )  # as design.json holds it (tuples -> lists), so that the two compare equal
    if old is not None:
        if old["identity"] != ident:
            raise CalibrateError(
                f"{out} holds a different calibration design ({differences(old['identity'], ident)}); "
                f"rerun with its options or use another --out"
            )
        if samples < int(old["samples"]):
            raise CalibrateError(
                f"{out} holds a design of {old['samples']} samples; --samples must be at least that (it extends "
                f"the design), got {samples}; use another --out for a smaller one"
            )
    rundir.ensure_writable(out, CalibrateError)
    u = unit_design(seed, samples, block, len(dims))
    if old is not None:  # the stored design must be what this SciPy regenerates (else the prefix would change)
        n_old = int(old["samples"])
        if not np.array_equal(np.asarray(old["unit"], dtype=float).reshape(n_old, len(dims)), u[:n_old]):
            raise CalibrateError(
                f"the design regenerated here differs from {path} (SciPy {versions()['scipy']} vs "
                f"{old.get('versions', {}).get('scipy')}); use another --out"
            )
    x = design_values(u, dims)
    record = {
        "design_id": design_id(ident),
        "identity": ident,
        "samples": samples,
        "block": block,
        "seed": seed,
        **fields,
        "names": [d.name for d in dims],
        "unit": u.tolist(),
        "values": x.tolist(),
        "created": old.get("created") if old else rundir.now(),
        "updated": rundir.now(),
        "versions": old.get("versions") if old else versions(),
        "versions_now": versions(),
    }
    rundir.write_json(path, record)
    return record


# --- samples on disk -------------------------------------------------------------------------
@contextlib.contextmanager
def locked(out: Path):
    """An exclusive lock on OUT (threads and processes alike: each call opens its own descriptor)."""
    import fcntl

    fd = os.open(Path(out) / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def repair(path: Path) -> None:
    """Cut a line torn by a writer killed mid-write (the file must end with a newline)."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


def read_rows(out: Path, design: str | None = None) -> dict[int, dict[str, Any]]:
    """The finished samples of OUT by number (the first row of a sample wins; a torn last line is
    ignored). ``design``: refuse rows of another design."""
    path = Path(out) / SAMPLES
    rows: dict[int, dict[str, Any]] = {}
    if not path.exists():
        return rows
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        row = _json_or_none(line)  # None: torn by a killed writer
        if not isinstance(row, dict) or not isinstance(row.get("sample"), int):
            continue
        if design is not None and row.get("design") != design:
            raise CalibrateError(
                f"{path} holds samples of another design ({row.get('design')}, not {design}); use another --out"
            )
        rows.setdefault(row["sample"], row)
    return rows


def _json_or_none(line: str | bytes) -> Any:
    """A line of a JSONL file this module appends to, or None if a killed writer tore it (or it is not JSON)."""
    try:
        return parse_json(line, "line", error=ValueError)
    except ValueError:
        return None


def append_line(path: Path, obj: dict[str, Any]) -> None:
    data = (json.dumps(obj, allow_nan=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def event(out: Path, what: str, sample: int) -> None:
    with locked(out):
        append_line(
            Path(out) / EVENTS,
            {"event": what, "sample": sample, "pid": os.getpid(), "host": socket.gethostname(), "time": time.time()},
        )


def append_row(out: Path, row: dict[str, Any]) -> bool:
    """Append one finished sample (once: False when OUT already has it)."""
    out = Path(out)
    with locked(out):
        if row["sample"] in read_rows(out):
            return False
        repair(out / SAMPLES)
        append_line(out / SAMPLES, row)
    return True


def starts(out: Path) -> dict[int, int]:
    """How often each sample's evaluation started (OUT/events.jsonl)."""
    counts: dict[int, int] = {}
    path = Path(out) / EVENTS
    if not path.exists():
        return counts
    for line in path.read_text().splitlines():
        e = _json_or_none(line)
        if not isinstance(e, dict):
            continue
        if e.get("event") == "start":
            counts[e["sample"]] = counts.get(e["sample"], 0) + 1
    return counts


# --- batches of samples: jobs of cooplab.runs.sweeps ----------------------------------------------
def run_batch(j: dict[str, Any], evaluate: Callable[[dict[str, float], dict[str, Any]], dict[str, Any]]) -> str:
    """The body of a task's batch function: evaluate the batch's samples that OUT does not have yet
    (``evaluate(values, config)``), appending each as soon as it is done. "skipped" when all were
    done, "resumed" when some."""
    c = j["config"]
    out = Path(c["out"])
    have = read_rows(out)
    todo = [i for i in c["samples"] if i not in have]
    for i in todo:
        values = c["values"][str(i)]
        event(out, "start", i)
        res = evaluate(values, c)
        row = {
            "sample": i,
            "design": c["design"],
            "params": values,
            "unit": c["unit"][str(i)],
            **res,
            "evaluated_at": rundir.now(),
            "pid": os.getpid(),
            "host": socket.gethostname(),
        }
        append_row(out, row)
        event(out, "done", i)
    if not todo:
        return "skipped"
    return "ran" if len(todo) == len(c["samples"]) else "resumed"


def jobs(
    out: Path,
    record: dict[str, Any],
    todo: list[int],
    batch: int,
    spec: Spec,
    extra: dict[str, Any] | None = None,
    *,
    job: Callable[..., dict[str, Any]],
) -> list[dict[str, Any]]:
    """The samples still to do, ``batch`` at a time, as jobs of the executor (``job``: its job builder,
    :func:`cooplab.runs.sweeps.job`); ``extra``: what else the batch function needs in its config (the fixed
    overrides, ...)."""

    names = record["names"]
    out_jobs = []
    for k in range(0, len(todo), batch):
        ids = todo[k : k + batch]
        config = {
            "out": str(Path(out).absolute()),
            "design": record["design_id"],
            "samples": ids,
            "seed": record["seed"],
            "replicates": record["replicates"],
            **(extra or {}),
            "values": {str(i): dict(zip(names, record["values"][i], strict=False)) for i in ids},
            "unit": {str(i): record["unit"][i] for i in ids},
        }
        out_jobs.append(
            job(
                Path(out) / "batches" / f"samples-{ids[0]:06d}-{ids[-1]:06d}",
                spec.task,
                config,
                fn=spec.fn,
                labels={"first": ids[0], "last": ids[-1]},
            )
        )
    return out_jobs


def table(rows: dict[int, dict[str, Any]], names: list[str], n: int, spec: Spec) -> "Any":
    """The finished samples among the first ``n`` as one flat table (one row per sample)."""
    import pandas as pd

    tail = ("n_held", *spec.scalars, *spec.recorded, *VOLATILE)
    flat = []
    for i in sorted(k for k in rows if k < n):
        r = rows[i]
        d: dict[str, Any] = {"sample": i}
        d.update({name: r["params"][name] for name in names})
        d.update({f"u_{name}": r["unit"][j] for j, name in enumerate(names)})
        d.update({f"holds_{c}": r["holds"][c] for c in spec.claims})
        d.update({f"effect_{c}": r["effect"][c] for c in spec.claims})
        d.update({k: r[k] for k in tail})
        flat.append(d)
    cols = [
        "sample",
        *names,
        *(f"u_{x}" for x in names),
        *(f"holds_{c}" for c in spec.claims),
        *(f"effect_{c}" for c in spec.claims),
        *tail,
    ]
    return pd.DataFrame(flat, columns=cols)


def write_csv(df, path: Path) -> None:
    tmp = Path(str(path) + ".tmp")
    df.to_csv(tmp, index=False)
    tmp.replace(path)


def calibrate(
    out: Path,
    record: dict[str, Any],
    spec: Spec,
    *,
    jobs_on: Jobs,
    samples: int,
    batch: int,
    parallel: int,
    executor: str,
    address: str | None,
    extra: dict[str, Any] | None,
    log: Callable[[str], None],
    quiet: bool,
    analyze_fn: Callable[..., dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Evaluate every sample of a prepared OUT (:func:`prepare`) it does not have yet on ``jobs_on`` (the
    engine's :mod:`cooplab.runs.sweeps`), then analyse the first ``samples`` (``analyze_fn``, default
    :func:`analyze` with ``spec``)."""

    out = Path(out)
    with locked(out):
        repair(out / SAMPLES)
    have = read_rows(out, record["design_id"])
    todo = [i for i in range(samples) if i not in have]
    log(
        f"calibrate {spec.task}: {samples} samples x {len(record['names'])} parameters, {record['replicates']} "
        "replicates per "
        f"condition; {samples - len(todo)} already done, {len(todo)} to run in {math.ceil(len(todo) / batch)} batches "
        f"({executor})"
    )
    t0 = time.perf_counter()
    res = jobs_on.run_jobs(
        jobs(out, record, todo, batch, spec, extra, job=jobs_on.job),
        parallel=parallel,
        noun="batch",
        executor=executor,
        address=address,
        log=log,
        quiet=quiet,
    )
    wall = time.perf_counter() - t0
    rows = read_rows(out, record["design_id"])
    df = table(rows, record["names"], samples, spec)
    write_csv(df, out / "samples.csv")
    evaluated_now = [i for i in todo if i in rows]
    run = {
        "executor": res["executor"],
        "parallel": parallel,
        "batch": batch,
        "batches": len(res["ran"]) + len(res["resumed"]) + len(res["failed"]),
        "failed": res["failed"],
        "samples_evaluated": len(evaluated_now),
        "samples_skipped": samples - len(todo),
        "wall_seconds": round(wall, 3),
    }
    tp = spec.throughput or (lambda d, w: {})
    run["throughput"] = tp(df[df["sample"].isin(evaluated_now)], wall)
    run["finished_at"] = rundir.now()
    with locked(out):
        append_line(out / RUNS, run)
    runs = [r for r in map(_json_or_none, (out / RUNS).read_text().splitlines()) if isinstance(r, dict)]
    if analyze_fn is None:
        summary = analyze(out, df, record, spec, run, runs=runs, per_sample=tp(df, None))
    else:
        summary = analyze_fn(out, df, record, run, runs=runs, per_sample=tp(df, None))
    # the batches are not run directories: the manifest counts the samples, and names the folder's files
    jobs_on.write_manifest(
        out,
        "calibration",
        spec.task,
        [],
        outputs={
            "design": "design.json",
            "checkpoint": SAMPLES,
            "samples": "samples.csv",
            "claims_map": "claims_map.csv",
            "sensitivity": "sensitivity.csv",
            "summary": "summary.json",
            "report": "report.md",
        },
        counts={"samples": samples, "evaluated": len(rows)},
    )
    return summary


# --- analysis ---------------------------------------------------------------------------------
def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float | None, float | None]:
    """The 95% Wilson score interval of k successes in n trials ((None, None) for n = 0)."""
    if n == 0:
        return None, None
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (0.0 if k == 0 else max(0.0, mid - half)), (1.0 if k == n else min(1.0, mid + half))


def share(k: int, n: int) -> dict[str, Any]:
    """k of n with the share and its 95% Wilson interval."""
    lo, hi = wilson(k, n)
    return {"held": int(k), "n": int(n), "share": k / n if n else None, "ci95_low": lo, "ci95_high": hi}


def claims_map(df, spec: Spec) -> list[dict[str, Any]]:
    """Share of the samples where each claim holds, all jointly, and exactly (at least) k of them,
    with 95% Wilson intervals."""
    n = int(len(df))
    K = len(spec.claims)
    rows = []

    def add(kind: str, name: str, what: str, k: int) -> None:
        rows.append({"kind": kind, "claim": name, "what": what, **share(k, n)})

    for c in spec.claims:
        add(
            "claim",
            c,
            f"claim {spec.label(c)} holds; effect = {spec.effects[c]}",
            int(df[f"holds_{c}"].sum()) if n else 0,
        )
    add("joint", "all", f"all {spec.n_word} claims hold", int((df["n_held"] == K).sum()) if n else 0)
    for k in range(K + 1):
        add(
            "count",
            f"={k}",
            f"exactly {k} of the {spec.n_word} claims hold",
            int((df["n_held"] == k).sum()) if n else 0,
        )
    for k in range(1, K + 1):
        add(
            "at_least",
            f">={k}",
            f"at least {k} of the {spec.n_word} claims hold",
            int((df["n_held"] >= k).sum()) if n else 0,
        )
    return rows


@contextlib.contextmanager
def quiet_salib():
    """SALib prints notices to stdout and sets warning filters and NumPy's global seed: keep all of
    that away from the caller (``--json`` output must stay clean)."""
    state = np.random.get_state()
    with warnings.catch_warnings(record=True), contextlib.redirect_stdout(io.StringIO()), _one_blas_thread():
        warnings.simplefilter("ignore")  # record=True as well: SALib sets its own filters inside
        try:
            yield
        finally:
            np.random.set_state(state)


def _one_blas_thread():
    """One BLAS thread: SALib's delta solves thousands of tiny systems (one KDE each), which a
    threaded OpenBLAS on a busy machine makes 25 times slower (0.6 s -> 16 s for 128 samples)."""
    try:
        # optional (not a dependency of cooplab): without it, BLAS keeps its threads
        from threadpoolctl import threadpool_limits  # pyright: ignore[reportMissingImports]
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def sensitivity(
    df,
    names: list[str],
    outputs: tuple[str, ...],
    seed: int = 0,
    *,
    delta_min: int | None = None,
    command: str = "cooplab calibrate",
) -> list[dict[str, Any]]:
    """First-order sensitivity of each output to each dimension, on the given sample (unit-cube
    coordinates ``u_NAME``: indices do not change under the monotone log scale): SALib RBD-FAST
    (S1 with a bootstrap confidence half-width) and, from ``delta_min`` (:data:`DELTA_MIN_SAMPLES`)
    samples on, Borgonovo's delta (moment-independent; with its confidence). Ranked by RBD-FAST S1."""
    from cooplab.extras import require

    require("analysis", f"the sensitivity analysis ({command})", ("SALib",))
    from SALib.analyze import delta as sa_delta
    from SALib.analyze import rbd_fast

    delta_min = DELTA_MIN_SAMPLES if delta_min is None else delta_min
    n = int(len(df))
    problem = {"num_vars": len(names), "names": list(names), "bounds": [[0.0, 1.0]] * len(names)}
    X = df[[f"u_{x}" for x in names]].to_numpy(dtype=float) if n else np.zeros((0, len(names)))
    M = min(RBD_MAX_M, n // 8)
    rows = []
    for out_name in outputs:
        Y = df[out_name].to_numpy(dtype=float) if n else np.zeros(0)
        ok = np.isfinite(Y)
        note = ""
        res_r: dict[str, Any] = {}
        res_d: dict[str, Any] = {}
        if M < 1 or ok.sum() < 16:
            note = f"too few samples ({int(ok.sum())}; RBD-FAST needs at least 16)"
        elif np.nanstd(Y[ok]) == 0:
            note = "the output is constant over the samples"
        else:
            with quiet_salib():
                res_r = dict(rbd_fast.analyze(problem, X[ok], Y[ok], M=M, num_resamples=100, seed=seed))
                if ok.sum() >= delta_min:
                    try:
                        res_d = dict(
                            sa_delta.analyze(problem, X[ok], Y[ok], num_resamples=50, seed=seed + 1, method="delta")
                        )
                    except Exception as exc:  # noqa: BLE001 - a failed delta leaves RBD-FAST's numbers standing
                        note = f"delta failed: {type(exc).__name__}"
        s1 = [float(v) for v in res_r.get("S1", [np.nan] * len(names))]
        order = sorted(range(len(names)), key=lambda j: -s1[j] if math.isfinite(s1[j]) else math.inf)
        rank = {j: r + 1 for r, j in enumerate(order)} if res_r else {}
        for j, name in enumerate(names):
            rows.append(
                {
                    "output": out_name,
                    "parameter": name,
                    "method": "rbd_fast" + ("+delta" if res_d else ""),
                    "S1": s1[j],
                    "S1_conf": float(res_r["S1_conf"][j]) if res_r else float("nan"),
                    "delta": float(res_d["delta_raw"][j]) if res_d else float("nan"),
                    "delta_conf": float(res_d["delta_raw_conf"][j]) if res_d else float("nan"),
                    "rank": rank.get(j),
                    "n": int(ok.sum()),
                    "M": M if res_r else None,
                    "note": note,
                }
            )
    return rows


def top_parameters(sens: list[dict[str, Any]], output: str, k: int = 2) -> list[str]:
    ranked = sorted((r for r in sens if r["output"] == output and r["rank"] is not None), key=lambda r: r["rank"])
    return [r["parameter"] for r in ranked[:k]]


def best_region(df, names: list[str], spec: Spec, limit: int = 20) -> dict[str, Any]:
    """The samples where the most claims hold jointly, with their parameter values, and the box they span."""
    if not len(df):
        return {"max_claims_held": None, "samples": [], "box": {}}
    top = int(df["n_held"].max())
    sub = df[df["n_held"] == top].copy()
    sub["effect_sum"] = sub[[f"effect_{c}" for c in spec.claims]].sum(axis=1)
    sub = sub.sort_values(["effect_sum", "sample"], ascending=[False, True])
    samples = [
        {
            "sample": int(r["sample"]),
            "claims_held": [c for c in spec.claims if bool(r[f"holds_{c}"])],
            "params": {x: float(r[x]) for x in names},
            "effects": {c: float(r[f"effect_{c}"]) for c in spec.claims},
            **{s: float(r[s]) for s in spec.scalars},
        }
        for _, r in sub.head(limit).iterrows()
    ]
    box = {x: [float(sub[x].min()), float(sub[x].max())] for x in names}
    return {"max_claims_held": top, "n_samples": int(len(sub)), "samples": samples, "box": box}


def analyze(
    out: Path,
    df,
    record: dict[str, Any],
    spec: Spec,
    run: dict[str, Any] | None = None,
    *,
    runs: list[dict[str, Any]] | None = None,
    per_sample: dict[str, Any] | None = None,
    sens: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Write OUT/claims_map.csv, sensitivity.csv, figures/, summary.json and report.md. ``run``: this
    invocation; ``runs``: every invocation on OUT (the throughput reported is that of the last one
    that evaluated samples); ``per_sample``: the throughput by the samples' own times; ``sens``: the
    sensitivity rows when the caller computed them (default :func:`sensitivity`)."""
    import pandas as pd

    from cooplab.evals.plots_calibration import claim_map_figure, sensitivity_figure

    out = Path(out)
    names = record["names"]
    logs = {r["name"]: r["scale"] == "log" for r in record["space"]}
    cmap = claims_map(df, spec)
    if sens is None:
        sens = sensitivity(df, names, spec.outputs, seed=int(record["seed"]), command=f"cooplab calibrate {spec.task}")
    pd.DataFrame(cmap).to_csv(out / "claims_map.csv", index=False)
    pd.DataFrame(sens).to_csv(out / "sensitivity.csv", index=False)
    figdir = out / "figures"
    figdir.mkdir(exist_ok=True)
    figures = []
    if len(df):
        figures.append(str(sensitivity_figure(pd.DataFrame(sens), figdir / "sensitivity.png")))
        for c in spec.claims:
            axes = top_parameters(sens, f"effect_{c}") or names[:2]
            if len(axes) < 2:
                axes = (axes + [x for x in names if x not in axes])[:2]
            figures.append(
                str(
                    claim_map_figure(
                        df,
                        c,
                        axes[0],
                        axes[1],
                        logs.get(axes[0], False),
                        logs.get(axes[1], False),
                        figdir / f"claim_{c}_map.png",
                        unit=spec.effect_unit,
                        label=spec.label(c),
                    )
                )
            )
    shares = {r["claim"]: {k: r[k] for k in ("held", "n", "share", "ci95_low", "ci95_high")} for r in cmap}
    K = len(spec.claims)
    summary = {
        "task": spec.task,
        "design_id": record["design_id"],
        "samples": record["samples"],
        "finished": int(len(df)),
        "complete": int(len(df)) == int(record["samples"]),
        "seed": record["seed"],
        "replicates": record["replicates"],
        "block": record["block"],
        **{k: record[k] for k in ("preset", "base") if k in record},
        "space": record["space"],
        "effects": spec.effects,
        "labels": {c: spec.label(c) for c in spec.claims},
        "claims": {c: shares[c] for c in spec.claims},
        spec.joint_key: shares["all"],
        "claims_held_count": {k: shares[f"={k}"] for k in range(K + 1)},
        **{
            s: {
                "mean": float(df[s].mean()) if len(df) else None,
                "min": float(df[s].min()) if len(df) else None,
                "max": float(df[s].max()) if len(df) else None,
            }
            for s in spec.scalars
        },
        "most_influential": {o: top_parameters(sens, o, 3) for o in spec.outputs},
        "best_region": best_region(df, names, spec),
        **(spec.summary_extra(df) if spec.summary_extra else {}),
        "run": run or {},
        "runs": runs or ([run] if run else []),
        "throughput": next(
            (r["throughput"] for r in reversed(runs or ([run] if run else [])) if r.get("samples_evaluated")), None
        ),
        "throughput_per_sample_times": per_sample,
        "files": {
            "design": "design.json",
            "samples": "samples.csv",
            "checkpoint": SAMPLES,
            "claims_map": "claims_map.csv",
            "sensitivity": "sensitivity.csv",
            "report": "report.md",
            "figures": [str(Path(f).relative_to(out)) for f in figures],
        },
        "versions": versions(),
        "design_versions": record.get("versions"),
        "created": rundir.now(),
        "machine": rundir.machine(),
    }
    rundir.write_json(out / "summary.json", summary)
    (out / "report.md").write_text(report(summary, sens, spec))
    return summary


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def ci_text(d: dict[str, Any]) -> str:
    return "n/a" if d["ci95_low"] is None else f"[{pct(d['ci95_low'])}, {pct(d['ci95_high'])}]"


def report(s: dict[str, Any], sens: list[dict[str, Any]], spec: Spec) -> str:
    """report.md: the design, the claims map, the sensitivity ranking, the best region, throughput."""
    L = [
        f"# {spec.title}",
        "",
        f"{s['finished']} of {s['samples']} samples of a seeded Latin hypercube (seed {s['seed']}, LHS blocks of "
        f"{s['block']}), "
        f"{s['replicates']} replicates per condition; every sample runs the experiments of `{spec.command} --seed "
        f"{s['seed']}` "
        f"with its parameter values. Design {s['design_id']}."
        + (f" Preset {s['preset']}." if s.get("preset") else "")
        + (f" Fixed overrides: {s['base']}." if s.get("base") else ""),
        "",
        "## The space",
        "",
        "| parameter | low | high | scale | default | why |",
        "|---|---|---|---|---|---|",
    ]
    for r in s["space"]:
        L.append(f"| `{r['name']}` | {r['low']:g} | {r['high']:g} | {r['scale']} | {r['default']} | {r['why']} |")
    L += [
        "",
        "## Where the claims hold (share of the samples, 95% Wilson interval)",
        "",
        "| claim | held | share | 95% CI | effect size |",
        "|---|---|---|---|---|",
    ]
    for c in spec.claims:
        d = s["claims"][c]
        L.append(f"| {spec.label(c)} | {d['held']}/{d['n']} | {pct(d['share'])} | {ci_text(d)} | {s['effects'][c]} |")
    d = s[spec.joint_key]
    L.append(f"| all {spec.n_word} | {d['held']}/{d['n']} | {pct(d['share'])} | {ci_text(d)} | |")
    L += [
        "",
        "Claims held per sample: " + ", ".join(f"{k}: {v['held']}" for k, v in s["claims_held_count"].items()),
        "",
    ]
    L += [
        "## Sensitivity (first-order, RBD-FAST S1 ± confidence half-width; Borgonovo delta when N >= "
        f"{DELTA_MIN_SAMPLES})",
        "",
    ]
    for o in spec.outputs:
        rows = sorted((r for r in sens if r["output"] == o and r["rank"] is not None), key=lambda r: r["rank"])
        if not rows:
            note = next((r["note"] for r in sens if r["output"] == o), "")
            L.append(f"- `{o}`: not estimated ({note})")
            continue
        L.append(
            f"- `{o}`: "
            + ", ".join(
                f"{r['parameter']} {r['S1']:.2f}±{r['S1_conf']:.2f}"
                + (f" (delta {r['delta']:.2f})" if math.isfinite(r["delta"]) else "")
                for r in rows[:5]
            )
        )
    confs = [r["S1_conf"] for r in sens if r["rank"] is not None and math.isfinite(r["S1_conf"])]
    if confs and float(np.median(confs)) > 0.3:
        L += [
            "",
            f"The confidence half-widths (median {float(np.median(confs)):.2f}) are as large as the indices: "
            f"{s['finished']} "
            "samples are too few to rank the parameters; read the ranking as a hint only (more samples narrow them).",
        ]
    b = s["best_region"]
    L += ["", "## Best region", ""]
    if b["max_claims_held"] is None:
        L.append("No samples yet.")
    else:
        L.append(
            f"{b['n_samples']} samples hold {b['max_claims_held']} of the {spec.n_word} claims jointly (the most); the "
            "first "
            f"{len(b['samples'])} by summed effect size:"
        )
        L += ["", "| sample | claims | " + " | ".join(b["box"]) + " |", "|---|---|" + "---|" * len(b["box"])]
        for smp in b["samples"]:
            L.append(
                f"| {smp['sample']} | {', '.join(smp['claims_held']) or '-'} | "
                + " | ".join(f"{v:.3g}" for v in smp["params"].values())
                + " |"
            )
    if spec.report_extra:
        L += [""] + spec.report_extra(s)
    L += [
        "",
        "## Runs",
        "",
        "| finished | evaluated | already done | executor | parallel | wall (s) | samples x replicates x rounds / s "
        "| society-rounds simulated / s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in s.get("runs") or []:
        tp = r.get("throughput") or {}
        L.append(
            f"| {r.get('finished_at')} | {r.get('samples_evaluated')} | {r.get('samples_skipped')} | "
            f"{r.get('executor')} | "
            f"{r.get('parallel')} | {r.get('wall_seconds')} | {tp.get('samples_x_replicates_x_rounds_per_second')} | "
            f"{tp.get('society_rounds_simulated_per_second')} |"
        )
    L += [
        "",
        "",
        "Files: samples.csv (one row per sample), samples.jsonl (the checkpoint, with each claim's evidence), "
        "design.json, "
        "claims_map.csv, sensitivity.csv, figures/, summary.json.",
        "",
    ]
    return "\n".join(L)


def summary_lines(s: dict[str, Any], spec: Spec) -> list[str]:
    """What ``cooplab calibrate TASK`` prints without --json."""
    lines = []
    for c in spec.claims:
        d = s["claims"][c]
        ci = "n/a" if d["ci95_low"] is None else f"[{100 * d['ci95_low']:.0f}%, {100 * d['ci95_high']:.0f}%]"
        top = ", ".join(s["most_influential"][f"effect_{c}"][:2]) or "n/a"
        lines.append(
            f"{spec.label(c)} holds in {d['held']}/{d['n']} samples ({100 * (d['share'] or 0):.0f}%, 95% CI {ci}); "
            f"most influential: {top}"
        )
    d = s[spec.joint_key]
    lines.append(
        f"all {spec.n_word} hold in {d['held']}/{d['n']}; most claims held jointly: "
        f"{s['best_region']['max_claims_held']} "
        f"(in {s['best_region'].get('n_samples', 0)} samples)"
    )
    run = s["run"]
    tp = (run.get("throughput") or {}).get("samples_x_replicates_x_rounds_per_second")
    lines.append(
        f"{run['samples_evaluated']} samples evaluated, {run['samples_skipped']} already done, {len(run['failed'])} "
        "batches "
        f"failed; {run['wall_seconds']:.1f} s" + (f", {tp} samples x replicates x rounds per second" if tp else "")
    )
    return lines


def failure_line(s: dict[str, Any]) -> str | None:
    """The error line when batches failed (the command then exits 1)."""
    failed = s["run"]["failed"]
    if not failed:
        return None
    return (
        f"cooplab: {len(failed)} batches failed (first: {failed[0]['batch']}: {failed[0]['error']}); "
        f"rerun the same command to retry their samples"
    )
