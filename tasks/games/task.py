"""The six behavioral games of "cooperative profiles" (paper §3.1.1, Appendix B) as one task of the
one runner: ``cooplab run game --game NAME --players llm|nash|pareto|random|scripted:FILE ...``.

A run's settings (``config.params``; config.json's ``params``) are the game's
:class:`~cooplab.tasks.games.params.GameSettings`: the game's parameters (:mod:`.params`) and ``game`` (one of
:data:`GAMES`),
``players`` (llm | nash | pareto | random | scripted; llm exactly when the runner's ``agents`` is
llm), ``prompt`` (LLM players' condition: standard | alternate | cot | tom), ``deliberation``
(LLM players: a within-group message before each decision), ``script`` (scripted players: the validated
script itself, so the run resumes without the file; else null), ``script_file`` (where it came
from).

Run directory: ``players.*`` (one row per simulation, round and player), ``rounds.*`` (per
simulation and round: the metric, its Pareto proximity, payoffs and group outcomes),
``simulations.*`` (per simulation: metric, proximity, near-Pareto, payoff, outcomes),
``sanctions.*`` (CPR with sanctioning: every sanction), ``messages.*`` (deliberation), ``convergence.*`` (Appendix D's
bootstrap),
``summary.json`` and ``figures/run.png``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cooplab.graphs import prompts, rundir
from cooplab.graphs.rng import phase_rng
from cooplab.graphs.runfiles import RunSummary
from cooplab.graphs.task import RunInfo, Task, TaskConfig
from cooplab.tasks.games import equilibria as eq
from cooplab.tasks.games import metrics as mt
from cooplab.tasks.games import players as pl
from cooplab.tasks.games.params import GAMES, RUN_SETTINGS, GameParams, GameSettings, invader_kinds, model_of
from cooplab.tasks.games.phases import DECISION
from cooplab.tasks.games.results import GameResults
from cooplab.tasks.games.society import game_phases, init_state
from cooplab.tasks.games.state import GameState

SUMMARY_N = (1, 2, 5, 10, 20, 30, 50, 100, 200, 500)  #: sample sizes of the convergence curve kept in summary.json


def phases_for(P: GameParams, policies: Mapping[str, Any]):
    """The nodes of one round (a module-level hook: tests replace it to interrupt a run)."""
    return game_phases(P, policies)


__all__ = ["RUN_SETTINGS", "GameTask", "TASK"]

Config = TaskConfig[Any]  # params: one of GameSettings' variants (a GameParams and a GameRun)


class GameTask(Task):
    name = "game"
    title = (
        "Six behavioral games (weakest-link, cpr, cpr-sanction, collective-risk, o-ring, public-goods) with "
        "reference or LLM players."
    )
    Params = GameSettings
    Results = GameResults
    state_schema = GameState
    round_node = "settle"
    agent_noun = "Player"
    explore_whole_page = True  # its page: tasks/games/explore.py
    agent_kinds = ("rule", "llm")  # rule: the reference players; llm: --players llm (tasks/games/llm.py)

    # --- configuration ---------------------------------------------------------------------------------
    def options(
        self,
        agents: str,
        *,
        game: str | None = None,
        players: str | None = None,
        prompt: str = "standard",
        deliberation: bool = False,
        group_size: int | None = None,
        simulations: int | None = None,
        rounds: int | None = None,
        set: Any = None,  # noqa: A002
        invader: Any = None,
    ) -> dict[str, Any]:
        """``cooplab run game``'s own options: the ``game``, who plays (``players``: llm, nash (default),
        pareto, random or scripted:FILE), the LLM players' ``prompt`` and ``deliberation``, ``group_size``,
        ``simulations``, ``rounds``, ``set`` (game constants: a dict or ``name=value`` strings) and
        ``invader`` (``"KIND@K[:AGENT]"``: a player replaced at round K, tasks/games/invaders.py)."""
        import cooplab.limits as co
        from cooplab.tasks.games import players as pl

        if game is None:
            raise co.ConfigError("say which game to play with --game: one of " + ", ".join(GAMES))
        names = {
            "game": "--game",
            "players": "--players",
            "prompt": "--prompt",
            "deliberation": "--deliberation",
            "group_sizes": "--group-size",
            "simulations": "--simulations",
            "rounds": "--rounds",
        }
        values = (
            co.parse_set(set, model_of(game).model_fields, "game --game " + game)
            if isinstance(game, str) and game in GAMES
            else {}
        )
        for key in values:  # a setting given with --set is named so
            names[key] = f"--set {key}"
        label = co.flags(names, rest=lambda f: f"--set {f}")
        co.validate(GameSettings, {"game": game}, label)  # which game, before its parameters are read
        values = co.parse_set(set, model_of(game).model_fields, "game --game " + game)
        for key, v in (
            ("group_sizes", None if group_size is None else [group_size, group_size]),
            ("simulations", simulations),
            ("rounds", rounds),
        ):
            if v is not None:
                if key in values:
                    raise co.ConfigError(f"give {key} either with its option or with --set, not both")
                values[key] = v
        if players is None:
            players = "llm" if agents == "llm" else "nash"
        if not isinstance(players, str):
            raise co.ConfigError(
                f"--players must be llm, nash, pareto, random or scripted:FILE, got {co.show(players)}"
            )
        kind, _, path = players.partition(":")
        kind, path = kind.strip().lower(), path.strip()
        run: dict[str, Any] = {"game": game, "prompt": prompt, "deliberation": deliberation}

        def settings(fields: dict[str, Any], kinds_of: str) -> Any:
            """The run's settings, with the invader (checked against the society they describe) when one is given."""
            out = co.validate(GameSettings, fields, label, context={"agents": kinds_of})
            if invader is None:
                return out
            from cooplab.graphs import invaders

            fields = {
                **fields,
                "invader": invaders.parse(
                    invader,
                    n_agents=out.n_players,
                    rounds=out.rounds,
                    agents=kinds_of,
                    kinds=invader_kinds(kinds_of == "llm"),
                ),
            }
            return co.validate(GameSettings, fields, label, context={"agents": kinds_of})

        if kind == "llm" and not path:
            return {"agents": "llm", "params": settings({**values, **run, "players": "llm"}, "llm")}
        if agents == "llm":
            raise co.ConfigError(f"--agents llm plays LLM players; it cannot be combined with --players {players}")
        if kind not in pl.KINDS or (kind == "scripted") != bool(path):
            raise co.ConfigError(f"--players must be llm, nash, pareto, random or scripted:FILE, got {players!r}")
        script = None
        if kind == "scripted":
            P = co.validate(GameSettings, {**values, "game": game}, label)  # the game the script is checked against
            try:
                script = pl.load_script(path, P)
            except pl.ScriptError as exc:
                raise co.ConfigError(str(exc)) from None
        return {
            "params": settings(
                {**values, **run, "players": kind, "script": script, "script_file": path or None}, agents
            )
        }

    # --- the graph ---------------------------------------------------------------------------------------
    def policies(self, config: Config) -> dict[str, Any]:
        P = config.params
        if P.players == "llm":
            from cooplab.tasks.games.llm import llm_policies

            return llm_policies(
                P,
                P.prompt,
                P.deliberation,
                prompts.variant_of(config),
                P.invader.as_dict() if P.invader is not None else None,
            )
        from cooplab.tasks.games.invaders import with_invader

        return with_invader(
            P, pl.policies(P.players, P, P.script), P.invader.as_dict() if P.invader is not None else None
        )

    def phases(self, config: Config):
        return phases_for(config.params, self.policies(config))

    def llm_phases(self, config: Config) -> list[str] | None:
        """LLM players are asked in every node of a round but ``settle`` (the decision, CPR's
        sanctions, the deliberation)."""
        if config.params.players != "llm":
            return None
        return [node for node in self.phases(config) if node != "settle"]

    def init_state(self, config: Config) -> dict[str, Any]:
        return init_state(config.params, config.seed)

    #: settings a fork keeps from its parent: who plays and the shapes of the state's arrays (groups, simulations)
    FORK_FIXED = ("game", "players", "script", "script_file", "group_sizes", "simulations", "invader")

    def fork_state(self, state: Mapping[str, Any], old: Config, new: Config) -> dict[str, Any]:
        """A fork's changed settings: the game's constants live in the config, not the state, so the
        rounds after the fork compute with the new ones as they are (the nodes are built from the
        fork's config); a changed ``rounds`` moves the state's round cap. :data:`FORK_FIXED` cannot
        change (one line naming the setting), nor can the cap end before the fork's first round."""
        from cooplab.graphs.forks import check_rounds, refuse_fixed

        refuse_fixed(old.params, new.params, self.FORK_FIXED, state, task=f"game ({old.params.GAME})")
        check_rounds(old.params.rounds, new.params.rounds, state, "rounds")
        return {"max_round": int(new.params.rounds)} if new.params.rounds != old.params.rounds else {}

    # --- results -----------------------------------------------------------------------------------------
    def outputs(self, final: Mapping[str, Any], config: Config, run: RunInfo) -> GameResults:
        P = config.params
        history = list(final.get("history") or [])
        group = eq.groups_of(P)
        fallbacks = mt.fallback_masks(P, history, final.get("decisions"), DECISION[P.GAME])
        tables = {
            "players": mt.player_table(P, history, group, fallbacks),
            "rounds": mt.round_table(P, history, fallbacks),
            "simulations": mt.simulation_table(P, history, fallbacks),
        }
        if P.GAME == "cpr-sanction":
            tables["sanctions"] = mt.sanction_table(history)
        messages = list(final.get("messages") or [])
        if messages:
            from cooplab.graphs.tables import with_agent_ids

            # model text: cleaned of lone surrogates as the frame is made
            tables["messages"] = with_agent_ids(rundir.frame(messages), "simulation", "player")
        conv = None
        if history:
            conv = mt.bootstrap_convergence(
                tables["simulations"]["metric"], resamples=200, rng=phase_rng(config.seed, 0, "bootstrap")
            )
            tables["convergence"] = conv
        for stem, df in tables.items():
            if len(df.columns):
                rundir.write_table(df, run.out, stem, csv=run.csv)
        summary: dict[str, Any] = {
            "game": P.GAME,
            "players": P.players,
            "script_file": P.script_file,
            "decision": DECISION[P.GAME],
            "group_sizes": list(P.group_sizes),
            "n_players": P.n_players,
            "rounds": P.rounds,
            "simulations": P.simulations,
        }
        if P.players == "llm":
            summary.update(prompt=P.prompt, deliberation=P.deliberation, messages=len(messages))
        summary.update(
            mt.summarize(
                P, history, tables["simulations"], conv if conv is not None else mt.bootstrap_convergence([]), fallbacks
            )
        )
        summary.update(_mix_and_invader(P, history, config, run))
        if "convergence" in summary:
            keep = [i for i, n in enumerate(summary["convergence"]["n"]) if n in SUMMARY_N or n == P.simulations]
            summary["convergence"] = {
                k: (v if k == "resamples" else [v[i] for i in keep]) for k, v in summary["convergence"].items()
            }
        return GameResults.of(summary)

    def figure(self, summary: RunSummary[GameResults], run: RunInfo) -> None:
        if summary.results is None or not summary.results.rounds_completed:
            return
        from cooplab.tasks.games.figures import run_figure

        run_figure(
            rundir.read_table(run.out, "rounds"),
            rundir.read_table(run.out, "convergence"),
            summary.as_json(),
            run.out / "figures" / "run.png",
        )
        from cooplab.tasks.games.mix import figures as mix_figures

        mix_figures(summary.as_json(), run.out / "figures")

    def report(self, summary: RunSummary[GameResults]) -> list[str]:
        r = summary.results
        if r is None:
            return super().report(summary)
        m, p = r.metric, r.pareto_proximity
        sizes = " + ".join(str(k) for k in r.group_sizes)
        who = r.players
        if who == "llm":
            who = f"LLM ({r.prompt} prompt{', deliberation' if r.deliberation else ''})"
        head = (
            f"{r.game}: {who} players, groups {sizes}, {r.rounds_completed}/{r.rounds} rounds, {r.simulations} "
            "simulations"
        )
        if m.mean is None or p is None or p.mean is None or r.payoff is None:
            return [f"{head}: no round completed (status {summary.status})"]
        ci = m.ci95
        ci_text = f" [95% CI {ci[0]:.3f}, {ci[1]:.3f}]" if ci and all(x is not None for x in ci) else ""
        raw = p.raw_distance_mean if p.raw_distance_mean is not None else p.mean
        near = f"{p.near_pareto_share:.2f}" if p.near_pareto_share is not None else "n/a"
        pay = r.payoff
        lines = [
            f"{head}",
            f"mean {m.label} {m.mean:.3f}{ci_text} ({reference_text(m.model_dump())}); Pareto proximity "
            f"{p.mean:.3f} (0 = Pareto, 1 = Nash or further; uncapped distance {raw:.3f}), near-Pareto share {near}",
            f"mean payoff per player {pay.mean_total_per_player or 0.0:.3f} over the game "
            f"({pay.mean_per_player_per_round or 0.0:.3f} per round)",
        ]
        oc = r.outcomes
        if (
            oc.threshold_met_rate is not None
            and oc.savings_lost_rate is not None
            and oc.expected_payoff_per_player is not None
        ):
            lines.append(
                f"threshold met in {oc.threshold_met_rate:.2f} of simulations, savings lost in "
                f"{oc.savings_lost_rate:.2f}; "
                f"expected payoff per player {oc.expected_payoff_per_player:.3f}"
            )
        if oc.success_rate is not None:
            lines.append(f"O-Ring success in {oc.success_rate:.2f} of rounds")
        if oc.sanctions is not None:
            s = oc.sanctions
            lines.append(
                f"sanction tokens per player and round: given {s.tokens_given_per_player_round or 0.0:.3f}, received "
                f"{s.tokens_received_per_player_round or 0.0:.3f}"
            )
        from cooplab.tasks.games.mix import report_lines

        whole = summary.as_json()
        lines += report_lines(whole)
        extra = ", sanctions.*" if r.game == "cpr-sanction" else ""
        if whole.get("by_model"):
            extra += ", by_model.*, crossplay.*"
        if r.players == "llm":
            d = summary.decisions
            share = r.fallback.share if r.fallback is not None else 0.0
            lines.append(
                f"LLM decisions: {d.count if d else 0}, fallbacks {d.fallback_used if d else 0}, mean attempts "
                f"{d.mean_attempts if d else 1.0:.2f}; {share:.1%} of the play decisions fell back "
                f"(flagged in the tables' fallback column; they count in the metric)"
            )
            extra += ", decisions.*, ledger.*" + (", messages.*" if r.messages else "")
        lines.append(f"tables: summary.json, players.*, rounds.*, simulations.*{extra}, convergence.*, figures/run.png")
        return lines

    def analyze_sweep(
        self, cells: list[dict[str, Any]], out: Any, *, analysis_out: Any = None
    ) -> dict[str, Any] | None:
        """A game profile's folder (its manifest's kind is "profile": ``cooplab profile``): its
        profile.json, merged tables and figure (:func:`cooplab.tasks.games.profiles.analyze`); any
        other sweep: the cells' per-model rows, cross-play and invasions side by side (when any
        cell has them)."""
        from cooplab.graphs.runfiles import read_manifest

        if (Path(out) / "manifest.json").is_file() and read_manifest(Path(out)).kind == "profile":
            from cooplab.tasks.games.profiles import analyze

            return analyze(Path(out))
        if not cells:
            return None
        from cooplab.evals.mixsweep import analyze_mixed_cells

        return analyze_mixed_cells(cells, out, analysis_out=analysis_out)

    # --- the run explorer: tasks/games/explore.py -----------------------------------------
    def explore(self, run: Any, query: Mapping[str, str]) -> list[Any]:
        from cooplab.tasks.games.explore import view

        return view(run, query)

    def key_numbers(self, summary: RunSummary[Any]) -> dict[str, Any]:
        from cooplab.tasks.games.explore import key_numbers

        return key_numbers(summary.as_json())


def reference_text(metric: Mapping[str, Any]) -> str:
    """ "Nash 0, Pareto 1 (fair share T/(N R))": the references a metric is read against."""
    basis = metric.get("pareto_basis")
    return f"Nash {metric['nash']:g}, Pareto {metric['pareto']:g}" + (
        f" ({basis})" if basis and basis != "derived" else ""
    )


def _mix_and_invader(P: Any, history: list, config: Config, run: RunInfo) -> dict[str, Any]:
    """Players of several models: per-model outcomes and cross-play (tables ``by_model``,
    ``crossplay``); an invader: its effect (tasks/games/mix.py). Nothing for a run with neither."""
    from cooplab.tasks.games import mix

    out: dict[str, Any] = {}
    if not history:
        return out
    llm = config.llm.model_dump(mode="json") if config.llm is not None else None
    if P.players == "llm" and llm and len({mix.model_of(llm, a) for a in range(P.n_players)}) > 1:
        by_model, cross = mix.per_model(P, history, llm)
        rundir.write_table(by_model, run.out, "by_model", csv=run.csv)
        rundir.write_table(cross, run.out, "crossplay", csv=run.csv)
        out["by_model"], out["crossplay"] = by_model, cross
    if P.invader is not None:
        out["invasion"] = mix.invader_effect(P, history, P.invader.as_dict())
    return out


TASK = GameTask()
