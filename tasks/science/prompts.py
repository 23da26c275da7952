"""The science teams' prompts, written by us. They carry what the paper's Appendix C.1, C.4 and
C.6 prescribe (the same parts in the same order, the same rules, thresholds, tool names and
artifacts), not its sentences: the system prompt (role, project, team, budget status and rules,
tools, artifacts), the lead's planning prompt, each member's work prompt, the deliberation prompt
(2 rounds) and the lead's synthesis prompt. One departure, by default: the budget status changes
with every call, so the team graph leaves it out of :func:`system_prompt` and sends it (with the
warning due) after all of it, where a model that keeps what it read can reuse everything before
it (``ScienceParams.status_at``: ``"paper"`` puts it in C.1's place).

Budget visibility (§4.1): ``full`` shows the whole pool (spent, remaining), ``team`` only what this
team has spent, ``hidden`` no numbers. The warnings at 30 % and 15 % remaining are added when the
pool gets there in every condition, as in the paper: hidden visibility hides the numbers, not the
warnings (``warn_when_hidden=False`` turns them off under ``hidden``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from cooplab.tasks.science.roles import (
    ARTIFACT,
    CODE_TEAMS,
    DISPLAY,
    TEAMS,
    Role,
    roles,
)

VISIBILITY = ("full", "team", "hidden")
PROMPTS = ("standard", "tom")
WARN_AT = (Decimal("0.30"), Decimal("0.15"))

WARNING_30 = (
    "BUDGET WARNING: under 30% of the shared credits are left. Wrap up the step you are on in as few calls as "
    "possible, then call mark_complete; drop any optional or exploratory analysis."
)
WARNING_15 = (
    "BUDGET CRITICAL: under 15% of the shared credits are left. Call mark_complete now with what you already have; "
    "begin no further analysis."
)

TOM = (
    "THINKING ABOUT OTHERS: before you act, consider what your teammates and the other teams already know, what they "
    "need "
    "from you to do their part, and what they are likely to do next; write your output so that they can use it "
    "directly."
)

_TOOLS_CODE = (
    "- run_code(code, description): runs your Python code in a sandbox where the data is already loaded "
    "into a DataFrame named 'df'; you can import pandas, numpy, scikit-learn, scipy, matplotlib and seaborn; "
    "each run stops after {timeout:.0f}s and may use up to {memory} of memory."
)
_TOOLS = """- read_artifact(name): returns the workspace artifact with that name.
- write_artifact(name, content, description): stores your output under a name so that other teams can read it.
- list_artifacts(): names every artifact in the workspace.
- send_message(to_team, content): passes a note to another team.
- request_additional_work(target_team, request): asks a team that worked before you for a specific piece of NEW output.
- request_team_redo(target_team, request, justification): sends a team that worked before you back to REDO its work; this costs a lot.
- mark_complete(summary): tells everyone your part is finished."""  # noqa: E501 (text kept verbatim)


def money(x: Any) -> str:
    return f"${Decimal(str(x)).quantize(Decimal('0.0001'))}"


def remaining_share(budget: Decimal | None, spent: Decimal) -> Decimal | None:
    if budget is None or budget <= 0:
        return None if budget is None else Decimal(0)
    return max(Decimal(0), (budget - spent) / budget)


def budget_status(visibility: str, *, budget: Decimal | None, spent: Decimal, team_spent: Decimal, team: str) -> str:
    """The BUDGET STATUS block of the system prompt for a visibility setting."""
    if visibility == "hidden":
        return ""
    if visibility == "team":
        return f"BUDGET STATUS: the {DISPLAY[team]} team has spent {money(team_spent)} of the shared budget so far."
    if budget is None:
        return f"BUDGET STATUS: {money(spent)} spent so far; the budget has no cap."
    left = max(Decimal(0), budget - spent)
    share = remaining_share(budget, spent)
    if share is None:  # pragma: no cover - a budget is set here, so there is a share
        raise ValueError("no remaining share without a budget")
    return (
        f"BUDGET STATUS: {money(spent)} spent of {money(budget)}; {money(left)} remaining "
        f"({float(share) * 100:.0f}% of the budget)."
    )


def warning(visibility: str, budget: Decimal | None, spent: Decimal, *, warn_when_hidden: bool = True) -> str | None:
    """The warning due at this spending (None above 30 % remaining, or under ``hidden`` with
    ``warn_when_hidden=False``)."""
    share = remaining_share(budget, spent)
    if share is None or (visibility == "hidden" and not warn_when_hidden):
        return None
    if share <= WARN_AT[1]:
        return WARNING_15
    if share <= WARN_AT[0]:
        return WARNING_30
    return None


def system_prompt(
    role: Role,
    *,
    team_size: int,
    task_description: str,
    status: str,
    prompt: str,
    code_timeout: float,
    memory: str = "2GB",
) -> str:
    """Appendix C.1's system prompt for one agent."""
    members = "\n".join(f"- {r.name} ({r.agent_id})" for r in roles(role.team, team_size))
    tools = ([_TOOLS_CODE.format(timeout=code_timeout, memory=memory)] if role.team in CODE_TEAMS else []) + [_TOOLS]
    if role.team not in CODE_TEAMS:
        tools.insert(0, "(Your team has no code tool: you work from the other teams' artifacts.)")
    arts = "\n".join(f'- {DISPLAY[t].lower()} team -> "{ARTIFACT[t]}"' for t in TEAMS)
    parts = [
        f"You are {role.name}, a member of the {DISPLAY[role.team]} team.",
        "",
        f"PROJECT: {task_description}",
        "",
        f"YOUR ROLE: {role.description}",
        "",
        "TEAM MEMBERS:",
        members,
        "",
    ]
    if status:
        parts += [status, ""]
    parts += [
        "BUDGET RULES:",
        "- All teams draw on one pool of credits: each model answer and each tool call is paid from it.",
        "- If the pool is used up before the final report exists, the whole project has FAILED.",
        "- Under 30% left: wrap up the step you are on in as few calls as possible and call mark_complete; drop "
        "optional "
        "or exploratory analysis.",
        "- Under 15% left: call mark_complete now with what you already have; begin no further analysis.",
        "- Write brief, focused code; do not repeat runs or print more output than you need.",
        "",
        "TOOLS:",
        *tools,
        "",
        "ARTIFACTS:",
        arts,
        "",
        "First read what the teams before you produced (read_artifact).",
        "",
        "Once your part is done, call mark_complete with a short summary of it.",
    ]
    if prompt == "tom":
        parts += ["", TOM]
    return "\n".join(parts)


def plan_prompt(role: Role, *, team_size: int, request: str | None) -> str:
    """C.4's planning prompt for the team lead (with the request that brought the team back, if any)."""
    members = ", ".join(f"{r.name} ({r.agent_id})" for r in roles(role.team, team_size))
    text = (
        f"You are {role.name}, and you lead the {DISPLAY[role.team]} team.\n\n"
        "Look at what the teams before you left in the workspace and at how much of the budget is left, then give each "
        f"member of your team ({members}) a concrete job.\n\n"
        "Reply with the plan itself, 3 to 5 bullet points saying who does what in this phase."
    )
    if request:
        text += f"\n\nYOUR TEAM WAS ASKED TO WORK AGAIN:\n{request}"
    return text


def work_prompt(role: Role, *, task: str, plan: str) -> str:
    """C.4's work prompt for one member."""
    how = (
        "Do the analysis with run_code and store what you find with write_artifact."
        if role.team in CODE_TEAMS
        else "Write your part as text and store it with write_artifact."
    )
    return f"YOUR TASK: {task}\n\nYour lead's plan:\n{plan}\n\n{how}\n\nThen call mark_complete with a short summary."


def deliberation_prompt(round_no: int, rounds: int, discussion: list[dict[str, Any]]) -> str:
    """C.6's deliberation prompt (with what was said so far)."""
    said = "\n".join(f"[{m['agent']}]: {m['message']}" for m in discussion) or "(nothing yet)"
    return (
        f"TEAM DELIBERATION --- Round {round_no}/{rounds}\n\nSaid so far:\n{said}\n\n"
        "Tell your teammates where you stand. Touch on:\n- what you have done\n"
        "- doubts about the approach\n- what the remaining work will cost\n- ideas for your teammates\n\n"
        "Keep it to 2-3 useful sentences."
    )


SECTIONS_TEMPLATE = {
    "data": "Required sections: Overview (rows, columns, types), Data quality (missing values, outliers), Key patterns "
    "(with numbers), "
    "Recommendations for modeling.",
    "model": "Required sections: Approach, Models and features, Training procedure, Results on held-out data "
    "(numbers), Rationale.",
    "eval": "Required sections: Metrics, Results (numbers with uncertainty), Statistical tests, Error analysis, "
    "Limitations.",
    "writing": "Required sections (as Markdown headings): Abstract, Introduction, Dataset Description, Methods, "
    "Results, Evaluation, "
    "Conclusion. Quote the upstream teams' numbers.",
}


def synthesis_prompt(
    role: Role, outputs: list[tuple[str, str]], discussion: list[dict[str, Any]], *, excerpt: int = 3000
) -> str:
    """C.6's synthesis prompt: the lead writes the team's one artifact from the outputs and the discussion."""
    out = "\n".join(f"=== {agent} ===\n{text[:excerpt]}" for agent, text in outputs) or "(no outputs)"
    said = "\n".join(f"[{m['agent']}]: {m['message']}" for m in discussion) or "(no discussion)"
    return (
        f"You are {role.name}, lead of the {DISPLAY[role.team]} team.\n\n"
        "The team's work is done. Go through its outputs and the discussion below and turn them into one finished "
        f'artifact, "{ARTIFACT[role.team]}", stored with write_artifact; write it once, not in several versions.\n\n'
        f"{SECTIONS_TEMPLATE[role.team]}\n\nWHAT THE TEAM PRODUCED:\n{out}\n\nWHAT THE TEAM SAID:\n{said}"
    )


# --- the solo pipeline (ours): one analyst does the whole project ---------------------------------
_SOLO_TOOLS = """- read_artifact(name): returns the workspace artifact with that name.
- write_artifact(name, content, description): stores your output under a name.
- list_artifacts(): names every artifact in the workspace.
- mark_complete(summary): says that your work is finished."""


def solo_system_prompt(
    role: Role, *, task_description: str, status: str, prompt: str, code_timeout: float, memory: str = "2GB"
) -> str:
    """The system prompt of the solo analyst: Appendix C.1's structure without the team parts."""
    parts = [
        f"You are {role.name}, working alone on this project.",
        "",
        f"PROJECT: {task_description}",
        "",
        f"YOUR ROLE: {role.description}",
        "",
    ]
    if status:
        parts += [status, ""]
    parts += [
        "BUDGET RULES:",
        "- Each model answer and each tool call is paid from your credits.",
        "- If the credits are used up before the final report exists, the project has FAILED.",
        "- Under 30% left: write the final_paper now from what you have, then call mark_complete.",
        "- Under 15% left: call mark_complete now; begin no further analysis.",
        "- Write brief, focused code; do not repeat runs or print more output than you need.",
        "",
        "TOOLS:",
        _TOOLS_CODE.format(timeout=code_timeout, memory=memory),
        _SOLO_TOOLS,
        "",
        f'ARTIFACT: your report goes into "{ARTIFACT[role.team]}".',
        "",
        "Once the report is stored, call mark_complete with a short summary.",
    ]
    if prompt == "tom":
        parts += [
            "",
            "THINKING ABOUT OTHERS: before you write, consider what a reader of your report needs to check and reuse "
            "your "
            "results, and write it so that they can.",
        ]
    return "\n".join(parts)


def solo_work_prompt(role: Role) -> str:
    """The solo analyst's one task: analyze, then write the final paper."""
    return (
        "YOUR TASK: answer the project's questions. Use run_code to compute every number from the data (print the "
        "results). "
        f'Then save your report with write_artifact(name="{ARTIFACT[role.team]}", ...): it states each answer with its '
        "number, "
        "in any answer format the project asks for. Then call mark_complete with a brief summary."
    )
