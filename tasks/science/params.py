"""Settings of a science run (paper §4.1, Appendix C), every value bounded (a config file is hostile input)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator, model_serializer, model_validator

from cooplab.limits import RULES
from cooplab.tasks.science.datasets import SIZES, TASKS

PAPER = "paper §4.1 / Appendix C"
OURS = "cooplab (the paper does not say)"
TEAM_KINDS = ("llm", "oracle", "garbage")


def _f(default, description: str, source: str = PAPER, **kw):
    return Field(default, description=description, json_schema_extra={"source": source}, **kw)


class ScienceParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: Literal["ecology", "anomaly", "biomarker", "geospatial"] = _f(
        "ecology", "The science task (§4.1, Appendix C.3)."
    )
    team: Literal["llm", "oracle", "garbage"] = _f(
        "llm",
        "Who works: LLM agents, or a built-in scripted team (oracle: correct "
        "code and report; garbage: a useless report) that calibrates the scorers.",
        OURS,
    )
    team_size: Literal[1, 2, 3] = _f(
        2,
        "Agents per team (§4.1.1: 2 or 3; Appendix C.5's specialist is the third). 1 (ours): "
        "every team is its lead alone, without deliberation - four single agents in sequence.",
    )
    pipeline: Literal["teams", "solo"] = _f(
        "teams",
        "Who does the project: the paper's four sequential teams, or (ours) one solo "
        "analyst with the code tool who writes the final paper itself: the single-agent "
        "baseline (team size 1 only).",
        OURS,
    )
    visibility: Literal["full", "team", "hidden"] = _f("full", "Budget visibility in the system prompt (§4.1).")
    prompt: Literal["standard", "tom"] = _f("standard", "Prompting (§4.1.1: standard or theory of mind).")
    data_size: Literal["small", "default"] = _f("default", "Size of the generated dataset.", OURS)
    max_reentries: Annotated[int, RULES["max-reentries"]] = _f(
        1, "Passes a team may be asked for by requests of later teams (the cap that stops loops).", OURS
    )
    max_steps: Annotated[int, RULES["max-steps"]] = _f(
        8, "Model calls per member in the work phase (the tool loop's step cap).", OURS
    )
    plan_steps: Annotated[int, RULES["loop-steps"]] = _f(3, "Model calls of the lead's planning loop.", OURS)
    synthesis_steps: Annotated[int, RULES["loop-steps"]] = _f(4, "Model calls of the lead's synthesis loop.", OURS)
    deliberation_rounds: Annotated[int, RULES["deliberation-rounds"]] = _f(
        2, "Rounds of team deliberation per pass (Appendix C.6: 2)."
    )
    code_timeout: Annotated[float, RULES["code-timeout"]] = _f(
        30.0, "Seconds one run_code call may take (Appendix C.1: 30 s)."
    )
    code_output_chars: Annotated[int, RULES["chars"]] = _f(
        4000, "Characters of a run_code result shown to the model.", OURS
    )
    synthesis_excerpt: Annotated[int, RULES["chars"]] = _f(
        3000, "Characters of each member's output in the synthesis prompt (Appendix C.6: 3000)."
    )
    max_tokens_per_call: Annotated[int | None, RULES["max-tokens"].within(optional=True)] = _f(
        None, "Output cap of one model call (default: the run's --max-tokens).", OURS
    )
    status_at: Literal["end", "paper"] = _f(
        "end",
        "Where the live budget lines go (the status, the 30%/15% warnings): 'end', "
        "after every fixed part of the system prompt (its tools included), so that a "
        "model keeping what it read reuses all of it; or 'paper', Appendix C.1's place "
        "between the team members and the budget rules (then everything after them is "
        "read afresh on every call).",
        OURS,
    )
    warn_when_hidden: bool = _f(
        True,
        "Show the 30%/15% budget warnings under hidden visibility too (the paper does: hidden "
        "hides the numbers, not the warnings).",
        PAPER,
    )

    @model_validator(mode="after")
    def _solo_is_one(self) -> "ScienceParams":
        if self.pipeline == "solo":
            if "team_size" in self.model_fields_set and self.team_size != 1:
                raise ValueError(f"pipeline solo is one analyst: team_size must be 1, got {self.team_size}")
            object.__setattr__(self, "team_size", 1)
        return self


class Judge(BaseModel):
    """The LLM judge of a run (``--judge MODEL``): its model, how many times it scores, its budget."""

    model_config = ConfigDict(extra="forbid")

    model: StrictStr = Field(description="the judge's model spec (checked with the run's model settings)")
    samples: Annotated[int, RULES["judge-samples"]] = Field(
        3, description="judge calls per run, averaged (--judge-samples)"
    )
    budget: Annotated[float | None, RULES["budget"]] = Field(
        None, description="USD the judge may spend (--judge-budget; null: the team's budget)"
    )


class Custom(BaseModel):
    """A run on your own data (``--dataset``): the task text, the data files (each with its path,
    stem and SHA-256, and what was read of it) and the facts to score against (or null)."""

    model_config = ConfigDict(extra="forbid")

    task: StrictStr
    datasets: list[dict[str, Any]] = Field(min_length=1)
    facts: Any = None

    @field_validator("task")
    @classmethod
    def _task(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("must be the task text")
        return text

    @field_validator("datasets")
    @classmethod
    def _datasets(cls, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not all(isinstance(d.get(k), str) for d in items for k in ("path", "stem", "sha256")):
            raise ValueError("must be a non-empty list of {path, stem, sha256, ...}")
        return items

    @field_validator("facts")
    @classmethod
    def _facts(cls, facts: Any) -> Any:
        from cooplab.evals.science_scoring import truth_facts

        if facts is not None:
            truth_facts({"facts": facts})  # a ValueError names what is wrong
        return facts


class ScienceSettings(ScienceParams):
    """Every setting of a science run (config.json's ``params``): :class:`ScienceParams`, the LLM
    judge (null: the heuristic scorer only) and, for a run on your own data, ``custom``."""

    judge: Judge | None = _f(
        None, "The LLM judge (--judge MODEL, --judge-samples, --judge-budget); null: the heuristic scorer only.", OURS
    )
    custom: Custom | None = _f(
        None, "Your own data (--dataset, --task-file, --truth); null: the built-in task's generated dataset.", OURS
    )

    @model_validator(mode="before")
    @classmethod
    def _stored_status(cls, data: Any, info: Any) -> Any:
        """A stored run that names every setting but ``status_at`` was written before it existed,
        when the live budget lines sat in Appendix C.1's place: it resumes so."""
        if (
            isinstance(data, dict)
            and (info.context or {}).get("stored")
            and "status_at" not in data
            and set(ScienceParams.model_fields) - {"status_at"} <= set(data)
        ):
            return {**data, "status_at": "paper"}
        return data

    @model_serializer(mode="wrap")
    def _no_custom(self, handler: Any) -> dict[str, Any]:
        """``custom`` is written only for a run on your own data (as config.json always had it)."""
        out = handler(self)
        if out.get("custom") is None:
            out.pop("custom", None)
        return out

    @property
    def n_agents(self) -> int:
        from cooplab.tasks.science.roles import pipeline_roles

        return len(pipeline_roles(self.pipeline, self.team_size))


assert set(TASKS) == {"ecology", "anomaly", "biomarker", "geospatial"} and set(SIZES) == {"small", "default"}
