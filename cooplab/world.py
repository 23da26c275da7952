"""What a world author builds a task from: the one import a task outside cooplab needs.

``docs/write-your-own-task.md`` teaches these names and the example plug-in
(``examples/ultimatum``) imports only them::

    from cooplab.world import AppendLog, RunInfo, Task, phase_rng, write_table   # the task, its state
    from cooplab.world import DecisionSpec, PolicyResult, decide_all, llm_node    # LLM players

=====================  ============================================================================
the task               :class:`Task` (subclass it), :class:`TaskConfig` (the typed configuration
                       every hook is given: ``config.params`` is the task's ``Params``),
                       :class:`RunInfo` (what ``outputs`` is told),
                       :class:`TaskConfigError` (a bad value of a resumed run's config, one line),
                       :func:`register_task` (from Python; a package uses the ``cooplab.tasks``
                       entry point instead)
state and randomness   :data:`AppendLog` (a list that only grows, stored as deltas),
                       :func:`phase_rng` (the draws of one round and phase, from the run's seed)
the graph              :func:`build_society` (the round loop the default ``Task.build`` makes),
                       :class:`CoopContext` (the runtime context: ``context.llm``,
                       ``context.ledger``, ``context.sandbox``)
rule players           :func:`sample_peer`, :func:`imitation_probability` (the Fermi rule)
LLM players            :class:`DecisionSpec`, :func:`decide`, :func:`decide_all`,
                       :func:`llm_node`, :class:`PolicyResult`, :func:`ledger_node`,
                       :func:`charged`
tables                 :func:`write_table` (Parquet, or CSV), :func:`with_agent_ids` and
                       :func:`agent_id` (the ``"SOCIETY:AGENT"`` key every table shares)
tests                  :class:`ScriptedChatModel` (fixed answers, what ``--model scripted:FILE``
                       builds)
the run's page         :mod:`explore` (the module of the blocks ``Task.explore`` returns:
                       ``explore.Section``, ``explore.Table``, ...; ``docs/explorer.md``)
the run's summary      :mod:`runfiles` (``runfiles.Results``, the base of a task's typed
                       results, with its field types ``runfiles.Count``, ``runfiles.Share``, ...;
                       ``runfiles.RunSummary``, what ``report`` and ``figure`` are given)
earlier sweep files    :mod:`formats` (``formats.Converter``, what ``Task.earlier_sweep`` returns;
                       ``formats.read_earlier`` and ``formats.grid_sweep``, the common part)
=====================  ============================================================================

Each name is loaded from the module that defines it on first use, so ``import cooplab.world``
loads nothing else of cooplab, and a task module that takes only its rule-player names never loads
the LLM stack. The modules behind these names are cooplab's inside: they may move; these names stay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

#: the module that defines each name (the layering test checks that the world face sits above them)
_FROM: dict[str, tuple[str, ...]] = {
    "cooplab.graphs.task": ("Task", "TaskConfig", "RunInfo", "TaskConfigError"),
    "cooplab.graphs.state": ("AppendLog",),
    "cooplab.graphs.rng": ("phase_rng",),
    "cooplab.graphs.society": ("build_society",),
    "cooplab.graphs.context": ("CoopContext",),
    "cooplab.graphs.nodes": ("PolicyResult", "charged", "ledger_node", "llm_node"),
    "cooplab.graphs.rundir": ("write_table",),
    "cooplab.graphs.tables": ("agent_id", "with_agent_ids"),
    "cooplab.agents.rule_based": ("imitation_probability", "sample_peer"),
    "cooplab.agents.decisions": ("DecisionSpec", "decide"),
    "cooplab.agents.batch": ("decide_all",),
    "cooplab.agents.models.scripted": ("ScriptedChatModel",),
    "cooplab.runs.registry": ("register_task",),
}
#: modules the face hands out whole (their names are the blocks of a task's page)
_MODULES: dict[str, str] = {
    "explore": "cooplab.graphs.explore",
    "runfiles": "cooplab.graphs.runfiles",
    "formats": "cooplab.graphs.formats",
}
_WHERE = {name: module for module, names in _FROM.items() for name in names}

if TYPE_CHECKING:  # the same names as _FROM and _MODULES, for type checkers; at run time they load on first use
    # (`X as X`: a re-export)
    from cooplab.agents.batch import decide_all as decide_all
    from cooplab.agents.decisions import DecisionSpec as DecisionSpec
    from cooplab.agents.decisions import decide as decide
    from cooplab.agents.models.scripted import ScriptedChatModel as ScriptedChatModel
    from cooplab.agents.rule_based import imitation_probability as imitation_probability
    from cooplab.agents.rule_based import sample_peer as sample_peer
    from cooplab.graphs import explore as explore
    from cooplab.graphs import formats as formats
    from cooplab.graphs import runfiles as runfiles
    from cooplab.graphs.context import CoopContext as CoopContext
    from cooplab.graphs.nodes import PolicyResult as PolicyResult
    from cooplab.graphs.nodes import charged as charged
    from cooplab.graphs.nodes import ledger_node as ledger_node
    from cooplab.graphs.nodes import llm_node as llm_node
    from cooplab.graphs.rng import phase_rng as phase_rng
    from cooplab.graphs.rundir import write_table as write_table
    from cooplab.graphs.society import build_society as build_society
    from cooplab.graphs.state import AppendLog as AppendLog
    from cooplab.graphs.tables import agent_id as agent_id
    from cooplab.graphs.tables import with_agent_ids as with_agent_ids
    from cooplab.graphs.task import RunInfo as RunInfo
    from cooplab.graphs.task import Task as Task
    from cooplab.graphs.task import TaskConfig as TaskConfig
    from cooplab.graphs.task import TaskConfigError as TaskConfigError
    from cooplab.runs.registry import register_task as register_task

__all__ = sorted([*_WHERE, *_MODULES])


def __getattr__(name: str) -> object:
    import importlib

    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
