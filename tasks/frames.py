"""Typed views of pandas results the tasks' tables and figures share.

pandas' inline annotations give many operations a wide union (``frame["x"]`` is ``Series | DataFrame``,
``groupby(...).mean()`` is any scalar, a Series or a DataFrame), where the call the tasks make has only
one runtime shape. These helpers name that shape for the type checker; they return their argument
unchanged (``typing.cast``), so behaviour is exactly that of the pandas call.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any, cast

import pandas as pd
from numpy.typing import NDArray


def as_series(value: Any) -> pd.Series:
    """``value`` (a pandas result that is a Series at runtime: one column, a grouped reduction of one column)."""
    return cast(pd.Series, value)


def as_frame(value: Any) -> pd.DataFrame:
    """``value`` (a pandas result that is a DataFrame at runtime: a boolean row selection, a list of columns)."""
    return cast(pd.DataFrame, value)


def column(table: pd.DataFrame, name: str) -> pd.Series:
    """``table[name]``: one column of a table whose column labels are unique."""
    return cast(pd.Series, table[name])


def as_array(value: Any) -> NDArray[Any]:
    """``value`` (a Series' ``.unique()`` or ``.values`` of a numpy-backed column) as the ndarray it is."""
    return cast(NDArray[Any], value)


def cell(row: pd.Series, key: Hashable) -> Any:
    """``row[key]``: one value of a row (``iterrows``), a scalar of whatever type its column holds."""
    return row[key]


def groups(table: pd.DataFrame, by: str | list[str], **kw: Any) -> Iterator[tuple[Any, pd.DataFrame]]:
    """``iter(table.groupby(by, **kw))``: (key, rows) pairs; the key is the column's value (a tuple of
    values when ``by`` is a list), typed Any where pandas says only Hashable."""
    return iter(table.groupby(by, **kw))


def tuples(table: pd.DataFrame, **kw: Any) -> Iterator[Any]:
    """``table.itertuples(**kw)``: named tuples, one attribute per column (pandas types them as plain tuples)."""
    return iter(table.itertuples(**kw))


__all__ = ["as_array", "as_frame", "as_series", "cell", "column", "groups", "tuples"]
