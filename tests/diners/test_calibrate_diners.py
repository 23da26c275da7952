"""``cooplab calibrate diners`` (tasks/diners/calibrate.py on cooplab/calibration.py): the space
(every sample a Diner's Dilemma), the design, one sample = ``cooplab figures diners`` with its
choices, resume and extension (also after kill -9), hostile options, the score's memory."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from cooplab.cli import main
from cooplab.evals import calibration as calib
from cooplab.runs import sweeps
from cooplab.tasks.diners import calibrate as cal
from cooplab.tasks.diners import figures
from cooplab.tasks.diners import model as dm
from cooplab.tasks.diners.society import Condition, paper_conditions, run_diners
from tests.helpers.calibration import kill_after_first_sample_then_rerun
from tests.helpers.cli import fail_line

EXE = str(Path(sys.executable).parent / "cooplab")
ROOT = Path(__file__).resolve().parents[2]


def stable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=list(calib.VOLATILE)).sort_values("sample").reset_index(drop=True)


def run(args: list[str], capsys) -> dict:
    code = main(["calibrate", "diners", *args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def all_choices(u: np.ndarray) -> list[dict[str, float]]:
    names = [d.name for d in cal.space()]
    return [cal.choices_of(dict(zip(names, row, strict=False))) for row in calib.design_values(u, cal.space())]


# --- the space ---------------------------------------------------------------------------------
def test_our_choices_lie_inside_justified_ranges_and_map_back_exactly():
    for row in cal.space_table():
        assert row["low"] < row["high"] and len(row["why"]) > 40
        assert row["low"] <= row["default"] <= row["high"], row
    assert cal.choices_of(cal.defaults()) == dm.CHOICES  # our menu, unstated p = k = 1, accumulated score
    assert {d.name for d in cal.space()} == {"extra_price", "value_ratio", "unstated_k", "unstated_pk", "memory"}


def test_every_free_choice_of_the_docs_is_sampled_or_fixed_with_a_reason():
    text = " ".join(cal.FIXED)
    for i in (1, 2, 3, 4, 6, 7):  # docs/diners.md "Choices"; 5 (pi accumulated) is the dimension memory
        assert f"choice {i}" in text or f"choices {i}" in text or f", {i})" in text, i
    assert "choice 5" in next(d.why for d in cal.space() if d.name == "memory")
    assert set(cal.PAPER) >= {"beta", "iterations", "combinations", "stated p:k"}


def test_every_sample_is_an_n_player_diners_dilemma_for_groups_of_3_and_4():
    """Property check over many points: LHS designs of several seeds, uniform random points and
    every corner of the cube (the ranges' ends)."""
    d = len(cal.space())
    rng = np.random.default_rng(14)
    pts = [calib.unit_design(s, 400, 400, d) for s in range(5)]
    pts += [rng.random((3000, d)), np.array(list(itertools.product((0.0, 1.0), repeat=d)))]
    for ch in all_choices(np.vstack(pts)):
        dv, dc = ch["v_p"] - ch["v_b"], ch["c_p"] - ch["c_b"]
        for n in (3, 4):
            dm.check_dilemma(ch["c_b"], ch["v_b"], ch["c_p"], ch["v_p"], n)
            assert dv - dc / n > 0.01 * dc and dc - dv > 0.04 * dc  # strictly, with the ranges' margins
            for x in range(n):  # defecting pays whatever the x others order; all-defect is worse than all-cooperate
                others = x * ch["c_p"] + (n - 1 - x) * ch["c_b"]
                assert ch["v_p"] - (others + ch["c_p"]) / n > ch["v_b"] - (others + ch["c_b"]) / n
            assert ch["v_p"] - ch["c_p"] < ch["v_b"] - ch["c_b"]
        assert 0 <= ch["memory"] <= 1 and ch["unstated_p"] > 0 and ch["unstated_k"] > 0
        for _, _, cond in paper_conditions(1.0, ch):
            cond.validate()


def test_the_menu_level_cancels_as_the_docs_say():
    """Shifting v_b (and v_p) adds the same constant to every utility: the same strategy counts."""
    ch = cal.choices_of({"extra_price": 6.0, "value_ratio": 0.6, "unstated_k": 1.5, "unstated_pk": 2.0, "memory": 0.5})
    shifted = {**ch, "v_b": ch["v_b"] + 3.0, "v_p": ch["v_p"] + 3.0}
    a = figures.rule_experiment(20, 3, 10, 1.0, ch)
    b = figures.rule_experiment(20, 3, 10, 1.0, shifted)
    pd.testing.assert_frame_equal(a, b)


# --- the design --------------------------------------------------------------------------------
def test_the_design_is_reproducible_by_seed_and_recorded(tmp_path):
    a = cal.prepare(tmp_path / "a", samples=8, seed=3, replicates=2)
    b = cal.prepare(tmp_path / "b", samples=8, seed=3, replicates=2)
    c = cal.prepare(tmp_path / "c", samples=8, seed=4, replicates=2)
    assert a["unit"] == b["unit"] and a["values"] == b["values"] and a["design_id"] == b["design_id"]
    assert a["unit"] != c["unit"] and a["design_id"] != c["design_id"]
    u = np.asarray(a["unit"])
    for j in range(u.shape[1]):  # one Latin hypercube: one point per stratum in every column
        assert sorted(np.floor(u[:, j] * 8).astype(int)) == list(range(8))
    design = json.loads((tmp_path / "a" / "design.json").read_text())
    assert design["identity"]["task"] == "diners" and design["identity"]["experiment"]["beta"] == 1.0
    assert [r["name"] for r in design["space"]] == [d.name for d in cal.space()] and design["fixed"] == cal.FIXED


# --- one sample = figures diners ---------------------------------------------------------------
def test_an_evaluated_sample_equals_figures_diners_with_its_choices(tmp_path, capsys):
    out = tmp_path / "cal"
    s = run(["--out", str(out), "--samples", "2", "--replicates", "4", "--seed", "5", "-q"], capsys)
    assert s["finished"] == 2 and s["complete"] and set(s["claims"]) == set(cal.CLAIMS)
    assert s["labels"] == {"9a": "9(a)", "9b": "9(b)", "9c": "9(c)", "10a": "10(a)", "10b": "10(b)", "10c": "10(c)"}
    row = calib.read_rows(out)[1]
    assert row["choices"] == cal.choices_of(row["params"])
    sets = [x for k, v in row["choices"].items() for x in ("--set", f"{k}={v!r}")]
    assert (
        main(["figures", "diners", "--out", str(tmp_path / "fig"), "--replicates", "4", "--seed", "5", *sets, "--json"])
        == 0
    )
    fig = {c["id"]: c for c in json.loads(capsys.readouterr().out)["claims"]}
    for k, (comb, pk) in cal.LEADERS.items():
        c = fig[f"c{comb}-{pk}-leader"]
        assert row["holds"][k] == c["holds"] and row["evidence"][k] == c["evidence"]
        assert row["effect"][k] == pytest.approx(c["effect"], abs=0)
        assert (row["effect"][k] > 0) <= row["holds"][k]  # a positive effect is a claim that holds (0: a tie)
    for k in cal.OTHERS:
        assert row["others"][k] == fig[k]["holds"] and row["others_evidence"][k] == fig[k]["evidence"]
    # the sample's choices were used: ours give other shares
    assert (
        main(["figures", "diners", "--out", str(tmp_path / "fig0"), "--replicates", "4", "--seed", "5", "--json"]) == 0
    )
    default = {c["id"]: c for c in json.loads(capsys.readouterr().out)["claims"]}
    assert [default[f"c{c}-{pk}-leader"]["evidence"] for c, pk in cal.LEADERS.values()] != [
        row["evidence"][k] for k in cal.CLAIMS
    ]
    df = pd.read_csv(out / "samples.csv")
    assert list(df["sample"]) == [0, 1] and {f"holds_{k}" for k in cal.CLAIMS} <= set(df.columns)
    assert {"others_held", *cal.OTHER_COLUMNS} <= set(df.columns)
    for f in ("claims_map.csv", "sensitivity.csv", "report.md", "figures/sensitivity.png", "figures/claim_9a_map.png"):
        assert (out / f).exists(), f
    assert "9(a)" in (out / "report.md").read_text() and "The other claims" in (out / "report.md").read_text()
    tp = s["run"]["throughput"]
    assert tp["samples_x_replicates_x_rounds"] == 2 * 4 * 10 and tp["samples_x_replicates_x_rounds_per_second"] > 0


def test_the_leader_effect_is_the_leaders_share_minus_the_largest_other():
    counts = figures.rule_experiment(6, 1)
    st = figures.final_table(counts).set_index(["combination", "pk"])
    for c in figures.check_claims(counts):
        if c["id"].endswith("-leader"):
            comb, pk = int(c["id"][1]), c["id"][3:-7]
            who = figures.PAPER_LEADERS[(comb, pk)][1]
            row = st.loc[(comb, pk)]
            assert c["effect"] == pytest.approx(row[who] - max(row[n] for n in dm.STRATEGIES if n != who), abs=1e-12)
            assert c["holds"] == (c["effect"] > 0) or c["effect"] == 0


# --- resume and extension ----------------------------------------------------------------------
def test_rerun_skips_finished_samples_extends_and_refuses_another_design(tmp_path, capsys):
    out = tmp_path / "cal"
    s2 = run(["--out", str(out), "--samples", "2", "--replicates", "2", "-q"], capsys)
    assert s2["run"]["samples_evaluated"] == 2 and s2["block"] == 2
    first = pd.read_csv(out / "samples.csv")
    again = run(["--out", str(out), "--samples", "2", "--replicates", "2", "-q"], capsys)
    assert again["run"]["samples_evaluated"] == 0 and again["run"]["samples_skipped"] == 2
    s4 = run(["--out", str(out), "--samples", "4", "--replicates", "2", "--batch", "1", "-q"], capsys)
    assert s4["run"]["samples_evaluated"] == 2 and s4["finished"] == 4 and s4["block"] == 2
    assert calib.starts(out) == {0: 1, 1: 1, 2: 1, 3: 1}
    pd.testing.assert_frame_equal(pd.read_csv(out / "samples.csv").iloc[:2].reset_index(drop=True), first)
    design = json.loads((out / "design.json").read_text())
    assert np.array_equal(np.asarray(design["unit"]), calib.unit_design(0, 4, 2, len(cal.space())))
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    for args, what in (
        (["--seed", "1"], "seed 0 -> 1"),
        (["--replicates", "3"], "replicates 2 -> 3"),
        (["--samples", "3"], "at least that"),
    ):
        opts = {"--samples": "4", "--replicates": "2", **dict(zip(args[::2], args[1::2], strict=False))}
        line = fail_line(
            capsys, ["calibrate", "diners", "--out", str(out), *[x for kv in opts.items() for x in kv], "-q"]
        )
        assert what in line, line
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_a_torn_last_line_is_ignored_and_repaired(tmp_path, capsys):
    out = tmp_path / "cal"
    run(["--out", str(out), "--samples", "2", "--replicates", "2", "-q"], capsys)
    path = out / calib.SAMPLES
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + lines[1][: len(lines[1]) // 2])
    assert sorted(calib.read_rows(out)) == [0]
    s = run(["--out", str(out), "--samples", "2", "--replicates", "2", "-q"], capsys)
    assert s["run"]["samples_evaluated"] == 1 and s["finished"] == 2
    assert all(json.loads(x) for x in path.read_text().splitlines())


def test_kill_minus_9_then_rerun_gives_the_uninterrupted_table(tmp_path, capsys):
    args = ["calibrate", "diners", "--samples", "6", "--replicates", "2", "--batch", "1", "--seed", "2", "-q"]
    ref = tmp_path / "ref"
    assert main([*args, "--out", str(ref)]) == 0
    capsys.readouterr()
    out = tmp_path / "killed"
    done, after = kill_after_first_sample_then_rerun(EXE, args, out, capsys)
    assert 1 <= len(done) < 6, len(done)
    for i, row in done.items():  # finished samples were kept, not computed again
        assert after[i] == row
    assert all(calib.starts(out)[i] == 1 for i in done)
    pd.testing.assert_frame_equal(stable(pd.read_csv(out / "samples.csv")), stable(pd.read_csv(ref / "samples.csv")))


def test_a_batch_job_runs_from_its_json_alone_in_another_process(tmp_path):
    out = tmp_path / "cal"
    record = cal.prepare(out, samples=2, seed=0, replicates=2)
    (j,) = cal.jobs(out, record, [1], batch=4, jobs_on=sweeps)
    code = (
        "import json, sys; from cooplab.runs.sweeps import execute_job; "
        "print(json.dumps(execute_job(json.load(sys.stdin))))"
    )
    res = subprocess.run([sys.executable, "-c", code], input=json.dumps(j), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1])["kind"] == "ran" and sorted(calib.read_rows(out)) == [1]


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
        (["--replicates", "0"], "--replicates"),
        (["--replicates", "1"], "--replicates"),
        (["--replicates", "100001"], "--replicates"),
        (["--parallel", "0"], "--parallel"),
        (["--parallel", "65"], "--parallel"),
        (["--batch", "0"], "--batch"),
        (["--seed", "-1"], "--seed"),
        (["--executor", "dask"], "--executor"),
        (["--address", "auto"], "--address"),
        (["--set", "c_p=16"], "--set"),
    ],
)
def test_hostile_options_are_one_line_errors(tmp_path, capsys, args, needle):
    line = fail_line(capsys, ["calibrate", "diners", "--out", str(tmp_path / "cal"), *args])
    assert needle in line, line
    assert not (tmp_path / "cal").exists()


def test_an_out_that_is_a_file_or_a_foreign_directory_is_refused(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("precious")
    assert "is a file" in fail_line(
        capsys, ["calibrate", "diners", "--out", str(f), "--samples", "1", "--replicates", "2"]
    )
    assert f.read_text() == "precious"
    d = tmp_path / "run"
    d.mkdir()
    (d / "config.json").write_text("{}")
    assert "without design.json" in fail_line(
        capsys, ["calibrate", "diners", "--out", str(d), "--samples", "1", "--replicates", "2"]
    )
    assert sorted(p.name for p in d.iterdir()) == ["config.json"]
    cpr = tmp_path / "cpr-design"  # another task's calibration on the same OUT is another design
    cpr.mkdir()
    (cpr / "design.json").write_text(json.dumps({"identity": {"task": "cpr"}, "samples": 1}))
    assert "different calibration design" in fail_line(
        capsys, ["calibrate", "diners", "--out", str(cpr), "--samples", "1", "--replicates", "2"]
    )


@pytest.mark.parametrize(
    "sets, needle",
    [
        (["c_p=100"], "defecting must pay"),
        (["v_p=40"], "all-defect must be worse"),
        (["memory=2"], "memory"),
        (["nope=1"], "unknown choice"),
        (["c_p=abc"], "not a number"),
        (["c_p=nan"], "c_p"),
        (["unstated_p=-1"], "unstated_p"),
        (["c_p"], "name=value"),
    ],
)
def test_figures_diners_set_refuses_bad_choices_in_one_line(tmp_path, capsys, sets, needle):
    argv = ["figures", "diners", "--out", str(tmp_path / "f"), "--replicates", "2"]
    line = fail_line(capsys, [*argv, *[x for s in sets for x in ("--set", s)]])
    assert needle in line, line


def test_help_and_missing_salib(monkeypatch, capsys, tmp_path):
    assert main(["calibrate", "diners", "--help"]) == 0
    assert "--samples" in capsys.readouterr().out
    from tests.install.test_extras import hide

    hide(monkeypatch, "SALib")
    line = fail_line(
        capsys, ["calibrate", "diners", "--out", str(tmp_path / "c"), "--samples", "1", "--replicates", "2"]
    )
    assert "cooplab[analysis]" in line and "SALib" in line
    assert not (tmp_path / "c").exists()


# --- the score's memory ------------------------------------------------------------------------
def test_memory_one_and_zero_are_accumulate_true_and_false_exactly():
    for flag, number in ((True, 1.0), (False, 0.0)):
        a = run_diners(
            [Condition(dm.COMBINATIONS[2], 6.0, 1.0, True, 1.0, accumulate=flag)],
            30,
            7,
            10,
            checkpointer=InMemorySaver(),
        )
        b = run_diners(
            [Condition(dm.COMBINATIONS[2], 6.0, 1.0, True, 1.0, accumulate=number)],
            30,
            7,
            10,
            checkpointer=InMemorySaver(),
        )
        for key in ("strategy", "score", "utility"):
            got_a, got_b = a.get(key), b.get(key)
            assert got_a is not None and got_b is not None, key
            assert np.array_equal(got_a, got_b), key


def test_memory_in_between_discounts_the_past():
    f = run_diners(
        [Condition(dm.COMBINATIONS[1], 3.0, 1.0, True, 1.0, accumulate=0.5)], 3, 0, 3, checkpointer=InMemorySaver()
    )
    assert "history" in f
    h = f["history"]
    expect = 0.5 * (0.5 * h[0]["utility"] + h[1]["utility"]) + h[2]["utility"]
    np.testing.assert_allclose(h[2]["score"], expect)
    with pytest.raises(dm.DinersError, match="memory"):
        Condition(accumulate=1.5).validate()


def test_docs_list_the_space_as_the_code_has_it():
    text = (ROOT / "docs" / "diners.md").read_text()
    assert "## Where the paper's leaders hold (calibration)" in text
    for d in cal.space():
        assert f"| `{d.name}` | [{d.low:.3g}, {d.high:.3g}] | {'log' if d.log else 'linear'} |" in text, d.name
