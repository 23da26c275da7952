"""The built-in scripted teams that calibrate the scorers: ``--team oracle`` and ``--team garbage``.

They are models, not shortcuts: ``builtin:science-oracle:TASK`` and ``builtin:science-garbage:TASK``
are scripted chat models that go through the same graph, tools, sandbox, ledger and traces as an
LLM team. Their answers are computed from the conversation (which agent is asking, in which
phase, what the tools returned):

- **oracle**: each code team's lead runs the task's reference analysis
  (:data:`cooplab.tasks.science.oracle.ORACLE_CODE`) with ``run_code`` in its sandbox session and
  puts the recovered results into its team's artifact; the writing team's lead reads the
  evaluation report and writes the seven-section paper from those results
  (:func:`~cooplab.tasks.science.oracle.oracle_report`). The oracle never reads the ground truth.
- **garbage**: every agent marks its work complete at once; the artifacts are placeholders and
  the paper is :func:`~cooplab.tasks.science.oracle.garbage_report`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage

from cooplab.agents.models.scripted import BUILTIN_MODELS, ScriptedChatModel, register_builtin
from cooplab.tasks.science import oracle as orc
from cooplab.tasks.science.roles import (
    ARTIFACT,
    CODE_TEAMS,
    SOLO,
    SOLO_TEAM,
    TEAMS,
    all_roles,
)

RESULT_RE = re.compile(r"ORACLE_RESULT (\{.*\})")
PHASES = ("plan", "work", "deliberate1", "deliberate2", "deliberate3", "deliberate4", "deliberate5", "synthesize")


def _who(messages: list[BaseMessage]) -> tuple[str, int]:
    """(team, slot) of the asking agent, from its system prompt's first line."""
    first = next((str(m.content) for m in messages if isinstance(m, SystemMessage)), "")
    if first.startswith(f"You are {SOLO.name},"):
        return SOLO_TEAM, 0
    m = re.match(r"You are (.+?), a member of the", first)
    name = m.group(1) if m else ""
    for size in (3, 2):
        for r in all_roles(size):
            if r.name == name:
                return r.team, r.slot
    return "data", 0


def _tool_results(messages: list[BaseMessage], name: str) -> list[str]:
    return [str(m.content) for m in messages if isinstance(m, ToolMessage) and m.name == name and m.status != "error"]


def _recovered(text: str) -> dict[str, Any] | None:
    """Every whole ``ORACLE_RESULT`` object in ``text`` merged in order (a later one wins a key), or
    None. A line cut short (a tool output or a member's output is cut to its first characters) is
    skipped, so a program that prints its findings on several short lines keeps those before the cut."""
    out: dict[str, Any] | None = None
    for raw in RESULT_RE.findall(text):
        try:
            found = json.loads(raw)
        except ValueError:
            continue
        if isinstance(found, dict):
            out = {**(out or {}), **found}
    return out


def _call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "args": args}]}


def _plan(team: str) -> str:
    return "\n".join(
        [
            f"- {team}.0: run the reference analysis and report its numbers",
            f"- {team}.1: review the upstream artifacts",
            f"- {team}.2: review the upstream artifacts",
        ]
    )


def solo_analyze(code: str | None, report: Any) -> Any:
    """The ``solo:analyze`` step of a scripted team: run ``code`` (if any), write the final paper
    ``report(recovered result)``, mark complete."""

    def analyze(messages: list[BaseMessage]) -> Any:
        runs = _tool_results(messages, "run_code")
        if code is not None and not runs:
            return _call("run_code", code=code, description="the reference analysis")
        if _tool_results(messages, "write_artifact"):
            return _call("mark_complete", summary="final paper written")
        rec = (_recovered(runs[-1]) if runs else None) or {}
        return _call("write_artifact", name=ARTIFACT[SOLO_TEAM], content=report(rec), description="the final paper")

    return analyze


def oracle_model(task: str) -> ScriptedChatModel:
    orc.check_args(task, 0)

    def work(messages: list[BaseMessage]) -> Any:
        team, slot = _who(messages)
        if slot == 0 and team in CODE_TEAMS:
            runs = _tool_results(messages, "run_code")
            if not runs:
                return _call("run_code", code=orc.ORACLE_CODE[task], description="the reference analysis")
            rec = _recovered(runs[-1])
            return _call(
                "mark_complete",
                summary="reference analysis done" + (f": ORACLE_RESULT {json.dumps(rec)}" if rec else ""),
            )
        if slot == 0:  # the writing lead reads what the paper will be written from
            if not _tool_results(messages, "read_artifact"):
                return _call("read_artifact", name="evaluation_report")
            return _call("mark_complete", summary="read the evaluation report")
        if not _tool_results(messages, "list_artifacts"):
            return _call("list_artifacts")
        return _call("mark_complete", summary="reviewed the artifacts")

    def synthesize(messages: list[BaseMessage]) -> Any:
        team, _ = _who(messages)
        name = ARTIFACT[team]
        if _tool_results(messages, "write_artifact"):
            return _call("mark_complete", summary=f"{name} written")
        if team == "writing":
            reads = _tool_results(messages, "read_artifact")
            if not reads:
                return _call("read_artifact", name="evaluation_report")
            rec = _recovered(reads[-1]) or {}
            return _call(
                "write_artifact",
                name=name,
                content=orc.oracle_report(task, rec, {"facts": []}),
                description="the final paper",
            )
        prompt = "\n".join(str(m.content) for m in messages)
        rec = _recovered(prompt)
        body = f"# {name}\n\nThe {team} team ran the reference analysis of the {task} data.\n\n" + (
            f"Recovered results:\n\nORACLE_RESULT {json.dumps(rec)}\n" if rec else "The analysis returned no result.\n"
        )
        return _call("write_artifact", name=name, content=body, description=f"the {team} team's artifact")

    by_phase: dict[str, list[Any]] = {}
    for team in TEAMS:
        by_phase[f"{team}:plan"] = [_plan(team)]
        by_phase[f"{team}:work"] = [work]
        for k in range(1, 6):
            by_phase[f"{team}:deliberate{k}"] = [
                f"The {team} team's reference analysis is done; its numbers are in the artifact."
            ]
        by_phase[f"{team}:synthesize"] = [synthesize]
    by_phase[f"{SOLO_TEAM}:analyze"] = [
        solo_analyze(orc.ORACLE_CODE[task], lambda rec: orc.oracle_report(task, rec, {"facts": []}))
    ]
    return ScriptedChatModel(by_phase=by_phase, answers=["done"])


def garbage_model(task: str) -> ScriptedChatModel:
    orc.check_args(task, 0)

    def synthesize(messages: list[BaseMessage]) -> Any:
        team, _ = _who(messages)
        if _tool_results(messages, "write_artifact"):
            return _call("mark_complete", summary="done")
        content = orc.garbage_report(task) if team == "writing" else "We looked at the data. TBD."
        return _call("write_artifact", name=ARTIFACT[team], content=content)

    by_phase: dict[str, list[Any]] = {}
    for team in TEAMS:
        by_phase[f"{team}:plan"] = ["- everyone: look at the data"]
        by_phase[f"{team}:work"] = [_call("mark_complete", summary="done")]
        for k in range(1, 6):
            by_phase[f"{team}:deliberate{k}"] = ["ok"]
        by_phase[f"{team}:synthesize"] = [synthesize]
    by_phase[f"{SOLO_TEAM}:analyze"] = [solo_analyze(None, lambda rec: orc.garbage_report(task))]
    return ScriptedChatModel(by_phase=by_phase, answers=["ok"])


register_builtin("science-oracle", oracle_model)
register_builtin("science-garbage", garbage_model)


# --- your own data: the describing team ---------------------------------------------------------------
#: one ORACLE_RESULT line per table: a team's cut copy of the output keeps the tables before the cut
DESCRIBE_CODE = """import json as _j
_fr = df if isinstance(df, dict) else {"data": df}
for _k, _d in _fr.items():
    _num = _d.select_dtypes("number")
    _one = {"rows": int(_d.shape[0]), "columns": int(_d.shape[1]), "missing": int(_d.isna().sum().sum()),
            "means": {str(c): round(float(_num[c].mean()), 4) for c in list(_num.columns)[:8] if _num[c].notna().any()}}
    print("ORACLE_RESULT " + _j.dumps({str(_k): _one}))
"""


def describe_report(rec: dict[str, Any]) -> str:
    """The describing team's seven-section paper: only what its code computed (shapes, missing
    values, column means), in sentences the scorer's fact matching reads."""
    facts = []
    for stem, r in rec.items():
        facts.append(
            f"In the {stem} table, the number of rows is {r['rows']} and the number of columns is {r['columns']}. "
            f"The number of missing values is {r['missing']}."
        )
        facts += [f"The mean of {c} is {m}." for c, m in r.get("means", {}).items()]
    results = "\n".join(f"- {f}" for f in facts) or "- The analysis returned no result."
    n = len(rec)
    return f"""# A descriptive analysis of the given data

## Abstract

We describe the {n} given table(s) with a short descriptive analysis run in the sandbox. The report states the size of every table, its missing values and the means of its first numeric columns.

## Introduction

The task asked the teams to analyze data they had not seen before. This report is the describing team's baseline: it computes summary statistics only and draws no causal or predictive conclusions.

## Dataset Description

The data team loaded every table and counted rows, columns and missing values. The tables and their sizes are listed in the results section below, with the numbers the code printed.

## Methods

The data team ran one Python script with pandas: the shape of each table, the count of missing cells, and the arithmetic mean of up to eight numeric columns per table. No model was fitted and no test was run.

## Results

{results}

## Evaluation

The numbers above were computed once from the full tables in the sandbox, so they carry no sampling error of the analysis itself. They were not checked against an independent source, and a mean over a column with missing values uses the observed cells only.

## Conclusion

The given data were read completely and described by their size, missingness and column means. A deeper analysis (models, tests, uncertainty) is left to an LLM team; this baseline only shows what the tables contain.
"""  # noqa: E501 (text kept verbatim)


def describe_model(_arg: str) -> ScriptedChatModel:
    def work(messages: list[BaseMessage]) -> Any:
        team, slot = _who(messages)
        if slot == 0 and team == "data":
            runs = _tool_results(messages, "run_code")
            if not runs:
                return _call("run_code", code=DESCRIBE_CODE, description="describe the tables")
            rec = _recovered(runs[-1])
            return _call(
                "mark_complete", summary="description done" + (f": ORACLE_RESULT {json.dumps(rec)}" if rec else "")
            )
        if not _tool_results(messages, "list_artifacts"):
            return _call("list_artifacts")
        return _call("mark_complete", summary="reviewed the artifacts")

    def synthesize(messages: list[BaseMessage]) -> Any:
        team, _ = _who(messages)
        name = ARTIFACT[team]
        if _tool_results(messages, "write_artifact"):
            return _call("mark_complete", summary=f"{name} written")
        if team != "data":
            reads = _tool_results(messages, "read_artifact")
            if not reads:
                return _call("read_artifact", name="dataset_description")
            rec = _recovered(reads[-1]) or {}
            if team == "writing":
                return _call("write_artifact", name=name, content=describe_report(rec), description="the final paper")
        else:
            rec = _recovered("\n".join(str(m.content) for m in messages)) or {}
        body = f"# {name}\n\nThe {team} team's record of the description of the tables.\n\n" + (
            f"Recovered results:\n\nORACLE_RESULT {json.dumps(rec)}\n"
            if rec
            else "The description returned no result.\n"
        )
        return _call("write_artifact", name=name, content=body, description=f"the {team} team's artifact")

    by_phase: dict[str, list[Any]] = {}
    for team in TEAMS:
        by_phase[f"{team}:plan"] = [
            f"- {team}.0: describe the tables\n- {team}.1: review the artifacts\n- {team}.2: review the artifacts"
        ]
        by_phase[f"{team}:work"] = [work]
        for k in range(1, 6):
            by_phase[f"{team}:deliberate{k}"] = [
                f"The {team} team's description is done; its numbers are in the artifact."
            ]
        by_phase[f"{team}:synthesize"] = [synthesize]
    by_phase[f"{SOLO_TEAM}:analyze"] = [solo_analyze(DESCRIBE_CODE, describe_report)]
    return ScriptedChatModel(by_phase=by_phase, answers=["done"])


register_builtin("science-describe", describe_model)


# --- the scripted answers team (cooplab bench science --answers)
# -----------------------------------------------------------------------
def answers_model(path: str):
    """``builtin:science-answers:PATH``: PATH holds the answer text of one item."""
    answer = Path(path).read_text(encoding="utf-8")

    def synthesize(messages: list[Any]) -> Any:
        team, _ = _who(messages)
        if _tool_results(messages, "write_artifact"):
            return _call("mark_complete", summary="done")
        content = (
            f"# Answer\n\nThe scripted answers team states the given answer.\n\n{answer}\n"
            if team == "writing"
            else f"# {ARTIFACT[team]}\n\nThe scripted answers team did no analysis.\n"
        )
        return _call("write_artifact", name=ARTIFACT[team], content=content, description=f"the {team} team's artifact")

    by_phase: dict[str, list[Any]] = {}
    for team in TEAMS:
        by_phase[f"{team}:plan"] = ["- everyone: state the given answer"]
        by_phase[f"{team}:work"] = [_call("mark_complete", summary="done")]
        for k in range(1, 6):
            by_phase[f"{team}:deliberate{k}"] = ["ok"]
        by_phase[f"{team}:synthesize"] = [synthesize]
    by_phase["solo:analyze"] = [
        solo_analyze(
            None, lambda _rec: f"# Answer\n\nThe scripted answers analyst states the given answer.\n\n{answer}\n"
        )
    ]
    return ScriptedChatModel(by_phase=by_phase, answers=["ok"])


if "science-answers" not in BUILTIN_MODELS:
    register_builtin("science-answers", answers_model)
