"""The shared workspace of a science run and the tools of Appendix C.1 that work on it.

A :class:`Workspace` is made for one node of the team graph from the checkpointed state (every
artifact version so far) and collects what that node's agents do: new artifact versions,
messages to other teams, requests to earlier teams, completions. The node returns those as state
updates, so they are checkpointed with the node (a resumed run neither loses nor repeats them).

Every tool validates its arguments and answers a mistake with an error message to the model
(``ValueError`` -> a ``ToolMessage`` with status error), never a crash: an unknown artifact or
team, a request to a later team or to one's own, an oversized artifact.
"""

from __future__ import annotations

import contextvars
import re
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel, Field

from cooplab.agents.tools import caller_of
from cooplab.tasks.science.roles import ARTIFACT, TEAMS

MAX_ARTIFACT_CHARS = 100_000  #: an artifact version's content at most
READ_CHARS = 12_000  #: what read_artifact shows of a long artifact
MAX_MESSAGE_CHARS = 4_000
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$")


@dataclass
class Workspace:
    """Artifacts (name -> versions), and what one node's agents add."""

    artifacts: dict[str, list[dict[str, Any]]]
    team: str
    visit: int  #: the team's pass (1 = first time; a request brings it back)
    new_artifacts: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    completions: list[dict[str, Any]] = field(default_factory=list)

    # -- queries --------------------------------------------------------------------------
    def versions(self, name: str) -> list[dict[str, Any]]:
        return list(self.artifacts.get(name, [])) + [a for a in self.new_artifacts if a["name"] == name]

    def latest(self, name: str) -> dict[str, Any] | None:
        v = self.versions(name)
        return v[-1] if v else None

    def names(self) -> list[str]:
        return sorted(set(self.artifacts) | {a["name"] for a in self.new_artifacts})

    # -- actions (each returns the text the model sees) --------------------------------------
    def read(self, name: str) -> str:
        a = self.latest(_name(name))
        if a is None:
            raise ValueError(f"no artifact named {name!r}; available: {', '.join(self.names()) or 'none yet'}")
        text = a["content"]
        more = f"\n...[{len(text) - READ_CHARS} more characters not shown]" if len(text) > READ_CHARS else ""
        return (
            f"{a['name']} (version {a['version']}, by {a['agent']} of the {a['team']} team):\n{text[:READ_CHARS]}{more}"
        )

    def write(self, agent: str, name: str, content: str, description: str = "") -> str:
        name = _name(name)
        if not isinstance(content, str) or not content.strip():
            raise ValueError("content must be non-empty text")
        if len(content) > MAX_ARTIFACT_CHARS:
            raise ValueError(f"content has {len(content)} characters; an artifact holds at most {MAX_ARTIFACT_CHARS}")
        version = len(self.versions(name)) + 1
        self.new_artifacts.append(
            {
                "name": name,
                "version": version,
                "content": content,
                "description": str(description)[:500],
                "agent": agent,
                "team": self.team,
                "visit": self.visit,
            }
        )
        return f"saved artifact {name!r} version {version} ({len(content)} characters)"

    def list(self) -> str:
        rows = []
        for n in self.names():
            a = self.versions(n)[-1]  # the latest: every listed name has a version
            rows.append(
                f"- {n}: {len(self.versions(n))} version(s), latest by {a['agent']} ({a['team']}), {len(a['content'])} "
                "characters" + (f": {a['description']}" if a.get("description") else "")
            )
        return "\n".join(rows) or "no artifacts yet"

    def message(self, agent: str, to_team: str, content: str) -> str:
        to_team = _team(to_team)
        content = _text(content, "content", MAX_MESSAGE_CHARS)
        self.messages.append(
            {"from_team": self.team, "agent": agent, "to_team": to_team, "content": content, "visit": self.visit}
        )
        return f"message sent to the {to_team} team"

    def request(self, agent: str, kind: str, target_team: str, request: str, justification: str = "") -> str:
        target = _team(target_team)
        if TEAMS.index(target) >= TEAMS.index(self.team):
            raise ValueError(
                f"requests go to an earlier team than yours ({self.team}): "
                f"{', '.join(TEAMS[: TEAMS.index(self.team)]) or 'none'}"
            )
        request = _text(request, "request", MAX_MESSAGE_CHARS)
        if kind == "redo":
            justification = _text(justification, "justification", MAX_MESSAGE_CHARS)
        self.requests.append(
            {
                "from_team": self.team,
                "agent": agent,
                "target_team": target,
                "kind": kind,
                "request": request,
                "justification": justification,
                "visit": self.visit,
            }
        )
        what = "redo its work" if kind == "redo" else "produce the additional work"
        return (
            f"request recorded: the {target} team will be asked to {what} once your team has finished (if "
            "re-entries remain)"
        )

    def complete(self, agent: str, summary: str) -> str:
        summary = _text(summary, "summary", MAX_MESSAGE_CHARS)
        self.completions.append({"agent": agent, "team": self.team, "summary": summary, "visit": self.visit})
        return f"marked complete: {summary}"

    def updates(self) -> dict[str, Any]:
        """The state updates of what was done here (append-only channels)."""
        return {
            "artifact_log": list(self.new_artifacts),
            "messages": list(self.messages),
            "requests": list(self.requests),
            "completions": list(self.completions),
        }


def _name(name: Any) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name.strip()):
        raise ValueError(
            f"an artifact name is 1-64 letters, digits, '_' or '-', starting with a letter; got {str(name)[:80]!r}"
        )
    return name.strip()


def _team(team: Any) -> str:
    t = str(team).strip().lower().removesuffix(" team")
    aliases = {
        "evaluation": "eval",
        "modeling": "model",
        "modelling": "model",
        "ml": "model",
        "writer": "writing",
        "paper": "writing",
    }
    t = aliases.get(t, t)
    if t not in TEAMS:
        raise ValueError(f"team must be one of {', '.join(TEAMS)}, got {str(team)[:40]!r}")
    return t


def _text(v: Any, what: str, limit: int) -> str:
    if not isinstance(v, str) or not v.strip():
        raise ValueError(f"{what} must be non-empty text")
    return v.strip()[:limit]


class _In(BaseModel):
    """Tool arguments (unknown keys are ignored, like LangChain's own schemas: the injected runtime passes through)."""


class ReadArtifactInput(_In):
    name: str = Field(description="The artifact's name, e.g. dataset_description.")


class WriteArtifactInput(_In):
    name: str = Field(description="The artifact's name (letters, digits, _ or -), e.g. model_architecture.")
    content: str = Field(description="The artifact's full text (Markdown).")
    description: str = Field("", description="One line saying what it is.")


class ListArtifactsInput(_In):
    pass


class SendMessageInput(_In):
    to_team: str = Field(description="data, model, eval or writing.")
    content: str = Field(description="The message.")


class RequestWorkInput(_In):
    target_team: str = Field(description="An earlier team: data, model or eval.")
    request: str = Field(description="The specific NEW output you need.")


class RequestRedoInput(_In):
    target_team: str = Field(description="An earlier team: data, model or eval.")
    request: str = Field(description="What must be redone.")
    justification: str = Field(description="Why the work is unacceptable.")


class MarkCompleteInput(_In):
    summary: str = Field(description="A brief summary of what you did.")


#: the workspace of the node running now (set by the node; asyncio tasks and tool calls inherit it)
CURRENT: contextvars.ContextVar[Workspace] = contextvars.ContextVar("cooplab_science_workspace")


class _Current:
    """The node's workspace, looked up at call time: the tools (and the agents holding them) are
    built once per graph and serve every node."""

    def __getattr__(self, name: str) -> Any:
        try:
            ws = CURRENT.get()
        except LookupError:
            raise RuntimeError("a science tool was called outside a team node (no current workspace)") from None
        return getattr(ws, name)


def workspace_tools(ws: Workspace | None = None, *, code_tool: BaseTool | None) -> list[BaseTool]:
    """The tools of Appendix C.1 on ``ws``, or on the current node's workspace (:data:`CURRENT`)
    when ``ws`` is None (``run_code`` first, for the teams with code)."""
    if ws is None:
        ws = cast(Workspace, _Current())  # forwards every attribute to the current node's workspace

    def agent_of(runtime: ToolRuntime) -> str:
        return caller_of(runtime).agent_id

    async def read_artifact(name: str, runtime: ToolRuntime) -> str:
        return ws.read(name)

    async def write_artifact(name: str, content: str, runtime: ToolRuntime, description: str = "") -> str:
        return ws.write(agent_of(runtime), name, content, description)

    async def list_artifacts() -> str:  # no runtime: LangChain drops injected arguments of a tool without arguments
        return ws.list()

    async def send_message(to_team: str, content: str, runtime: ToolRuntime) -> str:
        return ws.message(agent_of(runtime), to_team, content)

    async def request_additional_work(target_team: str, request: str, runtime: ToolRuntime) -> str:
        return ws.request(agent_of(runtime), "additional", target_team, request)

    async def request_team_redo(target_team: str, request: str, justification: str, runtime: ToolRuntime) -> str:
        return ws.request(agent_of(runtime), "redo", target_team, request, justification)

    async def mark_complete(summary: str, runtime: ToolRuntime) -> str:
        return ws.complete(agent_of(runtime), summary)

    specs = [
        (read_artifact, ReadArtifactInput, "Read a named artifact from the workspace (its latest version)."),
        (write_artifact, WriteArtifactInput, "Save an artifact for other teams (a new version if the name exists)."),
        (list_artifacts, ListArtifactsInput, "List all available artifacts."),
        (send_message, SendMessageInput, "Send a message to another team."),
        (request_additional_work, RequestWorkInput, "Request another (earlier) team to produce specific NEW output."),
        (
            request_team_redo,
            RequestRedoInput,
            "Request another (earlier) team to REDO their work from scratch. EXPENSIVE.",
        ),
        (mark_complete, MarkCompleteInput, "Signal your work is done, with a brief summary."),
    ]
    tools: list[BaseTool] = []
    for fn, schema, doc in specs:
        # real types, not postponed (string) annotations: LangChain resolves a tool's hints on every call
        fn.__annotations__ = {
            **{k: str for k in schema.model_fields},
            **({"runtime": ToolRuntime} if schema.model_fields else {}),
            "return": str,
        }
        tools.append(StructuredTool.from_function(coroutine=fn, name=fn.__name__, args_schema=schema, description=doc))
    return ([code_tool] if code_tool is not None else []) + tools


def expected_artifact(team: str) -> str:
    return ARTIFACT[team]
