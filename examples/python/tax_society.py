"""A new LLM society composed in Python and run through cooplab's runner.

The fishery of Gupta et al. (2025) with one node inserted: after every harvest, a 5% tax on each
fisher's wealth. The society is a subclass of the built-in CPR task whose ``phases`` insert the
node; ``cooplab.register_task`` makes it runnable by name in this process, and ``cooplab.run``
gives it what every run has: checkpoints (so ``cooplab.resume`` continues it), the credit ledger,
traces, tables and a figure. The LLM agents here are a scripted model (no server, no weights),
so the script runs anywhere in seconds; swap ``model=`` for ``"local"`` or ``"openai:NAME"``.

    python examples/python/tax_society.py [OUT_DIR]

It runs the taxed and the untaxed society with the same seed and prints what they ended with.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

import cooplab
from cooplab.graphs.society import insert_phase
from cooplab.tasks.cpr.task import CPRTask

HERE = Path(__file__).resolve().parent
SCRIPTED = HERE.parent / "scripted" / "cautious.json"  # fixed answers per phase, picked by the prompt's hash


def wealth_tax(state):
    """5% of every living fisher's wealth, in every society still running."""
    running = state["alive"] & state["active"][:, None]
    return {"P": np.where(running, 0.95 * state["P"], state["P"])}


class TaxedFishery(CPRTask):
    name = "cpr-tax"
    title = "The CPR fishery with a 5% wealth tax after every harvest."

    def phases(self, config):
        return insert_phase(super().phases(config), "tax", wealth_tax, after="harvest")


def main(out: Path) -> dict:
    cooplab.register_task(TaxedFishery, replace=True)
    common = dict(agents="llm", model=f"scripted:{SCRIPTED}", n_agents=4, rounds=3, seed=1, quiet=True, force=True)
    taxed = cooplab.run(task="cpr-tax", out=out / "taxed", **common)
    plain = cooplab.run(task="cpr", out=out / "plain", **common)
    result = {}
    for label, run in (("taxed", taxed), ("plain", plain)):
        agents, rounds = run.table("agents"), run.rounds
        result[label] = {
            "status": run.status,
            "rounds": int(rounds["round"].max()),
            "final_wealth": round(float(agents["wealth"].sum()), 4),
            "model_calls": run.summary.ledger.calls,
            "decisions": len(run.decisions),
            "nodes": sorted({r["name"] for r in run.traces if r.get("run_type") == "chain" and r.get("parent_run_id")}),
        }
    return result


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="cooplab-tax-"))
    print(json.dumps(main(out), indent=2))
    print(f"run directories: {out / 'taxed'} and {out / 'plain'}", file=sys.stderr)
