"""Typed settings inside, one validation system (issue "Worlds own their folder, typed end to end", step 2).

- Every bound is declared once: each number of every settings model (the LLM and sandbox
  settings, the run's own, each built-in task's ``Params`` and their parts) carries one rule of the
  caps table :data:`cooplab.limits.RULES` (or that rule narrowed), and no other bound.
- A bad value is one line naming its place, whatever the entry point: the option on the command
  line, the keyword in Python, the field of a sweep file, the field of a damaged config.json.
- Task hooks receive the typed configuration: a test task asserts the types in every hook, for a
  new run, a resumed one and an LLM one.
- config.json is written from the typed configuration and read back into it, the same JSON (key
  order included) as the code before the change wrote (``data/typed/configs.json``, made by it).
"""

from __future__ import annotations

import json
import shutil
import typing
from pathlib import Path
from typing import Any, TypedDict

import annotated_types
import pytest
from pydantic import BaseModel, Field

import cooplab
from cooplab.agents.settings import LLMSettings
from cooplab.cli import main
from cooplab.graphs.task import RunInfo, Task
from cooplab.limits import RULES, ConfigError, Num, explain, flags, for_python, in_file
from cooplab.runs import registry
from cooplab.runs.config import RunConfig, SandboxSettings
from cooplab.tasks.games.params import GameSettings

ROOT = Path(__file__).resolve().parents[2]
PINNED = Path(__file__).parent / "data" / "typed" / "configs.json"


# --- every bound declared once --------------------------------------------------------------------
def _models() -> dict[str, type[BaseModel]]:
    """Every settings model of the engine and the built-in tasks (variants and nested models too)."""
    found: dict[str, type[BaseModel]] = {
        "LLMSettings": LLMSettings,
        "SandboxSettings": SandboxSettings,
        "RunConfig": RunConfig,
    }
    todo = [registry.get(name).Params for name in registry.BUILTIN]
    while todo:
        model = todo.pop()
        if model is None or model.__name__ in found:
            continue
        found[model.__name__] = model
        todo += list((getattr(model, "variants", None) or {}).values())
        for f in model.model_fields.values():
            todo += [t for t in _leaves(f.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
    return found


def _leaves(annotation: Any) -> list[Any]:
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Annotated:
        return _leaves(args[0])
    return [a for arg in args for a in _leaves(arg)] if args else [annotation]


def _numbers(annotation: Any, metadata: list[Any]) -> list[tuple[Any, list[Any]]]:
    """(number type, its constraints) of every number a field holds, inside lists, tuples, dicts and Optional."""
    if typing.get_origin(annotation) is typing.Annotated:
        base, *meta = typing.get_args(annotation)
        return _numbers(base, [*metadata, *meta])
    if typing.get_origin(annotation) is typing.Literal:
        return []
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if args and typing.get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        if all(a in (int, float) for a in args):
            return [(args[0], metadata)]
        return [n for a in args for n in _numbers(a, metadata)]
    if typing.get_origin(annotation) is dict:  # a dict's keys are identifiers (agent numbers), not quantities
        args = args[1:]
    if args:  # list[X], tuple[X, Y], dict[K, V]: the constraints of the container are not the items'
        return [n for a in args for n in _numbers(a, [])]
    if annotation in (int, float):
        return [(annotation, metadata)]
    return []


def bounds_not_from_the_caps_table(model: type[BaseModel]) -> list[str]:
    """What in ``model`` bounds a number otherwise than by one rule of RULES (each field's problems)."""
    bad = []
    for name, f in model.model_fields.items():
        for _kind, meta in _numbers(f.annotation, list(f.metadata)):
            rules = [m for m in meta if isinstance(m, Num)]
            others = [
                m
                for m in meta
                if isinstance(m, (annotated_types.BaseMetadata, annotated_types.GroupedMetadata))
                and not isinstance(m, annotated_types.Len)
            ]
            if len(rules) != 1:
                bad.append(f"{model.__name__}.{name}: {len(rules)} rules of the caps table")
                continue
            rule = rules[0]
            cap = RULES.get(rule.name)
            if (
                cap is None
                or (cap.lo is not None and (rule.lo is None or rule.lo < cap.lo))
                or (cap.hi is not None and (rule.hi is None or rule.hi > cap.hi))
                or cap.kind is not rule.kind
            ):
                bad.append(f"{model.__name__}.{name}: a rule that is not the caps table's {rule.name!r} (or inside it)")
            if others:
                bad.append(f"{model.__name__}.{name}: bounded again by {others}")
    return bad


def test_every_number_of_every_settings_model_takes_its_bound_from_the_caps_table():
    models = _models()
    assert {
        "CPRSettings",
        "DinersParams",
        "Meal",
        "GameSettings",
        "PublicGoodsGameSettings",
        "ScienceSettings",
        "Judge",
    } <= set(models)
    problems = [p for m in models.values() for p in bounds_not_from_the_caps_table(m)]
    assert problems == []
    used = {
        rule.name
        for m in models.values()
        for f in m.model_fields.values()
        for _, meta in _numbers(f.annotation, list(f.metadata))
        for rule in meta
        if isinstance(rule, Num)
    }
    assert {
        "seed",
        "n-agents",
        "rounds",
        "replicates",
        "budget",
        "max-tokens",
        "sandbox-timeout",
        "param",
        "tokens",
    } <= used
    for name, rule in RULES.items():  # the table names itself
        assert rule.name == name


def test_the_walk_finds_a_bound_written_twice_or_by_hand():
    from typing import Annotated

    class Planted(BaseModel):
        by_hand: float = Field(1.0, ge=0, le=5)  # a bound that is not the table's
        twice: Annotated[int, RULES["rounds"]] = Field(3, le=100)  # the table's, then another
        widened: Annotated[int, Num(int, 0, 10**9, name="rounds")] = 3  # calls itself a cap but is wider
        fine: Annotated[float, RULES["param"].within(0)] = 1.0

    problems = bounds_not_from_the_caps_table(Planted)
    assert [p.split(":")[0] for p in problems] == ["Planted.by_hand", "Planted.twice", "Planted.widened"]
    with pytest.raises(ValueError, match="only narrow"):
        RULES["share"].within(-1)


# --- one formatter, every place -------------------------------------------------------------------
def test_one_error_named_as_each_place_names_it():
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as e:
        LLMSettings(budget=float("nan"))
    rule = "a finite number in [0, 1000000] (USD; omit it for no cap)"
    assert explain(e.value, flags()) == f"--budget must be {rule}, got nan"
    assert for_python(explain(e.value, flags())) == f"budget must be {rule}, got nan"
    assert explain(e.value, in_file("run/config.json", "llm")) == f"run/config.json: llm.budget must be {rule}, got nan"


def _fails(capsys, args) -> str:
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("cooplab: error: "), err
    return err.strip().removeprefix("cooplab: error: ")


def test_a_bad_value_names_the_option_the_keyword_the_sweep_field_and_the_file_field(tmp_path, capsys):
    rule = "a finite number in (0, 1e12]"
    # the command line: the option as typed
    assert (
        _fails(capsys, ["run", "cpr", "--set", "K=-1", "--out", str(tmp_path / "a")])
        == f"--set K must be {rule}, got -1"
    )
    assert _fails(capsys, ["run", "diners", "--pk", "3:1", "--beta", "5000", "--out", str(tmp_path / "a")]).startswith(
        "--beta must be a finite number in [0, 1000]"
    )
    # Python: the keyword
    with pytest.raises(ConfigError) as e:
        cooplab.run(task="cpr", set={"K": -1}, out=tmp_path / "b", quiet=True)
    assert str(e.value) == f"set K must be {rule}, got -1"
    with pytest.raises(ConfigError) as e:
        cooplab.run(task="diners", replicates=0, out=tmp_path / "b", quiet=True)
    assert str(e.value) == "replicates must be an integer in 1..100000, got 0"
    with pytest.raises(ConfigError) as e:
        cooplab.run(task="cpr", replicates=100_000, n_agents=1000, out=tmp_path / "b", quiet=True)
    assert str(e.value).startswith("replicates x n_agents must be at most 10,000,000 (memory)")
    # a sweep file: its cell and the keyword it sets
    sweep = tmp_path / "s.json"
    sweep.write_text(json.dumps({"task": "diners", "out": "sw", "fixed": {"iterations": 2}, "grid": {"beta": [1, -2]}}))
    said = _fails(capsys, ["sweep", str(sweep)])
    assert said.startswith(f"sweep config {sweep}: cell ") and said.endswith(
        "beta must be a finite number in [0, 1000] (selection strength of the Fermi rule), got -2"
    )
    assert not (tmp_path / "sw").exists()
    # a damaged config.json: the file and the field
    run = cooplab.run(task="diners", replicates=2, iterations=2, out=tmp_path / "r", quiet=True)
    cfg = json.loads((run.out / "config.json").read_text())
    cfg["params"]["meal"]["c_b"] = -4
    (run.out / "config.json").write_text(json.dumps(cfg))
    said = _fails(capsys, ["resume", str(run.out)])
    assert said.startswith(f"{run.out}/config.json: params.meal.c_b must be a finite number in [0, 1e12], got -4;")


# --- hooks receive the typed configuration ----------------------------------------------------------
class CountParams(BaseModel):
    steps: int = 2
    label: str = "x"


class CountState(TypedDict, total=False):
    round: int
    max_round: int
    total: int


SEEN: list[str] = []


def _typed(hook: str, config: Any, agents: str | None) -> None:
    assert isinstance(config, RunConfig) and config.resolved, hook
    assert isinstance(config.params, CountParams), hook
    assert config.agents == agents and isinstance(config.seed, int) and isinstance(config.record, dict), hook
    assert isinstance(config.llm, LLMSettings) if agents == "llm" else config.llm is None, hook
    assert config.sandbox is None, hook
    SEEN.append(hook)


class CountTask(Task):
    """A task whose every hook checks that it was handed the typed configuration."""

    name = "typed-count"
    title = "counts to params.steps"
    Params = CountParams
    state_schema = CountState
    round_node = "step"

    def n_agents(self, config):
        _typed("n_agents", config, config.agents)
        return 2

    def llm_phases(self, config):
        _typed("llm_phases", config, "llm")
        return None

    def prepare_run(self, config, out):
        _typed("prepare_run", config, config.agents)

    def phases(self, config):
        _typed("phases", config, config.agents)
        return {"step": lambda s: {"total": s["total"] + 1, "round": s["round"] + 1}}

    def init_state(self, config):
        _typed("init_state", config, config.agents)
        return {"round": 1, "max_round": config.params.steps, "total": 0}

    def total_rounds(self, config):
        _typed("total_rounds", config, config.agents)
        return config.params.steps

    def outputs(self, final, config, run: RunInfo) -> dict[str, Any]:
        _typed("outputs", config, config.agents)
        return {"total": final["total"], "label": config.params.label}


def test_every_hook_receives_the_typed_configuration_new_resumed_and_llm(tmp_path, monkeypatch):
    task = CountTask()
    monkeypatch.setitem(registry._CACHE, task.name, task)
    SEEN.clear()
    run = cooplab.run(task=task.name, set={"steps": 3}, out=tmp_path / "rule", quiet=True)
    assert run.summary["total"] == 3 and {"phases", "init_state", "outputs", "prepare_run"} <= set(SEEN)
    SEEN.clear()
    (run.out / "summary.json").unlink()
    assert cooplab.resume(run.out, quiet=True).summary["total"] == 3 and "outputs" in SEEN
    SEEN.clear()
    shutil.copy(ROOT / "examples" / "scripted" / "cautious.json", tmp_path / "s.json")
    run = cooplab.run(
        task=task.name,
        agents="llm",
        model=f"scripted:{tmp_path / 's.json'}",
        cache="off",
        out=tmp_path / "llm",
        quiet=True,
    )
    assert run.summary["status"] == "completed" and {"n_agents", "llm_phases", "outputs"} <= set(SEEN)


# --- config.json: the same JSON, written from the typed configuration and read back into it --------
GAME_SCRIPT = {
    "select": "prompt_hash",
    "by_phase": {
        "extract": ['{"extract": 2}', '{"extract": 5}', '{"extract": 10}'],
        "deliberate": ['{"message": "hi"}'],
    },
}
#: name -> (task, keywords of RunConfig.from_keywords) of data/typed/configs.json (written by the code of 2026-11-27)
CASES = {
    "cpr-rule": ("cpr", dict(agents="rule", n_agents=5, rounds=6, replicates=3, seed=2)),
    "cpr-preset": (
        "cpr",
        dict(
            agents="rule",
            n_agents=5,
            rounds=2,
            replicates=2,
            seed=2,
            preset="v1",
            env="rich",
            population="selfish",
            set={"beta": 14},
        ),
    ),
    "cpr-llm": (
        "cpr",
        dict(
            agents="llm",
            model="scripted:cautious.json",
            n_agents=3,
            rounds=3,
            seed=1,
            cache="off",
            budget=1.0,
            agent_model=["1=scripted:greedy.json"],
        ),
    ),
    "diners-rule": ("diners", dict(iterations=5, replicates=4, seed=3, pk="6:1")),
    "diners-groups": ("diners", dict(iterations=2, replicates=2, seed=3, groups="M,P,E;E,R1,D")),
    "game-nash": ("game", dict(game="public-goods", simulations=4, rounds=3, seed=0)),
    "game-scripted": (
        "game",
        dict(game="weakest-link", players="scripted:wl.json", simulations=2, rounds=2, group_size=3, seed=0),
    ),
    "game-llm": (
        "game",
        dict(
            agents="llm",
            game="cpr",
            model="scripted:game.json",
            simulations=2,
            rounds=2,
            group_size=3,
            seed=4,
            cache="off",
            deliberation=True,
            prompt="cot",
        ),
    ),
    "science-oracle": (
        "science",
        dict(agents="llm", team="oracle", task="anomaly", seed=5, sandbox_backend="local", cache="off"),
    ),
}


@pytest.fixture
def files(tmp_path, monkeypatch):
    for f in ("cautious.json", "greedy.json"):
        shutil.copy(ROOT / "examples" / "scripted" / f, tmp_path / f)
    (tmp_path / "game.json").write_text(json.dumps(GAME_SCRIPT))
    (tmp_path / "wl.json").write_text(json.dumps({"rounds": [{"actions": [1, 2, 3, 4, 5, 6]}]}))
    monkeypatch.chdir(tmp_path)


def test_config_json_is_what_the_code_before_the_types_wrote_and_reads_back_the_same(files):
    pinned = json.loads(PINNED.read_text())
    assert set(pinned) == set(CASES)
    for name, (task, kw) in CASES.items():
        config = RunConfig.from_keywords(task, **kw).resolve()
        params_class = registry.get(task).Params
        assert params_class is not None, name
        if task == "game":
            assert issubclass(params_class, GameSettings), name
            params_class = params_class.variants[config.params.game]
        assert isinstance(config.params, params_class), name
        written = config.to_json()
        assert json.dumps(written) == json.dumps(pinned[name]), name  # the same keys in the same order
        back = RunConfig.load(json.loads(json.dumps(written)))
        assert back.to_json() == written and type(back.params) is type(config.params), name


def test_a_value_of_a_stored_config_is_read_by_the_same_rule_as_a_new_one(files):
    pinned = json.loads(PINNED.read_text())
    for field, bad in (
        ("replicates", 0),
        ("N", 1),
        ("T", 10**6),
        ("alpha", 1.5),
        ("population", "nobody"),
        ("punishment", 1),
    ):
        cfg = json.loads(json.dumps(pinned["cpr-rule"]))
        cfg["params"][field] = bad
        with pytest.raises(ConfigError) as e:
            RunConfig.load(cfg, where="c.json")
        assert str(e.value).startswith(f"c.json: params.{field} must be "), str(e.value)


def test_a_mix_and_an_invader_are_settings_of_the_one_system(files):
    """model_mix and model_from are typed fields of LLMSettings (a count by the caps table's rule,
    the sum checked against the society on resolve), the invader a typed field of the CPR and game
    settings: each bad value is one line naming its place, from a keyword and from a file."""
    from cooplab.graphs.invaders import Invader

    assert "mix-count" in {
        m.name for _, meta in _numbers(LLMSettings.model_fields["model_mix"].annotation, []) for m in meta
    }
    config = RunConfig.from_keywords(
        "cpr",
        agents="llm",
        model_mix={"scripted:cautious.json": 1, "scripted:greedy.json": 2},
        n_agents=3,
        rounds=3,
        cache="off",
        invader="model:scripted:greedy.json@2:0",
    ).resolve()
    assert isinstance(config.params.invader, Invader) and config.params.invader.round == 2
    assert config.llm is not None
    assert config.llm.model_from == {"0@2": "scripted:greedy.json"} and sorted(config.llm.agent_models) == [0, 1, 2]
    written = config.to_json()
    for where, bad, words in (
        (
            ("llm", "model_mix"),
            {"scripted:cautious.json": True, "scripted:greedy.json": 2},
            "c.json: llm.model_mix['scripted:cautious.json'] must be an integer in 0..",
        ),
        (("llm", "model_mix"), {"scripted:cautious.json": 2, "scripted:greedy.json": 2}, "add up to 4"),
        (("llm", "model_from"), {"7@2": "scripted:greedy.json"}, "c.json: llm.model_from['7@2']: agent must be"),
        (
            ("params", "invader"),
            {"kind": "model", "round": 9, "agent": "0", "model": "scripted:greedy.json"},
            "c.json: params.invader: the round K must be a whole number in 2..3",
        ),
        (
            ("params", "invader"),
            {"kind": "model", "round": 1.5, "agent": "0", "model": None},
            "c.json: params.invader.round must be an integer",
        ),
    ):
        cfg = json.loads(json.dumps(written))
        cfg[where[0]][where[1]] = bad
        with pytest.raises(ConfigError) as e:
            RunConfig.load(cfg, where="c.json")
        assert words in str(e.value) and "\n" not in str(e.value), str(e.value)
    with pytest.raises(ConfigError, match=r"^model_mix\.x must be an integer"):
        cooplab.run(task="cpr", agents="llm", model_mix={"x": 1.5}, n_agents=3, out="never", quiet=True)
    with pytest.raises(ConfigError, match="invader"):
        cooplab.run(task="game", game="public-goods", invader="defector@9", out="never", quiet=True)
    assert not Path("never").exists()
