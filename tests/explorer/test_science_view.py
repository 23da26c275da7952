"""The science run's page in the run explorer (``cooplab view``; tasks/science/explore.py).

Unit tests read hand-made, partial and damaged run directories: every part shows what is there
and a note for what is not, never an exception. The integration test makes a real science run (a
scripted team with hostile text, the Docker sandbox), serves the explorer and reads the page in
headless Chromium: the timeline, a code call's code, output and figure, each fact's score and
evidence; the hostile text stays text."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html import unescape as html_unescape
from pathlib import Path

import pandas as pd
import pytest

from cooplab.graphs import explore as ex
from cooplab.tasks.science import explore as sx
from tests.explorer.test_explorer import assert_inert, image_stats
from tests.helpers.chromium import browse

PNG_1x1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005fe02fe0dd1b0e80000000049454e44ae426082"
)


# --- helpers -------------------------------------------------------------------------------------------
def walk(blocks):
    """Every block, nested ones included."""
    for b in blocks:
        yield b
        if isinstance(b, ex.Details):
            yield from walk(b.blocks)
        if isinstance(b, ex.Columns):
            for col in b.columns:
                yield from walk(col)


def all_blocks(secs):
    return [b for s in secs for b in walk(s.blocks)]


def texts(secs, kind=None):
    out = []
    for b in all_blocks(secs):
        if kind is not None and not isinstance(b, kind):
            continue
        for attr in ("text", "summary"):
            if isinstance(getattr(b, attr, None), str):
                out.append(getattr(b, attr))
    return "\n".join(out)


def loop(agent="data.0", team="data", visit=1, node="work", calls=()):
    return {
        "agent": agent,
        "team": team,
        "round": 1,
        "phase": f"{team}:{node}",
        "model": "m",
        "protocol": "native",
        "stop_reason": "completed",
        "stop_detail": "",
        "final": "",
        "steps": len(calls) + 1,
        "n_tool_calls": len(calls),
        "tool_calls": json.dumps(
            [
                {
                    "step": i + 1,
                    "id": c,
                    "name": "run_code",
                    "args": json.dumps({"code": f"print({i})"}),
                    "status": "success",
                    "seconds": 0.1,
                }
                for i, c in enumerate(calls)
            ]
        ),
        "malformed": 0,
        "input_tokens": 1,
        "output_tokens": 1,
        "cost": "0.001",
        "cached_calls": 0,
        "visit": visit,
        "node": node,
    }


def record(call_id="c1", **kw):
    rec = {
        "agent": "data.0",
        "team": "data",
        "visit": 1,
        "round": 1,
        "phase": "data:work",
        "call_id": call_id,
        "status": "ok",
        "seconds": 0.5,
        "description": "look",
        "code": "print('hi')",
        "stdout": "hi\n",
        "stderr": "",
        "result": None,
        "error": None,
        "traceback": None,
        "cut": [],
        "figures": [],
        "figures_dropped": 0,
    }
    rec.update(kw)
    return rec


def write_calls(out: Path, *recs, extra_lines=()):
    with open(out / sx.SANDBOX_CALLS, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
        for line in extra_lines:
            f.write(line + "\n")


# --- the data layer on partial and damaged run directories ------------------------------------------------
def test_an_empty_directory_shows_a_note_for_every_missing_part(tmp_path):
    secs = sx.sections(tmp_path, {})
    assert [s.id for s in secs] == [
        "science-overview",
        "science-facts",
        "science-timeline",
        "science-calls",
        "science-artifacts",
        "science-budget",
    ]
    notes = texts(secs, ex.Note)
    for name in (
        "config.json is missing",
        "summary.json is missing",
        "scores.json is missing",
        "timeline.parquet is missing",
        "tool_loops.parquet is missing",
        "ledger.parquet is missing",
        "artifacts/ is missing",
    ):
        assert name in notes, notes
    assert "no code was run" in notes and "no ledger" in notes


def test_damaged_files_are_named_and_the_rest_is_shown(tmp_path):
    (tmp_path / "config.json").write_text("[1, 2]")
    (tmp_path / "summary.json").write_text('{"status": "completed", "scores": {"accuracy": NaN}')  # cut short
    (tmp_path / "scores.json").write_text(
        json.dumps(
            {
                "heuristic": {
                    "facts": [
                        {
                            "id": "n_species",
                            "kind": "number",
                            "status": "found",
                            "score": 1.0,
                            "evidence": "five species",
                        },
                        {
                            "id": "shift_time",
                            "kind": "number",
                            "status": "contradicted",
                            "score": 0.0,
                            "evidence": "a shift at t = 60",
                        },
                        "not a fact",
                        {"id": "rmse", "score": "NaN", "status": "missing", "evidence": ""},
                    ]
                }
            }
        )
    )
    (tmp_path / "tool_loops.parquet").write_bytes(b"PAR1 this is not parquet")
    (tmp_path / "ledger.csv").write_text("team,cost,kind\ndata,0.5,tokens\nmodel,oops,tokens\n")
    write_calls(tmp_path, record("c1"), extra_lines=["{not json", "[1]", ""])
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "final_paper.v1.md").write_bytes(b"# Results\nfive species \xff\xfe\n")
    (tmp_path / "artifacts" / "notes.txt").write_text("ignored: not an artifact version")

    run = sx.load_run(tmp_path)
    notes = "\n".join(run.notes)
    assert "config.json holds list" in notes
    assert "summary.json cannot be read" in notes
    assert "tool_loops table cannot be read" in notes
    assert "2 line(s) are not JSON objects" in notes
    assert len(run.calls) == 1 and [a["name"] for a in run.artifacts] == ["final_paper"]

    secs = sx.sections(tmp_path, {})
    shown = texts(secs)
    assert "1 of 3 facts found in full; not found or wrong: shift_time, rmse" in shown
    assert "shift_time · number · contradicted · score 0.00 · WRONG" in shown
    assert "Evidence (heuristic scorer): a shift at t = 60" in shown
    assert "rmse · ? · missing · score n/a · NOT STATED" in shown  # a NaN score is n/a
    assert "five species \ufffd" in shown  # undecodable bytes replaced, the paper still shown
    assert "1 ledger row(s) have no readable cost" in shown
    plot = next(b for b in all_blocks(secs) if isinstance(b, ex.Plot))
    assert plot.series["data"] == [0.5, 0.5] and plot.series["all teams"] == [0.5, 0.5]


def test_figure_paths_outside_sandbox_figures_are_never_shown(tmp_path):
    (tmp_path / sx.SANDBOX_FIGURES).mkdir()
    (tmp_path / sx.SANDBOX_FIGURES / "ok-1.png").write_bytes(PNG_1x1)
    (tmp_path / "secret.png").write_bytes(PNG_1x1)
    write_calls(
        tmp_path,
        record(
            figures=[
                "sandbox_figures/ok-1.png",
                "../secret.png",
                "secret.png",
                "/etc/passwd",
                "sandbox_figures/missing.png",
                7,
            ]
        ),
        record("c2", figures="sandbox_figures/ok-1.png"),
    )  # not a list: no figure
    secs = sx.sections(tmp_path, {})
    images = [b for b in all_blocks(secs) if isinstance(b, ex.Image)]
    assert [i.path for i in images] == ["sandbox_figures/ok-1.png"]
    notes = texts(secs, ex.Note)
    for bad in ("../secret.png", "secret.png", "/etc/passwd", "sandbox_figures/missing.png", "7 is not"):
        assert f"{bad}" in notes


def test_records_left_by_an_earlier_run_are_not_shown(tmp_path):
    pd.DataFrame([loop(calls=["c2"])]).to_parquet(tmp_path / "tool_loops.parquet")
    write_calls(
        tmp_path,
        record("c1", stdout="old run\n"),
        record("c2", stdout="first try\n"),
        record("c2", stdout="rerun after resume\n"),
    )
    run = sx.load_run(tmp_path)
    assert [(c["call_id"], c["stdout"]) for c in run.calls] == [("c2", "rerun after resume\n")]
    assert any("1 record(s) of sandbox_calls.jsonl match no tool call of this run's tool loops" in n for n in run.notes)


def test_a_run_without_recorded_calls_shows_their_code_with_a_note(tmp_path):
    pd.DataFrame([loop(calls=["c1", "c2"])]).to_parquet(tmp_path / "tool_loops.parquet")
    secs = sx.sections(tmp_path, {})
    codes = [b.text for b in all_blocks(secs) if isinstance(b, ex.Code) and b.title == "code"]
    assert codes == ["print(0)", "print(1)"]
    assert "not their output or figures" in texts(secs, ex.Note)


def test_long_output_is_cut_on_the_page_with_a_note(tmp_path):
    long = "x" * (sx.SHOW_CHARS + 123)
    write_calls(
        tmp_path,
        record(stdout=long, stderr="warning: <b>\n", error="ValueError: </pre>", traceback="tb", cut=["stdout"]),
    )
    secs = sx.sections(tmp_path, {})
    details = next(b for b in all_blocks(secs) if isinstance(b, ex.Details) and b.summary.startswith("data#1"))
    assert details.open
    boxes = {b.title: b.text for b in walk(details.blocks) if isinstance(b, ex.Code)}
    assert (
        len(boxes["stdout"]) == sx.SHOW_CHARS
        and boxes["stderr"] == "warning: <b>\n"
        and boxes["error"] == "ValueError: </pre>\ntb"
    )
    notes = texts([ex.Section("", details.blocks)], ex.Note)
    assert "stdout: 123 more characters not shown" in notes
    assert f"stdout: longer than {sx.MAX_RECORD_CHARS} characters; only the first were recorded" in notes


def test_a_page_shows_at_most_100_calls_and_30_figures_and_links_to_the_rest(tmp_path):
    n = sx.MAX_CALLS_SHOWN + 5
    (tmp_path / sx.SANDBOX_FIGURES).mkdir()
    recs = []
    for i in range(n):
        (tmp_path / sx.SANDBOX_FIGURES / f"f{i}.png").write_bytes(PNG_1x1)
        recs.append(record(f"c{i}", figures=[f"sandbox_figures/f{i}.png"]))
    write_calls(tmp_path, *recs)
    blocks = all_blocks(sx.sections(tmp_path, {}))
    assert len([b for b in blocks if isinstance(b, ex.Details) and "· call " in b.summary]) == sx.MAX_CALLS_SHOWN
    assert len([b for b in blocks if isinstance(b, ex.Image)]) == sx.MAX_FIGURES_SHOWN
    more = [b for b in blocks if isinstance(b, ex.Link) and "open this call alone" in b.text]
    assert [m.params for m in more[:2]] == [
        {"call": f"c{sx.MAX_FIGURES_SHOWN}"},
        {"call": f"c{sx.MAX_FIGURES_SHOWN + 1}"},
    ]
    assert f"{n} code calls: the first {sx.MAX_CALLS_SHOWN} are shown" in texts([ex.Section("", blocks)], ex.Note)
    alone = all_blocks(sx.sections(tmp_path, {"call": f"c{n - 1}"}))
    assert [b.summary.split(" · ")[2] for b in alone if isinstance(b, ex.Details) and "· call " in b.summary] == [
        f"call c{n - 1}"
    ]
    assert [b.path for b in alone if isinstance(b, ex.Image)] == [f"sandbox_figures/f{n - 1}.png"]


def test_a_long_program_shows_its_start_and_all_of_it_in_a_closed_box(tmp_path):
    code = "\n".join(f"x{i} = {i}" for i in range(100))
    write_calls(tmp_path, record(code=code))
    call = next(
        b for b in all_blocks(sx.sections(tmp_path, {})) if isinstance(b, ex.Details) and "· call " in b.summary
    )
    preview, whole = call.blocks[1], call.blocks[2]
    assert isinstance(preview, ex.Code) and isinstance(whole, ex.Details)
    assert isinstance(whole.blocks[0], ex.Code)
    assert preview.title == f"code (the first {sx.PREVIEW_LINES} of 100 lines)"
    assert preview.text.splitlines() == code.splitlines()[: sx.PREVIEW_LINES]
    assert whole.summary == "all 100 lines of the code" and not whole.open and whole.blocks[0].text == code


def test_hostile_query_values_are_ignored(tmp_path):
    write_calls(tmp_path, record("c1"), record("c2", team="model", agent="model.0"))
    for q in ({"team": "<script>"}, {"call": "x" * 500}, {"team": ["data"]}):
        secs = sx.sections(tmp_path, q)
        assert len([b for b in all_blocks(secs) if isinstance(b, ex.Details) and "· call " in b.summary]) == 2
    secs = sx.sections(tmp_path, {"team": "model"})
    assert [
        b.summary.split(" · ")[0] for b in all_blocks(secs) if isinstance(b, ex.Details) and "· call " in b.summary
    ] == ["model#1"]


def test_a_call_record_caps_its_text_and_keeps_only_png_figures(tmp_path):
    from cooplab.sandbox.models import ErrorInfo, ExecResult

    res = ExecResult(
        status="error",
        stdout="o" * (sx.MAX_RECORD_CHARS + 5),
        stderr="e",
        error=ErrorInfo(type="ValueError", message="bad", traceback="Traceback ..."),
        figures=[PNG_1x1, b"<svg onload=alert(1)>", b"GIF89a"],
    )
    rec = sx.call_record(
        res, "print(1)", "why", agent="data.0", team="data", visit=1, round=1, phase="data:work", call_id="../../x"
    )
    assert rec["cut"] == ["stdout"] and len(rec["stdout"]) == sx.MAX_RECORD_CHARS and rec["error"] == "ValueError: bad"
    part = sx._safe_part("../../x")  # a hostile call id: no path separator, no leading dot
    assert "/" not in part and not part.startswith(".")
    paths, dropped = sx.save_figures(tmp_path, f"data-1-data.0-{part}", res.figures)
    assert dropped == 2 and paths == [f"sandbox_figures/data-1-data.0-{part}-1.png"]
    assert (tmp_path / paths[0]).read_bytes() == PNG_1x1
    assert [p.name for p in (tmp_path / sx.SANDBOX_FIGURES).iterdir()] == [f"data-1-data.0-{part}-1.png"]


def test_the_recorder_keeps_the_agents_code_its_pass_and_figures(tmp_path):
    """record_sandbox_call with the objects a team node hands a tool: the agent's caller in the
    config, the node's workspace current (its pass), the run directory in the context."""
    from types import SimpleNamespace

    from cooplab.agents.tools import CALLER_KEY, ToolCaller
    from cooplab.graphs.context import CoopContext
    from cooplab.sandbox.models import ExecResult
    from cooplab.tasks.science.workspace import CURRENT, Workspace

    caller = ToolCaller("model.1", CoopContext(run_dir=str(tmp_path)), team="model", round=3, phase="model:work")
    runtime = SimpleNamespace(
        config={"configurable": {CALLER_KEY: caller}}, context=caller.context, tool_call_id="call/7"
    )
    token = CURRENT.set(Workspace(artifacts={}, team="model", visit=2))
    try:
        res = ExecResult(status="ok", stdout="fit done\n", figures=[PNG_1x1, b"not a png"])
        sx.record_sandbox_call(res, "SETUP = 1\nfit()", "fit the model", runtime, prefix="SETUP = 1\n")
    finally:
        CURRENT.reset(token)
    (rec,) = [json.loads(line) for line in (tmp_path / sx.SANDBOX_CALLS).read_text().splitlines()]
    assert (rec["agent"], rec["team"], rec["visit"], rec["round"], rec["call_id"]) == (
        "model.1",
        "model",
        2,
        3,
        "call/7",
    )
    assert rec["code"] == "fit()" and rec["stdout"] == "fit done\n" and rec["figures_dropped"] == 1
    assert rec["figures"] == ["sandbox_figures/model-2-model.1-call_7-1.png"]
    assert (tmp_path / rec["figures"][0]).read_bytes() == PNG_1x1
    # without a run directory nothing is written and nothing fails
    bare = ToolCaller("model.1", CoopContext(), team="model")
    sx.record_sandbox_call(res, "x", "", SimpleNamespace(config={"configurable": {CALLER_KEY: bare}}, tool_call_id="c"))


def test_passes_in_order_with_a_redo_and_the_cost_of_each(tmp_path):
    rows = [
        ("data", 1, "plan", "0.1"),
        ("data", 1, "synthesize", "0.3"),
        ("model", 1, "synthesize", "0.5"),
        ("data", 2, "synthesize", "0.9"),
        ("model", 2, "synthesize", "bad"),
    ]
    pd.DataFrame(
        [{"team": t, "visit": v, "node": n, "seconds": 1.0, "spent_usd": s} for t, v, n, s in rows]
    ).to_parquet(tmp_path / "timeline.parquet")
    pd.DataFrame([loop(agent="data.1", visit=2, calls=["c9"])]).to_parquet(tmp_path / "tool_loops.parquet")
    write_calls(tmp_path, record("c9", agent="data.1", visit=2))
    with open(tmp_path / "routing.jsonl", "w") as f:
        f.write(
            json.dumps(
                {
                    "from_team": "model",
                    "agent": "model.0",
                    "target_team": "data",
                    "kind": "redo",
                    "request": "<b>clean</b> again",
                    "visit": 1,
                    "decision": "accepted",
                    "reason": "re-entry 1 of 1",
                }
            )
            + "\n"
        )
    (tmp_path / "messages.jsonl").write_text(
        json.dumps({"from_team": "data", "agent": "data.1", "to_team": "model", "content": "see sp3", "visit": 2})
        + "\n"
    )
    blocks = all_blocks(sx.sections(tmp_path, {}))
    tables = {b.title.split(" (")[0].split(",")[0]: b.rows for b in blocks if isinstance(b, ex.Table) and b.title}
    assert tables["requests to earlier teams"] == [
        {
            "from": "model#1",
            "agent": "model.0 (ML Engineer)",
            "to team": "data",
            "kind": "redo",
            "request": "<b>clean</b> again",
            "decision": "accepted",
            "why": "re-entry 1 of 1",
        }
    ]
    assert tables["messages between teams"] == [
        {"from": "data#2", "agent": "data.1 (Data Analyst)", "to team": "model", "message": "see sp3"}
    ]
    table = next(b for b in blocks if isinstance(b, ex.Table) and (b.title or "").startswith("passes"))
    got = [(r["pass"], r["steps"], r["cost (USD)"], r["code calls"], r["agents"]) for r in table.rows]
    assert got == [
        ("data#1", "plan > synthesize", "0.3000", 0, ""),
        ("model#1", "synthesize", "0.2000", 0, ""),
        ("data#2", "synthesize", "0.4000", 1, "data.1 (Data Analyst)"),
        ("model#2", "synthesize", "n/a", 0, ""),
    ]


def _cooplab(*args, timeout=600):
    exe = str(Path(sys.executable).parent / "cooplab")
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def _shown_calls(out: Path) -> list[tuple[str, str]]:
    return sorted((c["agent"], c["status"]) for c in sx.load_run(out).calls)


@pytest.mark.integration
def test_a_killed_and_resumed_run_shows_each_code_call_once(tmp_path):
    """Killed (SIGKILL) once the model team's code call is recorded, then resumed: the interrupted
    node runs again and records its call again, the page shows each of the three calls once."""
    from tests.helpers.progress import kill_when

    exe = str(Path(sys.executable).parent / "cooplab")
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            exe,
            "run",
            "science",
            "--task",
            "anomaly",
            "--team",
            "oracle",
            "--sandbox-backend",
            "local",
            "--cache",
            str(tmp_path / "c.sqlite"),
            "--out",
            str(out),
            "-q",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    calls = out / sx.SANDBOX_CALLS
    assert kill_when(proc, lambda: calls.is_file() and len(calls.read_text().splitlines()) >= 2, timeout=300), (
        "the run ended first"
    )
    res = _cooplab("resume", out, "-q")
    assert res.returncode == 0, res.stderr
    assert len(calls.read_text().splitlines()) >= 3
    assert _shown_calls(out) == [("data.0", "ok"), ("eval.0", "ok"), ("model.0", "ok")]


@pytest.mark.integration
def test_a_forced_run_over_an_old_one_does_not_show_the_old_calls(tmp_path):
    out = tmp_path / "run"
    for team in ("oracle", "garbage"):  # the garbage team runs no code
        res = _cooplab(
            "run",
            "science",
            "--task",
            "anomaly",
            "--team",
            team,
            "--sandbox-backend",
            "local",
            "--cache",
            "off",
            "--out",
            out,
            "-q",
            "--force",
        )
        assert res.returncode == 0, res.stderr
    assert len((out / sx.SANDBOX_CALLS).read_text().splitlines()) == 3  # the oracle's, still in the file
    run = sx.load_run(out)
    assert run.calls == [] and any("3 record(s) of sandbox_calls.jsonl match no tool call" in n for n in run.notes)


# --- a real science run in the explorer, in headless Chromium ------------------------------------------------
HOSTILE_CODE = """import matplotlib.pyplot as plt
print("</pre><script>document.title='pwned-code'</script>")
print("columns:", df.shape[1])
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [3, 1, 2])
ax.set_title("a plot the data team made")
plt.show()
"""
PAPER = """# Abstract
We analysed the population time series of five species. <script>document.title='pwned-report'</script>

# Results
The dataset contains 5 species (sp1 to sp5).
A regime shift occurs at t = 60, where the mean abundance drops.
</pre></div><img src=x onerror="document.title='pwned-img'">

# Conclusion
The community changed early in the record.
"""
ARTIFACTS = {
    "data": "dataset_description",
    "model": "model_architecture",
    "eval": "evaluation_report",
    "writing": "final_paper",
}


def _call(tool, **args):
    return {"tool_calls": [{"name": tool, "args": args}]}


def _script(path: Path) -> Path:
    """A one-agent-per-team scripted team: the data lead runs hostile code that draws a figure and a
    failing call; the writing lead's paper gets one fact right, one wrong, and holds markup."""
    by_phase = {}
    for team, name in ARTIFACTS.items():
        by_phase[f"{team}:plan"] = [f"- {team}.0: do the {team} part"]
        by_phase[f"{team}:work"] = [_call("mark_complete", summary=f"{team} work done")]
        by_phase[f"{team}:synthesize"] = [
            _call(
                "write_artifact",
                name=name,
                description=f"{team} artifact",
                content=PAPER if team == "writing" else f"# {team}\n\nNotes <b>of</b> the {team} team.",
            ),
            _call("mark_complete", summary="written"),
        ]
    by_phase["data:work"] = [
        _call("run_code", code=HOSTILE_CODE, description="first look </pre><script>alert(2)</script>"),
        _call("run_code", code="raise ValueError('<img src=x onerror=alert(1)>')", description="a failing call"),
        _call("mark_complete", summary="looked at the data"),
    ]
    path.write_text(json.dumps({"by_phase": by_phase, "cycle": False}))
    return path


@pytest.fixture(scope="module")
def science_run(tmp_path_factory, docker_ready):
    from cooplab.cli import main

    base = tmp_path_factory.mktemp("sciview")
    out = base / "runs" / "hostile-team"
    code = main(
        [
            "run",
            "science",
            "--task",
            "ecology",
            "--model",
            f"scripted:{_script(base / 'team.json')}",
            "--team-size",
            "1",
            "--sandbox-backend",
            "docker",
            "--cache",
            "off",
            "--out",
            str(out),
            "-q",
            "--json",
        ]
    )
    assert code == 0
    return out


@pytest.fixture(scope="module")
def explorer(science_run):
    from cooplab.evals.explorer import app
    from cooplab.evals.explorer.runs import discover
    from cooplab.runs import registry

    server, url = app.serve([science_run.parent], task_for=registry.get)
    try:
        run_id = next(r.id for r in discover([science_run.parent]) if r.out == science_run)
        yield f"{url}run?id={run_id}"
    finally:
        app.stop(server)


@pytest.mark.integration
@pytest.mark.docker
def test_a_science_run_records_its_calls_figures_and_artifact_authors(science_run):
    calls = [json.loads(line) for line in (science_run / sx.SANDBOX_CALLS).read_text().splitlines()]
    assert [(c["agent"], c["team"], c["visit"], c["status"]) for c in calls] == [
        ("data.0", "data", 1, "ok"),
        ("data.0", "data", 1, "error"),
    ]
    assert "pwned-code" in calls[0]["stdout"] and calls[1]["error"].startswith("ValueError: <img")
    assert len(calls[0]["figures"]) == 1 and (science_run / calls[0]["figures"][0]).read_bytes().startswith(
        sx.PNG_MAGIC
    )
    index = json.loads((science_run / sx.ARTIFACT_INDEX).read_text())
    assert {(a["name"], a["version"], a["agent"], a["visit"]) for a in index} == {
        (n, 1, f"{t}.0", 1) for t, n in ARTIFACTS.items()
    }


@pytest.mark.integration
@pytest.mark.docker
def test_the_science_page_in_chromium(explorer, tmp_path):
    res = browse(tmp_path, explorer, "--dump-dom", size="1300,2400")
    assert res.returncode == 0, res.stderr[-2000:]
    html = res.stdout
    # hostile text stayed text: no script of the run ran (the title is the explorer's), none is in the DOM
    found = re.search(r"<title>(.*?)</title>", html, re.S)
    assert found, html[:400]
    title = found.group(1)
    assert "pwned" not in title and "hostile-team" in title
    assert_inert(html)  # the explorer's own script only, no element or handler a payload would add
    assert "&lt;script&gt;document.title='pwned-report'&lt;/script&gt;" in html  # shown as text
    assert "&lt;img src=x onerror=\"document.title='pwned-img'\"&gt;" in html
    # the timeline: each team's pass, who was in it and what it wrote
    assert re.search(
        r"<td>data#1</td>\s*<td>plan &gt; work &gt; deliberate &gt; synthesize</td>\s*<td>data.0 \(Data Lead\)</td>"
        r"\s*<td>dataset_description v1</td>\s*<td[^>]*>2</td>",
        html,
    ), html[:3000]
    assert "<td>writing#1</td>" in html and "final_paper v1" in html
    link = re.search(r'<a href="(/traces\?id=[^"]*agent=data.0[^"]*)">data.0 \(Data Lead\): its model calls</a>', html)
    assert link, "no link to the data lead's model calls"
    # a code call: its code, its output (the hostile line as text), its figure as an image, the failing call's error
    assert "data#1 · data.0 (Data Lead) · call call_1 · ok" in html
    assert "print(\"&lt;/pre&gt;&lt;script&gt;document.title='pwned-code'&lt;/script&gt;\")" in html
    assert (
        "<h4>stdout</h4><pre "
        "class=\"code\">&lt;/pre&gt;&lt;script&gt;document.title='pwned-code'&lt;/script&gt;\ncolumns: 6\n</pre>"
        in html
    )
    assert re.search(
        r'<img src="data:image/png;base64,[A-Za-z0-9+/=]{200,}" alt="sandbox_figures/data-1-data.0-call_\d+-1.png">',
        html,
    )
    assert "ValueError: &lt;img src=x onerror=alert(1)&gt;" in html
    # the report beside each fact's verdict, truth and evidence
    assert "shift_time · number · contradicted · score 0.00 · WRONG" in html
    assert "The truth: A regime shift occurs at t = 177." in html
    assert "Evidence (heuristic scorer): a regime shift occurs at t = 60, where the mean abundance drops." in html
    assert "n_species · number · found · score 1.00 · right" in html
    assert "forecast_baseline_rmse · number · missing · score 0.00 · NOT STATED" in html
    # the budget plot and the artifacts' versions
    assert (
        'aria-label="USD spent per team (cumulative)" data-drawn="1"' in html
        and "every version of every artifact" in html
    )

    calls = browse(tmp_path, explorer.split("/run?")[0] + html_unescape(link.group(1)), "--dump-dom").stdout
    found = re.search(r"<title>(.*?)</title>", calls, re.S)
    assert found and "pwned" not in found.group(1)
    assert (
        "6 calls" in calls and "You are Data Lead, a member of the Data team." in calls
    )  # the data lead's 6 model calls
    assert "You are ML Engineer" not in calls  # and no other agent's

    png = tmp_path / "explorer-science.png"
    shot = browse(tmp_path, explorer, f"--screenshot={png}", size="1300,2400")
    assert png.is_file(), shot.stderr[-2000:]
    w, h, colours, std = image_stats(png)
    assert (w, h) == (1300, 2400) and colours > 50 and std > 5  # text, tables, the figure: not a blank page
    keep = os.environ.get("COOPLAB_EXPLORER_SHOTS")  # e.g. docs/img: refresh the documentation's screenshot
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / "explorer-science.png")
