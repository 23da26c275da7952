"""The paper's two Bayesian analyses in NumPyro (docs/statistics.md).

1. **Pareto-proximity regression** (paper §3.2, Tables 1 and 6): one observation per simulation
   and game of every profile, ``proximity ~ Normal(mu, sigma)`` with
   ``mu = intercept + b . x + game fixed effect + family random intercept``; predictors
   log10(size in billions), thinking variant, CoT and ToM prompting, group size; games against
   Collective Risk; the family intercepts ``delta_f ~ Normal(0, sigma_f)`` (sampled centred or
   non-centred, :func:`family_centring`).
2. **Measurement-error model** (paper §4.1.2, Tables 2 and 7): per model ``i`` and game ``g`` the
   z-scored mean metric ``ybar_ig ~ Normal(theta_ig, SE_ig)``, ``theta_ig ~ Normal(mu_g, sigma_g)``,
   and each science outcome (completeness, quality, accuracy; one fit per outcome) of a
   model-condition pair ``y_ik ~ Normal(alpha + beta . theta_i + gamma . x_k + delta . b_i, tau)``.

Both are fitted with NUTS on the CPU from a recorded seed; the tables carry the posterior mean,
s.d., 95% interval, P(>0), split R-hat and bulk ESS (NumPyro's estimators), the divergences, and a
posterior-predictive check. NumPyro and JAX are the optional extra ``bayes``.

The data come from ``cooplab profile`` directories (profile.json and each game's ``simulations.*`` in
the run its manifest names: ``cells/game-GAME__sSEED/``, ``games/GAME/`` before the grid layout),
a science sweep directory (``scores.csv``) and an optional ``models.csv``
(:func:`read_model_info`).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast, overload

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    import jax

from cooplab.evals.typed import as_frame, as_series, cell, column, first_where, numeric, scalar, sub
from cooplab.limits import ConfigError

#: the six games in the order of the paper's tables, and the prompt variants; the same as
#: cooplab.tasks.games.params (a test holds them equal: the evals read run directories and never
#: import a task)
GAMES = ("weakest-link", "cpr", "cpr-sanction", "collective-risk", "o-ring", "public-goods")
PROMPTS = ("standard", "alternate", "cot", "tom")
PROFILE_KIND = "cooplab-profile"  #: profile.json's "kind" (written by cooplab.tasks.games.profiles)
REFERENCE_GAME = "collective-risk"  #: Table 6: game fixed effects against Collective Risk
GAME_TITLES = {
    "weakest-link": "Weakest-Link",
    "cpr": "CPR",
    "cpr-sanction": "CPR+Sanction",
    "collective-risk": "Coll. Risk",
    "o-ring": "O-Ring",
    "public-goods": "Public Goods",
}
OUTCOMES = ("completeness", "quality", "accuracy")
SCIENCE_TASKS = ("anomaly", "biomarker", "ecology", "geospatial")  #: reference: anomaly (Table 7)
VISIBILITIES = ("full", "team", "hidden")  #: reference: full
MODEL_INFO_REQUIRED = ("model", "family", "size_b", "thinking")
MODEL_INFO_OPTIONAL = ("ifeval", "mmlu_pro")
#: smallest standard error of a z-scored game mean: the smallest the paper reports (§4.1.2: 0.001 to
#: 0.35); only an SE below it is raised, e.g. 0 when every simulation of a game agrees
SE_FLOOR = 0.001
LIMITS = {"chains": (1, 16), "warmup": (1, 50_000), "samples": (1, 50_000), "seed": (0, 2**32 - 1)}
#: the sampler settings of the paper (Table 1: 4 chains x 2,000 draws, warm-up unstated, taken as
#: Table 2's 2,000; Table 2: 2 chains, 2,000 warm-up, 2,000 draws) and a quick preset for tests and
#: a first look
PRESETS = {
    "profiles": {"chains": 4, "warmup": 2000, "samples": 2000},
    "science": {"chains": 2, "warmup": 2000, "samples": 2000},
    "quick": {"chains": 2, "warmup": 200, "samples": 200},
}
PROFILE_TARGET_ACCEPT = 0.99  #: NUTS target acceptance of the proximity regression (the science model: 0.9)
MAX_FALLBACK = 0.2  #: default --max-fallback: a game of a profile with a larger share of fallback decisions is left out


class BayesError(ConfigError):
    """Input the Bayesian analyses cannot use (one line: what is wrong and how to fix it)."""


# --- settings ----------------------------------------------------------------------------------------
def sampler_settings(
    analysis: str, *, quick: bool = False, chains: Any = None, warmup: Any = None, samples: Any = None, seed: Any = 0
) -> dict[str, Any]:
    """The sampler settings of ``analysis`` ("profiles" or "science"): the paper's (:data:`PRESETS`)
    or, with ``quick``, the quick preset; any of chains, warmup, samples given replaces the
    preset's. Checked (:func:`check_settings`); ``preset`` names where they came from."""
    base = PRESETS["quick" if quick else analysis]
    given = {"chains": chains, "warmup": warmup, "samples": samples}
    chosen: dict[str, Any] = {k: base[k] if v is None else v for k, v in given.items()}
    out = check_settings(**chosen, seed=seed)
    name = "quick" if quick else "paper"
    if any(v is not None and v != base[k] for k, v in given.items()):
        name += " (changed: " + ", ".join(f"{k} {v}" for k, v in given.items() if v is not None and v != base[k]) + ")"
    return {**out, "preset": name}


def check_settings(chains: Any, warmup: Any, samples: Any, seed: Any, preset: str | None = None) -> dict[str, Any]:
    """The sampler settings, checked: whole numbers within :data:`LIMITS`."""
    out = {}
    for name, v in (("chains", chains), ("warmup", warmup), ("samples", samples), ("seed", seed)):
        lo, hi = LIMITS[name]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= int(v) <= hi:
            raise BayesError(f"--{name} must be a whole number from {lo} to {hi}, got {v!r}")
        out[name] = int(v)
    if out["samples"] < 4:
        raise BayesError(f"--samples must be at least 4 for R-hat and ESS, got {out['samples']}")
    return out if preset is None else {**out, "preset": str(preset)}


def check_max_fallback(v: Any) -> float:
    """``--max-fallback``: a share from 0 to 1 (ConfigError otherwise)."""
    from cooplab.limits import check

    return float(check("--max-fallback", v, "max-fallback"))


def fallback_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The fallback record of a game (its summary.json or its profile.json entry): ``fallback``
    (decisions, fallbacks, share). One written before it was recorded has only the decision counts:
    the share is computed from them (they then include deliberation messages; marked
    ``approximate``); reference players have none: share 0. The profile writer and the analyses
    both read it here."""
    fb = entry.get("fallback")
    if isinstance(fb, Mapping) and "share" in fb:
        return dict(fb)
    d = sub(entry, "decisions")
    n, k = d.get("count") or 0, d.get("fallback_used") or 0
    ok = all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in (n, k))
    share = k / n if ok and n > 0 else 0.0
    return {
        "decisions": n,
        "fallbacks": k,
        "share": round(share, 6) if isinstance(share, float) else share,
        "approximate": True,
    }


# --- model metadata -------------------------------------------------------------------------------------
#: the paper's model inventory (Tables 8 and 9) in models.csv's format: ``--model-info paper``
PAPER_MODEL_INFO = Path(__file__).resolve().parent / "data" / "paper_models.csv"


@overload
def read_model_info(path: None) -> None: ...
@overload
def read_model_info(path: str | Path) -> pd.DataFrame: ...
def read_model_info(path: str | Path | None) -> pd.DataFrame | None:
    """models.csv: one row per model. Required columns ``model`` (the name in profile.json's
    ``model``, or the reference players' kind, and in scores.csv), ``family``, ``size_b``
    (parameters in billions, > 0), ``thinking`` (0 or 1); optional ``ifeval`` and ``mmlu_pro``
    (benchmark scores, 0-100) for the science model's capability controls. ``paper`` (when no
    file of that name exists) is the cooperative-profiles paper's 35 models, shipped with cooplab
    (:data:`PAPER_MODEL_INFO`; Tables 8 and 9, with each score's source)."""
    if path is None:
        return None
    if str(path) == "paper" and not Path("paper").exists():
        path = PAPER_MODEL_INFO
    path = Path(path)
    try:
        df = pd.read_csv(path, dtype={"model": str, "family": str})
    except FileNotFoundError:
        raise BayesError(f"--model-info {path}: no such file") from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise BayesError(f"--model-info {path} cannot be read as CSV: {_line(exc)}") from None
    df.columns = [str(c).strip() for c in df.columns]
    gone = [c for c in MODEL_INFO_REQUIRED if c not in df.columns]
    if gone:
        raise BayesError(
            f"--model-info {path} lacks the column(s) {', '.join(gone)}; it needs {', '.join(MODEL_INFO_REQUIRED)} "
            f"(optional: {', '.join(MODEL_INFO_OPTIONAL)})"
        )
    if df.empty:
        raise BayesError(f"--model-info {path} has no rows")
    for i, (_, row) in enumerate(df.iterrows()):  # read_csv's index: i is the row's label
        model, family = cell(row, "model"), cell(row, "family")
        where = f"--model-info {path} row {i + 2}"
        if not isinstance(model, str) or not model.strip():
            raise BayesError(f"{where}: model must be a name, got {model!r}")
        if not isinstance(family, str) or not family.strip():
            raise BayesError(f"{where} ({model}): family must be a name, got {family!r}")
    models = column(df, "model")
    if bool(models.duplicated().any()):
        raise BayesError(f"--model-info {path} lists model {first_where(models, models.duplicated())!r} twice")
    checks = {
        "size_b": (lambda v: v > 0, "a number of billions of parameters above 0"),
        "thinking": (lambda v: v in (0.0, 1.0), "0 or 1"),
        "ifeval": (lambda v: 0 <= v <= 100, "a score from 0 to 100"),
        "mmlu_pro": (lambda v: 0 <= v <= 100, "a score from 0 to 100"),
    }
    for col, (ok, what) in checks.items():
        if col not in df.columns:
            continue
        vals = numeric(column(df, col))
        for i, (raw, v) in enumerate(zip(df[col], vals, strict=False)):
            if not (np.isfinite(v) and ok(float(v))):
                raise BayesError(
                    f"--model-info {path} row {i + 2} ({df['model'].iloc[i]}): {col} must be {what}, got {raw!r}"
                )
        df[col] = vals.astype(float)
    df["model"] = df["model"].str.strip()
    df["family"] = df["family"].str.strip()
    return df.set_index("model")


def bare_model_name(model: Any) -> str:
    """A model's name without its provider or organisation, in lower case: ``openai:Qwen/Qwen3-8B``
    is ``qwen3-8b`` (how the paper's tables name models)."""
    return str(model).split(":", 1)[-1].rsplit("/", 1)[-1].strip().lower()


@overload
def info_of(info: pd.DataFrame, model: str, path_hint: str = ...) -> dict[str, Any]: ...
@overload
def info_of(info: None, model: str, path_hint: str = ...) -> None: ...
@overload
def info_of(info: pd.DataFrame | None, model: str, path_hint: str = ...) -> dict[str, Any] | None: ...
def info_of(info: pd.DataFrame | None, model: str, path_hint: str = "models.csv") -> dict[str, Any] | None:
    """A model's row of models.csv: by its exact name, else (when exactly one row matches) by the
    name without its provider (``openai:qwen3-8b`` is ``qwen3-8b``) or its organisation
    (``Qwen/qwen3-8b``), ignoring case."""
    if info is None:
        return None
    if model in info.index:
        return info.loc[model].to_dict()
    bare = bare_model_name(model)
    rows = [m for m in info.index if str(m).strip().lower() == bare]
    if len(rows) != 1:
        raise BayesError(
            f"model {model!r} is not in --model-info ({path_hint}); add a row with model,family,size_b,thinking for it"
        )
    return info.loc[rows[0]].to_dict()


# --- profiles --------------------------------------------------------------------------------------------
def _line(exc: BaseException) -> str:
    s = str(exc).strip().splitlines()
    return s[0] if s else type(exc).__name__


def _fallback_share(e: Mapping[str, Any], where: str) -> float:
    """A game's share of fallback decisions from its profile.json entry (:func:`fallback_of`), checked."""
    v = fallback_of(e)["share"]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and 0 <= v <= 1):
        raise BayesError(f"{where}.fallback.share must be a share from 0 to 1, got {v!r}")
    return float(v)


def load_profile_dir(d: Path) -> dict[str, Any]:
    """One profile directory: its model name, prompt, and per game the simulation table (metric,
    proximity), the group size and the share of fallback decisions. Every game must be there,
    completed, with at least two finite simulations. Proximities above 1 (written before proximity
    was capped at 1) are capped here, with a note."""
    from cooplab.graphs import rundir, runfiles

    d = Path(d)
    if not d.is_dir():
        raise BayesError(f"{d}: not a directory; give directories written by 'cooplab profile'")
    f = d / "profile.json"
    try:
        p = rundir.read_json(f)
    except FileNotFoundError:
        raise BayesError(f"{d}: no profile.json; give a directory written by 'cooplab profile'") from None
    except (OSError, ValueError) as exc:
        raise BayesError(f"{f} cannot be read: {_line(exc)}") from None
    if (
        not isinstance(p, dict)
        or p.get("kind") != PROFILE_KIND
        or not isinstance(p.get("games"), dict)
        or not all(isinstance(e, dict) for e in p["games"].values())
    ):
        raise BayesError(f"{f} is not a cooplab profile (kind {PROFILE_KIND!r} with games)")
    model = p.get("model") if p.get("model") is not None else p.get("players")
    if not isinstance(model, str) or not model:
        raise BayesError(f"{d}/profile.json names no model (model or players)")
    prompt = p.get("prompt", "standard")
    if prompt not in PROMPTS:
        raise BayesError(f"{d}/profile.json: prompt must be one of {', '.join(PROMPTS)}, got {prompt!r}")
    games: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    try:
        dirs = runfiles.dirs_by(d, "game")  # cells/game-GAME__sN (games/GAME before)
    except rundir.RunDirError as exc:
        raise BayesError(_line(exc)) from None
    for g in GAMES:
        e = p["games"].get(g)
        if e is None:
            raise BayesError(
                f"{d}: the profile has no {g} game; the analyses need all six games (run 'cooplab profile' without "
                "--games)"
            )
        if e.get("status") != "completed":
            raise BayesError(
                f"{d}: game {g} has status {e.get('status')!r}, not completed; finish the profile (rerun the same "
                f"'cooplab profile' command)"
            )
        gd = dirs.get(g, d / "games" / g)
        try:
            sims = rundir.read_table(gd, "simulations")
        except (rundir.RunDirError, OSError, ValueError) as exc:
            raise BayesError(f"{gd}: simulations table cannot be read ({_line(exc)})") from None
        for col in ("metric", "proximity"):
            if col not in sims.columns:
                raise BayesError(f"{gd}/simulations has no {col} column; is it a cooplab game run?")
            v = numeric(column(sims, col)).to_numpy(dtype=float)
            bad = ~np.isfinite(v)
            if bool(bad.any()):
                raise BayesError(
                    f"{gd}/simulations: {col} of simulation {int(np.flatnonzero(bad)[0])} is "
                    f"{sims[col].iloc[int(np.flatnonzero(bad)[0])]!r}, not a finite number; rerun that game"
                )
            if col == "proximity" and (v < 0).any():
                raise BayesError(f"{gd}/simulations: a proximity is negative ({v.min():g}); proximity is a distance")
            if col == "proximity" and (v > 1).any():
                notes.append(
                    f"{gd}: {int((v > 1).sum())} proximity value(s) above 1 (an earlier cooplab, uncapped) capped at 1"
                )
                v = np.minimum(v, 1.0)
            sims[col] = v
        if len(sims) < 2:
            raise BayesError(f"{gd}: {len(sims)} simulation(s); the analyses need at least 2 per game (--simulations)")
        gs = e.get("group_sizes")
        if not (
            isinstance(gs, list)
            and gs
            and all(isinstance(x, int) and not isinstance(x, bool) and 0 < x < 10_000 for x in gs)
        ):
            raise BayesError(
                f"{d}/profile.json: games.{g}.group_sizes must be a list of positive whole numbers, got {gs!r}"
            )
        m = sub(e, "metric")
        ref = {
            k: (
                float(m[k])
                if isinstance(m.get(k), (int, float)) and not isinstance(m.get(k), bool) and math.isfinite(m[k])
                else None
            )
            for k in ("nash", "pareto")
        }
        games[g] = {
            "sims": sims[["metric", "proximity"]].reset_index(drop=True),
            "group_size": float(np.mean(gs)),
            "fallback_share": _fallback_share(e, f"{d}/profile.json: games.{g}"),
            **ref,
            "pareto_basis": str(m.get("pareto_basis") or "derived"),
        }
    return {
        "dir": str(d),
        "model": model,
        "label": p.get("label", model),
        "prompt": prompt,
        "deliberation": bool(p.get("deliberation")),
        "games": games,
        "notes": notes,
    }


def load_profiles(dirs: Sequence[Path]) -> list[dict[str, Any]]:
    if not dirs:
        raise BayesError("give at least one profile directory")
    seen: set[str] = set()
    out = []
    for d in dirs:
        key = str(Path(d).resolve())
        if key in seen:
            raise BayesError(f"{d} is given twice")
        seen.add(key)
        out.append(load_profile_dir(Path(d)))
    return out


# --- design matrices ---------------------------------------------------------------------------------------
def _drop_constant(X: pd.DataFrame, notes: list[str], why: str = "") -> pd.DataFrame:
    keep = [c for c in X.columns if np.ptp(X[c].to_numpy(dtype=float)) > 0]
    for c in X.columns:
        if c not in keep:
            notes.append(f"{c} is the same in every observation{why}: dropped (not identifiable)")
    return as_frame(X[keep])


#: the profiles each Pareto-proximity regression uses: the main one (paper Tables 1 and 6: every
#: condition in the standard wording) and the prompt-invariance one (Appendix E, Table 5: the standard
#: and the alternate wording only, no CoT, ToM or deliberation)
REGRESSIONS = {
    "main": lambda p: p["prompt"] != "alternate",
    "invariance": lambda p: p["prompt"] in ("standard", "alternate") and not p["deliberation"],
}


def _kept_games(p: Mapping[str, Any], max_fallback: float, notes: list[str]) -> list[str]:
    """The games of profile ``p`` whose share of fallback decisions is at most ``max_fallback``
    (a note names each game left out)."""
    kept = []
    for g in GAMES:
        share = p["games"][g]["fallback_share"]
        if share > max_fallback:
            notes.append(
                f"{p['dir']}: {g} left out: {share:.0%} of its decisions fell back (above --max-fallback "
                f"{max_fallback:g})"
            )
        else:
            kept.append(g)
    return kept


def profile_design(
    profiles: Sequence[Mapping[str, Any]],
    info: pd.DataFrame | None,
    max_fallback: float = MAX_FALLBACK,
    kind: str = "main",
) -> dict[str, Any]:
    """The data of a Pareto-proximity regression: one row per simulation and game of every profile
    it uses (:data:`REGRESSIONS`), games above ``max_fallback`` left out. ``kind`` "invariance" adds
    the indicator ``standard_prompt`` (1 standard, 0 alternate wording) and leaves out CoT and ToM."""
    notes: list[str] = [n for p in profiles for n in p.get("notes", [])]
    used = [p for p in profiles if REGRESSIONS[kind](p)]
    if kind == "main" and len(used) < len(profiles):
        notes.append(
            f"{len(profiles) - len(used)} alternate-prompt profile(s) left out of this regression (the paper's Table 6 "
            "uses "
            f"the standard wording); they enter the prompt-invariance regression (Table 5)"
        )
    models = sorted({p["model"] for p in used})
    what = "the profile regression" if kind == "main" else "the prompt-invariance regression"
    if len(models) < 2:
        raise BayesError(
            f"{what} needs profiles of at least two models (got {', '.join(map(repr, models)) or 'none'}): the family "
            f"random intercept and the model-level predictors cannot be told apart with one; add another model's "
            f"profile (reference players: 'cooplab profile --players random|nash')"
        )
    rows = []
    for p in used:
        mi = info_of(info, p["model"])
        fam = mi["family"] if mi is not None else p["model"]
        for g in _kept_games(p, max_fallback, notes):
            e = p["games"][g]
            for prox in e["sims"]["proximity"].to_numpy():
                r = {
                    "proximity": float(prox),
                    "model": p["model"],
                    "family": fam,
                    "game": g,
                    "profile": p["dir"],
                    "prompt": p["prompt"],
                    "group_size": e["group_size"],
                }
                if kind == "main":
                    r.update(cot=float(p["prompt"] == "cot"), tom=float(p["prompt"] == "tom"))
                else:
                    r["standard_prompt"] = float(p["prompt"] == "standard")
                if mi is not None:
                    r["log10_size"] = math.log10(mi["size_b"])
                    r["thinking"] = float(mi["thinking"])
                rows.append(r)
    if not rows:
        raise BayesError(
            f"{what} has no game left: every game of every profile is above --max-fallback {max_fallback:g}"
        )
    df = pd.DataFrame(rows)
    if info is None:
        notes.append("no --model-info: each model is its own family, and log10 size and thinking are left out")
    fams = sorted(df["family"].unique())
    if len(fams) < 2:
        raise BayesError(
            f"every model is of family {fams[0]!r}: the family random intercept needs at least two families"
        )
    preds = [c for c in ("log10_size", "thinking", "cot", "tom", "standard_prompt", "group_size") if c in df.columns]
    X = _drop_constant(as_frame(df[preds]).astype(float), notes).copy()
    if kind == "invariance" and "standard_prompt" not in X.columns:
        raise BayesError("the prompt-invariance regression needs profiles in both wordings, standard and alternate")
    present = [g for g in GAMES if bool((df["game"] == g).any())]
    ref = REFERENCE_GAME if REFERENCE_GAME in present else present[0]
    if ref != REFERENCE_GAME:
        notes.append(f"no {REFERENCE_GAME} observations left: game effects are against {ref}")
    for g in present:
        if g != ref:
            X[f"game: {g}"] = (df["game"] == g).astype(float)
    if kind == "main" and any(p["deliberation"] for p in used):
        notes.append(
            "deliberation is not a predictor of the regression; deliberating profiles are pooled with the others"
        )
    fam_idx = column(df, "family").map({f: i for i, f in enumerate(fams)}).to_numpy()
    return {
        "df": df,
        "X": X,
        "y": df["proximity"].to_numpy(dtype=float),
        "family": fam_idx,
        "families": fams,
        "models": models,
        "notes": notes,
        "reference_game": ref,
        "kind": kind,
    }


# --- NumPyro -------------------------------------------------------------------------------------------------
def numpyro_modules(chains: int = 1):
    """numpyro and jax (the extra ``bayes``), on the CPU with up to ``chains`` host devices when
    JAX is not initialised yet (chains then run in parallel; otherwise one after another)."""
    from cooplab.extras import require

    require("bayes", "the Bayesian analyses")
    import numpyro

    if "jax" not in sys.modules or not _jax_started():
        numpyro.set_platform("cpu")
        numpyro.set_host_device_count(max(1, min(chains, os.cpu_count() or 1)))
    import jax

    return numpyro, jax


def _jax_started() -> bool:
    try:
        from jax._src import xla_bridge

        return bool(getattr(xla_bridge, "_backends", None))
    except Exception:  # noqa: BLE001 - a JAX without this private detail: assume started
        return True


def versions() -> dict[str, str]:
    import jax
    import matplotlib
    import numpyro

    return {
        "numpyro": numpyro.__version__,
        "jax": jax.__version__,
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "matplotlib": matplotlib.__version__,
        "python": sys.version.split()[0],
    }


def _array(x: Any) -> jax.Array:
    """A sample site's value: numpyro types it ArrayLike (a scalar too); a site with a shape is an array."""
    return x


def profile_model(X, family, n_families, y=None, centred=True):
    """The Pareto-proximity regression (predictors centred; the reported intercept is at zero).
    ``centred``: sample the family intercepts themselves (right when the data pin each one) or as
    ``sigma_f z_f`` (right when they are weakly informed); the posterior is the same either way."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    xmean = jnp.mean(X, axis=0)
    a_c = numpyro.sample("alpha_c", dist.Normal(0.5, 1.0))
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    numpyro.deterministic("intercept", a_c - jnp.dot(xmean, beta))
    sigma_f = numpyro.sample("sigma_f", dist.HalfNormal(0.5))
    if centred:
        delta = _array(numpyro.sample("delta_f", dist.Normal(0.0, sigma_f).expand([n_families]).to_event(1)))
    else:
        z_f = numpyro.sample("z_f", dist.Normal(0.0, 1.0).expand([n_families]).to_event(1))
        delta = _array(numpyro.deterministic("delta_f", sigma_f * z_f))
    sigma = numpyro.sample("sigma", dist.HalfNormal(0.5))
    mu = a_c + (X - xmean) @ beta + delta[family]  # not stored: recomputed for the draws that need it
    numpyro.sample("y", dist.Normal(mu, sigma), obs=y)


def science_model(ybar, se, model_of_obs, C, B, y=None, observed=None):
    """The measurement-error model of one outcome: latent z-scored dispositions ``theta`` (models x
    games, sampled centred) measured by ``ybar`` with standard errors ``se`` where ``observed``
    (default everywhere; a game left out of a model's profile has no measurement), and the outcome
    of each model-condition pair from ``theta`` of its model, condition controls ``C`` and
    capability controls ``B`` (models x q, z-scored; q may be 0)."""
    import numpyro
    import numpyro.distributions as dist

    M, G = ybar.shape
    mu_g = numpyro.sample("mu_g", dist.Normal(0.0, 2.0).expand([G]).to_event(1))
    sigma_g = numpyro.sample("sigma_g", dist.HalfNormal(2.0).expand([G]).to_event(1))
    # centred (the paper writes theta = mu_g + sigma_g z, the same model): the game means are z-scored
    # across models, so sigma_g stays near 1 (no funnel), while precisely measured means (SE down to
    # the floor) pin theta and would make z_ig a needle the sampler crosses in tiny steps
    theta = _array(numpyro.sample("theta", dist.Normal(mu_g, sigma_g).expand([M, G]).to_event(2)))
    measured = dist.Normal(theta, se)
    numpyro.sample("ybar", (measured if observed is None else measured.mask(observed)).to_event(2), obs=ybar)
    alpha = numpyro.sample("alpha", dist.Normal(0.5, 0.5))
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([G]).to_event(1))
    gamma = numpyro.sample("gamma", dist.Normal(0.0, 0.5).expand([C.shape[1]]).to_event(1))
    mu = alpha + theta[model_of_obs] @ beta + C @ gamma
    if B.shape[1]:
        delta = numpyro.sample("delta", dist.Normal(0.0, 0.5).expand([B.shape[1]]).to_event(1))
        mu = mu + B[model_of_obs] @ delta
    tau = numpyro.sample("tau", dist.HalfNormal(0.5))
    numpyro.sample("y", dist.Normal(mu, tau), obs=y)


def run_nuts(
    model: Callable,
    kwargs: Mapping[str, Any],
    settings: Mapping[str, int],
    progress: bool,
    target_accept: float = 0.9,
    dense_mass: bool = False,
) -> dict[str, Any]:
    """NUTS on ``model(**kwargs)``: the draws grouped by chain, the divergences, the wall time.
    ``dense_mass``: adapt a full mass matrix (for posteriors with strong linear correlations)."""
    numpyro, jax = numpyro_modules(settings["chains"])
    from numpyro.infer import MCMC, NUTS

    chains = settings["chains"]
    method = "parallel" if chains > 1 and jax.local_device_count() >= chains else "sequential"
    mcmc = MCMC(
        NUTS(model, target_accept_prob=target_accept, dense_mass=dense_mass),
        num_warmup=settings["warmup"],
        num_samples=settings["samples"],
        num_chains=chains,
        chain_method=method,
        progress_bar=progress,
    )
    t0 = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(settings["seed"]), extra_fields=("diverging",), **kwargs)
    draws = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    div = int(np.asarray(mcmc.get_extra_fields()["diverging"]).sum())
    return {"draws": draws, "divergences": div, "seconds": round(time.perf_counter() - t0, 3), "chain_method": method}


# --- diagnostics and summaries ---------------------------------------------------------------------------------
def _ess_bulk(x: np.ndarray) -> float:
    """Bulk ESS (Vehtari et al. 2021): NumPyro's ESS estimator on the split, rank-normalised chains."""
    from numpyro.diagnostics import effective_sample_size
    from scipy.stats import norm, rankdata

    C, N = x.shape
    h = N // 2
    if h < 2:
        return float("nan")
    split = np.concatenate([x[:, :h], x[:, N - h :]], axis=0)
    if np.ptp(split) == 0:
        return float("nan")
    r = rankdata(split, method="average").reshape(split.shape)
    z = norm.ppf((r - 0.375) / (split.size + 0.25))
    return float(effective_sample_size(z))


def _rhat(x: np.ndarray) -> float:
    from numpyro.diagnostics import split_gelman_rubin

    if x.shape[1] < 4 or np.ptp(x) == 0:
        return float("nan")
    return float(split_gelman_rubin(x))


def summarize(name: str, x: np.ndarray, group: str) -> dict[str, Any]:
    """One coefficient from its draws (chains x draws)."""
    flat = x.reshape(-1)
    lo, hi = np.quantile(flat, [0.025, 0.975])
    return {
        "group": group,
        "term": name,
        "mean": float(flat.mean()),
        "sd": float(flat.std(ddof=1)),
        "ci_low": float(lo),
        "ci_high": float(hi),
        "p_positive": float((flat > 0).mean()),
        "r_hat": _rhat(x),
        "ess_bulk": _ess_bulk(x),
        "excludes_zero": bool(lo > 0 or hi < 0),
    }


PPC_DRAWS = 400  #: posterior draws (evenly spaced) that replicate the data


def _flat(draws: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Draws with chains merged: (chains * draws, ...)."""
    return {k: v.reshape(-1, *v.shape[2:]) for k, v in draws.items()}


def _ppc_draws(seed: int, mean_of: Callable[[np.ndarray], np.ndarray], sd: np.ndarray) -> np.ndarray:
    """Replicated data: for up to :data:`PPC_DRAWS` posterior draws (evenly spaced; ``mean_of(idx)``
    gives their linear predictors), y_rep ~ Normal(mu, sd), from a generator seeded with ``seed``."""
    idx = np.unique(np.linspace(0, sd.size - 1, min(PPC_DRAWS, sd.size)).astype(int))
    mu = mean_of(idx)
    rng = np.random.default_rng(seed)
    return mu + sd[idx, None] * rng.standard_normal(mu.shape)


def ppc_table(
    y: np.ndarray, rep: np.ndarray, groups: np.ndarray, names: Sequence[str], label: str
) -> list[dict[str, Any]]:
    """Per group: observed mean and s.d. against the replicated ones (their mean and 95% range),
    the posterior-predictive p-values P(rep >= obs), the share of observations inside their own 95%
    predictive interval, and the share of replicated values below 0 against the observed share."""
    lo, hi = np.quantile(rep, [0.025, 0.975], axis=0)
    inside = (y >= lo) & (y <= hi)
    out = []
    for gi, name in [(None, "all")] + list(enumerate(names)):
        m = np.ones_like(y, dtype=bool) if gi is None else groups == gi
        if not m.any():
            continue
        yo, yr = y[m], rep[:, m]
        rm, rs = yr.mean(axis=1), yr.std(axis=1, ddof=1) if m.sum() > 1 else np.zeros(yr.shape[0])
        so = float(yo.std(ddof=1)) if m.sum() > 1 else 0.0
        out.append(
            {
                label: name,
                "n": int(m.sum()),
                "obs_mean": float(yo.mean()),
                "rep_mean": float(rm.mean()),
                "rep_mean_lo": float(np.quantile(rm, 0.025)),
                "rep_mean_hi": float(np.quantile(rm, 0.975)),
                "p_mean": float((rm >= yo.mean()).mean()),
                "obs_sd": so,
                "rep_sd": float(rs.mean()),
                "p_sd": float((rs >= so).mean()),
                "coverage95": float(inside[m].mean()),
                "obs_below0": float((yo < 0).mean()),
                "rep_below0": float((yr < 0).mean()),
            }
        )
    return out


# --- output ---------------------------------------------------------------------------------------------------------
_SIGNED = {
    "mean",
    "ci_low",
    "ci_high",
    "obs_mean",
    "rep_mean",
    "rep_mean_lo",
    "rep_mean_hi",
    "metric_mean",
    "z_observed",
    "theta_mean",
}


def _fmt(v: Any, col: str = "") -> str:
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else ""
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if not np.isfinite(v):
            return "–"
        if col == "ess_bulk":
            return f"{v:.0f}"
        return f"{v:+.3f}" if col in _SIGNED else f"{v:.3f}"
    return str(v)


def markdown_table(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(_fmt(r[c], c) for c in cols) + " |")
    return "\n".join(lines)


def forest_plot(tables: Mapping[str, pd.DataFrame], path: Path, title: str) -> Path:
    """Posterior means with 95% intervals, one panel per table (outcome)."""
    from cooplab.evals.canvas import subplots

    n = len(tables)
    rows = max(len(t) for t in tables.values())
    fig, axes = subplots(1, n, figsize=(4.6 * n + 1.5, 0.32 * rows + 1.6), squeeze=False, sharey=True)
    for ax, (name, t) in zip(axes[0], tables.items(), strict=False):
        yy = np.arange(len(t))[::-1]
        color = np.where(t["excludes_zero"].to_numpy(), "tab:blue", "0.5")
        ax.errorbar(
            t["mean"],
            yy,
            xerr=[t["mean"] - t["ci_low"], t["ci_high"] - t["mean"]],
            fmt="none",
            ecolor=list(color),
            lw=1.4,
        )
        ax.scatter(t["mean"], yy, c=list(color), s=18, zorder=3)
        ax.axvline(0, color="k", lw=0.8, ls=":")
        ax.set_yticks(yy)
        ax.set_yticklabels(list(t["term"]), fontsize=8)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("posterior mean, 95% interval", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def _write(out: Path, stem: str, df: pd.DataFrame) -> str:
    df.to_csv(out / f"{stem}.csv", index=False)
    return markdown_table(df)


def _fit_record(settings: Mapping[str, int], fits: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    return {
        **settings,
        "sampler": "NUTS (numpyro), CPU; target_accept_prob 0.9, for the proximity regressions "
        f"{PROFILE_TARGET_ACCEPT} "
        f"and a dense mass matrix",
        "versions": versions(),
        "fits": {
            k: {kk: f[kk] for kk in ("divergences", "seconds", "chain_method", "family_parameterization") if kk in f}
            for k, f in fits.items()
        },
    }


# --- analysis 1: Pareto proximity ------------------------------------------------------------------------------------
def fit_profile_regression(
    design: Mapping[str, Any], settings: Mapping[str, int], progress: bool = False
) -> dict[str, Any]:
    import jax.numpy as jnp

    numpyro_modules(settings["chains"])
    X = design["X"]
    centred = family_centring(design)
    kw = {
        "X": jnp.asarray(X.to_numpy(dtype=float)),
        "family": jnp.asarray(design["family"]),
        "n_families": len(design["families"]),
        "y": jnp.asarray(design["y"]),
        "centred": centred,
    }
    # dense mass matrix: the intercept and the family intercepts trade off along one line (only their
    # sum is pinned by the data), which a diagonal mass matrix crosses slowly; target acceptance
    # 0.99: with few families sigma_f is weakly identified and reaches near 0, where the default
    # 0.9's larger steps diverge (docs/statistics.md, Sampling)
    fit = run_nuts(profile_model, kw, settings, progress, target_accept=PROFILE_TARGET_ACCEPT, dense_mass=True)
    fit["family_parameterization"] = "centred" if centred else "non-centred"
    d = fit["draws"]
    rows = [summarize("intercept", d["intercept"], "intercept")]
    for j, c in enumerate(X.columns):
        rows.append(
            summarize(_term_label(c), d["beta"][:, :, j], "game fixed effect" if c.startswith("game:") else "predictor")
        )
    for k, f in enumerate(design["families"]):
        rows.append(summarize(f"family: {f}", d["delta_f"][:, :, k], "family intercept"))
    rows.append(summarize("sigma_f (family)", d["sigma_f"], "variance"))
    rows.append(summarize("sigma (residual)", d["sigma"], "variance"))
    f = _flat(d)
    Xc = X.to_numpy(dtype=float) - X.to_numpy(dtype=float).mean(axis=0)
    fam = np.asarray(design["family"])

    def mean_of(idx: np.ndarray) -> np.ndarray:
        return f["alpha_c"][idx, None] + f["beta"][idx] @ Xc.T + f["delta_f"][idx][:, fam]

    # Bayesian R^2 (Gelman et al. 2019) per draw: var(mu) / (var(mu) + sigma^2), in chunks of draws
    var_mu = np.concatenate(
        [mean_of(np.arange(i, min(i + 256, f["sigma"].size))).var(axis=1) for i in range(0, f["sigma"].size, 256)]
    )
    r2 = (var_mu / (var_mu + f["sigma"] ** 2)).reshape(d["sigma"].shape)
    rows.append(summarize("R^2 (Bayesian)", r2, "fit"))
    coef = pd.DataFrame(rows)
    rep = _ppc_draws(settings["seed"], mean_of, f["sigma"])
    gi = design["df"]["game"].map({g: i for i, g in enumerate(GAMES)}).to_numpy()
    ppc = pd.DataFrame(ppc_table(design["y"], rep, gi, list(GAMES), "game"))
    return {"fit": fit, "coefficients": coef, "ppc": ppc}


def family_centring(design: Mapping[str, Any]) -> bool:
    """Whether to sample the family intercepts centred: when the data pin every family's mean
    (its standard error, from the spread within families after the game means, is under half the
    spread of the family means). Otherwise the centred form has a funnel (divergences) and the non-centred
    one is used. Only the sampler's geometry depends on it, not the model."""
    df = pd.DataFrame({"y": design["y"], "game": design["df"]["game"].to_numpy(), "family": design["family"]})
    r = df["y"] - df.groupby("game")["y"].transform("mean")
    fam_mean = as_series(r.groupby(df["family"]).mean())
    within = scalar((r - column(df, "family").map(fam_mean)).std(ddof=1))
    n = df.groupby("family").size()
    se = within / np.sqrt(n.to_numpy(dtype=float))
    spread = scalar(fam_mean.std(ddof=1)) if len(fam_mean) > 1 else 0.0
    return bool(spread > 0 and se.max() < 0.5 * spread)


def _term_label(c: str) -> str:
    if c.startswith("game: "):
        return "game: " + GAME_TITLES[c[6:]]
    return {
        "log10_size": "log10(size)",
        "thinking": "thinking variant",
        "cot": "chain-of-thought",
        "tom": "theory of mind",
        "group_size": "group size",
        "standard_prompt": "standard (vs. alternate)",
    }.get(c, c)


def prepare_profiles(
    dirs: Sequence[Path], model_info: Path | None = None, max_fallback: float = MAX_FALLBACK
) -> dict[str, Any]:
    """Everything the Pareto-proximity analysis needs, checked before anything is written: the
    profiles, the model info, the main regression's design and (when there are alternate-prompt
    profiles) the prompt-invariance regression's design, or the note why it cannot be fitted."""
    max_fallback = check_max_fallback(max_fallback)
    info = read_model_info(model_info)
    profiles = load_profiles(dirs)
    main = profile_design(profiles, info, max_fallback, "main")
    invariance, why = None, None
    if any(p["prompt"] == "alternate" for p in profiles):
        try:
            invariance = profile_design(profiles, info, max_fallback, "invariance")
        except BayesError as exc:
            why = f"prompt-invariance regression (Table 5) not fitted: {exc}"
            main["notes"].append(why)
    main["notes"] += reference_notes(profiles)
    return {"profiles": profiles, "info": info, "main": main, "invariance": invariance, "max_fallback": max_fallback}


def reference_notes(profiles: Sequence[Mapping[str, Any]]) -> list[str]:
    """A note for each game whose proximity is measured against different Pareto values in different
    profiles (e.g. one profile with --pareto-reference collective-risk=1.25)."""
    notes = []
    for g in GAMES:
        values = sorted({p["games"][g]["pareto"] for p in profiles if p["games"][g].get("pareto") is not None})
        if len(values) > 1:
            notes.append(
                f"{g}: the profiles measure proximity from different Pareto values "
                f"({', '.join(f'{v:g}' for v in values)})"
            )
    return notes


def invariance_table(coef: pd.DataFrame, design: Mapping[str, Any]) -> pd.DataFrame:
    """Appendix E's Table 5 from the invariance fit: the intercept, the model characteristics, the
    prompt effect (standard vs. alternate), the variance components, R^2 and the observations per
    wording (game effects and family intercepts are in invariance.csv)."""
    keep = coef[~coef["group"].isin(["game fixed effect", "family intercept"])].copy()
    prompts = design["df"]["prompt"]
    n = pd.DataFrame(
        [
            {
                "group": "observations",
                "term": f"N (standard / alternate): {len(prompts)} ({int((prompts == 'standard').sum())} / "
                f"{int((prompts == 'alternate').sum())})",
            }
        ]
    )
    return as_frame(pd.concat([keep, n], ignore_index=True))


def analyze_profiles(
    dirs: Sequence[Path],
    out: Path,
    settings: Mapping[str, Any],
    model_info: Path | None = None,
    progress: bool = False,
    max_fallback: float = MAX_FALLBACK,
) -> dict[str, Any]:
    """Fit the Pareto-proximity regression and write ``coefficients.{csv,md}``, ``ppc.{csv,md}``,
    ``forest.png`` and ``fit.json`` into ``out``; with alternate-prompt profiles also the
    prompt-invariance regression (``invariance.{csv,md}``: Appendix E, Table 5)."""
    settings = check_settings(**settings)
    prep = prepare_profiles(dirs, model_info, max_fallback)
    design = prep["main"]
    numpyro_modules(settings["chains"])
    res = fit_profile_regression(design, settings, progress)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    coef, ppc, fit = res["coefficients"], res["ppc"], res["fit"]
    forest_plot(
        {"Pareto proximity (0 = Pareto, 1 = Nash)": coef[coef["group"] != "fit"]},
        out / "forest.png",
        f"Pareto-proximity regression: {len(design['y'])} simulations, {len(design['models'])} models, "
        f"{len(design['families'])} families",
    )
    fits = {"proximity": fit}
    inv_record, inv_md = None, []
    if prep["invariance"] is not None:
        inv = fit_profile_regression(prep["invariance"], settings, progress)
        fits["invariance"] = inv["fit"]
        table = invariance_table(inv["coefficients"], prep["invariance"])
        inv["coefficients"].to_csv(out / "invariance.csv", index=False)
        inv_md = [
            "",
            "## Prompt invariance (Appendix E, Table 5): standard vs. alternate wording\n",
            markdown_table(table),
        ]
        (out / "invariance.md").write_text("\n".join(inv_md[1:]) + "\n")
        term = inv["coefficients"].set_index("term").loc["standard (vs. alternate)"]
        prompts = prep["invariance"]["df"]["prompt"]
        inv_record = {
            "observations": int(len(prompts)),
            "standard": int((prompts == "standard").sum()),
            "alternate": int((prompts == "alternate").sum()),
            "models": prep["invariance"]["models"],
            "predictors": list(prep["invariance"]["X"].columns),
            "divergences": inv["fit"]["divergences"],
            "standard_vs_alternate": {k: float(term[k]) for k in ("mean", "sd", "ci_low", "ci_high", "p_positive")},
            "coefficients": inv["coefficients"].to_dict(orient="records"),
        }
    all_coef = pd.concat([coef] + ([pd.DataFrame(inv_record["coefficients"])] if inv_record else []), ignore_index=True)
    record = {
        "analysis": "pareto-proximity regression (paper §3.2, Tables 1 and 6)",
        **_fit_record(settings, fits),
        "observations": int(len(design["y"])),
        "models": design["models"],
        "families": design["families"],
        "profiles": [_profile_record(p) for p in prep["profiles"]],
        "max_fallback": prep["max_fallback"],
        "reference_game": design["reference_game"],
        "predictors": list(design["X"].columns),
        "notes": design["notes"],
        "model_info": str(model_info) if model_info else None,
        "divergences": int(sum(f["divergences"] for f in fits.values())),
        "max_r_hat": _nanmax(column(all_coef, "r_hat")),
        "min_ess_bulk": _nanmin(column(all_coef, "ess_bulk")),
        "invariance": inv_record,
    }
    md = [
        "# Pareto-proximity regression\n",
        _header(record),
        "## Coefficients\n",
        _write(out, "coefficients", coef),
        "",
        "## Posterior-predictive check (per game)\n",
        _write(out, "ppc", ppc),
        "",
        _ppc_note(),
        *inv_md,
    ]
    if design["notes"]:
        md += ["", "## Notes\n"] + [f"- {n}" for n in design["notes"]]
    (out / "statistics.md").write_text("\n".join(md) + "\n")
    from cooplab.graphs import rundir

    rundir.write_json(out / "fit.json", record)
    return {
        **record,
        "out": str(out),
        "coefficients": coef.to_dict(orient="records"),
        "ppc": ppc.to_dict(orient="records"),
    }


def _profile_record(p: Mapping[str, Any]) -> dict[str, Any]:
    """What fit.json says about one profile: its directory, model, prompt, and per game the Nash and
    Pareto values its proximity is measured from and its share of fallback decisions."""
    return {
        "dir": p["dir"],
        "model": p["model"],
        "prompt": p["prompt"],
        "games": {
            g: {
                "nash": e.get("nash"),
                "pareto": e.get("pareto"),
                "pareto_basis": e.get("pareto_basis"),
                "fallback_share": e["fallback_share"],
            }
            for g, e in p["games"].items()
        },
    }


def _nanmax(s: pd.Series) -> float | None:
    v = s.to_numpy(dtype=float)
    return float(np.nanmax(v)) if np.isfinite(v).any() else None


def _nanmin(s: pd.Series) -> float | None:
    v = s.to_numpy(dtype=float)
    return float(np.nanmin(v)) if np.isfinite(v).any() else None


def _header(r: Mapping[str, Any]) -> str:
    fits = "; ".join(f"{k}: {v['divergences']} divergences, {v['seconds']:.1f} s" for k, v in r["fits"].items())
    return (
        f"NUTS ({r.get('preset', 'settings given')} settings): {r['chains']} chains x {r['samples']} draws after "
        f"{r['warmup']} "
        f"warm-up, seed {r['seed']}; {fits}. "
        f"Max split R-hat {_fmt(r['max_r_hat'])}, min bulk ESS {_fmt(r['min_ess_bulk'], 'ess_bulk')}. "
        f"numpyro {r['versions']['numpyro']}, jax {r['versions']['jax']}.\n"
    )


def _ppc_note() -> str:
    return (
        "p_mean / p_sd: share of replicated data sets whose mean / s.d. is at least the observed one (near 0 or 1: the "
        "model misses it); coverage95: share of observations inside their own 95% predictive interval; below0: share "
        "of "
        "values under 0 (observed and replicated; the Normal likelihood puts mass there, proximity cannot)."
    )


# --- analysis 2: science outcomes
# ---------------------------------------------------------------------------------------
#: where ``analyze science`` takes the three outcomes from: the LLM judge's scores (as the paper's
#: Table 2 does) or the heuristic scorer's
SCORE_SOURCES = ("judge", "heuristic")


def _run_judge(run_dir: Path | None, judge: str | None) -> dict[str, Any] | None:
    """The judge entry (``judge``'s, else the last) of a run directory's scores.json with all three
    scores, or None."""
    from cooplab.evals.science_scoring import JUDGE_COLUMNS, judge_entry
    from cooplab.graphs import rundir

    if run_dir is None or not (run_dir / "scores.json").is_file():
        return None
    try:
        entry = judge_entry(rundir.read_json(run_dir / "scores.json"), judge)
    except (OSError, ValueError):
        return None
    return None if entry is None or any(entry.get(k) is None for k in JUDGE_COLUMNS) else entry


def _judge_outcomes(df: pd.DataFrame, f: Path) -> tuple[pd.DataFrame, str]:
    """``df`` with the judge's scores in the outcome columns, and the judge's name. A run whose
    row has no judge scores (scored after the sweep with ``cooplab science score``) is read from
    its run directory's scores.json; a run no judge scored, or runs scored by different judges,
    are a one-line BayesError."""
    from cooplab.evals.science_scoring import JUDGE_COLUMNS

    fix = (
        "score the runs with 'cooplab science score RUN_DIR ... --judge MODEL' (or name a judge in the sweep), "
        "or use --score-source heuristic"
    )
    df = df.copy()
    for col in (*JUDGE_COLUMNS.values(), "judge"):
        if col not in df.columns:
            df[col] = np.nan
    df["judge"] = df["judge"].astype(object)  # an empty column is read as floats
    for i in df.index:
        if df.loc[i, list(JUDGE_COLUMNS.values())].notna().all():
            continue
        run_dir = df.loc[i, "run_dir"] if "run_dir" in df.columns else None
        d = Path(run_dir) if isinstance(run_dir, str) else None
        entry = _run_judge(d, df.loc[i, "judge"] if isinstance(df.loc[i, "judge"], str) else None)
        if entry is None:
            # the index is unique (read_csv's rows, some left out): get_loc gives the position
            where = d if d is not None else f"row {cast(int, df.index.get_loc(i)) + 1}"
            raise BayesError(f"{f}: run {where} has no judge scores; {fix}")
        df.loc[i, "judge"] = entry.get("judge")
        for dim, col in JUDGE_COLUMNS.items():
            df.loc[i, col] = entry[dim]
    judges = sorted({str(j) for j in df["judge"]})
    if len(judges) > 1:
        raise BayesError(
            f"{f}: the runs were scored by different judges ({', '.join(judges)}); score them all with one judge "
            f"('cooplab science score ... --judge MODEL') or use --score-source heuristic"
        )
    for dim, col in JUDGE_COLUMNS.items():
        df[dim] = df[col]
    return df, judges[0]


def load_scores(sweep_dir: Path, source: str = "judge") -> tuple[pd.DataFrame, list[str]]:
    """scores.csv of a science sweep, checked, averaged per model-condition pair (the paper's unit).
    ``source``: the judge's scores (``judge_*`` columns, or the runs' scores.json) or the
    heuristic scorer's (``completeness``, ``quality``, ``accuracy``); the first note says which."""
    if source not in SCORE_SOURCES:
        raise BayesError(f"--score-source must be judge or heuristic, got {source!r}")
    sweep_dir = Path(sweep_dir)
    f = sweep_dir / "scores.csv" if sweep_dir.is_dir() else sweep_dir
    try:
        df = pd.read_csv(f)
    except FileNotFoundError:
        raise BayesError(
            f'{sweep_dir}: no scores.csv; give the out directory of a \'cooplab sweep\' with "task": "science"'
        ) from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise BayesError(f"{f} cannot be read as CSV: {_line(exc)}") from None
    need = ("model", "task", "budget", "visibility", "team_size", "prompt", "status") + (
        OUTCOMES if source == "heuristic" else ()
    )
    gone = [c for c in need if c not in df.columns]
    if gone:
        raise BayesError(f"{f} lacks the column(s) {', '.join(gone)}; is it a science sweep's scores.csv?")
    notes = []
    ok = column(df, "status").isin(["completed", "budget_exhausted"])
    if bool((~ok).any()):
        notes.append(f"{int((~ok).sum())} run(s) neither completed nor budget_exhausted left out")
    df = as_frame(df[ok]).copy()
    if df.empty:
        raise BayesError(f"{f}: no completed runs")
    if source == "judge":
        df, judge = _judge_outcomes(df, f)
        notes.insert(0, f"outcomes: the LLM judge's scores ({judge}), as in the paper's Table 2")
    else:
        notes.insert(
            0, "outcomes: the heuristic scorer's scores (--score-source heuristic; the paper's Table 2 uses a judge's)"
        )
    df["model"] = df["model"].astype(str)
    for c in OUTCOMES:
        v = numeric(column(df, c))
        bad = ~(np.isfinite(v) & (v >= 0) & (v <= 1))
        if bool(bad.any()):
            i = int(np.flatnonzero(as_series(bad).to_numpy())[0])  # numpy's ufuncs keep a Series a Series
            raise BayesError(
                f"{f}: {c} of run {i + 1} is {df[c].iloc[i]!r}; scores must be numbers from 0 to 1 (re-score the run)"
            )
        df[c] = v.astype(float)
    for c, allowed in (("task", SCIENCE_TASKS), ("visibility", VISIBILITIES), ("prompt", ("standard", "tom"))):
        bad = ~column(df, c).isin(allowed)
        if bool(bad.any()):
            raise BayesError(f"{f}: {c} {first_where(column(df, c), bad)!r} is not one of {', '.join(allowed)}")
    ts = numeric(column(df, "team_size"))
    bad = ~(np.isfinite(ts) & (ts >= 1) & (ts <= 100) & (ts == np.round(ts)))
    if bool(bad.any()):
        raise BayesError(
            f"{f}: team_size must be a whole number from 1 to 100, got {first_where(column(df, 'team_size'), bad)!r}"
        )
    df["team_size"] = ts.astype(int)
    b = numeric(column(df, "budget"))
    if bool(b.isna().all()):
        notes.append("no run has a budget: log(budget) is left out")
        df["budget"] = np.nan
    else:
        bad = ~(np.isfinite(b) & (b > 0) & (b < 1e6))
        if bool(bad.any()):
            raise BayesError(
                f"{f}: budget {first_where(column(df, 'budget'), bad)!r} is not a positive finite number; "
                f"log(budget) needs every "
                f"run to have one (leave budgetless runs out of the sweep)"
            )
        df["budget"] = b.astype(float)
    keys = ["model", "task", "budget", "visibility", "team_size", "prompt"]
    agg = as_frame(df.groupby(keys, dropna=False)[list(OUTCOMES)].mean()).reset_index()
    agg["runs"] = df.groupby(keys, dropna=False).size().to_numpy()
    return agg, notes


def science_design(
    scores: pd.DataFrame,
    profiles: Sequence[Mapping[str, Any]],
    info: pd.DataFrame | None,
    notes: list[str],
    max_fallback: float = MAX_FALLBACK,
) -> dict[str, Any]:
    """The measurement-error model's data. A model's game mean pools its profiles' simulations of
    the game, leaving out a profile's game whose share of fallback decisions is above
    ``max_fallback``; a model with fewer than two simulations of a game left has no observation of
    it (``observed`` False: its disposition is inferred from the other models and its outcomes)."""
    by_model: dict[str, list[Mapping[str, Any]]] = {}
    for p in profiles:
        by_model.setdefault(p["model"], []).append(p)
    models = sorted(scores["model"].unique())
    missing = [m for m in models if m not in by_model]
    if missing:
        raise BayesError(
            f"model {missing[0]!r} of scores.csv has no profile among --profiles; add 'cooplab profile --model "
            f"{missing[0]}' output"
        )
    extra = sorted(set(by_model) - set(models))
    if extra:
        notes.append(f"profiles of models without science runs left out: {', '.join(extra)}")
    if len(models) < 3:
        raise BayesError(
            f"the measurement-error model needs science runs and profiles of at least three models (got "
            f"{len(models)}: {', '.join(models)}): the game effects are between-model comparisons"
        )
    M, G = len(models), len(GAMES)
    ybar, se = np.full((M, G), np.nan), np.full((M, G), np.nan)
    nsim = np.zeros((M, G), dtype=int)
    for i, m in enumerate(models):
        kept = {p["dir"]: _kept_games(p, max_fallback, notes) for p in by_model[m]}
        for j, g in enumerate(GAMES):
            parts = [p["games"][g]["sims"]["metric"].to_numpy() for p in by_model[m] if g in kept[p["dir"]]]
            v = np.concatenate(parts) if parts else np.zeros(0)
            nsim[i, j] = v.size
            if v.size >= 2:
                ybar[i, j], se[i, j] = v.mean(), v.std(ddof=1) / math.sqrt(v.size)
            elif parts:
                notes.append(f"{m}: {g} has one simulation left after the fallback exclusions; no observation of it")
    observed = np.isfinite(ybar)
    center = np.array([ybar[observed[:, j], j].mean() if observed[:, j].any() else 0.0 for j in range(G)])
    scale = np.array([ybar[observed[:, j], j].std(ddof=1) if observed[:, j].sum() > 1 else 0.0 for j in range(G)])
    flat = [GAMES[j] for j in range(G) if not scale[j] > 0]
    if flat:
        raise BayesError(
            f"game {flat[0]}: fewer than two models have it, or every model has the same mean metric, so it cannot "
            f"be z-scored; add profiles of models that play it differently (or raise --max-fallback)"
        )
    zbar = np.where(observed, (ybar - center) / scale, 0.0)
    zse_raw = np.where(observed, se / scale, 1.0)
    zse = np.maximum(zse_raw, SE_FLOOR)
    if (zse_raw < SE_FLOOR).any():
        notes.append(
            f"{int((zse_raw < SE_FLOOR).sum())} game mean(s) with a standard error under {SE_FLOOR} z-units (e.g. "
            "every "
            f"simulation alike) use {SE_FLOOR}"
        )
    # condition controls
    C = pd.DataFrame(index=scores.index)
    if bool(scores["budget"].notna().all()):
        C["log(budget)"] = np.log(scores["budget"].to_numpy(dtype=float))
    for t in SCIENCE_TASKS[1:]:
        C[f"task: {t}"] = (scores["task"] == t).astype(float)
    for v in VISIBILITIES[1:]:
        C[f"visibility: {v}"] = (scores["visibility"] == v).astype(float)
    sizes = sorted(scores["team_size"].unique())
    for s in sizes[1:]:
        C[f"team size = {s}"] = (scores["team_size"] == s).astype(float)
    C["theory of mind"] = (scores["prompt"] == "tom").astype(float)
    C = _drop_constant(C, notes, " of the science runs")
    if sizes and sizes[0] != 2:
        notes.append(f"team size reference: {sizes[0]}")
    # capability controls (z-scored across the models)
    B = pd.DataFrame(index=models)
    if info is None:
        notes.append("no --model-info: no capability controls")
    else:
        rows = {m: info_of(info, m) for m in models}
        for col, name in (
            ("ifeval", "IFEval"),
            ("mmlu_pro", "MMLU-Pro"),
            ("size_b", "log10(size)"),
            ("thinking", "thinking"),
        ):
            if col not in info.columns:
                continue
            v = np.array([rows[m][col] for m in models], dtype=float)
            if col == "size_b":
                v = np.log10(v)
            if not np.ptp(v) > 0:
                notes.append(f"{name} is the same for every model: dropped")
                continue
            B[name] = (v - v.mean()) / v.std(ddof=1)
    if M <= G + B.shape[1] + 1:
        notes.append(
            f"{M} models for {G} game effects and {B.shape[1]} capability controls: the model-level coefficients are "
            f"weakly identified (their intervals mostly reflect the priors)"
        )
    idx = column(scores, "model").map({m: i for i, m in enumerate(models)}).to_numpy()
    return {
        "models": models,
        "ybar": zbar,
        "se": zse,
        "observed": observed,
        "raw_mean": ybar,
        "raw_se": se,
        "n_sims": nsim,
        "center": center,
        "scale": scale,
        "C": C,
        "B": B,
        "model_of_obs": idx,
        "scores": scores,
        "notes": notes,
    }


def fit_science(
    design: Mapping[str, Any], outcome: str, settings: Mapping[str, int], progress: bool = False
) -> dict[str, Any]:
    import jax.numpy as jnp

    numpyro_modules(settings["chains"])
    y = design["scores"][outcome].to_numpy(dtype=float)
    kw = {
        "ybar": jnp.asarray(design["ybar"]),
        "se": jnp.asarray(design["se"]),
        "model_of_obs": jnp.asarray(design["model_of_obs"]),
        "C": jnp.asarray(design["C"].to_numpy(dtype=float).reshape(len(y), -1)),
        "B": jnp.asarray(design["B"].to_numpy(dtype=float).reshape(len(design["models"]), -1)),
        "y": jnp.asarray(y),
        "observed": None if design.get("observed") is None else jnp.asarray(design["observed"]),
    }
    fit = run_nuts(science_model, kw, settings, progress)
    d = fit["draws"]
    rows = [summarize("intercept (alpha)", d["alpha"], "intercept")]
    rows += [
        summarize(GAME_TITLES[g], d["beta"][:, :, j], "game behaviour (latent theta, z-scored)")
        for j, g in enumerate(GAMES)
    ]
    rows += [
        summarize(c, d["delta"][:, :, j], "capability control (z-scored)") for j, c in enumerate(design["B"].columns)
    ]
    rows += [summarize(c, d["gamma"][:, :, j], "condition control") for j, c in enumerate(design["C"].columns)]
    rows.append(summarize("tau (residual SD)", d["tau"], "variance"))
    coef = pd.DataFrame(rows)
    f = _flat(d)
    idx_obs = np.asarray(design["model_of_obs"])
    Cn = np.asarray(kw["C"])
    Bn = np.asarray(kw["B"])

    def mean_of(idx: np.ndarray) -> np.ndarray:
        mu = (
            f["alpha"][idx, None]
            + np.einsum("dog,dg->do", f["theta"][idx][:, idx_obs], f["beta"][idx])
            + f["gamma"][idx] @ Cn.T
        )
        if Bn.shape[1]:
            mu = mu + f["delta"][idx] @ Bn[idx_obs].T
        return mu

    rep = _ppc_draws(settings["seed"], mean_of, f["tau"])
    tasks = sorted(design["scores"]["task"].unique())
    gi = design["scores"]["task"].map({t: i for i, t in enumerate(tasks)}).to_numpy()
    ppc = pd.DataFrame(ppc_table(y, rep, gi, tasks, "task"))
    theta = d["theta"].reshape(-1, *d["theta"].shape[2:])
    return {
        "fit": fit,
        "coefficients": coef,
        "ppc": ppc,
        "theta_mean": theta.mean(axis=0),
        "theta_sd": theta.std(axis=0, ddof=1),
    }


def analyze_science(
    sweep_dir: Path,
    profile_dirs: Sequence[Path],
    out: Path,
    settings: Mapping[str, Any],
    model_info: Path | None = None,
    progress: bool = False,
    outcomes: Sequence[str] = OUTCOMES,
    max_fallback: float = MAX_FALLBACK,
    score_source: str = "judge",
) -> dict[str, Any]:
    """Fit the measurement-error model for each outcome; write ``coefficients.{csv,md}`` (all
    outcomes, long), ``ppc.{csv,md}``, ``dispositions.csv`` (theta per model and game),
    ``forest.png``, ``fit.json`` and ``statistics.md`` into ``out``."""
    settings = check_settings(**settings)
    max_fallback = check_max_fallback(max_fallback)
    info = read_model_info(model_info)
    scores, notes = load_scores(sweep_dir, score_source)
    design = science_design(scores, load_profiles(profile_dirs), info, notes, max_fallback)
    numpyro_modules(settings["chains"])
    fits, coefs, ppcs, tables = {}, [], [], {}
    disp = []
    for o in outcomes:
        r = fit_science(design, o, settings, progress)
        fits[o] = r["fit"]
        coefs.append(r["coefficients"].assign(outcome=o))
        ppcs.append(r["ppc"].assign(outcome=o))
        tables[o] = r["coefficients"][r["coefficients"]["group"] != "intercept"]
        for i, m in enumerate(design["models"]):
            for j, g in enumerate(GAMES):
                disp.append(
                    {
                        "outcome": o,
                        "model": m,
                        "game": g,
                        "metric_mean": design["raw_mean"][i, j],
                        "metric_se": design["raw_se"][i, j],
                        "simulations": int(design["n_sims"][i, j]),
                        "z_observed": design["ybar"][i, j] if design["observed"][i, j] else float("nan"),
                        "theta_mean": float(r["theta_mean"][i, j]),
                        "theta_sd": float(r["theta_sd"][i, j]),
                    }
                )
    coef = pd.concat(coefs, ignore_index=True)
    coef = as_frame(coef[["outcome"] + [c for c in coef.columns if c != "outcome"]])
    ppc = pd.concat(ppcs, ignore_index=True)
    ppc = as_frame(ppc[["outcome"] + [c for c in ppc.columns if c != "outcome"]])
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(disp).to_csv(out / "dispositions.csv", index=False)
    forest_plot(
        tables,
        out / "forest.png",
        f"Measurement-error model: {len(scores)} model-condition pairs, {len(design['models'])} models",
    )
    record = {
        "analysis": "measurement-error model (paper §4.1.2, Tables 2 and 7)",
        **_fit_record(settings, fits),
        "observations": int(len(scores)),
        "runs": int(column(scores, "runs").sum()),
        "models": design["models"],
        "outcomes": list(outcomes),
        "condition_controls": list(design["C"].columns),
        "capability_controls": list(design["B"].columns),
        "se_floor_z": SE_FLOOR,
        "max_fallback": max_fallback,
        "score_source": score_source,
        "outcomes_from": notes[0],
        "notes": design["notes"],
        "model_info": str(model_info) if model_info else None,
        "sweep": str(sweep_dir),
        "profiles": [str(p) for p in profile_dirs],
        "divergences": int(sum(f["divergences"] for f in fits.values())),
        "max_r_hat": _nanmax(column(coef, "r_hat")),
        "min_ess_bulk": _nanmin(column(coef, "ess_bulk")),
    }
    md = [
        "# Measurement-error model: game dispositions and science outcomes\n",
        _header(record),
        "## Coefficients\n",
        _write(out, "coefficients", coef),
        "",
        "## Posterior-predictive check (per outcome and task)\n",
        _write(out, "ppc", ppc),
        "",
        _ppc_note(),
    ]
    if design["notes"]:
        md += ["", "## Notes\n"] + [f"- {n}" for n in design["notes"]]
    (out / "statistics.md").write_text("\n".join(md) + "\n")
    from cooplab.graphs import rundir

    rundir.write_json(out / "fit.json", record)
    return {
        **record,
        "out": str(out),
        "coefficients": coef.to_dict(orient="records"),
        "ppc": ppc.to_dict(orient="records"),
    }
