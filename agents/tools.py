"""Tool-using agents: a bounded tool loop over LangChain tools, charged and traced.

A tool-using agent is one model (the model service's, for its agent id) with a set of LangChain
tools. :class:`ToolAgent` runs its loop: ask the model; if it calls tools, run them and hand the
results back; repeat until it gives a final answer or a guard stops it. The loop is a LangGraph
graph (:meth:`ToolAgent.build_graph`): a ``model`` node, a ``tools`` node and a conditional edge,
:func:`route`, holding the guards, which sends the loop to the tools, back to the model, or to a
``finish`` node that records why it stopped:

* ``final``: the model answered without a tool call;
* ``completed``: a tool named in ``finish_tools`` (e.g. ``mark_complete``) ran without error: the
  loop ends after that answer's calls, its final text is that tool's result;
* ``step_cap``: ``max_steps`` model calls were made (the tools the last one asked for were run);
* ``credit_cap``: the agent's next call could pass its token or credit cap (checked BEFORE the
  call, with the call's upper bound, so the cap is never passed by a model call);
* ``repeated_call``: the model asked for a tool call identical (same name, same arguments) to an
  earlier one in this loop: it is not run, the loop stops instead of spinning;
* ``malformed``: (JSON tool-call grammar) more than ``max_malformed`` answers could not be
  parsed; each one was fed back to the model with the error first.

Every model call goes through :meth:`LLMService.charged_call`, the same path as structured
decisions: a cache replay is charged its stored usage if it fits the budget, a live call reserves
its upper bound in the ledger BEFORE it is made and commits its validated usage. Tool errors
(exceptions, bad arguments, an unknown tool name) are answered to the model as ``ToolMessage``\\s
with ``status="error"`` and the loop goes on; :class:`BudgetExhausted`, :class:`ModelUnavailable`
and :class:`SandboxError` (``SandboxUnavailable``, a closed pool) propagate (the graph ends at its
last checkpoint) and carry the loop's partial result as ``exc.tool_loop``.

How the model is asked for tools (``protocol``):

* ``"native"``: ``model.bind_tools(tools)`` (OpenAI-compatible endpoints, scripted models);
* ``"json"``: a JSON tool-call grammar for models without native tool calling, the local
  llama.cpp model in particular: the model must answer one JSON object, ``{"tool": NAME, "args":
  {...}}`` or ``{"final": TEXT}``, constrained by a JSON schema built from the tools' argument
  schemas (:func:`tool_call_schema`; llama.cpp turns it into a grammar);
* ``"auto"``: what the model's provider adapter says (``agents/calls.py``): ``"json"`` for the
  local llama.cpp model and models without ``bind_tools``, else native.

Tracing and checkpoints: the loop is one graph run named after the agent id; each step is a node
run under it (``model`` with its ``llm`` run, ``tools`` with a ``tool`` run per call). Run from a
graph node with the node's config, the loop is that graph's subgraph: its steps are checkpointed by
the parent's checkpointer. Tools run through LangGraph's ``ToolNode`` (one call at a time, in the
order the model gave them), so tools may take LangGraph's ``ToolRuntime`` (the runtime context, the
call's config); :func:`caller_of` gives a tool the calling agent.

See docs/tool-agents.md.
"""

from __future__ import annotations

import copy
import inspect
import json
import operator
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Annotated, Any, Literal, TypedDict, Union

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.channels.delta import DeltaChannel
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, ToolRuntime
from langgraph.prebuilt.tool_node import ToolInvocationError
from langgraph.runtime import Runtime
from langgraph.types import Send

from cooplab.agents.cache import cache_key
from cooplab.agents.calls import ProviderAdapter, adapter_type
from cooplab.agents.decisions import (
    LLMService,
    ModelUnavailable,
    decoding_schema,
    parse_json,
)
from cooplab.agents.toolforms import kept_form
from cooplab.agents.usage import input_bound
from cooplab.graphs.context import CoopContext
from cooplab.graphs.ledger import BudgetExhausted, Entry, checked_amount
from cooplab.graphs.nodes import charged
from cooplab.graphs.state import SNAPSHOT_EVERY, AppendLog, extend
from cooplab.graphs.tracing.labels import call_labels, labelled
from cooplab.limits import clean_strings
from cooplab.sandbox.models import SandboxConfig, SandboxError
from cooplab.sandbox.tool import RunCodeInput

StopReason = Literal["final", "completed", "step_cap", "credit_cap", "repeated_call", "malformed"]
ToolProtocol = Literal["auto", "native", "json"]

#: errors that end the run (at the graph level) instead of being answered to the model: the budget,
#: the model endpoint, and the sandbox itself (no daemon or image, a closed pool: not the model's doing)
FATAL_ERRORS: tuple[type[BaseException], ...] = (BudgetExhausted, ModelUnavailable, SandboxError)
#: tokens a provider may add per tool definition and per tool call in the history (the function
#: wrapper, type markers) beyond the bytes of their JSON; part of a call's input upper bound
TOOL_OVERHEAD = 32
CALLER_KEY = "cooplab_tool_caller"
JSON_INSTRUCTIONS = (
    'Reply with one JSON object only: {"tool": "<tool name>", "args": {<arguments>}} to call a tool, '
    'or {"final": "<your answer>"} when you are done.'
)


class ToolSetupError(RuntimeError):
    """A tool cannot work in this run (e.g. ``run_code`` without a sandbox pool in the context): a
    mistake of the program, not of the model, so it propagates."""


class MalformedToolAnswer(ValueError):
    """A JSON-protocol answer that is neither a tool call nor a final answer."""


# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToolLoopLimits:
    """The guards of one loop. ``max_tokens``/``max_cost`` are the agent's caps (tokens in + out;
    credit in USD, model calls and other charges such as sandbox seconds), counted over this loop
    (``cap_scope="loop"``) or over everything the agent was charged in the run (``"run"``)."""

    max_steps: int = 8
    max_tokens: int | None = None
    max_cost: Decimal | None = None
    cap_scope: Literal["loop", "run"] = "loop"
    max_malformed: int = 2
    max_calls_per_step: int = 8
    max_tokens_per_call: int | None = None  # output cap of one model call (default: the model's)

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_calls_per_step"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        for name in ("max_malformed",):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
        for name in ("max_tokens", "max_tokens_per_call"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be an integer >= 1 or None, got {v!r}")
        if self.max_cost is not None:
            object.__setattr__(self, "max_cost", checked_amount(self.max_cost, "max_cost"))
        if self.cap_scope not in ("loop", "run"):
            raise ValueError(f"cap_scope must be 'loop' or 'run', got {self.cap_scope!r}")


@dataclass
class ToolCaller:
    """Who is calling a tool: handed to tools in their config (:func:`caller_of`), with the
    runtime context, so that a tool charges the right agent in the run's ledger."""

    agent_id: str
    context: CoopContext
    team: str | None = None
    round: int | None = None
    phase: str = "tools"
    entries: list[Entry] = field(default_factory=list)

    def charge_units(self, kind: str, units: Any, **kw: Any) -> Entry | None:
        """Charge a non-token ``kind`` to this agent (see :meth:`Ledger.charge_units`); None
        when the run has no ledger."""
        ledger = self.context.ledger
        if ledger is None:
            return None
        e = ledger.charge_units(
            kind, units, agent=self.agent_id, team=self.team, round=self.round, phase=self.phase, **kw
        )
        self.entries.append(e)
        return e


def caller_of(runtime: ToolRuntime) -> ToolCaller:
    """The agent calling a tool. Inside a :class:`ToolAgent` loop it is passed in the config; a
    tool run by a plain LangGraph ``ToolNode`` falls back to the config's ``agent_id`` (metadata or
    configurable) or the graph node's name, and the runtime context."""
    cfg = runtime.config or {}
    caller = (cfg.get("configurable") or {}).get(CALLER_KEY)
    if isinstance(caller, ToolCaller):
        return caller
    meta = cfg.get("metadata") or {}
    agent = (cfg.get("configurable") or {}).get("agent_id") or meta.get("agent_id") or meta.get("langgraph_node")
    ctx = runtime.context
    if not isinstance(agent, str) or not agent:
        raise ToolSetupError(
            "this tool needs to know its agent: run it in a ToolAgent loop or set configurable agent_id"
        )
    if not isinstance(ctx, CoopContext):
        raise ToolSetupError("this tool needs the runtime context (CoopContext); none was given")
    return ToolCaller(agent, ctx)


# --------------------------------------------------------------------------------------------
# the JSON tool-call grammar (models without native tool calling: the local llama.cpp model)
def _kept_args(tool: BaseTool) -> dict[str, Any]:
    """The tool's argument schema from its kept form (shared: read, never changed)."""
    return kept_form(tool)["function"].get("parameters") or {"type": "object", "properties": {}}


def tool_args_schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema of a tool's arguments as a model sees them (injected arguments excluded)."""
    return copy.deepcopy(_kept_args(tool))


def tool_call_schema(tools: Sequence[BaseTool], *, for_decoder: bool = False) -> dict[str, Any]:
    """The JSON schema of one answer: ``{"tool": NAME, "args": {...}}`` for each tool, or
    ``{"final": TEXT}``. ``for_decoder``: bounded numbers become enums (llama.cpp's grammar
    ignores ``minimum``/``maximum``; see ``decoding_schema``)."""
    variants = []
    for t in tools:
        args = tool_args_schema(t)
        if for_decoder:
            args = decoding_schema(args)
        variants.append(
            {
                "type": "object",
                "properties": {"tool": {"const": t.name}, "args": args},
                "required": ["tool", "args"],
                "additionalProperties": False,
            }
        )
    variants.append(
        {
            "type": "object",
            "properties": {"final": {"type": "string"}},
            "required": ["final"],
            "additionalProperties": False,
        }
    )
    return {"oneOf": variants}


def parse_tool_answer(text: str, *, call_id: str) -> AIMessage:
    """A JSON-protocol answer as an ``AIMessage``: with one tool call (id ``call_id``) or, for
    ``{"final": TEXT}``, none. Anything else raises :class:`MalformedToolAnswer` with a message
    that is fed back to the model."""
    try:
        data = parse_json(text)
    except ValueError as exc:
        raise MalformedToolAnswer(str(exc)) from None
    if not isinstance(data, dict):
        raise MalformedToolAnswer("the answer must be a JSON object")
    keys = set(data)
    if keys == {"final"}:
        if not isinstance(data["final"], str):
            raise MalformedToolAnswer("'final' must be a string")
        return AIMessage(content=text)
    if keys == {"tool", "args"}:
        name, args = data["tool"], data["args"]
        if not isinstance(name, str) or not name:
            raise MalformedToolAnswer("'tool' must be the name of a tool")
        if not isinstance(args, dict):
            raise MalformedToolAnswer("'args' must be a JSON object of the tool's arguments")
        return AIMessage(content=text, tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])
    raise MalformedToolAnswer(f"expected the keys 'tool' and 'args', or 'final'; got {sorted(keys)}")


def final_text(msg: AIMessage, protocol: str) -> str:
    """The final answer of a message without tool calls."""
    text = _text_of(msg)
    if protocol == "json":
        try:
            data = parse_json(text)
            if isinstance(data, dict) and isinstance(data.get("final"), str):
                return data["final"]
        except ValueError:
            pass
    return text


def render_json_protocol(messages: Sequence[BaseMessage], tools: Sequence[BaseTool]) -> list[BaseMessage]:
    """The conversation as a model without native tool calling sees it: the tools and the answer
    format in the system message (after the first of the leading system messages, before the
    others: those carry what changes from call to call), tool calls as the JSON the model wrote,
    tool results as user messages."""
    lines = ["You can use these tools:"]
    for t in tools:
        lines.append(f"- {t.name}: {t.description}\n  args schema: {json.dumps(_kept_args(t), sort_keys=True)}")
    lines.append(JSON_INSTRUCTIONS)
    preamble = "\n".join(lines)
    out: list[BaseMessage] = []
    rest = list(messages)
    lead = []  # the leading system messages: the first, the tools, then the others (the live lines, which change most)
    while rest and isinstance(rest[0], SystemMessage):
        lead.append(_text_of(rest.pop(0)))
    out.append(SystemMessage(content="\n\n".join([lead[0], preamble, *lead[1:]] if lead else [preamble])))
    for m in rest:
        if isinstance(m, ToolMessage):
            out.append(HumanMessage(content=f"Result of {m.name or 'the tool'}:\n{_text_of(m)}"))
        elif isinstance(m, AIMessage) and m.tool_calls and not _text_of(m).strip():
            c = m.tool_calls[0]
            out.append(AIMessage(content=json.dumps({"tool": c["name"], "args": c["args"]})))
        else:
            out.append(m)
    return out


# --------------------------------------------------------------------------------------------
@dataclass
class ToolLoopResult:
    """What one loop did. ``messages`` are the new messages (the model's answers, tool results,
    feedback on malformed answers), for a messages channel; :meth:`record` is a row for a log."""

    agent_id: str
    team: str | None
    round: int | None
    phase: str
    model: str
    protocol: str
    final: str | None = None
    stop_reason: StopReason | None = None
    stop_detail: str = ""
    steps: int = 0  # model calls
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    malformed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)
    cached_calls: int = 0
    messages: list[BaseMessage] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)

    def account(self, entry: Entry) -> None:
        self.entries.append(entry)
        self.input_tokens += entry.input_tokens
        self.output_tokens += entry.output_tokens
        self.cost += Decimal(entry.cost)
        self.cached_calls += int(entry.cached)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def record(self) -> dict[str, Any]:
        return {
            "agent": self.agent_id,
            "team": self.team,
            "round": self.round,
            "phase": self.phase,
            "model": self.model,
            "protocol": self.protocol,
            "stop_reason": self.stop_reason,
            "stop_detail": self.stop_detail,
            "final": self.final,
            "steps": self.steps,
            "n_tool_calls": len(self.tool_calls),
            "tool_calls": [dict(c) for c in self.tool_calls],
            "malformed": self.malformed,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": str(self.cost),
            "cached_calls": self.cached_calls,
        }


def _text_of(m: BaseMessage) -> str:
    c = m.content
    return c if isinstance(c, str) else m.text


def _args_text(args: Any) -> str:
    """A call's arguments as canonical JSON text (the records' ``args``; the repeat guard compares it)."""
    return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


def _message_key(m: BaseMessage) -> tuple:
    """What of a message determines an answer (the cache key's view of the history)."""
    calls = [[c["name"], c["args"], c.get("id")] for c in getattr(m, "tool_calls", None) or []]
    return (m.type, _text_of(m), calls, getattr(m, "tool_call_id", None), getattr(m, "name", None))


def _envelope(msg: BaseMessage) -> str:
    """A native answer as the text that is cached (and replayed): content and tool calls."""
    return json.dumps(
        {
            "content": _text_of(msg),
            "tool_calls": [
                {"name": c["name"], "args": c["args"], "id": c.get("id")}
                for c in getattr(msg, "tool_calls", None) or []
            ],
            "invalid_tool_calls": [
                {"name": c.get("name"), "args": c.get("args"), "id": c.get("id"), "error": c.get("error")}
                for c in getattr(msg, "invalid_tool_calls", None) or []
            ],
        },
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )


def _from_envelope(text: str, step: int) -> AIMessage:
    try:
        d = clean_strings(json.loads(text))
        calls = [
            {
                "name": str(c["name"]),
                "args": c["args"] if isinstance(c["args"], dict) else {},
                "id": c.get("id") or f"call_{step}_{i}",
                "type": "tool_call",
            }
            for i, c in enumerate(d.get("tool_calls") or [])
        ]
        invalid = [
            {
                "name": c.get("name"),
                "args": c.get("args"),
                "id": c.get("id") or f"invalid_{step}_{i}",
                "error": c.get("error"),
                "type": "invalid_tool_call",
            }
            for i, c in enumerate(d.get("invalid_tool_calls") or [])
        ]
        return AIMessage(content=str(d.get("content") or ""), tool_calls=calls, invalid_tool_calls=invalid)
    except (ValueError, KeyError, TypeError, AttributeError):  # a foreign cache row: the text as a final answer
        return AIMessage(content=text)


def _tool_error_text(e: Exception) -> str:
    """ToolNode's error handler: the text answered to the model; fatal errors propagate."""
    if isinstance(e, FATAL_ERRORS) or isinstance(e, ToolSetupError):
        raise e
    if isinstance(e, ToolInvocationError):
        return e.message
    return f"Error: {type(e).__name__}: {e}\n Please fix your mistakes."


def _not_run(call: Mapping[str, Any], text: str, step: int) -> tuple[ToolMessage, dict[str, Any]]:
    """The answer to a tool call that is not run (``text`` starting "not run") or cannot be
    (arguments that do not parse), and its record."""
    msg = ToolMessage(content=text, tool_call_id=call.get("id") or "", name=call.get("name") or "", status="error")
    rec = {
        "step": step,
        "id": call.get("id"),
        "name": call.get("name"),
        "args": _args_text(call.get("args")),
        "status": "not_run" if text.startswith("not run") else "error",
        "seconds": 0.0,
    }
    return msg, rec


# --------------------------------------------------------------------------------------------
# the loop as a LangGraph graph: its state, the guards on its edges, and the result it leaves
#: an append-only channel (see :data:`cooplab.graphs.state.AppendLog`): a checkpoint holds one step's messages
MessageLog = Annotated[list[BaseMessage], DeltaChannel(extend, snapshot_frequency=SNAPSHOT_EVERY)]


class ToolLoopState(TypedDict):
    """The state of one tool loop (the channels of its graph; :meth:`ToolAgent.arun` sets every one).
    Under a parent graph's checkpointer every step is a checkpoint of it; :func:`loop_result` turns it
    into the :class:`ToolLoopResult`."""

    messages: MessageLog  #: the prompt, then every message the loop adds
    n_prompt: int  #: how many of ``messages`` are the prompt
    agent_id: str
    team: str | None
    round: int | None
    phase: str
    model: str  #: the model's id
    protocol: str  #: "native" or "json"
    steps: int  #: model calls made
    malformed: int  #: JSON-protocol answers that did not parse
    last: str  #: what happened last: "start", "answer" (a model answer), "malformed", "tools" (tools ran)
    final: str | None
    note: str | None  #: the ``notes`` text due before the next model call
    last_note: str | None  #: the last note added to the conversation
    #: under a token or credit cap: what the agent has spent (over the caps' scope) and the next
    #: model call's upper bound, {"cost", "tokens", "next_cost", "next_tokens"} (costs as Decimal text)
    spending: dict[str, Any] | None
    tool_calls: AppendLog  #: one record per tool call (answered, failed or not run)
    entries: AppendLog  #: this loop's ledger entries as rows (model calls, then the tools' charges)
    stop_reason: str | None
    stop_detail: str


def loop_result(state: Mapping[str, Any]) -> ToolLoopResult:
    """The :class:`ToolLoopResult` a loop's state stands for (a finished loop's, or an interrupted
    one's: ``stop_reason`` None)."""
    res = ToolLoopResult(
        state["agent_id"],
        state.get("team"),
        state.get("round"),
        state["phase"],
        state["model"],
        state["protocol"],
        final=state.get("final"),
        stop_reason=state.get("stop_reason"),
        stop_detail=state.get("stop_detail") or "",
        steps=state.get("steps", 0),
        tool_calls=[dict(r) for r in state.get("tool_calls") or []],
        malformed=state.get("malformed", 0),
        messages=list(state["messages"][state["n_prompt"] :]),
    )
    for row in state.get("entries") or []:
        res.account(Entry.from_dict(row))
    return res


_APPEND_KEYS = frozenset({"messages", "tool_calls", "entries"})


def _merged(state: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` with a node's ``update`` applied (the append-only channels extended), for a
    partial result or a note before the graph has applied it."""
    out = dict(state)
    for k, v in update.items():
        out[k] = [*(state.get(k) or []), *v] if k in _APPEND_KEYS else v
    return out


def _due_note(state: Mapping[str, Any]) -> HumanMessage | None:
    """The note to add before the next model call: one that is new since the last one added."""
    note = state.get("note")
    return HumanMessage(content=note) if note and note != state.get("last_note") else None


@dataclass(frozen=True)
class Stop:
    """The end of a loop, as the edge decides it: the reason, and what the loop records with it
    (the final answer; answers to calls that are not run; a note that was due)."""

    reason: StopReason
    detail: str = ""
    final: str | None = None
    messages: tuple[BaseMessage, ...] = ()
    tool_calls: tuple[dict[str, Any], ...] = ()

    def update(self) -> dict[str, Any]:
        """The state update that records this stop."""
        upd: dict[str, Any] = {"stop_reason": self.reason, "stop_detail": self.detail}
        if self.final is not None:
            upd["final"] = self.final
        if self.messages:
            upd["messages"] = list(self.messages)
        if self.tool_calls:
            upd["tool_calls"] = [dict(r) for r in self.tool_calls]
        return upd


def route(state: Mapping[str, Any], limits: ToolLoopLimits) -> str | Stop:
    """The loop's conditional edge: where to go after ``state``'s last step. ``"tools"`` (run the
    calls of the model's answer), ``"model"`` (the next model call) or a :class:`Stop`.

    A pure function of the state and the limits (the ledger's view for the credit cap is the
    state's ``spending``, set by the step before). The guards, in order: a finishing tool
    succeeded (``completed``); the answer has no tool call (``final``); it repeats an answered call
    (``repeated_call``: none of its calls run); too many malformed answers (``malformed``);
    ``max_steps`` calls made (``step_cap``); the next call's upper bound could pass a cap
    (``credit_cap``)."""
    last = state.get("last", "start")
    if last == "answer":
        ai = state["messages"][-1]
        calls, invalid = list(ai.tool_calls), list(ai.invalid_tool_calls)
        if not calls and not invalid:
            return Stop("final", final=final_text(ai, state["protocol"]))
        seen = {(r["name"], r["args"]) for r in state.get("tool_calls") or [] if r["status"] != "not_run"}
        sigs = [(c.get("name"), _args_text(c.get("args"))) for c in [*calls, *invalid]]
        repeated = [i for i, s in enumerate(sigs) if s in seen or s in sigs[:i]]
        if not repeated:
            return "tools"
        answers = [
            _not_run(
                c,
                "not run: this call repeats an earlier identical call (same tool, same arguments); "
                "the tool loop stopped",
                state["steps"],
            )
            for c in [*calls, *invalid]
        ]
        return Stop(
            "repeated_call",
            f"{sigs[repeated[0]][0]} with the same arguments as before",
            messages=tuple(m for m, _ in answers),
            tool_calls=tuple(r for _, r in answers),
        )
    if last == "tools" and state.get("final") is not None:
        return Stop("completed", "a finishing tool succeeded")
    if last == "malformed" and state["malformed"] > limits.max_malformed:
        return Stop("malformed", f"{state['malformed']} malformed answers (limit {limits.max_malformed})")
    if state["steps"] >= limits.max_steps:
        return Stop("step_cap", f"{limits.max_steps} model calls")
    if limits.max_cost is not None or limits.max_tokens is not None:
        s = state.get("spending")
        if not isinstance(s, Mapping):
            raise ValueError("a loop under a token or credit cap needs its state's 'spending' before a model call")
        note = _due_note(state)  # added before the call, so it is part of the loop that stopped
        cost, next_cost = Decimal(s["cost"]), Decimal(s["next_cost"])
        if limits.max_cost is not None and cost + next_cost > limits.max_cost:
            return Stop(
                "credit_cap",
                f"spent ${cost} of ${limits.max_cost}; the next call may cost up to ${next_cost}",
                messages=(note,) if note else (),
            )
        if limits.max_tokens is not None and s["tokens"] + s["next_tokens"] > limits.max_tokens:
            return Stop(
                "credit_cap",
                f"used {s['tokens']} of {limits.max_tokens} tokens; the next call may use up to {s['next_tokens']}",
                messages=(note,) if note else (),
            )
    return "model"


class _Edge(Runnable):
    """:func:`route` as the graph's conditional edge. A runnable of ours because LangGraph traces a
    function edge as a run of its own at every step, its input the whole state: a third of a
    loop's trace, for a decision its next node's run shows anyway."""

    name = "route"

    def __init__(self, limits: ToolLoopLimits):
        self.limits = limits

    def invoke(self, state: Any, config: RunnableConfig | None = None, **kwargs: Any) -> str | Send:
        r = route(state, self.limits)
        return r if isinstance(r, str) else Send("finish", r.update())

    async def ainvoke(self, state: Any, config: RunnableConfig | None = None, **kwargs: Any) -> str | Send:
        return self.invoke(state)


class _Step:
    """A step of the loop (a bound method of its agent) as a callable object rather than a function:
    at every compile LangGraph disassembles a node function's bytecode, and the functions it
    reaches, looking for subgraphs to checkpoint (``find_subgraph_pregel``), which was two thirds of
    compiling the loop (4.5 of 6.8 ms, one compile per agent and phase of a science run). An
    object is not inspected; the loop's steps call no graph of their own (the model and the tools
    are called, not run as subgraphs)."""

    __slots__ = ("step",)

    def __init__(self, step: Callable[..., Awaitable[dict[str, Any]]]):
        self.step = step

    # Unannotated on purpose: add_node evaluates a callable's annotations (``typing.get_type_hints``,
    # which here also walks the whole ToolLoopState) to infer the node's input schema, a third of a
    # compile; unannotated, the node takes the graph's state schema, the same. The arguments are
    # (ToolLoopState, RunnableConfig, Runtime[CoopContext]); the result is a dict of state updates.
    async def __call__(self, state, config, runtime):  # noqa: ANN001, ANN204
        return await self.step(state, config, runtime)


class _Finish:
    """The loop's last node: records the :class:`Stop` its edge sent (a conditional edge cannot
    write the state itself). Async: LangGraph runs a sync node of an async run in a worker thread.
    An object rather than a function for the same reason as :class:`_Step`."""

    __slots__ = ()

    async def __call__(self, stop):  # noqa: ANN001, ANN204 (a dict of state updates; unannotated as _Step's)
        return stop


def _interrupted(exc: BaseException, state: Mapping[str, Any]) -> None:
    """Attach the loop so far to a run-ending error, for the caller to keep (``exc.tool_loop``)."""
    res = loop_result(state)
    res.stop_reason, res.stop_detail = None, f"{type(exc).__name__}: {exc}"
    exc.tool_loop = res  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------
class ToolAgent:
    """One agent with tools (see the module docstring). Reusable: every :meth:`arun` is one loop,
    one run of :attr:`graph`."""

    def __init__(
        self,
        agent_id: str,
        tools: Sequence[BaseTool],
        *,
        team: str | None = None,
        phase: str = "tools",
        limits: ToolLoopLimits | None = None,
        protocol: ToolProtocol = "auto",
        model_key: str | None = None,
        finish_tools: Sequence[str] = (),
        notes: Callable[[ToolLoopResult], str | None] | None = None,
    ):
        if not isinstance(agent_id, str) or not agent_id.strip():
            raise ValueError(f"an agent id must be a non-empty string, got {agent_id!r}")
        if protocol not in ("auto", "native", "json"):
            raise ValueError(f"protocol must be auto, native or json, got {protocol!r}")
        self.agent_id = agent_id
        self.team = team
        self.phase = phase
        self.limits = limits or ToolLoopLimits()
        self.protocol = protocol
        self.model_key = model_key
        self.tools = list(tools)
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique, got {names}")
        unknown = set(finish_tools) - set(names)
        if unknown:
            raise ValueError(f"finish_tools {sorted(unknown)} are not among the tools {names}")
        #: tools that end the loop when they succeed (``mark_complete``)
        self.finish_tools = frozenset(finish_tools)
        #: called before every model call: a text returned (new since the last one) is added to the
        #: conversation as a user message first (e.g. a budget warning once the pool gets low)
        self.notes = notes
        self.tool_node = ToolNode(self.tools, handle_tool_errors=_tool_error_text)
        self._tool_specs = [kept_form(t) for t in self.tools]  # shared forms: read, never changed
        self._tools_id = cache_key(tools=self._tool_specs)[:16]
        self._bound: dict[int, Any] = {}
        self._json_schemas: tuple[dict[str, Any], dict[str, Any]] | None = (
            None  # (schema, decoder's) of the JSON protocol
        )
        #: the loop as a compiled LangGraph graph (see :meth:`build_graph`)
        self.graph = self.build_graph()

    # -- protocol -------------------------------------------------------------------------
    def protocol_for(self, model: BaseChatModel) -> str:
        if self.protocol != "auto":
            return self.protocol
        return adapter_type(model).tool_protocol(model)

    def _bind(self, model: BaseChatModel) -> Any:
        b = self._bound.get(id(model))
        if b is None:
            b = self._bound[id(model)] = (model, model.bind_tools(self.tools))
        return b[1]

    def _request(
        self, adapter: ProviderAdapter, model: Any, proto: str, convo: list[BaseMessage], key: str | None
    ) -> tuple[Any, list[BaseMessage], dict, int]:
        """(runnable, messages sent, call kwargs, input bound) of the next model call (``key``
        None: for its bound only)."""
        kwargs = adapter.call_options(key=key or "0" * 8, phase=self.phase, max_tokens=self.limits.max_tokens_per_call)
        if proto == "json":
            sent = render_json_protocol(convo, self.tools)
            if self._json_schemas is None:
                self._json_schemas = (tool_call_schema(self.tools), tool_call_schema(self.tools, for_decoder=True))
            structured = adapter.structured(*self._json_schemas)
            kwargs.update(structured)
            return (
                model,
                sent,
                kwargs,
                input_bound(sent, *structured.values()) + adapter.extra_input(tools="tools" in structured),
            )
        extra = [m.tool_calls for m in convo if isinstance(m, AIMessage) and m.tool_calls]
        extra += [m.tool_call_id for m in convo if isinstance(m, ToolMessage)]
        n_calls = sum(len(c) for c in extra if isinstance(c, list))
        bound = (
            input_bound(convo, self._tool_specs, *extra)
            + TOOL_OVERHEAD * (len(self.tools) + n_calls)
            + adapter.extra_input(tools=True)
        )
        return self._bind(model), convo, kwargs, bound

    # -- the graph ----------------------------------------------------------------------------
    def build_graph(self) -> Any:
        """The loop as a LangGraph graph, compiled under the agent id (its run's name):

        * ``model``: one model call through the model service's charged path (cache, ledger,
          retries), its answer parsed (native tool calls, or the JSON grammar);
        * ``tools``: the answer's tool calls, one at a time in the model's order, each through
          LangGraph's ``ToolNode`` (tool runtime and injected arguments, validation, error texts).
          A node of ours around it rather than ``ToolNode`` itself, which runs an answer's calls
          concurrently and knows neither the per-answer limit, the records, the tools' charges,
          the finishing tools nor the partial result a run-ending error must carry;
        * ``finish``: records the stop its edge decided.

        Every node is followed by the same conditional edge, :func:`route`, which holds the
        guards. Compiled without a checkpointer: run inside a graph node with the node's config,
        the loop is a subgraph of that graph, its steps checkpointed by the parent's checkpointer
        (under a namespace of its own: see :meth:`arun`) and traced under the node's run."""
        g = StateGraph(ToolLoopState, context_schema=CoopContext)
        # LangGraph passes (state, config, runtime) positionally, and "finish" gets the Stop its Send
        # carries, not the state: its StateNode protocols name neither
        g.add_node("model", _Step(self._model_step))  # pyright: ignore[reportArgumentType]
        g.add_node("tools", _Step(self._tools_step))  # pyright: ignore[reportArgumentType]
        g.add_node("finish", _Finish())  # pyright: ignore[reportArgumentType]
        edge = _Edge(self.limits)
        g.add_conditional_edges(START, edge, ["model", "finish"])
        g.add_conditional_edges("model", edge, ["model", "tools", "finish"])
        g.add_conditional_edges("tools", edge, ["model", "finish"])
        g.add_edge("finish", END)
        return g.compile(name=self.agent_id)

    def _before_call(self, state: Mapping[str, Any], context: CoopContext) -> dict[str, Any]:
        """What a step that may be followed by a model call sets for it (a state update): the note
        due before the call and, under a token or credit cap, the ``spending`` the edge checks: the
        agent's spending so far and the call's upper bound, the note included."""
        upd: dict[str, Any] = {}
        if self.notes is not None:
            upd["note"] = self.notes(loop_result(state))
        lim = self.limits
        if lim.max_cost is None and lim.max_tokens is None:
            return upd
        state = {**state, **upd}
        llm: LLMService = context.llm  # type: ignore[assignment]
        spec, model = llm.model_for(self.model_key or self.agent_id)
        note = _due_note(state)
        in_bound = self._request(
            llm.adapter(spec, model), model, state["protocol"], [*state["messages"], *([note] if note else [])], None
        )[3]
        out_bound = int(lim.max_tokens_per_call or spec.max_tokens)
        if lim.cap_scope == "loop":
            so_far = loop_result(state)
            cost, tokens = so_far.cost, so_far.tokens
        else:
            cost, tokens = llm.ledger.agent_spent(self.agent_id)  # the context's ledger is the service's
        upd["spending"] = {
            "cost": str(cost),
            "tokens": tokens,
            "next_cost": str(llm.ledger.cost(spec.id, in_bound, out_bound)),
            "next_tokens": in_bound + out_bound,
        }
        return upd

    async def _model_step(
        self, state: ToolLoopState, config: RunnableConfig, runtime: Runtime[CoopContext]
    ) -> dict[str, Any]:
        llm: LLMService = runtime.context.llm  # type: ignore[union-attr]
        spec, model = llm.model_for(self.model_key or self.agent_id)
        proto, steps = state["protocol"], state["steps"]
        upd: dict[str, Any] = {"messages": []}
        note = _due_note(state)
        if note is not None:
            upd["messages"].append(note)
            upd["last_note"] = state["note"]
        convo = [*state["messages"], *upd["messages"]]
        key = cache_key(
            model=spec.identity(),
            messages=[_message_key(m) for m in convo],
            agent=self.agent_id,
            team=self.team,
            round=state["round"],
            phase=self.phase,
            seed=llm.seed,
            attempt=steps,
            tools=self._tools_id,
            protocol=proto,
            max_tokens=self.limits.max_tokens_per_call,
        )
        runnable, sent, kwargs, in_bound = self._request(llm.adapter(spec, model), model, proto, convo, key)
        try:
            resp, cached, entry = await llm.charged_call(
                spec=spec,
                runnable=runnable,
                key=key,
                messages=sent,
                kwargs=kwargs,
                input_bound=in_bound,
                output_bound=int(self.limits.max_tokens_per_call or spec.max_tokens),
                agent_id=self.agent_id,
                round=state["round"],
                phase=self.phase,
                config=config,
                team=self.team,
                to_text=None if proto == "json" else _envelope,
                from_text=None if proto == "json" else (lambda text: _from_envelope(text, steps + 1)),
            )
        except FATAL_ERRORS as exc:
            _interrupted(exc, _merged(state, upd))
            raise
        steps += 1
        upd.update(steps=steps, entries=[entry.as_dict()], last="answer")
        if proto == "json":
            try:
                ai = parse_tool_answer(resp.text, call_id=f"call_{steps}")
            except MalformedToolAnswer as exc:
                upd["messages"] += [
                    AIMessage(content=resp.text or "(empty)"),
                    HumanMessage(content=f"That answer was invalid: {exc}. {JSON_INSTRUCTIONS}"),
                ]
                upd.update(malformed=state["malformed"] + 1, last="malformed")
                upd.update(self._before_call(_merged(state, upd), runtime.context))
                return upd
        else:
            ai = _from_envelope(resp.text, steps)
        ai.usage_metadata = {
            "input_tokens": resp.input_tokens,
            "output_tokens": resp.output_tokens,
            "total_tokens": resp.input_tokens + resp.output_tokens,
        }
        ai.response_metadata = {"model": spec.id, "cached": cached}
        upd["messages"].append(ai)
        return upd

    async def _tools_step(
        self, state: ToolLoopState, config: RunnableConfig, runtime: Runtime[CoopContext]
    ) -> dict[str, Any]:
        history, ai = state["messages"][:-1], state["messages"][-1]
        assert isinstance(ai, AIMessage), "the edge routes to tools only after a model answer with tool calls"
        step, limit = state["steps"], self.limits.max_calls_per_step
        caller = ToolCaller(self.agent_id, runtime.context, self.team, state["round"], self.phase)
        tool_cfg: RunnableConfig = {
            **labelled(
                config,
                call_labels(
                    config,
                    agent=self.agent_id,
                    society=None,
                    round=state["round"],  # type: ignore[typeddict-item]
                    phase=self.phase,
                    team=self.team,
                ),
            ),
            "configurable": {**(config.get("configurable") or {}), CALLER_KEY: caller},
        }
        msgs: list[BaseMessage] = []
        recs: list[dict[str, Any]] = []
        final = None
        try:
            for i, c in enumerate(ai.tool_calls):
                if i >= limit:
                    m, r = _not_run(c, f"not run: at most {limit} tool calls per answer", step)
                    msgs.append(m)
                    recs.append(r)
                    continue
                t0 = time.perf_counter()
                out = await self.tool_node.ainvoke(
                    {"messages": [*history, AIMessage(content="", tool_calls=[c])]}, tool_cfg, runtime=runtime
                )
                seconds = time.perf_counter() - t0
                tm = out["messages"][0] if isinstance(out, dict) else out[0]
                if not isinstance(tm, ToolMessage):  # a tool returning a Command: keep the loop well-formed
                    tm = ToolMessage(content=str(tm), tool_call_id=c["id"], name=c["name"])
                msgs.append(tm)
                recs.append(
                    {
                        "step": step,
                        "id": c["id"],
                        "name": c["name"],
                        "args": _args_text(c["args"]),
                        "status": tm.status,
                        "seconds": round(seconds, 6),
                    }
                )
                if c["name"] in self.finish_tools and tm.status != "error" and final is None:
                    final = _text_of(tm)
        except FATAL_ERRORS as exc:
            _interrupted(
                exc,
                _merged(
                    state, {"messages": msgs, "tool_calls": recs, "entries": [e.as_dict() for e in caller.entries]}
                ),
            )
            raise
        for c in ai.invalid_tool_calls:  # after the valid calls: the message's order (tool_calls, invalid_tool_calls)
            m, r = _not_run(
                c,
                f"Error: the arguments of {c.get('name')} could not be parsed: {c.get('error') or c.get('args')}",
                step,
            )
            msgs.append(m)
            recs.append(r)
        upd: dict[str, Any] = {
            "messages": msgs,
            "tool_calls": recs,
            "entries": [e.as_dict() for e in caller.entries],
            "last": "tools",
        }
        if final is not None:
            upd["final"] = final
        else:
            upd.update(self._before_call(_merged(state, upd), runtime.context))
        return upd

    # -- a loop ---------------------------------------------------------------------------------
    async def arun(
        self,
        messages: Sequence[BaseMessage],
        *,
        context: CoopContext,
        round: int | None = None,
        config: RunnableConfig | None = None,
    ) -> ToolLoopResult:
        """Run one loop from ``messages`` (the prompt). ``context`` supplies the model service,
        the ledger and the sandbox pool; ``config`` the calling graph node's config (its callbacks:
        traces; its checkpointer: the loop's steps are checkpointed).

        Inside a node the loop's checkpoints get a namespace of their own for each run (the node's,
        then ``AGENT:<uuid>``): a node that runs again (a resumed run) starts its loops afresh,
        their answers replayed from the response cache and charged again, their tools run again
        (the sandbox sessions and the ledger are not in the checkpoint, so a loop continued from
        its last step would miss both). Since no resume reads them, the loop writes its
        checkpoints in the background (``durability="async"``): a step does not wait for its
        checkpoint, and the loop still ends only once all of them are written."""
        if not isinstance(context, CoopContext) or context.llm is None:
            raise ToolSetupError("a tool agent needs CoopContext(llm=LLMService(...))")
        if round is not None and (isinstance(round, bool) or not hasattr(round, "__index__")):
            raise ValueError(f"a round must be an integer or None, got {round!r}")
        spec, model = context.llm.model_for(self.model_key or self.agent_id)
        prompt = list(messages)
        state: dict[str, Any] = {
            "messages": prompt,
            "n_prompt": len(prompt),
            "agent_id": self.agent_id,
            "team": self.team,
            "round": None if round is None else operator.index(round),
            "phase": self.phase,
            "model": spec.id,
            "protocol": self.protocol_for(model),
            "steps": 0,
            "malformed": 0,
            "last": "start",
            "final": None,
            "note": None,
            "last_note": None,
            "spending": None,
            "tool_calls": [],
            "entries": [],
            "stop_reason": None,
            "stop_detail": "",
        }
        state.update(self._before_call(state, context))
        cfg: dict[str, Any] = dict(config or {})
        cfg["metadata"] = {
            **(cfg.get("metadata") or {}),
            "agent_id": self.agent_id,
            **({"team": self.team} if self.team else {}),
        }
        cfg["recursion_limit"] = 2 * self.limits.max_steps + 3  # a model and a tools step per call, then finish
        conf = dict(cfg.get("configurable") or {})
        if conf.get("checkpoint_ns"):
            conf["checkpoint_ns"] = f"{conf['checkpoint_ns']}|{re.sub(r'[|:]', '_', self.agent_id)}:{uuid.uuid4()}"
        cfg["configurable"] = conf
        # checkpoints in the background, under a parent graph's checkpointer (a bare loop has none)
        kw = {"durability": "async"} if conf.get(CONFIG_KEY_CHECKPOINTER) is not None else {}
        return loop_result(await self.graph.ainvoke(state, cfg, context=context, **kw))


async def run_tool_loop(
    agent_id: str,
    tools: Sequence[BaseTool],
    messages: Sequence[BaseMessage],
    *,
    context: CoopContext,
    round: int | None = None,
    config: RunnableConfig | None = None,
    **agent_kw: Any,
) -> ToolLoopResult:
    """One loop of a one-off :class:`ToolAgent` (``agent_kw``: team, phase, limits, protocol, model_key)."""
    return await ToolAgent(agent_id, tools, **agent_kw).arun(messages, context=context, round=round, config=config)


# --------------------------------------------------------------------------------------------
#: state -> the prompt messages (or an awaitable of them)
PromptFn = Callable[[Any], Union[Sequence[BaseMessage], Awaitable[Sequence[BaseMessage]]]]


def tool_agent_node(
    agent_id: str,
    tools: Sequence[BaseTool],
    prompt_fn: PromptFn,
    *,
    team: str | None = None,
    phase: str = "tools",
    limits: ToolLoopLimits | None = None,
    protocol: ToolProtocol = "auto",
    model_key: str | None = None,
    round_key: str | None = "round",
    messages_key: str = "messages",
    record_key: str | None = "tool_loops",
    ledger_key: str | None = None,
    include_prompt: bool = True,
):
    """A LangGraph node (async) running ``agent_id``'s tool loop on ``prompt_fn(state)``.

    The node reads ``runtime.context`` (a :class:`CoopContext`: model service, ledger, sandbox
    pool) and returns state updates for append-only channels (``AppendLog`` or ``add_messages``):
    ``messages_key``: the prompt (if ``include_prompt``) and the loop's new messages;
    ``record_key``: one :meth:`ToolLoopResult.record`; ``ledger_key`` (optional): the ledger
    charges the node recorded while the loop ran (:func:`~cooplab.graphs.nodes.charged`), as rows,
    so a checkpoint holds the audit trail.
    ``round_key``: the state field holding the round (None: no round)."""
    agent = ToolAgent(agent_id, tools, team=team, phase=phase, limits=limits, protocol=protocol, model_key=model_key)

    async def node(state: Any, config: RunnableConfig, runtime: Runtime[CoopContext]) -> dict[str, Any]:
        prompt = prompt_fn(state)
        if inspect.isawaitable(prompt):
            prompt = await prompt
        prompt = list(prompt)
        rnd = None
        if round_key is not None:
            rnd = state.get(round_key) if isinstance(state, dict) else getattr(state, round_key, None)
        res, rows = await charged(
            runtime.context, agent.arun(prompt, context=runtime.context, round=rnd, config=config)
        )
        update: dict[str, Any] = {messages_key: (prompt if include_prompt else []) + res.messages}
        if record_key:
            update[record_key] = [res.record()]
        if ledger_key and rows is not None:
            update[ledger_key] = rows
        return update

    node.__name__ = node.__qualname__ = f"tool_agent[{agent_id}]"
    node.agent = agent  # type: ignore[attr-defined]
    return node


# --------------------------------------------------------------------------------------------
RUN_CODE_DESCRIPTION = (
    "Execute Python code. The dataset is pre-loaded as 'df'. Available libraries: pandas, numpy, "
    "scikit-learn, scipy, matplotlib, seaborn. Variables persist between calls. Timeout: {timeout:.0f}s. "
    "Memory limit: {memory}. The value of the last expression is shown, like in a notebook."
)
SANDBOX_SECONDS = "sandbox_seconds"


def run_code_tool(
    *,
    name: str = "run_code",
    timeout: float | None = None,
    max_chars: int = 20_000,
    config: SandboxConfig | None = None,
    kind: str = SANDBOX_SECONDS,
    on_result: Callable[..., Any] | None = None,
) -> BaseTool:
    """The ``run_code`` tool of tool-using agents: runs the code in the calling agent's own
    session of the sandbox pool (``CoopContext.sandbox``), returns stdout, stderr, the result
    and the status as text, and charges the seconds the call used to the ledger as ``kind``
    (``sandbox_seconds``) at the ledger's rate for it (zero unless set): reserved for the call's
    upper bound before it runs (``BudgetExhausted`` if that does not fit), committed after.
    ``on_result(result, code, description, runtime)``, when given, sees every call's full
    :class:`ExecResult` (figures included), e.g. to keep it in the run directory. ``config`` only sets the limits
    shown in the description (the pool's config applies)."""
    shown = config or SandboxConfig()
    if timeout is not None:
        from cooplab.sandbox.models import check_seconds

        timeout = check_seconds(timeout)

    async def run_code(code: str, runtime: ToolRuntime, description: str = "") -> str:
        caller = caller_of(runtime)
        pool = caller.context.sandbox
        if pool is None:
            raise ToolSetupError("run_code needs a sandbox pool in the runtime context (CoopContext.sandbox)")
        ledger = caller.context.ledger
        bound = Decimal(str(pool.max_call_seconds(timeout)))
        reservation = ledger.reserve(ledger.unit_cost(kind, bound)) if ledger is not None else None
        try:
            call = await pool.arun(caller.agent_id, code, timeout)
        except BaseException:
            if reservation is not None and ledger is not None:  # a reservation was made on the ledger
                ledger.release(reservation)
            raise
        seconds, note = Decimal(str(round(call.seconds, 6))), None
        if seconds > bound:  # cannot happen with a working session; never charge past the reservation
            seconds, note = bound, f"the call took {call.seconds:.3f} s, charged at its bound {bound} s"
        caller.charge_units(
            kind,
            seconds,
            reservation=reservation,
            call_id=runtime.tool_call_id or "",
            model=f"sandbox:{call.backend}",
            note=note,
        )
        if on_result is not None:
            on_result(call.result, code, description, runtime)
        return call.result.to_text(max_chars=max_chars)

    # real types, not the module's postponed (string) annotations: LangChain resolves a tool's type
    # hints on every call, and evaluating strings costs ~0.4 ms a call
    run_code.__annotations__ = {"code": str, "runtime": ToolRuntime, "description": str, "return": str}
    return StructuredTool.from_function(
        coroutine=run_code,
        name=name,
        args_schema=RunCodeInput,
        description=RUN_CODE_DESCRIPTION.format(timeout=timeout or shown.timeout, memory=shown.memory.upper() + "B"),
    )


__all__ = [
    "CALLER_KEY",
    "FATAL_ERRORS",
    "JSON_INSTRUCTIONS",
    "MalformedToolAnswer",
    "SANDBOX_SECONDS",
    "Stop",
    "StopReason",
    "ToolAgent",
    "ToolCaller",
    "ToolLoopLimits",
    "ToolLoopResult",
    "ToolLoopState",
    "ToolSetupError",
    "caller_of",
    "loop_result",
    "parse_tool_answer",
    "render_json_protocol",
    "route",
    "run_code_tool",
    "run_tool_loop",
    "tool_agent_node",
    "tool_args_schema",
    "tool_call_schema",
]
