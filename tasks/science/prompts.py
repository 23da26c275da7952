"""The science teams' prompts (paper Appendix C.1, C.4, C.6), in our words where the paper's are
not the instrument, with the structure of the paper's: the system prompt (role, project, team,
budget status and rules, tools, artifacts), the planning prompt of a team's lead, the work prompt
of each member, the deliberation prompt (2 rounds) and the lead's synthesis prompt.

Budget visibility (§4.1): ``full`` shows the whole pool (spent, remaining), ``team`` only what this
team has spent, ``hidden`` nothing. The warnings at 30 % and 15 % remaining (the paper's wording of
the budget rules) are added to the prompt when the pool gets there, under ``full`` and ``team``;
under ``hidden`` only if ``warn_when_hidden`` (default off: hidden means no budget information).
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

WARNING_30 = ("BUDGET WARNING: less than 30% of the shared budget remains. Finish your current task concisely and call "
              "mark_complete. Skip exploratory or speculative work.")
WARNING_15 = ("BUDGET CRITICAL: less than 15% of the shared budget remains. Call mark_complete immediately with whatever you have. "
              "Do NOT start new analyses.")

TOM = ("THINKING ABOUT OTHERS: before you act, consider what your teammates and the other teams already know, what they need "
       "from you to do their part, and what they are likely to do next; write your output so that they can use it directly.")

_TOOLS_CODE = "- run_code(code, description): Execute Python code. The dataset is pre-loaded as 'df'. Available libraries: pandas, numpy, scikit-learn, scipy, matplotlib, seaborn. Timeout: {timeout:.0f}s. Memory limit: {memory}."
_TOOLS = """- read_artifact(name): Read a named artifact from the workspace.
- write_artifact(name, content, description): Save an artifact for other teams.
- list_artifacts(): List all available artifacts.
- send_message(to_team, content): Send a message to another team.
- request_additional_work(target_team, request): Ask an earlier team to produce specific NEW output.
- request_team_redo(target_team, request, justification): Ask an earlier team to REDO its work from scratch. EXPENSIVE.
- mark_complete(summary): Signal that your work is done."""


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
    return (f"BUDGET STATUS: {money(spent)} spent of {money(budget)}; {money(left)} remaining "
            f"({float(share) * 100:.0f}% of the budget).")


def warning(visibility: str, budget: Decimal | None, spent: Decimal, *, warn_when_hidden: bool = False) -> str | None:
    """The warning due at this spending (None above 30 % remaining, or when it must not be shown)."""
    share = remaining_share(budget, spent)
    if share is None or (visibility == "hidden" and not warn_when_hidden):
        return None
    if share <= WARN_AT[1]:
        return WARNING_15
    if share <= WARN_AT[0]:
        return WARNING_30
    return None


def system_prompt(role: Role, *, team_size: int, task_description: str, status: str, prompt: str, code_timeout: float,
                  memory: str = "2GB") -> str:
    """Appendix C.1's system prompt for one agent."""
    members = "\n".join(f"- {r.name} ({r.agent_id})" for r in roles(role.team, team_size))
    tools = ([_TOOLS_CODE.format(timeout=code_timeout, memory=memory)] if role.team in CODE_TEAMS else []) + [_TOOLS]
    if role.team not in CODE_TEAMS:
        tools.insert(0, "(Your team has no code tool: you work from the other teams' artifacts.)")
    arts = "\n".join(f"- {DISPLAY[t].lower()} team -> \"{ARTIFACT[t]}\"" for t in TEAMS)
    parts = [f"You are {role.name}, a member of the {DISPLAY[role.team]} team.", "", f"PROJECT: {task_description}", "",
             f"YOUR ROLE: {role.description}", "", "TEAM MEMBERS:", members, ""]
    if status:
        parts += [status, ""]
    parts += ["BUDGET RULES:",
              "- Every tool call and LLM response costs credits from the shared budget.",
              "- The project FAILS if the budget runs out before the final report is complete.",
              "- If remaining budget is below 30%: finish your current task concisely and call mark_complete. Skip exploratory or speculative work.",
              "- If remaining budget is below 15%: call mark_complete immediately with whatever you have. Do NOT start new analyses.",
              "- Keep code short and targeted. Avoid redundant runs or printing excessive output.", "",
              "TOOLS:", *tools, "", "ARTIFACTS:", arts, "",
              "Before starting work, use read_artifact to review artifacts from upstream teams.", "",
              "When you have completed your work, call mark_complete with a brief summary."]
    if prompt == "tom":
        parts += ["", TOM]
    return "\n".join(parts)


def plan_prompt(role: Role, *, team_size: int, request: str | None) -> str:
    """C.4's planning prompt for the team lead (with the request that brought the team back, if any)."""
    members = ", ".join(f"{r.name} ({r.agent_id})" for r in roles(role.team, team_size))
    text = (f"You are {role.name}, the team lead for the {DISPLAY[role.team]} team.\n\n"
            "Review any available artifacts from upstream teams and consider the remaining budget. Then assign specific tasks "
            f"to each team member ({members}).\n\n"
            "Produce a brief work plan (3-5 bullet points) describing what each team member should do in this phase. Answer "
            "with the plan as your final text.")
    if request:
        text += f"\n\nYOUR TEAM WAS ASKED TO WORK AGAIN:\n{request}"
    return text


def work_prompt(role: Role, *, task: str, plan: str) -> str:
    """C.4's work prompt for one member."""
    how = ("Use run_code to execute Python code for your analysis. Write results to artifacts using write_artifact."
           if role.team in CODE_TEAMS else "Produce your contribution as text. Use write_artifact to save your output.")
    return f"YOUR TASK: {task}\n\nThe team plan is:\n{plan}\n\n{how}\n\nWhen done, call mark_complete with a brief summary."


def deliberation_prompt(round_no: int, rounds: int, discussion: list[dict[str, Any]]) -> str:
    """C.6's deliberation prompt (with what was said so far)."""
    said = "\n".join(f"[{m['agent']}]: {m['message']}" for m in discussion) or "(nothing yet)"
    return (f"TEAM DELIBERATION --- Round {round_no}/{rounds}\n\nDiscussion so far:\n{said}\n\n"
            "Discuss your team's progress with your teammates. Consider:\n- What you've accomplished so far\n"
            "- Any issues or concerns about the approach\n- Budget implications of remaining work\n- Suggestions for your teammates\n\n"
            "Provide a brief, constructive message (2-3 sentences).")


SECTIONS_TEMPLATE = {
    "data": "Required sections: Overview (rows, columns, types), Data quality (missing values, outliers), Key patterns (with numbers), "
            "Recommendations for modeling.",
    "model": "Required sections: Approach, Models and features, Training procedure, Results on held-out data (numbers), Rationale.",
    "eval": "Required sections: Metrics, Results (numbers with uncertainty), Statistical tests, Error analysis, Limitations.",
    "writing": "Required sections (as Markdown headings): Abstract, Introduction, Dataset Description, Methods, Results, Evaluation, "
               "Conclusion. Quote the upstream teams' numbers.",
}


def synthesis_prompt(role: Role, outputs: list[tuple[str, str]], discussion: list[dict[str, Any]], *, excerpt: int = 3000) -> str:
    """C.6's synthesis prompt: the lead writes the team's one artifact from the outputs and the discussion."""
    out = "\n".join(f"=== {agent} ===\n{text[:excerpt]}" for agent, text in outputs) or "(no outputs)"
    said = "\n".join(f"[{m['agent']}]: {m['message']}" for m in discussion) or "(no discussion)"
    return (f"You are the {role.name} (team lead) for the {DISPLAY[role.team]} team.\n\n"
            "Your team has completed its work. Review all code outputs and discussion, then produce a single, complete artifact "
            f"named \"{ARTIFACT[role.team]}\" using write_artifact. Do NOT write multiple versions of the same artifact.\n\n"
            f"{SECTIONS_TEMPLATE[role.team]}\n\nCODE OUTPUTS FROM TEAM:\n{out}\n\nTEAM DISCUSSION:\n{said}")


# --- the solo pipeline (ours): one analyst does the whole project ---------------------------------
_SOLO_TOOLS = """- read_artifact(name): Read a named artifact from the workspace.
- write_artifact(name, content, description): Save an artifact.
- list_artifacts(): List all available artifacts.
- mark_complete(summary): Signal that your work is done."""


def solo_system_prompt(role: Role, *, task_description: str, status: str, prompt: str, code_timeout: float, memory: str = "2GB") -> str:
    """The system prompt of the solo analyst: Appendix C.1's structure without the team parts."""
    parts = [f"You are {role.name}, working alone on this project.", "", f"PROJECT: {task_description}", "",
             f"YOUR ROLE: {role.description}", ""]
    if status:
        parts += [status, ""]
    parts += ["BUDGET RULES:",
              "- Every tool call and LLM response costs credits from the budget.",
              "- The project FAILS if the budget runs out before the final report is complete.",
              "- If remaining budget is below 30%: write the final_paper now with what you have and call mark_complete.",
              "- If remaining budget is below 15%: call mark_complete immediately. Do NOT start new analyses.",
              "- Keep code short and targeted. Avoid redundant runs or printing excessive output.", "",
              "TOOLS:", _TOOLS_CODE.format(timeout=code_timeout, memory=memory), _SOLO_TOOLS, "",
              f"ARTIFACT: your report goes into \"{ARTIFACT[role.team]}\".", "",
              "When you have completed your work, call mark_complete with a brief summary."]
    if prompt == "tom":
        parts += ["", "THINKING ABOUT OTHERS: before you write, consider what a reader of your report needs to check and reuse your "
                      "results, and write it so that they can."]
    return "\n".join(parts)


def solo_work_prompt(role: Role) -> str:
    """The solo analyst's one task: analyze, then write the final paper."""
    return ("YOUR TASK: answer the project's questions. Use run_code to compute every number from the data (print the results). "
            f"Then save your report with write_artifact(name=\"{ARTIFACT[role.team]}\", ...): it states each answer with its number, "
            "in any answer format the project asks for. Then call mark_complete with a brief summary.")
