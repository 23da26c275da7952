"""The Bayesian analyses (cooplab.evals.bayes): parameter recovery on data simulated from each model
with known coefficients, the two CLI commands end to end (synthetic profiles in the real files'
format, and profiles of reference players made by ``cooplab profile``), and hostile input refused
in one line with exit 2.

Recovery: for each model the checked coefficients must all lie within 3.3 posterior s.d. of the
truth (a 99.9% band) and at least all but two of them inside their 95% interval (with 11-15
independent 95% intervals, three or more misses happen with probability under 4%: a correct model
passes at any seed, a biased one does not); every split R-hat <= 1.01 and no divergence."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cooplab.cli import main
from cooplab.extras import installed
from cooplab.runs import profiles as pf
from cooplab.tasks.games import equilibria as eq
from cooplab.tasks.games.params import GAMES

if not (installed("numpyro") and installed("jax")):
    msg = "numpyro/jax missing: .venv/bin/pip install numpyro jax (the extra 'bayes')"
    if os.environ.get("CI"):
        pytest.fail(msg + " (CI is set, so these tests must not be skipped)", pytrace=False)
    pytest.skip(msg, allow_module_level=True)

from cooplab.evals import bayes as bz  # noqa: E402

RECOVERY = {"chains": 2, "warmup": 500, "samples": 1000, "seed": 0}
SMALL = ["--chains", "2", "--warmup", "200", "--samples", "200", "--seed", "1"]


def cli(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def check_recovery(coef: pd.DataFrame, truth: dict[str, float], divergences: int) -> None:
    c = coef.set_index("term")
    assert divergences == 0
    assert (coef["r_hat"] <= 1.01).all(), coef.loc[coef["r_hat"] > 1.01, ["term", "r_hat"]]
    assert (coef["ess_bulk"] > 200).all(), coef[["term", "ess_bulk"]]
    z = {t: abs(c.loc[t, "mean"] - v) / c.loc[t, "sd"] for t, v in truth.items()}
    assert all(v < 3.3 for v in z.values()), z
    inside = [t for t, v in truth.items() if c.loc[t, "ci_low"] <= v <= c.loc[t, "ci_high"]]
    assert len(inside) >= len(truth) - 2, (set(truth) - set(inside), c.loc[list(truth), ["mean", "ci_low", "ci_high"]])


# --- recovery: Pareto-proximity regression ---------------------------------------------------------
PROFILE_TRUTH = {"intercept": 0.8, "log10(size)": -0.08, "thinking variant": 0.05, "theory of mind": -0.06,
                 "game: Weakest-Link": -0.5, "game: CPR": 0.05, "game: CPR+Sanction": 0.0, "game: O-Ring": -0.3,
                 "game: Public Goods": -0.15, "sigma (residual)": 0.15, "sigma_f (family)": 0.08}


def simulated_profile_design(seed=11, families=6, per_family=2, sims=6):
    """Data drawn from the regression itself: families x models, each with a standard and a ToM
    profile, ``sims`` simulations per game."""
    rng = np.random.default_rng(seed)
    T = PROFILE_TRUTH
    delta = rng.normal(0, T["sigma_f (family)"], families)
    rows = []
    for f in range(families):
        for k in range(per_family):
            log_size, think = rng.uniform(0, 1.8), float(rng.random() < 0.4)
            for tom in (0.0, 1.0):
                for g in GAMES:
                    ge = 0.0 if g == bz.REFERENCE_GAME else T[f"game: {bz.GAME_TITLES[g]}"]
                    mu = T["intercept"] + T["log10(size)"] * log_size + T["thinking variant"] * think + T["theory of mind"] * tom + ge + delta[f]
                    for y in mu + rng.normal(0, T["sigma (residual)"], sims):
                        rows.append({"proximity": y, "model": f"m{f}-{k}", "family": f"f{f}", "game": g, "profile": f"m{f}-{k}/{tom}",
                                     "log10_size": log_size, "thinking": think, "tom": tom})
    df = pd.DataFrame(rows)
    X = df[["log10_size", "thinking", "tom"]].copy()
    for g in GAMES:
        if g != bz.REFERENCE_GAME:
            X[f"game: {g}"] = (df["game"] == g).astype(float)
    fams = sorted(df["family"].unique())
    return {"df": df, "X": X, "y": df["proximity"].to_numpy(), "family": df["family"].map({f: i for i, f in enumerate(fams)}).to_numpy(),
            "families": fams, "models": sorted(df["model"].unique()), "notes": []}, delta


@pytest.fixture(scope="module")
def profile_fit():
    design, delta = simulated_profile_design()
    return bz.fit_profile_regression(design, RECOVERY), design, delta


def test_profile_regression_recovers_known_coefficients(profile_fit):
    res, design, delta = profile_fit
    check_recovery(res["coefficients"], PROFILE_TRUTH, res["fit"]["divergences"])
    # the family intercepts too, and the deterministic intercept is the centred one moved back to x = 0
    c = res["coefficients"].set_index("term")
    fam = {f"family: f{i}": d for i, d in enumerate(delta)}
    assert all(abs(c.loc[t, "mean"] - v) < 3.3 * c.loc[t, "sd"] for t, v in fam.items())
    assert 0 < c.loc["R^2 (Bayesian)", "mean"] < 1


def test_profile_ppc_covers_the_data(profile_fit):
    res, design, _ = profile_fit
    ppc = res["ppc"].set_index("game")
    assert list(ppc.index) == ["all", *GAMES] and ppc.loc["all", "n"] == len(design["y"])
    assert 0.92 <= ppc.loc["all", "coverage95"] <= 0.98  # the model generated the data: ~95% inside
    assert ((ppc["p_mean"] > 0.01) & (ppc["p_mean"] < 0.99)).all()
    for g in GAMES:  # observed per-game means from the data themselves
        assert ppc.loc[g, "obs_mean"] == pytest.approx(design["df"].loc[design["df"]["game"] == g, "proximity"].mean())


# --- recovery: measurement-error model ------------------------------------------------------------------
SCIENCE_TRUTH_BETA = [0.06, 0.0, -0.04, 0.05, -0.05, 0.03]
SCIENCE_TRUTH = {"intercept (alpha)": 0.5, **{bz.GAME_TITLES[g]: b for g, b in zip(GAMES, SCIENCE_TRUTH_BETA)}, "IFEval": 0.04,
                 "MMLU-Pro": -0.03, "log(budget)": 0.01, "task: ecology": -0.05, "visibility: hidden": 0.02, "team size = 3": 0.0,
                 "theory of mind": -0.01, "tau (residual SD)": 0.05}


def simulated_science_design(seed=7, models=30, conditions=12):
    rng = np.random.default_rng(seed)
    G = len(GAMES)
    theta = rng.normal(0, 1, (models, G))
    se = rng.uniform(0.05, 0.4, (models, G))
    ybar = theta + rng.normal(0, 1, (models, G)) * se
    B = pd.DataFrame(rng.normal(0, 1, (models, 2)), columns=["IFEval", "MMLU-Pro"])
    rows = []
    for i in range(models):
        for _ in range(conditions):
            rows.append({"model": i, "log(budget)": math.log(rng.choice([0.5, 1.0, 2.5, 5.0, 10.0])),
                         "task: ecology": float(rng.random() < 0.3), "visibility: hidden": float(rng.random() < 0.3),
                         "team size = 3": float(rng.random() < 0.3), "theory of mind": float(rng.random() < 0.3)})
    df = pd.DataFrame(rows)
    C = df.drop(columns="model")
    T = SCIENCE_TRUTH
    idx = df["model"].to_numpy()
    y = (T["intercept (alpha)"] + theta[idx] @ np.array(SCIENCE_TRUTH_BETA) + C.to_numpy() @ np.array([T[c] for c in C.columns])
         + B.to_numpy()[idx] @ np.array([T["IFEval"], T["MMLU-Pro"]]) + rng.normal(0, T["tau (residual SD)"], len(df)))
    scores = pd.DataFrame({"accuracy": y, "task": np.where(C["task: ecology"] > 0, "ecology", "anomaly")})
    return {"models": [f"m{i}" for i in range(models)], "ybar": ybar, "se": se, "C": C, "B": B, "model_of_obs": idx, "scores": scores,
            "notes": []}, theta


@pytest.fixture(scope="module")
def science_fit():
    design, theta = simulated_science_design()
    return bz.fit_science(design, "accuracy", RECOVERY), design, theta


def test_measurement_error_model_recovers_known_coefficients(science_fit):
    res, design, theta = science_fit
    check_recovery(res["coefficients"], SCIENCE_TRUTH, res["fit"]["divergences"])
    # the latent dispositions: posterior means closer to the truth than the noisy observations are
    err_post = np.mean((res["theta_mean"] - theta) ** 2)
    err_obs = np.mean((design["ybar"] - theta) ** 2)
    assert err_post < err_obs
    ppc = res["ppc"].set_index("task")
    assert 0.91 <= ppc.loc["all", "coverage95"] <= 0.99


# --- synthetic profile directories in the real files' format ---------------------------------------------------
def write_profile(d: Path, model: str | None, base: float, rng: np.random.Generator, sims: int = 8, prompt: str = "standard",
                  players: str = "llm", spread: float = 0.12) -> Path:
    """A directory as 'cooplab profile' writes it (profile.json, games/GAME/simulations.parquet):
    each simulation's metric at Pareto proximity about ``base`` (plus a game offset, a per-model
    game deviation and noise), the
    proximity computed by the games' own reference."""
    req = {"simulations": sims, "group_size": None}
    games = {}
    offsets = dict(zip(GAMES, [-0.3, 0.1, 0.15, 0.0, -0.2, -0.1]))
    for g in GAMES:
        P = pf.game_params(req, g)
        ref = eq.reference(P)
        prox = np.clip(base + offsets[g] + rng.normal(0, 0.1) + rng.normal(0, spread, sims), 0, 1)  # the model's own game mix
        metric = ref.pareto + prox * (ref.nash - ref.pareto)
        sim = pd.DataFrame({"simulation": np.arange(sims), "metric": metric, "proximity": ref.proximity(metric),
                            "near_pareto": ref.proximity(metric) <= 0.2, "payoff": rng.normal(20, 2, sims)})
        (d / "games" / g).mkdir(parents=True)
        sim.to_parquet(d / "games" / g / "simulations.parquet", index=False)
        games[g] = {"title": pf.TITLES[g], "status": "completed", "run_dir": f"games/{g}", "group_sizes": [5, 5], "rounds_completed": 3,
                    "rounds": 3, "metric": {"name": "x", "label": "x", "nash": ref.nash, "pareto": ref.pareto, "mean": float(metric.mean()),
                                            "ci95": [float(metric.min()), float(metric.max())], "sd": float(metric.std(ddof=1)), "n": sims},
                    "pareto_proximity": {"mean": float(sim["proximity"].mean())}}
    label = (model or players) + ("" if prompt == "standard" else f" ({prompt})")
    p = {"kind": pf.PROFILE_KIND, "version": pf.PROFILE_VERSION, "label": label, "status": "completed", "players": players,
         "model": model, "prompt": prompt, "deliberation": False, "simulations": sims, "group_size": None, "seed": 0, "games": games}
    (d / "profile.json").write_text(json.dumps(p))
    return d


def _models() -> dict[str, tuple[str, float, int, float]]:
    """14 models of three families: name -> (family, size in billions, thinking, base proximity);
    the proximity falls by 0.25 per decade of size."""
    out = {}
    for i in range(14):
        fam = ("alpha", "beta", "gamma")[i % 3]
        size = round(10 ** (i / 13 * 1.8), 2)
        out[f"{fam}-{size:g}b"] = (fam, size, i % 2, 0.75 - 0.25 * math.log10(size) + (0.05 if fam == "beta" else 0.0))
    return out


MODELS = _models()
FIRST, SECOND = list(MODELS)[:2]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Five models of three families (proximity falling with size), a ToM profile of one, their
    models.csv, and a science sweep's scores.csv whose accuracy rises with Weakest-Link effort."""
    root = tmp_path_factory.mktemp("bayes")
    rng = np.random.default_rng(5)
    dirs = [write_profile(root / m, m, base, rng) for m, (_, _, _, base) in MODELS.items()]
    dirs.append(write_profile(root / "tom", SECOND, MODELS[SECOND][3], rng, prompt="tom"))
    rows = [f"{m},{fam},{size},{think},{40 + (37 * i) % 50},{20 + (23 * i) % 40}" for i, (m, (fam, size, think, _)) in enumerate(MODELS.items())]
    (root / "models.csv").write_text("model,family,size_b,thinking,ifeval,mmlu_pro\n" + "\n".join(rows) + "\n")
    sweep = root / "sweep"
    sweep.mkdir()
    srows = []
    for m, (_, _, _, base) in MODELS.items():
        for task in bz.SCIENCE_TASKS:
            for budget in (0.5, 2.5):
                for seed in (0, 1):
                    acc = 0.6 - 0.4 * base + rng.normal(0, 0.1)
                    srows.append({"condition": f"{m}__{task}__b{budget:g}__full__n2__standard", "model": m, "task": task, "budget": budget,
                                  "visibility": "full", "team_size": 2, "prompt": "standard", "seed": seed, "status": "completed",
                                  "completeness": 0.5 + 0.3 * (1 - base) + rng.normal(0, 0.1), "quality": 0.5 + rng.normal(0, 0.1),
                                  "accuracy": acc, "cost_usd": 0.01, "run_dir": "x"})
    pd.DataFrame(srows).to_csv(sweep / "scores.csv", index=False)
    return {"root": root, "dirs": dirs, "info": root / "models.csv", "sweep": sweep}


def test_cli_profiles_end_to_end(synthetic, tmp_path, capsys):
    out = tmp_path / "an"
    code, stdout, err = cli(["analyze", "profiles", *synthetic["dirs"], "--model-info", synthetic["info"], "--out", out, *SMALL, "--json"], capsys)
    assert code == 0, err
    res = json.loads(stdout)
    assert res["observations"] == 15 * 6 * 8 and res["models"] == sorted(MODELS) and res["families"] == ["alpha", "beta", "gamma"]
    fit = json.loads((out / "fit.json").read_text())
    assert fit["seed"] == 1 and fit["chains"] == 2 and fit["warmup"] == 200 and fit["samples"] == 200
    assert fit["versions"]["numpyro"] and fit["versions"]["jax"] and fit["fits"]["proximity"]["divergences"] == res["divergences"]
    coef = pd.read_csv(out / "coefficients.csv").set_index("term")
    for col in ("mean", "sd", "ci_low", "ci_high", "r_hat", "ess_bulk", "p_positive"):
        assert np.isfinite(coef[col]).all(), col
    # the profiles were made with proximity falling by 0.25 per decade of size (flattened a little
    # where the simulated proximity is clipped at 0 for the largest models)
    assert coef.loc["log10(size)", "ci_high"] < 0 and -0.3 < coef.loc["log10(size)", "mean"] < -0.15
    assert "theory of mind" in coef.index and "group size" not in coef.index  # ToM varies, group size does not
    assert any("group_size" in n for n in res["notes"])
    ppc = pd.read_csv(out / "ppc.csv")
    assert list(ppc["game"]) == ["all", *GAMES]
    md = (out / "statistics.md").read_text()
    assert "| log10(size) |" in md and "Posterior-predictive" in md
    assert (out / "forest.png").stat().st_size > 5_000


def test_cli_science_end_to_end(synthetic, tmp_path, capsys):
    out = tmp_path / "sci"
    profiles = [x for d in synthetic["dirs"][:-1] for x in ("--profiles", d)]
    code, stdout, err = cli(["analyze", "science", synthetic["sweep"], *profiles, "--model-info", synthetic["info"], "--out", out,
                             "--chains", "1", "--warmup", "100", "--samples", "100", "--seed", "2"], capsys)  # plumbing, not convergence
    assert code == 0, err
    assert "Measurement-error model: 112 observations, 14 models" in stdout
    coef = pd.read_csv(out / "coefficients.csv")
    assert set(coef["outcome"]) == set(bz.OUTCOMES)
    acc = coef[coef["outcome"] == "accuracy"].set_index("term")
    assert {"Weakest-Link", "IFEval", "log(budget)", "task: ecology", "tau (residual SD)"} <= set(acc.index)
    assert "visibility: hidden" not in acc.index  # every run had full visibility
    disp = pd.read_csv(out / "dispositions.csv")
    assert len(disp) == 3 * 14 * 6 and (disp["simulations"] == 8).all()
    fit = json.loads((out / "fit.json").read_text())
    assert set(fit["fits"]) == set(bz.OUTCOMES) and fit["observations"] == 112 and fit["runs"] == 224
    assert (out / "forest.png").stat().st_size > 5_000


@pytest.fixture(scope="module")
def anchors(tmp_path_factory):
    """Profiles of reference players made by the project's own 'cooplab profile'."""
    root = tmp_path_factory.mktemp("anchors")
    for kind in ("nash", "random"):
        assert main(["profile", "--players", kind, "--simulations", "2", "--out", str(root / kind), "-q", "--json"]) == 0
    return root


def test_cli_profiles_on_real_profile_files(anchors, tmp_path, capsys):
    out = tmp_path / "an"
    code, stdout, err = cli(["analyze", "profiles", anchors / "nash", anchors / "random", "--out", out, *SMALL, "--json"], capsys)
    assert code == 0, err
    res = json.loads(stdout)
    assert res["models"] == ["nash", "random"] and res["observations"] == 2 * 6 * 2
    assert any("no --model-info" in n for n in res["notes"])
    ppc = pd.DataFrame(res["ppc"]).set_index("game")
    real = pd.concat([pd.read_parquet(anchors / k / "games" / g / "simulations.parquet") for k in ("nash", "random") for g in GAMES])
    assert ppc.loc["all", "obs_mean"] == pytest.approx(real["proximity"].mean())


# --- hostile input: one line, exit 2 -------------------------------------------------------------------------
def _one_line_error(code, err, *needles):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cooplab: error: "), err
    for n in needles:
        assert n in lines[0], lines[0]


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_bad_profiles_are_refused(synthetic, tmp_path, capsys):
    d = synthetic["dirs"]
    # one model only
    code, _, err = cli(["analyze", "profiles", d[0], "--out", tmp_path / "o"], capsys)
    _one_line_error(code, err, "at least two models")
    # a profile missing a game
    p = _copy(d[1], tmp_path / "nogame")
    j = json.loads((p / "profile.json").read_text())
    del j["games"]["o-ring"]
    (p / "profile.json").write_text(json.dumps(j))
    code, _, err = cli(["analyze", "profiles", d[0], p, "--out", tmp_path / "o"], capsys)
    _one_line_error(code, err, "no o-ring game")
    # a damaged profile.json
    p = _copy(d[1], tmp_path / "damaged")
    (p / "profile.json").write_text('{"kind": "cooplab-profile", "games": {')
    code, _, err = cli(["analyze", "profiles", d[0], p, "--out", tmp_path / "o"], capsys)
    _one_line_error(code, err, "cannot be read")
    # NaN in a metric
    p = _copy(d[1], tmp_path / "nan")
    f = p / "games" / "cpr" / "simulations.parquet"
    t = pd.read_parquet(f)
    t.loc[2, "metric"] = np.nan
    t.to_parquet(f, index=False)
    code, _, err = cli(["analyze", "profiles", d[0], p, "--out", tmp_path / "o"], capsys)
    _one_line_error(code, err, "cpr", "metric of simulation 2", "not a finite number")
    # not a directory; the same directory twice
    code, _, err = cli(["analyze", "profiles", d[0], tmp_path / "nowhere", "--out", tmp_path / "o"], capsys)
    _one_line_error(code, err, "not a directory")
    code, _, err = cli(["analyze", "profiles", d[0], d[0], "--out", tmp_path / "o"], capsys)
    _one_line_error(code, err, "given twice")
    assert not (tmp_path / "o").exists()  # nothing written for refused input


@pytest.mark.parametrize("csv, needle", [
    ("model,family,size_b,thinking\nm,alpha,-3,0\n", "size_b must be a number of billions of parameters above 0"),
    ("model,family,size_b,thinking\nm,alpha,nan,0\n", "size_b must be"),
    ("model,family,thinking\nm,alpha,0\n", "lacks the column(s) size_b"),
    ("model,family,size_b,thinking\nm,alpha,1,2\n", "thinking must be 0 or 1"),
    ("model,family,size_b,thinking\nm,alpha,1,0\nm,alpha,2,0\n", "twice"),
    (f"model,family,size_b,thinking\n{FIRST},alpha,1,0\n", f"{SECOND!r} is not in --model-info"),
    (f"model,family,size_b,thinking\n{FIRST},alpha,1,0\n{SECOND},alpha,3,0\n", "needs at least two families"),
    ("model,family,size_b,thinking\n", "has no rows"),
])
def test_bad_model_info_is_refused(synthetic, tmp_path, capsys, csv, needle):
    f = tmp_path / "models.csv"
    f.write_text(csv)
    code, _, err = cli(["analyze", "profiles", *synthetic["dirs"][:2], "--model-info", f, "--out", tmp_path / "o"], capsys)
    _one_line_error(code, err, needle)


@pytest.mark.parametrize("opt, needle", [(["--chains", "0"], "--chains must be a whole number from 1 to 16"),
                                         (["--samples", "-1"], "--samples must be"), (["--warmup", "1000000000"], "--warmup must be"),
                                         (["--chains", "99999"], "--chains must be"), (["--seed", "-5"], "--seed must be"),
                                         (["--samples", "2"], "at least 4")])
def test_bad_sampler_settings_are_refused(synthetic, tmp_path, capsys, opt, needle):
    code, _, err = cli(["analyze", "profiles", *synthetic["dirs"][:2], "--out", tmp_path / "o", *opt], capsys)
    _one_line_error(code, err, needle)


@pytest.mark.parametrize("opt", ["--chains", "--warmup", "--samples", "--seed"])
def test_every_sampler_option_refuses_hostile_values(synthetic, tmp_path, capsys, opt):
    from tests.cli.test_bad_input import CLI_BAD

    for bad in CLI_BAD:
        for cmd in (["profiles", *synthetic["dirs"][:2]], ["science", synthetic["sweep"], "--profiles", synthetic["dirs"][0]]):
            code, _, err = cli(["analyze", *cmd, opt, bad, "--out", tmp_path / "o"], capsys)
            _one_line_error(code, err, opt)
            assert not (tmp_path / "o").exists(), (opt, bad)


def test_bad_science_input_is_refused(synthetic, tmp_path, capsys):
    last = list(MODELS)[-1]
    profiles = [x for d in synthetic["dirs"][:-2] for x in ("--profiles", d)]  # the last model has science runs but no profile
    code, _, err = cli(["analyze", "science", synthetic["sweep"], *profiles, "--out", tmp_path / "o"], capsys)
    _one_line_error(code, err, f"{last!r} of scores.csv has no profile")
    bad = tmp_path / "sweep"
    bad.mkdir()
    s = pd.read_csv(synthetic["sweep"] / "scores.csv")
    s.loc[3, "accuracy"] = np.nan
    s.to_csv(bad / "scores.csv", index=False)
    all_profiles = [x for d in synthetic["dirs"][:-1] for x in ("--profiles", d)]
    code, _, err = cli(["analyze", "science", bad, *all_profiles, "--out", tmp_path / "o"], capsys)
    _one_line_error(code, err, "accuracy of run 4", "from 0 to 1")
    s = pd.read_csv(synthetic["sweep"] / "scores.csv")
    s[s["model"].isin([FIRST, SECOND])].to_csv(bad / "scores.csv", index=False)
    code, _, err = cli(["analyze", "science", bad, *all_profiles, "--out", tmp_path / "o"], capsys)
    _one_line_error(code, err, "at least three models")
    code, _, err = cli(["analyze", "science", tmp_path / "empty", *all_profiles, "--out", tmp_path / "o"], capsys)
    _one_line_error(code, err, "no scores.csv")


def test_missing_extra_is_one_line(synthetic, tmp_path, capsys, monkeypatch):
    import sys

    from cooplab.extras import MissingExtra

    monkeypatch.setitem(sys.modules, "numpyro", None)
    with pytest.raises(MissingExtra, match=r"pip install cooplab\[bayes\]"):
        bz.numpyro_modules(1)
    code, _, err = cli(["analyze", "profiles", *synthetic["dirs"][:2], "--out", tmp_path / "o"], capsys)
    _one_line_error(code, err, "the Bayesian analyses needs 'pip install cooplab[bayes]' (missing: numpyro)")
    assert not (tmp_path / "o").exists()
