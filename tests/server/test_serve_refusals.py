"""What a served graph refuses unless its operator opted in (issue 37, point 2), in this process: a
client of ``langgraph dev`` may not pick the unsandboxed backend, a model server of its own, a file
on the server's disk, or a paid model without a cap. Each refusal is one line naming the variable
that allows it, raised before anything is read, opened or written."""

from __future__ import annotations

from pathlib import Path

import pytest

from cooplab.limits import ConfigError
from cooplab.runs import server_graphs as sg
from tests.helpers.served import run_runtime

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "examples" / "scripted" / "cautious.json"
SMALL = {"n_agents": 2, "rounds": 2, "replicates": 1}


@pytest.fixture(autouse=True)
def no_opt_ins(monkeypatch, tmp_path):
    for variable in sg.OPT_INS:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv(sg.RUNS_ENV, str(tmp_path / "runs"))


class Untouchable:
    """A path that fails the test if anything opens, reads or stats it before the refusal."""

    def __init__(self, tmp_path: Path, monkeypatch, name: str) -> None:
        self.path = tmp_path / "secret" / name
        self.path.parent.mkdir()
        self.path.write_bytes(b"GGUF" + b"\0" * 60 if name.endswith(".gguf") else b'{"secret": 1}')
        self.touched: list[str] = []
        real_open = Path.open

        def watch_open(p, *a, **k):
            if str(p) == str(self.path):
                self.touched.append("open")
            return real_open(p, *a, **k)

        monkeypatch.setattr(Path, "open", watch_open)
        monkeypatch.setattr("builtins.open", _watching(open, self))

    def __str__(self) -> str:
        return str(self.path)


def _watching(real, watch: "Untouchable"):
    def opener(file, *a, **k):
        if str(file) == str(watch.path):
            watch.touched.append("open")
        return real(file, *a, **k)

    return opener


def refused(graph_id: str, context: dict, variable: str) -> str:
    with pytest.raises(sg.SettingsError) as e:
        getattr(sg, graph_id)(config={"configurable": {}}, runtime=run_runtime(context))
    message = str(e.value)
    assert f"{variable}=1" in message and "\n" not in message and "refuses" in message, message
    assert isinstance(e.value, ValueError)  # the server hands a ValueError's message to the client
    return message


CASES = [
    # the unsandboxed backend
    ("science", {"sandbox": {"backend": "local"}}, sg.ALLOW_LOCAL_SANDBOX, "sandbox.backend"),
    # a model server the client names
    (
        "cpr",
        {
            "agents": "llm",
            "model": "openai:gpt-4o-mini",
            "budget": 1.0,
            "llm": {"base_url": "http://attacker.example/v1"},
        },
        sg.ALLOW_CLIENT_SERVERS,
        "llm.base_url",
    ),
    (
        "cpr",
        {"agents": "llm", "model": "ollama:llama3", "llm": {"base_url": "http://127.0.0.1:9"}},
        sg.ALLOW_CLIENT_SERVERS,
        "base_url",
    ),
    # files on the server's disk
    ("cpr", {"agents": "llm", "model": f"scripted:{SCRIPTED}"}, sg.ALLOW_PATHS, "model 'scripted:"),
    ("cpr", {"agents": "llm", "model": f"  scripted:{SCRIPTED}"}, sg.ALLOW_PATHS, "scripted:"),
    (
        "cpr",
        {"agents": "llm", "llm": {"agent_models": {"1": f"scripted:{SCRIPTED}"}}},
        sg.ALLOW_PATHS,
        "llm.agent_models['1']",
    ),
    ("cpr", {"agents": "llm", "llm": {"agent_model": [f"1=scripted:{SCRIPTED}"]}}, sg.ALLOW_PATHS, "llm.agent_model"),
    ("cpr", {"options": SMALL, "llm": {"cache": "{tmp}/made-by-client.sqlite"}}, sg.ALLOW_PATHS, "llm.cache"),
    (
        "cpr",
        {"options": SMALL, "llm": {"cache": None}},
        sg.ALLOW_PATHS,
        "llm.cache",
    ),  # the operator's own default cache file
    (
        "game",
        {"options": {"game": "public-goods", "players": f"scripted:{SCRIPTED}"}},
        sg.ALLOW_PATHS,
        "options.players",
    ),
    (
        "science",
        {"options": {"dataset": "/etc/passwd", "task_file": "/etc/hostname"}},
        sg.ALLOW_PATHS,
        "options.dataset",
    ),
    ("science", {"options": {"task_file": "/etc/hostname"}}, sg.ALLOW_PATHS, "options.task_file"),
    ("science", {"options": {"truth": "/etc/hostname"}}, sg.ALLOW_PATHS, "options.truth"),
    (
        "science",
        {"options": {"task": "ecology", "team": "oracle", "judge": f"scripted:{SCRIPTED}"}},
        sg.ALLOW_PATHS,
        "options.judge",
    ),
    (
        "science",
        {"options": {"params": {"custom": {"datasets": [{"path": "/etc/passwd"}]}}}},
        sg.ALLOW_PATHS,
        "options.params.custom",
    ),
    # a paid model without a cap
    ("cpr", {"agents": "llm", "model": "openai:gpt-4o-mini"}, sg.ALLOW_UNBUDGETED, "without a budget"),
    (
        "cpr",
        {"agents": "llm", "llm": {"agent_models": {"0": "anthropic:claude-3-5-haiku-latest"}}},
        sg.ALLOW_UNBUDGETED,
        "anthropic",
    ),
    (
        "science",
        {"options": {"task": "ecology", "team": "oracle", "judge": "openai:gpt-4o-mini"}},
        sg.ALLOW_UNBUDGETED,
        "options.judge",
    ),
    # ... or under a budget that counts nothing
    (
        "cpr",
        {"agents": "llm", "model": "openai:gpt-4o-mini", "budget": 0.01, "llm": {"price_in": 0.0, "price_out": 0.0}},
        sg.ALLOW_UNBUDGETED,
        "llm.price_in",
    ),
    (
        "cpr",
        {
            "agents": "llm",
            "model": "openai:gpt-4o-mini",
            "budget": 0.01,
            "llm": {"prices": {"openai:gpt-4o-mini": [0, 0]}},
        },
        sg.ALLOW_UNBUDGETED,
        "llm.prices",
    ),
]


@pytest.mark.parametrize("graph_id, context, variable, names", CASES, ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_a_refused_setting_is_one_line_naming_its_opt_in(tmp_path, graph_id, context, variable, names):
    context = (
        {
            **context,
            "llm": {
                k: (v.format(tmp=tmp_path) if isinstance(v, str) else v) for k, v in context.get("llm", {}).items()
            },
        }
        if "llm" in context
        else context
    )
    message = refused(graph_id, context, variable)
    assert names in message, message
    assert list(tmp_path.iterdir()) == []  # no run directory, no cache file: nothing written


@pytest.mark.parametrize("spec, name", [("local:{path}", "model.gguf"), ("scripted:{path}", "answers.json")])
def test_a_model_file_is_refused_before_it_is_opened(tmp_path, monkeypatch, spec, name):
    secret = Untouchable(tmp_path, monkeypatch, name)
    for context in (
        {"agents": "llm", "model": spec.format(path=secret)},
        {"agents": "llm", "llm": {"agent_models": {"1": spec.format(path=secret)}}},
    ):
        with pytest.raises(ConfigError) as e:
            sg.cpr(config={"configurable": {}}, runtime=run_runtime(context))
        assert secret.touched == [], e.value
        assert sg.ALLOW_PATHS in str(e.value)


def test_own_data_is_refused_before_it_is_read(tmp_path, monkeypatch):
    secret = Untouchable(tmp_path, monkeypatch, "data.csv")
    with pytest.raises(ConfigError) as e:
        sg.science(
            config={"configurable": {}},
            runtime=run_runtime(
                context={"options": {"dataset": str(secret), "task_file": str(secret), "truth": str(secret)}}
            ),
        )
    assert secret.touched == [], e.value
    assert sg.ALLOW_PATHS in str(e.value)


def test_the_settings_in_the_config_are_refused_too():
    """A client that sends only a config (``config["configurable"]``) gets the same refusals."""
    with pytest.raises(sg.SettingsError, match=sg.ALLOW_LOCAL_SANDBOX):
        sg.science(config={"configurable": {"sandbox": {"backend": "local"}}}, runtime=run_runtime(None))


@pytest.mark.parametrize(
    "values, variable",
    [
        ({"sandbox_backend": "local"}, sg.ALLOW_LOCAL_SANDBOX),
        ({"base_url": "http://127.0.0.1:8080/v1", "model": "openai:x", "budget": 1}, sg.ALLOW_CLIENT_SERVERS),
        ({"model": "local:/models/x.gguf", "cache": "/tmp/c.sqlite", "dataset": ["/d.csv"]}, sg.ALLOW_PATHS),
        ({"model": "google_genai:gemini-2.0-flash"}, sg.ALLOW_UNBUDGETED),
    ],
)
def test_the_operator_opts_in_one_kind_at_a_time(monkeypatch, values, variable):
    with pytest.raises(sg.SettingsError, match=variable):
        sg.check_served(values)
    others = [v for v in sg.OPT_INS if v != variable]
    for other in others:  # another opt-in does not allow it
        monkeypatch.setenv(other, "1")
    with pytest.raises(sg.SettingsError, match=variable):
        sg.check_served(values)
    for word in ("1", "true", "YES", " on "):
        monkeypatch.setenv(variable, word)
        sg.check_served(values)


def test_what_is_served_without_any_opt_in():
    """The shipped model, built-in models, Ollama's local server, and a paid model under a budget."""
    for values in (
        {},
        {"model": "local"},
        {"model": "builtin:oracle:ecology"},
        {"model": "ollama:llama3"},
        {"model": "openai:gpt-4o-mini", "budget": 0.5},
        {"model": "anthropic:x", "budget": 0.0},
        {"judge": "openai:gpt-4o-mini", "judge_budget": 0.1},
        {"cache": "off", "sandbox_backend": "docker"},
        {"model": "builtin:oracle:ecology", "price_in": 0.0, "price_out": 0.0},
    ):
        sg.check_served(values)


@pytest.mark.parametrize("value", ["maybe", "2", "allow"])
def test_an_opt_in_that_is_neither_on_nor_off_is_one_line(monkeypatch, value):
    monkeypatch.setenv(sg.ALLOW_PATHS, value)
    with pytest.raises(ConfigError) as e:
        sg.check_served({"model": "local:/x.gguf"})
    assert sg.ALLOW_PATHS in str(e.value) and repr(value) in str(e.value) and "\n" not in str(e.value)


def test_with_the_opt_in_a_model_file_runs_as_before(tmp_path, monkeypatch):
    monkeypatch.setenv(sg.ALLOW_PATHS, "1")
    graph = sg.cpr(config={"configurable": {}}, runtime=run_runtime({"agents": "llm", "model": f"scripted:{SCRIPTED}"}))
    assert "setup" in graph.nodes


@pytest.mark.parametrize("value", [1, 2, 64, -1, "2", True])
def test_model_processes_are_refused_whatever_the_operator_allows(monkeypatch, value):
    """A request may not start worker processes on the server's machine (docs/langgraph-server.md):
    refused in the context and in the config, with every opt-in set, before anything starts."""
    for variable in sg.OPT_INS:
        monkeypatch.setenv(variable, "1")
    with pytest.raises(sg.SettingsError) as e:
        sg.cpr(config={"configurable": {}}, runtime=run_runtime({"llm": {"model_processes": value}}))
    message = str(e.value)
    assert "refuses llm.model_processes" in message and "\n" not in message
    with pytest.raises(sg.SettingsError, match="model_processes"):
        sg.cpr(config={"configurable": {"llm": {"model_processes": value}}}, runtime=run_runtime(None))
    sg.check_served({"model_processes": 0})  # 0: the server's own process, as without the setting
