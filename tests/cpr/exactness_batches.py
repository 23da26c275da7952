"""Rule-based CPR batches whose outcomes are pinned by ``data/exactness_reference.npz``.

The reference was written by ``python -m tests.cpr.exactness_batches`` with the code as it
was BEFORE finished societies were dropped from the node computations (issue 14, part 3);
``test_cpr_exactness.py`` asserts that the current code reproduces it bit for bit. The
batches mix beta, r, punish_off_round, populations and all four ablations, and use low
initial wealth and harsh environments so that many societies collapse early while others run
to the cap (and one batch keeps societies running after some of their agents starve).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cooplab.tasks.cpr.params import make_params
from cooplab.tasks.cpr.society import Condition, apply_ablation, cpr_phases, phases_for, run_cpr

DATA = Path(__file__).resolve().parent / "data" / "exactness_reference.npz"
FINAL_KEYS = ("T_s", "collapse", "eta_sum", "alive", "e", "m", "p", "g", "P", "P_bar", "R", "R_plus", "G", "round")


def _conds(ablation: str) -> list[Condition]:
    out = []
    for beta in (0.0, 3.0, 10.0):
        for r in (0.15, 0.6):
            for off in (None, 6):
                v = apply_ablation({"beta": beta, "r": r, "punish_off_round": off, "P0": 3.0}, ablation)
                out.append(Condition(make_params(**v), "mixed" if beta != 3.0 else "selfish"))
    return out


def batches() -> dict[str, dict]:
    """name -> keyword arguments of run_cpr."""
    out = {}
    for i, abl in enumerate(("full", "osl", "ogd", "neither")):
        conds = _conds(abl)
        out[abl] = {"conditions": conds, "replicates": 6, "seed": 11 + i, "phases": phases_for(conds[0].params)}
    # societies keep running after agents starve: dead agents inside running societies
    conds = [Condition(make_params(r=r, P0=P0, c=c, T=30), "general") for r in (0.3, 0.8) for P0, c in ((5.0, 8.0), (10.0, 10.0))]
    out["keep_running"] = {"conditions": conds, "replicates": 8, "seed": 5, "phases": cpr_phases(end_on_starvation=False)}
    return out


def outcomes() -> dict[str, np.ndarray]:
    """Flat name -> array of every batch's final state and per-round history table."""
    res = {}
    for name, kw in batches().items():
        final = run_cpr(**kw)
        for k in FINAL_KEYS:
            res[f"{name}/final/{k}"] = np.asarray(final[k])
        hist = final["history"]
        for k in hist[0]:
            res[f"{name}/history/{k}"] = np.stack([np.asarray(rec[k]) for rec in hist])
    return res


if __name__ == "__main__":
    DATA.parent.mkdir(parents=True, exist_ok=True)
    res = outcomes()
    np.savez_compressed(DATA, **res)
    print(f"wrote {len(res)} arrays to {DATA}")
    for name in batches():
        T = res[f"{name}/final/T_s"]
        print(name, "societies", T.size, "mean T_s", T.mean(), "T_s<=10:", int((T <= 10).sum()), "at cap:", int((T == T.max()).sum()))
