"""The CPR run's tables from its final state: one row per (society, round) and one per agent."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cooplab.graphs.tables import ids


def history_frame(state: dict[str, Any]) -> pd.DataFrame:
    """The per-round table: one row per (society, round) the society was running."""
    hist = state.get("history") or []
    if not hist:
        return pd.DataFrame()
    S = len(state["T_s"])
    cols = [k for k in hist[0] if k not in ("round", "active")]
    active = np.stack([h["active"] for h in hist])  # (rounds, S)
    rounds = np.array([h["round"] for h in hist])
    ri, si = np.nonzero(active)
    data = {
        "condition": np.asarray(state["condition"])[si],
        "replicate": np.asarray(state["replicate"])[si],
        "round": rounds[ri],
    }
    for c in cols:
        arr = np.stack([np.broadcast_to(np.asarray(h[c], dtype=float), (S,)) for h in hist])
        data[c] = arr[ri, si]
    df = pd.DataFrame(data)
    return df.sort_values(["condition", "replicate", "round"], kind="stable").reset_index(drop=True)


def agents_frame(state: dict[str, Any]) -> pd.DataFrame:
    """Final per-agent traits and wealth: one row per agent of each society (``society``: the run's
    index of the society, the decisions' ``society``; ``agent_id``: ``"SOCIETY:AGENT"``)."""
    S, N = state["alive"].shape
    society, agent = np.repeat(np.arange(S), N), np.tile(np.arange(N), S)
    return pd.DataFrame(
        {
            "condition": np.repeat(np.asarray(state["condition"]), N),
            "replicate": np.repeat(np.asarray(state["replicate"]), N),
            "society": society,
            "agent": agent,
            "agent_id": ids(society, agent),  # the agent key of every table (graphs/tables.py)
            "alive": state["alive"].ravel(),
            "e": state["e"].ravel(),
            "m": state["m"].ravel(),
            "p": state["p"].ravel(),
            "g": state["g"].ravel(),
            "wealth": state["P"].ravel(),
        }
    )
