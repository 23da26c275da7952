"""The science-team graph (paper §4.1, Appendix C): four sequential teams in one LangGraph graph.

One pass of a team is four nodes, each checkpointed:

- ``plan``: the lead reviews the artifacts (read/list tools) and writes a 3-5 bullet plan;
- ``work``: every member (the lead too) runs its tool loop concurrently on its assignment, with
  the tools of Appendix C.1 (``run_code`` in its own sandbox session, the dataset pre-loaded as
  ``df``, for the data, model and eval teams; none for the writing team);
- ``deliberate``: two rounds in which each member writes 2-3 sentences to the team;
- ``synthesize``: the lead writes the team's artifact from the members' outputs and the discussion
  (if the lead does not, the node writes it from what exists and records the fallback);

then ``route`` picks the next team: a request of this pass to an earlier team
(``request_additional_work`` / ``request_team_redo``) sends the run back to that team with the
request in its lead's planning prompt, at most ``max_reentries`` times per team (a request past
the cap is recorded as refused); afterwards the run returns to the team that asked. Otherwise the
next team in order, and after the writing team the end.

Budget: every model call and sandbox second is charged to the one ledger (reserved before, so the
pool is never overspent, even with members working concurrently). When a charge does not fit,
the node keeps what its agents produced until then (artifact versions, messages, requests) and
records the stop; ``route`` then ends the run with status ``budget_exhausted``.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Required, TypedDict

from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from cooplab.agents.tools import (
    ToolAgent,
    ToolLoopLimits,
    ToolLoopResult,
    run_code_tool,
)
from cooplab.graphs.context import CoopContext
from cooplab.graphs.ledger import BudgetExhausted, Ledger
from cooplab.graphs.nodes import ledger_node
from cooplab.graphs.state import AppendLog
from cooplab.graphs.tracing.labels import AGENT_NAME, labelled
from cooplab.tasks.science import prompts as pr
from cooplab.tasks.science.roles import (
    ARTIFACT,
    CODE_TEAMS,
    SOLO,
    SOLO_TEAM,
    TEAMS,
    Role,
    role_of,
    roles,
)
from cooplab.tasks.science.workspace import Workspace, workspace_tools


class ScienceState(TypedDict, total=False):
    round: Required[int]  #: team passes finished + 1 (the progress bar's unit); set by init_state
    max_round: int  #: passes at most (the recursion limit)
    cursor: Required[int]  #: index in TEAMS of the team working now (-1: done); set by init_state
    visits: dict[str, int]  #: passes started per team
    reentries: dict[str, int]  #: passes caused by requests, per team
    return_to: list[int]  #: teams to go back to after a requested pass (a stack)
    serving: dict[str, Any] | None  #: the request this pass answers
    plan: str
    assignments: dict[str, str]
    outputs: list[list[str]]  #: this pass's [agent, output] pairs (the synthesis input)
    discussion: list[dict[str, Any]]  #: this pass's deliberation
    stop: dict[str, Any] | None  #: a budget stop caught inside a node: {"reason", "detail", "node"}
    artifact_log: AppendLog
    messages: AppendLog
    requests: AppendLog
    routing: AppendLog
    completions: AppendLog
    tool_loops: AppendLog
    timeline: AppendLog
    ledger: AppendLog


def artifacts_of(state: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for a in state.get("artifact_log") or []:
        out.setdefault(a["name"], []).append(a)
    return out


def init_state(max_reentries: int) -> dict[str, Any]:
    return {
        "round": 1,
        "max_round": len(TEAMS) * (1 + 2 * max_reentries),
        "cursor": 0,
        "visits": {},
        "reentries": {},
        "return_to": [],
        "serving": None,
        "plan": "",
        "assignments": {},
        "outputs": [],
        "discussion": [],
        "stop": None,
        "artifact_log": [],
        "messages": [],
        "requests": [],
        "routing": [],
        "completions": [],
        "tool_loops": [],
        "timeline": [],
        "ledger": [],
    }


def _ledger(context: CoopContext) -> Ledger:
    """The run's ledger: a science team's nodes always run with one (every model call is charged)."""
    if context.ledger is None:
        raise RuntimeError("a science team node ran without a ledger in its runtime context")
    return context.ledger


class TeamGraph:
    """Builds the graph for one run's settings (``P``: :class:`cooplab.tasks.science.params.ScienceParams`)."""

    def __init__(self, P: Any, task_description: str, *, code_prefix: str = ""):
        self.P = P
        self.description = task_description
        self.code_prefix = (
            code_prefix  #: run before every run_code call's code (own data: several files -> a dict of frames)
        )
        self.solo = getattr(P, "pipeline", "teams") == "solo"
        self._ledger = None  # the run's ledger, set by every node (budget warnings read it)
        self._agents: dict[tuple, ToolAgent] = {}
        self._tools = {team: workspace_tools(None, code_tool=self.code_tool(team)) for team in (*TEAMS, SOLO_TEAM)}

    # -- helpers -------------------------------------------------------------------------------
    def team(self, state: Mapping[str, Any]) -> str:
        return SOLO_TEAM if self.solo else TEAMS[int(state["cursor"])]

    def visit(self, state: Mapping[str, Any]) -> int:
        return int((state.get("visits") or {}).get(self.team(state), 1))

    def status(self, context: CoopContext, team: str) -> str:
        ledger = _ledger(context)
        team_spent = sum((Decimal(e.cost) for e in ledger.entries if e.team == team), Decimal(0))
        return pr.budget_status(
            self.P.visibility, budget=ledger.budget, spent=ledger.spent, team_spent=team_spent, team=team
        )

    def note(self, _res: ToolLoopResult) -> str | None:
        """The budget warning due before a model call of any loop (None above 30 % remaining)."""
        ledger = self._ledger
        if ledger is None:
            return None
        return pr.warning(self.P.visibility, ledger.budget, ledger.spent, warn_when_hidden=self.P.warn_when_hidden)

    def tools(self, team: str, names: tuple[str, ...] | None = None) -> list:
        return [t for t in self._tools[team] if names is None or t.name in names]

    def enter(self, context: CoopContext, ws: Workspace) -> None:
        """A node starts: its workspace becomes the tools' (a context variable, inherited by the
        agents' tasks) and the ledger the warnings'."""
        from cooplab.tasks.science.workspace import CURRENT

        self._ledger = context.ledger
        CURRENT.set(ws)

    def system(self, role: Role, context: CoopContext) -> list[SystemMessage]:
        """The system prompt of ``role`` now: Appendix C.1's parts, and the live budget lines (the
        status of this visibility, the warning due). With ``status_at="end"`` (the default) the
        live lines are a second system message after everything that does not change (the
        tools the model is told of are added between the two for a model without native tool
        calls), so that a model that keeps what it read (the local model, a provider's prompt
        cache) reuses the whole fixed part; ``"paper"`` puts the status where C.1 does, between
        the team members and the budget rules, in one message."""
        status = self.status(context, role.team)
        w = pr.warning(
            self.P.visibility, _ledger(context).budget, _ledger(context).spent, warn_when_hidden=self.P.warn_when_hidden
        )
        paper = self.P.status_at == "paper"
        kw = {
            "task_description": self.description,
            "status": status if paper else "",
            "prompt": self.P.prompt,
            "code_timeout": self.P.code_timeout,
        }
        text = (
            pr.solo_system_prompt(role, **kw)
            if role.team == SOLO_TEAM
            else pr.system_prompt(role, team_size=self.P.team_size, **kw)
        )
        if paper:
            return [SystemMessage(content=text + (f"\n\n{w}" if w else ""))]
        live = "\n\n".join(x for x in (status, w) if x)
        return [SystemMessage(content=text)] + ([SystemMessage(content=live)] if live else [])

    def agent(self, role: Role, tools: list, phase: str, context: CoopContext, max_steps: int) -> ToolAgent:
        """The agent of ``role`` for ``phase`` (made once per graph: its tools' schemas are converted once)."""
        key = (role.agent_id, phase, tuple(t.name for t in tools), max_steps)
        a = self._agents.get(key)
        if a is None:
            finish = ("mark_complete",) if any(t.name == "mark_complete" for t in tools) else ()
            a = self._agents[key] = ToolAgent(
                role.agent_id,
                tools,
                team=role.team,
                phase=f"{role.team}:{phase}",
                limits=ToolLoopLimits(max_steps=max_steps, max_tokens_per_call=self.P.max_tokens_per_call),
                finish_tools=finish,
                notes=self.note,
            )
        return a

    def code_tool(self, team: str):
        if team not in CODE_TEAMS:
            return None
        from cooplab.tasks.science.explore import record_sandbox_call

        # every call and its figures are kept in the run directory for the explorer (cooplab view)
        tool = run_code_tool(
            timeout=self.P.code_timeout,
            max_chars=self.P.code_output_chars,
            on_result=functools.partial(record_sandbox_call, prefix=self.code_prefix),
        )
        if not self.code_prefix:
            return tool
        from langchain_core.tools import StructuredTool

        coroutine = tool.coroutine if isinstance(tool, StructuredTool) else None
        if coroutine is None:  # run_code_tool makes a StructuredTool from an async function
            raise TypeError("the run_code tool has no coroutine to wrap")
        inner, prefix = coroutine, self.code_prefix

        async def run_code(code: str, runtime: Any, description: str = "") -> str:
            return await inner(prefix + code, runtime, description)

        run_code.__annotations__ = dict(inner.__annotations__)
        return StructuredTool.from_function(
            coroutine=run_code, name=tool.name, args_schema=tool.args_schema, description=tool.description
        )

    async def run_agents(
        self, jobs: list[tuple[ToolAgent, list]], context: CoopContext, config: RunnableConfig, state: Mapping[str, Any]
    ) -> tuple[list[ToolLoopResult | None], dict[str, Any] | None]:
        """Run tool loops concurrently (in ``state``'s round, the team's pass of ``state``; their
        traces labelled with the role's name, team and pass). A budget stop keeps every loop's
        partial result and is returned as the stop record; other fatal errors (model or sandbox
        unavailable) propagate."""
        rnd, pass_ = state["round"], self.visit(state)

        def traced(a: ToolAgent) -> RunnableConfig:
            name = role_of(a.agent_id, self.P.team_size).name  # every agent is made from a role (self.agent)
            return labelled(config, {AGENT_NAME: name, "team": a.team, "pass": pass_})

        results = await asyncio.gather(
            *(a.arun(m, context=context, round=rnd, config=traced(a)) for a, m in jobs), return_exceptions=True
        )
        out: list[ToolLoopResult | None] = []
        stop = None
        other: BaseException | None = None
        for r in results:
            if isinstance(r, BudgetExhausted):
                stop = stop or {"reason": "budget_exhausted", "detail": str(r)}
                out.append(getattr(r, "tool_loop", None))
            elif isinstance(r, BaseException):
                other = other or r
                out.append(getattr(r, "tool_loop", None))
            else:
                out.append(r)
        if other is not None:
            raise other
        return out, stop

    def record(
        self,
        state: Mapping[str, Any],
        node: str,
        results: list[ToolLoopResult | None],
        context: CoopContext,
        t0: float,
        ws: Workspace | None = None,
        stop: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        team, visit = self.team(state), self.visit(state)
        upd: dict[str, Any] = {
            "tool_loops": [dict(r.record(), visit=visit, node=node) for r in results if r is not None],
            "timeline": [
                {
                    "team": team,
                    "visit": visit,
                    "node": node,
                    "seconds": round(time.perf_counter() - t0, 3),
                    "spent_usd": str(_ledger(context).spent),
                }
            ],
        }
        if ws is not None:
            upd.update(ws.updates())
        if stop is not None:
            upd["stop"] = {**stop, "node": node, "team": team}
        return upd

    def begin(
        self, state: Mapping[str, Any], runtime: Runtime[CoopContext]
    ) -> tuple[CoopContext, float, str, int, Workspace]:
        """What every team node starts with: (context, start time, team, pass, the workspace made
        current for the tools)."""
        ctx, team, visit = runtime.context, self.team(state), self.visit(state)
        ws = Workspace(artifacts_of(state), team, visit)
        self.enter(ctx, ws)
        return ctx, time.perf_counter(), team, visit, ws

    # -- nodes ---------------------------------------------------------------------------------
    async def plan(self, state: ScienceState, config: RunnableConfig, runtime: Runtime[CoopContext]) -> dict[str, Any]:
        ctx, t0 = runtime.context, time.perf_counter()
        team = self.team(state)
        visits = dict(state.get("visits") or {})
        visits[team] = visits.get(team, 0) + 1
        state = {**state, "visits": visits}
        lead = roles(team, self.P.team_size)[0]
        ws = Workspace(artifacts_of(state), team, visits[team])
        self.enter(ctx, ws)
        tools = self.tools(team, ("read_artifact", "list_artifacts"))
        serving = state.get("serving")
        inbox = [m for m in state.get("messages") or [] if m["to_team"] == team]
        request = None
        if serving:
            request = (
                f"The {serving['from_team']} team ({serving['agent']}) asks for "
                f"{'a REDO' if serving['kind'] == 'redo' else 'additional work'}: "
                f"{serving['request']}"
                + (f" Justification: {serving['justification']}" if serving.get("justification") else "")
            )
        prompt = pr.plan_prompt(lead, team_size=self.P.team_size, request=request)
        if inbox:
            prompt += "\n\nMESSAGES TO YOUR TEAM:\n" + "\n".join(
                f"[{m['agent']} of {m['from_team']}]: {m['content']}" for m in inbox[-10:]
            )
        agent = self.agent(lead, tools, "plan", ctx, self.P.plan_steps)
        (res,), stop = await self.run_agents(
            [(agent, [*self.system(lead, ctx), HumanMessage(content=prompt)])], ctx, config, state
        )
        plan = (res.final if res is not None and res.final else "").strip()
        fallback = not plan
        if fallback:
            plan = "\n".join(
                f"- {r.name} ({r.agent_id}): carry out your role's part of the project for this team."
                for r in roles(team, self.P.team_size)
            )
        upd = self.record(state, "plan", [res], ctx, t0, ws, stop)
        upd.update(
            visits=visits, plan=plan, assignments=assign(plan, roles(team, self.P.team_size)), outputs=[], discussion=[]
        )
        upd["timeline"][0]["fallback"] = fallback
        return upd

    async def work(self, state: ScienceState, config: RunnableConfig, runtime: Runtime[CoopContext]) -> dict[str, Any]:
        if state.get("stop"):
            return {}
        ctx, t0, team, visit, ws = self.begin(state, runtime)
        tools = self.tools(team)
        jobs = []
        for role in roles(team, self.P.team_size):
            task = (state.get("assignments") or {}).get(role.agent_id) or "Carry out your role's part of the plan."
            jobs.append(
                (
                    self.agent(role, tools, "work", ctx, self.P.max_steps),
                    [
                        *self.system(role, ctx),
                        HumanMessage(content=pr.work_prompt(role, task=task, plan=state.get("plan", ""))),
                    ],
                )
            )
        results, stop = await self.run_agents(jobs, ctx, config, state)
        outputs = [
            [r.agent_id, output_text(res)] for r, res in zip(roles(team, self.P.team_size), results, strict=False)
        ]
        upd = self.record(state, "work", results, ctx, t0, ws, stop)
        upd["outputs"] = outputs
        return upd

    async def deliberate(
        self, state: ScienceState, config: RunnableConfig, runtime: Runtime[CoopContext]
    ) -> dict[str, Any]:
        if state.get("stop"):
            return {}
        ctx, t0, team, visit, ws = self.begin(state, runtime)
        tools = self.tools(team, ("read_artifact",))
        discussion: list[dict[str, Any]] = []
        all_results: list[ToolLoopResult | None] = []
        stop = None
        team_roles = roles(team, self.P.team_size)
        rounds = self.P.deliberation_rounds if len(team_roles) > 1 else 0  # a lead alone has no one to deliberate with
        for k in range(1, rounds + 1):
            jobs = [
                (
                    self.agent(role, tools, f"deliberate{k}", ctx, 2),
                    [
                        *self.system(role, ctx),
                        HumanMessage(content=pr.deliberation_prompt(k, self.P.deliberation_rounds, discussion)),
                    ],
                )
                for role in team_roles
            ]
            results, stop = await self.run_agents(jobs, ctx, config, state)
            all_results += results
            for role, res in zip(team_roles, results, strict=False):
                text = (res.final or "").strip() if res is not None else ""
                if text:
                    discussion.append(
                        {"agent": role.agent_id, "round": k, "message": text[:1200], "team": team, "visit": visit}
                    )
            if stop:
                break
        upd = self.record(state, "deliberate", all_results, ctx, t0, ws, stop)
        upd["discussion"] = discussion
        return upd

    async def synthesize(
        self, state: ScienceState, config: RunnableConfig, runtime: Runtime[CoopContext]
    ) -> dict[str, Any]:
        ctx, t0, team, visit, ws = self.begin(state, runtime)
        lead = roles(team, self.P.team_size)[0]
        results: list[ToolLoopResult | None] = [None]
        stop = None
        if not state.get("stop"):
            tools = self.tools(team, ("read_artifact", "list_artifacts", "write_artifact", "mark_complete"))
            outputs = [(a, o) for a, o in state.get("outputs") or []]
            prompt = pr.synthesis_prompt(
                lead, outputs, list(state.get("discussion") or []), excerpt=self.P.synthesis_excerpt
            )
            agent = self.agent(lead, tools, "synthesize", ctx, self.P.synthesis_steps)
            results, stop = await self.run_agents(
                [(agent, [*self.system(lead, ctx), HumanMessage(content=prompt)])], ctx, config, state
            )
        name = ARTIFACT[team]
        mine = [a for a in ws.versions(name) if a["visit"] == visit and a["team"] == team]
        fallback = None
        if not mine:  # the lead did not write the team's artifact: keep what exists, say so
            res = results[0]
            text = (res.final or "").strip() if res is not None else ""
            source = "the lead's final answer"
            if len(text) < 200:
                text = "\n\n".join(o for _, o in state.get("outputs") or [] if o.strip())
                source = "the members' outputs"
            if text.strip():
                ws.write(
                    lead.agent_id,
                    name,
                    text[:100_000],
                    f"written by cooplab from {source}: the lead did not call write_artifact",
                )
                fallback = source
        upd = self.record(state, "synthesize", results, ctx, t0, ws, stop)
        upd["timeline"][0]["artifact_fallback"] = fallback
        return upd

    async def analyze(
        self, state: ScienceState, config: RunnableConfig, runtime: Runtime[CoopContext]
    ) -> dict[str, Any]:
        """The solo pipeline's one node: the analyst's tool loop (code, artifacts), then the final
        paper (written by cooplab from its final words or code outputs if the analyst did not)."""
        ctx, t0 = runtime.context, time.perf_counter()
        visits = {SOLO_TEAM: int((state.get("visits") or {}).get(SOLO_TEAM, 0)) + 1}
        state = {**state, "visits": visits}
        ws = Workspace(artifacts_of(state), SOLO_TEAM, visits[SOLO_TEAM])
        self.enter(ctx, ws)
        tools = self.tools(
            SOLO_TEAM, ("run_code", "read_artifact", "list_artifacts", "write_artifact", "mark_complete")
        )
        agent = self.agent(SOLO, tools, "analyze", ctx, self.P.max_steps + self.P.synthesis_steps)
        (res,), stop = await self.run_agents(
            [(agent, [*self.system(SOLO, ctx), HumanMessage(content=pr.solo_work_prompt(SOLO))])], ctx, config, state
        )
        fallback = None
        if not ws.versions(ARTIFACT[SOLO_TEAM]):
            text = (res.final or "").strip() if res is not None else ""
            source = "the analyst's final answer"
            if len(text) < 200:
                text = "\n\n".join(t for t in (output_text(res, limit=100_000), text) if t.strip())
                source = "the analyst's code outputs and final answer"
            if text.strip():
                ws.write(
                    SOLO.agent_id,
                    ARTIFACT[SOLO_TEAM],
                    text[:100_000],
                    f"written by cooplab from {source}: the analyst did not call write_artifact",
                )
                fallback = source
        upd = self.record(state, "analyze", [res], ctx, t0, ws, stop)
        upd["visits"] = visits
        upd["timeline"][0]["artifact_fallback"] = fallback
        return upd

    def route(self, state: ScienceState) -> dict[str, Any]:
        stop = state.get("stop")
        if stop:
            raise BudgetExhausted(stop.get("detail") or "the budget is exhausted")
        if self.solo:
            return {"cursor": -1, "routing": [], "round": int(state["round"]) + 1}
        team, visit = self.team(state), self.visit(state)
        cursor = int(state["cursor"])
        reentries = dict(state.get("reentries") or {})
        back = list(state.get("return_to") or [])
        log: list[dict[str, Any]] = []
        nxt, serving = None, None
        for rq in [r for r in state.get("requests") or [] if r["from_team"] == team and r["visit"] == visit]:
            target = rq["target_team"]
            if nxt is None and reentries.get(target, 0) < self.P.max_reentries:
                reentries[target] = reentries.get(target, 0) + 1
                nxt, serving = TEAMS.index(target), rq
                back.append(cursor)
                log.append(
                    {
                        **_req_key(rq),
                        "decision": "accepted",
                        "reason": f"re-entry {reentries[target]} of {self.P.max_reentries}",
                    }
                )
            else:
                why = (
                    f"the {target} team has had its {self.P.max_reentries} re-entries"
                    if nxt is None
                    else "one request is served per pass; an earlier request of this pass was accepted"
                )
                log.append({**_req_key(rq), "decision": "refused", "reason": why})
        if nxt is None:
            if serving is None and state.get("serving") is not None and back:
                nxt = back.pop()  # a requested pass is done: back to the team that asked
            elif cursor + 1 < len(TEAMS):
                nxt = cursor + 1
            else:
                nxt = -1
        upd: dict[str, Any] = {
            "cursor": nxt,
            "reentries": reentries,
            "return_to": back,
            "serving": serving,
            "routing": log,
            "round": int(state["round"]) + 1,
        }
        return upd

    @staticmethod
    def after_route(state: ScienceState) -> str:
        return END if int(state.get("cursor", -1)) < 0 else "plan"

    def build(self, checkpointer: Any = None):
        g = StateGraph(ScienceState, context_schema=CoopContext)
        if self.solo:
            g.add_node("analyze", ledger_node(self.analyze))
            g.add_node("route", self.route)
            g.add_edge(START, "analyze")
            g.add_edge("analyze", "route")
            g.add_edge("route", END)
            return g.compile(checkpointer=checkpointer, name="science-solo")
        g.add_node("plan", ledger_node(self.plan))
        g.add_node("work", ledger_node(self.work))
        g.add_node("deliberate", ledger_node(self.deliberate))
        g.add_node("synthesize", ledger_node(self.synthesize))
        g.add_node("route", self.route)
        g.add_edge(START, "plan")
        g.add_edge("plan", "work")
        g.add_edge("work", "deliberate")
        g.add_edge("deliberate", "synthesize")
        g.add_edge("synthesize", "route")
        g.add_conditional_edges("route", self.after_route, ["plan", END])
        return g.compile(checkpointer=checkpointer, name="science")


def _req_key(rq: Mapping[str, Any]) -> dict[str, Any]:
    return {k: rq.get(k) for k in ("from_team", "agent", "target_team", "kind", "request", "visit")}


def assign(plan: str, team_roles: list[Role]) -> dict[str, str]:
    """Each member's task from the lead's plan: the plan's lines that name the member (by id or role
    name); a member the plan does not name gets its role's part of the whole plan."""
    lines = [ln.strip() for ln in plan.splitlines() if ln.strip()]
    out = {}
    for r in team_roles:
        pat = re.compile(rf"({re.escape(r.agent_id)}|{re.escape(r.name)})", re.IGNORECASE)
        mine = [ln for ln in lines if pat.search(ln)]
        out[r.agent_id] = "\n".join(mine) if mine else f"Carry out the part of the plan that fits your role ({r.name})."
    return out


def clipped(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: its start and its end around a note of how much of
    the middle was left out (a traceback's last line and a table's last rows matter as much as the
    first ones)."""
    if len(text) <= limit:
        return text
    note = f"\n[... {len(text)} characters, the middle left out ...]\n"
    keep = max(limit - len(note), 0)
    if keep == 0:
        return text[:limit]
    head = keep - keep // 2
    return text[:head] + note + text[len(text) - (keep - head) :]


def output_text(res: ToolLoopResult | None, limit: int = 6000) -> str:
    """What a member produced: its code outputs and artifacts written (tool results, each at most
    2,000 characters, start and end kept) and its final words. The final words come first in the
    budget: when everything is longer than ``limit``, the tool results give way."""
    if res is None:
        return ""
    parts = []
    for m in res.messages:
        if isinstance(m, ToolMessage) and m.name in ("run_code", "write_artifact") and m.status != "error":
            parts.append(f"[{m.name}] {clipped(str(m.content), 2000)}")
    tools = "\n".join(parts)
    if not res.final:
        return clipped(tools, limit)
    summary = clipped(f"[summary] {res.final}", limit)
    room = limit - len(summary) - 1
    return f"{clipped(tools, room)}\n{summary}" if tools and room > 0 else summary
