"""cooplab: societies of LLM agents and teams of LLM scientists as LangGraph state graphs.

The Python API (the command line is a thin layer over it)::

    import cooplab
    run = cooplab.run(task="cpr", agents="llm", model="scripted:FILE", n_agents=3, rounds=3, out="runs/x")
    run.rounds, run.decisions, run.ledger          # pandas DataFrames
    cooplab.resume("runs/x")
    cooplab.sweep("diners", out="runs/pk", grid={"pk": ["3:1", "6:1"]}, seeds=[0, 1])
    cooplab.plan("sweep.json")                     # calls, tokens and cost before it runs (docs/plan.md)
    cooplab.register_task(MyTask)                  # a task defined in a notebook
    cooplab.Run.open("runs/x")                     # a run directory read back
    cooplab.load_runs("runs")                      # one row per run directory below runs/
    cooplab.robustness("runs/variants")            # a sweep over prompt_variant: spreads, parse failures, fragile
    effects
    cooplab.fork("runs/x", at_round=2, out="runs/x-r06", set={"r": 0.6})   # a counterfactual fork
    cooplab.compare("runs/x", "runs/x-r06")        # two runs from their shared round on
    cooplab.migrate("runs")                        # files of earlier on-disk formats converted in place

The names below are loaded on first use, so ``import cooplab.graphs`` (or any lower layer) does
not load the engine.
"""

from cooplab._version import __version__

__all__ = [
    "__version__",
    "run",
    "resume",
    "arun",
    "aresume",
    "sweep",
    "asweep",
    "plan",
    "register_task",
    "Run",
    "load_runs",
    "robustness",
    "fork",
    "compare",
    "migrate",
    "RunConfig",
    "LLMSettings",
    "SandboxSettings",
    "ConfigError",
]

_LAZY = {
    "run": "cooplab.runs.api",
    "resume": "cooplab.runs.api",
    "arun": "cooplab.runs.api",
    "aresume": "cooplab.runs.api",
    "sweep": "cooplab.runs.api",
    "asweep": "cooplab.runs.api",
    "plan": "cooplab.runs.plan",
    "register_task": "cooplab.runs.api",
    "Run": "cooplab.runs.api",
    "load_runs": "cooplab.runs.api",
    "robustness": "cooplab.evals.robustness",
    "fork": "cooplab.runs.api",
    "compare": "cooplab.runs.api",
    "migrate": "cooplab.runs.migrate",
    "RunConfig": "cooplab.runs.config",
    "LLMSettings": "cooplab.runs.config",
    "SandboxSettings": "cooplab.runs.config",
    "ConfigError": "cooplab.limits",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cooplab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
