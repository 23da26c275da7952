"""Computing only the running societies must not change a rule-based run: the current code
reproduces, bit for bit, reference outcomes written by the code that still computed every
society every round (tests/cpr/data/exactness_reference.npz, see exactness_batches.py), which
had no individual learning (preset v1). With individual learning on there is no stored
reference: the running-societies-only computation is compared with the whole-batch one."""

import numpy as np
import pytest

from tests.cpr.exactness_batches import DATA, FINAL_KEYS, batches, outcomes


@pytest.fixture(scope="module")
def reference():
    with np.load(DATA) as d:
        return {k: d[k] for k in d.files}


@pytest.fixture(scope="module")
def current():
    return outcomes("v1")


def test_reference_batches_mix_early_collapse_with_long_runs(reference):
    for name in batches():
        T = reference[f"{name}/final/T_s"]
        assert (T <= 10).sum() >= T.size // 5, name  # many societies finish early ...
        assert T.max() >= 2 * T.min() + 5, name  # ... while others keep running long after
    n, act = reference["keep_running/history/n_alive"], reference["keep_running/history/active"]
    N = reference["keep_running/final/alive"].shape[1]
    assert (act & (n > 0) & (n < N)).any()  # running societies with dead agents (peer rejection)


def test_same_keys_as_reference(reference, current):
    assert sorted(current) == sorted(reference)


@pytest.mark.parametrize("name", list(batches()))
def test_batch_reproduces_reference_exactly(reference, current, name):
    keys = [k for k in reference if k.startswith(name + "/")]
    assert keys
    for k in keys:
        np.testing.assert_array_equal(current[k], reference[k], err_msg=k)  # NaNs compare equal
        assert current[k].dtype == reference[k].dtype, k


def test_adapt_node_with_rate_zero_reproduces_the_reference_exactly(reference):
    """The adapt node in every graph, individual_learning on, il_rate 0: skipped society by
    society, so the numbers are v1's bit for bit."""
    assert all("adapt" in kw["phases"] for kw in batches("il_rate0").values())
    cur = outcomes("il_rate0")
    assert sorted(cur) == sorted(reference)
    for k in reference:
        np.testing.assert_array_equal(cur[k], reference[k], err_msg=k)
        assert cur[k].dtype == reference[k].dtype, k


def test_individual_learning_running_rows_equal_the_whole_batch(reference, monkeypatch):
    """Individual learning on (today's defaults): the nodes computing only the running block give
    exactly what they give when the state keeps every society and the nodes mask the finished
    ones (the environment node never drops a society), including the adapt node."""
    assert all("adapt" in kw["phases"] for kw in batches("on").values())
    rows = outcomes("on")
    from cooplab.tasks.cpr import state as block

    calls = []
    monkeypatch.setattr(block, "compactable", lambda state: calls.append(1) and False)  # always False: whole batch
    whole = outcomes("on")
    assert calls  # the whole-batch path was taken
    assert sorted(rows) == sorted(whole) == sorted(reference)
    for k in rows:
        np.testing.assert_array_equal(rows[k], whole[k], err_msg=k)
        assert rows[k].dtype == whole[k].dtype, k
    # individual learning changed the outcome of every batch (the comparison is not vacuous) ...
    for name in batches("on"):
        assert not np.array_equal(rows[f"{name}/final/g"], reference[f"{name}/final/g"]), name
    # ... and finished societies were frozen while others ran (the two paths really differ in work)
    for name in batches("on"):
        T = rows[f"{name}/final/T_s"]
        assert T.min() < T.max(), name
    assert set(FINAL_KEYS) <= {k.split("/")[-1] for k in rows}


def test_row_subset_generator_gives_the_whole_batch_draws_of_its_rows():
    from cooplab.graphs.rng import RowSubsetGenerator, phase_rng

    rows = np.array([1, 4, 5])
    full, sub = phase_rng(3, 2, "x"), RowSubsetGenerator(phase_rng(3, 2, "x"), rows, 7)
    np.testing.assert_array_equal(sub.integers(1, 10, size=(3, 4)), full.integers(1, 10, size=(7, 4))[rows])
    np.testing.assert_array_equal(sub.random((3, 4)), full.random((7, 4))[rows])
    np.testing.assert_array_equal(
        sub.standard_normal((2, 5)), full.standard_normal((2, 5))
    )  # per-event: passed through
    with pytest.raises(ValueError):
        sub.random((7, 4))  # a per-society draw must be shaped for the subset
