"""The four teams of a science run and their roles (paper §4.1 and Appendix C.2/C.5).

The teams work one after another, each reading its predecessors' artifacts and writing its own:
data -> model -> eval -> writing. A team has 2 or 3 agents: its lead (who plans and synthesizes),
a member, and with team size 3 the specialist of Appendix C.5. The writing team has no code tool.
Role descriptions are in our words, with the content of Appendix C.2 (leads) and C.5 (the third
specialists); the second members' descriptions are ours (the paper shows only "representative"
roles).
"""

from __future__ import annotations

from dataclasses import dataclass

TEAMS = ("data", "model", "eval", "writing")
DISPLAY = {"data": "Data", "model": "Modeling", "eval": "Evaluation", "writing": "Writing"}
ARTIFACT = {
    "data": "dataset_description",
    "model": "model_architecture",
    "eval": "evaluation_report",
    "writing": "final_paper",
}
CODE_TEAMS = frozenset({"data", "model", "eval", "solo"})
#: The single analyst of the solo pipeline (``--pipeline solo``; ``cooplab bench science
#: --team-size 1``): one agent with the code tool does the whole project and writes the final paper.
SOLO_TEAM = "solo"
DISPLAY[SOLO_TEAM] = "Solo"
ARTIFACT[SOLO_TEAM] = "final_paper"


@dataclass(frozen=True)
class Role:
    team: str
    slot: int  #: 0 = the lead
    name: str
    description: str

    @property
    def agent_id(self) -> str:
        """The agent's id in the ledger, traces and sandbox pool: ``team.slot`` (``data.0`` is the data lead)."""
        return f"{self.team}.{self.slot}"

    @property
    def is_lead(self) -> bool:
        return self.slot == 0


_ROLES: dict[str, tuple[tuple[str, str], ...]] = {
    "data": (
        (
            "Data Lead",
            "You plan how the data is analyzed. You write the code that loads and cleans it, deal with missing values, "
            "and make sure the team produces a thorough dataset_description artifact: the data's structure, its "
            "quality "
            "problems and the main patterns found.",
        ),
        (
            "Data Analyst",
            "You explore the data: summary statistics, distributions, correlations and patterns over time or space. "
            "You report concrete numbers that the lead can put into the dataset_description.",
        ),
        (
            "Domain Expert",
            "You check which features matter scientifically and write feature-engineering code: you judge "
            "relevance, build derived features and document every feature-engineering decision.",
        ),
    ),
    "model": (
        (
            "ML Engineer",
            "You plan the modeling. You design the pipeline, choose suitable methods, write the main training code, "
            "and make sure the team produces a model_architecture artifact that explains the approach and why.",
        ),
        (
            "Modeler",
            "You implement and fit the models the plan asks for and report their fitted parameters and their scores on "
            "held-out data.",
        ),
        (
            "Experimentalist",
            "You run ablations and comparisons: baselines, feature subsets and hyperparameters, and report the "
            "comparisons as numbers (an experiment_results artifact).",
        ),
    ),
    "eval": (
        (
            "Eval Lead",
            "You plan the evaluation. You choose the metrics, write the evaluation code, and make sure the team "
            "produces "
            "an evaluation_report artifact that summarizes how well the models do, with statistical rigor.",
        ),
        (
            "Statistician",
            "You test whether the results hold up: confidence intervals, significance tests and comparisons against "
            "baselines, with the numbers.",
        ),
        (
            "Error Analyst",
            "You study the models' errors and failure modes: confusion matrices, error distributions, performance "
            "by subgroup, and the systematic patterns in the failures.",
        ),
    ),
    "writing": (
        (
            "Lead Author",
            "You plan the paper and produce the final_paper artifact. You combine every team's output into one "
            "coherent scientific report with the sections abstract, introduction, dataset description, methods, "
            "results, evaluation and conclusion, and edit it for clarity and flow. You have no code tool.",
        ),
        (
            "Co-Author",
            "You draft the abstract, introduction, dataset description and methods sections from the upstream "
            "artifacts. "
            "You have no code tool.",
        ),
        (
            "Results Writer",
            "You write the results, discussion and conclusion sections, quoting the actual numbers of the evaluation "
            "team's report, and discuss implications, limitations and future work. You have no code tool.",
        ),
    ),
}


SOLO = Role(
    SOLO_TEAM,
    0,
    "Solo Analyst",
    "You do the whole project alone: you load and explore the data, run the analyses the project asks for with the "
    "code tool, check your numbers, and write the final_paper artifact that answers the project's questions. "
    "There is no team and no one reviews your work.",
)


def roles(team: str, size: int) -> list[Role]:
    """The ``size`` (1, 2 or 3) roles of ``team``, the lead first (size 1: the lead alone). The solo
    team is the one analyst (:data:`SOLO`) whatever the size."""
    if team == SOLO_TEAM:
        return [SOLO]
    if team not in TEAMS:
        raise ValueError(f"team must be one of {', '.join(TEAMS)}, got {team!r}")
    if size not in (1, 2, 3):
        raise ValueError(f"team size must be 1, 2 or 3, got {size!r}")
    return [Role(team, i, name, desc) for i, (name, desc) in enumerate(_ROLES[team][:size])]


def all_roles(size: int) -> list[Role]:
    return [r for t in TEAMS for r in roles(t, size)]


def pipeline_roles(pipeline: str, size: int) -> list[Role]:
    """Every agent of a run: the four teams' (``teams``) or the one analyst (``solo``)."""
    return [SOLO] if pipeline == "solo" else all_roles(size)


def role_of(agent_id: str, size: int) -> Role:
    team, _, slot = agent_id.partition(".")
    rs = roles(team, size)
    return rs[int(slot)]
