"""cooplab.evals.typed: the typed views return what the expressions they stand for return."""

import numpy as np
import pandas as pd

from cooplab.evals.typed import as_frame, as_series, cell, column, first_where, numeric, scalar, sub


def test_sub_is_the_nested_mapping_or_an_empty_one():
    inner = {"a": 1}
    rec = {"m": inner, "l": [1], "s": "x", "n": None}
    assert sub(rec, "m") is inner
    assert sub(rec, "l") == {} and sub(rec, "s") == {} and sub(rec, "n") == {} and sub(rec, "gone") == {}
    assert sub(None, "m") == {}


def test_pandas_views_return_their_argument_unchanged():
    df = pd.DataFrame({"x": ["1", "2.5", "no", None], "y": [1.0, 2.0, 3.0, 4.0]})
    assert column(df, "y").equals(df["y"])
    got = numeric(column(df, "x"))
    assert got.equals(pd.to_numeric(df["x"], errors="coerce")) and got.isna().tolist() == [False, False, True, True]
    assert as_frame(df[["y"]]).equals(df[["y"]]) and as_series(df["y"]) is not None
    row = next(iter(df.iterrows()))[1]
    assert cell(row, "x") == "1"
    assert scalar(df["y"].std(ddof=1)) == df["y"].std(ddof=1)
    mask = df["y"] > 2
    assert first_where(column(df, "x"), mask) == "no" and np.isnan(scalar(df["y"].iloc[:0].mean()))
