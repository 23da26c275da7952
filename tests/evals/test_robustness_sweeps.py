"""Variant sweeps run end to end (cooplab.sweep, then cooplab.robustness): the CPR society with two
chat models built so that the ablation effect flips with the wording for one and holds for the
other, and a game on a scripted model that sometimes answers badly."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import cooplab
from cooplab.agents import instances


class WordingReader(BaseChatModel):
    """A fisher that fishes hard when its group has no shared rule and lightly when it has one; with
    ``flip``, the other way round when the prompts are worded as variant reword-a."""

    flip: bool = False

    @property
    def _llm_type(self) -> str:
        return "wording-reader"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        last = str(messages[-1].content)
        if '"effort"' in last:
            no_rule = "no shared rule" in last
            reworded = last.startswith("This is round")  # reword-a's effort prompt
            hard = no_rule != (self.flip and reworded)
            answer = {"effort": 0.9 if hard else 0.1}
        elif '"proposal"' in last:
            answer = {"belief": "Keep the lake full.", "proposal": "Fish lightly."}
        elif '"vote"' in last:
            answer = {"vote": 1}
        else:
            answer = {"punish": None}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=json.dumps(answer)))])


@pytest.fixture
def no_run_figures(monkeypatch):
    """Each run's own figure (figures/run.png, seconds per cell) is not what these tests read."""
    from cooplab.graphs.task import Task
    from cooplab.tasks.cpr.task import CPRTask
    from cooplab.tasks.games.task import GameTask

    for cls in (CPRTask, GameTask):
        monkeypatch.setattr(cls, "figure", Task.figure)


def test_a_cpr_variant_sweep_flags_the_effect_that_flips_and_not_the_one_that_holds(tmp_path, no_run_figures):
    flipper, steady = instances.register(WordingReader(flip=True)), instances.register(WordingReader(flip=False))
    table = cooplab.sweep(
        "cpr",
        out=tmp_path / "sw",
        grid={"model": [flipper, steady], "prompt_variant": ["original", "reword-a"], "ablation": ["full", "neither"]},
        seeds=[0],
        agents="llm",
        n_agents=2,
        rounds=1,
        replicates=2,
        cache="off",
        analysis=False,
    )
    assert (table["status"] == "completed").all() and len(table) == 8
    cfg = json.loads((tmp_path / "sw" / "cells" / table["cell"][0] / "config.json").read_text())
    assert cfg["llm"]["prompt_variant"] == "original"
    rep = cooplab.robustness(tmp_path / "sw")
    assert rep["variants"] == ["original", "reword-a"] and len(rep["models"]) == 2
    eff = {(e["model"].split(":")[1].split("#")[0], e["outcome"]): e for e in rep["effects"]}
    flip = [e for e in rep["effects"] if e["model"] == flipper and e["outcome"] == "efficiency"][0]
    hold = [e for e in rep["effects"] if e["model"] == steady and e["outcome"] == "efficiency"][0]
    assert eff and flip["effect"] == "ablation: neither vs full"
    assert flip["fragile"] and flip["changes_sign"], flip
    assert not hold["fragile"] and not hold["changes_sign"], hold
    d = hold["variants"]
    assert d["original"]["difference"] == d["reword-a"]["difference"] != 0  # the steady model ignores the wording
    # the spread: the steady model's efficiency is the same under both wordings, the flipper's is not
    spread = {(r["model"], r["condition"], r["outcome"]): r for r in rep["spread"]}
    assert spread[(steady, "ablation=full", "efficiency")]["range"] == 0
    assert spread[(flipper, "ablation=full", "efficiency")]["range"] > 0
    # the variant's mean is the table's: the cells of that model, variant and condition
    rows = table[(table["model"] == flipper) & (table["prompt_variant"] == "reword-a") & (table["ablation"] == "full")]
    assert spread[(flipper, "ablation=full", "efficiency")]["variants"]["reword-a"]["mean"] == pytest.approx(
        rows["efficiency.mean"].mean()
    )
    assert all(r["parse_failure_share"] == 0 for r in rep["parsing"])


def test_a_game_variant_sweep_reports_spreads_parse_failures_and_effects(tmp_path, no_run_figures):
    model = tmp_path / "m.json"
    model.write_text(
        json.dumps(
            {
                "select": "prompt_hash",
                "by_phase": {"extract": ['{"extract": 2}', '{"extract": 9}', "not json", '{"extract": 5}']},
            }
        )
    )
    table = cooplab.sweep(
        "game",
        out=tmp_path / "sw",
        grid={"prompt_variant": ["original", "reword-b"], "prompt": ["standard", "alternate"]},
        seeds=[0, 1],
        game="cpr",
        players="llm",
        model=f"scripted:{model}",
        rounds=2,
        simulations=1,
        cache="off",
        analysis=False,
    )
    assert (table["status"] == "completed").all() and len(table) == 8
    rep = cooplab.robustness(tmp_path / "sw", figure=False)
    outcomes = {r["outcome"] for r in rep["spread"]}
    assert {"metric", "pareto_proximity"} <= outcomes
    assert all(r["n_variants"] == 2 and r["range"] >= 0 for r in rep["spread"])
    # parse failures per variant are the decisions tables' own
    for r in rep["parsing"]:
        cells = table[table["prompt_variant"] == r["variant"]]["cell"]
        d = pd.concat([pd.read_parquet(tmp_path / "sw" / "cells" / c / "decisions.parquet") for c in cells])
        assert (
            r["decisions"] == len(d) and r["parse_failure_share"] == ((d["attempts"] > 1) | d["fallback_used"]).mean()
        )
    assert any(r["parse_failure_share"] > 0 for r in rep["parsing"])
    [e] = [e for e in rep["effects"] if e["outcome"] == "metric"]
    assert e["effect"] == "prompt: alternate vs standard" and set(e["variants"]) == {"original", "reword-b"}
    assert isinstance(e["fragile"], bool) and e["why"]
