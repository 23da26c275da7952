"""Rule-based CPR batches whose outcomes are pinned by ``data/exactness_reference.npz``.

The reference was written by ``python -m tests.cpr.exactness_batches`` with the code as it
was BEFORE finished societies were dropped from the node computations (issue 14, part 3), and
before individual learning existed: it is the model of the ``v1`` preset (individual learning
off). ``test_cpr_exactness.py`` asserts that the current code reproduces it bit for bit with
that preset, and with individual learning's node in the graph but its rate 0 (variant
``il_rate0``). Variant ``on`` (today's defaults, individual learning on) has no stored
reference; its test compares the running-societies-only computation with the whole batch. The
batches mix beta, r, punish_off_round, populations and all four ablations, and use low
initial wealth and harsh environments so that many societies collapse early while others run
to the cap (and one batch keeps societies running after some of their agents starve).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cooplab.tasks.cpr.metrics import full_history
from cooplab.tasks.cpr.params import ABLATIONS, make_params, preset_values
from cooplab.tasks.cpr.society import (
    Condition,
    apply_ablation,
    cpr_phases,
    phases_for,
    run_cpr,
)
from tests.cpr._support import plain

DATA = Path(__file__).resolve().parent / "data" / "exactness_reference.npz"
FINAL_KEYS = ("T_s", "collapse", "eta_sum", "alive", "e", "m", "p", "g", "P", "P_bar", "R", "R_plus", "G", "round")


#: variant -> (parameter values under every batch's own, whether the adapt node is in the graph)
VARIANTS: dict[str, tuple[dict, bool]] = {
    "v1": (preset_values("v1"), False),  # the model the reference was written with
    "il_rate0": (
        {**preset_values("v1"), "individual_learning": True, "il_rate": 0.0},
        True,
    ),  # v1, node present, skipped
    "on": ({}, True),  # today's defaults: individual learning on
}


def _conds(ablation: str, base: dict) -> list[Condition]:
    out = []
    for beta in (0.0, 3.0, 10.0):
        for r in (0.15, 0.6):
            for off in (None, 6):
                v = apply_ablation({**base, "beta": beta, "r": r, "punish_off_round": off, "P0": 3.0}, ablation)
                out.append(Condition(make_params(**v), "mixed" if beta != 3.0 else "selfish"))
    return out


def batches(variant: str = "v1") -> dict[str, dict]:
    """name -> keyword arguments of run_cpr."""
    base, adapt = VARIANTS[variant]
    out = {}
    for i, abl in enumerate(("full", "osl", "ogd", "neither")):
        conds = _conds(abl, base)
        phases = cpr_phases(**ABLATIONS[abl], individual_learning=adapt)
        assert list(phases) == list(phases_for(conds[0].params)) or variant == "il_rate0"
        out[abl] = {"conditions": conds, "replicates": 6, "seed": 11 + i, "phases": phases}
    # societies keep running after agents starve: dead agents inside running societies
    conds = [
        Condition(make_params(**{**base, "r": r, "P0": P0, "c": c, "T": 30}), "general")
        for r in (0.3, 0.8)
        for P0, c in ((5.0, 8.0), (10.0, 10.0))
    ]
    out["keep_running"] = {
        "conditions": conds,
        "replicates": 8,
        "seed": 5,
        "phases": cpr_phases(end_on_starvation=False, individual_learning=adapt),
    }
    return out


def outcomes(variant: str = "v1") -> dict[str, np.ndarray]:
    """Flat name -> array of every batch's final state and per-round history table."""
    res = {}
    for name, kw in batches(variant).items():
        final = plain(run_cpr(**kw))
        for k in FINAL_KEYS:
            res[f"{name}/final/{k}"] = np.asarray(final[k])
        hist = full_history(final)  # every record over the whole batch, as the reference holds them
        for k in hist[0]:
            res[f"{name}/history/{k}"] = np.stack([np.asarray(rec[k]) for rec in hist])
    return res


if __name__ == "__main__":
    DATA.parent.mkdir(parents=True, exist_ok=True)
    res = outcomes()
    np.savez_compressed(DATA, allow_pickle=True, **res)  # numpy's default, named: the arrays are the other keywords
    print(f"wrote {len(res)} arrays to {DATA}")
    for name in batches():
        T = res[f"{name}/final/T_s"]
        print(
            name,
            "societies",
            T.size,
            "mean T_s",
            T.mean(),
            "T_s<=10:",
            int((T <= 10).sum()),
            "at cap:",
            int((T == T.max()).sum()),
        )
