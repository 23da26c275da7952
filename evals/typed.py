"""Small typed views for values whose static type is looser than what the code knows at run time.

Each returns its argument (or an empty mapping) and never changes a value: they exist so that
pyright sees the types the code relies on (a nested JSON object read from a record; a column of a
frame; the numbers pandas parses from a column, whose stubs type as a wide union).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import pandas as pd
    from numpy.typing import NDArray


def sub(record: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    """``record[key]`` when it is a mapping (a nested JSON object), else an empty one."""
    v = record.get(key) if record is not None else None
    return v if isinstance(v, Mapping) else {}


def numeric(values: pd.Series) -> pd.Series:
    """``pd.to_numeric(values, errors="coerce")`` of a Series: a Series of numbers, NaN where a
    value is not one."""
    import pandas as pd

    return cast("pd.Series", pd.to_numeric(values, errors="coerce"))


def column(df: pd.DataFrame, name: str) -> pd.Series:
    """The column ``name`` of ``df``, whose column names are unique (``df[name]`` is then a Series)."""
    return cast("pd.Series", df[name])


def as_frame(x: Any) -> pd.DataFrame:
    """``x``, a DataFrame that pandas' stubs type as a union (a selection of columns by list,
    ``reset_index`` of a frame, ``sort_values`` of a frame)."""
    return cast("pd.DataFrame", x)


def as_series(x: Any) -> pd.Series:
    """``x``, a Series that pandas' stubs type as a union (a grouped column's ``mean`` or ``size``,
    a frame's one column)."""
    return cast("pd.Series", x)


def cell(row: pd.Series, key: Any) -> Any:
    """``row[key]``: one value of a frame's row (from ``iterrows``), whatever its type."""
    return row[key]


def scalar(x: Any) -> float:
    """``float(x)`` of a reduction of a Series (``std``, ``mean``, ``sum``), which pandas' stubs type
    as a Series or a scalar."""
    return float(x)


def first_where(values: pd.Series, mask: Any) -> Any:
    """The first of ``values`` where the boolean Series ``mask`` is true (an offending raw value to name)."""
    return as_series(values[mask]).iloc[0]


def as_array(x: Any) -> NDArray[Any]:
    """``x`` as the numpy array it is at run time."""
    return cast("NDArray[Any]", x)


def groups(df: pd.DataFrame, by: str | list[str], **kw: Any) -> Iterator[tuple[Any, pd.DataFrame]]:
    """``df.groupby(by, **kw)`` as (key, group) pairs, the key Any (a tuple when ``by`` is a list)."""
    return iter(df.groupby(by, **kw))


def tuples(df: pd.DataFrame, **kw: Any) -> Iterator[Any]:
    """``df.itertuples(**kw)``, rows read by attribute."""
    return iter(df.itertuples(**kw))
