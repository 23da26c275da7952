"""``cooplab calibrate diners``: where in the space of our free choices the paper's six strategy
leaders (Figs. 9(a)-(c), 10(a)-(c)) hold (docs/diners.md, "Where the paper's leaders hold").

* **The space** (:data:`SPACE`): the choices the paper leaves open and the rule-based model needs
  numbers for: the menu (reparametrized so that every point is an n-player Diner's Dilemma for
  groups of 3 and 4), the p and k of the "unstated" setting, and how much of its past utility an
  agent's score pi keeps (our reading of "accumulated"). Everything the paper gives (the
  strategies, the two combinations, 3:1 and 6:1 with k = 1, beta = 1, 10 iterations, groups of
  four) is fixed, and so are the structural choices of docs/diners.md (:data:`FIXED`).
* **The design, checkpoint, execution and analysis** are :mod:`cooplab.evals.calibration`'s, shared
  with ``cooplab calibrate cpr`` (docs/calibrate.md).
* **A sample** runs :func:`cooplab.tasks.diners.figures.rule_experiment` and ``check_claims`` with
  its choices: exactly what ``cooplab figures diners --replicates R --seed S --set ...`` computes
  (the six conditions x R replicates in one graph invocation, seed S for every sample: common
  random numbers across samples). Per leader claim it records whether it holds and its effect:
  the mean final share of the paper's leader minus the largest other share. The other eight claims
  of ``check_claims`` (explicit punishment removes R1, larger p is faster, M or P dominate), which
  reproduce with our choices, are recorded too, so that the report can say whether a region where
  the leaders hold keeps them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from cooplab.evals import calibration as calib
from cooplab.evals.calibration import Dim
from cooplab.graphs.jobs import Jobs

#: the paper's six leader claims: id -> (combination, p:k); their label is the paper's figure panel
LEADERS = {
    "9a": (1, "unstated"),
    "9b": (1, "3:1"),
    "9c": (1, "6:1"),
    "10a": (2, "unstated"),
    "10b": (2, "3:1"),
    "10c": (2, "6:1"),
}
CLAIMS = tuple(LEADERS)
#: the other claims of figures.check_claims, recorded per sample (they reproduce with our choices)
OTHERS = (
    "c1-explicit-r1",
    "c1-larger-p",
    "c1-3:1-mp",
    "c1-6:1-mp",
    "c2-explicit-r1",
    "c2-larger-p",
    "c2-3:1-mp",
    "c2-6:1-mp",
)
#: their columns in samples.csv (whether each holds)
OTHER_COLUMNS = tuple(f"other_{k}" for k in OTHERS)
#: the paper's values, never sampled
ITERATIONS = 10
BETA = 1.0
#: design.json's layout; a different one on disk is refused
SCHEMA = 1
#: the level of the menu: only the premium's extra price and extra value matter (see FIXED)
C_B = 4.0
V_B = 6.0

# --- the space (ranges fixed before any search; docs/diners.md) ---------------------------------
SPACE: tuple[Dim, ...] = (
    Dim(
        "extra_price",
        2.0,
        32.0,
        "c_p - c_b, the premium meal's extra price, from a quarter to four times ours (8), log-uniform "
        "with ours at the geometric centre: a lone defector's private gain (value_ratio - 1/4) * extra_price then runs "
        "from "
        "0.2 (far below one punishment at k = 1) to 22 (far above the 6:1 fine p = 6)",
        log=True,
    ),
    Dim(
        "value_ratio",
        0.35,
        0.95,
        "(v_p - v_b) / (c_p - c_b), the share of its extra price that the premium meal returns to its "
        "eater; the dilemma for groups of n = 3 and 4 is exactly 1/3 < value_ratio < 1 (defecting pays: > 1/n; "
        "all-defect is "
        "worse than all-cooperate: < 1); the range is that interval with margins of 0.017 and 0.05 (ours: 0.5)",
    ),
    Dim(
        "unstated_k",
        0.25,
        4.0,
        "the cost k of punishing in the 'unstated' setting, from a quarter to four times the paper's "
        "stated k = 1 (ours: 1, the geometric centre)",
        log=True,
    ),
    Dim(
        "unstated_pk",
        1 / 6,
        6.0,
        "p / k in the 'unstated' setting, from the inverse of the paper's strongest stated ratio to that "
        "ratio (6:1); ours (1:1) at the geometric centre: the LLM decided, and nothing says it punished harder than "
        "the paper's "
        "explicit settings",
        log=True,
    ),
    Dim(
        "memory",
        0.0,
        1.0,
        "how much of its past score an agent keeps per iteration, pi <- memory * pi + u: 1 = the utility "
        "accumulated since iteration 1 (ours, choice 5), 0 = the last iteration's only; the paper says 'accumulated "
        "rewards and "
        "penalties' without saying over what",
    ),
)
#: the free choices of docs/diners.md that are not sampled, and why
FIXED: dict[str, str] = {
    "c_b, v_b": "the menu's level: with groups of equal size every agent's utility contains the same constant v_b - "
    "c_b, which "
    "cancels in every score difference of the Fermi rule, so only the extra price and value matter (c_b = 4, v_b = 6; "
    "tested)",
    "non-punisher, fails to punish non-punishers (choices 1, 2)": "definitions that follow the paper's wording and its "
    "own §4 "
    "example; not numbers",
    "one punishment per punisher, target and stage (choice 3)": "a rule, not a number; p and k scale what one "
    "punishment costs",
    "R1's switch (choice 4)": "'defects until punished' read literally: any punishment reforms it",
    "fixed groups, venue swap (choice 6)": "the paper's design; venues differ only in LLM prompts",
    "imitation after every iteration, synchronous (choice 7)": "the paper's process; 10 updates per run as in its "
    "figures",
}
#: the paper's values (never sampled)
PAPER = {
    "strategies": "P, R1, E, M (§3.1)",
    "combinations": "1: M,P,E,R1 | M,M,P,R1; 2: R1,R1,E,M | R1,P,P,M (§4)",
    "stated p:k": "3:1 and 6:1 with k = 1 (§3.2, §4)",
    "beta": "1 (§3.2)",
    "iterations": "10 (§4)",
    "group size": "4 (§4)",
}


def space() -> list[Dim]:
    return list(SPACE)


def choices_of(values: dict[str, float]) -> dict[str, float]:
    """A sample's values (by dimension name) -> the free choices of figures.rule_experiment (model.CHOICES)."""
    dp = float(values["extra_price"])
    k = float(values["unstated_k"])
    return {
        "c_b": C_B,
        "v_b": V_B,
        "c_p": C_B + dp,
        "v_p": V_B + float(values["value_ratio"]) * dp,
        "unstated_p": float(values["unstated_pk"]) * k,
        "unstated_k": k,
        "memory": float(values["memory"]),
    }


def defaults() -> dict[str, float]:
    """Our choices (model.CHOICES) in the space's coordinates."""
    from cooplab.tasks.diners import model as dm

    ch = dm.CHOICES
    dp = ch["c_p"] - ch["c_b"]
    return {
        "extra_price": dp,
        "value_ratio": (ch["v_p"] - ch["v_b"]) / dp,
        "unstated_k": ch["unstated_k"],
        "unstated_pk": ch["unstated_p"] / ch["unstated_k"],
        "memory": float(ch["memory"]),
    }


def space_table() -> list[dict[str, Any]]:
    """The space as rows (docs, design.json, report.md)."""
    d = defaults()
    return [
        {
            "name": x.name,
            "field": x.target,
            "low": x.low,
            "high": x.high,
            "scale": "log" if x.log else "linear",
            "default": d[x.name],
            "why": x.why,
        }
        for x in space()
    ]


def identity(*, seed: int, replicates: int, block: int) -> dict[str, Any]:
    """What makes two designs the same design: everything but the number of samples."""
    from cooplab.tasks.diners import model as dm

    ident = {
        "schema": SCHEMA,
        "task": "diners",
        "seed": int(seed),
        "replicates": int(replicates),
        "block": int(block),
        "space": [{k: r[k] for k in ("name", "field", "low", "high", "scale")} for r in space_table()],
        "experiment": {
            "combinations": {str(c): [list(g) for g in gs] for c, gs in dm.COMBINATIONS.items()},
            "pk": {k: list(v) for k, v in dm.PK_SETTINGS.items() if k != "unstated"},
            "beta": BETA,
            "iterations": ITERATIONS,
            "c_b": C_B,
            "v_b": V_B,
            "seeds": "seed for every sample",
        },
    }
    return json.loads(json.dumps(ident))


def prepare(out: Path, *, samples: int, seed: int, replicates: int) -> dict[str, Any]:
    """Create OUT and its design.json, or check that OUT holds the same design
    (:func:`cooplab.evals.calibration.prepare`)."""
    return calib.prepare(
        out,
        samples=samples,
        seed=seed,
        dims=space(),
        identity=lambda block: identity(seed=seed, replicates=replicates, block=block),
        fields={"replicates": replicates, "space": space_table(), "fixed": FIXED, "paper": PAPER},
    )


# --- one sample ------------------------------------------------------------------------------
def evaluate(choices: dict[str, float], replicates: int, seed: int) -> dict[str, Any]:
    """The six conditions and the claims of ``cooplab figures diners`` with ``choices``."""
    from cooplab.tasks.diners import figures

    t0 = time.perf_counter()
    counts = figures.rule_experiment(replicates, seed, ITERATIONS, BETA, choices)
    by = {c["id"]: c for c in figures.check_claims(counts)}
    lead = {k: by[f"c{comb}-{pk}-leader"] for k, (comb, pk) in LEADERS.items()}
    others = {k: bool(by[k]["holds"]) for k in OTHERS}
    return {
        "choices": choices,
        "holds": {k: bool(c["holds"]) for k, c in lead.items()},
        "effect": {k: float(c["effect"]) for k, c in lead.items()},
        "n_held": int(sum(c["holds"] for c in lead.values())),
        "others": others,
        "others_held": int(sum(others.values())),
        **{f"other_{k}": v for k, v in others.items()},
        "evidence": {k: c["evidence"] for k, c in lead.items()},
        "others_evidence": {k: by[k]["evidence"] for k in OTHERS},
        "eval_seconds": round(time.perf_counter() - t0, 4),
    }


def run_batch(j: dict[str, Any]) -> str:
    """A function job of the executor (``fn``): evaluate the batch's samples that OUT does not have yet."""
    return calib.run_batch(j, lambda values, c: evaluate(choices_of(values), c["replicates"], c["seed"]))


def jobs(out: Path, record: dict[str, Any], todo: list[int], batch: int, *, jobs_on: Jobs) -> list[dict[str, Any]]:
    return calib.jobs(out, record, todo, batch, spec(), job=jobs_on.job)


# --- the whole calibration -------------------------------------------------------------------
def spec(replicates: int | None = None) -> calib.Spec:
    from cooplab.tasks.diners.figures import EFFECTS, PAPER_LEADERS

    labels = {k: PAPER_LEADERS[v][0] for k, v in LEADERS.items()}
    effects = {k: f"{EFFECTS['leader']} ({PAPER_LEADERS[v][1]})" for k, v in LEADERS.items()}
    return calib.Spec(
        task="diners",
        title="Calibration of the Diner's Dilemma (rule-based): where the paper's six strategy leaders hold",
        command="cooplab figures diners",
        claims=CLAIMS,
        effects=effects,
        labels=labels,
        fn="cooplab.tasks.diners.calibrate:run_batch",
        recorded=("others_held", *OTHER_COLUMNS),
        joint_key="all_six",
        effect_unit="share of agents",
        throughput=(lambda df, wall: throughput(df, replicates, wall)) if replicates is not None else None,
        summary_extra=summary_extra,
        report_extra=report_extra,
    )


def calibrate(
    out: Path,
    *,
    jobs_on: Jobs,
    samples: int,
    seed: int = 0,
    replicates: int = 200,
    batch: int = 4,
    parallel: int = 1,
    executor: str = "local",
    address: str | None = None,
    log: Callable[[str], None] = lambda s: None,
    quiet: bool = True,
) -> dict[str, Any]:
    """Prepare OUT, evaluate every sample it does not have yet on ``jobs_on`` (the job executor:
    :data:`cooplab.runs.engine.ENGINE`), then analyse the first ``samples``."""
    record = prepare(Path(out), samples=samples, seed=seed, replicates=replicates)
    return calib.calibrate(
        Path(out),
        record,
        spec(replicates),
        jobs_on=jobs_on,
        samples=samples,
        batch=batch,
        parallel=parallel,
        executor=executor,
        address=address,
        extra=None,
        log=log,
        quiet=quiet,
    )


def throughput(df, replicates: int, wall: float | None) -> dict[str, Any]:
    """samples x replicates x iterations per second; every sample simulates 6 conditions x replicates
    societies for all 10 iterations (a Diner's Dilemma society never stops early)."""
    n = int(len(df))
    seconds = float(wall) if wall is not None else float(df["eval_seconds"].sum()) if n else 0.0
    nominal = n * replicates * ITERATIONS
    return {
        "samples": n,
        "seconds": round(seconds, 3),
        "basis": "wall time of this run" if wall is not None else "sum of per-sample times",
        "samples_x_replicates_x_rounds": nominal,
        "samples_x_replicates_x_rounds_per_second": round(nominal / seconds, 1) if seconds > 0 and n else None,
        "society_rounds_simulated_per_second": round(6 * nominal / seconds, 1) if seconds > 0 and n else None,
        "seconds_per_sample": round(seconds / n, 3) if n else None,
    }


def summary_extra(df) -> dict[str, Any]:
    """The other eight claims: how often all hold, and jointly with the six leaders."""
    n = int(len(df))
    K = len(OTHERS)
    return {
        "others": {
            "claims": list(OTHERS),
            "each": {k: calib.share(int(df[f"other_{k}"].sum()) if n else 0, n) for k in OTHERS},
            "all_hold": calib.share(int((df["others_held"] == K).sum()) if n else 0, n),
            "all_fourteen": calib.share(
                int(((df["others_held"] == K) & (df["n_held"] == len(CLAIMS))).sum()) if n else 0, n
            ),
        }
    }


def report_extra(s: dict[str, Any]) -> list[str]:
    o = s["others"]
    a, b = o["all_hold"], o["all_fourteen"]
    return [
        "## The other claims",
        "",
        f"The eight other claims of `cooplab figures diners` ({', '.join(o['claims'])}) all hold in "
        f"{a['held']}/{a['n']} samples "
        f"({calib.pct(a['share'])}, 95% CI {calib.ci_text(a)}); all fourteen claims jointly in {b['held']}/{b['n']} "
        f"({calib.pct(b['share'])}, {calib.ci_text(b)}).",
        "",
        "| claim | held | share | 95% CI |",
        "|---|---|---|---|",
    ] + [f"| {k} | {d['held']}/{d['n']} | {calib.pct(d['share'])} | {calib.ci_text(d)} |" for k, d in o["each"].items()]
