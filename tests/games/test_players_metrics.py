"""Reference players, the metrics (proximity, intervals, bootstrap convergence), sanction
visibility and the seeded collective-risk draw, through the games' graphs (no run directory)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cooplab.evals.typed import column
from cooplab.tasks.games import equilibria as eq
from cooplab.tasks.games import metrics as mt
from cooplab.tasks.games import players as pl
from cooplab.tasks.games.params import (
    GAMES,
    TABLE4,
    CollectiveRiskParams,
    CPRSanctionParams,
    PublicGoodsParams,
    model_of,
)
from cooplab.tasks.games.society import round_view, run_game, visible_sanctions


def play(P, kind, seed=0, script=None):
    return run_game(P, pl.policies(kind, P, script), seed)["history"]


# --- Nash and Pareto players: proximity exactly 1 and 0 ----------------------------------------------------------
@pytest.mark.parametrize("game", GAMES)
def test_nash_and_pareto_players_give_proximity_exactly_1_and_0(game):
    sizes = [[5, 5]] + [[k, k] for k in TABLE4[game]] + ([[3, 4]] if game != "cpr-sanction" else [])
    for gs in sizes:
        P = model_of(game)(group_sizes=gs, simulations=7)
        ref = eq.reference(P)
        for kind, want in (("nash", 1.0), ("pareto", 0.0)):
            sims = mt.simulation_table(P, play(P, kind))
            assert sims["proximity"].tolist() == [want] * 7, (gs, kind)
            assert sims["metric"].tolist() == [ref.nash if kind == "nash" else ref.pareto] * 7
            assert column(sims, "near_pareto").all() == (kind == "pareto")


def test_pareto_players_meet_the_threshold_and_succeed():
    P = CollectiveRiskParams(simulations=5)
    last = play(P, "pareto")[-1]
    assert last["met"].all() and not last["lost"].any() and np.all(last["payoff"] == 90.0)
    Po = model_of("o-ring")(simulations=5)
    assert all(h["success"].all() for h in play(Po, "pareto"))
    assert not any(h["success"].any() for h in play(Po, "nash"))


# --- random players --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("game", GAMES)
def test_random_players_stay_in_range_and_vary(game):
    P = model_of(game)(simulations=400)
    hist = play(P, "random", seed=3)
    a = np.stack([h["action"] for h in hist])
    hi = pl.action_range(P)
    assert a.min() == 0 and a.max() == hi
    if game == "public-goods":
        assert isinstance(P, PublicGoodsParams)
        assert np.all(a.sum(axis=-1) == P.endowment)
        assert abs(a[..., 1].mean() - P.endowment / 3) < 0.1  # uniform over allocations: E[g] = E / 3
    else:
        assert abs(a.mean() - hi / 2) < 0.1
    again = play(P, "random", seed=3)
    assert all(np.array_equal(x["action"], y["action"]) for x, y in zip(hist, again, strict=False))  # seeded
    other = play(P, "random", seed=4)
    assert not np.array_equal(hist[0]["action"], other[0]["action"])


def test_random_sanctions_stay_in_the_group_and_under_the_cap():
    P = CPRSanctionParams(simulations=300, max_sanction=6)
    hist = play(P, "random", seed=1)
    g = eq.groups_of(P)
    cross = g[:, None] != g[None, :]
    for h in hist:
        s = h["sanction"]
        assert not s[:, cross].any() and not s[:, np.arange(10), np.arange(10)].any()
        assert s.sum(axis=2).max() <= 6 and s.sum() > 0 and h["dropped"].sum() == 0


# --- scripted players ----------------------------------------------------------------------------------------------
def test_scripted_players_play_the_script(tmp_path):
    P = model_of("weakest-link")(simulations=3)
    f = tmp_path / "s.json"
    f.write_text(
        json.dumps({"game": "weakest-link", "rounds": [{"actions": [10] * 9 + [3]}, {"actions": 7}, {"actions": 10}]})
    )
    script = pl.load_script(f, P)
    hist = play(P, "scripted", script=script)
    assert hist[0]["payoff"][:, :9].tolist() == [[-4.0] * 9] * 3 and hist[0]["payoff"][:, 9].tolist() == [3.0] * 3
    assert np.all(hist[1]["action"] == 7) and np.all(hist[2]["payoff"] == 10.0)


@pytest.mark.parametrize(
    "game,data,needle",
    [
        ("cpr", {"rounds": [{"actions": [11] * 10}]}, "actions[0] must be an integer in 0..10"),
        ("cpr", {"rounds": [{"actions": [1] * 9}]}, "one value per player (10"),
        ("cpr", {"rounds": [{"actions": 1}, {"actions": 1}]}, "1 entry (played every round) or 3"),
        ("cpr", {"game": "o-ring", "rounds": [{"actions": 1}]}, "is for the game 'o-ring'"),
        ("cpr", {"rounds": [{"actions": 1, "sanctions": []}]}, "does not use"),
        ("cpr", {"rounds": [{"actions": True}]}, "must be an integer"),
        ("cpr", [1, 2], "must be a JSON object"),
        ("public-goods", {"rounds": [{"actions": [3, 3, 3]}]}, "must add up to the endowment 10"),
        ("public-goods", {"rounds": [{"actions": 10}]}, "[keep, group, global]"),
        (
            "cpr-sanction",
            {"rounds": [{"actions": 5, "sanctions": [[0, 7, 2]]}]},
            "only possible within one's own group",
        ),
        (
            "cpr-sanction",
            {"rounds": [{"actions": 5, "sanctions": [[3, 3, 2]]}]},
            "only possible within one's own group",
        ),
        ("cpr-sanction", {"rounds": [{"actions": 5, "sanctions": [[0, 1, 6], [0, 2, 6]]}]}, "more than max_sanction"),
        ("cpr-sanction", {"rounds": [{"actions": 5, "sanctions": [[0, 1]]}]}, "[sanctioner, target, tokens]"),
    ],
)
def test_bad_scripts_are_refused_with_one_line(tmp_path, game, data, needle):
    P = model_of(game)()
    f = tmp_path / "s.json"
    f.write_text(json.dumps(data))
    with pytest.raises(pl.ScriptError) as e:
        pl.load_script(f, P)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_public_goods_script_per_player_triples():
    P = model_of("public-goods")()
    s = pl.check_script({"rounds": [{"actions": [[0, 10, 0]] + [[10, 0, 0]] * 9}]}, P)
    assert pl.script_actions(s, P).shape == (3, 10, 3)


# --- sanction visibility ----------------------------------------------------------------------------------------------
def test_sanctions_are_seen_only_inside_the_group():
    P = CPRSanctionParams(simulations=1)
    script = pl.check_script(
        {"rounds": [{"actions": [2, 2, 2, 2, 10, 10, 10, 10, 10, 0], "sanctions": [[0, 4, 3], [6, 9, 1]]}]}, P
    )
    hist = play(P, "scripted", script=script)
    g = eq.groups_of(P)
    rec = hist[0]
    assert visible_sanctions(rec["sanction"][0], g, 1) == [(0, 4, 3)]  # group 0 sees group 0's sanction only
    assert visible_sanctions(rec["sanction"][0], g, 5) == [(6, 9, 1)]
    v = round_view(P, rec, g, 0, 2)
    assert v["sanctions"] == [(0, 4, 3)] and set(v["group_actions"]) == {0, 1, 2, 3, 4}
    assert v["total_extracted"] == 58 and v["pool_remaining"] == 42  # the shared pool is common knowledge
    w = round_view(P, rec, g, 0, 9)
    assert w["sanctions"] == [(6, 9, 1)] and w["your_payoff"] == pytest.approx(0 + 3 * 42 / 10 - 2)


# --- the collective-risk draw
# -------------------------------------------------------------------------------------------
def binomial_acceptance(n: int, p: float, alpha: float) -> tuple[int, int]:
    """The central (1 - alpha) acceptance region [lo, hi] of Binomial(n, p), exactly (log-space pmf)."""
    logs = [
        math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p)
        for k in range(n + 1)
    ]
    pmf = np.exp(np.array(logs))
    cdf = np.cumsum(pmf)
    lo = int(np.searchsorted(cdf, alpha / 2, side="right"))  # P(X < lo) <= alpha / 2
    sf = np.cumsum(pmf[::-1])[::-1]  # P(X >= k)
    hi = int(np.nonzero(sf > alpha / 2)[0][-1])  # P(X > hi) <= alpha / 2
    return lo, hi


def test_collective_risk_loss_draw_is_seeded_and_its_frequency_matches_the_loss_probability():
    P = CollectiveRiskParams(simulations=20_000)
    last = play(P, "nash", seed=11)[-1]  # nobody contributes: the threshold is always missed
    assert not last["met"].any()
    k = int(last["lost"].sum())
    lo, hi = binomial_acceptance(20_000, 0.5, alpha=1e-6)  # a false alarm has probability below 1e-6
    assert lo <= k <= hi, (k, lo, hi)
    assert np.array_equal(play(P, "nash", seed=11)[-1]["lost"], last["lost"])  # same seed, same draws
    assert not np.array_equal(play(P, "nash", seed=12)[-1]["lost"], last["lost"])
    assert np.all(last["payoff"][last["lost"]] == 0) and np.all(last["payoff"][~last["lost"]] == 100)
    assert np.all(last["expected_payoff"] == 50.0)


def test_collective_risk_loss_probability_is_a_parameter():
    P = CollectiveRiskParams(simulations=20_000, loss_probability=0.9, threshold=100)
    k = int(play(P, "nash", seed=2)[-1]["lost"].sum())
    lo, hi = binomial_acceptance(20_000, 0.9, alpha=1e-6)
    assert lo <= k <= hi


def test_binomial_acceptance_region_is_exact():
    lo, hi = binomial_acceptance(10, 0.5, alpha=0.05)
    assert (lo, hi) == (2, 8)  # P(X <= 1) = 0.0107 <= 0.025 < P(X <= 2) = 0.0547


# --- metrics ----------------------------------------------------------------------------------------------------------
def test_t_quantiles_and_intervals():
    assert mt.t_quantile(0.975, 49) == pytest.approx(2.009575, abs=1e-6)
    assert mt.t_quantile(0.975, 1) == pytest.approx(12.706205, abs=1e-6)
    assert mt.t_quantile(0.025, 9) == pytest.approx(-2.262157, abs=1e-6)
    c = mt.mean_ci([1.0, 2.0, 3.0, 4.0])
    half = 3.182446 * np.std([1, 2, 3, 4], ddof=1) / 2
    assert c["mean"] == 2.5 and c["ci95"] == pytest.approx([2.5 - half, 2.5 + half], abs=1e-5)
    assert mt.mean_ci([5.0])["ci95"] is None and mt.mean_ci([])["mean"] is None


def test_proximity_normalization():
    ref = eq.Reference(nash=0.0, pareto=1.0)  # Collective Risk at the defaults
    # the paper's scale: 3.0 overshoots the fair share by twice Nash's distance and counts as Nash (1)
    assert ref.proximity([0.0, 1.0, 0.5, 3.0]).tolist() == [1.0, 0.0, 0.5, 1.0]
    assert ref.distance([0.0, 1.0, 0.5, 3.0]).tolist() == [1.0, 0.0, 0.5, 2.0]  # the uncapped distance is kept
    ref = eq.Reference(nash=10.0, pareto=0.0)  # CPR
    assert ref.proximity([10.0, 0.0, 2.0]).tolist() == [1.0, 0.0, 0.2]


@pytest.mark.parametrize("game", GAMES)
def test_random_players_proximity_is_on_the_papers_scale(game):
    """Random players contribute about 5 per round in Collective Risk, four fair shares beyond it:
    the proximity is 1 (as far as Nash, or further) and the uncapped distance keeps the 4."""
    P = model_of(game)(simulations=40)
    hist = play(P, "random", seed=3)
    sims = mt.simulation_table(P, hist)
    rounds = mt.round_table(P, hist)
    for t in (sims, rounds):
        assert t["proximity"].between(0.0, 1.0).all(), game
        assert (column(t, "proximity") == np.minimum(column(t, "proximity_raw"), 1.0)).all()
    summary = mt.summarize(P, hist, sims, mt.bootstrap_convergence(sims["metric"]))
    prox = summary["pareto_proximity"]
    assert 0.0 <= prox["mean"] <= 1.0 and all(0.0 <= x <= 1.0 for x in prox["ci95"])
    assert prox["raw_distance_mean"] == pytest.approx(sims["proximity_raw"].mean(), abs=1e-6)
    if game == "collective-risk":
        assert prox["mean"] == 1.0 and prox["raw_distance_mean"] > 3.5 and prox["beyond_nash_share"] == 1.0


@pytest.mark.parametrize(
    "game, default, basis", [("collective-risk", 1.0, "fair share T/(N R)"), ("o-ring", 6.0, "cheapest success t*/N")]
)
def test_pareto_reference_is_settable(game, default, basis):
    ref = eq.reference(model_of(game)())
    assert (ref.pareto, ref.basis) == (default, basis)
    P = model_of(game).model_validate({"pareto_reference": 1.25})  # a field of these two games only
    ref = eq.reference(P)
    assert (ref.nash, ref.pareto, ref.basis) == (0.0, 1.25, "set by pareto_reference")
    sims = mt.simulation_table(P, play(P, "pareto"))
    # the Pareto players still play the welfare optimum; it is measured from the reference set
    assert sims["proximity"].iloc[0] == pytest.approx(min(1.0, abs(default - 1.25) / 1.25))
    for bad in (0, -1.0, 11.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            model_of(game).model_validate({"pareto_reference": bad})
    assert "pareto_reference" not in model_of("cpr").model_fields


def test_bootstrap_convergence():
    rng = np.random.default_rng(0)
    x = rng.normal(5, 2, size=50)
    cv = mt.bootstrap_convergence(x, resamples=200, rng=np.random.default_rng(1))
    assert cv["n"].tolist() == list(range(1, 51))
    assert cv["mae"].iloc[0] > 2 * cv["mae"].iloc[19] > 0 and cv["mae"].iloc[19] > cv["mae"].iloc[49]
    assert np.all(cv["p95"] >= cv["mae"])
    # in units of the full data's s.d.: about sqrt(2 / pi) / sqrt(n) for a mean of n draws
    assert cv["mae_sd_units"].iloc[0] == pytest.approx(math.sqrt(2 / math.pi), rel=0.2)
    again = mt.bootstrap_convergence(x, resamples=200, rng=np.random.default_rng(1))
    assert again.equals(cv)
    flat = mt.bootstrap_convergence(np.full(10, 3.0))
    assert np.all(column(flat, "mae") == 0) and column(flat, "mae_sd_units").isna().all()


def test_convergence_figure_for_six_games(tmp_path):
    from cooplab.tasks.games.figures import convergence_figure

    per_game = {}
    for game in GAMES:
        P = model_of(game)(simulations=30)
        per_game[game] = mt.simulation_table(P, play(P, "random", seed=5))["metric"].to_numpy()
    table = convergence_figure(per_game, tmp_path / "convergence.png")
    assert (tmp_path / "convergence.png").stat().st_size > 10_000
    assert set(table["game"]) == set(GAMES) and table.groupby("game").size().tolist() == [30] * 6
