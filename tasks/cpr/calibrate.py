"""``cooplab calibrate cpr``: where in the space of our free ("chosen") parameters the paper's five
ABM claims hold (docs/calibrate.md).

* **The space** (:data:`SPACE`): every CPRParams field whose source is "chosen" either has a range
  ``[low, high]`` with a one-line justification, or is kept fixed with a reason (:data:`FIXED`). The
  paper's values (N, T, the r and beta of the experiments, punishment off at t = 15) are never
  sampled. ``il_rate`` joins the space when CPRParams has that field.
* **The design**: seeded Latin hypercube blocks (``scipy.stats.qmc.LatinHypercube``). Block k is an
  LHS of ``block`` points drawn from ``default_rng([seed, k])``; ``block`` is the sample count of the
  run that created OUT, so a fresh ``--samples N`` is one LHS of N points and ``--samples 2N`` on
  the same OUT appends a second LHS of N points (the first N samples are a prefix of the design).
* **A sample** runs :func:`cooplab.tasks.cpr.abm_figures.run_experiments` and ``check_claims``
  (exactly what ``cooplab figures cpr-abm --seed SEED --set ...`` runs) with its parameter values:
  one graph invocation per experiment, seeds SEED, SEED + 1, SEED + 2 for every sample (common
  random numbers across samples).
* **Execution**: the samples still to do are cut into batches; a batch is a job of
  :mod:`cooplab.sweeps` (a function job), so it runs in a thread (``local``) or as a Ray task.
  Every finished sample is appended at once to OUT/samples.jsonl (one locked write, fsync), so a
  rerun of the same command skips it; a worker killed at any moment loses at most the samples it
  was computing.
* **Analysis** (:func:`analyze`): shares of the space where each claim holds, alone and jointly,
  with 95% Wilson intervals; first-order sensitivity indices (SALib RBD-FAST on the given sample,
  and the moment-independent delta when there are enough samples); a claim-holds map over the two
  most influential parameters of each claim, a sensitivity bar chart, the best region.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cooplab.tasks.cpr.params import CPRParams, params_table

CLAIMS = ("a", "b", "c1", "c2", "c3")
#: the outputs whose sensitivity is analysed: mean survival over the Fig. 3 grid and each claim's effect
OUTPUTS = ("survival_mean", *(f"effect_{c}" for c in CLAIMS))
#: design.json's layout; a different one on disk is refused
SCHEMA = 1
#: RBD-FAST harmonics: min(10, N // 8), so that the bias correction 2M/N stays <= 1/4
RBD_MAX_M = 10
#: the delta index (SALib.analyze.delta) needs classes of at least 10 samples: only from this many samples on
DELTA_MIN_SAMPLES = 50


class CalibrateError(ValueError):
    """A calibration that cannot run (bad options, an OUT holding another design); one line."""


@dataclass(frozen=True)
class Dim:
    """One dimension of the space: a CPRParams field (or the upper end of a propensity range) sampled
    uniformly in [low, high], or log-uniformly when ``log``."""

    name: str
    low: float
    high: float
    why: str
    log: bool = False
    field: str = ""  # the CPRParams field it sets (default: name); m_max/p_max set m_range/p_range = (0, value)

    @property
    def target(self) -> str:
        return self.field or self.name

    def value(self, u: np.ndarray | float) -> np.ndarray | float:
        """Unit-cube coordinate(s) -> parameter value(s)."""
        if self.log:
            lo, hi = math.log10(self.low), math.log10(self.high)
            return 10 ** (lo + np.asarray(u) * (hi - lo))
        return self.low + np.asarray(u) * (self.high - self.low)


# --- the space (ranges fixed before any search; docs/calibrate.md) ------------------------------
SPACE: tuple[Dim, ...] = (
    Dim("alpha", 0.05, 0.2, "a full-effort fleet of 10 takes N*alpha = 50% to 200% of the stock per round: overfishing stays "
        "possible in both lakes (10*alpha > r/(1+r)) up to an empty lake in half a round; default 0.1 at the geometric centre", log=True),
    Dim("c", 2.0, 8.0, "40% to 160% of the harsh lake's per-capita MSY rK/4N = 5 (13% to 53% of the rich lake's 15): from easy "
        "subsistence to a harsh lake that cannot feed everyone, while the rich lake always can"),
    Dim("P0", 5.0, 60.0, "from half of one beta = 10 fine (a first punishment starves) to six fines or 15 rounds of default consumption"),
    Dim("R_min", 20.0, 100.0, "collapse threshold from 2% of K (near extinction) to 10% of K (the low end of fisheries' 'overfished' "
        "reference points)"),
    Dim("gamma", 0.0, 10.0, "punisher's cost from free to the fine itself at beta = 10: fee:fine 0 to 1:1, around lab experiments' "
        "1:1 to 1:4 (commonly 1:3)"),
    Dim("delta", 0.02, 2.0, "a 5-fish payoff gap is copied with probability 0.52 (near-neutral drift) to 0.99995 (deterministic "
        "imitation); default 0.2 at the geometric centre", log=True),
    Dim("sigma", 0.0, 0.2, "mutation from none to a fifth of a trait's initial range per copy (the paper: 'small')"),
    Dim("learn_prob", 0.05, 1.0, "strategy revision from once in 20 rounds to every round: the paper's 'occasionally' is the low "
        "end; imitation is one of the two channels through which a fine changes behaviour (docs/cpr.md)"),
    Dim("ema", 0.1, 1.0, "payoff memory from about 10 rounds (1/lambda) to the last round only"),
    Dim("e_min", 0.0, 0.1, "lowest initial effort from zero to 2.5 times subsistence at full stock with the default alpha "
        "(alpha*e*K = c at 0.04)"),
    Dim("e_max", 0.3, 1.0, "highest initial effort from 0.3 (our first version, where the rich lake could not be overfished) to "
        "the physical maximum"),
    Dim("g_min", 0.0, 8.0, "lowest initial cap from none (our first version) to twice the default consumption"),
    Dim("g_max", 15.0, 45.0, "highest initial cap from the rich lake's per-capita MSY (15) to three times it"),
    Dim("m_max", 0.2, 1.0, "initial monitoring propensities uniform on [0, m_max]: from a population that rarely inspects "
        "(mean 0.1) to the full unit interval (default)", field="m_range"),
    Dim("p_max", 0.2, 1.0, "initial punishment propensities uniform on [0, p_max]; p is never copied, so this sets how much a "
        "population punishes for life", field="p_range"),
)
#: dimensions that join the space as soon as CPRParams has their field
OPTIONAL: tuple[Dim, ...] = (
    Dim("il_rate", 0.0, 0.5, "individual learning from none (the v1 model) to closing half the gap to a violated norm per fine"),
)
#: "chosen" parameters deliberately not sampled, and why
FIXED: dict[str, str] = {
    "K": "the unit of fish: every amount (c, P0, R_min, gamma, caps) is sampled relative to K = 1000; what K does beyond the unit "
         "(the paper's absolute beta = 10, 14 against the catch) is covered by sampling c, P0, gamma and the caps against fixed beta, "
         "and alpha*K (a full-effort catch of 50-200 fish) by sampling alpha",
    "R0": "R0 = K: the lake starts unexploited, as in the paper's figures (a lower start only removes the first rounds of decline)",
    "m_range": "the lower end stays 0 (the full unit interval starts there); the upper end is the dimension m_max",
    "p_range": "the lower end stays 0; the upper end is the dimension p_max",
}
#: the parameters the paper gives (never sampled; the experiments set r, beta and punish_off_round themselves)
PAPER = ("N", "T", "r", "beta", "punish_off_round", "punishment", "social_learning", "group_decision")


def chosen_fields() -> list[str]:
    """CPRParams fields whose source is "chosen" (``cooplab params cpr``)."""
    return [r["name"] for r in params_table() if str(r["source"]).startswith("chosen")]


def space() -> list[Dim]:
    """The dimensions of the space with the CPRParams fields that exist now."""
    fields = CPRParams.model_fields
    return [d for d in SPACE if d.target in fields] + [d for d in OPTIONAL if d.target in fields]


def kept_fixed() -> dict[str, str]:
    """Every CPRParams field that is not sampled, with the reason (switches: the model, not a number)."""
    sampled = {d.target for d in space()}
    out: dict[str, str] = {}
    for name, f in CPRParams.model_fields.items():
        if name in sampled and name not in FIXED:
            continue
        if name in FIXED:
            out[name] = FIXED[name]
        elif name in PAPER:
            out[name] = "given by the paper (the experiments set r, beta and punish_off_round)"
        elif f.annotation is bool:
            out[name] = "a switch of the model, kept at its default (change it for every sample with --set)"
        else:
            out[name] = "not in the space: kept at its default (add it to SPACE or FIXED in tasks/cpr/calibrate.py)"
    return out


def space_table() -> list[dict[str, Any]]:
    """The space as rows (docs, design.json, report.md)."""
    defaults = CPRParams()
    rows = []
    for d in space():
        default = getattr(defaults, d.target)
        if isinstance(default, tuple):
            default = default[1]
        rows.append({"name": d.name, "field": d.target, "low": d.low, "high": d.high, "scale": "log" if d.log else "linear",
                     "default": default, "why": d.why})
    return rows


def overrides_of(values: dict[str, float]) -> dict[str, Any]:
    """A sample's values (by dimension name) -> CPRParams overrides."""
    out: dict[str, Any] = {}
    for d in space():
        v = float(values[d.name])
        out[d.target] = [0.0, v] if d.target in ("m_range", "p_range") else v
    return out


# --- the design --------------------------------------------------------------------------------
def _lhs(d: int, rng: np.random.Generator):
    from scipy.stats import qmc

    try:
        return qmc.LatinHypercube(d=d, rng=rng)
    except TypeError:  # SciPy < 1.15 calls it seed
        return qmc.LatinHypercube(d=d, seed=rng)


def unit_design(seed: int, n: int, block: int, d: int) -> np.ndarray:
    """The first ``n`` points of the design in the unit cube: LHS blocks of ``block`` points, block k
    drawn from ``default_rng([seed, k])``. ``unit_design(s, m, b, d)[:n] == unit_design(s, n, b, d)``."""
    blocks = [_lhs(d, np.random.default_rng([int(seed), k])).random(block) for k in range(math.ceil(n / block))]
    return np.vstack(blocks)[:n] if blocks else np.zeros((0, d))


def design_values(u: np.ndarray, dims: list[Dim]) -> np.ndarray:
    return np.column_stack([dims[j].value(u[:, j]) for j in range(len(dims))]) if len(u) else np.zeros((0, len(dims)))


def versions() -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    from cooplab import runstore

    out: dict[str, Any] = {"cooplab": runstore.code_version(), "python": sys.version.split()[0]}
    for dist in ("numpy", "scipy", "pandas", "langgraph", "SALib"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def identity(*, seed: int, replicates: int, block: int, base: dict[str, Any], preset: str | None) -> dict[str, Any]:
    """What makes two designs the same design: everything but the number of samples."""
    from cooplab.tasks.cpr import abm_figures as af

    ident = {
        "schema": SCHEMA, "task": "cpr", "seed": int(seed), "replicates": int(replicates), "block": int(block),
        "space": [{k: r[k] for k in ("name", "field", "low", "high", "scale")} for r in space_table()],
        "base": base, "preset": preset,
        "experiments": {"fig2": {"betas": list(af.FIG2_BETAS), "off": af.FIG2_OFF, "r": af.FIG2_R, "population": af.FIG2_POP},
                        "fig3": {"betas": list(af.FIG3_BETAS), "rs": list(af.FIG3_RS), "population": af.FIG3_POP},
                        "fig4": {"envs": dict(_envs())}, "seeds": "seed, seed + 1, seed + 2 for every sample"},
    }
    return json.loads(json.dumps(ident))  # as design.json holds it (tuples -> lists), so that the two compare equal


def _envs() -> dict[str, float]:
    from cooplab.tasks.cpr.params import ENVIRONMENTS

    return dict(ENVIRONMENTS)


def design_id(ident: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def _differences(old: dict[str, Any], new: dict[str, Any]) -> str:
    parts = []
    for k in sorted(set(old) | set(new)):
        if old.get(k) != new.get(k):
            a, b = old.get(k), new.get(k)
            parts.append(f"{k} {a} -> {b}" if not isinstance(a, (list, dict)) and not isinstance(b, (list, dict)) else f"{k} differs")
    return ", ".join(parts)


def prepare(out: Path, *, samples: int, seed: int, replicates: int, base: dict[str, Any], preset: str | None) -> dict[str, Any]:
    """Create OUT and its design.json, or check that OUT holds the same design (extending it when
    ``samples`` is larger). Refuses, with one line and without touching OUT, a different design, a
    smaller sample count, an OUT that is a file or another program's directory."""
    out = Path(out)
    path = out / "design.json"
    if out.exists() and not out.is_dir():
        raise CalibrateError(f"--out {out} is a file, not a directory")
    old = None
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(old, dict) or "identity" not in old:
                raise ValueError
        except (OSError, UnicodeDecodeError, ValueError):
            raise CalibrateError(f"{path} is not a calibration design (unreadable); use another --out") from None
    elif out.exists() and any(p.name not in (".lock", "design.json.tmp") for p in out.iterdir()):  # .tmp: killed while creating it
        raise CalibrateError(f"--out {out} is a non-empty directory without design.json (not a calibration); use another --out")
    block = int(old["identity"].get("block", samples)) if old else samples
    ident = identity(seed=seed, replicates=replicates, block=block, base=base, preset=preset)
    if old is not None:
        if old["identity"] != ident:
            raise CalibrateError(f"{out} holds a different calibration design ({_differences(old['identity'], ident)}); "
                                 f"rerun with its options or use another --out")
        if samples < int(old["samples"]):
            raise CalibrateError(f"{out} holds a design of {old['samples']} samples; --samples must be at least that (it extends "
                                 f"the design), got {samples}; use another --out for a smaller one")
    from cooplab.runstore import ensure_writable

    ensure_writable(out, CalibrateError)
    dims = space()
    u = unit_design(seed, samples, block, len(dims))
    if old is not None:  # the stored design must be what this SciPy regenerates (else the prefix would change)
        n_old = int(old["samples"])
        if not np.array_equal(np.asarray(old["unit"], dtype=float).reshape(n_old, len(dims)), u[:n_old]):
            raise CalibrateError(f"the design regenerated here differs from {path} (SciPy {versions()['scipy']} vs "
                                 f"{old.get('versions', {}).get('scipy')}); use another --out")
    from cooplab import runstore

    x = design_values(u, dims)
    record = {
        "design_id": design_id(ident), "identity": ident, "samples": samples, "block": block, "seed": seed, "replicates": replicates,
        "space": space_table(), "fixed": kept_fixed(), "base": base, "preset": preset,
        "names": [d.name for d in dims], "unit": u.tolist(), "values": x.tolist(),
        "created": old.get("created") if old else runstore.now(), "updated": runstore.now(),
        "versions": old.get("versions") if old else versions(), "versions_now": versions(),
    }
    runstore.write_json(path, record)
    return record


# --- samples on disk -------------------------------------------------------------------------
SAMPLES = "samples.jsonl"
EVENTS = "events.jsonl"
#: one line per invocation of the command (what it evaluated, how fast)
RUNS = "runs.jsonl"


@contextlib.contextmanager
def _locked(out: Path):
    """An exclusive lock on OUT (threads and processes alike: each call opens its own descriptor)."""
    import fcntl

    fd = os.open(Path(out) / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _repair(path: Path) -> None:
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
        try:
            row = json.loads(line)
        except ValueError:
            continue  # torn by a killed writer
        if not isinstance(row, dict) or not isinstance(row.get("sample"), int):
            continue
        if design is not None and row.get("design") != design:
            raise CalibrateError(f"{path} holds samples of another design ({row.get('design')}, not {design}); use another --out")
        rows.setdefault(row["sample"], row)
    return rows


def _append(path: Path, obj: dict[str, Any]) -> None:
    data = (json.dumps(obj, allow_nan=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _event(out: Path, event: str, sample: int) -> None:
    with _locked(out):
        _append(Path(out) / EVENTS, {"event": event, "sample": sample, "pid": os.getpid(), "host": socket.gethostname(),
                                     "time": time.time()})


def append_row(out: Path, row: dict[str, Any]) -> bool:
    """Append one finished sample (once: False when OUT already has it)."""
    out = Path(out)
    with _locked(out):
        if row["sample"] in read_rows(out):
            return False
        _repair(out / SAMPLES)
        _append(out / SAMPLES, row)
    return True


# --- one sample ------------------------------------------------------------------------------
def evaluate(overrides: dict[str, Any], replicates: int, seed: int) -> dict[str, Any]:
    """Run the §4.1 experiments and claims of ``cooplab figures cpr-abm`` with ``overrides``."""
    from cooplab.tasks.cpr import abm_figures as af

    t0 = time.perf_counter()
    exp = af.run_experiments(replicates, seed, overrides)
    claims = af.claims_of(exp)
    grid = exp["grid"]
    society_rounds = (int(exp["fig2"][2].survival_time.sum()) + int(round(float((grid.survival_mean * grid.n).sum())))
                      + int(exp["fig4"][1].survival_time.sum()))
    by = {c["id"]: c for c in claims}
    return {
        "holds": {k: bool(by[k]["holds"]) for k in CLAIMS},
        "effect": {k: float(by[k]["effect"]) for k in CLAIMS},
        "n_held": int(sum(by[k]["holds"] for k in CLAIMS)),
        "survival_mean": float(grid.survival_mean.mean()),
        "society_rounds": society_rounds,
        "evidence": {k: by[k]["evidence"] for k in CLAIMS},
        "eval_seconds": round(time.perf_counter() - t0, 4),
    }


def run_batch(j: dict[str, Any]) -> str:
    """A job of :mod:`cooplab.sweeps` (``fn``): evaluate the batch's samples that OUT does not have
    yet, appending each as soon as it is done. "skipped" when all were done, "resumed" when some."""
    from cooplab import runstore

    c = j["config"]
    out = Path(c["out"])
    # Welch's test on two nearly constant samples (e.g. every society reaching the round cap) warns; harmless here
    warnings.filterwarnings("ignore", message="Precision loss occurred", category=RuntimeWarning)
    have = read_rows(out)
    todo = [i for i in c["samples"] if i not in have]
    for i in todo:
        values = c["values"][str(i)]
        _event(out, "start", i)
        res = evaluate({**c["base"], **overrides_of(values)}, c["replicates"], c["seed"])
        row = {"sample": i, "design": c["design"], "params": values, "unit": c["unit"][str(i)], **res,
               "evaluated_at": runstore.now(), "pid": os.getpid(), "host": socket.gethostname()}
        append_row(out, row)
        _event(out, "done", i)
    if not todo:
        return "skipped"
    return "ran" if len(todo) == len(c["samples"]) else "resumed"


def jobs(out: Path, record: dict[str, Any], todo: list[int], batch: int) -> list[dict[str, Any]]:
    """The samples still to do, ``batch`` at a time, as jobs of :mod:`cooplab.sweeps`."""
    from cooplab.sweeps import job

    names = record["names"]
    out_jobs = []
    for k in range(0, len(todo), batch):
        ids = todo[k:k + batch]
        config = {"out": str(Path(out).absolute()), "design": record["design_id"], "samples": ids, "seed": record["seed"],
                  "replicates": record["replicates"], "base": record["base"],
                  "values": {str(i): dict(zip(names, record["values"][i])) for i in ids},
                  "unit": {str(i): record["unit"][i] for i in ids}}
        out_jobs.append(job(Path(out) / "batches" / f"samples-{ids[0]:06d}-{ids[-1]:06d}", "cpr", config,
                            fn="cooplab.tasks.cpr.calibrate:run_batch", labels={"first": ids[0], "last": ids[-1]}))
    return out_jobs


def table(rows: dict[int, dict[str, Any]], names: list[str], n: int) -> "Any":
    """The finished samples among the first ``n`` as one flat table (one row per sample)."""
    import pandas as pd

    flat = []
    for i in sorted(k for k in rows if k < n):
        r = rows[i]
        d: dict[str, Any] = {"sample": i}
        d.update({name: r["params"][name] for name in names})
        d.update({f"u_{name}": r["unit"][j] for j, name in enumerate(names)})
        d.update({f"holds_{c}": r["holds"][c] for c in CLAIMS})
        d.update({f"effect_{c}": r["effect"][c] for c in CLAIMS})
        d.update({k: r[k] for k in ("n_held", "survival_mean", "society_rounds", "eval_seconds", "evaluated_at", "pid", "host")})
        flat.append(d)
    cols = (["sample", *names, *(f"u_{x}" for x in names), *(f"holds_{c}" for c in CLAIMS), *(f"effect_{c}" for c in CLAIMS),
             "n_held", "survival_mean", "society_rounds", "eval_seconds", "evaluated_at", "pid", "host"])
    return pd.DataFrame(flat, columns=cols)


def _write_csv(df, path: Path) -> None:
    tmp = Path(str(path) + ".tmp")
    df.to_csv(tmp, index=False)
    tmp.replace(path)


# --- the whole calibration -------------------------------------------------------------------
def calibrate(out: Path, *, samples: int, seed: int = 0, replicates: int = 100, batch: int = 4, parallel: int = 1,
              executor: str = "local", address: str | None = None, base: dict[str, Any] | None = None, preset: str | None = None,
              log: Callable[[str], None] = lambda s: None, quiet: bool = True) -> dict[str, Any]:
    """Prepare OUT, evaluate every sample it does not have yet, then analyse the first ``samples``."""
    from cooplab.sweeps import run_jobs

    base = dict(base or {})
    out = Path(out)
    record = prepare(out, samples=samples, seed=seed, replicates=replicates, base=base, preset=preset)
    with _locked(out):
        _repair(out / SAMPLES)
    have = read_rows(out, record["design_id"])
    todo = [i for i in range(samples) if i not in have]
    log(f"calibrate cpr: {samples} samples x {len(record['names'])} parameters, {replicates} replicates per condition; "
        f"{samples - len(todo)} already done, {len(todo)} to run in {math.ceil(len(todo) / batch)} batches ({executor})")
    t0 = time.perf_counter()
    res = run_jobs(jobs(out, record, todo, batch), parallel=parallel, noun="batch", executor=executor, address=address, log=log,
                   quiet=quiet)
    wall = time.perf_counter() - t0
    rows = read_rows(out, record["design_id"])
    df = table(rows, record["names"], samples)
    _write_csv(df, out / "samples.csv")
    evaluated_now = [i for i in todo if i in rows]
    from cooplab.tasks.cpr.params import make_params

    T = int(make_params(**base).T)
    run = {"executor": res["executor"], "parallel": parallel, "batch": batch, "batches": len(res["ran"]) + len(res["resumed"]) + len(res["failed"]),
           "failed": res["failed"], "samples_evaluated": len(evaluated_now), "samples_skipped": samples - len(todo), "wall_seconds": round(wall, 3)}
    run["throughput"] = throughput(df[df["sample"].isin(evaluated_now)], replicates, T, wall)
    from cooplab import runstore

    run["finished_at"] = runstore.now()
    with _locked(out):
        _append(out / RUNS, run)
    runs = [json.loads(x) for x in (out / RUNS).read_text().splitlines() if x.strip().startswith("{") and x.strip().endswith("}")]
    return analyze(out, df, record, run, runs=runs, per_sample=throughput(df, replicates, T, None))


#: societies of one sample per replicate: Fig. 2 (2 beta x 2), Fig. 3 (11 beta x 10 r), Fig. 4 (2 envs x 3 populations)
def conditions_per_sample() -> int:
    from cooplab.tasks.cpr import abm_figures as af

    return 2 * len(af.FIG2_BETAS) + len(af.FIG3_BETAS) * len(af.FIG3_RS) + 2 * 3


def throughput(df, replicates: int, T: int, wall: float | None) -> dict[str, Any]:
    """samples x replicates x rounds per second (the round cap T, per condition replicate), and the
    society-rounds actually simulated per second (societies stop at collapse). ``wall``: the elapsed
    time of the run (sustained, with every overhead); None: the sum of the samples' own times."""
    n = int(len(df))
    seconds = float(wall) if wall is not None else float(df["eval_seconds"].sum()) if n else 0.0
    nominal = n * replicates * T
    simulated = int(df["society_rounds"].sum()) if n else 0
    return {"samples": n, "seconds": round(seconds, 3), "basis": "wall time of this run" if wall is not None else "sum of per-sample times",
            "samples_x_replicates_x_rounds": nominal,
            "samples_x_replicates_x_rounds_per_second": round(nominal / seconds, 1) if seconds > 0 and n else None,
            "societies_x_rounds_cap_per_second": round(nominal * conditions_per_sample() / seconds, 1) if seconds > 0 and n else None,
            "society_rounds_simulated_per_second": round(simulated / seconds, 1) if seconds > 0 and n else None,
            "seconds_per_sample": round(seconds / n, 3) if n else None}


# --- analysis ---------------------------------------------------------------------------------
def wilson(k: int, n: int) -> tuple[float | None, float | None]:
    from cooplab.tasks.science.bench import wilson as _w

    return _w(k, n)


def claims_map(df) -> list[dict[str, Any]]:
    """Share of the samples where each claim holds, all five jointly, and exactly k of five, with
    95% Wilson intervals."""
    from cooplab.tasks.cpr.abm_figures import EFFECTS

    n = int(len(df))
    rows = []

    def add(kind: str, name: str, what: str, k: int) -> None:
        lo, hi = wilson(k, n)
        rows.append({"kind": kind, "claim": name, "what": what, "n": n, "held": k, "share": k / n if n else None, "ci95_low": lo,
                     "ci95_high": hi})

    for c in CLAIMS:
        add("claim", c, f"claim ({c}) holds; effect = {EFFECTS[c]}", int(df[f"holds_{c}"].sum()) if n else 0)
    add("joint", "all", "all five claims hold", int((df["n_held"] == len(CLAIMS)).sum()) if n else 0)
    for k in range(len(CLAIMS) + 1):
        add("count", f"={k}", f"exactly {k} of the five claims hold", int((df["n_held"] == k).sum()) if n else 0)
    for k in range(1, len(CLAIMS) + 1):
        add("at_least", f">={k}", f"at least {k} of the five claims hold", int((df["n_held"] >= k).sum()) if n else 0)
    return rows


@contextlib.contextmanager
def _quiet_salib():
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
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def sensitivity(df, names: list[str], outputs: tuple[str, ...] = OUTPUTS, seed: int = 0) -> list[dict[str, Any]]:
    """First-order sensitivity of each output to each dimension, on the given sample (unit-cube
    coordinates ``u_NAME``: indices do not change under the monotone log scale): SALib RBD-FAST
    (S1 with a bootstrap confidence half-width) and, from :data:`DELTA_MIN_SAMPLES` samples on,
    Borgonovo's delta (moment-independent; with its confidence). Ranked by RBD-FAST S1 per output."""
    from cooplab.extras import require

    require("analysis", "the sensitivity analysis (cooplab calibrate cpr)", ("SALib",))
    from SALib.analyze import delta as sa_delta
    from SALib.analyze import rbd_fast

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
            with _quiet_salib():
                res_r = dict(rbd_fast.analyze(problem, X[ok], Y[ok], M=M, num_resamples=100, seed=seed))
                if ok.sum() >= DELTA_MIN_SAMPLES:
                    try:
                        res_d = dict(sa_delta.analyze(problem, X[ok], Y[ok], num_resamples=50, seed=seed + 1, method="delta"))
                    except Exception as exc:  # noqa: BLE001 - a failed delta leaves RBD-FAST's numbers standing
                        note = f"delta failed: {type(exc).__name__}"
        s1 = [float(v) for v in res_r.get("S1", [np.nan] * len(names))]
        order = sorted(range(len(names)), key=lambda j: -s1[j] if math.isfinite(s1[j]) else math.inf)
        rank = {j: r + 1 for r, j in enumerate(order)} if res_r else {}
        for j, name in enumerate(names):
            rows.append({
                "output": out_name, "parameter": name, "method": "rbd_fast" + ("+delta" if res_d else ""),
                "S1": s1[j], "S1_conf": float(res_r["S1_conf"][j]) if res_r else float("nan"),
                "delta": float(res_d["delta_raw"][j]) if res_d else float("nan"),
                "delta_conf": float(res_d["delta_raw_conf"][j]) if res_d else float("nan"),
                "rank": rank.get(j), "n": int(ok.sum()), "M": M if res_r else None, "note": note,
            })
    return rows


def top_parameters(sens: list[dict[str, Any]], output: str, k: int = 2) -> list[str]:
    ranked = sorted((r for r in sens if r["output"] == output and r["rank"] is not None), key=lambda r: r["rank"])
    return [r["parameter"] for r in ranked[:k]]


def best_region(df, names: list[str], limit: int = 20) -> dict[str, Any]:
    """The samples where the most claims hold jointly, with their parameter values, and the box they span."""
    if not len(df):
        return {"max_claims_held": None, "samples": [], "box": {}}
    top = int(df["n_held"].max())
    sub = df[df["n_held"] == top].copy()
    sub["effect_sum"] = sub[[f"effect_{c}" for c in CLAIMS]].sum(axis=1)
    sub = sub.sort_values(["effect_sum", "sample"], ascending=[False, True])
    samples = [{"sample": int(r["sample"]), "claims_held": [c for c in CLAIMS if bool(r[f"holds_{c}"])],
                "params": {x: float(r[x]) for x in names}, "effects": {c: float(r[f"effect_{c}"]) for c in CLAIMS},
                "survival_mean": float(r["survival_mean"])} for _, r in sub.head(limit).iterrows()]
    box = {x: [float(sub[x].min()), float(sub[x].max())] for x in names}
    return {"max_claims_held": top, "n_samples": int(len(sub)), "samples": samples, "box": box}


def analyze(out: Path, df, record: dict[str, Any], run: dict[str, Any] | None = None, *, runs: list[dict[str, Any]] | None = None,
            per_sample: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write OUT/claims_map.csv, sensitivity.csv, figures/, summary.json and report.md. ``run``: this
    invocation; ``runs``: every invocation on OUT (the throughput reported is that of the last one
    that evaluated samples); ``per_sample``: the throughput by the samples' own times."""
    import pandas as pd

    from cooplab import runstore
    from cooplab.evals.plots_cpr import claim_map_figure, sensitivity_figure
    from cooplab.tasks.cpr.abm_figures import EFFECTS

    out = Path(out)
    names = record["names"]
    dims = {d.name: d for d in space()}
    cmap = claims_map(df)
    sens = sensitivity(df, names, seed=int(record["seed"]))
    pd.DataFrame(cmap).to_csv(out / "claims_map.csv", index=False)
    pd.DataFrame(sens).to_csv(out / "sensitivity.csv", index=False)
    figdir = out / "figures"
    figdir.mkdir(exist_ok=True)
    figures = []
    if len(df):
        figures.append(str(sensitivity_figure(pd.DataFrame(sens), figdir / "sensitivity.png")))
        for c in CLAIMS:
            axes = top_parameters(sens, f"effect_{c}") or names[:2]
            if len(axes) < 2:
                axes = (axes + [x for x in names if x not in axes])[:2]
            figures.append(str(claim_map_figure(df, c, axes[0], axes[1], dims[axes[0]].log, dims[axes[1]].log,
                                                figdir / f"claim_{c}_map.png")))
    shares = {r["claim"]: {k: r[k] for k in ("held", "n", "share", "ci95_low", "ci95_high")} for r in cmap}
    summary = {
        "task": "cpr", "design_id": record["design_id"], "samples": record["samples"], "finished": int(len(df)),
        "complete": int(len(df)) == int(record["samples"]), "seed": record["seed"], "replicates": record["replicates"],
        "block": record["block"], "preset": record["preset"], "base": record["base"],
        "space": record["space"], "effects": EFFECTS,
        "claims": {c: shares[c] for c in CLAIMS}, "all_five": shares["all"],
        "claims_held_count": {k: shares[f"={k}"] for k in range(len(CLAIMS) + 1)},
        "survival_mean": {"mean": float(df["survival_mean"].mean()) if len(df) else None,
                          "min": float(df["survival_mean"].min()) if len(df) else None,
                          "max": float(df["survival_mean"].max()) if len(df) else None},
        "most_influential": {o: top_parameters(sens, o, 3) for o in OUTPUTS},
        "best_region": best_region(df, names),
        "run": run or {}, "runs": runs or ([run] if run else []),
        "throughput": next((r["throughput"] for r in reversed(runs or ([run] if run else [])) if r.get("samples_evaluated")), None),
        "throughput_per_sample_times": per_sample, "files": {"design": "design.json", "samples": "samples.csv", "checkpoint": SAMPLES,
                                    "claims_map": "claims_map.csv", "sensitivity": "sensitivity.csv", "report": "report.md",
                                    "figures": [str(Path(f).relative_to(out)) for f in figures]},
        "versions": versions(), "design_versions": record.get("versions"), "created": runstore.now(), "machine": runstore.machine(),
    }
    runstore.write_json(out / "summary.json", summary)
    (out / "report.md").write_text(report(summary, sens))
    return summary


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def report(s: dict[str, Any], sens: list[dict[str, Any]]) -> str:
    """report.md: the design, the claims map, the sensitivity ranking, the best region, throughput."""
    L = ["# Calibration of the CPR ABM: where the paper's §4.1 claims hold", "",
         f"{s['finished']} of {s['samples']} samples of a seeded Latin hypercube (seed {s['seed']}, LHS blocks of {s['block']}), "
         f"{s['replicates']} replicates per condition; every sample runs the experiments of `cooplab figures cpr-abm --seed {s['seed']}` "
         f"with its parameter values. Design {s['design_id']}." + (f" Preset {s['preset']}." if s.get("preset") else "")
         + (f" Fixed overrides: {s['base']}." if s.get("base") else ""), "",
         "## The space", "", "| parameter | low | high | scale | default | why |", "|---|---|---|---|---|---|"]
    for r in s["space"]:
        L.append(f"| `{r['name']}` | {r['low']:g} | {r['high']:g} | {r['scale']} | {r['default']} | {r['why']} |")
    L += ["", "## Where the claims hold (share of the samples, 95% Wilson interval)", "", "| claim | held | share | 95% CI | effect size |",
          "|---|---|---|---|---|"]

    def ci(d: dict[str, Any]) -> str:
        return "n/a" if d["ci95_low"] is None else f"[{_pct(d['ci95_low'])}, {_pct(d['ci95_high'])}]"

    for c in CLAIMS:
        d = s["claims"][c]
        L.append(f"| ({c}) | {d['held']}/{d['n']} | {_pct(d['share'])} | {ci(d)} | {s['effects'][c]} |")
    d = s["all_five"]
    L.append(f"| all five | {d['held']}/{d['n']} | {_pct(d['share'])} | {ci(d)} | |")
    L += ["", "Claims held per sample: " + ", ".join(f"{k}: {v['held']}" for k, v in s["claims_held_count"].items()), ""]
    L += ["## Sensitivity (first-order, RBD-FAST S1 ± confidence half-width; Borgonovo delta when N >= "
          f"{DELTA_MIN_SAMPLES})", ""]
    for o in OUTPUTS:
        rows = sorted((r for r in sens if r["output"] == o and r["rank"] is not None), key=lambda r: r["rank"])
        if not rows:
            note = next((r["note"] for r in sens if r["output"] == o), "")
            L.append(f"- `{o}`: not estimated ({note})")
            continue
        L.append(f"- `{o}`: " + ", ".join(f"{r['parameter']} {r['S1']:.2f}±{r['S1_conf']:.2f}"
                                          + (f" (delta {r['delta']:.2f})" if math.isfinite(r["delta"]) else "") for r in rows[:5]))
    confs = [r["S1_conf"] for r in sens if r["rank"] is not None and math.isfinite(r["S1_conf"])]
    if confs and float(np.median(confs)) > 0.3:
        L += ["", f"The confidence half-widths (median {float(np.median(confs)):.2f}) are as large as the indices: {s['finished']} "
                  "samples are too few to rank the parameters; read the ranking as a hint only (more samples narrow them)."]
    b = s["best_region"]
    L += ["", "## Best region", ""]
    if b["max_claims_held"] is None:
        L.append("No samples yet.")
    else:
        L.append(f"{b['n_samples']} samples hold {b['max_claims_held']} of the five claims jointly (the most); the first "
                 f"{len(b['samples'])} by summed effect size:")
        L += ["", "| sample | claims | " + " | ".join(b["box"]) + " |", "|---|---|" + "---|" * len(b["box"])]
        for smp in b["samples"]:
            L.append(f"| {smp['sample']} | {', '.join(smp['claims_held']) or '-'} | " + " | ".join(f"{v:.3g}" for v in smp["params"].values()) + " |")
    L += ["", "## Runs", "", "| finished | evaluated | already done | executor | parallel | wall (s) | samples x replicates x rounds / s "
          "| society-rounds simulated / s |", "|---|---|---|---|---|---|---|---|"]
    for r in s.get("runs") or []:
        tp = r.get("throughput") or {}
        L.append(f"| {r.get('finished_at')} | {r.get('samples_evaluated')} | {r.get('samples_skipped')} | {r.get('executor')} | "
                 f"{r.get('parallel')} | {r.get('wall_seconds')} | {tp.get('samples_x_replicates_x_rounds_per_second')} | "
                 f"{tp.get('society_rounds_simulated_per_second')} |")
    L += ["",
          "", "Files: samples.csv (one row per sample), samples.jsonl (the checkpoint, with each claim's evidence), design.json, "
          "claims_map.csv, sensitivity.csv, figures/, summary.json.", ""]
    return "\n".join(L)
