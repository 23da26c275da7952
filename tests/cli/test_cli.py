"""The CLI end to end on small runs, and its handling of bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.evals.typed import as_series, column
from cooplab.tasks.cpr.params import CPRParams


def run_cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_run_cpr_writes_a_complete_run_directory(tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = run_cli(
        [
            "run",
            "cpr",
            "--agents",
            "rule",
            "--env",
            "rich",
            "--population",
            "selfish",
            "--ablation",
            "ogd",
            "--n-agents",
            "6",
            "--rounds",
            "12",
            "--replicates",
            "8",
            "--seed",
            "5",
            "--set",
            "beta=14",
            "--out",
            str(out),
            "--json",
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary == json.loads((out / "summary.json").read_text())
    assert summary["replicates"] == 8 and summary["n_agents"] == 6 and summary["status"] == "completed"
    assert len(summary["survival_time"]["values"]) == 8
    assert all(1 <= v <= 12 for v in summary["survival_time"]["values"])
    assert summary["survival_time"]["mean"] == pytest.approx(sum(summary["survival_time"]["values"]) / 8)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["seed"] == 5 and cfg["params"]["population"] == "selfish" and cfg["params"]["ablation"] == "ogd"
    assert set(cfg["params"]) == set(CPRParams.model_fields) | {
        "env",
        "ablation",
        "population",
        "replicates",
    }  # every parameter recorded
    assert cfg["params"]["beta"] == 14 and cfg["params"]["r"] == 0.6 and cfg["params"]["social_learning"] is False
    rounds = pd.read_parquet(out / "rounds.parquet")
    assert set(rounds["replicate"]) == set(range(8))
    per_rep = as_series(rounds.groupby("replicate")["round"].max()).to_dict()
    assert per_rep == dict(enumerate(summary["survival_time"]["values"]))  # one row per round lived
    assert (out / "agents.parquet").exists() and (out / "figures" / "run.png").stat().st_size > 10_000
    assert (out / "checkpoints.sqlite").exists()


def test_same_seed_same_summary_through_the_cli(tmp_path, capsys):
    args = ["run", "cpr", "--replicates", "5", "--rounds", "15", "--seed", "3", "--json", "-q", "--csv"]
    _, a, _ = run_cli(args + ["--out", str(tmp_path / "a")], capsys)
    _, b, _ = run_cli(args + ["--out", str(tmp_path / "b")], capsys)
    ja, jb = json.loads(a), json.loads(b)
    assert ja["survival_time"] == jb["survival_time"] and ja["efficiency"] == jb["efficiency"]
    assert (tmp_path / "a" / "rounds.csv").read_text() == (tmp_path / "b" / "rounds.csv").read_text()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["run", "cpr", "--bogus"], "No such option"),
        (["run", "cpr", "--env", "wet"], "--env"),
        (["run", "cpr", "--set", "K=0"], "K"),
        (["run", "cpr", "--set", "r=-0.1"], "r"),
        (["run", "cpr", "--set", "learn_prob=1.5"], "learn_prob"),
        (["run", "cpr", "--set", "m_range=[0.2,1.3]"], "m_range"),
        (["run", "cpr", "--set", "nonsense=1"], "unknown parameter 'nonsense'"),
        (["run", "cpr", "--set", "beta"], "name=value"),
        (["run", "cpr", "--rounds", "0"], "--rounds"),
        (["run", "cpr", "--replicates", "0"], "--replicates"),
        (["run", "cpr", "--agents", "robot"], "--agents"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, args, needle):
    code, out, err = run_cli(
        args + ["--out", str(tmp_path / "x"), "-q"] if "--bogus" not in args else args + ["--out", str(tmp_path / "x")],
        capsys,
    )
    assert code == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("cooplab: error:"), err
    assert needle in lines[0]
    assert "Traceback" not in err
    assert not (tmp_path / "x" / "summary.json").exists()


def test_unwritable_out_is_one_line_exit_2(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = run_cli(["run", "cpr", "--out", str(blocker / "sub"), "-q"], capsys)
    assert code == 2 and err.count("\n") == 1 and "cannot write to --out" in err


def test_existing_run_is_not_clobbered(tmp_path, capsys):
    args = ["run", "cpr", "--replicates", "2", "--rounds", "3", "--out", str(tmp_path / "r"), "-q"]
    assert run_cli(args, capsys)[0] == 0
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "already holds a run" in err
    assert run_cli(args + ["--force"], capsys)[0] == 0


def test_params_lists_every_parameter_with_source(capsys):
    code, out, _ = run_cli(["params", "cpr", "--json"], capsys)
    rows = json.loads(out)
    assert code == 0 and {r["name"] for r in rows} == set(CPRParams.model_fields)
    assert all(r["meaning"] and r["source"] for r in rows)
    assert next(r for r in rows if r["name"] == "N")["source"].startswith("paper")


def test_graph_prints_mermaid_for_each_ablation(capsys):
    code, out, _ = run_cli(["graph", "cpr"], capsys)
    assert code == 0 and out.lstrip().startswith("---") or "graph TD" in out
    for node in ("harvest", "punish", "environment", "learn", "propose", "vote"):
        assert node in out
    _, out2, _ = run_cli(["graph", "cpr", "--ablation", "neither"], capsys)
    assert "learn" not in out2 and "vote" not in out2 and "harvest" in out2


def test_help_everywhere(capsys):
    for cmd in ([], ["run"], ["run", "cpr"], ["params", "cpr"], ["graph", "cpr"], ["figures", "cpr-abm"], ["resume"]):
        code, out, _ = run_cli(cmd + ["--help"], capsys)
        assert code == 0 and "Usage" in out, cmd


def test_resume_continues_an_interrupted_run(tmp_path, capsys, monkeypatch):
    from cooplab.tasks.cpr import society
    from cooplab.tasks.cpr import task as runner

    ref_dir, dir_ = tmp_path / "ref", tmp_path / "run"
    base = ["run", "cpr", "--env", "rich", "--replicates", "10", "--rounds", "20", "--seed", "4", "-q", "--json"]
    _, ref, _ = run_cli(base + ["--out", str(ref_dir)], capsys)

    def crashing_phases(params):
        phases = society.phases_for(params)
        learn = phases["learn"]

        def learn_then_crash(state):
            if state["round"] == 7:
                raise KeyboardInterrupt  # as if the user pressed Ctrl-C in round 6's learn phase
            return learn(state)

        phases["learn"] = learn_then_crash
        return phases

    monkeypatch.setattr(runner, "phases_for", crashing_phases)
    code, _, err = run_cli(base + ["--out", str(dir_)], capsys)
    assert code == 130 and "cooplab resume" in err
    assert not (dir_ / "summary.json").exists()
    monkeypatch.setattr(runner, "phases_for", society.phases_for)
    code, resumed, err = run_cli(["resume", str(dir_), "-q", "--json"], capsys)
    assert code == 0, err
    a, b = json.loads(ref), json.loads(resumed)
    assert a["survival_time"] == b["survival_time"] and a["efficiency"] == b["efficiency"]
    ra, rb_ = pd.read_parquet(ref_dir / "rounds.parquet"), pd.read_parquet(dir_ / "rounds.parquet")
    pd.testing.assert_frame_equal(ra, rb_)  # no round lost or repeated


def test_console_script_runs(tmp_path):
    exe = Path(sys.executable).parent / "cooplab"
    res = subprocess.run(
        [str(exe), "run", "cpr", "--replicates", "3", "--rounds", "5", "--out", str(tmp_path / "r"), "--json", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["replicates"] == 3
    bad = subprocess.run(
        [str(exe), "run", "cpr", "--out", str(tmp_path / "r2"), "--set", "K=-5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.stderr


def test_figures_cpr_abm_small(tmp_path, capsys):
    code, out, err = run_cli(["figures", "cpr-abm", "--out", str(tmp_path), "--replicates", "4", "--json"], capsys)
    assert code == 0, err
    res = json.loads(out)
    for name in (
        "fig2_punishment_off.png",
        "fig3_beta_r_grid.png",
        "fig4_populations.png",
        "fig2_timeseries.csv",
        "fig3_grid.csv",
        "fig4_bars.csv",
        "claims.md",
    ):
        assert (tmp_path / name).exists(), name
    grid = pd.read_csv(tmp_path / "fig3_grid.csv")
    assert column(grid, "beta").nunique() >= 10 and column(grid, "r").nunique() >= 10 and bool((grid["n"] == 4).all())
    assert {c["id"] for c in res["claims"]} == {"a", "b", "c1", "c2", "c3"}
    assert all(isinstance(c["holds"], bool) for c in res["claims"])


def test_figures_cpr_abm_quiet_drops_the_progress_lines_only(tmp_path, capsys):
    code, out, err = run_cli(["figures", "cpr-abm", "--out", str(tmp_path / "loud"), "--replicates", "2"], capsys)
    assert code == 0 and "Fig. 3:" in err
    code, quiet_out, quiet_err = run_cli(
        ["figures", "cpr-abm", "--out", str(tmp_path / "quiet"), "--replicates", "2", "-q"], capsys
    )
    assert code == 0 and "Fig. 3:" not in quiet_err
    assert quiet_out.replace(str(tmp_path / "quiet"), "OUT") == out.replace(
        str(tmp_path / "loud"), "OUT"
    )  # same verdicts printed
    assert (tmp_path / "quiet" / "claims.md").read_text() == (tmp_path / "loud" / "claims.md").read_text()


def test_readme_python_examples_run(tmp_path, monkeypatch):
    """Every Python block of the README runs as written, from a fresh directory beside examples/."""
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in readme.split("```python")[1:]]
    assert len(blocks) == 3
    (tmp_path / "examples").symlink_to(root / "examples")
    monkeypatch.chdir(tmp_path)
    spaces = []
    for i, code in enumerate(blocks):
        ns: dict = {"__name__": f"readme_{i}"}
        exec(compile(code, f"README.md python block {i + 1}", "exec"), ns)
        spaces.append(ns)
    api, tax, compose = spaces
    assert api["run"].status == "completed" and len(api["run"].rounds) == 3 and len(api["rows"]) == 6
    assert (tmp_path / "runs" / "pk" / "table.csv").is_file()
    assert tax["run"].status == "completed" and any(r["name"] == "tax" for r in tax["run"].traces)
    final = compose["final"]
    assert final["T_s"].shape == (50,) and (final["T_s"] >= 1).all()
