"""A mixed society and an invader (docs/mixed-societies.md): two scripted models share one CPR
fishery, then a greedy newcomer and a free rider each take a seat of a rule-based society at round 8. Prints the
per-model outcomes, the cross-play table and the recovery figures; draws the docs' figures.

    python examples/python/mixed_society.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import cooplab
from cooplab.evals.plots_mix import by_model_figure, recovery_figure

HERE = Path(__file__).resolve().parents[1] / "scripted"
CAUTIOUS, GREEDY = f"scripted:{HERE / 'cautious.json'}", f"scripted:{HERE / 'greedy.json'}"


def main(out: Path) -> None:
    mixed = cooplab.run(
        task="cpr",
        agents="llm",
        model_mix={CAUTIOUS: 3, GREEDY: 3},
        n_agents=6,
        rounds=6,
        seed=1,
        cache="off",
        out=out / "mixed",
        force=True,
        quiet=True,
    )
    print("assignment:", {a: Path(m).stem for a, m in mixed.config["llm"]["agent_models"].items()})
    print(
        mixed.table("by_model")
        .assign(model=lambda d: d["model"].map(lambda m: Path(m).stem))
        .round(3)
        .to_string(index=False)
    )
    print(
        mixed.table("crossplay")
        .assign(
            model=lambda d: d["model"].map(lambda m: Path(m).stem),
            **{"with": lambda d: d["with"].map(lambda m: Path(m).stem)},
        )
        .round(3)
        .to_string(index=False)
    )
    by_model_figure(
        mixed.summary["by_model"],
        [
            ("catch_per_agent", "catch per agent"),
            ("fines_received_per_agent", "fines received per agent"),
            ("wealth_per_agent", "final wealth per agent"),
        ],
        "Two scripted models in one fishery (6 agents, 6 rounds)",
        out / "mixed-by-model.png",
    )

    kw = dict(task="cpr", env="rich", n_agents=10, rounds=30, replicates=1, seed=1, force=True, quiet=True)
    base = cooplab.run(**kw, out=out / "base")
    series, first = {}, None
    for kind in ("greedy", "free-rider"):
        invaded = cooplab.run(**kw, invader=f"{kind}@8", out=out / kind)
        inv = invaded.summary["invasion"]
        rec = inv["societies"][0]
        print(
            kind,
            {k: rec[k] for k in ("pre_level", "drop", "drop_share", "left_band", "recovered", "rounds_to_recover")},
            "T_s",
            invaded.summary["survival_time"]["mean"],
            "invader wealth",
            round(inv["invader_wealth"], 1),
            "residents",
            round(inv["resident_wealth"], 1),
        )
        series[f"a {kind} at round 8"] = invaded.rounds.sort_values("round")["R"].to_numpy()
        if kind == "greedy":  # the figure's level and band are the greedy run's
            first = rec
    print("unperturbed T_s", base.summary["survival_time"]["mean"])
    assert first is not None, "the greedy run's recovery figures are the figure's level and band"
    series["unperturbed"] = base.rounds.sort_values("round")["R"].to_numpy()
    recovery_figure(
        series,
        8,
        first,
        "fish stock R",
        "Newcomers in a rule-based fishery (rich lake, 10 agents, seed 1)",
        out / "invader-recovery.png",
    )


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/mixed-example"))
