"""Recovery after an event at round K (an invader, a newcomer): how far a series fell and how
many rounds it took to come back near its level before the event.

``series`` holds one value per round, rounds 1, 2, ... (a society's fish stock, the residents'
mean contribution). With ``window`` w and ``band`` b:

- the **pre-event level** is the mean of rounds K-w .. K-1 (those that exist);
- the **drop** is the level minus the lowest value from round K on (``drop``), also as a share
  of the level (``drop_share``; None when the level is 0). A series that rises after the event
  has a negative drop; ``direction="down"`` reads a series where lower is better (a distance)
  the other way round;
- the **band** reaches b·|level| (b when the level is 0) below the level (``direction="up"``;
  above it for ``"down"``): a round is outside it only on the bad side, so a series that gets
  better after the event never leaves it;
- **rounds to recover**: 0 when no round from K on leaves the band; otherwise the number of
  rounds from K to the first round, after the first one outside the band, that is back inside it
  (``recovered`` false and ``rounds_to_recover`` None when none is: "did not recover").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def recovery(
    series: Sequence[float] | np.ndarray, K: int, *, window: int = 3, band: float = 0.1, direction: str = "up"
) -> dict[str, Any]:
    """The recovery figures of one series around an event at round ``K`` (see the module)."""
    y = np.asarray(series, dtype=float)
    if not 2 <= K <= len(y):
        raise ValueError(f"the event round K must be in 2..{len(y)} (the series' rounds), got {K}")
    if window < 1 or not (band >= 0 and math.isfinite(band)):
        raise ValueError("window must be at least 1 and band a finite number >= 0")
    if direction not in ("up", "down"):
        raise ValueError(f"direction must be up (higher is better) or down, got {direction!r}")
    pre = y[max(0, K - 1 - window) : K - 1]
    pre = pre[np.isfinite(pre)]
    after = y[K - 1 :]
    out: dict[str, Any] = {"K": int(K), "window": int(window), "band": float(band), "direction": direction}
    if not len(pre) or not np.isfinite(after).any():
        return {
            **out,
            "pre_level": None,
            "drop": None,
            "drop_share": None,
            "left_band": None,
            "recovered": None,
            "rounds_to_recover": None,
            "note": "no finite values before or after the event",
        }
    level = float(pre.mean())
    worst = float(np.nanmin(after)) if direction == "up" else float(np.nanmax(after))
    drop = level - worst if direction == "up" else worst - level
    tol = band * abs(level) if level != 0 else band
    inside = (after >= level - tol - 1e-12) if direction == "up" else (after <= level + tol + 1e-12)
    inside = np.where(np.isfinite(after), inside, False)
    out.update(pre_level=level, worst_after=worst, drop=drop, drop_share=(drop / abs(level)) if level != 0 else None)
    if inside.all():
        return {**out, "left_band": None, "recovered": True, "rounds_to_recover": 0}
    first_out = int(np.flatnonzero(~inside)[0])
    back = np.flatnonzero(inside[first_out:])
    if not len(back):
        return {**out, "left_band": K + first_out, "recovered": False, "rounds_to_recover": None}
    return {**out, "left_band": K + first_out, "recovered": True, "rounds_to_recover": int(first_out + back[0])}


def recovery_text(r: dict[str, Any], what: str) -> str:
    """One line: ``stock: level 812.3 before round 5, drop 120.4 (14.8%), recovered in 6 rounds``."""
    if r.get("pre_level") is None:
        return f"{what}: no level to compare ({r.get('note')})"
    share = f" ({r['drop_share']:.1%})" if r.get("drop_share") is not None else ""
    if r["recovered"] is False:
        how = "did not recover"
    elif r["rounds_to_recover"] == 0:
        how = f"never fell more than {r['band']:.0%} past it"
    else:
        how = f"back within {r['band']:.0%} of it {r['rounds_to_recover']} rounds after the event"
    return f"{what}: level {r['pre_level']:.3g} before round {r['K']}, drop {r['drop']:.3g}{share}; {how}"
