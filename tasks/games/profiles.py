"""A model's cooperative profile (paper §3, Figure 2): the six games played by one model, one
primary metric per game with its 95% interval and its Pareto proximity.

``cooplab profile --model M [--simulations 20] --out DIR`` is a grid sweep of the ``game`` task
(:mod:`cooplab.runs.grid`, through the engine passed in): one cell per game, played one after
another, each an ordinary run in ``DIR/cells/game-GAME__sSEED/`` (its own config.json, checkpoints,
decisions, ledger and figure), with the sweep's ``DIR/manifest.json`` (kind ``profile``) and
``DIR/table.csv``. The game task's analysis of the sweep (:func:`analyze`) then writes, from the
manifest and the games' summaries:

- ``DIR/profile.json``: per game the metric (mean, 95% Student-t interval, s.d., n), the Nash and
  Pareto references (and where the Pareto value comes from), the Pareto proximity (mean, interval,
  near-Pareto share, uncapped distance), the share of fallback decisions and whether the game is
  in the profile (``included``: false when that share is above ``max_fallback``), the run's status,
  decisions, tokens, cost and wall time; over all games the model, the conditions, the references,
  the excluded games and the totals;
- ``DIR/decisions.*`` and ``DIR/ledger.*``: every game's decisions and ledger rows in one table
  each, with a ``game`` column;
- ``DIR/figures/profile.png``: one panel per game in the style of the paper's Figure 2.

``DIR/profile-config.json`` records what was asked. Running the same command again continues: a
finished game is read back, an interrupted one resumes from its last checkpoint (its finished LLM
calls replay from the response cache, never paid twice), a game not started yet starts. The same
directory with other settings is refused (one line) unless ``--force``. A profile written before
the grid layout (``DIR/games/GAME/``) still reads (its manifest names its games); ``cooplab
migrate DIR`` moves its games into ``cells/`` so that it can be continued.

The budget (``--budget``) is for the whole profile: each game starts with what the games before it
left; when it is spent the profile stops with status ``budget_exhausted`` and keeps what it has.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cooplab.evals.bayes import MAX_FALLBACK, check_max_fallback, fallback_of
from cooplab.graphs import rundir
from cooplab.graphs.formats import PROFILE_OUTPUTS, upgrade_llm
from cooplab.graphs.jobs import Runs
from cooplab.graphs.rundir import RunDirError
from cooplab.graphs.runfiles import RunSummary, read_summary
from cooplab.tasks.games.figures import TITLES, profile_figure  # noqa: F401 - profile_figure is this module's API too
from cooplab.tasks.games.params import GAMES, PROMPTS, model_of
from cooplab.tasks.games.results import GameResults

PROFILE_KIND = "cooplab-profile"
PROFILE_VERSION = 1
DEFAULT_SIMULATIONS = 20  #: Appendix D: about 20 simulations estimate a game's metric well
#: a game whose share of fallback decisions is above this is left out of the profile (the paper left
#: out a model that could not answer one game in valid JSON); the analyses' default too
DEFAULT_MAX_FALLBACK = MAX_FALLBACK
#: fields of profile-config.json that must match for a rerun to continue the same profile
_SAME = ("games", "players", "simulations", "group_size", "seed", "prompt", "deliberation", "llm", "pareto_references")


class ProfileError(ValueError):
    """A profile directory or request that cannot be used; the message is one line."""


def request(
    *,
    games: Sequence[str] | None = None,
    players: str = "llm",
    simulations: int = DEFAULT_SIMULATIONS,
    group_size: int | None = None,
    seed: int = 0,
    prompt: str = "standard",
    deliberation: bool = False,
    llm: Mapping[str, Any] | None = None,
    pareto_references: Mapping[str, Any] | None = None,
    max_fallback: Any = DEFAULT_MAX_FALLBACK,
    engine: Runs | None = None,
) -> dict[str, Any]:
    """What a profile is asked to play (profile-config.json), checked: the games (default all six,
    in the paper's order), the players (llm, or a reference kind for anchors), the number of
    simulations per game, the group size (two groups of it; default each game's 5), the seed, the
    LLM players' prompt condition and deliberation, the run's ``llm`` config
    (:class:`cooplab.agents.settings.LLMSettings`, checked; required exactly for llm players; its
    ``prompt_variant`` words every game's prompts, ``--prompt-variant``), the
    Pareto values set for the games that allow it (``pareto_references``: game -> value; see
    :func:`settable_references`) and ``max_fallback`` (a game with a larger share of fallback
    decisions is left out of the profile; only read when the profile is written, so a rerun may
    change it). With ``engine`` (:data:`cooplab.runs.engine.ENGINE`, as the command line passes) the
    models of LLM players are checked here, before anything runs; without it, when each game starts."""
    chosen = list(GAMES if games is None else games)
    bad = [g for g in chosen if g not in GAMES]
    if bad or not chosen:
        raise ProfileError(
            f"--games must be a comma-separated list of {', '.join(GAMES)}, got "
            f"{','.join(map(str, chosen)) or 'nothing'}"
        )
    if len(set(chosen)) != len(chosen):
        raise ProfileError(f"--games lists a game twice: {','.join(chosen)}")
    if players not in ("llm", "nash", "pareto", "random"):
        raise ProfileError(f"--players must be llm, nash, pareto or random, got {players!r}")
    if (players == "llm") != (llm is not None):
        raise ProfileError("LLM players need the llm settings and reference players none")
    if prompt not in PROMPTS:
        raise ProfileError(f"--prompt must be one of {', '.join(PROMPTS)}, got {prompt!r}")
    if players != "llm" and (prompt != "standard" or deliberation):
        raise ProfileError("--prompt and --deliberation apply to LLM players only")
    if llm is not None and llm.get("prompt_variant") not in (
        None,
        "original",
    ):  # every game run gets it (llm.prompt_variant)
        from cooplab.graphs import prompts as pv
        from cooplab.limits import ConfigError
        from cooplab.tasks.games.task import TASK as GAME

        try:
            pv.check(GAME, llm.get("prompt_variant"))
        except ConfigError as exc:
            raise ProfileError(str(exc)) from None
    refs = _check_references(pareto_references, chosen)
    req = {
        "kind": PROFILE_KIND,
        "version": PROFILE_VERSION,
        "games": chosen,
        "players": players,
        "simulations": simulations,
        "group_size": group_size,
        "seed": seed,
        "prompt": prompt,
        "deliberation": bool(deliberation),
        "llm": dict(llm) if llm is not None else None,
        "pareto_references": refs,
        "max_fallback": check_max_fallback(max_fallback),
    }
    for g in chosen:  # the bounds and every game's own checks (e.g. CPR's multiplier below N), before anything runs
        try:
            game_params(req, g)
        except ValueError as exc:
            what = (
                f"--pareto-reference {g}={refs[g]}"
                if refs and g in refs
                else f"--group-size {group_size}"
                if group_size is not None
                else f"--simulations {simulations}"
            )
            raise ProfileError(f"{g}: {what}: {_first(exc)}") from None
    if players == "llm" and engine is not None:  # a scripted model answers every phase of every game chosen
        from cooplab.tasks.games.task import TASK

        for g in chosen:
            engine.check_models(TASK, game_config(req, g, None), "--model")
    return req


def settable_references() -> tuple[str, ...]:
    """The games whose Pareto reference can be set (their parameters have ``pareto_reference``)."""
    return tuple(g for g in GAMES if "pareto_reference" in model_of(g).model_fields)


def _check_references(refs: Mapping[str, Any] | None, games: Sequence[str]) -> dict[str, float] | None:
    """``--pareto-reference GAME=VALUE`` values: known games that allow it, among the profile's
    games, each a finite number (its range is the game's own check); None when none is set."""
    if not refs:
        return None
    if not isinstance(refs, Mapping):
        raise ProfileError(f"pareto references must be a mapping game -> value, got {type(refs).__name__}")
    out = {}
    for g, v in refs.items():
        if g not in settable_references():
            raise ProfileError(
                f"--pareto-reference: {g!r} has no settable Pareto reference; only {', '.join(settable_references())}"
            )
        if g not in games:
            raise ProfileError(f"--pareto-reference {g}=...: {g} is not among the profile's games ({','.join(games)})")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ProfileError(f"--pareto-reference {g} must be a finite number, got {v!r}")
        out[g] = float(v)
    return out


def _model(req: Mapping[str, Any]) -> str | None:
    """The model spec of a profile's LLM players (None for reference players)."""
    return upgrade_llm(req["llm"])[0].get("model") if isinstance(req.get("llm"), dict) else None


def game_params(req: Mapping[str, Any], game: str):
    """The parameters of one game of the profile: the paper's defaults, the profile's simulations and
    group size."""
    extra: dict[str, Any] = (
        {} if req.get("group_size") is None else {"group_sizes": [req["group_size"], req["group_size"]]}
    )
    if game in (req.get("pareto_references") or {}):
        extra["pareto_reference"] = req["pareto_references"][game]
    return model_of(game)(simulations=req["simulations"], **extra)


def _first(exc: Exception) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        from cooplab.limits import explain

        return explain(exc)
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def game_config(req: Mapping[str, Any], game: str, budget: float | None) -> dict[str, Any]:
    """The ``game`` task's config for one game of the profile (what ``cooplab run game`` writes)."""
    llm = None
    if req["llm"] is not None:
        llm = {**upgrade_llm(req["llm"])[0], "budget": budget}
    return {
        "version": 2,
        "task": "game",
        "agents": "llm" if req["players"] == "llm" else "rule",
        "seed": req["seed"],
        "csv": False,
        "params": {
            "game": game,
            "players": req["players"],
            "script": None,
            "script_file": None,
            "prompt": req["prompt"],
            "deliberation": req["deliberation"],
            **game_params(req, game).model_dump(mode="json"),
        },
        "llm": llm,
        "sandbox": None,
        "record": {},
    }


def label_of(req: Mapping[str, Any]) -> str:
    """How a profile is named in figures: the model spec (or the reference players' kind), plus the
    prompt condition when it is not the standard one."""
    name = req["players"] if req["players"] != "llm" else str(_model(req) or "llm")
    if name.startswith("scripted:"):
        name = "scripted:" + Path(name.split(":", 1)[1]).name
    extra = [req["prompt"]] if req.get("prompt", "standard") != "standard" else []
    if req.get("deliberation"):
        extra.append("deliberation")
    return name + (f" ({', '.join(extra)})" if extra else "")


def _differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two requests, as "name old -> new" (the response cache's path may differ:
    it only stores answers)."""

    def view(r: Mapping[str, Any], k: str) -> Any:
        v = r.get(k)
        return {f: x for f, x in v.items() if f != "cache"} if k == "llm" and isinstance(v, Mapping) else v

    out = []
    for k in _SAME:
        a, b = view(old, k), view(new, k)
        if a == b:
            continue
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += [f"{k}.{f} {a.get(f)!r} -> {b.get(f)!r}" for f in sorted(set(a) | set(b)) if a.get(f) != b.get(f)]
        else:
            out.append(f"{k} {a!r} -> {b!r}")
    return out


def prepare(out: Path, req: Mapping[str, Any], *, force: bool = False) -> Path:
    """Create ``out`` or check that it holds this same profile (then the run continues). ``force``
    empties a directory that holds another profile or anything else."""
    out = Path(out)
    cfg_path = out / "profile-config.json"
    if out.exists() and not out.is_dir():
        raise ProfileError(f"--out {out} is a file; give a directory")
    if force and out.exists():
        shutil.rmtree(out)
    if cfg_path.exists():
        try:
            old = rundir.read_json(cfg_path)
        except (OSError, ValueError) as exc:
            raise ProfileError(f"{cfg_path} is damaged ({_first(exc)}); use --force to start over") from None
        if not isinstance(old, dict) or old.get("kind") != PROFILE_KIND:
            raise ProfileError(f"{cfg_path} is not a cooplab profile config; use another --out or --force")
        if isinstance(old.get("llm"), dict):  # a profile started before the LLM settings' current spelling
            old = {**old, "llm": upgrade_llm(old["llm"])[0]}
        diff = _differences(old, req)
        if diff:
            raise ProfileError(
                f"{out} holds a profile with other settings ({'; '.join(diff)}); use another --out, or --force "
                f"to start over"
            )
        if (out / "games").is_dir() and not (out / "cells").exists():
            raise ProfileError(
                f"{out} holds a profile in the earlier games/GAME layout; convert it with 'cooplab migrate {out}' "
                "and run the same command again to continue it"
            )
        rundir.write_json(cfg_path, {**req, "created": old.get("created")})  # what was asked last (--max-fallback)
        return out
    if out.exists() and any(out.iterdir()):
        raise ProfileError(f"--out {out} is not empty and holds no profile; use another directory or --force")
    out.mkdir(parents=True, exist_ok=True)
    rundir.write_json(cfg_path, {**req, "created": rundir.now()})
    return out


def _read_summary(run_dir: Path) -> RunSummary | None:
    """A game's summary, or None when it has none yet; a damaged one is a one-line ProfileError."""
    if not (run_dir / "summary.json").exists():
        return None
    try:
        return read_summary(run_dir, GameResults)
    except RunDirError as exc:
        raise ProfileError(f"{exc}; fix the file, or delete it to resume the game from its last checkpoint") from None


def sweep_of(out: Path, req: Mapping[str, Any]) -> dict[str, Any]:
    """The profile as a grid sweep of the ``game`` task (:mod:`cooplab.runs.grid`): one cell per game
    (``OUT/cells/game-GAME__sSEED``), the profile's seed, one cell at a time, the profile's budget
    shared by the games in turn (:class:`cooplab.runs.sweeps.SweepBudget`)."""
    return {
        "task": "game",
        "out": str(out),
        "grid": {"game": list(req["games"])},
        "seeds": [req["seed"]],
        "parallel": 1,
        "sweep_budget": (req["llm"] or {}).get("budget"),
    }


#: the profile's own files, as its manifest names them
OUTPUTS = PROFILE_OUTPUTS


def run_profile(
    out: Path,
    req: Mapping[str, Any],
    *,
    engine: Runs,
    quiet: bool = False,
    on_game: Callable[[str, str], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Play (or continue) every game of ``req`` into ``out`` (made by :func:`prepare`) on ``engine``
    (:data:`cooplab.runs.engine.ENGINE`) and write the profile: the games are the cells of one grid
    sweep (:func:`sweep_of`) run by the engine's grid runner in turn, and the game task's
    :meth:`~cooplab.tasks.games.task.GameTask.analyze_sweep` writes the profile from the folder's
    manifest (:func:`analyze`). ``on_game(game, what)`` is told what happens to each game: "done"
    (read back), "resume", "start", "skipped" (the profile stopped, or its budget ran out, before
    it). A game that stops early (budget, a model that cannot be reached) ends the profile there:
    profile.json is written with what exists and the stop is re-raised (``RunStopped``,
    ``RunFailed``; any other error of a game as a one-line ProfileError) or recorded (budget)."""
    out = Path(out)
    tell = on_game or (lambda g, w: None)
    what = {"skipped": "done", "resumed": "resume", "ran": "start", "not_started": "skipped"}
    total = (req["llm"] or {}).get("budget")
    res = engine.run_grid(
        sweep_of(out, req),
        where=f"profile {out}",
        config_of=lambda labels: game_config(req, labels["game"], total),
        kind="profile",
        outputs=OUTPUTS,
        in_turn=True,
        quiet=quiet,
        warn=warn,
        announce=lambda j, step: tell(j["labels"]["game"], what[step]),
    )
    if res.get("analysis_error"):
        raise ProfileError(res["analysis_error"])
    for f in res["failed"]:  # the game that stopped the profile (in turn: at most one)
        kind, _, msg = f["error"].partition(": ")
        if kind == "RunStopped":
            raise engine.RunStopped(msg)
        if kind == "RunFailed":
            raise engine.RunFailed(msg)
        raise ProfileError(msg or kind)
    return res["profile"]


def game_dirs(out: Path) -> dict[str, Path]:
    """Each game's run directory in a profile folder, from its manifest (a profile of the earlier
    ``games/GAME`` layout too); a damaged manifest is a one-line ProfileError."""
    from cooplab.graphs import runfiles

    try:
        return runfiles.dirs_by(out, "game")
    except RunDirError as exc:
        raise ProfileError(str(exc)) from None


def _stored_request(out: Path) -> dict[str, Any]:
    """The profile's request as profile-config.json holds it (one-line ProfileError)."""
    path = Path(out) / "profile-config.json"
    try:
        req = rundir.read_json(path)
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{path} cannot be read ({_first(exc)}); run the profile again with --force") from None
    if not isinstance(req, dict) or req.get("kind") != PROFILE_KIND or not isinstance(req.get("games"), list):
        raise ProfileError(f"{path} is not a cooplab profile config")
    if isinstance(req.get("llm"), dict):
        req["llm"] = upgrade_llm(req["llm"])[0]
    return req


def analyze(out: Path) -> dict[str, Any]:
    """The profile of the folder ``out`` from its manifest (what the grid runner recorded of each
    game: the status of its summary, the error that stopped it) and its games' summaries: the
    profile's status as the games in order give it, then :func:`build_profile`. Returns
    ``{"profile": ...}`` for the sweep's result."""
    from cooplab.graphs import runfiles

    out = Path(out)
    req = _stored_request(out)
    try:
        m = runfiles.manifest_of(out)
    except RunDirError as exc:
        raise ProfileError(str(exc)) from None
    cells = {str(c.labels.get("game", c.name)): c for c in (m.cells if m is not None else []) if c.dir is not None}
    summaries: dict[str, RunSummary | None] = {}
    status = "completed"
    for game in req["games"]:
        c = cells.get(game)
        s = _read_summary(out / c.dir) if c is not None and c.dir is not None else None
        if s is not None and s.status in ("completed", "budget_exhausted"):
            summaries[game] = s  # a game its budget stopped ended there: it is read back as it ended
            if s.status != "completed" and status == "completed":
                status = s.status
            continue
        summaries[game] = None
        if status != "completed":
            continue  # skipped: the profile stopped before it
        if c is not None and c.error:  # it stopped the profile
            status = "stopped" if c.error.startswith("RunStopped") else "failed"
            summaries[game] = s
        elif s is not None:
            status, summaries[game] = s.status, s
        elif (req.get("llm") or {}).get("budget") is not None:
            status = "budget_exhausted"  # not started: the games before it spent the budget
    return {"profile": build_profile(out, req, summaries, status, cells={g: c.dir for g, c in cells.items()})}


def _game_entry(
    req: Mapping[str, Any], game: str, s: RunSummary[GameResults] | None, run_dir: str | None
) -> dict[str, Any]:
    from cooplab.tasks.games import equilibria as eq
    from cooplab.tasks.games.metrics import METRIC_LABEL

    P = game_params(req, game)
    ref = eq.reference(P)
    r = s.results if s is not None else None
    if s is None or r is None:
        return {
            "title": TITLES[game],
            "status": "not_run" if s is None else s.status,
            "metric": {
                "label": METRIC_LABEL[game],
                "mean": None,
                "ci95": None,
                "nash": ref.nash,
                "pareto": ref.pareto,
                "pareto_basis": ref.basis,
            },
            "pareto_proximity": None,
            "included": False,
        }
    m = r.metric.model_dump(mode="json")
    m["n"] = r.simulations if r.rounds_completed else 0
    m.setdefault("pareto_basis", ref.basis)
    fb = fallback_of(s.as_json())
    limit = req.get("max_fallback", DEFAULT_MAX_FALLBACK)
    entry: dict[str, Any] = {
        "title": TITLES[game],
        "status": s.status,
        "run_dir": run_dir,
        "group_sizes": r.group_sizes,
        "rounds_completed": r.rounds_completed,
        "rounds": r.rounds,
        "metric": m,
        "pareto_proximity": None if r.pareto_proximity is None else r.pareto_proximity.model_dump(mode="json"),
        "fallback": fb,
        "included": fb["share"] <= limit,
        "outcomes": r.outcomes.model_dump(mode="json"),
        "wall_seconds": s.wall_seconds,
    }
    if not entry["included"]:
        entry["excluded_because"] = f"{fb['share']:.1%} of its play decisions fell back, above --max-fallback {limit:g}"
    if s.decisions is not None:
        entry["decisions"] = s.decisions.model_dump(mode="json")
    if s.ledger is not None:
        entry["ledger"] = s.ledger.model_dump(
            mode="json", include={"calls", "cached_calls", "input_tokens", "output_tokens", "cost_usd_float"}
        )
    return entry


def references_of(games: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per game the Nash and Pareto values its proximity is measured against, and the Pareto value's basis."""
    return {
        g: {
            "nash": e["metric"].get("nash"),
            "pareto": e["metric"].get("pareto"),
            "pareto_basis": e["metric"].get("pareto_basis"),
        }
        for g, e in games.items()
    }


def build_profile(
    out: Path,
    req: Mapping[str, Any],
    summaries: Mapping[str, RunSummary | None],
    status: str,
    *,
    cells: Mapping[str, str | None],
) -> dict[str, Any]:
    """profile.json, the merged decisions and ledger tables and the figure from the games' summaries
    (``cells``: each game's run directory inside ``out``)."""
    import pandas as pd

    games = {g: _game_entry(req, g, summaries.get(g), cells.get(g)) for g in req["games"]}
    totals = {
        "calls": 0,
        "cached_calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": 0.0,
        "decisions": 0,
        "fallback_used": 0,
        "wall_seconds": 0.0,
    }
    for e in games.values():
        lg = e.get("ledger") or {}
        for k in ("calls", "cached_calls", "input_tokens", "output_tokens"):
            totals[k] += int(lg.get(k) or 0)
        totals["cost_usd"] += float(lg.get("cost_usd_float") or 0.0)
        d = e.get("decisions") or {}
        totals["decisions"] += int(d.get("count") or 0)
        totals["fallback_used"] += int(d.get("fallback_used") or 0)
        totals["wall_seconds"] += float(e.get("wall_seconds") or 0.0)
    totals["cost_usd"] = round(totals["cost_usd"], 6)
    totals["wall_seconds"] = round(totals["wall_seconds"], 3)
    if totals["decisions"]:
        totals["output_tokens_per_decision"] = round(totals["output_tokens"] / totals["decisions"], 2)
        totals["input_tokens_per_decision"] = round(totals["input_tokens"] / totals["decisions"], 2)
    profile = {
        "kind": PROFILE_KIND,
        "version": PROFILE_VERSION,
        "label": label_of(req),
        "status": status,
        "players": req["players"],
        "model": _model(req),
        "prompt": req["prompt"],
        "deliberation": req["deliberation"],
        "simulations": req["simulations"],
        "group_size": req.get("group_size"),
        "seed": req["seed"],
        "budget_usd": (req["llm"] or {}).get("budget") if req["llm"] else None,
        "references": references_of(games),
        "max_fallback": req.get("max_fallback", DEFAULT_MAX_FALLBACK),
        "excluded_games": [
            g for g, e in games.items() if e.get("status") == "completed" and not e.get("included", True)
        ],
        "games": games,
        "totals": totals,
        "updated": rundir.now(),
    }
    for stem in ("decisions", "ledger"):
        frames = []
        for g in req["games"]:
            if cells.get(g) is None:
                continue
            run_dir = out / str(cells[g])
            try:
                df = rundir.read_table(run_dir, stem)
            except (FileNotFoundError, OSError, ValueError):
                continue
            frames.append(df.assign(game=g))
        if frames:
            rundir.write_table(pd.concat(frames, ignore_index=True), out, stem)
    rundir.write_json(out / "profile.json", profile)
    try:
        profile_figure([profile], out / "figures" / "profile.png")
    except Exception as exc:  # noqa: BLE001 - the figure must never lose the computed profile
        profile["figure_error"] = f"{type(exc).__name__}: {exc}"
        rundir.write_json(out / "profile.json", profile)
    return profile


def load_profile(path: Path) -> dict[str, Any]:
    """A profile.json (or the directory holding it), checked enough to draw: one-line ProfileError."""
    path = Path(path)
    f = path / "profile.json" if path.is_dir() else path
    try:
        p = rundir.read_json(f)
    except FileNotFoundError:
        raise ProfileError(f"{path}: no profile.json; give a directory written by 'cooplab profile'") from None
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{f} cannot be read: {_first(exc)}") from None
    if not isinstance(p, dict) or p.get("kind") != PROFILE_KIND or not isinstance(p.get("games"), dict):
        raise ProfileError(f"{f} is not a cooplab profile (kind {PROFILE_KIND!r} with games)")
    for g, e in p["games"].items():
        if g not in GAMES or not isinstance(e, dict) or not isinstance(e.get("metric"), dict):
            raise ProfileError(f"{f}: games.{g} is not a game entry of a profile")
        for k in ("mean", "nash", "pareto"):
            v = e["metric"].get(k)
            if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)):
                raise ProfileError(f"{f}: games.{g}.metric.{k} must be a finite number or null, got {v!r}")
        ci = e["metric"].get("ci95")
        if ci is not None and not (
            isinstance(ci, list)
            and len(ci) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in ci)
        ):
            raise ProfileError(f"{f}: games.{g}.metric.ci95 must be two finite numbers or null, got {ci!r}")
    return p
