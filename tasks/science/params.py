"""Settings of a science run (paper §4.1, Appendix C), every value bounded (a config file is hostile input)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cooplab.tasks.science.datasets import SIZES, TASKS

PAPER = "paper §4.1 / Appendix C"
OURS = "cooplab (the paper does not say)"
TEAM_KINDS = ("llm", "oracle", "garbage")


def _f(default, description: str, source: str = PAPER, **kw):
    return Field(default, description=description, json_schema_extra={"source": source}, **kw)


class ScienceParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: Literal["ecology", "anomaly", "biomarker", "geospatial"] = _f("ecology", "The science task (§4.1, Appendix C.3).")
    team: Literal["llm", "oracle", "garbage"] = _f("llm", "Who works: LLM agents, or a built-in scripted team (oracle: correct "
                                                           "code and report; garbage: a useless report) that calibrates the scorers.", OURS)
    team_size: Literal[1, 2, 3] = _f(2, "Agents per team (§4.1.1: 2 or 3; Appendix C.5's specialist is the third). 1 (ours): "
                                        "every team is its lead alone, without deliberation - four single agents in sequence.")
    pipeline: Literal["teams", "solo"] = _f("teams", "Who does the project: the paper's four sequential teams, or (ours) one solo "
                                                    "analyst with the code tool who writes the final paper itself: the single-agent "
                                                    "baseline (team size 1 only).", OURS)
    visibility: Literal["full", "team", "hidden"] = _f("full", "Budget visibility in the system prompt (§4.1).")
    prompt: Literal["standard", "tom"] = _f("standard", "Prompting (§4.1.1: standard or theory of mind).")
    data_size: Literal["small", "default"] = _f("default", "Size of the generated dataset.", OURS)
    max_reentries: int = _f(1, "Passes a team may be asked for by requests of later teams (the cap that stops loops).", OURS, ge=0, le=5)
    max_steps: int = _f(8, "Model calls per member in the work phase (the tool loop's step cap).", OURS, ge=1, le=100)
    plan_steps: int = _f(3, "Model calls of the lead's planning loop.", OURS, ge=1, le=20)
    synthesis_steps: int = _f(4, "Model calls of the lead's synthesis loop.", OURS, ge=1, le=20)
    deliberation_rounds: int = _f(2, "Rounds of team deliberation per pass (Appendix C.6: 2).", ge=0, le=5)
    code_timeout: float = _f(30.0, "Seconds one run_code call may take (Appendix C.1: 30 s).", gt=0, le=600, allow_inf_nan=False)
    code_output_chars: int = _f(4000, "Characters of a run_code result shown to the model.", OURS, ge=200, le=100_000)
    synthesis_excerpt: int = _f(3000, "Characters of each member's output in the synthesis prompt (Appendix C.6: 3000).", ge=200,
                                le=100_000)
    max_tokens_per_call: int | None = _f(None, "Output cap of one model call (default: the run's --max-tokens).", OURS, ge=1,
                                         le=100_000)
    status_at: Literal["end", "paper"] = _f("end", "Where the live budget lines go (the status, the 30%/15% warnings): 'end', "
                                                   "after every fixed part of the system prompt (its tools included), so that a "
                                                   "model keeping what it read reuses all of it; or 'paper', Appendix C.1's place "
                                                   "between the team members and the budget rules (then everything after them is "
                                                   "read afresh on every call).", OURS)
    warn_when_hidden: bool = _f(True, "Show the 30%/15% budget warnings under hidden visibility too (the paper does: hidden "
                                      "hides the numbers, not the warnings).", PAPER)


    @model_validator(mode="after")
    def _solo_is_one(self) -> "ScienceParams":
        if self.pipeline == "solo":
            if "team_size" in self.model_fields_set and self.team_size != 1:
                raise ValueError(f"pipeline solo is one analyst: team_size must be 1, got {self.team_size}")
            object.__setattr__(self, "team_size", 1)
        return self


assert set(TASKS) == {"ecology", "anomaly", "biomarker", "geospatial"} and set(SIZES) == {"small", "default"}
