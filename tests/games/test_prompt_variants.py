"""Every prompt variant of the games keeps every constant and rule of each game (the same checks
as the original's, tests/games/test_prompt_facts.py), and its decision and system prompts keep
the reply format."""

from __future__ import annotations

import re

import pytest

from cooplab.graphs import prompts
from cooplab.tasks.games import llm as la
from cooplab.tasks.games.params import GAMES, model_of
from tests.games.test_prompt_facts import COMMON, RULES, SIZES, VALUES, fmt

VARIANTS = prompts.variants("cooplab.tasks.games")


def test_the_games_have_three_rewordings_and_the_format_axis():
    for name in ("reword-a", "reword-b", "reword-c", "format-prose", "format-bullets", "format-reordered"):
        assert name in VARIANTS
        assert {f"{g}.standard.txt" for g in GAMES} <= set(prompts.overridden("cooplab.tasks.games", name)), name


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != prompts.ORIGINAL])
@pytest.mark.parametrize("game", GAMES)
def test_a_variant_keeps_every_constant_and_rule(game, variant):
    P = model_of(game)(group_sizes=SIZES, simulations=1, **VALUES[game])
    text = la.description(P, "standard", group_size=6, variant=variant)
    assert text != la.description(P, "standard", group_size=6), "the variant words this game its own way"
    assert "{" not in text and "}" not in text, text
    for f in sorted(
        set(P.model_dump()) - COMMON - {"loss_probability"} | ({"rounds"} if game == "collective-risk" else set())
    ):
        assert re.search(rf"(?<![\d.]){re.escape(fmt(getattr(P, f)))}(?![\d]|\.\d)", text), (
            f"{game}/{variant}: {f} missing"
        )
    assert re.search(r"(?<!\d)12(?!\d)", text) and ("2 groups of 6" in text or "2 teams of 6" in text)
    for rule in RULES[game]:
        assert re.search(rule, text, re.I), f"{game}/{variant}: rule /{rule}/ not stated:\n{text}"


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_variant_keeps_the_reply_format(variant):
    from tests.games.test_llm_players import played_state

    P, st = played_state("cpr", [4, 4, 4])
    system, human = la.decision_messages(P, st, 0, 1, "standard", variant)
    assert "JSON" in system.content and "Player 2" in system.content and "Group 1" in system.content
    assert la.action_example("cpr", 10, "standard") in human.content
    assert f"Round {int(st['round'])} of {P.rounds}" in human.content


REWORDINGS = ("reword-a", "reword-b", "reword-c")


def test_each_rewording_words_every_prompt_of_the_games():
    """The three rewordings cover every prompt file of the games (alternate, CoT/ToM, sanction and
    deliberation too), each with the original's fields."""
    from importlib.resources import files

    originals = sorted(
        p.name for p in files("cooplab.tasks.games").joinpath("prompts").iterdir() if p.name.endswith(".txt")
    )
    for name in REWORDINGS:
        assert set(prompts.overridden("cooplab.tasks.games", name)) == set(originals), name
        assert prompts.fields_differ("cooplab.tasks.games", name) == "", name
        for f in originals:
            assert prompts.text("cooplab.tasks.games", f, name) != prompts.text("cooplab.tasks.games", f), f"{name}/{f}"


@pytest.mark.parametrize("variant", REWORDINGS)
@pytest.mark.parametrize("game", GAMES)
def test_a_rewording_of_the_alternate_prompt_keeps_every_constant_and_rule(game, variant):
    P = model_of(game)(group_sizes=SIZES, simulations=1, **VALUES[game])
    text = la.description(P, "alternate", group_size=6, variant=variant)
    assert text != la.description(P, "alternate", group_size=6)
    assert "{" not in text and "}" not in text, text
    for f in sorted(
        set(P.model_dump()) - COMMON - {"loss_probability"} | ({"rounds"} if game == "collective-risk" else set())
    ):
        assert re.search(rf"(?<![\d.]){re.escape(fmt(getattr(P, f)))}(?![\d]|\.\d)", text), (
            f"{game}/{variant}: {f} missing"
        )
    assert re.search(r"(?<!\d)12(?!\d)", text) and ("2 groups of 6" in text or "2 teams of 6" in text)
    if game == "collective-risk":
        assert "65%" in text
    for rule in RULES[game]:
        assert re.search(rule, text, re.I), f"{game}/{variant}: rule /{rule}/ not stated:\n{text}"


@pytest.mark.parametrize("variant", REWORDINGS)
def test_a_rewording_of_the_sanction_cot_tom_and_deliberation_prompts_keeps_their_facts(variant):
    from tests.games.test_llm_players import played_state

    P, st = played_state("cpr-sanction", [4, 4, 4])
    P = P.model_copy(update=dict(sanction_cost=1.5, sanction_damage=2.25, max_sanction=7))
    human = la.sanction_messages(P, st, 0, 5, "standard", variant)[1].content
    assert human != la.sanction_messages(P, st, 0, 5, "standard")[1].content
    for needle in (
        "1.5",
        "2.25",
        "7 tokens",
        "all 12 players",
        "Player 5, Player 7, Player 8",
        "not you",
        "another group",
        f"Round {int(st['round'])} of {P.rounds}",
    ):
        assert needle in human, needle
    for condition in ("cot", "tom"):
        system = la.decision_messages(P, st, 0, 1, condition, variant)[0].content
        assert '"reasoning"' in system and "JSON" in system and "Player 2" in system
    words = la.deliberation_messages(P, st, 0, 1, "standard", variant)[1].content
    assert '{"message": "<your message>"}' in words and "1 to 3" in words and "Group 1" in words
    alt = la.decision_messages(P, st, 0, 1, "alternate", variant)
    assert (
        "JSON" in alt[0].content
        and "Player 2" in alt[0].content
        and f"round {int(st['round'])}" in alt[1].content.lower()
    )
