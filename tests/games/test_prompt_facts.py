"""Every rule of each game reaches its players: the game descriptions (tasks/games/prompts, our
rewording of the facts of the paper's Appendix B.4) name every constant of the configured game and
state every rule, in both wordings (standard and alternate). The constants are set to unusual values
so that each number can only come from its own field."""

from __future__ import annotations

import re
from typing import Any

import pytest

from cooplab.tasks.games import llm as la
from cooplab.tasks.games.params import GAMES, GameParams, model_of

#: unusual values (each game's dilemma checks still hold) so a number found can only be its field's
VALUES: dict[str, dict[str, Any]] = {  # per game: a value for each of its constants (ints and floats)
    "weakest-link": dict(max_effort=13, min_weight=2.75, effort_cost=1.25),
    "cpr": dict(capacity=170, max_extract=17, multiplier=3.5),
    "cpr-sanction": dict(
        capacity=170, max_extract=17, multiplier=3.5, sanction_cost=1.5, sanction_damage=2.25, max_sanction=7
    ),
    "collective-risk": dict(rounds=9, endowment=11, threshold=130, loss_probability=0.65),
    "o-ring": dict(pool=230, max_withdraw=12, scale=1100.0, success_threshold=55.0, reward=260.0, withdraw_cost=1.75),
    "public-goods": dict(endowment=14, group_multiplier=2.5, global_multiplier=1.75),
}
SIZES = [6, 6]  # 12 players, 11 others, groups of 6

#: the rules each description must state (regular expressions, case-insensitive), beyond the numbers
RULES = {
    "weakest-link": [
        r"\b(lowest|smallest|minimum)\b",
        r"(any|every|whole|other) (group|population|single)|anyone at all",
        r"your own effort|effort you named yourself",
        r"13",
    ],
    "cpr": [
        r"\b(take|extract)",
        r"multiplied by 3\.5",
        r"equal",
        r"full again",
        r"(you took|tokens you took|tokens taken)",
    ],
    "cpr-sanction": [
        r"multiplied by 3\.5",
        r"equal",
        r"full again",
        r"\b(sanction|penali[sz]e|punish)",
        r"own group",
        r"(other groups?|outside your group)",
        r"(see|shown|sees)",
        r"(first|phase 1)",
        r"(second|phase 2)",
        r"6 members",
    ],
    "collective-risk": [
        r"savings",
        r"(keep|kept)",
        r"\ball\b.{0,20}savings|savings.{0,30}(wiped out|lost|loses)",
        r"(after|end of) (round 9|the last round)",
        r"65%",
    ],
    "o-ring": [
        r"quality",
        r"(product|multipl)",
        r"(nothing|\b0\b)",
        r"(every|each) team",
        r"(left|remaining|still left)",
        r"split equally|divided equally",
        r"full again",
    ],
    "public-goods": [
        r"\bkeep|hold on",
        r"(group's pool|group pool|pool of your)",
        r"global pool",
        r"6 members of your group",
        r"(exactly|every one|each of your|none may)",
    ],
}
COMMON = {"group_sizes", "rounds", "simulations", "near_pareto", "pareto_reference"}


def fmt(v: float) -> str:
    return f"{v:g}"


@pytest.mark.parametrize("condition", ["standard", "alternate"])
@pytest.mark.parametrize("game", GAMES)
def test_every_constant_and_rule_is_in_the_description(game, condition):
    P: GameParams = model_of(game)(group_sizes=SIZES, simulations=1, **VALUES[game])
    text = la.description(P, condition, group_size=6)
    assert "{" not in text and "}" not in text, text
    fields = set(P.model_dump()) - COMMON - {"loss_probability"}
    if game == "collective-risk":
        fields |= {"rounds"}
    # every constant of the game (model fields, so a new one fails here until the prompt names it)
    assert fields == set(VALUES[game]) - {"loss_probability"}, "VALUES must set every constant of the game"
    for f in sorted(fields):
        assert re.search(rf"(?<![\d.]){re.escape(fmt(getattr(P, f)))}(?![\d]|\.\d)", text), (
            f"{game}/{condition}: {f} missing"
        )
    if game == "collective-risk":
        assert "65%" in text
    # the number of players, and the groups
    assert re.search(r"(?<!\d)12(?!\d)", text) or "11 other" in text, "the number of players"
    assert "2 groups of 6" in text or "2 teams of 6" in text
    for rule in RULES[game]:
        assert re.search(rule, text, re.I), f"{game}/{condition}: rule /{rule}/ not stated:\n{text}"


def test_the_sanction_prompt_states_its_rules():
    from tests.games.test_llm_players import played_state

    P, st = played_state("cpr-sanction", [4, 4, 4])
    P = P.model_copy(update=dict(sanction_cost=1.5, sanction_damage=2.25, max_sanction=7))
    human = la.sanction_messages(P, st, 0, 5, "standard")[1].content
    for needle in (
        "1.5",
        "2.25",
        "7 tokens",
        "all 12 players",
        "Player 5, Player 7, Player 8",
        "not you",
        "another group",
    ):
        assert needle in human, needle
