"""What the end-to-end provider tests share: the fake servers by provider, the CLI commands of a CPR
society, a game profile and a science team pointed at one, the answers a game and a science team
need, and the exact cost of the calls a server answered."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

from cooplab.cli import main
from tests.fakes.anthropic_server import AnthropicServer
from tests.fakes.base import Answer, FakeServer, Request
from tests.fakes.google_server import GoogleServer
from tests.fakes.ollama_server import OllamaServer

#: the fake server of each provider whose SDK can reach a loopback server (all three can)
SERVERS: dict[str, type[FakeServer]] = {
    "anthropic": AnthropicServer,
    "ollama": OllamaServer,
    "google_genai": GoogleServer,
}
PROVIDERS = sorted(SERVERS)

PRICE_IN, PRICE_OUT = Decimal("0.0005"), Decimal("0.003")  # USD per 1K tokens, given on the command line
PER_CALL = (120 * PRICE_IN + 12 * PRICE_OUT) / 1000  # the fake servers report 120 input and 12 output tokens
BUDGET = Decimal("0.05")


def run(args: list[Any], capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    """The single line cooplab writes when a run stops. A server's error body may be quoted in it
    (even one whose HTML says "Traceback"); a traceback of cooplab's own would be more than one line."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("cooplab: "), err
    return lines[0]


def summary_of(out: Path) -> dict:
    assert (out / "summary.json").exists(), "the run was lost: no summary.json"
    return json.loads((out / "summary.json").read_text())


def paid(provider: str, url: str, *, budget: Decimal = BUDGET) -> list[str | Decimal]:
    """The model options of a run against ``url``: the provider's model, explicit prices, a budget, no cache."""
    return [
        "--model",
        f"{provider}:fake-model",
        "--base-url",
        url,
        "--price-in",
        PRICE_IN,
        "--price-out",
        PRICE_OUT,
        "--budget",
        budget,
        "--cache",
        "off",
    ]


def cpr_run(provider: str, url: str, out: Path, *more: Any, rounds: int = 2, agents: int = 2) -> list[Any]:
    return [
        "run",
        "cpr",
        "--agents",
        "llm",
        *paid(provider, url),
        "--n-agents",
        agents,
        "--rounds",
        rounds,
        "--ablation",
        "neither",
        "--out",
        out,
        "-q",
        "--json",
        *more,
    ]


#: one answer valid for every decision of every game (each decision's schema reads its own fields)
GAME_ANSWER = json.dumps(
    {
        "effort": 3,
        "extract": 2,
        "contribute": 1,
        "withdraw": 6,
        "keep": 2,
        "group": 6,
        "global": 2,
        "sanctions": {},
        "message": "Let us all cooperate.",
    }
)
GAMES = "cpr,public-goods"


def profile_run(provider: str, url: str, out: Path) -> list[Any]:
    return [
        "profile",
        *paid(provider, url),
        "--games",
        GAMES,
        "--simulations",
        1,
        "--group-size",
        3,
        "--seed",
        3,
        "--out",
        out,
        "--json",
    ]


def science_run(provider: str, url: str, out: Path) -> list[Any]:
    return [
        "run",
        "science",
        "--team",
        "llm",
        *paid(provider, url, budget=Decimal("0.5")),
        "--task",
        "ecology",
        "--sandbox-backend",
        "local",
        "--out",
        out,
        "-q",
        "--json",
    ]


def science_answer(server: type[FakeServer]):
    """A science team member with tools, stateless: asked with tools and no tool result yet, it writes
    its team's artifact (when it may) or marks its part complete; after a tool result, it marks its
    part complete once more and then says it is done; asked without tools, it agrees."""
    from cooplab.tasks.science.roles import ARTIFACT, all_roles

    def team_of(system: str) -> str:
        m = re.match(r"You are (.+?), a member of the", system)
        return next((r.team for size in (3, 2) for r in all_roles(size) if m and r.name == m.group(1)), "data")

    def answer(req: Request) -> Any:
        talk = server.talk(req.body)
        if not talk.tools:
            return "ok"
        if talk.tool_results == 0 and "write_artifact" in talk.tools:
            team = team_of(talk.system)
            return Answer(
                tool_calls=[
                    ("write_artifact", {"name": ARTIFACT[team], "content": f"# {team}\n\nThe {team} team's notes."})
                ]
            )
        if talk.tool_results <= 1 and "mark_complete" in talk.tools:
            return Answer(tool_calls=[("mark_complete", {"summary": "done"})])
        return "done"

    return answer
