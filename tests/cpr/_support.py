"""Shared helpers of the CPR tests."""

from __future__ import annotations

from typing import Any, cast

from matplotlib.axes import Axes

from cooplab.tasks.cpr.state import CPRState


def plain(state: CPRState) -> dict[str, Any]:
    """A CPR state as the plain dict it is at run time (a TypedDict is a dict), read by key: a run's
    final state holds every key, which CPRState (total=False, filled as the graph runs) cannot say."""
    return cast(dict[str, Any], state)


def legend_texts(ax: Axes) -> list[str]:
    """The texts of ``ax``'s legend, which it must have."""
    legend = ax.get_legend()
    assert legend is not None, f"the panel {ax.get_title()!r} has no legend"
    return [t.get_text() for t in legend.get_texts()]
