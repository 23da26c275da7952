"""The state of a batch of ``S`` simulations of one behavioral game, played side by side.

Per-player arrays are ``(S, N)`` (Public Goods allocations ``(S, N, 3)``, sanctions ``(S, N, N)``),
with players numbered group by group. ``history``, ``decisions``, ``ledger`` and ``messages`` are
append-only logs, so a checkpoint stores only each step's new rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np

from cooplab.graphs.state import AppendLog

State = Mapping[str, Any]


def small_int(hi: int) -> type:
    """The smallest signed integer type holding 0..hi (actions and sanctions are checkpointed every round)."""
    return np.int8 if hi <= 127 else np.int16 if hi <= 32_767 else np.int32


class GameState(TypedDict, total=False):
    seed: int
    round: int  # the round being played (1-based); > max_round once the run is over
    max_round: int
    simulations: int  # S
    group: np.ndarray  # (N,) group index of each player (players numbered group by group)
    action: np.ndarray  # (S, N) this round's actions (Public Goods: (S, N, 3) keep, group, global)
    stage_payoff: np.ndarray  # (S, N) CPR with sanctioning: the extraction stage's payoff (what sanctioners see)
    sanction: np.ndarray  # (S, N, N) CPR with sanctioning: tokens i spends on j this round
    dropped: np.ndarray  # (S,) sanction tokens aimed outside the group or at oneself (refused)
    history: AppendLog  # one record per round
    # LLM players: decision rows, the ledger's audit trail, deliberation messages
    decisions: AppendLog
    ledger: AppendLog
    messages: AppendLog
