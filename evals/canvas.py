"""Figures on their own canvas: every figure cooplab draws is a :class:`matplotlib.figure.Figure`
with an Agg canvas of its own, never pyplot's.

pyplot keeps global state (the backend, the list of open figures), and a library that calls
``matplotlib.use("Agg")`` or ``plt.subplots`` changes the state a user owns: in a notebook the
inline backend is switched off and the user's own plots silently stop showing. A figure made here
belongs to nobody but its caller: nothing is registered with pyplot, nothing needs closing (it is
freed when dropped), the global backend is never read nor set, and it still shows in a notebook
when it is the value of a cell (IPython draws any ``Figure``) or is saved with ``fig.savefig``.
"""

from __future__ import annotations

from typing import Any, Literal

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

#: what ``sharex``/``sharey`` of :func:`subplots` may be besides a bool (matplotlib's values)
Share = Literal["none", "all", "row", "col"]

__all__ = ["Figure", "figure", "subplots"]


def figure(*, constrained_layout: bool = False, **kw: Any) -> Figure:
    """A new figure on its own Agg canvas (the keywords of :class:`~matplotlib.figure.Figure`;
    ``constrained_layout=True`` as in pyplot)."""
    if constrained_layout:
        kw.setdefault("layout", "constrained")
    fig = Figure(**kw)
    FigureCanvasAgg(fig)
    return fig


def subplots(
    nrows: int = 1,
    ncols: int = 1,
    *,
    sharex: bool | Share = False,
    sharey: bool | Share = False,
    squeeze: bool = True,
    width_ratios: Any = None,
    height_ratios: Any = None,
    subplot_kw: dict[str, Any] | None = None,
    gridspec_kw: dict[str, Any] | None = None,
    **fig_kw: Any,
) -> tuple[Figure, Any]:
    """``(figure, axes)`` as ``plt.subplots`` returns them, on a figure of :func:`figure`."""
    fig = figure(**fig_kw)
    axes = fig.subplots(
        nrows,
        ncols,
        sharex=sharex,
        sharey=sharey,
        squeeze=squeeze,
        width_ratios=width_ratios,
        height_ratios=height_ratios,
        subplot_kw=subplot_kw,
        gridspec_kw=gridspec_kw,
    )
    return fig, axes
