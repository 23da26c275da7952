"""State helpers shared by every graph.

:data:`AppendLog` is the channel type of an append-only log in a graph's state (one record per
round, decision, ledger charge, message, artifact). A plain ``Annotated[list, operator.add]``
channel is copied whole into every checkpoint, so a run's checkpoints grow with the square of
its length; an ``AppendLog`` is a LangGraph :class:`~langgraph.channels.delta.DeltaChannel`: a
checkpoint stores only the records written in its step, and the whole list is rebuilt by
replaying the ancestors' writes when a checkpoint is loaded (``get_state``, resume). Nodes use
it exactly like an ``operator.add`` list: they return ``{"history": [record]}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from langgraph.channels.delta import DeltaChannel

#: no periodic full snapshot: LangGraph still writes one every 5,000 supersteps
#: (``LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT``), which bounds the replay on load
SNAPSHOT_EVERY = 10**9


def extend(current: list[Any], batches: Sequence[list[Any]]) -> list[Any]:
    """The reducer of an :data:`AppendLog`: ``current`` followed by every batch, in order
    (associative, as DeltaChannel requires: folding batches one by one or together is the same)."""
    out = list(current)
    for batch in batches:
        if batch:
            out.extend(batch)
    return out


#: an append-only list channel whose checkpoints hold deltas (see the module docstring)
AppendLog = Annotated[list[dict[str, Any]], DeltaChannel(extend, snapshot_frequency=SNAPSHOT_EVERY)]
