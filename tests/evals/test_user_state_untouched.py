"""cooplab leaves the state a user owns as it found it (issue 38, item 2): importing it, running
tasks and drawing every kind of figure it draws neither changes the matplotlib backend (a
notebook's inline backend stays on) nor leaves pyplot figures open, nor touches the logging
configuration, the decimal context or the garbage collector's thresholds. Every figure is a Figure on its own Agg canvas
(:mod:`cooplab.evals.canvas`); no module of the package calls ``matplotlib.use`` or pyplot."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("cooplab", "graphs", "agents", "sandbox", "evals", "tasks", "scripts")

SCRIPT = textwrap.dedent("""
    import decimal, gc, json, logging, sys
    from pathlib import Path

    gc.set_threshold(1234, 5, 6)               # the user's garbage collector

    import matplotlib
    matplotlib.use("svg")                      # the user's backend (a notebook's would be its inline one)
    user_log = logging.getLogger("user.app")
    user_log.setLevel(logging.DEBUG)
    decimal.getcontext().prec = 12             # the user's decimal context
    decimal.getcontext().traps[decimal.Inexact] = True

    def logging_state():
        root = logging.getLogger()
        return {"root": [root.level, [id(h) for h in root.handlers], root.disabled], "user": [user_log.level, user_log.propagate],
                "disable": logging.root.manager.disable}

    def decimal_state():
        c = decimal.getcontext()
        return [c.prec, str(c.rounding), c.Emin, c.Emax, c.capitals, c.clamp, sorted(str(k) for k, v in c.traps.items() if v)]

    before = {"logging": logging_state(), "decimal": decimal_state()}
    out = Path(sys.argv[1])
    scripted = sys.argv[2]

    import numpy as np
    import pandas as pd
    import cooplab

    # runs: each draws its run figure through the runner
    made = []
    for name, kw in {"cpr-llm": dict(task="cpr", agents="llm", model="scripted:" + scripted, n_agents=2, rounds=2, cache="off"),
                     "cpr-rule": dict(task="cpr", replicates=2, rounds=3),
                     "diners": dict(task="diners", replicates=2, iterations=2),
                     "game": dict(task="game", game="public-goods", players="nash", simulations=2)}.items():
        run = cooplab.run(out=out / name, quiet=True, **kw)
        assert run.status == "completed" and run.figure is not None and "figure_error" not in run.summary, (name, run.summary)
        made.append(run.figure)

    fig_dir = out / "figures"
    fig_dir.mkdir()
    # the CPR validation (Figs. 2-4)
    from cooplab.tasks.cpr import figures as cf
    rounds = list(range(1, 4))
    ts = pd.DataFrame([{"beta": b, "punishment_off": off, "metric": m, "round": t, "mean": 0.5, "ci95": 0.1}
                       for b in (0.0, 10.0) for off in (False, True) for m in ("R", "compliance") for t in rounds])
    surv = pd.DataFrame([{"beta": b, "punishment_off": off, "round": t, "share": 0.9, "ci95": 0.05}
                         for b in (0.0, 10.0) for off in (False, True) for t in rounds])
    made.append(cf.fig2(ts, surv, 2, fig_dir / "fig2.png"))
    grid = pd.DataFrame([{"r": r, "beta": b, "survival_mean": 20.0 * r + b, "rounds": 50} for r in (0.1, 0.2) for b in (0.0, 10.0)])
    made.append(cf.fig3(grid, fig_dir / "fig3.png"))
    bars = pd.DataFrame([{"env": e, "population": p, "survival_mean": 10.0, "survival_sem": 1.0, "r": 0.2 if e == "harsh" else 0.4}
                         for e in ("harsh", "rich") for p in ("altruistic", "mixed", "selfish")])
    made.append(cf.fig4(bars, fig_dir / "fig4.png"))
    # cooplab analyze cpr (Figs. 5-7, 14, 15)
    from cooplab.tasks.cpr import analysis as ca
    soc = pd.DataFrame([{"run": 0, "model": m, "population": p, "env": "harsh", "ablation": a, "society": s, "survival_time": 3 + s}
                        for m in ("a", "b") for p in ("altruistic", "selfish") for a in ("full", "osl") for s in range(3)])
    norms = pd.DataFrame([{"run": 0, "society": s, "round": 1, "model": "a", "population": "mixed", "S_ind": 0.5, "S_align": 0.6}
                          for s in range(3)])
    eff = pd.DataFrame([{"env": "harsh", "ablation": "full", "model": "a", "round": t, "eta_t": 0.5} for t in rounds])
    for fig, name in ((ca.survival_figure(soc[soc.ablation == "full"], "harsh", {}), "surv.png"), (ca.ablation_figure(soc), "abl.png"),
                      (ca.norms_figure(norms), "norms.png"), (ca.efficiency_figure(eff), "eff.png")):
        made.append(fig_dir / ca._save(fig, fig_dir, name))
    # the Diner's Dilemma's combination figures, the games' convergence and profile figures
    from cooplab.tasks.diners import figures as df_
    counts = df_.rule_experiment(replicates=2, seed=0, iterations=2)
    made.append(df_.combination_figure(df_.share_stats(counts, ["combination", "pk"]), 1, fig_dir / "comb.png", "combination 1"))
    from cooplab.tasks.games import figures as gf
    gf.convergence_figure({"public-goods": np.arange(6.0)}, fig_dir / "conv.png", resamples=20)
    made.append(fig_dir / "conv.png")
    entry = {"metric": {"mean": 4.0, "ci95": [3.0, 5.0], "nash": 0.0, "pareto": 10.0, "label": "contribution"}}
    made.append(gf.profile_figure([{"label": "a", "games": {"public-goods": entry}}], fig_dir / "profile.png"))
    # calibration, the science bench, efficiency, the Bayesian forest plot, the science budget figure
    from cooplab.evals import plots_calibration as pc
    cal = pd.DataFrame({"beta": [1.0, 2.0, 3.0], "r": [0.1, 0.2, 0.3], "holds_a": [True, False, True], "effect_a": [1.0, -1.0, 0.5]})
    made.append(pc.claim_map_figure(cal, "a", "beta", "r", False, False, fig_dir / "claim.png"))
    sens = pd.DataFrame([{"output": "T_s", "parameter": p, "S1": 0.2, "S1_conf": 0.05, "note": None} for p in ("beta", "r")])
    made.append(pc.sensitivity_figure(sens, fig_dir / "sens.png"))
    from cooplab.tasks.science import bench
    made.append(bench.figure([("solo", {"accuracy": 0.5, "cost_per_item_usd": 0.01, "ci95": [0.2, 0.8]})], fig_dir / "bench.png"))
    from cooplab.evals import efficiency
    efficiency.figure(pd.DataFrame([{"model": "m", "profile_total_tokens": 1000, "science_total_tokens_per_run": 5000,
                                     "paper_science_total_tokens_per_run": 9000}]), fig_dir / "efficiency.png")
    made.append(fig_dir / "efficiency.png")
    from cooplab.evals import robustness as rb
    rep = {"variants": ["original", "reword-a"], "effects": [], "spread": [{"model": "scripted:m.json", "condition": "all", "outcome": "efficiency",
           "mean": 0.5, "variants": {"original": {"mean": 0.4, "low": 0.3, "high": 0.5, "n": 3}, "reword-a": {"mean": 0.6, "low": None, "high": None, "n": 1}}}]}
    rb.draw(rep).savefig(fig_dir / "robustness.png")
    made.append(fig_dir / "robustness.png")
    from cooplab.evals import bayes
    forest = pd.DataFrame({"term": ["x", "y"], "mean": [0.1, -0.2], "ci_low": [-0.1, -0.4], "ci_high": [0.3, 0.0], "excludes_zero": [False, True]})
    made.append(bayes.forest_plot({"outcome": forest}, fig_dir / "forest.png", "forest"))
    from cooplab.tasks.science import report as sr
    sci = out / "science"
    sci.mkdir()
    (sci / "config.json").write_text(json.dumps({"llm": {"budget": 0.1}}))
    pd.DataFrame({"cost_usd": [0.01, 0.02], "cost_usd_exact": ["0.01", "0.02"], "team": ["data", "model"]}).to_csv(sci / "ledger.csv", index=False)
    made.append(sr.budget_figure(sci, fig_dir / "budget.png"))

    assert all(Path(p).is_file() and Path(p).stat().st_size > 1000 for p in made), made
    pyplot_imported_by_cooplab = "matplotlib.pyplot" in sys.modules
    import matplotlib.pyplot as plt  # the user's own pyplot
    print(json.dumps({"backend": matplotlib.get_backend(), "rc_backend": matplotlib.rcParams["backend"], "open": plt.get_fignums(),
                      "figures": len(made), "pyplot_imported": pyplot_imported_by_cooplab,
                      "logging": [before["logging"], logging_state()], "decimal": [before["decimal"], decimal_state()],
                      "gc": gc.get_threshold()}))
""")  # noqa: E501 (text kept verbatim)


def test_runs_and_every_figure_leave_the_backend_logging_decimal_context_and_collector_alone(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(SCRIPT)
    res = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "out"), str(ROOT / "examples" / "scripted" / "cautious.json")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["figures"] == 21
    assert got["backend"] == got["rc_backend"] == "svg"  # never switched to Agg
    assert got["open"] == [] and not got["pyplot_imported"]  # nothing drawn through pyplot
    assert got["logging"][0] == got["logging"][1]
    assert got["decimal"][0] == got["decimal"][1]
    assert got["gc"] == [1234, 5, 6]  # the collector is the console script's to set, never the library's


def _calls_of(tree: ast.AST) -> list[str]:
    """Every offending use of matplotlib's global state in a module: ``matplotlib.use``, pyplot imports."""
    bad = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "use"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("matplotlib", "mpl")
        ):
            bad.append(f"line {node.lineno}: matplotlib.use")
        if isinstance(node, ast.Import) and any(a.name == "matplotlib.pyplot" for a in node.names):
            bad.append(f"line {node.lineno}: import matplotlib.pyplot")
        if isinstance(node, ast.ImportFrom) and (
            node.module == "matplotlib.pyplot"
            or (node.module == "matplotlib" and any(a.name == "pyplot" for a in node.names))
        ):
            bad.append(f"line {node.lineno}: from matplotlib import pyplot")
    return bad


def test_no_module_sets_the_backend_or_uses_pyplot():
    found = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            bad = _calls_of(ast.parse(path.read_text(encoding="utf-8")))
            if bad:
                found[str(path.relative_to(ROOT))] = bad
    assert not found, found
    planted = ast.parse(
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nfrom matplotlib import pyplot\n"
    )
    assert len(_calls_of(planted)) == 3  # the scan sees each kind


def test_a_callers_decimal_context_changes_no_amount_a_run_records(tmp_path):
    """A notebook's own decimal context (few digits, a trap on Inexact) neither rounds nor stops the
    ledger's exact sums, in a script or inside a running event loop; and it is still the caller's after."""
    import asyncio
    import decimal

    import cooplab

    kw = dict(
        task="cpr",
        agents="llm",
        model=f"scripted:{ROOT / 'examples' / 'scripted' / 'cautious.json'}",
        n_agents=3,
        rounds=2,
        cache="off",
        quiet=True,
    )
    plain = cooplab.run(out=tmp_path / "plain", **kw).summary["ledger"]["cost_usd"]
    assert len(decimal.Decimal(plain).as_tuple().digits) > 3  # more digits than the caller's context keeps
    mine = decimal.Context(prec=3, traps=[decimal.Inexact, decimal.InvalidOperation])

    async def cell():
        return cooplab.run(out=tmp_path / "loop", **kw).summary

    with decimal.localcontext(mine) as ctx:
        script = cooplab.run(out=tmp_path / "script", **kw).summary
        looped = asyncio.run(cell())
        assert decimal.getcontext() is ctx and ctx.prec == 3 and ctx.traps[decimal.Inexact]
    for s in (script, looped):
        assert s["status"] == "completed" and s["ledger"]["cost_usd"] == plain
