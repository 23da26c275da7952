"""The faster implementations behind the CPR nodes give the numbers of the plain numpy code they
replaced, bit for bit: the row reductions (``row_sum``, ``count_rows``, ``take_peers``), the median
vote, peer sampling and the three random/learning policies (against verbatim copies of the former
code, kept here as references), and the nodes' helpers (``where``, ``running_agents``)."""

import warnings
from typing import Any

import numpy as np
import pytest

from cooplab.agents.rule_based import col, count_rows, row_sum, sample_peer, take_peers
from cooplab.graphs import nodes as gn
from cooplab.tasks.cpr import model as world
from cooplab.tasks.cpr import phases as ph
from cooplab.tasks.cpr import rules as rb
from cooplab.tasks.cpr.params import make_params
from cooplab.tasks.cpr.society import Condition, init_state


def same_bits(a, b):
    """Same dtype and shape, equal values (NaN = NaN, whatever the sign bit of a NaN) and equal
    signs of zero."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return np.array_equal(a, b)
    num = ~np.isnan(a)
    return (
        np.array_equal(np.isnan(b), ~num)
        and np.array_equal(a[num], b[num])
        and np.array_equal(np.signbit(a[num]), np.signbit(b[num]))
    )


def wild(rng, shape):
    """Floats of every magnitude, with signed zeros, infinities and NaNs."""
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-12, 12, size=shape)
    u = rng.random(shape)
    x[u < 0.05] = -0.0
    x[(u >= 0.05) & (u < 0.08)] = 0.0
    x[(u >= 0.08) & (u < 0.09)] = np.inf
    x[(u >= 0.09) & (u < 0.10)] = -np.inf
    x[(u >= 0.10) & (u < 0.11)] = np.nan
    return x


# --- row reductions ----------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf - inf: numpy warns as well
@pytest.mark.parametrize("n", [*range(1, 20), 23, 31, 32, 33, 64, 100, 127, 128, 129, 200])
def test_row_sum_is_numpys_row_sum_bit_for_bit(n):
    rng = np.random.default_rng(n)
    x = wild(rng, (500, n))
    x[:20] = -0.0  # a sum of negative zeros is +0.0
    x[20:30] = rng.random((10, n)) * 1e-3  # plain rows, where the order of the additions shows
    assert same_bits(row_sum(x), x.sum(axis=1))
    y = rng.random((500, n)) * 10.0 ** rng.integers(-3, 3, size=(500, n))  # finite: every rounding compared
    assert same_bits(row_sum(y), y.sum(axis=1))


def test_row_sum_of_other_layouts_and_dtypes_is_numpys():
    rng = np.random.default_rng(0)
    x = rng.random((50, 12))
    for a in (x[:, ::2], np.asfortranarray(x), x.astype(np.float32), x[:0], x[:, :0], (x * 100).astype(np.int64)):
        assert same_bits(row_sum(a), a.sum(axis=1))


@pytest.mark.parametrize("dtype", [bool, np.int8, np.int64])
@pytest.mark.parametrize("n", [1, 10, 255, 256, 300])
def test_count_rows_is_the_row_sum(dtype, n):
    rng = np.random.default_rng(n)
    x = (rng.random((40, n)) < 0.7) if dtype is bool else rng.integers(-100, 100, size=(40, n)).astype(dtype)
    assert same_bits(count_rows(x), x.sum(axis=1))


def test_take_peers_is_take_along_axis():
    rng = np.random.default_rng(1)
    x, j = rng.random((30, 7)), rng.integers(0, 7, size=(30, 7))
    assert same_bits(take_peers(x, j), np.take_along_axis(x, j, axis=1))
    assert same_bits(take_peers(x[:, ::-1], j), np.take_along_axis(x[:, ::-1], j, axis=1))


# --- median vote -------------------------------------------------------------------------------
def old_median_norm(proposals, alive):
    masked = np.where(alive, proposals, np.nan)
    out = np.full(masked.shape[0], np.nan)
    finite = np.isfinite(masked)
    full = finite.all(axis=1)
    if full.any():
        out[full] = np.median(masked[full], axis=1)
    some = finite.any(axis=1) & ~full
    if some.any():
        out[some] = np.nanmedian(masked[some], axis=1)
    return out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 9, 10, 11, 16])
def test_median_norm_is_numpys_median_and_nanmedian(n):
    rng = np.random.default_rng(n)
    for trial in range(12):
        x = np.round(rng.standard_normal((300, n)) * 3, trial % 3)  # ties
        u = rng.random((300, n))
        x[u < 0.05] = -0.0
        x[(u >= 0.05) & (u < 0.08)] = 0.0
        if trial % 3 == 0:
            x[(u >= 0.08) & (u < 0.10)] = np.inf
            x[(u >= 0.10) & (u < 0.12)] = -np.inf
        if trial % 2 == 0:
            x[(u >= 0.12) & (u < 0.2)] = np.nan
        alive = rng.random((300, n)) < (0.7 if trial % 4 else 2.0)  # every fourth trial: everybody alive
        alive[:3] = False  # nobody alive: NaN
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = old_median_norm(x, alive)
        assert same_bits(world.median_norm(x, alive), want)


# --- peer sampling and the policies, against the former code -------------------------------------
def old_sample_peer(alive, rng):
    S, N = alive.shape
    if N < 2:
        return np.full((S, N), -1)
    idx = np.arange(N)[None, :]
    j = (idx + rng.integers(1, N, size=(S, N))) % N
    n_alive_others = alive.sum(axis=1, keepdims=True) - alive.astype(int)
    has_peer = n_alive_others > 0
    bad = ~np.take_along_axis(alive, j, axis=1) & has_peer
    for _ in range(200):
        if not bad.any():
            break
        redraw = (np.broadcast_to(idx, (S, N)) + rng.integers(1, N, size=(S, N))) % N
        j = np.where(bad, redraw, j)
        bad = ~np.take_along_axis(alive, j, axis=1) & has_peer
    if bad.any():
        keys = rng.random((S, N, N))
        valid = alive[:, None, :] & ~np.eye(N, dtype=bool)[None]
        j = np.where(bad, np.argmax(np.where(valid, keys, -1.0), axis=2), j)
    return np.where(has_peer, j, -1)


def old_sample_inspect_punish(state, threshold, rng):
    alive = state["alive"] & state["active"][:, None]
    S, N = alive.shape
    j = old_sample_peer(alive, rng)
    u_inspect = rng.random((S, N))
    u_punish = rng.random((S, N))
    has = j >= 0
    jj = np.where(has, j, 0)
    h_j = np.take_along_axis(state["h"], jj, axis=1)
    inspect = alive & has & (u_inspect < state["m"])
    violation = inspect & (h_j > threshold)
    punish = violation & (u_punish < state["p"])
    B = punish.astype(np.int8)
    V = np.zeros((S, N), dtype=np.int8)
    rows = np.broadcast_to(np.arange(S)[:, None], (S, N))
    V[rows[punish], jj[punish]] = 1
    tau_V = np.full((S, N), np.inf)
    np.minimum.at(tau_V, (rows[punish], jj[punish]), np.broadcast_to(threshold, (S, N))[punish])
    return {
        "B": B,
        "V": V,
        "I": inspect.astype(np.int8),
        "tau_V": tau_V,
        "n_inspections": inspect.sum(axis=1),
        "n_violations": violation.sum(axis=1),
    }


def old_payoff_biased_imitation(state, rng):
    P = state["params"]
    alive = state["alive"] & state["active"][:, None]
    S, N = alive.shape
    k = old_sample_peer(alive, rng)
    u_meet, u_adopt = rng.random((S, N)), rng.random((S, N))
    has = k >= 0
    kk = np.where(has, k, 0)
    Pk = np.take_along_axis(state["P_bar"], kk, axis=1)
    prob = world.imitation_probability(Pk, state["P_bar"], P["delta"])
    adopt = alive & has & (u_meet < col(P["learn_prob"])) & (u_adopt < prob)
    rows, cols = np.nonzero(adopt)
    z = rng.standard_normal((3, rows.size))
    out = {}
    widths = (("e", P["e_max"] - P["e_min"], 1.0), ("m", 1.0, 1.0), ("g", P["g_max"] - P["g_min"], np.inf))
    for i, (name, width, hi) in enumerate(widths):
        new = state[name].copy()
        w = np.broadcast_to(np.asarray(width, dtype=float), (S,))[rows] if np.ndim(width) else width
        sg = np.broadcast_to(np.asarray(P["sigma"], dtype=float), (S,))[rows] if np.ndim(P["sigma"]) else P["sigma"]
        new[rows, cols] = np.clip(state[name][rows, kk[rows, cols]] + z[i] * sg * w, 0.0, hi)
        out[name] = new
    out["n_adopted"] = adopt.sum(axis=1)
    return out


def old_reinforce(x, s, lam):
    return np.where(s >= 0, x + lam * s * (1.0 - x), x + lam * s * x)


def old_individual_learning(state):
    P = state["params"]
    lam = col(P["il_rate"])
    e, m, p, g = state["e"], state["m"], state["p"], state["g"]
    payoff = state["payoff"]
    fined = state["V"] == 1
    s = np.clip(payoff / col(P["c"]), -1.0, 1.0)
    tau = np.where(fined, state["tau_V"], g)
    g_new = np.where(fined, g - lam * np.maximum(g - tau, 0.0), g)
    e_new = np.where(fined, (1.0 - lam) * e, np.where(payoff < 0, e + lam * (1.0 - e), e))
    m_new = np.where(state["I"] == 1, old_reinforce(m, s, lam), m)
    p_new = np.where(state["B"] == 1, old_reinforce(p, s, lam), p)
    return {
        "e": np.clip(e_new, 0.0, 1.0),
        "m": np.clip(m_new, 0.0, 1.0),
        "p": np.clip(p_new, 0.0, 1.0),
        "g": np.maximum(g_new, 0.0),
    }


def random_state(seed, scalar_params=False, N=10, S=60):
    """A mid-run batch: dead agents (some societies with one or none alive), finished societies,
    random traits, payoffs, fines and inspections; parameters per society or plain floats."""
    rng = np.random.default_rng(seed)
    st: dict[str, Any] = dict(
        init_state(
            [Condition(make_params(beta=b, r=r), "mixed") for b in (5.0, 20.0) for r in (0.3, 0.6)], S // 4, seed
        )
    )
    st["alive"] = rng.random((S, N)) < 0.8
    st["alive"][:3] = False
    st["alive"][3:6] = np.arange(N) == 2  # a single survivor: no peer
    st["active"] = rng.random(S) < 0.8
    for k in ("e", "m", "p"):
        st[k] = rng.random((S, N))
    st["g"] = rng.random((S, N)) * 30
    st["h"] = rng.random((S, N)) * 20
    st["P_bar"] = rng.standard_normal((S, N)) * 5
    st["payoff"] = rng.standard_normal((S, N)) * 8
    st["V"] = (rng.random((S, N)) < 0.2).astype(np.int8)
    st["B"] = (rng.random((S, N)) < 0.2).astype(np.int8)
    st["I"] = (rng.random((S, N)) < 0.5).astype(np.int8)
    st["tau_V"] = np.where(st["V"] == 1, rng.random((S, N)) * 30, np.inf)
    params = dict(st["params"])
    params["il_rate"] = rng.random(S) * np.array([0.0, 1.0])[rng.integers(0, 2, S)]  # some rates 0
    params["learn_prob"] = np.full(S, 0.6)
    if scalar_params:
        params = {k: float(v[0]) for k, v in params.items()}
    st["params"] = params
    return st


@pytest.mark.parametrize("seed", range(6))
def test_sample_peer_draws_what_it_drew_before(seed):
    rng = np.random.default_rng(seed)
    for alive in (
        rng.random((50, 10)) < 0.7,
        np.ones((50, 10), bool),
        np.zeros((50, 10), bool),
        rng.random((50, 2)) < 0.5,
        np.ones((50, 1), bool),
    ):
        a, b = np.random.default_rng([seed, 1]), np.random.default_rng([seed, 1])
        assert same_bits(sample_peer(alive, a), old_sample_peer(alive, b))
        assert a.random() == b.random()  # the stream is left where it was left before


@pytest.mark.parametrize("scalar_params", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_policies_give_what_the_former_code_gave(seed, scalar_params):
    st = random_state(seed, scalar_params)
    thr = ph.threshold(st) if not scalar_params else np.full(st["g"].shape, 12.0)
    cases = [
        (lambda r: rb.sample_inspect_punish(st, thr, r), lambda r: old_sample_inspect_punish(st, thr, r)),
        (lambda r: rb.payoff_biased_imitation(st, r), lambda r: old_payoff_biased_imitation(st, r)),
        (lambda r: rb.individual_learning(st), lambda r: old_individual_learning(st)),
    ]
    for new, old in cases:
        a, b = np.random.default_rng([seed, 2]), np.random.default_rng([seed, 2])
        got, want = new(a), old(b)
        assert sorted(got) == sorted(want)
        for k in want:
            assert same_bits(got[k], want[k]), k
        assert a.random() == b.random()


# --- the nodes' helpers ------------------------------------------------------------------------
def test_where_returns_the_array_itself_only_when_nothing_is_masked():
    a = np.arange(6.0).reshape(2, 3)
    everyone = np.ones((2, 3), bool)
    assert gn.where(everyone, a, 0.0) is a
    some = everyone.copy()
    some[0, 1] = False
    assert same_bits(gn.where(some, a, -1.0), np.where(some, a, -1.0))
    ints = np.arange(6).reshape(2, 3)
    assert same_bits(gn.where(everyone, ints, 0.5), np.where(everyone, ints, 0.5))  # promoted: a copy
    assert same_bits(gn.where(np.ones((2, 1), bool), a, 0.0), np.where(np.ones((2, 1), bool), a, 0.0))  # broadcast mask


def test_running_agents_is_alive_itself_when_every_society_runs():
    alive = np.array([[True, False], [True, True]])
    assert gn.running_agents({"alive": alive, "active": np.array([True, True])}) is alive
    assert same_bits(
        gn.running_agents({"alive": alive, "active": np.array([False, True])}), np.array([[False, False], [True, True]])
    )
