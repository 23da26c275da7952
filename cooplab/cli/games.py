"""CLI commands of the behavioral games, mounted by ``cooplab.cli``::

    cooplab run game --game weakest-link|cpr|cpr-sanction|collective-risk|o-ring|public-goods
                     --players llm|nash|pareto|random|scripted:FILE [--model M ...]
                     [--prompt standard|alternate|cot|tom] [--deliberation] [--group-size K] [--simulations S]
                     [--rounds R] [--seed S] [--set name=value ...] --out DIR [--json]
    cooplab params game [--game G] [--json]
    cooplab graph game [--game G]

``run game`` is the task's own options (:func:`game_options`) plus the options every run has,
mounted by ``cooplab.cli.tasks.run_command``; the run goes through the one runner.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cooplab.cli import options as co
from cooplab.cli.options import fail
from cooplab.cli.tasks import TaskFacts
from cooplab.evals.text import plain
from cooplab.tasks.games.params import GAMES, MAX_GROUP, MAX_SIMULATIONS, TABLE4

#: what ``cooplab run game`` needs of the task before it is loaded (a test checks it against the task)
FACTS = TaskFacts("game")


class Game(str, Enum):
    """The choices of ``--game``: the six games of :data:`~cooplab.tasks.games.params.GAMES`, in its
    order (``tests/games/test_game_cli.py`` checks that the two agree)."""

    weakest_link = "weakest-link"
    cpr = "cpr"
    cpr_sanction = "cpr-sanction"
    collective_risk = "collective-risk"
    o_ring = "o-ring"
    public_goods = "public-goods"


MIN_GROUP = 2  # players in each group at least
GROUP_SIZE = co.Num(int, MIN_GROUP, MAX_GROUP, hint="players in each of the 2 groups")
SIMULATIONS = co.Num(int, 1, MAX_SIMULATIONS)
_TABLE4 = "; ".join(f"{g} {', '.join(map(str, s))}" for g, s in TABLE4.items())


def smallest_group(game: str, limit: int = 64) -> int | None:
    """The smallest group size (2 groups of it) at which ``game``'s default constants keep the game
    a dilemma (its own checks pass), e.g. 3 for public-goods (its group multiplier 2 must be below
    the group size); None if none up to ``limit``."""
    from cooplab.tasks.games.params import model_of

    for k in range(MIN_GROUP, limit + 1):
        try:
            model_of(game)(group_sizes=[k, k], simulations=1)
            return k
        except ValueError:
            continue
    return None


def group_size_note(profile: bool) -> str:
    """What --group-size's help says about the games that need larger groups (computed)."""
    needs = {g: smallest_group(g) for g in GAMES}
    more = [f"{g} needs at least {k}" for g, k in needs.items() if k != MIN_GROUP]
    if not more:
        return ""
    return f"; with their default constants {', '.join(more)}" + (" (or leave it out with --games)" if profile else "")


def _num(option: str, rule: co.Num, help: str) -> Any:
    def parse(value: Any) -> Any:
        return rule.parse(option, value) if isinstance(value, str) else rule.check(option, value)

    return typer.Option(option, help=help, parser=parse, metavar="INTEGER")


def game_options(
    agents: str,
    game: Game = typer.Option(..., "--game", help="The game (paper §3.1.1)."),
    players: Optional[str] = typer.Option(
        None,
        "--players",
        help="Who plays: llm (the --model options apply), nash (default), pareto, random (uniform) or scripted:FILE "
        "(per-round actions, see docs/games.md).",
    ),
    prompt: str = typer.Option(
        "standard",
        "--prompt",
        help="LLM players' prompt condition (Appendix B): standard, alternate (prose wording), cot (chain of thought) "
        "or tom (theory of mind).",
    ),
    deliberation: bool = typer.Option(
        False, "--deliberation", help="LLM players: each member writes 1-3 sentences to its group before each decision."
    ),
    group_size: Annotated[
        Optional[int],
        _num(
            "--group-size",
            GROUP_SIZE,
            f"Players in each of the 2 groups, 2..{MAX_GROUP} (default 5; Appendix Table 4 sweeps: "
            f"{_TABLE4}){group_size_note(False)}.",
        ),
    ] = None,
    simulations: Annotated[
        Optional[int],
        _num("--simulations", SIMULATIONS, f"Simulations run side by side, 1..{MAX_SIMULATIONS} (default 50)."),
    ] = None,
    rounds: Annotated[
        Optional[int],
        co.num_opt("--rounds", f"Rounds per simulation, 1..{co.MAX_ROUNDS} (default 3; collective-risk: its R = 10)."),
    ] = None,
    set_: Optional[list[str]] = typer.Option(
        None, "--set", help="Set a game constant: --set multiplier=2.5 (see 'cooplab params game --game G')."
    ),
    invader: Optional[str] = typer.Option(
        None,
        "--invader",
        help="Replace one player at round K: KIND@K[:PLAYER], KIND greedy, defector or free-rider (reference players) "
        "or model:SPEC (LLM players: another model); the default seat is the last player "
        "(docs/mixed-societies.md).",
    ),
) -> dict[str, Any]:
    """Play one of the six behavioral games with reference or LLM players and write a run directory."""
    from cooplab.tasks.games.task import TASK

    return TASK.options(
        agents,
        game=game.value,
        players=players,
        prompt=prompt,
        deliberation=deliberation,
        group_size=group_size,
        simulations=simulations,
        rounds=rounds,
        set=set_,
        invader=invader,
    )


def run_command():
    """``cooplab run game``: :func:`game_options` plus the options every run has."""
    from cooplab.cli.tasks import run_command as make

    return make(FACTS, game_options)


def command(kind: str) -> Any:
    """The task's own ``cooplab KIND game`` command (run, params or graph)."""
    return {"run": run_command, "params": lambda: params_command, "graph": lambda: graph_command}[kind]()


def params_command(
    game: Optional[Game] = typer.Option(None, "--game", help="Only this game's parameters."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Every parameter of the six games with its default, meaning and source."""
    from cooplab.cli.tasks import echo_json
    from cooplab.tasks.games.task import TASK

    rows = [r for r in TASK.params_table() if game is None or r["game"] == game.value]
    if as_json:
        echo_json(rows)
        return
    w = max(len(r["name"]) for r in rows)
    for r in rows:
        typer.echo(f"{r['game']:<16} {r['name']:<{w}}  {plain(r['default']):<8}  {r['meaning']}  [{r['source']}]")


def graph_command(game: Game = typer.Option(Game("weakest-link"), "--game", help="Whose graph.")) -> None:
    """Print a game's graph as Mermaid text."""
    from cooplab.tasks.games.task import TASK

    typer.echo(TASK.build(TASK.default_config(game=game.value)).get_graph().draw_mermaid())


# --- cooplab profile ---------------------------------------------------------------------------------
def profile_command(
    out: co.OutOpt,
    model: co.ModelOpt = "local",
    simulations: Annotated[
        int,
        _num(
            "--simulations",
            SIMULATIONS,
            f"Simulations per game, 1..{MAX_SIMULATIONS} (default 20; Appendix D: about 20 suffice).",
        ),
    ] = 20,
    group_size: Annotated[
        Optional[int],
        _num(
            "--group-size",
            GROUP_SIZE,
            f"Players in each of the 2 groups of every game, 2..{MAX_GROUP} (default 5){group_size_note(True)}.",
        ),
    ] = None,
    games: Optional[str] = typer.Option(None, "--games", help="Comma-separated games to play (default all six)."),
    players: str = typer.Option(
        "llm",
        "--players",
        help="llm (the model; default) or a reference kind: nash, pareto, random (anchors for the figure).",
    ),
    prompt: str = typer.Option(
        "standard", "--prompt", help="Prompt condition (Appendix B): standard, alternate, cot or tom."
    ),
    deliberation: bool = typer.Option(
        False, "--deliberation", help="Each member writes 1-3 sentences to its group before each decision."
    ),
    prompt_variant: co.PromptVariantOpt = "original",
    seed: co.SeedOpt = 0,
    base_url: co.BaseUrlOpt = None,
    temperature: co.TemperatureOpt = 0.7,
    max_tokens: co.MaxTokensOpt = 64,
    max_concurrency: co.MaxConcurrencyOpt = 8,
    model_processes: co.ModelProcessesOpt = 0,
    rps: co.RpsOpt = None,
    budget: co.BudgetOpt = None,
    price_in: co.PriceInOpt = None,
    price_out: co.PriceOutOpt = None,
    cache: co.CacheOpt = None,
    pareto_reference: Optional[list[str]] = typer.Option(
        None,
        "--pareto-reference",
        help="Set a game's Pareto value, repeatable: collective-risk=1.25 (contribution per round; default the fair "
        "share T/(N R), 1.0) or o-ring=10 (withdrawal; default the cheapest success t*/N, 6). Proximity is "
        "measured from it.",
    ),
    max_fallback: Annotated[
        float,
        co.num_opt(
            "--max-fallback",
            "Leave a game out of the profile (and the analyses) when more than this share of its play decisions fell "
            "back, 0..1 (default 0.2).",
        ),
    ] = 0.2,
    force: bool = typer.Option(
        False, "--force", help="Start over in a directory that holds another profile (or anything else)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print profile.json to stdout."),
    quiet: co.QuietOpt = False,
) -> None:
    """Play all six games with one model and write its cooperative profile (profile.json, the
    decisions and ledger, figures/profile.png). Running the same command again continues an
    interrupted profile; finished games and cached calls are not paid twice."""
    from cooplab.cli.tasks import echo_json
    from cooplab.runs import runner
    from cooplab.runs.engine import ENGINE
    from cooplab.tasks.games import profiles as pf

    chosen = None if games is None else [g.strip() for g in games.split(",") if g.strip()]
    kind = players.strip().lower()
    llm = None
    if kind == "llm":
        llm = (
            co.llm_settings(
                dict(
                    model=model,
                    base_url=base_url,
                    temperature=temperature,
                    max_tokens=max_tokens,
                    max_concurrency=max_concurrency,
                    model_processes=model_processes,
                    rps=rps,
                    budget=budget,
                    price_in=price_in,
                    price_out=price_out,
                    cache=cache,
                    prompt_variant=prompt_variant,
                )
            )
            .resolve()
            .model_dump(mode="json")
        )
    elif prompt_variant != "original":
        fail("--prompt-variant words the LLM players' prompts; give it with --players llm")
    try:
        req = pf.request(
            games=chosen,
            players=kind,
            simulations=simulations,
            group_size=group_size,
            seed=seed,
            prompt=prompt,
            deliberation=deliberation,
            llm=llm,
            pareto_references=_references(pareto_reference),
            max_fallback=max_fallback,
            engine=ENGINE,
        )
        if kind != "llm":  # after the options' own checks: a bad --players is named first
            from cooplab.cli.tasks import refuse_llm_options

            refuse_llm_options("--players llm")
        out = pf.prepare(out, req, force=force)
    except pf.ProfileError as exc:
        fail(str(exc))

    def tell(game: str, what: str) -> None:
        if not quiet:  # stderr: --json output on stdout stays clean
            typer.echo(
                {
                    "done": f"{game}: finished earlier, read back",
                    "resume": f"{game}: resuming",
                    "start": f"{game}: playing",
                    "skipped": f"{game}: skipped (the profile stopped)",
                }[what],
                err=True,
            )

    try:
        profile = pf.run_profile(
            out,
            req,
            engine=ENGINE,
            quiet=quiet,
            on_game=tell,
            warn=lambda m: typer.echo(f"cooplab: warning: {m}", err=True),
        )
    except (runner.RunStopped, runner.RunFailed) as exc:
        typer.echo(
            f"cooplab: {exc}; profile.json holds the games played so far; run the same command again to continue",
            err=True,
        )
        raise typer.Exit(1) from None
    except (runner.runstore.RunDirError, pf.ProfileError) as exc:  # e.g. a game's directory another process is writing
        fail(str(exc))
    except KeyboardInterrupt:
        typer.echo(f"cooplab: interrupted; run the same command again to continue the profile in {out}", err=True)
        raise typer.Exit(130) from None
    if as_json:
        echo_json(profile)
        return
    for line in profile_lines(profile):
        typer.echo(line)
    typer.echo(
        f"profile directory: {out} (profile.json, decisions.*, ledger.*, figures/profile.png, cells/ (one run per "
        "game), manifest.json, table.csv)"
    )


def _references(items: Optional[list[str]]) -> dict[str, float] | None:
    """``--pareto-reference GAME=VALUE`` items -> {game: value} (the profile checks games and ranges)."""
    if not items:
        return None
    out: dict[str, float] = {}
    for item in items:
        game, sep, raw = (x.strip() for x in item.partition("="))
        if not sep or not game:
            fail(f"--pareto-reference expects GAME=VALUE (e.g. collective-risk=1.25), got {item!r}")
        if game in out:
            fail(f"--pareto-reference gives {game} twice")
        out[game] = co.Num(float, hint="the game's Pareto value of its metric").parse(f"--pareto-reference {game}", raw)
    return out


def profile_lines(profile: dict[str, Any]) -> list[str]:
    """The profile as text: one line per game (its metric with the Nash and Pareto values it is read
    against, the proximity and the share of fallback decisions; a game left out for its fallbacks
    says so), the excluded games and the totals."""
    from cooplab.tasks.games.task import reference_text

    sizes = f"groups of {profile['group_size']}" if profile.get("group_size") else "groups of 5"
    lines = [
        f"cooperative profile of {profile['label']}: {profile['simulations']} simulations per game, {sizes}, seed "
        f"{profile['seed']}, "
        f"status {profile['status']}"
    ]
    for game, e in profile["games"].items():
        m, p = e["metric"], e.get("pareto_proximity") or {}
        if m.get("mean") is None:
            lines.append(f"  {game:<16} {e['status']} ({reference_text(m)})")
            continue
        ci = m.get("ci95")
        ci_text = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
        fb = (e.get("fallback") or {}).get("share", 0.0)
        out = "" if e.get("included", True) else f"; LEFT OUT: {e.get('excluded_because', 'too many fallbacks')}"
        lines.append(
            f"  {game:<16} {m['label']} {m['mean']:.2f}{ci_text} ({reference_text(m)}); "
            f"Pareto proximity {p.get('mean', float('nan')):.2f}; fallbacks {fb:.0%}{out}"
        )
    if profile.get("excluded_games"):
        lines.append(
            f"left out of the profile (more than {profile['max_fallback']:.0%} of decisions fell back): "
            f"{', '.join(profile['excluded_games'])}"
        )
    t = profile["totals"]
    if t["decisions"]:
        lines.append(
            f"decisions {t['decisions']} (fallbacks {t['fallback_used']}), LLM calls {t['calls']} ({t['cached_calls']} "
            f"from cache), tokens in/out {t['input_tokens']}/{t['output_tokens']}, cost ${t['cost_usd']:.4f}, "
            f"games' wall time {t['wall_seconds']:.1f} s"
        )
    return lines


def profile_figure_command(
    dirs: list[Path] = typer.Argument(
        ..., help="Profile directories (or profile.json files), one per model, drawn side by side."
    ),
    out: Path = typer.Option(..., "--out", help="The figure file to write (.png, .pdf or .svg)."),
    label: Optional[list[str]] = typer.Option(
        None, "--label", help="Names on the x axis, one per directory in order (default: each profile's model)."
    ),
    model_info: Optional[Path] = typer.Option(
        None,
        "--model-info",
        help="models.csv (model,family,size_b,thinking; docs/statistics.md; 'paper': the paper's 35 models): colour by "
        "family, shape by model, size by log2 of the parameters, sorted by family and size, as the paper's Figure "
        "2.",
    ),
) -> None:
    """Draw several cooperative profiles side by side (the paper's Figure 2)."""
    from cooplab.evals.bayes import read_model_info
    from cooplab.tasks.games import profiles as pf
    from cooplab.tasks.games.figures import ModelInfoError

    if label and len(label) != len(dirs):
        fail(f"--label given {len(label)} times for {len(dirs)} profiles; give one per profile or none")
    if out.suffix.lower() not in (".png", ".pdf", ".svg"):
        fail(f"--out must end in .png, .pdf or .svg, got {out.name!r}")
    info = read_model_info(model_info)
    try:
        profiles = [pf.load_profile(d) for d in dirs]
        pf.profile_figure(profiles, out, labels=label, info=None if info is None else info.to_dict(orient="index"))
    except (pf.ProfileError, ModelInfoError) as exc:
        fail(str(exc))
    typer.echo(f"wrote {out}")
