"""Bad input never reaches a traceback (issue 9, parts 4 and 5): every numeric option of every
command, every sweep-config field and every config.json field read by 'cooplab resume' fed
non-finite, negative, huge and wrong-typed values; bad scripted-model files, caches and damaged
run directories; the safety net for unexpected errors inside a run.

Each bad value must give exit code 2 and exactly one line on stderr, ``cooplab: error: ...``,
before any work is done (these tests are fast: validation fails before a run starts)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cooplab.cli import figures_app, main
from cooplab.cli.diners import register
from cooplab.limits import MAX_SEED

register(figures_app)

SCRIPT = json.dumps({"answers": ['{"effort": 0.2}', '{"punish": null}', '{"vote": 1}'], "select": "prompt_hash"})

# values no numeric option accepts (as typed on a command line)
CLI_BAD = ["nan", "NaN", "inf", "-inf", "-1", "1" + "0" * 30, "abc", "true", "[]", "1e400", ""]


def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, needle=None):
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("cooplab: error: "), err
    assert "Traceback" not in err
    if needle is not None:
        assert needle in lines[0], lines[0]


def digest(d: Path) -> dict[str, str]:
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*")) if p.is_file()
    }


# --- every numeric CLI option ---------------------------------------------------------------------
LLM_OPTS = ["--temperature", "--max-tokens", "--max-concurrency", "--rps", "--budget", "--price-in", "--price-out"]
CASES = (
    [(["run", "cpr"], o) for o in ("--n-agents", "--rounds", "--replicates", "--seed")]
    + [(["run", "cpr", "--agents", "llm"], o) for o in LLM_OPTS + ["--n-agents", "--rounds", "--replicates", "--seed"]]
    + [(["run", "diners"], o) for o in ("--combination", "--iterations", "--replicates", "--seed", "--beta")]
    + [(["run", "diners", "--agents", "llm"], o) for o in LLM_OPTS]
    + [(["figures", "cpr-abm"], o) for o in ("--replicates", "--seed")]
    + [(["figures", "diners"], o) for o in ("--replicates", "--seed", "--iterations", "--beta")]
)


@pytest.mark.parametrize("cmd,opt", CASES, ids=[f"{' '.join(c)} {o}" for c, o in CASES])
def test_every_numeric_option_refuses_bad_values_in_one_line(tmp_path, capsys, cmd, opt):
    f = tmp_path / "s.json"
    f.write_text(SCRIPT)
    extra = ["--model", f"scripted:{f}", "--cache", "off"] if "llm" in cmd else []
    for bad in CLI_BAD:
        if opt in ("--replicates",) and cmd[0] == "figures" and bad == "":
            continue
        code, _, err = run([*cmd, *extra, opt, bad, "--out", str(tmp_path / "out")], capsys)
        assert_one_line_error(code, err, opt)
        assert not (tmp_path / "out").exists(), (opt, bad)  # refused before any work


@pytest.mark.parametrize("seed", ["-1", "99999999999999999999999", str(MAX_SEED + 1)])
def test_seed_outside_the_rng_range(tmp_path, capsys, seed):
    code, _, err = run(["run", "cpr", "--seed", seed, "--out", str(tmp_path / "o"), "-q"], capsys)
    assert_one_line_error(code, err, f"--seed must be an integer in 0..{MAX_SEED}, got {seed}")


def test_the_largest_seed_runs(tmp_path, capsys):
    code, out, err = run(
        [
            "run",
            "cpr",
            "--seed",
            str(MAX_SEED),
            "--replicates",
            "2",
            "--rounds",
            "3",
            "--out",
            str(tmp_path / "o"),
            "-q",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err and json.loads(out)["seed"] == MAX_SEED


def test_the_message_names_the_option_the_rule_the_value_and_the_fix(tmp_path, capsys):
    code, _, err = run(["run", "cpr", "--agents", "llm", "--budget", "nan", "--out", str(tmp_path / "o")], capsys)
    assert_one_line_error(code, err)
    assert (
        err.strip()
        == "cooplab: error: --budget must be a finite number in [0, 1000000] (USD; omit it for no cap), got nan"
    )


@pytest.mark.parametrize(
    "args,needle",
    [
        (["run", "cpr", "--replicates", "100000", "--n-agents", "1000"], "--replicates x --n-agents must be at most"),
        (["run", "cpr", "--replicates", "100000", "--rounds", "1000"], "--replicates x --rounds must be at most"),
        (["run", "cpr", "--set", "N=1000000000"], "N"),
        (["run", "cpr", "--set", "T=1000000000000"], "T"),
        (["run", "diners", "--replicates", "100000", "--iterations", "1000"], "--replicates x diners^2 x --iterations"),
        (["run", "diners", "--groups", ",".join(["M"] * 2000)], "at most"),
        (["run", "diners", "--pk", "nan:1"], "--pk"),
        (["run", "diners", "--pk", "3:inf"], "--pk"),
        (["figures", "cpr-abm", "--replicates", "100000"], "--replicates"),
    ],
)
def test_sizes_that_would_exhaust_memory_are_refused(tmp_path, capsys, args, needle):
    code, _, err = run(args + ["--out", str(tmp_path / "o")], capsys)
    assert_one_line_error(code, err, needle)


@pytest.mark.parametrize("value", ["nan", "NaN", "Infinity", "-Infinity", "inf", "1e300", "true", "abc", "[1,2]", "{}"])
@pytest.mark.parametrize(
    "name", ["K", "R0", "r", "c", "beta", "gamma", "delta", "N", "T", "punish_off_round", "learn_prob"]
)
def test_set_parameters_refuse_non_finite_huge_and_wrong_typed_values(tmp_path, capsys, name, value):
    code, _, err = run(["run", "cpr", "--set", f"{name}={value}", "--out", str(tmp_path / "o"), "-q"], capsys)
    assert_one_line_error(code, err, name)


@pytest.mark.parametrize("value", ["1", "nan", "abc"])
@pytest.mark.parametrize("name", ["punishment", "social_learning", "group_decision"])
def test_switch_parameters_take_only_booleans(tmp_path, capsys, name, value):
    code, _, err = run(["run", "cpr", "--set", f"{name}={value}", "--out", str(tmp_path / "o"), "-q"], capsys)
    assert_one_line_error(code, err, name)


@pytest.mark.parametrize("value", ["-1", "nan", "99999", "abc"])
def test_traces_view_port(tmp_path, capsys, value):
    (tmp_path / "traces.jsonl").write_text("")
    code, _, err = run(["traces", "view", str(tmp_path), "--port", value, "--no-block"], capsys)
    assert_one_line_error(code, err, "port")


# --- agent numbers (part 5) -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "cmd,n", [(["run", "cpr", "--agents", "llm", "--n-agents", "2"], 2), (["run", "diners", "--agents", "llm"], 8)]
)
@pytest.mark.parametrize("agent", ["99", "-1", "x"])
def test_agent_model_outside_the_society(tmp_path, capsys, cmd, n, agent):
    f = tmp_path / "s.json"
    f.write_text(SCRIPT)
    code, _, err = run(
        [
            *cmd,
            "--model",
            f"scripted:{f}",
            "--agent-model",
            f"{agent}=scripted:{f}",
            "--cache",
            "off",
            "--out",
            str(tmp_path / "o"),
        ],
        capsys,
    )
    assert_one_line_error(code, err, "--agent-model")
    if agent == "99":
        assert f"0..{n - 1}" in err


# --- sweep configs --------------------------------------------------------------------------------
JSON_BAD = [float("nan"), float("inf"), float("-inf"), -1, 10**30, "abc", True, [], {}]
SWEEP_FIELDS = (
    ["trials", "n_agents", "rounds", "seed", "parallel"]
    + [f"llm.{k}" for k in ("temperature", "max_tokens", "max_concurrency", "rps", "budget", "price_in", "price_out")]
    + ["set.K", "set.N", "set.beta"]
)


def sweep_config(tmp_path: Path, field: str | None = None, value=None) -> Path:
    f = tmp_path / "s.json"
    f.write_text(SCRIPT)
    cfg = {
        "out": str(tmp_path / "sweep"),
        "agents": "llm",
        "models": [f"scripted:{f}"],
        "trials": 1,
        "n_agents": 2,
        "rounds": 1,
        "llm": {"cache": "off"},
        "set": {},
    }
    if field is not None:
        if "." in field:
            a, b = field.split(".")
            cfg[a][b] = value
        else:
            cfg[field] = value
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(cfg))  # nan/inf written as NaN/Infinity, as Python's json reads them
    return path


@pytest.mark.parametrize("field", SWEEP_FIELDS)
def test_every_sweep_config_field_refuses_bad_values_in_one_line(tmp_path, capsys, field):
    for bad in JSON_BAD:
        code, _, err = run(["sweep", str(sweep_config(tmp_path, field, bad))], capsys)
        assert_one_line_error(code, err, field.split(".")[-1])
        assert not (tmp_path / "sweep").exists(), (field, bad)


@pytest.mark.parametrize(
    "patch,needle",
    [
        ({"models": "local"}, "models"),
        ({"models": [3]}, "models"),
        ({"envs": ["wet"]}, "envs"),
        ({"llm": []}, "llm"),
        ({"llm": {"bogus": 1}}, "bogus"),
        ({"llm": {"cache": 3}}, "cache"),
        ({"set": [1]}, "set"),
        ({"set": {"nonsense": 1}}, "nonsense"),
        ({"out": 5}, "out"),
        ({"models": ["scripted:/nonexistent.json"]}, "not found"),
        ({"llm": {"cache": "/proc/x/y"}}, "cache"),
        ({"trials": 100000, "n_agents": 1000}, "trials x n_agents"),
    ],
)
def test_sweep_config_structure(tmp_path, capsys, patch, needle):
    path = sweep_config(tmp_path)
    cfg = json.loads(path.read_text())
    cfg.update(patch)
    path.write_text(json.dumps(cfg))
    code, _, err = run(["sweep", str(path)], capsys)
    assert_one_line_error(code, err, needle)


@pytest.mark.parametrize("text", ["{", "[1, 2]", "null", "\xff\xfe"])
def test_sweep_config_not_json(tmp_path, capsys, text):
    p = tmp_path / "bad.json"
    p.write_bytes(text.encode("latin-1"))
    code, _, err = run(["sweep", str(p)], capsys)
    assert_one_line_error(code, err, "sweep config")


# --- scripted model files and caches --------------------------------------------------------------
@pytest.mark.parametrize(
    "content,needle",
    [
        ("{not json", "not valid JSON"),
        ("{}", "non-empty"),
        ('{"answers": []}', "non-empty"),
        ('{"answers": "abc"}', "'answers' must be a list"),
        ('{"answers": [1]}', "answers[0]"),
        ('{"answers": [{"text": 3}]}', "answers[0].text"),
        ('{"answers": [{"delay": NaN}]}', "delay"),
        ('{"answers": [{"error": 500}]}', "error"),
        ('{"by_phase": {"harvest": "x"}}', "by_phase"),
        ('{"by_phase": []}', "by_phase"),
        ('{"answers": ["a"], "latency": "slow"}', "latency"),
        ('{"answers": ["a"], "latency": Infinity}', "latency"),
        ('{"answers": ["a"], "latency": -1}', "latency"),
        ('{"answers": ["a"], "select": "random"}', "select"),
        ('{"answers": ["a"], "cycle": "yes"}', "cycle"),
        ("3", "JSON object"),
    ],
)
def test_bad_scripted_model_files(tmp_path, capsys, content, needle):
    f = tmp_path / "m.json"
    f.write_text(content)
    for cmd in (["run", "cpr"], ["run", "diners"]):
        code, _, err = run(
            [*cmd, "--agents", "llm", "--model", f"scripted:{f}", "--cache", "off", "--out", str(tmp_path / "o")],
            capsys,
        )
        assert_one_line_error(code, err, needle)
        assert not (tmp_path / "o").exists()


def test_scripted_model_file_not_utf8_or_a_directory(tmp_path, capsys):
    f = tmp_path / "m.json"
    f.write_bytes(b"\xff\xfe\x00garbage")
    assert_one_line_error(
        *run(["run", "cpr", "--agents", "llm", "--model", f"scripted:{f}", "--out", str(tmp_path / "o")], capsys)[::2]
    )
    assert_one_line_error(
        *run(
            ["run", "cpr", "--agents", "llm", "--model", f"scripted:{tmp_path}", "--out", str(tmp_path / "o")], capsys
        )[::2]
    )


def test_bad_caches_are_refused_and_left_unchanged(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(SCRIPT)
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 10)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file")
    # an SQLite file that is not a response cache: a run's checkpoints
    assert run(["run", "cpr", "--replicates", "2", "--rounds", "2", "--out", str(tmp_path / "r"), "-q"], capsys)[0] == 0
    ckpt = tmp_path / "r" / "checkpoints.sqlite"
    before = {p: p.read_bytes() for p in (text, ckpt, blocker)}
    for cache, needle in (
        (tmp_path, "is a directory"),
        ("/proc/x/y", "cannot create"),
        (blocker / "sub" / "c.sqlite", "cannot create"),
        (text, "not an SQLite database"),
        (ckpt, "not a cooplab response cache"),
    ):
        code, _, err = run(
            [
                "run",
                "cpr",
                "--agents",
                "llm",
                "--model",
                f"scripted:{f}",
                "--cache",
                str(cache),
                "--out",
                str(tmp_path / "o"),
            ],
            capsys,
        )
        assert_one_line_error(code, err, needle)
        assert not (tmp_path / "o").exists()
    assert {p: p.read_bytes() for p in before} == before
    assert not (blocker.parent / "blocker-sub").exists() and blocker.is_file()


def test_a_new_cache_in_a_new_directory_is_fine(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(SCRIPT)
    cache = tmp_path / "a" / "b" / "c.sqlite"
    code, _, err = run(
        [
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            f"scripted:{f}",
            "--n-agents",
            "2",
            "--rounds",
            "1",
            "--cache",
            str(cache),
            "--out",
            str(tmp_path / "o"),
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    assert cache.is_file()


# --- resume on damaged run directories ------------------------------------------------------------
@pytest.fixture(scope="module")
def finished_runs(tmp_path_factory):
    """A small rule-based and a small LLM run (module-wide; tests copy them before damaging them)."""
    base = tmp_path_factory.mktemp("runs")
    f = base / "s.json"
    f.write_text(SCRIPT)
    assert main(["run", "cpr", "--replicates", "2", "--rounds", "3", "--out", str(base / "rule"), "-q"]) == 0
    assert (
        main(
            [
                "run",
                "cpr",
                "--agents",
                "llm",
                "--model",
                f"scripted:{f}",
                "--n-agents",
                "2",
                "--rounds",
                "2",
                "--cache",
                "off",
                "--out",
                str(base / "llm"),
                "-q",
            ]
        )
        == 0
    )
    assert main(["run", "diners", "--replicates", "2", "--iterations", "2", "--out", str(base / "diners"), "-q"]) == 0
    return base


def copy_run(finished_runs, name, tmp_path) -> Path:
    d = tmp_path / name
    shutil.copytree(finished_runs / name, d)
    return d


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "header-only":
        path.write_bytes(data[:100])
    elif how == "garbage":
        path.write_bytes(b"\x00garbage" * 300)
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "missing":
        path.unlink()


@pytest.mark.parametrize("name", ["rule", "llm", "diners"])
@pytest.mark.parametrize("how", ["truncated", "header-only", "garbage", "empty", "missing"])
def test_resume_with_damaged_checkpoints(finished_runs, tmp_path, capsys, name, how):
    d = copy_run(finished_runs, name, tmp_path)
    damage(d / "checkpoints.sqlite", how)
    before = digest(d)
    code, _, err = run(["resume", str(d), "-q"], capsys)
    assert_one_line_error(code, err, "checkpoints.sqlite")
    assert digest(d) == before  # nothing in the run directory destroyed or changed


@pytest.mark.parametrize("name", ["rule", "llm", "diners"])
@pytest.mark.parametrize("how", ["truncated", "garbage", "empty", "missing"])
def test_resume_with_damaged_config(finished_runs, tmp_path, capsys, name, how):
    d = copy_run(finished_runs, name, tmp_path)
    damage(d / "config.json", how)
    before = digest(d)
    code, _, err = run(["resume", str(d), "-q"], capsys)
    assert_one_line_error(code, err)
    assert "config.json" in err
    assert digest(d) == before


def test_resume_on_paths_that_are_not_run_directories(tmp_path, capsys):
    code, _, err = run(["resume", str(tmp_path / "nope")], capsys)
    assert_one_line_error(code, err, "does not exist")
    (tmp_path / "file").write_text("x")
    code, _, err = run(["resume", str(tmp_path / "file")], capsys)
    assert_one_line_error(code, err, "not a directory")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "config.json").write_text('{"task": "fishing"}')
    code, _, err = run(["resume", str(tmp_path / "d")], capsys)
    assert_one_line_error(code, err, "no task named 'fishing'")


RESUME_FIELDS = {
    "rule": [
        "seed",
        "params.replicates",
        "params.K",
        "params.N",
        "params.T",
        "params.beta",
        "params.r",
        "params.punishment",
    ],
    "llm": [
        "seed",
        "params.replicates",
        "params.N",
        "llm.temperature",
        "llm.max_tokens",
        "llm.max_concurrency",
        "llm.rps",
        "llm.budget",
        "llm.price_in",
        "llm.price_out",
    ],
    "diners": [
        "seed",
        "params.replicates",
        "params.iterations",
        "params.beta",
        "params.p",
        "params.k",
        "params.meal.c_b",
    ],
}
RESUME_CASES = [(n, f) for n, fs in RESUME_FIELDS.items() for f in fs]


@pytest.mark.parametrize("name,field", RESUME_CASES, ids=[f"{n}-{f}" for n, f in RESUME_CASES])
def test_resume_refuses_a_config_json_edited_to_hold_bad_values(finished_runs, tmp_path, capsys, name, field):
    d = copy_run(finished_runs, name, tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    for bad in JSON_BAD:
        if bad is True and field == "params.punishment":
            continue
        c = json.loads(json.dumps(cfg))
        *path, last = field.split(".")
        where = c
        for key in path:
            where = where[key]
        where[last] = bad
        (d / "config.json").write_text(json.dumps(c))
        before = digest(d)
        code, _, err = run(["resume", str(d), "-q"], capsys)
        assert_one_line_error(code, err, field.split(".")[-1])
        assert digest(d) == before, (field, bad)


@pytest.mark.parametrize(
    "patch,needle",
    [
        ({"agents": "robot"}, "agents"),
        ({"params": []}, "params"),
        ({"llm": None}, "llm"),
        ({"llm": {"model": "scripted:/nonexistent.json"}}, "not found"),
        ({"llm": {"agent_models": {"5": "local"}}}, "0..1"),
        ({"llm": {"models": {"default": "local"}}}, "unknown field 'models'"),
        ({"llm": {"cache": "/proc/x/y"}}, "cache"),
    ],
)
def test_resume_refuses_bad_llm_settings(finished_runs, tmp_path, capsys, patch, needle):
    d = copy_run(finished_runs, "llm", tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    for k, v in patch.items():
        cfg[k] = {**cfg[k], **v} if isinstance(v, dict) and isinstance(cfg.get(k), dict) else v
    (d / "config.json").write_text(json.dumps(cfg))
    before = digest(d)
    code, _, err = run(["resume", str(d), "-q"], capsys)
    assert_one_line_error(code, err, needle)
    assert digest(d) == before


def test_resume_of_a_finished_diners_run_rewrites_the_same_summary(finished_runs, tmp_path, capsys):
    d = copy_run(finished_runs, "diners", tmp_path)
    before = json.loads((d / "summary.json").read_text())
    code, out, err = run(["resume", str(d), "-q", "--json"], capsys)
    assert code == 0, err
    after = json.loads(out)
    assert after["final_shares"] == before["final_shares"] and after["iterations_completed"] == 2


# --- the safety net ---------------------------------------------------------------------------------
def test_an_unexpected_error_in_a_run_leaves_summary_and_error_log_and_resume_continues(tmp_path, capsys, monkeypatch):
    from cooplab.tasks.cpr import society
    from cooplab.tasks.cpr import task as runner

    base = ["run", "cpr", "--env", "rich", "--replicates", "4", "--rounds", "10", "--seed", "2", "-q", "--json"]
    _, ref, _ = run(base + ["--out", str(tmp_path / "ref")], capsys)

    def broken_phases(params):
        phases = society.phases_for(params)
        env = phases["environment"]

        def env_then_bug(state):
            if state["round"] == 4:
                raise ZeroDivisionError("a bug in round 4")
            return env(state)

        phases["environment"] = env_then_bug
        return phases

    monkeypatch.setattr(runner, "phases_for", broken_phases)
    out = tmp_path / "run"
    code, stdout, err = run(base + ["--out", str(out)], capsys)
    lines = err.splitlines()
    assert code == 1 and len(lines) == 1 and "Traceback" not in err
    assert (
        "ZeroDivisionError: a bug in round 4" in lines[0]
        and str(out / "error.log") in lines[0]
        and "cooplab resume" in lines[0]
    )
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "failed" and "a bug in round 4" in s["message"] and s["rounds_completed"] == 3
    log = (out / "error.log").read_text()
    assert "Traceback" in log and "ZeroDivisionError" in log and "env_then_bug" in log
    monkeypatch.setattr(runner, "phases_for", society.phases_for)
    code, resumed, err = run(["resume", str(out), "-q", "--json"], capsys)
    assert code == 0, err
    a, b = json.loads(ref), json.loads(resumed)
    assert a["survival_time"] == b["survival_time"] and b["status"] == "completed"
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "ref" / "rounds.parquet"), pd.read_parquet(out / "rounds.parquet")
    )


def test_an_unexpected_error_in_an_llm_run(tmp_path, capsys, monkeypatch):
    from cooplab.tasks.cpr import llm as la

    f = tmp_path / "s.json"
    f.write_text(SCRIPT)

    async def bug(self, *a, **k):
        raise KeyError("no such agent")

    monkeypatch.setattr(la.LLMVotePolicy, "__call__", bug)
    out = tmp_path / "run"
    code, _, err = run(
        [
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            f"scripted:{f}",
            "--n-agents",
            "2",
            "--rounds",
            "2",
            "--cache",
            "off",
            "--out",
            str(out),
            "-q",
        ],
        capsys,
    )
    assert (
        code == 1 and len(err.splitlines()) == 1 and "KeyError" in err and "error.log" in err and "Traceback" not in err
    )
    assert json.loads((out / "summary.json").read_text())["status"] == "failed"
    assert "no such agent" in (out / "error.log").read_text()


def test_an_unexpected_error_outside_a_run_is_one_line_with_a_saved_traceback(tmp_path, capsys, monkeypatch):
    from cooplab.tasks.cpr import analysis as analysis_cpr

    def boom(*a, **k):
        raise RuntimeError("analysis exploded")

    monkeypatch.setattr(analysis_cpr, "analyze", boom)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    code, _, err = run(["analyze", "cpr", str(tmp_path), "--out", str(tmp_path / "a")], capsys)
    lines = err.splitlines()
    assert (
        code == 1
        and len(lines) == 1
        and lines[0].startswith("cooplab: internal error: RuntimeError: analysis exploded")
    )
    logs = list((tmp_path / "cache" / "cooplab" / "errors").glob("*.log"))
    assert len(logs) == 1 and str(logs[0]) in lines[0] and "Traceback" in logs[0].read_text()


@pytest.mark.parametrize("value", ["5e-324", "1e-6", "0.0009"])
def test_a_vanishing_rps_is_refused_rather_than_sleeping_forever(tmp_path, capsys, value):
    """1/rps of a tiny rate is an interval of days (or inf): the run would hang on its second call."""
    code, _, err = run(["run", "cpr", "--agents", "llm", "--rps", value, "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("cooplab: error: --rps") and "0.001" in err
