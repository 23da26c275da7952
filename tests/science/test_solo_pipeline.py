"""The solo pipeline (``--pipeline solo``; ``cooplab bench science --team-size 1``): one analyst with
the code tool does the whole project in one node and writes the final paper. The scripted oracle
proves it is scored like a team's paper; scripted analysts (Python callables) show the fallback
paper, the budget stop inside its tool loop, and that it never sees team-only tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from langchain_core.messages import SystemMessage, ToolMessage

from cooplab.agents.models import ScriptedChatModel, register_builtin
from cooplab.cli import main
from cooplab.tasks.science.params import ScienceParams
from tests.helpers.cli import fail_line


def run(tmp_path, capsys, *args, out="run", expect=0) -> tuple[Any, Path]:
    """The run's --json summary (JSON: None when the command printed none) and its directory."""
    code = main(
        [
            str(a)
            for a in [
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
            ]
        ]
    )
    o, err = capsys.readouterr()
    assert code == expect, err
    return (json.loads(o) if o.strip() else None), tmp_path / out


def call(tool: str, **args: Any) -> dict:
    return {"tool_calls": [{"name": tool, "args": args}]}


def analyst(name: str, step) -> str:
    register_builtin(name, lambda arg: ScriptedChatModel(by_phase={"solo:analyze": [step]}, answers=["ok"]))
    return f"builtin:{name}"


def test_oracle_solo_analyst_is_scored_like_a_team(tmp_path, capsys):
    s, out = run(tmp_path, capsys, "--task", "ecology", "--team", "oracle", "--pipeline", "solo")
    assert s["status"] == "completed" and s["pipeline"] == "solo" and s["team_size"] == 1
    assert s["passes"] == ["solo#1"] and s["artifacts"] == {"final_paper": 1}
    assert s["scores"]["accuracy"] >= 0.9 and s["scores"]["completeness"] >= 0.9, s["scores"]
    lg = pd.read_parquet(out / "ledger.parquet")
    assert (
        set(lg["agent_id"]) == {"solo.0"} and (lg.kind == "sandbox_seconds").any()
    )  # its code ran in the sandbox, charged
    loops = pd.read_parquet(out / "tool_loops.parquet")
    assert list(loops["phase"]) == ["solo:analyze"] and list(loops["stop_reason"]) == ["completed"]
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["params"]["pipeline"] == "solo" and cfg["params"]["team_size"] == 1


def test_solo_analyst_sees_only_its_tools_and_its_own_prompt(tmp_path, capsys):
    seen: dict[str, Any] = {}

    def step(messages):
        if "system" not in seen:
            seen["system"] = next(str(m.content) for m in messages if isinstance(m, SystemMessage))
        if not any(isinstance(m, ToolMessage) for m in messages):
            return call("request_team_redo", target_team="data", request="x", justification="y")
        if "refused" not in seen:
            seen["refused"] = str([m for m in messages if isinstance(m, ToolMessage)][-1].content)
            return call("write_artifact", name="final_paper", content="# Report\n\nThe mean is @mean[3.5].")
        return call("mark_complete", summary="done")

    s, out = run(
        tmp_path, capsys, "--task", "anomaly", "--pipeline", "solo", "--model", analyst("test-solo-tools", step)
    )
    assert s["status"] == "completed" and s["artifacts"] == {"final_paper": 1}
    assert seen["system"].startswith("You are Solo Analyst, working alone") and "run_code" in seen["system"]
    assert "request_team_redo" not in seen["system"] and "TEAM MEMBERS" not in seen["system"]
    assert "request_team_redo" in seen["refused"] and (
        "not" in seen["refused"].lower() or "unknown" in seen["refused"].lower()
    )
    assert (out / "artifacts" / "final_paper.v1.md").read_text() == "# Report\n\nThe mean is @mean[3.5]."


def test_no_paper_written_becomes_a_fallback_paper_from_its_work(tmp_path, capsys):
    def step(messages):
        if not any(isinstance(m, ToolMessage) for m in messages):
            return call("run_code", code="print('the answer is', 6 * 7)")
        return "I computed it: the answer is 42. " * 10  # final words, no write_artifact

    s, out = run(
        tmp_path, capsys, "--task", "ecology", "--pipeline", "solo", "--model", analyst("test-solo-fallback", step)
    )
    assert s["status"] == "completed" and s["artifacts"] == {"final_paper": 1}
    paper = (out / "artifacts" / "final_paper.v1.md").read_text()
    assert "the answer is 42" in paper
    tl = pd.read_parquet(out / "timeline.parquet")
    assert tl["artifact_fallback"].iloc[0] == "the analyst's final answer"


def test_budget_stops_the_solo_loop_without_overshoot(tmp_path, capsys):
    def step(messages):
        n = sum(isinstance(m, ToolMessage) for m in messages)
        return call("run_code", code=f"print({n})")  # never finishes by itself

    budget = 0.02
    s, out = run(
        tmp_path,
        capsys,
        "--task",
        "ecology",
        "--pipeline",
        "solo",
        "--budget",
        budget,
        "--set",
        "max_steps=60",
        "--model",
        analyst("test-solo-budget", step),
    )
    assert s["status"] == "budget_exhausted", s["ledger"]
    assert s["ledger"]["cost_usd_float"] <= budget
    assert s["stop"]["node"] == "analyze"


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--pipeline", "solo", "--team-size", "2"], "team_size must be 1"),
        (["--pipeline", "duo"], "pipeline"),
        (["--pipeline", "solo", "--set", "pipeline=solo"], "not both"),
    ],
)
def test_bad_pipeline_options_are_one_line(tmp_path, capsys, args, needle):
    msg = fail_line(capsys, ["run", "science", "--team", "oracle", *args, "--out", str(tmp_path / "x")])
    assert needle in msg
    assert not (tmp_path / "x").exists()


def test_params_solo_forces_one_agent():
    assert ScienceParams(pipeline="solo").team_size == 1
    assert ScienceParams(**ScienceParams(pipeline="solo").model_dump()).team_size == 1
    with pytest.raises(ValueError, match="team_size must be 1"):
        ScienceParams(pipeline="solo", team_size=3)
    from cooplab.tasks.science.task import TASK

    cfg = TASK.default_config(pipeline="solo")
    assert TASK.n_agents(cfg) == 1 and TASK.total_rounds(cfg) == 1
    g = TASK.build(cfg)
    assert set(g.get_graph().nodes) == {"__start__", "analyze", "route", "__end__"}


@pytest.mark.parametrize(("kw", "coders"), [({"pipeline": "solo"}, 1), ({"team_size": 2}, 6), ({"team_size": 3}, 9)])
def test_a_run_starts_sandboxes_ahead_for_its_coding_agents_and_none_beyond(monkeypatch, tmp_path, kw, coders):
    """The writing team has no code tool: its agents never take a sandbox, so none is started for them."""
    from cooplab.runs import runner
    from cooplab.sandbox import pool as pool_mod
    from cooplab.tasks.science.task import TASK

    cfg = TASK.default_config(**kw)
    assert TASK.sandbox_agents(cfg) == coders
    made: list[dict[str, Any]] = []
    monkeypatch.setattr(pool_mod, "AgentSandboxPool", lambda config, **k: made.append(k) or k)
    (tmp_path / "dataset").mkdir()
    (tmp_path / "dataset" / "data.csv").write_text("x\n1\n")
    run_cfg: Any = cfg  # the pool reads only the params and the (absent) sandbox settings of a run's config
    runner.sandbox_pool(TASK, run_cfg, tmp_path)
    assert made[0]["expected"] == coders and made[0]["warm"] == min(runner.WARM_SANDBOXES, coders)
