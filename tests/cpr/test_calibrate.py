"""``cooplab calibrate cpr`` (tasks/cpr/calibrate.py): the space, the design, one sample = the
experiments of ``cooplab figures cpr-abm``, resume and extension (also after kill -9), hostile
options, the analysis, and the ``--preset`` mechanism of run / figures / params."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import Field

from cooplab.cli import main
from cooplab.evals.typed import column
from cooplab.runs import sweeps
from cooplab.tasks.cpr import calibrate as cal
from cooplab.tasks.cpr.params import CPRParams, make_params
from tests.helpers.calibration import kill_after_first_sample_then_rerun
from tests.helpers.cli import fail_line

EXE = str(Path(sys.executable).parent / "cooplab")
#: columns of samples.csv that say when and where a sample ran, not what it computed
VOLATILE = ("eval_seconds", "evaluated_at", "pid", "host")


def stable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=list(VOLATILE)).sort_values("sample").reset_index(drop=True)


def starts(out: Path) -> dict[int, int]:
    """How often each sample's evaluation started (OUT/events.jsonl)."""
    counts: dict[int, int] = {}
    for line in (out / cal.EVENTS).read_text().splitlines():
        e = json.loads(line)
        if e["event"] == "start":
            counts[e["sample"]] = counts.get(e["sample"], 0) + 1
    return counts


def run(args: list[str], capsys) -> dict:
    code = main(["calibrate", "cpr", *args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


# --- the space ---------------------------------------------------------------------------------
def test_every_chosen_parameter_is_sampled_or_fixed_with_a_reason():
    sampled = {d.target for d in cal.space()}
    fixed = cal.kept_fixed()
    for name in cal.chosen_fields():
        if CPRParams.model_fields[name].annotation is bool:
            continue  # switches are the model, not numbers
        assert name in sampled or name in cal.FIXED, f"chosen parameter {name} is neither in SPACE nor in FIXED"
    assert "not in the space" not in " ".join(fixed.values())
    for name in cal.PAPER:  # the paper's values are never sampled
        assert name not in sampled


def test_ranges_contain_the_defaults_and_are_justified():
    for row in cal.space_table():
        assert row["low"] < row["high"] and row["why"]
        assert row["low"] <= row["default"] <= row["high"], row


def test_il_rate_joins_the_space_when_the_field_exists(monkeypatch):
    if "il_rate" not in CPRParams.model_fields:
        assert "il_rate" not in [d.name for d in cal.space()]

        class WithIL(CPRParams):
            il_rate: float = Field(
                0.2, ge=0, le=1, description="individual learning rate", json_schema_extra={"source": "chosen: x"}
            )

        monkeypatch.setattr(cal, "CPRParams", WithIL)
    dims = {d.name: d for d in cal.space()}
    assert "il_rate" in dims and (dims["il_rate"].low, dims["il_rate"].high) == (0.0, 0.5)
    assert "il_rate" in [r["name"] for r in cal.space_table()]


# --- the design --------------------------------------------------------------------------------
def test_the_design_is_reproducible_by_seed_stratified_and_extends_as_a_prefix():
    d = len(cal.space())
    a, b, c = cal.unit_design(3, 16, 16, d), cal.unit_design(3, 16, 16, d), cal.unit_design(4, 16, 16, d)
    assert np.array_equal(a, b) and not np.allclose(a, c)
    for j in range(d):  # one Latin hypercube: every column has one point in each of the 16 strata
        assert sorted(np.floor(a[:, j] * 16).astype(int)) == list(range(16))
    longer = cal.unit_design(3, 40, 16, d)
    assert np.array_equal(longer[:16], a) and not np.allclose(longer[16:32], a)
    assert np.array_equal(cal.unit_design(3, 7, 16, d), a[:7])


def test_sampled_values_respect_ranges_and_constraints():
    dims = cal.space()
    x = cal.design_values(cal.unit_design(0, 500, 500, len(dims)), dims)
    for j, dim in enumerate(dims):
        assert x[:, j].min() >= dim.low and x[:, j].max() <= dim.high
        if dim.log:  # log-uniform: the median is near the geometric centre
            assert abs(np.log10(np.median(x[:, j])) - (np.log10(dim.low) + np.log10(dim.high)) / 2) < 0.1
    names = [dim.name for dim in dims]
    for row in x:
        p = make_params(**cal.overrides_of(dict(zip(names, row, strict=False))))  # validation enforces every constraint
        assert p.e_min <= p.e_max and p.g_min <= p.g_max and p.R0 <= p.K
        assert p.m_range[0] == 0.0 and p.p_range[0] == 0.0


# --- one sample = figures cpr-abm --------------------------------------------------------------
def test_an_evaluated_sample_equals_figures_cpr_abm_with_its_values(tmp_path, capsys):
    out = tmp_path / "cal"
    run(["--out", str(out), "--samples", "2", "--replicates", "3", "--seed", "5", "-q"], capsys)
    row = cal.read_rows(out)[1]
    sets = []
    for k, v in cal.overrides_of(row["params"]).items():
        sets += ["--set", f"{k}={json.dumps(v)}"]
    assert (
        main(
            ["figures", "cpr-abm", "--out", str(tmp_path / "fig"), "--replicates", "3", "--seed", "5", *sets, "--json"]
        )
        == 0
    )
    fig = json.loads(capsys.readouterr().out)
    for c in fig["claims"]:
        assert row["holds"][c["id"]] == c["holds"]
        assert row["evidence"][c["id"]] == c["evidence"]
        assert row["effect"][c["id"]] == pytest.approx(c["effect"], abs=0)
    grid = pd.read_csv(tmp_path / "fig" / "fig3_grid.csv")
    assert row["survival_mean"] == pytest.approx(grid.survival_mean.mean(), rel=1e-12)
    # and the sample differs from the defaults (its values were used)
    assert (
        main(["figures", "cpr-abm", "--out", str(tmp_path / "fig0"), "--replicates", "3", "--seed", "5", "--json"]) == 0
    )
    default = json.loads(capsys.readouterr().out)
    assert [c["evidence"] for c in default["claims"]] != [row["evidence"][c] for c in cal.CLAIMS]


# --- resume and extension ----------------------------------------------------------------------
def test_rerun_skips_finished_samples_and_a_larger_design_extends_it(tmp_path, capsys):
    out = tmp_path / "cal"
    s2 = run(["--out", str(out), "--samples", "2", "--replicates", "2", "-q"], capsys)
    assert s2["run"]["samples_evaluated"] == 2 and s2["block"] == 2
    first = pd.read_csv(out / "samples.csv")
    again = run(["--out", str(out), "--samples", "2", "--replicates", "2", "-q"], capsys)
    assert again["run"]["samples_evaluated"] == 0 and again["run"]["samples_skipped"] == 2
    assert starts(out) == {0: 1, 1: 1}
    s4 = run(["--out", str(out), "--samples", "4", "--replicates", "2", "--batch", "1", "-q"], capsys)
    assert s4["run"]["samples_evaluated"] == 2 and s4["finished"] == 4 and s4["block"] == 2
    assert starts(out) == {0: 1, 1: 1, 2: 1, 3: 1}
    df = pd.read_csv(out / "samples.csv")
    pd.testing.assert_frame_equal(df.iloc[:2].reset_index(drop=True), first)  # untouched, timestamps included
    design = json.loads((out / "design.json").read_text())
    assert np.array_equal(np.asarray(design["unit"]), cal.unit_design(0, 4, 2, len(cal.space())))
    # a different design on the same OUT is refused in one line, and nothing is touched
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    for args, what in (
        (["--seed", "1"], "seed 0 -> 1"),
        (["--replicates", "3"], "replicates 2 -> 3"),
        (["--set", "N=12"], "base differs"),
        (["--samples", "3"], "at least that"),
    ):
        opts = {"--samples": "4", "--replicates": "2", **dict(zip(args[::2], args[1::2], strict=False))}
        line = fail_line(capsys, ["calibrate", "cpr", "--out", str(out), *[x for kv in opts.items() for x in kv], "-q"])
        assert what in line, line
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_torn_last_line_is_ignored_and_repaired(tmp_path, capsys):
    out = tmp_path / "cal"
    run(["--out", str(out), "--samples", "2", "--replicates", "2", "-q"], capsys)
    path = out / cal.SAMPLES
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + lines[1][: len(lines[1]) // 2])  # sample 1 torn by a killed writer
    assert sorted(cal.read_rows(out)) == [0]
    s = run(["--out", str(out), "--samples", "2", "--replicates", "2", "-q"], capsys)
    assert s["run"]["samples_evaluated"] == 1 and s["finished"] == 2
    assert all(json.loads(x) for x in path.read_text().splitlines())  # repaired: every line whole


def test_kill_minus_9_then_rerun_gives_the_uninterrupted_table(tmp_path, capsys):
    args = ["calibrate", "cpr", "--samples", "6", "--replicates", "2", "--batch", "1", "--seed", "2", "-q"]
    ref = tmp_path / "ref"
    assert main([*args, "--out", str(ref)]) == 0
    capsys.readouterr()
    out = tmp_path / "killed"
    done, after = kill_after_first_sample_then_rerun(EXE, args, out, capsys)
    assert 1 <= len(done) < 6, len(done)
    for i, row in done.items():  # finished samples were kept, not computed again
        assert after[i] == row
    counts = starts(out)
    assert all(counts[i] == 1 for i in done), counts
    pd.testing.assert_frame_equal(stable(pd.read_csv(out / "samples.csv")), stable(pd.read_csv(ref / "samples.csv")))
    assert len(pd.read_csv(out / "samples.csv")) == 6


# --- hostile options ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, needle",
    [
        (["--samples", "0"], "--samples"),
        (["--samples", "-3"], "--samples"),
        (["--samples", "nan"], "--samples"),
        (["--samples", "1e12"], "--samples"),
        (["--samples", "2.5"], "--samples"),
        (["--samples", "abc"], "--samples"),
        (["--samples", "1000000000000"], "--samples"),
        (["--replicates", "0"], "--replicates"),
        (["--replicates", "1"], "--replicates"),
        (["--parallel", "0"], "--parallel"),
        (["--batch", "0"], "--batch"),
        (["--seed", "-1"], "--seed"),
        (["--replicates", "100000"], "110 conditions"),
        (["--executor", "dask"], "--executor"),
        (["--address", "auto"], "--address"),
        (["--set", "alpha=0.1"], "sampled"),
        (["--set", "beta=3"], "experiments set beta"),
        (["--set", "nope=1"], "unknown parameter"),
        (["--set", "T=0"], "T must be an integer in 1.."),
        (["--preset", "nope"], "preset"),
    ],
)
def test_hostile_options_are_one_line_errors(tmp_path, capsys, args, needle):
    line = fail_line(capsys, ["calibrate", "cpr", "--out", str(tmp_path / "cal"), *args])
    assert needle in line, line
    assert not (tmp_path / "cal").exists()


def test_an_out_that_is_a_file_or_a_foreign_directory_is_refused(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("precious")
    assert "is a file" in fail_line(
        capsys, ["calibrate", "cpr", "--out", str(f), "--samples", "1", "--replicates", "2"]
    )
    assert f.read_text() == "precious"
    d = tmp_path / "run"
    d.mkdir()
    (d / "config.json").write_text("{}")
    assert "without design.json" in fail_line(
        capsys, ["calibrate", "cpr", "--out", str(d), "--samples", "1", "--replicates", "2"]
    )
    assert sorted(p.name for p in d.iterdir()) == ["config.json"]


def test_help_and_missing_salib(monkeypatch, capsys, tmp_path):
    assert main(["calibrate", "cpr", "--help"]) == 0
    assert "--samples" in capsys.readouterr().out
    from tests.install.test_extras import hide

    hide(monkeypatch, "SALib")
    line = fail_line(capsys, ["calibrate", "cpr", "--out", str(tmp_path / "c"), "--samples", "1", "--replicates", "2"])
    assert "cooplab[analysis]" in line and "SALib" in line
    assert not (tmp_path / "c").exists()


# --- analysis ----------------------------------------------------------------------------------
def fake_table(n: int, seed: int = 0) -> tuple[pd.DataFrame, list[str]]:
    """A sample table whose claim (c1) effect depends on gamma only; every other output is noise."""
    dims = cal.space()
    names = [d.name for d in dims]
    u = cal.unit_design(seed, n, n, len(dims))
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(cal.design_values(u, dims), columns=names)
    for j, x in enumerate(names):
        df[f"u_{x}"] = u[:, j]
    g = u[:, names.index("gamma")]
    for c in cal.CLAIMS:
        df[f"effect_{c}"] = rng.normal(size=n)
    df["effect_c1"] = 10 * (g - 0.5) + 0.1 * rng.normal(size=n)
    for c in cal.CLAIMS:
        df[f"holds_{c}"] = df[f"effect_{c}"] > 0
    df["n_held"] = df[[f"holds_{c}" for c in cal.CLAIMS]].sum(axis=1)
    df["survival_mean"] = 20 + rng.normal(size=n)
    df["sample"] = range(n)
    return df, names


def test_sensitivity_recovers_the_one_parameter_that_matters(monkeypatch):
    df, names = fake_table(128)
    sens = cal.sensitivity(df, names, outputs=("effect_c1",))
    # the noise output is judged by RBD-FAST's S1 only: its delta (seconds per output) is left out
    monkeypatch.setattr(cal, "DELTA_MIN_SAMPLES", 10**6)
    sens += cal.sensitivity(df, names, outputs=("effect_a",))
    top = cal.top_parameters(sens, "effect_c1", 3)
    assert top[0] == "gamma", top
    rows = {r["parameter"]: r for r in sens if r["output"] == "effect_c1"}
    assert rows["gamma"]["S1"] > 0.8 and all(rows[x]["S1"] < 0.3 for x in names if x != "gamma")
    assert math.isfinite(rows["gamma"]["S1_conf"]) and math.isfinite(rows["gamma"]["delta"])
    assert rows["gamma"]["delta"] == max(r["delta"] for r in rows.values())
    noise = {r["parameter"]: r for r in sens if r["output"] == "effect_a"}  # pure noise: nothing stands out
    assert max(r["S1"] for r in noise.values()) < 0.5


def test_the_analysis_writes_its_outputs_and_counts_right(tmp_path, monkeypatch):
    monkeypatch.setattr(
        cal, "DELTA_MIN_SAMPLES", 10**6
    )  # RBD-FAST only: delta is tested above and takes seconds per output
    df, names = fake_table(64)
    record = {
        "design_id": "x",
        "samples": 64,
        "seed": 0,
        "replicates": 2,
        "block": 64,
        "preset": None,
        "base": {},
        "space": cal.space_table(),
        "names": names,
    }
    s = cal.analyze(tmp_path, df, record)
    for f in (
        "claims_map.csv",
        "sensitivity.csv",
        "summary.json",
        "report.md",
        "figures/sensitivity.png",
        *(f"figures/claim_{c}_map.png" for c in cal.CLAIMS),
    ):
        assert (tmp_path / f).exists(), f
    cmap = pd.read_csv(tmp_path / "claims_map.csv").set_index("claim")
    assert cmap.loc["c1", "held"] == int((df.effect_c1 > 0).sum()) == s["claims"]["c1"]["held"]
    assert cmap.loc["all", "held"] == int((df.n_held == 5).sum())
    assert sum(s["claims_held_count"][k]["held"] for k in range(6)) == 64
    lo, hi = cal.wilson(5, 10)
    assert lo is not None and hi is not None
    assert (round(lo, 4), round(hi, 4)) == (0.2366, 0.7634)
    assert s["most_influential"]["effect_c1"][0] == "gamma"
    best = s["best_region"]
    assert best["max_claims_held"] == int(df.n_held.max())
    assert all(len(b["claims_held"]) == best["max_claims_held"] for b in best["samples"])
    assert "gamma" in (tmp_path / "report.md").read_text()


def test_a_real_run_writes_everything_and_json_is_clean(tmp_path, capsys):
    out = tmp_path / "cal"
    code = main(["calibrate", "cpr", "--out", str(out), "--samples", "2", "--replicates", "2", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    s = json.loads(captured.out)  # stdout is exactly the summary
    assert s["finished"] == 2 and s["complete"] and set(s["claims"]) == set(cal.CLAIMS)
    tp = s["run"]["throughput"]
    assert tp["samples_x_replicates_x_rounds"] == 2 * 2 * 50 and tp["samples_x_replicates_x_rounds_per_second"] > 0
    design = json.loads((out / "design.json").read_text())
    assert design["seed"] == 0 and design["versions"]["SALib"] and len(design["values"]) == 2
    assert [r["name"] for r in design["space"]] == [d.name for d in cal.space()]


# --- presets -----------------------------------------------------------------------------------
@pytest.fixture
def presets(monkeypatch):
    from cooplab.tasks.cpr import params

    monkeypatch.setattr(params, "PRESETS", {"v1": {"c": 3.5, "R0": 900.0}}, raising=False)


def test_preset_in_run_params_and_figures(presets, tmp_path, capsys):
    assert main(["params", "cpr", "--preset", "v1", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["c"]["value"] == 3.5 and rows["c"]["preset"] == "v1" and "value" not in rows["alpha"]
    assert (
        main(["run", "cpr", "--preset", "v1", "--replicates", "2", "--rounds", "2", "--out", str(tmp_path / "r"), "-q"])
        == 0
    )
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["params"]["c"] == 3.5 and config["params"]["R0"] == 900.0 and config["params"]["preset"] == "v1"
    assert (
        main(
            [
                "run",
                "cpr",
                "--preset",
                "v1",
                "--set",
                "c=3",
                "--replicates",
                "2",
                "--rounds",
                "2",
                "--out",
                str(tmp_path / "s"),
                "-q",
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "s" / "config.json").read_text())["params"]["c"] == 3  # --set wins
    capsys.readouterr()
    assert (
        main(["figures", "cpr-abm", "--preset", "v1", "--replicates", "2", "--out", str(tmp_path / "f"), "--json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["overrides"] == {"c": 3.5, "R0": 900.0}
    capsys.readouterr()
    s = run(["--out", str(tmp_path / "cal"), "--preset", "v1", "--samples", "1", "--replicates", "2", "-q"], capsys)
    assert s["base"] == {"R0": 900.0} and s["preset"] == "v1"  # c is sampled: the preset's c is not used


def test_unknown_preset_is_one_line_listing_the_known_ones(presets, tmp_path, capsys):
    for argv in (
        ["params", "cpr", "--preset", "v2"],
        ["run", "cpr", "--preset", "v2", "--out", str(tmp_path / "r")],
        ["figures", "cpr-abm", "--preset", "v2", "--out", str(tmp_path / "f")],
    ):
        line = fail_line(capsys, argv)
        assert "unknown preset 'v2'" in line and "v1" in line, line


def test_no_presets_defined(monkeypatch, capsys):
    from cooplab.tasks.cpr import params

    monkeypatch.delattr(params, "PRESETS", raising=False)
    assert "no presets are defined" in fail_line(capsys, ["params", "cpr", "--preset", "v1"])
    monkeypatch.setattr(params, "PRESETS", {"bad": {"nope": 1}}, raising=False)
    assert "unknown parameters: nope" in fail_line(capsys, ["params", "cpr", "--preset", "bad"])


def test_a_batch_job_runs_from_its_json_alone_in_another_process(tmp_path):
    """What a Ray worker does with a batch: cooplab.runs.sweeps.execute_job on the job as plain data."""
    out = tmp_path / "cal"
    record = cal.prepare(out, samples=2, seed=0, replicates=2, base={}, preset=None)
    (j,) = cal.jobs(out, record, [1], batch=4, jobs_on=sweeps)
    code = (
        "import json, sys; from cooplab.runs.sweeps import execute_job; "
        "print(json.dumps(execute_job(json.load(sys.stdin))))"
    )
    res = subprocess.run([sys.executable, "-c", code], input=json.dumps(j), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1])["kind"] == "ran"
    assert sorted(cal.read_rows(out)) == [1]
    res = subprocess.run([sys.executable, "-c", code], input=json.dumps(j), capture_output=True, text=True, timeout=300)
    assert json.loads(res.stdout.strip().splitlines()[-1])["kind"] == "skipped" and starts(out) == {1: 1}


def test_a_failed_batch_is_reported_the_others_kept_and_a_rerun_retries_it(tmp_path, capsys, monkeypatch):
    calls = []

    def fake(overrides, replicates, seed):
        calls.append(overrides["c"])
        if len(calls) == 2:
            raise RuntimeError("boom")
        return {
            "holds": {c: c == "c1" for c in cal.CLAIMS},
            "effect": {c: overrides["c"] for c in cal.CLAIMS},
            "n_held": 1,
            "survival_mean": overrides["c"],
            "society_rounds": 10,
            "evidence": {c: "" for c in cal.CLAIMS},
            "eval_seconds": 0.0,
        }

    monkeypatch.setattr(cal, "evaluate", fake)
    out = tmp_path / "cal"
    args = ["calibrate", "cpr", "--out", str(out), "--samples", "3", "--replicates", "2", "--batch", "1", "-q"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "1 batches failed" in err and "boom" in err and "Traceback" not in err
    assert len(cal.read_rows(out)) == 2 and not json.loads((out / "summary.json").read_text())["complete"]
    assert main(args) == 0
    capsys.readouterr()
    assert len(calls) == 4 and sorted(starts(out).values()) == [1, 1, 2]
    df = pd.read_csv(out / "samples.csv")
    assert list(df["sample"]) == [0, 1, 2] and (column(df, "c") == column(df, "effect_a")).all()


def test_docs_list_the_space_as_the_code_has_it():
    text = (Path(__file__).resolve().parents[2] / "docs" / "calibrate.md").read_text()
    for d in (*cal.SPACE, *cal.OPTIONAL):
        assert f"| `{d.name}` | [{d.low:g}, {d.high:g}] | {'log' if d.log else 'linear'} |" in text, d.name
    for name in cal.FIXED:
        assert f"`{name}" in text


def test_a_preset_with_tuples_resumes_as_the_same_design(tmp_path, monkeypatch):
    from cooplab.tasks.cpr import params

    monkeypatch.setattr(params, "PRESETS", {"t": {"R0": 900.0}}, raising=False)
    base = {"R0": 900.0, "K": 1000.0}
    a = cal.prepare(tmp_path / "c", samples=2, seed=0, replicates=2, base=base, preset="t")
    b = cal.prepare(tmp_path / "c", samples=2, seed=0, replicates=2, base=dict(base), preset="t")
    assert a["design_id"] == b["design_id"]
    ident = cal.identity(seed=0, replicates=2, block=2, base={"m_range_like": (0.0, 1.0)}, preset=None)
    assert ident["base"]["m_range_like"] == [0.0, 1.0]
    with pytest.raises(cal.CalibrateError, match="different calibration design"):
        cal.prepare(tmp_path / "c", samples=2, seed=0, replicates=2, base={"R0": 800.0}, preset="t")


def test_calibrated_presets_are_points_of_the_space():
    """The calibrated presets were picked from the calibration: each is a valid parameter set whose
    sampled values lie inside the space's ranges, with the paper's values untouched."""
    from cooplab.tasks.cpr import calibrate as cal
    from cooplab.tasks.cpr.params import PRESETS, CPRParams

    for name in ("calibrated", "calibrated-punishment"):
        p = CPRParams(**PRESETS[name])
        assert p.beta == 10.0 and p.N == 10 and p.T == 50 and p.individual_learning
        for d in cal.space():
            v = getattr(p, d.target)
            v = v[1] if isinstance(v, tuple) else v
            assert d.low <= v <= d.high, (name, d.name, v)


def test_a_batch_leaves_the_callers_warning_filters_as_they_were(monkeypatch):
    """The batch silences one harmless warning of Welch's test for its own work only: a notebook's
    warning filters are the same after it."""
    import warnings

    from cooplab.evals import calibration
    from cooplab.tasks.cpr import calibrate as calibrate_cpr

    seen = []

    def fake_batch(job, evaluate):
        seen.append(any(f[1] is not None and f[1].pattern == "Precision loss occurred" for f in warnings.filters))
        return "done"

    monkeypatch.setattr(calibration, "run_batch", fake_batch)
    before = list(warnings.filters)
    assert calibrate_cpr.run_batch({}) == "done"
    assert seen == [True] and warnings.filters == before
