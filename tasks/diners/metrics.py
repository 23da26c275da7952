"""The tables and shares of a Diner's Dilemma run, computed from the final state's ``history``.

``strategy_counts``: strategy counts per society and iteration (iteration 0 is the starting
composition); ``per_agent_tables``: one row per agent and iteration (orders, utilities, imitation)
and one per punishment; ``share_summary``: mean strategy shares (with their s.d. over replicates)
per iteration and at the end, as ``summary.json`` records them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import numpy as np
import pandas as pd

from cooplab.evals.typed import as_frame, as_series
from cooplab.graphs.tables import ids
from cooplab.tasks.diners import model as dm


def _meta(final: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(final["condition"]), np.asarray(final["replicate"])


def strategy_counts(final: Mapping[str, Any], initial: np.ndarray) -> pd.DataFrame:
    """One row per (society, iteration t): strategy counts after iteration t's update (t = 0:
    the initial composition)."""
    cond, rep = _meta(final)
    S, N = initial.shape
    frames = []
    for t, strat in [(0, initial)] + [(int(h["round"]), h["strategy"]) for h in final.get("history") or []]:
        d = {"condition": cond, "replicate": rep, "iteration": np.full(S, t)}
        for c, name in enumerate(dm.STRATEGIES):
            d[name] = (strat == c).sum(axis=1)
        frames.append(pd.DataFrame(d))
    df = pd.concat(frames, ignore_index=True)
    return df.sort_values(["condition", "replicate", "iteration"], kind="stable").reset_index(drop=True)


def per_agent_tables(final: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    cond, rep = _meta(final)
    S, N = np.asarray(final["strategy"]).shape
    orders, utils, imit, pun = [], [], [], []
    names = np.array(dm.STRATEGIES)
    society, agent = np.repeat(np.arange(S), N), np.tile(np.arange(N), S)
    keys = ids(society, agent)  # the agent key of every table (graphs/tables.py)
    for h in final.get("history") or []:
        t = int(h["round"])
        base = {
            "condition": np.repeat(cond, N),
            "replicate": np.repeat(rep, N),
            "society": society,
            "iteration": t,
            "agent": agent,
            "agent_id": keys,
            "group": np.asarray(final["group"]).ravel(),
            "strategy": names[h["strategy_played"]].ravel(),
        }
        orders.append(
            pd.DataFrame(
                {
                    **base,
                    "venue": np.array(dm.VENUES)[h["venue"] % len(dm.VENUES)].ravel(),
                    "order": np.where(h["defect"], "premium", "budget").ravel(),
                }
            )
        )
        given = h["punish1"].sum(axis=2) + h["punish2"].sum(axis=2)
        received = h["punish1"].sum(axis=1) + h["punish2"].sum(axis=1)
        utils.append(
            pd.DataFrame(
                {
                    **base,
                    "meal_utility": h["meal"].ravel(),
                    "punishments_given": given.ravel(),
                    "punishments_received": received.ravel(),
                    "utility": h["utility"].ravel(),
                    "score": h["score"].ravel(),
                }
            )
        )
        if "imitation_role" in h:
            role = h["imitation_role"]
            rr = np.where(role >= 0, role, 0)
            imit.append(
                pd.DataFrame(
                    {
                        **base,
                        "role_model": role.ravel(),
                        "role_strategy": names[np.take_along_axis(h["strategy_played"], rr, axis=1)].ravel(),
                        "probability": h["imitation_prob"].ravel(),
                        "adopted": h["imitation_adopt"].ravel(),
                        "new_strategy": names[h["strategy"]].ravel(),
                        "changed": h["imitation_changed"].ravel(),
                    }
                )
            )
        for stage, key in ((1, "punish1"), (2, "punish2")):
            s_, i_, j_ = np.nonzero(h[key])
            played = h["strategy_played"]
            pun.append(
                pd.DataFrame(
                    {
                        "condition": cond[s_],
                        "replicate": rep[s_],
                        "society": s_,
                        "iteration": t,
                        "stage": stage,
                        "punisher": i_,
                        "target": j_,
                        "punisher_id": ids(s_, i_),
                        "target_id": ids(s_, j_),
                        "punisher_strategy": names[played[s_, i_]],
                        "target_strategy": names[played[s_, j_]],
                    }
                )
            )

    def cat(xs: list[pd.DataFrame]) -> pd.DataFrame:
        return pd.concat(xs, ignore_index=True) if xs else pd.DataFrame()

    return {"orders": cat(orders), "utilities": cat(utils), "imitation": cat(imit), "punishments": cat(pun)}


def share_summary(counts: pd.DataFrame) -> dict[str, Any]:
    """Strategy shares per iteration and at the end, mean over replicates (and their s.d.)."""
    n = counts[list(dm.STRATEGIES)].sum(axis=1)
    shares = (
        counts[list(dm.STRATEGIES)].div(n, axis=0).assign(condition=counts["condition"], iteration=counts["iteration"])
    )
    last = as_frame(shares[shares["iteration"] == shares["iteration"].max()])
    mean = as_frame(shares.groupby("iteration")[list(dm.STRATEGIES)].mean())
    return {
        "final_shares": {k: float(v) for k, v in last[list(dm.STRATEGIES)].mean().items()},
        "final_shares_sd": {
            k: float(v) for k, v in as_series(last[list(dm.STRATEGIES)].std(ddof=1)).fillna(0.0).items()
        },
        "shares_by_iteration": {
            int(cast(Any, t)): {k: round(float(v), 6) for k, v in row.items()} for t, row in mean.iterrows()
        },
    }
