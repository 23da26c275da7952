"""Hosted providers (issue 28, items 1-3): ``anthropic:``, ``google_genai:`` and ``ollama:`` specs
next to ``openai:`` (one table, agents/providers.py); a missing integration package or API key is one
line and exit 2 before anything is made, for a run, a sweep and a science judge; each provider's
native structured output (Anthropic: a forced tool; Google: a JSON response schema; Ollama:
``format``) and seed; its usage checked by the same rules as the OpenAI path; its SDK's errors
classified as transient or permanent. The servers are the loopback fakes of tests/fakes (real HTTP,
each provider's own wire format, driven through its own SDK)."""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.messages import HumanMessage

from cooplab.agents.calls import AnthropicAdapter, GoogleAdapter, OllamaAdapter, adapter_type, endpoint_failure
from cooplab.agents.decisions import LLMService, ModelUnavailable
from cooplab.agents.models import ModelSpecError, check_model, make_chat_model, parse_model_spec
from cooplab.agents.providers import PROVIDERS
from cooplab.cli import main
from cooplab.evals.typed import as_frame, tuples
from cooplab.limits import ConfigError, in_file, validate
from tests.fakes.anthropic_server import AnthropicServer
from tests.fakes.google_server import GoogleServer
from tests.fakes.ollama_server import OllamaServer
from tests.helpers.cli import fail_line

SERVERS = {"anthropic": AnthropicServer, "google_genai": GoogleServer, "ollama": OllamaServer}
KEYS = {"anthropic": "ANTHROPIC_API_KEY", "google_genai": "GOOGLE_API_KEY"}
EXTRAS = {
    "anthropic": ("anthropic", "langchain_anthropic"),
    "google_genai": ("google", "langchain_google_genai"),
    "ollama": ("ollama", "langchain_ollama"),
}
SCHEMA = {
    "type": "object",
    "properties": {"effort": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["effort"],
}


@pytest.fixture(autouse=True)
def no_keys(monkeypatch, tmp_path):
    for var in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "GOOGLE_API_KEY",
        "GEMINI_API_KEY",
        "OLLAMA_HOST",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


# --- item 1: specs, keys, packages ---------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    ["anthropic:claude-3-5-haiku-latest", "google_genai:gemini-2.0-flash", "ollama:llama3", "openai:gpt-4o-mini"],
)
def test_provider_model_specs_parse(text):
    spec = parse_model_spec(text, base_url="http://127.0.0.1:9")
    assert spec.id == text and spec.kind in PROVIDERS and spec.name == text.split(":", 1)[1]


@pytest.mark.parametrize(
    "text, says",
    [
        ("mistral:large", "unknown model provider 'mistral'"),
        ("claude-3", "unknown model 'claude-3'"),
        ("anthropic:", "names no model"),
    ],
)
def test_an_unknown_provider_is_one_line_listing_the_known_ones(text, says):
    with pytest.raises(ModelSpecError) as e:
        parse_model_spec(text)
    msg = str(e.value)
    assert says in msg and "\n" not in msg
    if "names no model" not in msg:
        assert all(f"{k}:NAME" in msg for k in ("openai", "anthropic", "google_genai", "ollama"))


def test_each_provider_builds_its_own_adapter(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    for kind, adapter in (("anthropic", AnthropicAdapter), ("google_genai", GoogleAdapter), ("ollama", OllamaAdapter)):
        assert adapter_type(make_chat_model(parse_model_spec(f"{kind}:m"))) is adapter


def test_ollama_needs_no_key_and_honours_ollama_host(monkeypatch):
    check_model("ollama:llama3")  # no key, no error
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:9")
    assert parse_model_spec("ollama:llama3").endpoint() == "http://127.0.0.1:9"
    monkeypatch.delenv("OLLAMA_HOST")
    assert parse_model_spec("ollama:llama3").endpoint() is None  # the default server: http://localhost:11434
    assert parse_model_spec("ollama:llama3", base_url="http://127.0.0.1:7/").endpoint() == "http://127.0.0.1:7"


@pytest.mark.parametrize("kind", ["anthropic", "google_genai"])
def test_a_run_without_the_providers_key_is_one_line_and_creates_nothing(tmp_path, capsys, kind):
    out = tmp_path / "run"
    line = fail_line(
        capsys, ["run", "cpr", "--agents", "llm", "--model", f"{kind}:m", "--n-agents", "2", "--out", str(out)]
    )
    assert f"{kind}:m needs {KEYS[kind]}" in line and "--base-url" in line and not out.exists()


@pytest.mark.parametrize("kind", ["anthropic", "google_genai", "ollama"])
def test_a_run_without_the_providers_package_is_one_line_and_creates_nothing(tmp_path, capsys, monkeypatch, kind):
    extra, module = EXTRAS[kind]
    monkeypatch.setitem(__import__("sys").modules, module, None)  # as if not installed
    out = tmp_path / "run"
    line = fail_line(
        capsys,
        [
            "run",
            "cpr",
            "--agents",
            "llm",
            "--model",
            f"{kind}:m",
            "--base-url",
            "http://127.0.0.1:9",
            "--n-agents",
            "2",
            "--out",
            str(out),
        ],
    )
    assert f"pip install cooplab[{extra}]" in line and module in line and not out.exists()


def test_a_sweep_without_the_key_is_one_line_and_creates_nothing(tmp_path, capsys):
    cfg = tmp_path / "sweep.json"
    cfg.write_text(
        json.dumps(
            {
                "out": str(tmp_path / "sweep"),
                "agents": "llm",
                "models": ["anthropic:claude-3-5-haiku-latest"],
                "trials": 1,
                "n_agents": 2,
                "rounds": 1,
            }
        )
    )
    line = fail_line(capsys, ["sweep", str(cfg)])
    assert "needs ANTHROPIC_API_KEY" in line and not (tmp_path / "sweep").exists()


@pytest.mark.parametrize(
    "judge, says",
    [
        ("anthropic:claude-3-5-haiku-latest", "needs ANTHROPIC_API_KEY"),
        ("google_genai:gemini-2.0-flash", "needs GOOGLE_API_KEY or GEMINI_API_KEY"),
    ],
)
def test_scoring_with_a_provider_judge_without_its_key_is_one_line(tmp_path, capsys, judge, says):
    d = tmp_path / "run"
    (d / "dataset").mkdir(parents=True)
    (d / "scores.json").write_text("{}")
    (d / "config.json").write_text(
        json.dumps({"version": 2, "task": "science", "llm": {"model": "builtin:science-oracle:ecology"}})
    )
    line = fail_line(capsys, ["science", "score", str(d), "--judge", judge])
    assert line.startswith(f"cooplab: error: --judge: {judge} {says}") and "internal error" not in line


def test_a_key_in_the_environment_or_a_server_of_ones_own_is_enough(monkeypatch):
    with pytest.raises(ConfigError):
        check_model("anthropic:m")
    check_model("anthropic:m", "http://127.0.0.1:9")
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    check_model("google_genai:m")


# --- item 2: the native structured-output path of each provider -----------------------------------
def _service(kind: str, root: str, **kw) -> LLMService:
    spec = parse_model_spec(f"{kind}:m1", base_url=root)
    return LLMService(
        models={"default": (spec, make_chat_model(spec, timeout=10))},
        max_transport_retries=kw.pop("retries", 1),
        backoff_base=0.0,
        call_timeout=10,
        **kw,
    )


def _ask(service: LLMService, schema=SCHEMA):
    return asyncio.run(
        service.ask(
            agent=0,
            society=0,
            round=0,
            phase="effort",
            messages=[HumanMessage("hi")],
            schema=schema,
            attempt=0,
            max_tokens=32,
        )
    )


def test_anthropic_structured_output_is_a_forced_tool_call_read_back_as_json():
    with AnthropicServer("ok") as srv:
        reply = _ask(_service("anthropic", srv.root))
    body = srv.calls()[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "answer"} and body["tools"][0]["input_schema"] == SCHEMA
    assert body["max_tokens"] == 32 and "seed" not in json.dumps(body)  # the Messages API has no seed
    assert "effort" in json.loads(reply.response.text) and reply.response.usage_error is None


def test_google_structured_output_is_a_json_response_schema_with_a_seed():
    with GoogleServer("ok") as srv:
        reply = _ask(_service("google_genai", srv.root))
    gen = srv.calls()[0].body["generationConfig"]
    assert gen["responseMimeType"] == "application/json" and gen["responseJsonSchema"] == SCHEMA
    assert type(gen["seed"]) is int and gen["maxOutputTokens"] == 32
    assert "effort" in json.loads(reply.response.text) and reply.response.usage_error is None


def test_ollama_structured_output_is_format_with_a_seed():
    with OllamaServer("ok") as srv:
        reply = _ask(_service("ollama", srv.root))
    body = srv.calls()[0].body
    assert body["format"] == SCHEMA and body["stream"] is False
    assert type(body["options"]["seed"]) is int and body["options"]["num_predict"] == 32
    assert "effort" in json.loads(reply.response.text) and reply.response.usage_error is None


# --- item 3: usage by the OpenAI path's rules; errors classified --------------------------------------
HOSTILE_USAGE = {
    "huge": "exceeds the bound",
    "negative": "is negative",
    "missing": "missing",
    "bool": "is a boolean",
    "numeric_string": "is not a number",
    "over_max_tokens": "exceeds the bound 32",
    "nan": "is not finite",
    "abc": "is not a number",
    "fraction": "is not an integer",
    "infinity": "is not finite",
}


@pytest.mark.parametrize("kind", list(SERVERS))
@pytest.mark.parametrize("mode", list(HOSTILE_USAGE))
def test_hostile_usage_is_charged_at_the_bounds_and_flagged(kind, mode):
    with SERVERS[kind](mode) as srv:
        service = _service(kind, srv.root)
        reply = _ask(service)
    r = reply.response
    assert r.usage_error is not None
    assert HOSTILE_USAGE[mode] in r.usage_error and r.output_tokens == 32 and r.input_tokens > 0
    led = service.ledger
    assert led.spent == led.cost(f"{kind}:m1", r.input_tokens, 32) and led.in_flight == 0


@pytest.mark.parametrize("kind", list(SERVERS))
def test_a_good_answers_usage_is_charged_as_reported(kind):
    with SERVERS[kind]("ok") as srv:
        reply = _ask(_service(kind, srv.root))
    assert (reply.response.input_tokens, reply.response.output_tokens, reply.response.usage_error) == (120, 12, None)


@pytest.mark.parametrize(
    "kind, mode, calls, says",
    [
        ("anthropic", "401", 1, "rejected the request (HTTP 401)"),
        ("anthropic", "529", 3, "failed 3 times with HTTP 529"),
        ("anthropic", "429", 3, "HTTP 429"),
        ("anthropic", "json_list", 3, "malformed"),
        ("anthropic", "content_string", 3, "malformed"),
        ("google_genai", "400", 1, "rejected the request (HTTP 400)"),
        ("google_genai", "429", 3, "HTTP 429"),
        ("google_genai", "503", 3, "HTTP 503"),
        ("google_genai", "json_list", 3, "malformed"),
        ("google_genai", "not_json", 3, "malformed"),
        ("ollama", "404", 1, "rejected the request (HTTP 404)"),
        ("ollama", "503", 3, "HTTP 503"),
        ("ollama", "json_list", 3, "malformed"),
        ("ollama", "oversize", 3, "malformed"),
        ("anthropic", "oversize", 3, "malformed"),
        ("google_genai", "oversize", 3, "malformed"),
        ("google_genai", "no_content", 3, "no content parts"),
        ("google_genai", "empty_parts", 3, "no content parts"),
        ("ollama", "never_done", 3, "never ended"),
        ("anthropic", "500_html", 3, "HTML error page"),
        ("google_genai", "500_html", 3, "HTML error page"),
        ("ollama", "500_html", 3, "HTML error page"),
    ],
)
def test_provider_errors_are_retried_or_refused_and_stop_with_one_line(kind, mode, calls, says):
    with SERVERS[kind](mode) as srv:
        service = _service(kind, srv.root, retries=2)
        with pytest.raises(ModelUnavailable) as e:
            _ask(service)
        n = len(srv.calls())
    msg = str(e.value)
    assert says in msg and f"model {kind}:m1" in msg and "\n" not in msg and "Traceback" not in msg
    assert n == calls and service.ledger.in_flight == 0 and service.ledger.spent == 0


def test_an_sdk_error_is_classified_by_its_status():
    import anthropic
    import httpx2
    import ollama

    req = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")
    err = lambda status: anthropic.APIStatusError("x", response=httpx2.Response(status, request=req), body=None)  # noqa: E731
    assert [endpoint_failure(err(s)) for s in (400, 404, 408, 429, 500, 529)] == ["permanent", "permanent"] + [
        "transient"
    ] * 4
    assert endpoint_failure(anthropic.APIConnectionError(request=req)) == "transient"
    assert endpoint_failure(ollama.ResponseError("busy", 503)) == "transient"
    assert endpoint_failure(ollama.ResponseError("no such model", 404)) == "permanent"
    assert endpoint_failure(ValueError("a bug of ours")) is None  # not the endpoint's: it propagates


# --- a society against a provider's server, from the command line -------------------------------------
@pytest.mark.parametrize("kind", list(SERVERS))
def test_a_cpr_society_runs_against_each_providers_server(tmp_path, capsys, kind):
    out = tmp_path / "run"
    with SERVERS[kind]("ok") as srv:
        code = main(
            [
                "run",
                "cpr",
                "--agents",
                "llm",
                "--model",
                f"{kind}:m1",
                "--base-url",
                srv.root,
                "--n-agents",
                "2",
                "--rounds",
                "1",
                "--cache",
                "off",
                "--budget",
                "0.5",
                "--price-in",
                "0.001",
                "--price-out",
                "0.002",
                "--out",
                str(out),
                "-q",
                "--json",
            ]
        )
    stdout, err = capsys.readouterr()
    assert code == 0, err
    s = json.loads(stdout)
    assert s["status"] == "completed" and len(srv.calls()) == s["ledger"]["calls"] > 0
    # every call reported 120 in, 12 out: charged exactly that
    assert s["ledger"]["cost_usd_float"] == pytest.approx(s["ledger"]["calls"] * (120 * 0.001 + 12 * 0.002) / 1000)
    assert json.loads((out / "config.json").read_text())["llm"]["model"] == f"{kind}:m1"


# --- item 3: prices ----------------------------------------------------------------------------------
def test_list_prices_match_the_longest_prefix_of_the_models_name():
    import cooplab.tasks.science.scripted  # noqa: F401  (registers the built-in science models named below)
    from cooplab.agents.prices import NOMINAL, PRICES_DATE, list_price, price_of

    assert PRICES_DATE == "2025-06-01"
    assert (
        list_price("anthropic", "claude-3-5-haiku-latest")
        == list_price("anthropic", "claude-3-5-haiku-20241022")
        == (0.0008, 0.004)
    )
    assert list_price("openai", "gpt-4o-mini-2024-07-18") == (0.00015, 0.0006) and list_price("openai", "gpt-4o") == (
        0.0025,
        0.01,
    )
    assert list_price("google_genai", "models/gemini-2.0-flash-001") == (0.0001, 0.0004)
    assert list_price("openai", "gpt-4omni") is None and list_price("anthropic", "claude-foo") is None
    spec = parse_model_spec
    assert price_of(spec("anthropic:claude-foo")) is None  # a hosted model on its own API: unknown
    assert price_of(spec("anthropic:claude-foo", base_url="http://127.0.0.1:9")) == NOMINAL  # a server of one's own
    assert price_of(spec("ollama:llama3")) == NOMINAL and price_of(spec("builtin:science-oracle:ecology")) == NOMINAL
    assert price_of(spec("anthropic:claude-foo"), 0.1, 0.2) == (0.1, 0.2)  # the override wins
    assert price_of(spec("openai:gpt-4o"), None, 0.5) == (0.0025, 0.5)


def test_a_budget_with_a_model_of_unknown_price_is_one_line_and_creates_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    out = tmp_path / "run"
    argv = [
        "run",
        "cpr",
        "--agents",
        "llm",
        "--model",
        "anthropic:claude-foo",
        "--n-agents",
        "2",
        "--out",
        str(out),
        "--budget",
        "1",
    ]
    line = fail_line(capsys, argv)
    assert "--budget needs the price of anthropic:claude-foo" in line and "--price-in" in line and not out.exists()
    line = fail_line(capsys, argv + ["--price-in", "0.001"])  # half a price is not a price
    assert "needs the price of anthropic:claude-foo" in line and not out.exists()


def test_each_model_is_charged_its_own_price_and_the_prices_are_recorded(tmp_path, capsys):
    import pandas as pd

    script = tmp_path / "s.json"
    script.write_text(
        json.dumps({"answers": ['{"effort": 0.2, "punish": null, "vote": 1, "belief": "b", "proposal": "p"}']})
    )
    out = tmp_path / "run"
    with AnthropicServer("ok") as srv:
        code = main(
            [
                "run",
                "cpr",
                "--agents",
                "llm",
                "--model",
                f"scripted:{script}",
                "--agent-model",
                "1=anthropic:claude-3-5-haiku-latest",
                "--base-url",
                srv.root,
                "--n-agents",
                "2",
                "--rounds",
                "1",
                "--cache",
                "off",
                "--budget",
                "1",
                "--out",
                str(out),
                "-q",
            ]
        )
    assert code == 0, capsys.readouterr().err
    prices = json.loads((out / "config.json").read_text())["llm"]["prices"]
    assert prices == {f"scripted:{script}": [0.0005, 0.003], "anthropic:claude-3-5-haiku-latest": [0.0008, 0.004]}
    led = pd.read_parquet(out / "ledger.parquet")
    for model, (p_in, p_out) in prices.items():
        rows = as_frame(led[led["model"] == model])
        assert len(rows) > 0
        for r in tuples(rows):
            assert float(r.cost_usd) == pytest.approx((r.input_tokens * p_in + r.output_tokens * p_out) / 1000)


# --- item 2: tools through each provider's native tool calling ----------------------------------------
def test_the_tool_loop_calls_tools_natively_through_anthropics_api():
    from langchain_core.messages import SystemMessage

    from cooplab.agents.tools import ToolAgent
    from cooplab.graphs.context import CoopContext
    from tests.agents._support import Counter
    from tests.fakes.anthropic_server import Answer

    def answer(req):
        results = [
            b
            for m in req.body["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
        return Answer(text="The sum is 5") if results else Answer(tool_calls=[("add", {"a": 2, "b": 3})])

    c = Counter()
    with AnthropicServer("ok", answer=answer) as srv:
        svc = _service("anthropic", srv.root)
        agent = ToolAgent("data.lead", c.tools, team="data")
        res = asyncio.run(
            agent.arun(
                [SystemMessage(content="You are the data lead."), HumanMessage(content="Add 2 and 3.")],
                context=CoopContext(llm=svc),
            )
        )
    first, second = (r.body for r in srv.calls())
    assert [t["name"] for t in first["tools"]] == [t.name for t in c.tools] and "input_schema" in first["tools"][0]
    use = next(b for b in second["messages"][-2]["content"] if b["type"] == "tool_use")
    result = next(b for b in second["messages"][-1]["content"] if b["type"] == "tool_result")
    assert result["tool_use_id"] == use["id"] and "5" in json.dumps(result["content"])
    assert (
        res.protocol == "native"
        and res.stop_reason == "final"
        and res.final == "The sum is 5"
        and c.calls == [("add", 2, 3)]
    )
    assert svc.ledger.spent == 2 * svc.ledger.cost("anthropic:m1", 120, 12)


def test_resuming_without_the_providers_package_says_to_install_it_and_changes_nothing(tmp_path, capsys, monkeypatch):
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps({"answers": ['{"effort": 0.2, "punish": null, "vote": 1, "belief": "b", "proposal": "p"}']})
    )
    d = tmp_path / "run"
    assert (
        main(
            [
                "run",
                "cpr",
                "--agents",
                "llm",
                "--model",
                f"scripted:{script}",
                "--n-agents",
                "2",
                "--rounds",
                "1",
                "--cache",
                "off",
                "--out",
                str(d),
                "-q",
            ]
        )
        == 0
    )
    cfg = json.loads((d / "config.json").read_text())
    cfg["llm"].update(model="anthropic:claude-3-5-haiku-latest", base_url="http://127.0.0.1:9")
    (d / "config.json").write_text(json.dumps(cfg))
    before = {
        p.name: p.stat().st_mtime_ns for p in d.iterdir() if p.name != ".cooplab.lock"
    }  # the lock is taken, then let go
    monkeypatch.setitem(__import__("sys").modules, "langchain_anthropic", None)
    capsys.readouterr()
    line = fail_line(capsys, ["resume", str(d)])
    assert (
        "pip install cooplab[anthropic]" in line
        and "install it and resume again" in line
        and "fix the file" not in line
    )
    assert {p.name: p.stat().st_mtime_ns for p in d.iterdir() if p.name != ".cooplab.lock"} == before


def test_anthropics_tool_prompt_is_inside_the_input_bound():
    """Anthropic adds a system prompt of a few hundred tokens to a request with tools (the forced
    ``answer`` tool too): a short prompt's honest report of them is charged as reported, not flagged."""
    from tests.fakes.anthropic_server import message, ok_reply, usage

    with AnthropicServer(lambda req: ok_reply(req, message(req, usage_=usage(700, 12)))) as srv:
        reply = _ask(_service("anthropic", srv.root))
    assert (reply.response.input_tokens, reply.response.usage_error) == (700, None)


def test_recorded_prices_win_and_hostile_ones_are_one_line():
    """A resumed run charges the prices its config.json recorded, whatever the table says now."""
    from cooplab.agents.settings import LLMSettings

    spec = "anthropic:claude-3-5-haiku-latest"
    llm = LLMSettings(model=spec, base_url="http://127.0.0.1:9", agent_models={1: "ollama:x"}, prices={spec: [1, 2]})
    assert llm.resolved_prices() == {spec: [1.0, 2.0], "ollama:x": [0.0005, 0.003]}
    for bad in ([float("nan"), 1], [-1, 1], [1], [True, 1], [float("inf"), 0], "cheap", [1e9, 0]):
        with pytest.raises(ConfigError) as e:  # as a resumed run's config.json would hold them
            validate(
                LLMSettings,
                {"model": spec, "base_url": "http://127.0.0.1:9", "prices": {spec: bad}},
                in_file("config.json", "llm"),
                strict=False,
            )
        assert "config.json: llm.prices" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ConfigError):
        validate(LLMSettings, {"model": spec, "prices": [1, 2]}, in_file("config.json", "llm"), strict=False)


def test_a_science_sweep_with_a_budget_and_a_model_of_unknown_price_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    cfg = tmp_path / "sweep.json"
    sweep = {
        "task": "science",
        "out": str(tmp_path / "sw"),
        "team": "llm",
        "models": ["anthropic:claude-foo"],
        "science_tasks": ["ecology"],
        "budgets": [0.5],
        "sandbox_backend": "local",
    }
    cfg.write_text(json.dumps(sweep))
    line = fail_line(capsys, ["sweep", str(cfg)])
    assert "budgets needs the price of anthropic:claude-foo" in line and not (tmp_path / "sw").exists()
    from cooplab.tasks.science.sweep_format import load_science

    load_science({**sweep, "llm": {"price_in": 0.001, "price_out": 0.002}}, "sweep.json")  # priced: it passes the check
