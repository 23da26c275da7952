"""Tool-using agents: a bounded tool loop over LangChain tools, charged and traced.

A tool-using agent is one model (the model service's, for its agent id) with a set of LangChain
tools. :class:`ToolAgent` runs its loop: ask the model; if it calls tools, run them and hand the
results back; repeat until it gives a final answer or a guard stops it:

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

Tracing: the loop is one ``chain`` run named after the agent id; every model call (``llm``) and
every tool call (``tool``) is its child. Tools run through LangGraph's ``ToolNode`` (one call at a
time, in the order the model gave them), so tools may take LangGraph's ``ToolRuntime`` (the
runtime context, the call's config); :func:`caller_of` gives a tool the calling agent.

See docs/tool-agents.md.
"""

from __future__ import annotations

import inspect
import json
import operator
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, Union

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolNode, ToolRuntime
from langgraph.prebuilt.tool_node import ToolInvocationError
from langgraph.runtime import Runtime

from cooplab.agents.cache import cache_key
from cooplab.agents.calls import ProviderAdapter, adapter_type
from cooplab.agents.decisions import (
    LLMService,
    ModelUnavailable,
    decoding_schema,
    parse_json,
)
from cooplab.agents.usage import input_bound
from cooplab.graphs.context import CoopContext
from cooplab.graphs.ledger import BudgetExhausted, Entry, _amount
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
JSON_INSTRUCTIONS = ('Reply with one JSON object only: {"tool": "<tool name>", "args": {<arguments>}} to call a tool, '
                     'or {"final": "<your answer>"} when you are done.')


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
            object.__setattr__(self, "max_cost", _amount(self.max_cost, "max_cost"))
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
        """Charge a non-token ``kind`` to this agent in the run's ledger (``context.ledger``, see
        :meth:`Ledger.charge_units`); None when the run has no ledger."""
        ledger = self.context.ledger
        if ledger is None:
            return None
        e = ledger.charge_units(kind, units, agent=self.agent_id, team=self.team, round=self.round, phase=self.phase, **kw)
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
        raise ToolSetupError("this tool needs to know its agent: run it in a ToolAgent loop or set configurable agent_id")
    if not isinstance(ctx, CoopContext):
        raise ToolSetupError("this tool needs the runtime context (CoopContext); none was given")
    return ToolCaller(agent, ctx)


# --------------------------------------------------------------------------------------------
# the JSON tool-call grammar (models without native tool calling: the local llama.cpp model)
def tool_args_schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema of a tool's arguments as a model sees them (injected arguments excluded)."""
    return convert_to_openai_tool(tool)["function"].get("parameters") or {"type": "object", "properties": {}}


def tool_call_schema(tools: Sequence[BaseTool], *, for_decoder: bool = False) -> dict[str, Any]:
    """The JSON schema of one answer: ``{"tool": NAME, "args": {...}}`` for each tool, or
    ``{"final": TEXT}``. ``for_decoder``: bounded numbers become enums (llama.cpp's grammar
    ignores ``minimum``/``maximum``; see ``decoding_schema``)."""
    variants = []
    for t in tools:
        args = tool_args_schema(t)
        if for_decoder:
            args = decoding_schema(args)
        variants.append({"type": "object", "properties": {"tool": {"const": t.name}, "args": args},
                         "required": ["tool", "args"], "additionalProperties": False})
    variants.append({"type": "object", "properties": {"final": {"type": "string"}}, "required": ["final"],
                     "additionalProperties": False})
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
    format in the system message, tool calls as the JSON the model wrote, tool results as user
    messages."""
    lines = ["You can use these tools:"]
    for t in tools:
        lines.append(f"- {t.name}: {t.description}\n  args schema: {json.dumps(tool_args_schema(t), sort_keys=True)}")
    lines.append(JSON_INSTRUCTIONS)
    preamble = "\n".join(lines)
    out: list[BaseMessage] = []
    rest = list(messages)
    if rest and isinstance(rest[0], SystemMessage):
        out.append(SystemMessage(content=f"{_text_of(rest[0])}\n\n{preamble}"))
        rest = rest[1:]
    else:
        out.append(SystemMessage(content=preamble))
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
            "agent": self.agent_id, "team": self.team, "round": self.round, "phase": self.phase, "model": self.model,
            "protocol": self.protocol, "stop_reason": self.stop_reason, "stop_detail": self.stop_detail, "final": self.final,
            "steps": self.steps, "n_tool_calls": len(self.tool_calls), "tool_calls": [dict(c) for c in self.tool_calls],
            "malformed": self.malformed, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "cost": str(self.cost), "cached_calls": self.cached_calls,
        }


def _text_of(m: BaseMessage) -> str:
    c = m.content
    return c if isinstance(c, str) else m.text


def _signature(name: Any, args: Any) -> str:
    return json.dumps([name, args], sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _message_key(m: BaseMessage) -> tuple:
    """What of a message determines an answer (the cache key's view of the history)."""
    calls = [[c["name"], c["args"], c.get("id")] for c in getattr(m, "tool_calls", None) or []]
    return (m.type, _text_of(m), calls, getattr(m, "tool_call_id", None), getattr(m, "name", None))


def _envelope(msg: BaseMessage) -> str:
    """A native answer as the text that is cached (and replayed): content and tool calls."""
    return json.dumps({"content": _text_of(msg),
                       "tool_calls": [{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in getattr(msg, "tool_calls", None) or []],
                       "invalid_tool_calls": [{"name": c.get("name"), "args": c.get("args"), "id": c.get("id"), "error": c.get("error")}
                                              for c in getattr(msg, "invalid_tool_calls", None) or []]},
                      sort_keys=True, ensure_ascii=False, default=str)


def _from_envelope(text: str, step: int) -> AIMessage:
    try:
        d = json.loads(text)
        calls = [{"name": str(c["name"]), "args": c["args"] if isinstance(c["args"], dict) else {}, "id": c.get("id") or f"call_{step}_{i}",
                  "type": "tool_call"} for i, c in enumerate(d.get("tool_calls") or [])]
        invalid = [{"name": c.get("name"), "args": c.get("args"), "id": c.get("id") or f"invalid_{step}_{i}", "error": c.get("error"),
                    "type": "invalid_tool_call"} for i, c in enumerate(d.get("invalid_tool_calls") or [])]
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


# --------------------------------------------------------------------------------------------
class ToolAgent:
    """One agent with tools (see the module docstring). Reusable: every :meth:`arun` is one loop."""

    def __init__(self, agent_id: str, tools: Sequence[BaseTool], *, team: str | None = None, phase: str = "tools",
                 limits: ToolLoopLimits | None = None, protocol: ToolProtocol = "auto", model_key: str | None = None,
                 finish_tools: Sequence[str] = (), notes: Callable[[ToolLoopResult], str | None] | None = None):
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
        self._tool_specs = [convert_to_openai_tool(t) for t in self.tools]
        self._tools_id = cache_key(tools=self._tool_specs)[:16]
        self._bound: dict[int, Any] = {}
        self._json_schemas: tuple[dict[str, Any], dict[str, Any]] | None = None  # (schema, decoder's) of the JSON protocol
        self._runnable = RunnableLambda(self._loop, name=agent_id)

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

    def _request(self, adapter: ProviderAdapter, model: Any, proto: str, convo: list[BaseMessage], key: str) -> tuple[Any, list[BaseMessage], dict, int]:
        """(runnable, messages sent, call kwargs, input bound) of the next model call."""
        kwargs = adapter.call_options(key=key, phase=self.phase, max_tokens=self.limits.max_tokens_per_call)
        if proto == "json":
            sent = render_json_protocol(convo, self.tools)
            if self._json_schemas is None:
                self._json_schemas = (tool_call_schema(self.tools), tool_call_schema(self.tools, for_decoder=True))
            rf = adapter.response_format(*self._json_schemas)
            if rf is not None:
                kwargs["response_format"] = rf
            return model, sent, kwargs, input_bound(sent, rf)
        extra = [m.tool_calls for m in convo if isinstance(m, AIMessage) and m.tool_calls]
        extra += [m.tool_call_id for m in convo if isinstance(m, ToolMessage)]
        n_calls = sum(len(c) for c in extra if isinstance(c, list))
        bound = input_bound(convo, self._tool_specs, *extra) + TOOL_OVERHEAD * (len(self.tools) + n_calls)
        return self._bind(model), convo, kwargs, bound

    # -- the loop ---------------------------------------------------------------------------
    async def arun(self, messages: Sequence[BaseMessage], *, context: CoopContext, round: int | None = None,
                   config: RunnableConfig | None = None, runtime: Runtime | None = None) -> ToolLoopResult:
        """Run one loop from ``messages`` (the prompt). ``context`` supplies the model service,
        the ledger and the sandbox pool; ``config`` the parent run (callbacks: traces);
        ``runtime`` LangGraph's runtime when called from a node (else one is made)."""
        if not isinstance(context, CoopContext) or context.llm is None:
            raise ToolSetupError("a tool agent needs CoopContext(llm=LLMService(...))")
        cfg: dict[str, Any] = dict(config or {})
        cfg["metadata"] = {**(cfg.get("metadata") or {}), "agent_id": self.agent_id, **({"team": self.team} if self.team else {})}
        rt = runtime.override(context=context) if runtime is not None else Runtime(context=context)
        if round is not None and (isinstance(round, bool) or not hasattr(round, "__index__")):
            raise ValueError(f"a round must be an integer or None, got {round!r}")
        rnd = None if round is None else operator.index(round)
        return await self._runnable.ainvoke({"agent_id": self.agent_id, "round": rnd, "messages": list(messages)}, cfg,
                                            context=context, runtime=rt)

    async def _loop(self, inp: dict[str, Any], config: RunnableConfig, *, context: CoopContext, runtime: Runtime) -> ToolLoopResult:
        llm: LLMService = context.llm  # type: ignore[assignment]
        ledger = context.ledger
        spec, model = llm.model_for(self.model_key or self.agent_id)
        adapter = llm.adapter(spec, model)
        proto = self.protocol_for(model)
        lim = self.limits
        rnd = inp["round"]
        res = ToolLoopResult(self.agent_id, self.team, rnd, self.phase, spec.id, proto)
        caller = ToolCaller(self.agent_id, context, self.team, rnd, self.phase)
        tool_cfg: RunnableConfig = {**config, "configurable": {**(config.get("configurable") or {}), CALLER_KEY: caller}}
        convo: list[BaseMessage] = list(inp["messages"])
        seen: set[str] = set()
        out_bound = int(lim.max_tokens_per_call or spec.max_tokens)
        n_tool_entries = 0

        def absorb_tool_charges() -> None:
            nonlocal n_tool_entries
            for e in caller.entries[n_tool_entries:]:
                res.account(e)
            n_tool_entries = len(caller.entries)

        def add(*msgs: BaseMessage) -> None:
            convo.extend(msgs)
            res.messages.extend(msgs)

        def stop(reason: StopReason, detail: str = "") -> ToolLoopResult:
            res.stop_reason, res.stop_detail = reason, detail
            return res

        last_note: str | None = None
        try:
            while True:
                if res.steps >= lim.max_steps:
                    return stop("step_cap", f"{lim.max_steps} model calls")
                if self.notes is not None:
                    note = self.notes(res)
                    if note and note != last_note:
                        add(HumanMessage(content=note))
                    last_note = note or last_note
                key = cache_key(model=spec.identity(), messages=[_message_key(m) for m in convo], agent=self.agent_id,
                                team=self.team, round=rnd, phase=self.phase, seed=llm.seed, attempt=res.steps,
                                tools=self._tools_id, protocol=proto, max_tokens=lim.max_tokens_per_call)
                runnable, sent, kwargs, in_bound = self._request(adapter, model, proto, convo, key)
                # the agent's own cap, with the call's upper bound: never passed by a model call
                if lim.max_cost is not None or lim.max_tokens is not None:
                    spent, tokens = (res.cost, res.tokens) if lim.cap_scope == "loop" else ledger.agent_spent(self.agent_id)
                    next_cost, next_tokens = ledger.cost(spec.id, in_bound, out_bound), in_bound + out_bound
                    if lim.max_cost is not None and spent + next_cost > lim.max_cost:
                        return stop("credit_cap", f"spent ${spent} of ${lim.max_cost}; the next call may cost up to ${next_cost}")
                    if lim.max_tokens is not None and tokens + next_tokens > lim.max_tokens:
                        return stop("credit_cap", f"used {tokens} of {lim.max_tokens} tokens; the next call may use up to {next_tokens}")
                resp, cached, entry = await llm.charged_call(
                    spec=spec, runnable=runnable, key=key, messages=sent, kwargs=kwargs, input_bound=in_bound, output_bound=out_bound,
                    agent_id=self.agent_id, round=rnd, phase=self.phase, config=config, team=self.team,
                    to_text=None if proto == "json" else _envelope)
                res.steps += 1
                res.account(entry)
                if proto == "json":
                    try:
                        ai = parse_tool_answer(resp.text, call_id=f"call_{res.steps}")
                    except MalformedToolAnswer as exc:
                        res.malformed += 1
                        add(AIMessage(content=resp.text or "(empty)"),
                            HumanMessage(content=f"That answer was invalid: {exc}. {JSON_INSTRUCTIONS}"))
                        if res.malformed > lim.max_malformed:
                            return stop("malformed", f"{res.malformed} malformed answers (limit {lim.max_malformed})")
                        continue
                else:
                    ai = _from_envelope(resp.text, res.steps)
                ai.usage_metadata = {"input_tokens": resp.input_tokens, "output_tokens": resp.output_tokens,
                                     "total_tokens": resp.input_tokens + resp.output_tokens}
                ai.response_metadata = {"model": spec.id, "cached": cached}
                add(ai)
                calls = list(ai.tool_calls)
                invalid = list(ai.invalid_tool_calls)
                if not calls and not invalid:
                    res.final = final_text(ai, proto)
                    return stop("final")
                sigs = [_signature(c["name"], c["args"]) for c in calls] + [_signature(c.get("name"), c.get("args")) for c in invalid]
                repeated = [i for i, s in enumerate(sigs) if s in seen or s in sigs[:i]]
                if repeated:
                    for c in [*calls, *invalid]:
                        self._not_run(res, add, c, "not run: this call repeats an earlier identical call (same tool, same arguments); "
                                                   "the tool loop stopped")
                    first = ([*calls, *invalid])[repeated[0]]
                    return stop("repeated_call", f"{first.get('name')} with the same arguments as before")
                seen.update(sigs[: min(len(calls), lim.max_calls_per_step)] + sigs[len(calls):])  # what is answered below
                for i, c in enumerate(calls):
                    if i >= lim.max_calls_per_step:
                        self._not_run(res, add, c, f"not run: at most {lim.max_calls_per_step} tool calls per answer")
                        continue
                    t0 = time.perf_counter()
                    single = AIMessage(content="", tool_calls=[c])
                    out = await self.tool_node.ainvoke({"messages": [*convo[:-1], single]}, tool_cfg, runtime=runtime)
                    seconds = time.perf_counter() - t0
                    tm = out["messages"][0] if isinstance(out, dict) else out[0]
                    if not isinstance(tm, ToolMessage):  # a tool returning a Command: keep the loop well-formed
                        tm = ToolMessage(content=str(tm), tool_call_id=c["id"], name=c["name"])
                    absorb_tool_charges()
                    add(tm)
                    res.tool_calls.append({"step": res.steps, "id": c["id"], "name": c["name"],
                                           "args": json.dumps(c["args"], sort_keys=True, ensure_ascii=False, default=str),
                                           "status": tm.status, "seconds": round(seconds, 6)})
                    if c["name"] in self.finish_tools and tm.status != "error" and res.final is None:
                        res.final = _text_of(tm)
                for c in invalid:  # after the valid calls: the message's order (tool_calls, invalid_tool_calls)
                    self._not_run(res, add, c, f"Error: the arguments of {c.get('name')} could not be parsed: {c.get('error') or c.get('args')}",
                                  status="error")
                if res.final is not None:
                    return stop("completed", "a finishing tool succeeded")
        except FATAL_ERRORS as exc:
            absorb_tool_charges()
            res.stop_reason, res.stop_detail = None, f"{type(exc).__name__}: {exc}"
            exc.tool_loop = res  # type: ignore[attr-defined]  # the partial result, for the caller to keep
            raise

    @staticmethod
    def _not_run(res: ToolLoopResult, add: Callable, call: dict, text: str, status: str = "error") -> None:
        add(ToolMessage(content=text, tool_call_id=call.get("id") or "", name=call.get("name") or "", status=status))
        res.tool_calls.append({"step": res.steps, "id": call.get("id"), "name": call.get("name"),
                               "args": json.dumps(call.get("args"), sort_keys=True, ensure_ascii=False, default=str),
                               "status": "not_run" if text.startswith("not run") else "error", "seconds": 0.0})


async def run_tool_loop(agent_id: str, tools: Sequence[BaseTool], messages: Sequence[BaseMessage], *, context: CoopContext,
                        round: int | None = None, config: RunnableConfig | None = None, **agent_kw: Any) -> ToolLoopResult:
    """One loop of a one-off :class:`ToolAgent` (``agent_kw``: team, phase, limits, protocol, model_key)."""
    return await ToolAgent(agent_id, tools, **agent_kw).arun(messages, context=context, round=round, config=config)


# --------------------------------------------------------------------------------------------
#: state -> the prompt messages (or an awaitable of them)
PromptFn = Callable[[Any], Union[Sequence[BaseMessage], Awaitable[Sequence[BaseMessage]]]]


def tool_agent_node(agent_id: str, tools: Sequence[BaseTool], prompt_fn: PromptFn, *, team: str | None = None,
                    phase: str = "tools", limits: ToolLoopLimits | None = None, protocol: ToolProtocol = "auto",
                    model_key: str | None = None, round_key: str | None = "round", messages_key: str = "messages",
                    record_key: str | None = "tool_loops", ledger_key: str | None = None, include_prompt: bool = True):
    """A LangGraph node (async) running ``agent_id``'s tool loop on ``prompt_fn(state)``.

    The node reads ``runtime.context`` (a :class:`CoopContext`: model service, ledger, sandbox
    pool) and returns state updates for append-only channels (``AppendLog`` or ``add_messages``):
    ``messages_key``: the prompt (if ``include_prompt``) and the loop's new messages;
    ``record_key``: one :meth:`ToolLoopResult.record`; ``ledger_key`` (optional): the ledger
    entries this loop charged, as rows, so a checkpoint holds the audit trail.
    ``round_key``: the state field holding the round (None: no round)."""
    agent = ToolAgent(agent_id, tools, team=team, phase=phase, limits=limits, protocol=protocol, model_key=model_key)

    async def node(state: Any, config: RunnableConfig, runtime: Runtime) -> dict[str, Any]:
        prompt = prompt_fn(state)
        if inspect.isawaitable(prompt):
            prompt = await prompt
        prompt = list(prompt)
        rnd = None
        if round_key is not None:
            rnd = state.get(round_key) if isinstance(state, dict) else getattr(state, round_key, None)
        res = await agent.arun(prompt, context=runtime.context, round=rnd, config=config, runtime=runtime)
        update: dict[str, Any] = {messages_key: (prompt if include_prompt else []) + res.messages}
        if record_key:
            update[record_key] = [res.record()]
        if ledger_key:
            update[ledger_key] = [e.as_dict() for e in res.entries]
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


def run_code_tool(*, name: str = "run_code", timeout: float | None = None, max_chars: int = 20_000,
                  config: SandboxConfig | None = None, kind: str = SANDBOX_SECONDS,
                  on_result: Callable[..., Any] | None = None) -> BaseTool:
    """The ``run_code`` tool of tool-using agents: runs the code in the calling agent's own
    session of the sandbox pool (``CoopContext.sandbox``), returns stdout, stderr, the result
    and the status as text, and charges the seconds the call used to the ledger as ``kind``
    (``sandbox_seconds``) at the ledger's rate for it (zero unless set): reserved for the call's
    upper bound before it runs (``BudgetExhausted`` if that does not fit), committed after.
    ``config`` only sets the limits shown in the description (the pool's config applies)."""
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
            if reservation is not None:
                ledger.release(reservation)
            raise
        seconds, note = Decimal(str(round(call.seconds, 6))), None
        if seconds > bound:  # cannot happen with a working session; never charge past the reservation
            seconds, note = bound, f"the call took {call.seconds:.3f} s, charged at its bound {bound} s"
        caller.charge_units(kind, seconds, reservation=reservation, call_id=runtime.tool_call_id or "",
                            model=f"sandbox:{call.backend}", note=note)
        if on_result is not None:
            on_result(call.result, code, description)
        return call.result.to_text(max_chars=max_chars)

    # real types, not the module's postponed (string) annotations: LangChain resolves a tool's type
    # hints on every call, and evaluating strings costs ~0.4 ms a call
    run_code.__annotations__ = {"code": str, "runtime": ToolRuntime, "description": str, "return": str}
    return StructuredTool.from_function(
        coroutine=run_code, name=name, args_schema=RunCodeInput,
        description=RUN_CODE_DESCRIPTION.format(timeout=timeout or shown.timeout, memory=shown.memory.upper() + "B"),
    )


__all__ = [
    "CALLER_KEY", "FATAL_ERRORS", "JSON_INSTRUCTIONS", "MalformedToolAnswer", "SANDBOX_SECONDS", "StopReason", "ToolAgent",
    "ToolCaller", "ToolLoopLimits", "ToolLoopResult", "ToolSetupError", "caller_of", "parse_tool_answer", "render_json_protocol",
    "run_code_tool", "run_tool_loop", "tool_agent_node", "tool_args_schema", "tool_call_schema",
]
