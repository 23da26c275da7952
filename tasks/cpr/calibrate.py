"""``cooplab calibrate cpr``: where in the space of our free ("chosen") parameters the paper's five
ABM claims hold (docs/calibrate.md).

* **The space** (:data:`SPACE`): every CPRParams field whose source is "chosen" either has a range
  ``[low, high]`` with a one-line justification, or is kept fixed with a reason (:data:`FIXED`). The
  paper's values (N, T, the r and beta of the experiments, punishment off at t = 15) are never
  sampled. ``il_rate`` (individual learning) is one of the dimensions.
* **The design**: seeded Latin hypercube blocks (``scipy.stats.qmc.LatinHypercube``). Block k is an
  LHS of ``block`` points drawn from ``default_rng([seed, k])``; ``block`` is the sample count of the
  run that created OUT, so a fresh ``--samples N`` is one LHS of N points and ``--samples 2N`` on
  the same OUT appends a second LHS of N points (the first N samples are a prefix of the design).
* **A sample** runs :func:`cooplab.tasks.cpr.validation.run_experiments` and ``check_claims``
  (exactly what ``cooplab figures cpr-abm --seed SEED --set ...`` runs) with its parameter values:
  one graph invocation per experiment, seeds SEED, SEED + 1, SEED + 2 for every sample (common
  random numbers across samples).
* **Execution**: the samples still to do are cut into batches; a batch is a function job of
  the executor passed in (``jobs_on``: the engine's :data:`cooplab.runs.engine.ENGINE`), so it runs in a thread
  (``local``) or as a Ray task.
  Every finished sample is appended at once to OUT/samples.jsonl (one locked write, fsync), so a
  rerun of the same command skips it; a worker killed at any moment loses at most the samples it
  was computing.
* **Analysis** (:func:`analyze`): shares of the space where each claim holds, alone and jointly,
  with 95% Wilson intervals; first-order sensitivity indices (SALib RBD-FAST on the given sample,
  and the moment-independent delta when there are enough samples); a claim-holds map over the two
  most influential parameters of each claim, a sensitivity bar chart, the best region.

The design, checkpoint, execution and analysis are :mod:`cooplab.evals.calibration`'s (shared with
``cooplab calibrate diners``); this module holds what is CPR's: the space, the identity of a
design, what one sample computes, the throughput, and the names the tests and the CLI use.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from cooplab.evals import calibration as calib
from cooplab.evals.calibration import (  # noqa: F401 - the API
    EVENTS,
    RBD_MAX_M,
    RUNS,
    SAMPLES,
    CalibrateError,
    Dim,
    append_row,
    design_id,
    design_values,
    read_rows,
    top_parameters,
    unit_design,
    versions,
    wilson,
)
from cooplab.evals.calibration import best_region as _best_region
from cooplab.graphs.jobs import Jobs
from cooplab.tasks.cpr.params import CPRParams, params_table

CLAIMS = ("a", "b", "c1", "c2", "c3")
#: the outputs whose sensitivity is analysed: mean survival over the Fig. 3 grid and each claim's effect
OUTPUTS = ("survival_mean", *(f"effect_{c}" for c in CLAIMS))
#: design.json's layout; a different one on disk is refused
SCHEMA = 1
#: the delta index (SALib.analyze.delta) needs classes of at least 10 samples: only from this many samples on
DELTA_MIN_SAMPLES = 50


# --- the space (ranges fixed before any search; docs/calibrate.md) ------------------------------
SPACE: tuple[Dim, ...] = (
    Dim(
        "alpha",
        0.05,
        0.2,
        "a full-effort fleet of 10 takes N*alpha = 50% to 200% of the stock per round: overfishing stays "
        "possible in both lakes (10*alpha > r/(1+r)) up to an empty lake in half a round; v1's 0.1 at the geometric "
        "centre",
        log=True,
    ),
    Dim(
        "c",
        2.0,
        8.0,
        "40% to 160% of the harsh lake's per-capita MSY rK/4N = 5 (13% to 53% of the rich lake's 15): from easy "
        "subsistence to a harsh lake that cannot feed everyone, while the rich lake always can",
    ),
    Dim(
        "P0",
        5.0,
        60.0,
        "from half of one beta = 10 fine (a first punishment starves) to six fines or 15 rounds of v1's consumption",
    ),
    Dim(
        "R_min",
        20.0,
        100.0,
        "collapse threshold from 2% of K (near extinction) to 10% of K (the low end of fisheries' 'overfished' "
        "reference points)",
    ),
    Dim(
        "gamma",
        0.0,
        10.0,
        "punisher's cost from free to the fine itself at beta = 10: fee:fine 0 to 1:1, around lab experiments' "
        "1:1 to 1:4 (commonly 1:3)",
    ),
    Dim(
        "delta",
        0.02,
        2.0,
        "a 5-fish payoff gap is copied with probability 0.52 (near-neutral drift) to 0.99995 (deterministic "
        "imitation); v1's 0.2 at the geometric centre",
        log=True,
    ),
    Dim("sigma", 0.0, 0.2, "mutation from none to a fifth of a trait's initial range per copy (the paper: 'small')"),
    Dim(
        "learn_prob",
        0.05,
        1.0,
        "strategy revision from once in 20 rounds to every round: the paper's 'occasionally' is the low "
        "end; imitation is one of the two channels through which a fine changes behaviour (docs/cpr.md)",
    ),
    Dim("ema", 0.1, 1.0, "payoff memory from about 10 rounds (1/lambda) to the last round only"),
    Dim(
        "e_min",
        0.0,
        0.1,
        "lowest initial effort from zero to 2.5 times subsistence at full stock with v1's alpha "
        "(alpha*e*K = c at 0.04)",
    ),
    Dim(
        "e_max",
        0.3,
        1.0,
        "highest initial effort from 0.3 (our first version, where the rich lake could not be overfished) to "
        "the physical maximum",
    ),
    Dim("g_min", 0.0, 8.0, "lowest initial cap from none (our first version) to twice v1's consumption"),
    Dim("g_max", 15.0, 45.0, "highest initial cap from the rich lake's per-capita MSY (15) to three times it"),
    Dim(
        "m_max",
        0.2,
        1.0,
        "initial monitoring propensities uniform on [0, m_max]: from a population that rarely inspects "
        "(mean 0.1) to the full unit interval (v1)",
        field="m_range",
    ),
    Dim(
        "p_max",
        0.2,
        1.0,
        "initial punishment propensities uniform on [0, p_max]; p is never copied, so this sets how much a "
        "population punishes for life",
        field="p_range",
    ),
)
#: dimensions that join the space as soon as CPRParams has their field
OPTIONAL: tuple[Dim, ...] = (
    Dim(
        "il_rate",
        0.0,
        0.5,
        "individual learning from none (the v1 model) to closing half the gap to a violated norm per fine",
    ),
)
#: "chosen" parameters deliberately not sampled, and why
FIXED: dict[str, str] = {
    "K": "the unit of fish: every amount (c, P0, R_min, gamma, caps) is sampled relative to K = 1000; what K does "
    "beyond the unit "
    "(the paper's absolute beta = 10, 14 against the catch) is covered by sampling c, P0, gamma and the caps against "
    "fixed beta, "
    "and alpha*K (a full-effort catch of 50-200 fish) by sampling alpha",
    "R0": "R0 = K: the lake starts unexploited, as in the paper's figures (a lower start only removes the first rounds "
    "of decline)",
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
        rows.append(
            {
                "name": d.name,
                "field": d.target,
                "low": d.low,
                "high": d.high,
                "scale": "log" if d.log else "linear",
                "default": default,
                "why": d.why,
            }
        )
    return rows


def overrides_of(values: dict[str, float]) -> dict[str, Any]:
    """A sample's values (by dimension name) -> CPRParams overrides."""
    out: dict[str, Any] = {}
    for d in space():
        v = float(values[d.name])
        out[d.target] = [0.0, v] if d.target in ("m_range", "p_range") else v
    return out


# --- the design (evals/calibration.py; here what makes a CPR design) ---------------------------
def identity(*, seed: int, replicates: int, block: int, base: dict[str, Any], preset: str | None) -> dict[str, Any]:
    """What makes two designs the same design: everything but the number of samples."""
    from cooplab.tasks.cpr import validation as af

    ident = {
        "schema": SCHEMA,
        "task": "cpr",
        "seed": int(seed),
        "replicates": int(replicates),
        "block": int(block),
        "space": [{k: r[k] for k in ("name", "field", "low", "high", "scale")} for r in space_table()],
        "base": base,
        "preset": preset,
        "experiments": {
            "fig2": {"betas": list(af.FIG2_BETAS), "off": af.FIG2_OFF, "r": af.FIG2_R, "population": af.FIG2_POP},
            "fig3": {"betas": list(af.FIG3_BETAS), "rs": list(af.FIG3_RS), "population": af.FIG3_POP},
            "fig4": {"envs": dict(_envs())},
            "seeds": "seed, seed + 1, seed + 2 for every sample",
        },
    }
    return json.loads(json.dumps(ident))  # as design.json holds it (tuples -> lists), so that the two compare equal


def _envs() -> dict[str, float]:
    from cooplab.tasks.cpr.params import ENVIRONMENTS

    return dict(ENVIRONMENTS)


def prepare(
    out: Path, *, samples: int, seed: int, replicates: int, base: dict[str, Any], preset: str | None
) -> dict[str, Any]:
    """Create OUT and its design.json, or check that OUT holds the same design
    (:func:`cooplab.evals.calibration.prepare`)."""
    return calib.prepare(
        out,
        samples=samples,
        seed=seed,
        dims=space(),
        identity=lambda block: identity(seed=seed, replicates=replicates, block=block, base=base, preset=preset),
        fields={
            "replicates": replicates,
            "space": space_table(),
            "fixed": kept_fixed(),
            "base": base,
            "preset": preset,
        },
    )


# --- one sample ------------------------------------------------------------------------------
def evaluate(overrides: dict[str, Any], replicates: int, seed: int) -> dict[str, Any]:
    """Run the §4.1 experiments and claims of ``cooplab figures cpr-abm`` with ``overrides``."""
    from cooplab.tasks.cpr import validation as af

    t0 = time.perf_counter()
    exp = af.run_experiments(replicates, seed, overrides)
    claims = af.claims_of(exp)
    grid = exp["grid"]
    society_rounds = (
        int(exp["fig2"][2].survival_time.sum())
        + int(round(float((grid.survival_mean * grid.n).sum())))
        + int(exp["fig4"][1].survival_time.sum())
    )
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
    """A function job of the executor (``fn``): evaluate the batch's samples that OUT does not have
    yet, appending each as soon as it is done. "skipped" when all were done, "resumed" when some."""
    # Welch's test on two nearly constant samples (e.g. every society reaching the round cap) warns; harmless
    # here. Silenced for this call only: the caller's warning filters are its own
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Precision loss occurred", category=RuntimeWarning)
        return calib.run_batch(
            j, lambda values, c: evaluate({**c["base"], **overrides_of(values)}, c["replicates"], c["seed"])
        )


def jobs(out: Path, record: dict[str, Any], todo: list[int], batch: int, *, jobs_on: Jobs) -> list[dict[str, Any]]:
    """The samples still to do, ``batch`` at a time, as jobs of the executor."""
    return calib.jobs(out, record, todo, batch, spec(), {"base": record["base"]}, job=jobs_on.job)


def table(rows: dict[int, dict[str, Any]], names: list[str], n: int) -> "Any":
    """The finished samples among the first ``n`` as one flat table (one row per sample)."""
    return calib.table(rows, names, n, spec())


# --- the whole calibration -------------------------------------------------------------------
def spec(T: int | None = None, replicates: int | None = None) -> calib.Spec:
    """The CPR calibration for the shared code; ``T``, ``replicates``: for the throughput."""
    from cooplab.tasks.cpr.validation import EFFECTS

    return calib.Spec(
        task="cpr",
        title="Calibration of the CPR ABM: where the paper's §4.1 claims hold",
        command="cooplab figures cpr-abm",
        claims=CLAIMS,
        effects=EFFECTS,
        fn="cooplab.tasks.cpr.calibrate:run_batch",
        scalars=("survival_mean",),
        recorded=("society_rounds",),
        joint_key="all_five",
        effect_unit="rounds of T_s",
        throughput=(lambda df, wall: throughput(df, replicates, T, wall))
        if T is not None and replicates is not None
        else None,
    )


def calibrate(
    out: Path,
    *,
    jobs_on: Jobs,
    samples: int,
    seed: int = 0,
    replicates: int = 100,
    batch: int = 4,
    parallel: int = 1,
    executor: str = "local",
    address: str | None = None,
    base: dict[str, Any] | None = None,
    preset: str | None = None,
    log: Callable[[str], None] = lambda s: None,
    quiet: bool = True,
) -> dict[str, Any]:
    """Prepare OUT, evaluate every sample it does not have yet on ``jobs_on`` (the job executor:
    :data:`cooplab.runs.engine.ENGINE`), then analyse the first ``samples``."""
    from cooplab.tasks.cpr.params import make_params

    base = dict(base or {})
    record = prepare(Path(out), samples=samples, seed=seed, replicates=replicates, base=base, preset=preset)
    T = int(make_params(**base).T)
    return calib.calibrate(
        Path(out),
        record,
        spec(T, replicates),
        jobs_on=jobs_on,
        samples=samples,
        batch=batch,
        parallel=parallel,
        executor=executor,
        address=address,
        extra={"base": record["base"]},
        log=log,
        quiet=quiet,
        analyze_fn=analyze,
    )


#: societies of one sample per replicate: Fig. 2 (2 beta x 2), Fig. 3 (11 beta x 10 r), Fig. 4 (2 envs x 3 populations)
def conditions_per_sample() -> int:
    from cooplab.tasks.cpr import validation as af

    return 2 * len(af.FIG2_BETAS) + len(af.FIG3_BETAS) * len(af.FIG3_RS) + 2 * 3


def throughput(df, replicates: int, T: int, wall: float | None) -> dict[str, Any]:
    """samples x replicates x rounds per second (the round cap T, per condition replicate), and the
    society-rounds actually simulated per second (societies stop at collapse). ``wall``: the elapsed
    time of the run (sustained, with every overhead); None: the sum of the samples' own times."""
    n = int(len(df))
    seconds = float(wall) if wall is not None else float(df["eval_seconds"].sum()) if n else 0.0
    nominal = n * replicates * T
    simulated = int(df["society_rounds"].sum()) if n else 0
    return {
        "samples": n,
        "seconds": round(seconds, 3),
        "basis": "wall time of this run" if wall is not None else "sum of per-sample times",
        "samples_x_replicates_x_rounds": nominal,
        "samples_x_replicates_x_rounds_per_second": round(nominal / seconds, 1) if seconds > 0 and n else None,
        "societies_x_rounds_cap_per_second": round(nominal * conditions_per_sample() / seconds, 1)
        if seconds > 0 and n
        else None,
        "society_rounds_simulated_per_second": round(simulated / seconds, 1) if seconds > 0 and n else None,
        "seconds_per_sample": round(seconds / n, 3) if n else None,
    }


# --- analysis (evals/calibration.py) --------------------------------------------------------
def claims_map(df) -> list[dict[str, Any]]:
    """Share of the samples where each claim holds, all five jointly, and exactly k of five, with
    95% Wilson intervals."""
    return calib.claims_map(df, spec())


def sensitivity(df, names: list[str], outputs: tuple[str, ...] = OUTPUTS, seed: int = 0) -> list[dict[str, Any]]:
    """First-order sensitivity of each output to each dimension (:func:`cooplab.evals.calibration.sensitivity`;
    Borgonovo's delta from :data:`DELTA_MIN_SAMPLES` samples on)."""
    return calib.sensitivity(df, names, outputs, seed, delta_min=DELTA_MIN_SAMPLES, command="cooplab calibrate cpr")


def best_region(df, names: list[str], limit: int = 20) -> dict[str, Any]:
    """The samples where the most claims hold jointly, with their parameter values, and the box they span."""
    return _best_region(df, names, spec(), limit)


def analyze(
    out: Path,
    df,
    record: dict[str, Any],
    run: dict[str, Any] | None = None,
    *,
    runs: list[dict[str, Any]] | None = None,
    per_sample: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write OUT/claims_map.csv, sensitivity.csv, figures/, summary.json and report.md
    (:func:`cooplab.evals.calibration.analyze`)."""
    sens = sensitivity(df, record["names"], seed=int(record["seed"]))
    return calib.analyze(out, df, record, spec(), run, runs=runs, per_sample=per_sample, sens=sens)


def report(s: dict[str, Any], sens: list[dict[str, Any]]) -> str:
    """report.md: the design, the claims map, the sensitivity ranking, the best region, throughput."""
    return calib.report(s, sens, spec())
