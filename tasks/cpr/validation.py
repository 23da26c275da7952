"""The paper's ABM validation (§4.1, Figs. 2-4): run, tabulate, plot and check the claims.

Each experiment is one graph invocation over all its conditions x replicates.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, cast

import numpy as np
import pandas as pd
from langgraph.checkpoint.memory import InMemorySaver

from cooplab.extras import require

require("analysis", "the ABM figures (cooplab figures cpr-abm)", ("scipy",))

from scipy import stats  # noqa: E402

from cooplab.graphs import rundir
from cooplab.graphs.checkpoint_serde import CheckpointSerializer
from cooplab.tasks.cpr import metrics as cpr_metrics
from cooplab.tasks.cpr.figures import fig2, fig3, fig4, survival_curve, timeseries_stats
from cooplab.tasks.cpr.outcomes import efficiency, survival_time
from cooplab.tasks.cpr.params import ENVIRONMENTS, make_params
from cooplab.tasks.cpr.society import Condition, run_cpr

FIG2_BETAS = (10.0, 14.0)
FIG2_OFF = 15
FIG2_R = 0.6  # rich: the cell where most societies still run at t = 15 (see docs/cpr.md)
FIG2_POP = "altruistic"
FIG3_BETAS = tuple(float(b) for b in np.arange(0, 21, 2))  # 11 values, 0..20
FIG3_RS = tuple(round(float(r), 2) for r in np.arange(0.1, 1.01, 0.1))  # 10 values, 0.1..1.0
FIG3_POP = "mixed"
#: the effect size of each claim (``check_claims``'s ``effect``), in rounds of survival time T_s,
#: positive in the direction the paper claims
EFFECTS = {
    "a": "mean over beta in {10, 14} of T_s(punishment kept) - T_s(punishment off at t = 15) (Fig. 2)",
    "b": "mean over the moderate r in [0.25, 0.75] of T_s(beta = 20) - T_s(beta = 0) (Fig. 3)",
    "c1": "harsh lake: T_s(altruistic) - max(T_s(mixed), T_s(selfish)) (Fig. 4)",
    "c2": "rich lake: T_s(selfish) - T_s(altruistic) (Fig. 4)",
    "c3": "rich lake: T_s(mixed) - max(T_s(altruistic), T_s(selfish)) (Fig. 4)",
}


def _run(conds: list[Condition], replicates: int, seed: int) -> dict[str, Any]:
    final = run_cpr(
        conds, replicates, seed, checkpointer=InMemorySaver(serde=CheckpointSerializer()), durability="exit"
    )
    return cast(dict[str, Any], final)  # the final state, read here by key as a plain dict


def experiment_fig2(
    replicates: int, seed: int, overrides: dict[str, Any]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    conds, meta = [], []
    for beta in FIG2_BETAS:
        for off in (False, True):
            p = make_params(**{"r": FIG2_R, "beta": beta, "punish_off_round": FIG2_OFF if off else None, **overrides})
            conds.append(Condition(p, FIG2_POP))
            meta.append({"beta": beta, "punishment_off": off})
    final = _run(conds, replicates, seed)
    rounds = cpr_metrics.history_frame(final)
    mdf = pd.DataFrame(meta)
    rounds = rounds.join(mdf, on="condition")
    ts = pd.concat(
        [
            timeseries_stats(rounds, m, ["beta", "punishment_off"]).assign(metric=m)
            for m in ("R", "compliance", "mean_effort")
        ]
    )
    Ts = survival_time(final)
    T = int(max(c.params.T for c in conds))
    surv_rows, per_rep = [], []
    for ci, mrow in enumerate(meta):
        idx = np.asarray(final["condition"]) == ci
        t, s, h = survival_curve(Ts[idx], T)
        surv_rows.append(pd.DataFrame({"round": t, "share": s, "ci95": h, **mrow}))
        per_rep.append(pd.DataFrame({"survival_time": Ts[idx], "efficiency": efficiency(final)[idx], **mrow}))
    return ts, pd.concat(surv_rows), pd.concat(per_rep)


def experiment_fig3(replicates: int, seed: int, overrides: dict[str, Any]) -> pd.DataFrame:
    conds, meta = [], []
    for r in FIG3_RS:
        for beta in FIG3_BETAS:
            conds.append(Condition(make_params(**{"r": r, "beta": beta, **overrides}), FIG3_POP))
            meta.append({"r": r, "beta": beta})
    final = _run(conds, replicates, seed)
    Ts, eta = survival_time(final), efficiency(final)
    rows = []
    for ci, mrow in enumerate(meta):
        idx = np.asarray(final["condition"]) == ci
        rows.append(
            {
                **mrow,
                "survival_mean": Ts[idx].mean(),
                "survival_sem": Ts[idx].std(ddof=1) / np.sqrt(idx.sum()),
                "efficiency_mean": eta[idx].mean(),
                "n": int(idx.sum()),
                "rounds": conds[ci].params.T,
            }
        )
    return pd.DataFrame(rows)


def experiment_fig4(replicates: int, seed: int, overrides: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    conds, meta = [], []
    for env, r in ENVIRONMENTS.items():
        for pop in ("altruistic", "mixed", "selfish"):
            conds.append(Condition(make_params(**{"r": r, **overrides}), pop))
            meta.append({"env": env, "r": r, "population": pop})
    final = _run(conds, replicates, seed)
    Ts, eta = survival_time(final), efficiency(final)
    rows, reps = [], []
    for ci, mrow in enumerate(meta):
        idx = np.asarray(final["condition"]) == ci
        kinds = np.asarray(final["collapse"])[idx]
        rows.append(
            {
                **mrow,
                "survival_mean": Ts[idx].mean(),
                "survival_sem": Ts[idx].std(ddof=1) / np.sqrt(idx.sum()),
                "efficiency_mean": eta[idx].mean(),
                "efficiency_sem": eta[idx].std(ddof=1) / np.sqrt(idx.sum()),
                "share_depleted": (kinds == 1).mean(),
                "share_starved": (kinds == 2).mean(),
                "share_reached_cap": (kinds == 0).mean(),
                "n": int(idx.sum()),
            }
        )
        reps.append(pd.DataFrame({"survival_time": Ts[idx], "efficiency": eta[idx], **mrow}))
    return pd.DataFrame(rows), pd.concat(reps)


def _welch(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    if np.std(a) == 0 and np.std(b) == 0:
        return {"t": float("nan"), "p": 1.0 if a.mean() == b.mean() else 0.0}
    t, p = cast(tuple[float, float], stats.ttest_ind(a, b, equal_var=False))  # scipy's result unpacks to (t, p)
    return {"t": float(t), "p": float(p)}


def check_claims(
    fig2_reps: pd.DataFrame, grid: pd.DataFrame, bars: pd.DataFrame, fig4_reps: pd.DataFrame
) -> list[dict[str, Any]]:
    """Evaluate each §4.1 claim on the measured numbers (Welch t-tests at alpha = 0.05).

    Each claim has ``holds``, the ``evidence`` as text and an ``effect``: a signed effect size in
    rounds of survival, positive in the claim's direction (:data:`EFFECTS` defines them)."""
    claims = []
    # (a) punishment sustains cooperation; removing it shortens survival
    parts, holds, gaps = [], True, []
    for beta in FIG2_BETAS:
        on = fig2_reps[(fig2_reps.beta == beta) & ~fig2_reps.punishment_off].survival_time.to_numpy()
        off = fig2_reps[(fig2_reps.beta == beta) & fig2_reps.punishment_off].survival_time.to_numpy()
        w = _welch(on, off)
        ok = on.mean() > off.mean() and w["p"] < 0.05
        holds &= ok
        gaps.append(float(on.mean() - off.mean()))
        parts.append(
            f"beta={beta:g}: T_s kept {on.mean():.1f} vs off-at-{FIG2_OFF} {off.mean():.1f} (Welch t={w['t']:.2f}, "
            f"p={w['p']:.2g})"
        )
    claims.append(
        {
            "id": "a",
            "claim": "Punishment sustains cooperation; once disabled at t = 15, societies collapse sooner (Fig. 2)",
            "holds": bool(holds),
            "evidence": "; ".join(parts),
            "effect": float(np.mean(gaps)),
        }
    )
    # (b) beta x r: stronger punishment helps at moderate r, non-linearly. Effect of beta at each r:
    # mean T_s at the largest beta minus at beta = 0, significant when it exceeds 1.96 combined s.e.m.
    lo_b, hi_b = grid.beta.min(), grid.beta.max()
    effects = {}
    for r, sub in grid.groupby("r"):
        a0, a1 = sub[sub.beta == lo_b].iloc[0], sub[sub.beta == hi_b].iloc[0]
        d = float(a1.survival_mean - a0.survival_mean)
        se = float(np.hypot(a0.survival_sem, a1.survival_sem))
        effects[r] = (d, se, d > 1.96 * se)
    moderate = [r for r in effects if 0.25 <= r <= 0.75]
    helps = all(effects[r][2] for r in moderate)
    claims.append(
        {
            "id": "b",
            "claim": "Stronger punishment improves survival at moderate growth r in [0.25, 0.75], with a non-linear "
            "beta x r interaction (Fig. 3)",
            "holds": bool(helps),
            "evidence": f"T_s(beta={hi_b:g}) - T_s(beta={lo_b:g}) per r: "
            + ", ".join(
                f"r={r:g}: {d:+.1f}±{se:.1f}{'*' if sig else ''}" for r, (d, se, sig) in sorted(effects.items())
            )
            + " (* = beyond 1.96 s.e.)",
            "effect": float(np.mean([effects[r][0] for r in moderate])) if moderate else float("nan"),
        }
    )

    # (c) altruists better in harsh; selfish better in rich; mixed best in rich
    def ts(env: str, pop: str) -> np.ndarray:
        return fig4_reps[(fig4_reps.env == env) & (fig4_reps.population == pop)].survival_time.to_numpy()

    w1, w2 = (
        _welch(ts("harsh", "altruistic"), ts("harsh", "selfish")),
        _welch(ts("harsh", "altruistic"), ts("harsh", "mixed")),
    )
    c1 = (
        ts("harsh", "altruistic").mean() > max(ts("harsh", "selfish").mean(), ts("harsh", "mixed").mean())
        and w1["p"] < 0.05
        and w2["p"] < 0.05
    )
    claims.append(
        {
            "id": "c1",
            "claim": "Altruistic populations survive longest in the harsh environment (Fig. 4)",
            "holds": bool(c1),
            "evidence": f"harsh T_s: altruistic {ts('harsh', 'altruistic').mean():.1f}, mixed "
            f"{ts('harsh', 'mixed').mean():.1f}, selfish {ts('harsh', 'selfish').mean():.1f}; altruistic "
            f"vs selfish p={w1['p']:.2g}, vs mixed p={w2['p']:.2g}",
            "effect": float(
                ts("harsh", "altruistic").mean() - max(ts("harsh", "selfish").mean(), ts("harsh", "mixed").mean())
            ),
        }
    )
    w3 = _welch(ts("rich", "selfish"), ts("rich", "altruistic"))
    c2 = ts("rich", "selfish").mean() > ts("rich", "altruistic").mean() and w3["p"] < 0.05
    claims.append(
        {
            "id": "c2",
            "claim": "Selfish populations do better than altruistic ones in the rich environment (Fig. 4)",
            "holds": bool(c2),
            "evidence": f"rich T_s: selfish {ts('rich', 'selfish').mean():.1f} vs altruistic "
            f"{ts('rich', 'altruistic').mean():.1f} (p={w3['p']:.2g})",
            "effect": float(ts("rich", "selfish").mean() - ts("rich", "altruistic").mean()),
        }
    )
    best = max(("altruistic", "mixed", "selfish"), key=lambda pop: ts("rich", pop).mean())
    others = [pop for pop in ("altruistic", "selfish")]
    strictly = all(
        ts("rich", "mixed").mean() > ts("rich", o).mean() and _welch(ts("rich", "mixed"), ts("rich", o))["p"] < 0.05
        for o in others
    )
    claims.append(
        {
            "id": "c3",
            "claim": "Mixed populations do best in the rich environment (Fig. 4)",
            "holds": bool(strictly),
            "evidence": f"rich T_s: mixed {ts('rich', 'mixed').mean():.1f}, selfish "
            f"{ts('rich', 'selfish').mean():.1f}, altruistic {ts('rich', 'altruistic').mean():.1f}; "
            f"highest mean: {best}" + ("" if strictly else "; mixed is not significantly above both others"),
            "effect": float(ts("rich", "mixed").mean() - max(ts("rich", o).mean() for o in others)),
        }
    )
    return claims


def run_experiments(
    replicates: int, seed: int, overrides: dict[str, Any], log: Callable[[str], None] = lambda s: None
) -> dict[str, Any]:
    """The three experiments of §4.1, each one graph invocation (seeds ``seed``, ``seed + 1``,
    ``seed + 2``), with ``overrides`` in every condition. ``cooplab figures cpr-abm`` and
    ``cooplab calibrate cpr`` (one call per sample) both run exactly this."""
    timings = {}
    t0 = time.perf_counter()
    log(f"Fig. 2: beta in {FIG2_BETAS} x punishment off at t={FIG2_OFF} or kept, {replicates} runs each")
    fig2_out = experiment_fig2(replicates, seed, overrides)
    timings["fig2"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    log(f"Fig. 3: {len(FIG3_BETAS)} beta x {len(FIG3_RS)} r grid, {replicates} runs per cell")
    grid = experiment_fig3(replicates, seed + 1, overrides)
    timings["fig3"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    log(f"Fig. 4: 3 populations x 2 environments, {replicates} runs each")
    fig4_out = experiment_fig4(replicates, seed + 2, overrides)
    timings["fig4"] = time.perf_counter() - t2
    return {"fig2": fig2_out, "grid": grid, "fig4": fig4_out, "seconds": timings}


def claims_of(exp: dict[str, Any]) -> list[dict[str, Any]]:
    """:func:`check_claims` on the outputs of :func:`run_experiments`."""
    return check_claims(exp["fig2"][2], exp["grid"], *exp["fig4"])


def make_figures(
    out: Path,
    replicates: int = 100,
    seed: int = 0,
    overrides: dict[str, Any] | None = None,
    log: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:
    out = Path(out)
    overrides = overrides or {}
    exp = run_experiments(replicates, seed, overrides, log)
    (ts2, surv2, reps2), grid, (bars, reps4), timings = exp["fig2"], exp["grid"], exp["fig4"], exp["seconds"]
    ts2.to_csv(out / "fig2_timeseries.csv", index=False)
    surv2.to_csv(out / "fig2_survival_curve.csv", index=False)
    reps2.to_csv(out / "fig2_replicates.csv", index=False)
    grid.to_csv(out / "fig3_grid.csv", index=False)
    bars.to_csv(out / "fig4_bars.csv", index=False)
    reps4.to_csv(out / "fig4_replicates.csv", index=False)
    figs = [
        fig2(ts2, surv2, FIG2_OFF, out / "fig2_punishment_off.png"),
        fig3(grid, out / "fig3_beta_r_grid.png"),
        fig4(bars, out / "fig4_populations.png"),
    ]
    claims = claims_of(exp)
    lines = [
        "# CPR ABM validation: the paper's claims with cooplab's parameters",
        "",
        f"{replicates} runs per condition, seed {seed}, parameter overrides: {overrides or 'none'}.",
        "",
    ]
    for c in claims:
        lines.append(f"- **({c['id']}) {'HOLDS' if c['holds'] else 'DOES NOT HOLD'}**: {c['claim']}. {c['evidence']}.")
    (out / "claims.md").write_text("\n".join(lines) + "\n")
    result = {
        "replicates": replicates,
        "seed": seed,
        "overrides": overrides,
        "figures": [str(f) for f in figs],
        "claims": claims,
        "seconds": {k: round(v, 2) for k, v in timings.items()},
        "fig4": bars.to_dict(orient="records"),
        "machine": rundir.machine(),
        "created": rundir.now(),
        "code_version": rundir.code_version(),
    }
    rundir.write_json(out / "figures.json", result)
    return result
