"""The science-team graph with scripted teams (the built-in oracle and garbage, and teams scripted
here as Python callables): scorer calibration through the whole graph, routing of requests and
the re-entry cap, the writing team without run_code, bad tool arguments answered as errors, the
step cap, budget visibility and warnings, budget exhaustion mid-tool-loop, resume without paying
twice. The sandbox runs by name on the local backend here (Docker: tests/science/test_science_docker.py)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from langchain_core.messages import SystemMessage, ToolMessage

from cooplab.agents.models import ScriptedChatModel, register_builtin
from cooplab.cli import main
from cooplab.tasks.science import prompts as pr
from cooplab.tasks.science.datasets import TASKS
from cooplab.tasks.science.scripted import _who


def cli(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def run(tmp_path, capsys, *args, out="run", expect=0) -> tuple[Any, Path]:
    """The run's --json summary (JSON: None when the command printed none) and its directory."""
    code, stdout, err = cli(
        [
            "run",
            "science",
            "--sandbox-backend",
            "local",
            "--cache",
            "off",
            *args,
            "--out",
            tmp_path / out,
            "-q",
            "--json",
        ],
        capsys,
    )
    assert code == expect, err
    return (json.loads(stdout) if stdout.strip() else None), tmp_path / out


# --- calibration: the built-in scripted teams through the whole graph ------------------------------------
#: per task, the seed of 0-19 whose oracle result is the longest (measured before the result was
#: printed first and short: anomaly seed 2 had 2,333 characters and lost the whole result);
#: every seed 0-19 goes along the same message path in test_twenty_seeds.py
LONGEST_RESULT_SEED = {"ecology": 4, "anomaly": 2, "biomarker": 16, "geospatial": 10}


@pytest.mark.parametrize("task", TASKS)
def test_oracle_team_scores_1_on_every_task(tmp_path, capsys, task):
    s, out = run(tmp_path, capsys, "--task", task, "--team", "oracle", "--seed", LONGEST_RESULT_SEED[task])
    assert s["status"] == "completed" and s["passes"] == ["data#1", "model#1", "eval#1", "writing#1"]
    sc = s["scores"]
    assert sc == {"completeness": 1.0, "quality": 1.0, "accuracy": 1.0}, sc
    assert all(v == "found" for v in s["facts"].values()), s["facts"]
    # the oracle's numbers came from its code run in the sandbox, charged as sandbox seconds per team
    lg = pd.read_parquet(out / "ledger.parquet")
    assert set(lg[lg.kind == "sandbox_seconds"]["team"]) == {"data", "model", "eval"}
    for name in ("dataset_description", "model_architecture", "evaluation_report", "final_paper"):
        assert (out / "artifacts" / f"{name}.v1.md").exists()
    assert (out / "report.html").stat().st_size > 2000 and (out / "figures" / "budget.png").exists()
    scores = json.loads((out / "scores.json").read_text())
    assert scores["scored"] == "final_paper" and scores["heuristic"]["accuracy"] == sc["accuracy"]


def test_garbage_team_scores_low(tmp_path, capsys):
    s, _ = run(tmp_path, capsys, "--task", "biomarker", "--team", "garbage")
    assert s["status"] == "completed" and max(s["scores"].values()) <= 0.2, s["scores"]


# --- teams scripted as Python callables -------------------------------------------------------------------
def call(tool: str, **args: Any) -> dict:
    return {"tool_calls": [{"name": tool, "args": args}]}


def tool_results(messages, name=None):
    return [m for m in messages if isinstance(m, ToolMessage) and (name is None or m.name == name)]


def scripted_team(work=None, synthesize=None, plan="- everyone: do your part", deliberate="ok") -> ScriptedChatModel:
    """A team whose answers per phase kind come from callables f(team, slot, messages)."""
    from cooplab.tasks.science.roles import ARTIFACT, TEAMS

    def default_work(team, slot, messages):
        return call("mark_complete", summary="done") if not tool_results(messages) else "done"

    def default_synth(team, slot, messages):
        if tool_results(messages, "write_artifact"):
            return call("mark_complete", summary="written")
        return call("write_artifact", name=ARTIFACT[team], content=f"# {team}\n\nThe {team} team's notes.")

    def wrap(f):
        return lambda messages: f(*_who(messages), messages)

    by_phase = {}
    for team in TEAMS:
        by_phase[f"{team}:plan"] = [plan]
        by_phase[f"{team}:work"] = [wrap(work or default_work)]
        for k in range(1, 6):
            by_phase[f"{team}:deliberate{k}"] = [deliberate]
        by_phase[f"{team}:synthesize"] = [wrap(synthesize or default_synth)]
    return ScriptedChatModel(by_phase=by_phase, answers=["ok"])


def use_team(name: str, model_factory) -> str:
    register_builtin(name, lambda arg: model_factory())
    return f"builtin:{name}"


def test_requests_route_back_to_the_earlier_team_within_the_reentry_cap(tmp_path, capsys):
    def work(team, slot, messages):
        done = tool_results(messages)
        if team == "eval" and slot == 0 and not done:
            return call(
                "request_additional_work", target_team="data", request="report the missing-value counts per column"
            )
        if team == "eval" and slot == 1 and not done:
            return call("request_team_redo", target_team="model", request="refit", justification="the split leaked")
        return call("mark_complete", summary="done") if not any(m.name == "mark_complete" for m in done) else "done"

    model = use_team("test-requests", lambda: scripted_team(work=work))
    s, out = run(tmp_path, capsys, "--model", model)
    # eval's first request goes back to data; eval's second (same pass) is refused; eval asks again on
    # its second pass, but data has had its 1 re-entry, and model's request is refused too (one per pass)
    assert s["status"] == "completed"
    assert s["passes"][:4] == ["data#1", "model#1", "eval#1", "data#2"] and s["passes"][4] == "eval#2"
    assert s["passes"][-1] == "writing#1"
    routing = [json.loads(x) for x in (out / "routing.jsonl").read_text().splitlines()]
    first = [r for r in routing if r["visit"] == 1]
    assert [(r["target_team"], r["decision"]) for r in first] == [("data", "accepted"), ("model", "refused")]
    assert all(r["decision"] == "refused" for r in routing if r["visit"] == 2 and r["target_team"] == "data")
    assert "re-entries" in next(r["reason"] for r in routing if r["visit"] == 2 and r["target_team"] == "data")
    reqs = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert len(reqs) == len(routing) and {r["kind"] for r in reqs} == {"additional", "redo"}
    # the data team's second plan saw the request
    loops = pd.read_parquet(out / "tool_loops.parquet")
    assert ((loops.agent_id == "data.0") & (loops.phase == "data:plan")).sum() == 2


def test_requests_to_a_later_team_and_bad_arguments_are_errors_to_the_model(tmp_path, capsys):
    seen: dict[str, str] = {}

    def work(team, slot, messages):
        done = tool_results(messages)
        if team == "data" and slot == 0:
            if not done:
                return call("request_additional_work", target_team="writing", request="write faster")
            if len(done) == 1:
                seen["later"] = str(done[-1].content)
                return call("write_artifact", name="../etc/passwd", content="x")
            if len(done) == 2:
                seen["name"] = str(done[-1].content)
                return call("send_message", to_team="marketing", content="hi")
            if len(done) == 3:
                seen["team"] = str(done[-1].content)
                return call("read_artifact", name="nothing_here")
            seen["missing"] = str(done[-1].content)
            return "finished"
        return call("mark_complete", summary="done") if not done else "done"

    model = use_team("test-badargs", lambda: scripted_team(work=work))
    s, out = run(tmp_path, capsys, "--model", model)
    assert s["status"] == "completed"
    assert "earlier team" in seen["later"] and "artifact name" in seen["name"] and "team must be one of" in seen["team"]
    assert "no artifact named 'nothing_here'" in seen["missing"]
    assert not (out / "requests.jsonl").read_text().strip()


def test_the_writing_team_has_no_run_code(tmp_path, capsys):
    seen: dict[str, Any] = {}

    def work(team, slot, messages):
        done = tool_results(messages)
        if team == "writing" and slot == 0 and not done:
            return call("run_code", code="print(1)")
        if team == "writing" and slot == 0:
            seen["answer"], seen["status"] = str(done[-1].content), done[-1].status
            return "ok"
        return call("mark_complete", summary="done") if not done else "done"

    model = use_team("test-writing-code", lambda: scripted_team(work=work))
    s, out = run(tmp_path, capsys, "--model", model)
    assert s["status"] == "completed" and seen["status"] == "error" and "run_code" in seen["answer"]
    lg = pd.read_parquet(out / "ledger.parquet")
    assert not ((lg.kind == "sandbox_seconds") & (lg.team == "writing")).any()


def test_a_model_that_never_marks_complete_hits_the_step_cap(tmp_path, capsys):
    def work(team, slot, messages):
        n = len(tool_results(messages))
        return call("list_artifacts") if n == 0 else call("read_artifact", name=f"thing{n}")

    model = use_team("test-stepcap", lambda: scripted_team(work=work))
    s, out = run(tmp_path, capsys, "--model", model, "--set", "max_steps=3")
    loops = pd.read_parquet(out / "tool_loops.parquet")
    work_loops = loops[loops.phase.str.endswith(":work")]
    assert (work_loops.stop_reason == "step_cap").all() and (work_loops.steps == 3).all()
    assert s["loop_stops"]["step_cap"] == len(work_loops)


# --- budget ------------------------------------------------------------------------------------------------
def test_visibility_text_and_warnings():
    b, spent, team = Decimal("1.00"), Decimal("0.25"), Decimal("0.10")
    full = pr.budget_status("full", budget=b, spent=spent, team_spent=team, team="model")
    assert "$0.2500 spent of $1.0000" in full and "$0.7500 remaining" in full and "75%" in full
    tm = pr.budget_status("team", budget=b, spent=spent, team_spent=team, team="model")
    assert "Modeling team has spent $0.1000" in tm and "remaining" not in tm and "1.0000" not in tm
    assert pr.budget_status("hidden", budget=b, spent=spent, team_spent=team, team="model") == ""
    assert pr.warning("full", b, Decimal("0.69")) is None
    assert (
        pr.warning("full", b, Decimal("0.70")) == pr.WARNING_30
        and pr.warning("team", b, Decimal("0.80")) == pr.WARNING_30
    )
    assert (
        pr.warning("full", b, Decimal("0.85")) == pr.WARNING_15
        and pr.warning("full", b, Decimal("1.5")) == pr.WARNING_15
    )
    # the paper warns in every condition: hidden hides the numbers, not the warnings (unless turned off)
    assert (
        pr.warning("hidden", b, Decimal("0.9")) == pr.WARNING_15
        and pr.warning("hidden", b, Decimal("0.9"), warn_when_hidden=False) is None
    )
    assert pr.warning("full", None, Decimal("5")) is None


def test_warnings_reach_the_prompt_and_the_budget_is_never_overshot_mid_tool_loop(tmp_path, capsys):
    prompts: list[str] = []

    def work(team, slot, messages):
        prompts.append("\n".join(str(m.content) for m in messages))
        n = len(tool_results(messages))
        return call("read_artifact", name=f"x{n}") if n < 30 else "done"

    model = use_team("test-budget", lambda: scripted_team(work=work))
    budget = 0.05
    # the output cap the budget was chosen for: each call reserves max_tokens x the output price
    s, out = run(tmp_path, capsys, "--model", model, "--budget", budget, "--max-tokens", 64, "--set", "max_steps=30")
    assert s["status"] == "budget_exhausted" and s["ledger"]["cost_usd_float"] <= budget
    assert any(pr.WARNING_30 in p for p in prompts) and any(pr.WARNING_15 in p for p in prompts)
    assert any("BUDGET STATUS:" in p and "remaining" in p for p in prompts)
    # what exists is kept and scored; the stop was inside a work-phase tool loop
    assert s["stop"]["node"] == "work" and json.loads((out / "scores.json").read_text())["status"] == "budget_exhausted"
    assert (out / "report.html").exists()


@pytest.mark.parametrize("status_at", ["end", "paper"])
def test_the_live_budget_lines_come_after_everything_that_does_not_change(tmp_path, capsys, status_at):
    """end (the default): the live status is a second system message, after Appendix C.1's parts,
    which are then the same text in every loop of an agent (a model keeping what it read reuses
    them); paper: C.1's place, between the team members and the budget rules (issue 41, point 5)."""
    from cooplab.tasks.science.roles import ARTIFACT

    systems: dict[str, list[list[str]]] = {}

    def grab(team, slot, messages):
        if team == "data" and slot == 0:
            systems.setdefault("calls", []).append([str(m.content) for m in messages if isinstance(m, SystemMessage)])

    def work(team, slot, messages):
        grab(team, slot, messages)
        return call("mark_complete", summary="done") if not tool_results(messages) else "done"

    def synthesize(team, slot, messages):
        grab(team, slot, messages)
        if tool_results(messages, "write_artifact"):
            return call("mark_complete", summary="written")
        return call("write_artifact", name=ARTIFACT[team], content=f"# {team}")

    model = use_team(f"test-layout-{status_at}", lambda: scripted_team(work=work, synthesize=synthesize))
    run(tmp_path, capsys, "--model", model, "--budget", 5, "--set", f"status_at={status_at}")
    calls = systems["calls"]
    assert len(calls) >= 2
    if status_at == "end":
        assert (
            all(len(c) == 2 for c in calls) and len({c[0] for c in calls}) == 1
        )  # the fixed part: one text for every loop
        assert "BUDGET STATUS" not in calls[0][0] and all(c[1].startswith("BUDGET STATUS: $") for c in calls)
        assert calls[0][1] != calls[-1][1]  # the live line moved on (synthesis came after paid work)
    else:
        assert all(len(c) == 1 for c in calls) and len({c[0] for c in calls}) > 1
        text = calls[0][0]
        assert text.index("TEAM MEMBERS:") < text.index("BUDGET STATUS: $") < text.index("BUDGET RULES:")


def test_hidden_visibility_shows_no_budget(tmp_path, capsys):
    systems: list[str] = []

    def work(team, slot, messages):
        systems.append(next(str(m.content) for m in messages if isinstance(m, SystemMessage)))
        return call("mark_complete", summary="done") if not tool_results(messages) else "done"

    model = use_team("test-hidden", lambda: scripted_team(work=work))
    run(tmp_path, capsys, "--model", model, "--budget", 0.5, "--visibility", "hidden")
    assert systems and not any("BUDGET STATUS" in t or "$" in t for t in systems)  # no numbers
    assert all("BUDGET RULES" in t for t in systems)


def test_hidden_visibility_still_warns_when_the_pool_runs_low(tmp_path, capsys):
    """Appendix C.1's warnings come in every condition: hidden agents are warned as the pool runs
    low although they are never shown an amount."""
    prompts: list[str] = []

    def work(team, slot, messages):
        prompts.append("\n".join(str(m.content) for m in messages))
        n = len(tool_results(messages))
        return call("read_artifact", name=f"x{n}") if n < 30 else "done"

    model = use_team("test-hidden-warn", lambda: scripted_team(work=work))
    s, _ = run(
        tmp_path,
        capsys,
        "--model",
        model,
        "--budget",
        0.05,
        "--max-tokens",
        64,
        "--set",
        "max_steps=30",
        "--visibility",
        "hidden",
    )
    assert s["status"] == "budget_exhausted"
    assert any(pr.WARNING_30 in p for p in prompts) and any(pr.WARNING_15 in p for p in prompts)
    assert not any("BUDGET STATUS" in p for p in prompts)


# --- bad input -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, needle",
    [
        (["--task", "astrology"], "task"),
        (["--team", "robots"], "team"),
        (["--team-size", "4"], "--team-size"),
        (["--visibility", "partial"], "visibility"),
        (["--prompt", "poetry"], "prompt"),
        (["--set", "max_reentries=-1"], "max_reentries"),
        (["--set", "code_timeout=nan"], "code_timeout"),
        (["--set", "max_steps=1e9"], "max_steps"),
        (["--judge-samples", "0"], "--judge-samples"),
        (["--judge", "nonsense"], "unknown model"),
        (["--budget", "-1"], "--budget"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path, capsys, args, needle):
    code, _, err = cli(["run", "science", "--team", "oracle", *args, "--out", tmp_path / "r"], capsys)
    assert code == 2 and err.startswith("cooplab: error: ") and needle in err and len(err.strip().splitlines()) == 1


# --- the LLM judge -------------------------------------------------------------------------------------------
def verdict(c: int, q: int, a: int) -> str:
    secs = {k: True for k in ("abstract", "introduction", "dataset", "methods", "results", "evaluation", "conclusion")}
    return json.dumps(
        {
            "completeness": c,
            "completeness_rationale": "r",
            "sections": secs,
            "quality": q,
            "quality_rationale": "r",
            "accuracy": a,
            "accuracy_rationale": "r",
        }
    )


def test_llm_judge_after_the_run_and_rescoring_and_agreement(tmp_path, capsys):
    judge = tmp_path / "judge.json"
    judge.write_text(json.dumps({"answers": [verdict(5, 5, 5), "not json at all", verdict(5, 3, 1), verdict(5, 4, 3)]}))
    s, out = run(tmp_path, capsys, "--team", "oracle", "--judge", f"scripted:{judge}", "--judge-samples", 3)
    j = s["judge"]
    assert j["judge"] == f"scripted:{judge}" and j["k"] == 3 and j["n_fallback"] == 0
    # three valid samples (one malformed answer was retried): means and spread on [0, 1]
    assert j["completeness"] == 1.0 and 0 <= j["quality"] <= 1 and j["std"]["completeness"] == 0.0
    scores = json.loads((out / "scores.json").read_text())
    assert scores["judges"][0]["judge"] == j["judge"] and scores["judges"][0]["ledger"]["calls"] >= 3
    # the judge's calls are on its own ledger: the team's bill is unchanged by judging
    assert s["ledger"]["calls"] == len(pd.read_parquet(out / "ledger.parquet").query("kind == 'tokens'"))
    # a second run, both scored by a second judge; agreement over the two runs
    s2, out2 = run(tmp_path, capsys, "--team", "garbage", out="run2")
    judge_b = tmp_path / "judge_b.json"
    judge_b.write_text(json.dumps({"answers": [verdict(4, 4, 4)]}))
    code, stdout, err = cli(
        ["science", "score", out, out2, "--judge", f"scripted:{judge_b}", "--samples", 2, "--json"], capsys
    )
    assert code == 0, err
    rows = json.loads(stdout)
    assert [r["completeness"] for r in rows] == [0.75, 0.75]
    code, stdout, err = cli(
        ["science", "agreement", out, out2, "--judge", "heuristic", "--judge", f"scripted:{judge_b}", "--json"], capsys
    )
    assert code == 0, err
    agr = json.loads(stdout)
    assert (
        agr["accuracy"]["n"] == 2 and agr["accuracy"]["pearson_r"] is None and "constant" in agr["accuracy"]["reason"]
    )
    code, _, err = cli(["science", "score", tmp_path / "nowhere", "--judge", f"scripted:{judge_b}"], capsys)
    assert code == 2 and "not a finished science run" in err


# --- sweep ---------------------------------------------------------------------------------------------------
def test_science_sweep_runs_conditions_and_skips_finished_runs(tmp_path, capsys):
    cfg = {
        "task": "science",
        "out": str(tmp_path / "sw"),
        "team": "oracle",
        "science_tasks": ["ecology"],
        "budgets": [0.5, None],
        "visibilities": ["full", "team"],
        "team_sizes": [2],
        "prompts": ["standard"],
        "simulations": 1,
        "sandbox_backend": "local",
        "parallel": 2,
        "llm": {"cache": "off"},
    }
    f = tmp_path / "sweep.json"
    f.write_text(json.dumps(cfg))
    code, stdout, err = cli(["sweep", f, "--json"], capsys)
    assert code == 0, err
    res = json.loads(stdout)
    assert res["cells"] == 4 and len(res["ran"]) == 4 and not res["failed"]
    df = pd.read_csv(tmp_path / "sw" / "conditions.csv")
    assert len(df) == 4 and (df.accuracy == 1.0).all() and set(df.visibility) == {"full", "team"}
    assert "earlier science sweep format" in err  # read as a grid sweep
    cfg0 = json.loads(
        (
            tmp_path
            / "sw"
            / "cells"
            / "task-ecology__budget-0.5__visibility-team__team_size-2__prompt-standard__s0"
            / "config.json"
        ).read_text()
    )
    assert cfg0["llm"]["budget"] == 0.5 and cfg0["params"]["visibility"] == "team"
    code, stdout, err = cli(["sweep", f, "--json"], capsys)
    assert code == 0 and len(json.loads(stdout)["skipped"]) == 4


@pytest.mark.parametrize(
    "edit, needle",
    [
        ({"budgets": [-1]}, "budgets"),
        ({"visibilities": ["loud"]}, "visibility"),
        ({"team_sizes": [7]}, "team_size"),
        ({"simulations": 0}, "simulations"),
        ({"science_tasks": []}, "science_tasks"),
        ({"set": {"max_steps": "many"}}, "max_steps"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_science_sweep_configs_are_one_line_errors(tmp_path, capsys, edit, needle):
    cfg = {"task": "science", "out": str(tmp_path / "sw"), "team": "oracle", **edit}
    f = tmp_path / "sweep.json"
    f.write_text(json.dumps(cfg))
    code, _, err = cli(["sweep", f], capsys)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "sw").exists()


def test_params_name_their_source(capsys):
    code, stdout, _ = cli(["params", "science", "--json"], capsys)
    rows = {r["name"]: r for r in json.loads(stdout)}
    assert (
        code == 0
        and rows["visibility"]["source"].startswith("paper")
        and "does not say" in rows["max_reentries"]["source"]
    )
    assert rows["deliberation_rounds"]["default"] == 2 and rows["code_timeout"]["default"] == 30.0
