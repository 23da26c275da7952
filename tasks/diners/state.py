"""The state of a Diner's Dilemma batch: ``S`` replicate societies of ``N`` diners side by side.

Per-agent arrays are ``(S, N)``; who punished whom is ``(S, N, N)``; per-society settings are
``(S,)`` arrays under ``params``. ``history``, ``decisions`` and ``ledger`` are append-only logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np

from cooplab.graphs.state import AppendLog

State = Mapping[str, Any]
PHASES = ("order", "punish", "metanorm", "utility", "imitate", "swap")


class DinersState(TypedDict, total=False):
    seed: int
    round: int  # current iteration t (1-based); > max_round once the run is over
    max_round: int
    params: dict[str, np.ndarray]  # per-society (S,) arrays: p, k, beta, c_b, v_b, c_p, v_p, accumulate, stated
    condition: np.ndarray  # (S,)
    replicate: np.ndarray  # (S,)
    group: np.ndarray  # (S, N) group index of each agent (groups are fixed)
    venue: np.ndarray  # (S, N) venue index of each agent's group this iteration
    strategy: np.ndarray  # (S, N) strategy codes (model.STRATEGIES)
    reformed: np.ndarray  # (S, N) bool: has been punished while playing R1 (R1 then cooperates)
    defect: np.ndarray  # (S, N) bool: ordered the premium meal this iteration
    punish1: np.ndarray  # (S, N, N) bool: i punished j in stage 2
    punish2: np.ndarray  # (S, N, N) bool: i punished j in stage 3 (metanorm)
    meal: np.ndarray  # (S, N) meal value - bill share
    utility: np.ndarray  # (S, N) this iteration's utility
    score: np.ndarray  # (S, N) pi: accumulated utility (or the last iteration's, accumulate = 0)
    active: np.ndarray  # (S,) bool
    played: np.ndarray  # (S, N) the strategies played this iteration (before imitation)
    imitation: dict[str, np.ndarray]  # this iteration's role models, probabilities, adoptions
    history: AppendLog  # one record per iteration
    # LLM agents
    personas: list[list[int]]  # (S x N) persona index of each agent
    decisions: AppendLog
    ledger: AppendLog
