"""Today's rule-based CPR runs give, bit for bit, the results pinned before the state's format
changed (tests/cpr/format_fixture.py): the Fig. 3 sweep at one replicate a cell, the four
ablations and a society that keeps running after agents starve (every array of the final state,
every field of every round's record), and two runs through ``cooplab.run`` (summary and tables)."""

import json

import numpy as np
import pytest

from tests.cpr.format_fixture import JSON, NPZ, batch_outcomes, runner_outcomes


@pytest.fixture(scope="module")
def pinned():
    with np.load(NPZ, allow_pickle=False) as d:
        return {k: d[k] for k in d.files}


def same(current: dict, pinned: dict, prefix: tuple[str, ...]) -> None:
    keys = sorted(k for k in pinned if k.startswith(prefix))
    assert keys
    missing = [k for k in keys if k not in current]
    assert not missing, missing
    for k in keys:
        np.testing.assert_array_equal(current[k], pinned[k], err_msg=k)  # NaNs compare equal
        assert current[k].dtype == pinned[k].dtype, (k, current[k].dtype, pinned[k].dtype)
        assert current[k].shape == pinned[k].shape, k


def test_the_sweep_and_the_ablations_give_the_pinned_numbers(pinned):
    current = batch_outcomes()
    # each pinned key is there, with the same dtype and the same bits
    same(current, pinned, ("sweep/", "full/", "osl/", "ogd/", "neither/", "keep_running/"))
    # and no pinned field is vacuous: the batches mix early collapse with long runs
    T = pinned["sweep/final/T_s"]
    assert T.min() < T.max()
    assert pinned["keep_running/history/active"].any() and not pinned["keep_running/history/active"].all()


def test_runs_through_the_runner_give_the_pinned_summaries_and_tables(pinned):
    summaries, tables = runner_outcomes()
    assert summaries == json.loads(JSON.read_text())
    same(tables, pinned, tuple(f"{name}/" for name in summaries))
