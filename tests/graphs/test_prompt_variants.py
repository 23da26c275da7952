"""Prompt variants as data (graphs/prompts.py): named folders beside a task's prompts, chosen per
run, recorded in config.json, keyed into the response cache by their text, a partial folder falling
back to the original, and a bad name or a broken file refused in one line before any work."""

from __future__ import annotations

import json
import re
import shutil
import string
from pathlib import Path

import pytest

import cooplab
from cooplab.cli import main
from cooplab.graphs import prompts
from cooplab.limits import ConfigError
from cooplab.tasks.cpr import llm as cpr_llm
from cooplab.tasks.cpr.task import CPRTask

CPR = "cooplab.tasks.cpr"
SCRIPTED = "scripted:examples/scripted/cautious.json"


@pytest.fixture
def no_run_figures(monkeypatch):
    from cooplab.graphs.task import Task

    monkeypatch.setattr(CPRTask, "figure", Task.figure)


def _run(tmp_path, name, variant, cache):
    return cooplab.run(
        task="cpr",
        agents="llm",
        model=SCRIPTED,
        n_agents=2,
        rounds=2,
        seed=3,
        cache=str(cache),
        out=tmp_path / name,
        prompt_variant=variant,
        quiet=True,
    )


def test_the_variant_is_recorded_and_keys_the_cache_by_its_text(tmp_path, no_run_figures):
    cache = tmp_path / "c.sqlite"
    a = _run(tmp_path, "a", "original", cache)
    b = _run(tmp_path, "b", "reword-b", cache)
    again = _run(tmp_path, "c", "reword-b", cache)
    cfg = json.loads((tmp_path / "b" / "config.json").read_text())
    assert (
        cfg["llm"]["prompt_variant"] == "reword-b"
        and json.loads((tmp_path / "a" / "config.json").read_text())["llm"]["prompt_variant"] == "original"
    )
    assert a.summary["ledger"]["cached_calls"] == 0 and b.summary["ledger"]["calls"] > 0
    assert b.summary["ledger"]["cached_calls"] == 0  # other words: no answer of the original is reused
    assert (
        again.summary["ledger"]["cached_calls"] == again.summary["ledger"]["calls"] > 0
    )  # the same words: every answer replays
    sent = [json.loads(line) for line in (tmp_path / "b" / "traces.jsonl").read_text().splitlines()]
    assert "Give only one JSON object as your reply" in json.dumps(sent)  # reword-b's effort prompt reached the model


def test_an_unknown_variant_is_one_line_listing_the_variants_before_any_work(tmp_path, capsys):
    with pytest.raises(
        ConfigError, match="unknown prompt variant 'nope' for task 'cpr'; its variants are original, .*reword-a"
    ):
        cooplab.run(task="cpr", agents="llm", model=SCRIPTED, prompt_variant="nope", out=tmp_path / "x", quiet=True)
    assert not (tmp_path / "x").exists()
    code = main(
        [
            "run",
            "game",
            "--game",
            "cpr",
            "--players",
            "llm",
            "--model",
            SCRIPTED,
            "--prompt-variant",
            "../cpr",
            "--out",
            str(tmp_path / "y"),
            "-q",
        ]
    )
    err = capsys.readouterr().err
    assert (
        code == 2 and len(err.strip().splitlines()) == 1 and "format-bullets" in err and not (tmp_path / "y").exists()
    )
    assert (
        main(["run", "cpr", "--prompt-variant", "reword-a", "--out", str(tmp_path / "z")]) == 2
    )  # rule-based: no prompts
    assert "LLM agents only" in capsys.readouterr().err


def test_a_folder_a_user_adds_is_a_variant_and_falls_back_to_the_original_for_missing_files(tmp_path, monkeypatch):
    root = tmp_path / "prompts"
    shutil.copytree(Path(cpr_llm.__file__).parent / "prompts", root)
    mine = root / "variants" / "mine"
    mine.mkdir()
    (mine / "effort.txt").write_text(
        (root / "effort.txt").read_text().replace("Decide your fishing effort", "Now pick your fishing effort")
    )
    real = prompts._root
    monkeypatch.setattr(prompts, "_root", lambda package: root if package == CPR else real(package))
    prompts.text.cache_clear()
    try:
        assert "mine" in prompts.variants(CPR) and prompts.check(CPRTask(), "mine") == "mine"
        assert "Now pick your fishing effort" in cpr_llm.prompt("effort", "mine")
        assert cpr_llm.prompt("vote", "mine") == cpr_llm.prompt("vote") and prompts.overridden(CPR, "mine") == [
            "effort.txt"
        ]
        (mine / "vote.txt").write_text("Vote {options} for {a_fact_we_do_not_have}\n")
        with pytest.raises(ConfigError, match=r"vote.txt lacks \{belief\} and has unknown \{a_fact_we_do_not_have\}"):
            prompts.check(CPRTask(), "mine")
        (mine / "vote.txt").write_text("Vote {options {belief}\n")
        with pytest.raises(ConfigError, match="unmatched brace"):
            prompts.check(CPRTask(), "mine")
        (mine / "vote.txt").unlink()
        (mine / "tally.txt").write_text("x")
        with pytest.raises(ConfigError, match="tally.txt has no original"):
            prompts.check(CPRTask(), "mine")
    finally:
        prompts.text.cache_clear()


def _fields(text: str) -> set[str]:
    return {f for _l, f, _s, _c in string.Formatter().parse(text) if f is not None}


@pytest.mark.parametrize("variant", [v for v in prompts.variants(CPR) if v != prompts.ORIGINAL])
def test_every_cpr_variant_keeps_the_placeholders_numbers_and_reply_format(variant):
    assert prompts.fields_differ(CPR, variant) == ""
    assert prompts.about(CPR, variant), "each shipped variant says what it changes (ABOUT)"
    own = prompts.overridden(CPR, variant)
    if variant.startswith("persona-"):
        assert own == ["beliefs.json"]
        bank, orig = cpr_llm.belief_bank(variant), cpr_llm.belief_bank()
        assert {k: len(v) for k, v in bank.items()} == {k: len(v) for k, v in orig.items()} and bank != orig
        return
    assert own == ["effort.txt", "propose.txt", "punish.txt", "system.txt", "vote.txt"]
    for name, needles in {
        "effort": ['{"effort": <your effort, a number from 0 to 1>}', "0", "1"],
        "punish": ['"punish"', "null", "one"],
        "propose": ['"belief"', '"proposal"', "one sentence"],
        "vote": ['"vote"', "votes", "round", "fines"],
        "system": ["savings", "below zero|negative", "leave|out of the community"],
    }.items():
        text = cpr_llm.prompt(name, variant)
        assert text != cpr_llm.prompt(name) and _fields(text) == _fields(cpr_llm.prompt(name))
        rendered = text.format(**{f: f"<{f}>" for f in _fields(text)})
        for needle in needles:
            assert needle in rendered if needle.startswith(("{", '"')) else re.search(needle, rendered), (
                variant,
                name,
                needle,
            )


def test_a_config_written_before_variants_reads_as_the_original(tmp_path):
    assert prompts.variant_of({"agents": "llm", "llm": {"model": "local"}}) == "original"
    assert prompts.variant_of({"agents": "rule", "llm": None}) == "original"
    cfg = cooplab.RunConfig.from_keywords("cpr", agents="llm", model=SCRIPTED, n_agents=2, rounds=1).to_config()
    del cfg["llm"]["prompt_variant"]
    assert cooplab.RunConfig.load(cfg).llm.prompt_variant == "original"


def test_the_diners_persona_axis_reaches_the_prompts(tmp_path, capsys, monkeypatch):
    """The Diner's Dilemma paper gives its diners personas: a variant swaps them (and nothing else)."""
    from cooplab.graphs.task import Task
    from cooplab.tasks.diners import llm as dl
    from cooplab.tasks.diners.task import DinersTask

    monkeypatch.setattr(DinersTask, "figure", Task.figure)
    names = {v: [p["name"] for p in dl.personas(v)] for v in ("persona-reworded", "persona-other", "persona-neutral")}
    assert names["persona-reworded"] == names["persona-neutral"] == [p["name"] for p in dl.personas()]
    assert "Ana Costa" in names["persona-other"] and not set(names["persona-other"]) & set(names["persona-reworded"])
    assert [p["lifestyle"] for p in dl.personas("persona-reworded")] != [p["lifestyle"] for p in dl.personas()]
    assert prompts.overridden("cooplab.tasks.diners", "persona-other") == ["personas.json"]
    model = tmp_path / "m.json"
    model.write_text(
        json.dumps(
            {
                "by_phase": {
                    "order": ['{"meal": "budget"}'],
                    "punish": ['{"punish": []}'],
                    "metanorm": ['{"punish": []}'],
                }
            }
        )
    )
    code = main(
        [
            "run",
            "diners",
            "--agents",
            "llm",
            "--combination",
            "1",
            "--pk",
            "3:1",
            "--iterations",
            "1",
            "--model",
            f"scripted:{model}",
            "--cache",
            "off",
            "--prompt-variant",
            "persona-other",
            "--out",
            str(tmp_path / "run"),
            "-q",
            "--json",
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "run" / "config.json").read_text())["llm"]["prompt_variant"] == "persona-other"
    traces = (tmp_path / "run" / "traces.jsonl").read_text()
    assert "Ana Costa" in traces and "Raj Sharma" not in traces


def test_the_example_variant_sweep_builds_a_config_per_variant_and_a_bad_name_names_its_cell(tmp_path):
    from cooplab.runs import grid

    sw, notice = grid.load_file(Path(__file__).resolve().parents[2] / "examples" / "variants-scripted.json")
    jobs = grid.jobs(sw)
    assert notice is None and len(jobs) == 10
    assert {j["config"]["llm"]["prompt_variant"] for j in jobs} == {
        "original",
        "reword-a",
        "reword-b",
        "reword-c",
        "format-bullets",
    }
    bad = grid.load(
        {
            "task": "cpr",
            "out": str(tmp_path),
            "fixed": {"agents": "llm", "model": SCRIPTED},
            "grid": {"prompt_variant": ["original", "reworded"]},
        },
        "sweep",
    )
    with pytest.raises(
        ConfigError, match="cell prompt_variant-reworded__s0: --prompt-variant: unknown prompt variant 'reworded'"
    ):
        grid.jobs(bad)
