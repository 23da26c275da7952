"""The CPR run's tables from its final state: one row per (society, round) and one per agent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from cooplab.graphs.tables import ids
from cooplab.tasks.cpr import model
from cooplab.tasks.cpr.state import full_state

#: record fields that say which societies a record covers, not metrics
_WHO = ("round", "active", "rows")
#: record fields that count (0 where a society does not run; the other fields are means, NaN there)
_COUNTS = ("n_alive", "n_inspections", "n_violations", "n_punished")


def _covered(rec: dict[str, Any]) -> np.ndarray:
    """Batch indices of the societies a record covers: ``rows``, or the active societies of a
    whole-batch record (written before the running block existed)."""
    return np.asarray(rec["rows"]) if "rows" in rec else np.flatnonzero(rec["active"])


def _at(rec: dict[str, Any], key: str, idx: np.ndarray, S: int) -> np.ndarray:
    """A record's field at the societies ``idx`` it covers."""
    v = np.asarray(rec[key])
    return v if "rows" in rec else np.broadcast_to(v, (S,))[idx]


def history_frame(state: dict[str, Any]) -> pd.DataFrame:
    """The per-round table: one row per (society, round) the society was running."""
    hist = state.get("history") or []
    if not hist:
        return pd.DataFrame()
    state = full_state(state)
    S = len(state["T_s"])
    cols = [k for k in hist[0] if k not in _WHO]
    who = [_covered(h) for h in hist]
    si = np.concatenate(who)
    data = {
        "condition": np.asarray(state["condition"])[si],
        "replicate": np.asarray(state["replicate"])[si],
        "round": np.repeat(np.array([h["round"] for h in hist]), [len(w) for w in who]),
    }
    for c in cols:
        data[c] = np.concatenate([np.asarray(_at(h, c, w, S), dtype=float) for h, w in zip(hist, who, strict=False)])
    df = pd.DataFrame(data)
    return df.sort_values(["condition", "replicate", "round"], kind="stable").reset_index(drop=True)


def full_history(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Every round's record over the whole batch, as the environment node wrote it before the
    running block existed: ``active`` (running at the start of the round) and every field for all
    S societies; a society not running holds its final stock, post-harvest stock and norm, no
    catch (efficiency 0, or NaN where r K = 0), no living agent, no inspection, violation or fine,
    and NaN means."""
    state = full_state(state)
    S = len(state["T_s"])
    no_catch = model.efficiency_t(np.zeros(S), state["params"]["r"], state["params"]["K"])
    fill = {"R": state["R"], "R_plus": state["R_plus"], "G": state["G"], "H": np.zeros(S), "eta_t": no_catch}
    out = []
    for rec in state.get("history") or []:
        if "rows" not in rec:
            out.append(rec)
            continue
        rows = np.asarray(rec["rows"])
        whole: dict[str, Any] = {"round": rec["round"], "active": np.zeros(S, dtype=bool)}
        whole["active"][rows] = True
        for k, v in rec.items():
            if k in _WHO:
                continue
            v = np.asarray(v)
            if k in fill:
                arr = np.array(fill[k], dtype=v.dtype)
            else:  # counts 0 (integers widened to int64, as they were written), means NaN
                arr = np.full(
                    S,
                    0 if k in _COUNTS or v.dtype.kind != "f" else np.nan,
                    dtype=np.int64 if v.dtype.kind in "iu" else v.dtype,
                )
            arr[rows] = v
            whole[k] = arr
        out.append(whole)
    return out


def agents_frame(state: Mapping[str, Any]) -> pd.DataFrame:
    """Final per-agent traits and wealth: one row per agent of each society (``society``: the run's
    index of the society, the decisions' ``society``; ``agent_id``: ``"SOCIETY:AGENT"``)."""
    state = full_state(state)
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
