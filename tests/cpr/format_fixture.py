"""Seeded rule-based CPR runs whose results are pinned by ``data/format_fixture.npz`` and
``data/format_fixture.json``, written with the code as it was BEFORE the state's format changed
(issue 41, point 4: the nodes keep only the running societies in the state's arrays).

    .venv/bin/python -m tests.cpr.format_fixture      # rewrites the fixture (only on purpose)

Three kinds of runs, all with today's defaults (individual learning on):

- ``sweep``: the Fig. 3 grid (11 beta x 10 r, mixed population) at 1 replicate a cell, one
  ``run_cpr`` batch, as ``tasks/cpr/validation.py`` runs it (InMemorySaver, durability exit): every
  array of the final state, the per-round table (``history_frame``) and the agents table;
- ``ablations``: the batches of ``exactness_batches.py`` with individual learning on (full, osl,
  ogd, neither, and one whose societies keep running after agents starve): every array of the
  final state and every field of every round's record, stacked;
- ``runner``: two runs through ``cooplab.run`` (checkpoints in SQLite, the task's outputs): the
  summary (without its wall time) and the rounds and agents tables.

``test_cpr_format_fixture.py`` compares today's code with them bit for bit.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

DATA = Path(__file__).resolve().parent / "data"
NPZ = DATA / "format_fixture.npz"
JSON = DATA / "format_fixture.json"

#: the runner's runs: name -> keywords of ``cooplab.run``
RUNNER = {
    "harsh_full": {"env": "harsh", "replicates": 30, "rounds": 30, "seed": 4},
    "rich_osl": {"env": "rich", "ablation": "osl", "population": "selfish", "replicates": 12, "rounds": 20, "seed": 2},
}
#: summary fields that depend on the machine, not on the model
VOLATILE = ("wall_seconds",)


def final_arrays(final: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every array of a final state (``params`` entries as ``params.NAME``), by key."""
    out = {}
    for k, v in final.items():
        if k == "params":
            for p, a in v.items():
                out[f"params.{p}"] = np.asarray(a)
        elif isinstance(v, np.ndarray) or isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            out[k] = np.asarray(v)
    return out


def frame_arrays(df: pd.DataFrame) -> dict[str, np.ndarray]:
    return {c: df[c].to_numpy() for c in df.columns}


def sweep_batch() -> dict[str, Any]:
    from cooplab.tasks.cpr.params import make_params
    from cooplab.tasks.cpr.society import Condition
    from cooplab.tasks.cpr.validation import FIG3_BETAS, FIG3_POP, FIG3_RS

    conds = [Condition(make_params(r=r, beta=beta), FIG3_POP) for r in FIG3_RS for beta in FIG3_BETAS]
    return {"conditions": conds, "replicates": 1, "seed": 1}


def stacked_history(final: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every field of the per-round records as a (rounds, S) array (the whole batch every round)."""
    from cooplab.tasks.cpr import metrics as cm

    # the code the fixture was written with kept whole-batch records in the state
    hist = cm.full_history(final) if hasattr(cm, "full_history") else final["history"]
    return {k: np.stack([np.asarray(rec[k]) for rec in hist]) for k in hist[0]}


def batch_outcomes() -> dict[str, np.ndarray]:
    """name/kind/key -> array for the sweep and the ablation batches."""
    from langgraph.checkpoint.memory import InMemorySaver

    from cooplab.tasks.cpr import metrics as cm
    from cooplab.tasks.cpr.society import run_cpr
    from tests.cpr._support import plain
    from tests.cpr.exactness_batches import batches

    res: dict[str, np.ndarray] = {}
    final = plain(run_cpr(**sweep_batch(), checkpointer=InMemorySaver(), durability="exit"))
    for k, v in final_arrays(final).items():
        res[f"sweep/final/{k}"] = v
    for k, v in frame_arrays(cm.history_frame(final)).items():
        res[f"sweep/rounds/{k}"] = v
    for k, v in frame_arrays(cm.agents_frame(final)).items():
        res[f"sweep/agents/{k}"] = v
    for name, kw in batches("on").items():
        final = plain(run_cpr(**kw))
        for k, v in final_arrays(final).items():
            res[f"{name}/final/{k}"] = v
        for k, v in stacked_history(final).items():
            res[f"{name}/history/{k}"] = v
    return res


def runner_outcomes() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(name -> summary without its wall time, name/table/column -> array) of the runner's runs."""
    import cooplab

    summaries, tables = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, kw in RUNNER.items():
            out = Path(tmp) / name
            cooplab.run(task="cpr", out=str(out), quiet=True, **kw)
            summary = json.loads((out / "summary.json").read_text())
            summaries[name] = {k: v for k, v in summary.items() if k not in VOLATILE}
            for stem in ("rounds", "agents"):
                for c, v in frame_arrays(pd.read_parquet(out / f"{stem}.parquet")).items():
                    tables[f"{name}/{stem}/{c}"] = v
    return summaries, tables


if __name__ == "__main__":
    DATA.mkdir(parents=True, exist_ok=True)
    arrays = batch_outcomes()
    summaries, tables = runner_outcomes()
    np.savez_compressed(
        NPZ, allow_pickle=True, **arrays, **tables
    )  # numpy's default, named: the arrays are the other keywords
    JSON.write_text(json.dumps(summaries, indent=1, sort_keys=True) + "\n")
    print(
        f"wrote {len(arrays) + len(tables)} arrays to {NPZ} ({NPZ.stat().st_size:,} bytes) and {len(summaries)} "
        f"summaries to {JSON}"
    )
