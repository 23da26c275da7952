"""The budget cap holds whatever the cache or the model endpoint does (issue 9, parts 3 and 4).

Real runs through the CLI against a real OpenAI-compatible HTTP server on loopback that
misbehaves (``tests/agents/misbehaving_server.py``): impossible usage is charged at the call's bound and
counted, never at the reported number; a body that is not a chat completion, a 5xx, a 4xx or a
hanging server stops the run cleanly (exit 1, one line, summary.json, resumable); a cached replay
never passes the cap; concurrent calls never overshoot it. Property-style tests (seeded, so a
failure reproduces) feed random usage and random bodies through every response path.
"""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import subprocess
import sys
import threading
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from cooplab.agents.cache import ResponseCache
from cooplab.agents.decisions import (
    LLMService,
    ModelUnavailable,
    decide,
    endpoint_failure,
    usage_of,
)
from cooplab.agents.models import (
    EndpointResponseError,
    ModelSpec,
    ScriptedChatModel,
    factory,
    parse_model_spec,
)
from cooplab.agents.models.openai_compat import checked_completion
from cooplab.agents.usage import (
    MESSAGE_OVERHEAD,
    TEMPLATE_OVERHEAD,
    check_usage,
    input_bound,
)
from cooplab.cli import main
from cooplab.evals.typed import column
from cooplab.graphs.ledger import BudgetExhausted, Ledger, Rates
from cooplab.tasks.cpr.llm import EFFORT
from tests.helpers.figures import figures_recorded  # noqa: F401 - a fixture

from ._support import WatchedLedger
from .misbehaving_server import (
    ANSWER,
    BODY_MODES,
    MALFORMED_MODES,
    REJECTED_MODES,
    USAGE_ERROR_MODES,
    MisbehavingServer,
    Reply,
    completion,
)

# no run here checks its figure: none is drawn (tests/helpers/figures.py)
pytestmark = pytest.mark.usefixtures("figures_recorded")

BUDGET = Decimal("0.05")
RETRIES = 4  # LLMService.max_transport_retries: every failing call is tried 5 times


def run(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def server_run(url, out, *more, budget: Decimal | str = BUDGET, agents=2, rounds=2):
    return [
        "run",
        "cpr",
        "--agents",
        "llm",
        "--model",
        "openai:x",
        "--base-url",
        url,
        "--n-agents",
        agents,
        "--rounds",
        rounds,
        "--ablation",
        "neither",
        "--budget",
        budget,
        "--out",
        out,
        "--cache",
        "off",
        "-q",
        "--json",
        *more,
    ]


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("cooplab: "), err
    assert "Traceback" not in err
    return lines[0]


def summary_of(out: Path) -> dict:
    assert (out / "summary.json").exists(), "the run was lost: no summary.json"
    return json.loads((out / "summary.json").read_text())


def assert_within_budget(s: dict, budget: Decimal = BUDGET) -> None:
    led = s["ledger"]
    assert Decimal(led["cost_usd"]) <= budget, led


# --- impossible usage: charged at the bound, flagged, counted ---------------------------------
@pytest.mark.parametrize("mode", USAGE_ERROR_MODES)
def test_impossible_usage_is_charged_at_the_bound_and_counted(mode, tmp_path, capsys, fast_backoff):
    out = tmp_path / "run"
    with MisbehavingServer(mode) as srv:
        code, stdout, err = run(server_run(srv.url, out), capsys)
    assert code == 0, err
    assert "Traceback" not in err
    s = summary_of(out)
    assert json.loads(stdout)["status"] == s["status"] == "completed"
    assert_within_budget(s)
    led = pd.read_parquet(out / "ledger.parquet")
    assert s["ledger"]["calls"] == len(led) > 0 and s["ledger"]["usage_errors"] == len(led)
    assert led["usage_error"].str.startswith("the endpoint:").all()
    # charged at the bound: the request's bytes + overheads and max_tokens (64), never the report
    assert (column(led, "output_tokens") == 64).all() and (column(led, "input_tokens") < 10_000).all()
    assert sum(Decimal(c) for c in led["cost_usd_exact"]) == Decimal(s["ledger"]["cost_usd"])
    d = pd.read_parquet(out / "decisions.parquet")
    assert int(column(d, "usage_errors").sum()) == len(led)
    assert not column(d, "fallback_used").any()  # the answers were used


def test_the_issue_case_huge_usage_cannot_cost_7000_dollars(tmp_path, capsys):
    out = tmp_path / "run"
    with MisbehavingServer("huge") as srv:
        code, _, err = run(server_run(srv.url, out, budget="0.05"), capsys)
    s = summary_of(out)
    assert code == 0 and s["status"] == "completed", err
    assert Decimal(s["ledger"]["cost_usd"]) <= Decimal("0.05") and s["ledger"]["input_tokens"] < 10**6


def test_valid_usage_is_charged_exactly_as_reported(tmp_path, capsys):
    out = tmp_path / "run"
    with MisbehavingServer("ok") as srv:
        code, _, err = run(server_run(srv.url, out), capsys)
    assert code == 0, err
    s = summary_of(out)
    led = pd.read_parquet(out / "ledger.parquet")
    assert s["ledger"]["usage_errors"] == 0 and column(led, "usage_error").isna().all()
    assert (column(led, "input_tokens") == 120).all() and (column(led, "output_tokens") == 12).all()
    assert (
        Decimal(s["ledger"]["cost_usd"])
        == len(led) * (Decimal(120) * Decimal("0.0005") + Decimal(12) * Decimal("0.003")) / 1000
    )


# --- implausibly low usage: charged cooplab's estimate of the text, flagged (issue 37.6) ----------
def test_a_gateway_that_zeroes_usage_cannot_switch_the_budget_off(tmp_path, capsys):
    out = tmp_path / "run"
    with MisbehavingServer("zero_usage") as srv:
        code, _, err = run(server_run(srv.url, out, rounds=1), capsys)
    assert code == 0, err
    s = summary_of(out)
    led = pd.read_parquet(out / "ledger.parquet")
    assert s["ledger"]["usage_errors"] == len(led) > 0
    assert led["usage_error"].str.startswith("the endpoint: usage implausibly low: 0 prompt tokens").all()
    # charged cooplab's count of the prompt and the answer: the budget counts every call
    assert (column(led, "input_tokens") > 100).all() and (column(led, "output_tokens") > 5).all()
    assert Decimal(s["ledger"]["cost_usd"]) > 0 and int(
        column(pd.read_parquet(out / "decisions.parquet"), "usage_errors").sum()
    ) == len(led)


def test_one_token_for_8_kb_of_answer_is_charged_at_least_what_the_bytes_can_be(tmp_path, capsys):
    out = tmp_path / "run"
    with MisbehavingServer("low_usage") as srv:
        code, _, err = run(server_run(srv.url, out, rounds=1), capsys)
    assert code == 0, err
    led = pd.read_parquet(out / "ledger.parquet")
    assert len(led) > 0 and led["usage_error"].str.contains("1 completion tokens for 8").all()
    # the plausible prompt count stands; the answer's ~1,500 words are clamped to the call's cap (64)
    assert (column(led, "input_tokens") == 120).all() and (column(led, "output_tokens") == 64).all()
    assert not column(pd.read_parquet(out / "decisions.parquet"), "fallback_used").any()


def test_the_usage_floor_never_flags_an_honest_count():
    from cooplab.agents.usage import TextEstimate

    text = TextEstimate(input_bytes=2560, output_bytes=8192, input_tokens=500, output_tokens=1500)
    assert (text.input_floor, text.output_floor) == (10, 32)
    honest = check_usage({"prompt_tokens": 10, "completion_tokens": 32}, input_bound=5000, output_bound=2048, text=text)
    assert honest.error is None and (honest.input_tokens, honest.output_tokens) == (10, 32)
    low = check_usage({"prompt_tokens": 9, "completion_tokens": 40}, input_bound=5000, output_bound=2048, text=text)
    assert (low.input_tokens, low.output_tokens) == (500, 40) and low.error is not None
    assert "9 prompt tokens for 2560 bytes of prompt (at least 10)" in low.error
    capped = check_usage({"input_tokens": 0, "output_tokens": 0}, input_bound=300, output_bound=64, text=text)
    assert (capped.input_tokens, capped.output_tokens) == (300, 64) and capped.error is not None
    assert "usage implausibly low" in capped.error
    empty = TextEstimate(input_bytes=0, output_bytes=0, input_tokens=0, output_tokens=0)
    assert (
        check_usage({"prompt_tokens": 0, "completion_tokens": 0}, input_bound=9, output_bound=9, text=empty).error
        is None
    )


def test_infinite_usage_keeps_every_model_call_in_the_traces(tmp_path, capsys):
    out = tmp_path / "run"
    with MisbehavingServer("infinity") as srv:
        code, _, err = run(server_run(srv.url, out, rounds=1), capsys)
    assert code == 0, err
    led = pd.read_parquet(out / "ledger.parquet")
    llm = [r for r in map(json.loads, (out / "traces.jsonl").read_text().splitlines()) if r["run_type"] == "llm"]
    assert len(llm) == len(led) > 0 and led["usage_error"].str.contains("not finite").all()


# --- a broken endpoint: a clean stop, one line, resumable ------------------------------------
KEYWORD = {
    "500": "HTTP 500",
    "502_empty": "HTTP 502",
    "truncated": "RemoteProtocolError",
    "401": "HTTP 401",
    "404": "HTTP 404",
}


@pytest.mark.parametrize("mode", MALFORMED_MODES + REJECTED_MODES)
def test_a_broken_endpoint_stops_the_run_cleanly(mode, tmp_path, capsys, fast_backoff):
    out = tmp_path / "run"
    # the first round's two effort calls succeed, then the endpoint breaks
    with MisbehavingServer(mode, script=["ok", "ok"]) as srv:
        code, stdout, err = run(server_run(srv.url, out), capsys)
        seen = srv.modes_seen()
    line = one_line(err)
    assert code == 1 and stdout == ""
    assert f"cooplab resume {out}" in line and srv.url in line
    assert KEYWORD.get(mode, "malformed response") in line
    s = summary_of(out)
    assert s["status"] == "stopped" and s["rounds_completed"] == 0 and s["ledger"]["calls"] == 2
    assert_within_budget(s)
    # counted retries: every failing call was tried 1 + RETRIES times (a rejected request once)
    tries = 1 if mode in REJECTED_MODES else 1 + RETRIES
    assert seen[:2] == ["ok", "ok"] and len(seen) == 2 + 2 * tries


@pytest.mark.parametrize("mode", ["not_json", "html"])
def test_resume_against_a_still_broken_endpoint_stops_again_then_completes(mode, tmp_path, capsys, fast_backoff):
    out = tmp_path / "run"
    with MisbehavingServer(mode, script=["ok"] * 4) as srv:
        code, _, err = run(server_run(srv.url, out, rounds=3), capsys)
        assert code == 1 and "malformed response" in one_line(err)
        first = summary_of(out)
        code, stdout, err = run(["resume", out, "-q", "--json"], capsys)  # still broken
        assert code == 1 and "malformed response" in one_line(err) and stdout == ""
        assert summary_of(out)["status"] == "stopped"
        srv.mode = "ok"
        code, stdout, err = run(["resume", out, "-q", "--json"], capsys)
    assert code == 0, err
    s = json.loads(stdout)
    assert s["status"] == "completed" and s["rounds_completed"] == 3 > first["rounds_completed"]
    assert_within_budget(s)
    rounds = pd.read_parquet(out / "rounds.parquet")
    assert rounds["round"].tolist() == [1, 2, 3]


def test_usage_holding_non_numbers_completes_and_resume_is_not_needed(tmp_path, capsys):
    out = tmp_path / "run"
    with MisbehavingServer("abc") as srv:
        code, _, err = run(server_run(srv.url, out), capsys)
        assert code == 0 and "Traceback" not in err
        code, stdout, err = run(["resume", out, "-q", "--json"], capsys)  # a finished run resumes to itself
    assert code == 0, err
    assert json.loads(stdout)["status"] == "completed"


def test_a_hanging_server_times_out_and_stops_cleanly(tmp_path, capsys, fast_backoff, monkeypatch):
    make = factory.make_chat_model
    monkeypatch.setattr(factory, "make_chat_model", lambda spec, **kw: make(spec, **{**kw, "timeout": 0.3}))
    out = tmp_path / "run"
    # every request hangs until the test ends, so the client's timeout decides, however slow the machine
    with MisbehavingServer("hang") as srv:
        code, _, err = run(server_run(srv.url, out), capsys)
        seen = srv.modes_seen()
    line = one_line(err)
    assert code == 1 and "timed out" in line.lower() and "cooplab resume" in line
    s = summary_of(out)
    assert s["status"] == "stopped" and s["ledger"]["calls"] == 0 and s["ledger"]["cost_usd"] == "0"
    # each of the 2 calls was tried 1 + RETRIES times (a request the server had not read yet when
    # the client gave up is not seen by the server, so this is an upper bound)
    assert set(seen) == {"hang"} and 1 <= len(seen) <= 2 * (1 + RETRIES)


def test_the_real_cli_process_prints_exactly_one_line(tmp_path):
    """No warning, log line or progress output from any layer: the process's whole stderr, for a
    500 whose body is a multi-line HTML page (retried with the real backoff, about 8 s)."""
    exe = str(Path(sys.executable).parent / "cooplab")
    out = tmp_path / "run"
    with MisbehavingServer("500", script=["ok", "ok"]) as srv:
        res = subprocess.run([exe, *map(str, server_run(srv.url, out))], capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and res.stdout == ""
    assert "HTTP 500" in one_line(res.stderr)
    assert summary_of(out)["status"] == "stopped"


# --- the cache can never pass the cap ----------------------------------------------------------
def _script(tmp_path):
    f = tmp_path / "script.json"
    f.write_text(
        json.dumps(
            {"answers": ['{"effort": 0.1}', '{"effort": 0.4}', "no idea", '{"effort": 3}'], "select": "prompt_hash"}
        )
    )
    return f


def test_a_cached_replay_ends_budget_exhausted_within_a_smaller_budget(tmp_path, capsys):
    """The issue's case: replaying from the cache with a budget below the first run's cost."""
    f, cache = _script(tmp_path), tmp_path / "cache.sqlite"
    args = [
        "run",
        "cpr",
        "--agents",
        "llm",
        "--model",
        f"scripted:{f}",
        "--n-agents",
        "3",
        "--rounds",
        "4",
        "--cache",
        cache,
        "-q",
        "--json",
    ]
    code, stdout, err = run([*args, "--out", tmp_path / "a"], capsys)
    assert code == 0, err
    first = json.loads(stdout)
    cost = Decimal(first["ledger"]["cost_usd"])
    budget = (cost / 2).quantize(Decimal("0.000001"))
    code, stdout, err = run([*args, "--out", tmp_path / "b", "--budget", budget], capsys)
    assert code == 0, err
    s = json.loads(stdout)
    assert s["status"] == "budget_exhausted" and "budget" in s["message"]
    assert Decimal(s["ledger"]["cost_usd"]) <= budget
    assert s["ledger"]["cached_calls"] == s["ledger"]["calls"] > 0  # every call replayed, and still capped
    # the same with the cache off ends the same way (it always did)
    code, stdout, _ = run(
        [*args[:-4], "--cache", "off", "-q", "--json", "--out", tmp_path / "c", "--budget", budget], capsys
    )
    assert json.loads(stdout)["status"] == "budget_exhausted"


def test_a_damaged_cache_is_charged_at_most_the_bound(tmp_path):
    db = tmp_path / "c.sqlite"
    spec = ModelSpec("scripted", "d", max_tokens=32)

    def service(ledger):
        return LLMService(
            models={"default": (spec, ScriptedChatModel(answers=['{"effort": 0.4}']))},
            ledger=ledger,
            cache=ResponseCache(db),
        )

    svc = service(Ledger())
    for a in range(4):
        asyncio.run(
            decide(
                svc,
                EFFORT,
                [HumanMessage(content=f"agent {a}")],
                society=0,
                agent=a,
                round=1,
                ctx={"previous_effort": 0.1},
            )
        )
    svc.cache.close()
    con = sqlite3.connect(db)
    bad = [(10**12, 10**12), ("abc", None), (-3, 5), (float("nan"), 2.5)]
    keys = [k for (k,) in con.execute("SELECT key FROM responses ORDER BY key")]
    for key, (i, o) in zip(keys, bad, strict=False):
        con.execute("UPDATE responses SET input_tokens = ?, output_tokens = ? WHERE key = ?", (i, o, key))
    con.commit()
    con.close()
    svc = service(Ledger(budget=Decimal("0.01")))
    for a in range(4):
        value, rec = asyncio.run(
            decide(
                svc,
                EFFORT,
                [HumanMessage(content=f"agent {a}")],
                society=0,
                agent=a,
                round=1,
                ctx={"previous_effort": 0.1},
            )
        )
        assert value is not None and value.effort == 0.4 and rec.cached_calls == 1 and rec.usage_errors == 1
        assert rec.output_tokens == 32 and rec.input_tokens == input_bound([HumanMessage(content=f"agent {a}")], None)
    assert svc.ledger.totals()["usage_errors"] == 4 and all(
        e.usage_error is not None and e.usage_error.startswith("the cache:") for e in svc.ledger.entries
    )
    assert svc.ledger.spent <= Decimal("0.01")


def test_an_old_cache_without_the_usage_error_column_is_upgraded(tmp_path):
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.execute(
        "CREATE TABLE responses (key TEXT PRIMARY KEY, text TEXT NOT NULL, input_tokens INTEGER, output_tokens INTEGER,"
        " latency REAL, model TEXT, created TEXT DEFAULT CURRENT_TIMESTAMP)"
    )
    con.execute(
        "INSERT INTO responses (key, text, input_tokens, output_tokens, latency, model) VALUES ('k', 'hi', 3, 4, 0.1, "
        "'m')"
    )
    con.commit()
    con.close()
    cache = ResponseCache(db)
    hit = cache.get("k")
    assert hit is not None
    assert (hit.text, hit.input_tokens, hit.output_tokens, hit.usage_error) == ("hi", 3, 4, None)
    cache.close()


# --- the ledger's own defences -----------------------------------------------------------------
@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), -1, Decimal("NaN"), Decimal("-Infinity"), "abc", True, None, [1]]
)
def test_ledger_rejects_non_finite_or_negative_budgets_and_prices(bad):
    if bad is not None:
        with pytest.raises(ValueError, match="budget") as e:
            Ledger(budget=bad)
        assert "\n" not in str(e.value)
    for kw in ({"input_per_1k": bad}, {"output_per_1k": bad}):
        with pytest.raises(ValueError, match="price") as e:
            Rates(**kw)  # pyright: ignore[reportArgumentType]  # hostile prices on purpose (None among them)
        assert "\n" not in str(e.value)


def test_ledger_amounts_stay_exact_decimals():
    r = Rates(0.1, "0.3")  # pyright: ignore[reportArgumentType]  # floats via their shortest text, text as Decimal
    assert r.input_per_1k == Decimal("0.1") and isinstance(r.cost(3, 7), Decimal)
    assert r.cost(3, 7) == (Decimal("0.3") + Decimal("2.1")) / 1000
    led = Ledger(budget=0)  # pyright: ignore[reportArgumentType]  # an int budget is taken as its Decimal
    assert led.budget == Decimal(0)
    with pytest.raises(BudgetExhausted):
        led.reserve(Decimal("0.0000001"))


def test_a_charge_can_never_exceed_its_reservation_nor_an_unreserved_charge_the_cap():
    led = Ledger(budget=Decimal("0.001"))
    res = led.reserve(led.cost("m", 100, 10))
    with pytest.raises(ValueError, match="exceeds its reservation"):
        led.charge(
            call_id="a", model="m", agent="0:0", round=1, phase="p", input_tokens=101, output_tokens=10, reservation=res
        )
    assert led.in_flight == 0 and led.spent == 0 and not led.entries
    with pytest.raises(ValueError):
        led.reserve(Decimal(-1))
    led.charge(
        call_id="b", model="m", agent="0:0", round=1, phase="p", input_tokens=1000, output_tokens=100, cached=True
    )
    with pytest.raises(BudgetExhausted):  # a cached replay is checked against the cap too
        led.charge(
            call_id="c", model="m", agent="0:0", round=1, phase="p", input_tokens=1000, output_tokens=100, cached=True
        )
    assert led.spent == Decimal("0.0008") and len(led.entries) == 1


# --- classification: endpoint failures vs programming errors -----------------------------------
def test_programming_errors_are_not_swallowed_as_endpoint_failures():
    import openai
    from pydantic import BaseModel, ValidationError

    class M(BaseModel):
        x: int

    try:
        M(x="no")  # pyright: ignore[reportArgumentType]  # invalid on purpose: the test needs a ValidationError
    except ValidationError as exc:
        verr = exc
    for exc in (
        TypeError("x"),
        KeyError("x"),
        AttributeError("x"),
        ValueError("x"),
        json.JSONDecodeError("x", "doc", 0),
        verr,
        IndexError("x"),
        ZeroDivisionError(),
    ):
        assert endpoint_failure(exc) is None, exc
    assert endpoint_failure(EndpointResponseError("bad")) == "transient"
    req = __import__("httpx").Request("POST", "http://127.0.0.1/v1")
    resp = lambda code: __import__("httpx").Response(code, request=req)  # noqa: E731
    assert endpoint_failure(openai.APIStatusError("x", response=resp(401), body=None)) == "permanent"
    assert endpoint_failure(openai.APIStatusError("x", response=resp(503), body=None)) == "transient"
    assert endpoint_failure(openai.APIResponseValidationError(response=resp(200), body=None)) == "transient"

    class Broken(ScriptedChatModel):
        def _answer(self, messages, kwargs):
            raise TypeError("a bug in the model class")

    svc = LLMService(models={"default": (ModelSpec("scripted", "b"), Broken(answers=["x"]))}, backoff_base=0.0)
    with pytest.raises(TypeError, match="a bug"):
        asyncio.run(
            decide(svc, EFFORT, [HumanMessage(content="x")], society=0, agent=0, round=1, ctx={"previous_effort": 0.1})
        )
    assert svc.ledger.in_flight == 0 and svc.retries == 0


def test_scripted_malformed_responses_are_retried_then_stop():
    spec = ModelSpec("scripted", "m")
    svc = LLMService(models={"default": (spec, ScriptedChatModel(answers=[{"error": "malformed"}]))}, backoff_base=0.0)
    with pytest.raises(ModelUnavailable, match="returned malformed responses 5 times"):
        asyncio.run(
            decide(svc, EFFORT, [HumanMessage(content="x")], society=0, agent=0, round=1, ctx={"previous_effort": 0.1})
        )
    assert svc.retries == RETRIES and svc.ledger.in_flight == 0 and svc.ledger.spent == 0


# --- property-style tests ----------------------------------------------------------------------
ODD = [
    None,
    True,
    False,
    0,
    1,
    -1,
    7,
    10**18,
    -(10**18),
    0.0,
    3.0,
    2.5,
    -0.0,
    float("nan"),
    float("inf"),
    float("-inf"),
    "",
    "12",
    "abc",
    "NaN",
    " 3 ",
    [],
    [1],
    {},
    {"a": 1},
    Decimal("4"),
    Decimal("NaN"),
    1e308,
]


def _valid(v, bound):
    if isinstance(v, bool) or v is None:
        return False
    if isinstance(v, int):
        return 0 <= v <= bound
    if isinstance(v, (float, Decimal)):
        return math.isfinite(v) and v == int(v) and 0 <= int(v) <= bound
    return False


def _random_value(rng, bound):
    r = rng.random()
    if r < 0.35:
        return ODD[rng.integers(len(ODD))]
    if r < 0.7:
        return int(rng.integers(0, bound + 1))  # in range
    if r < 0.85:
        return int(rng.integers(bound + 1, bound + 10**6))  # just out of range
    return float(rng.integers(0, 2 * bound + 2)) + (0.5 if rng.random() < 0.3 else 0.0)


def test_property_check_usage_never_charges_outside_the_bounds():
    rng = np.random.default_rng(9)
    for _ in range(5000):
        ib, ob = int(rng.integers(1, 5000)), int(rng.integers(1, 512))
        keys = (("prompt_tokens", "completion_tokens"), ("input_tokens", "output_tokens"))[int(rng.integers(2))]
        reported = {}
        for k, b in zip(keys, (ib, ob), strict=False):
            if rng.random() < 0.9:
                reported[k] = _random_value(rng, b)
        if rng.random() < 0.05:
            reported = ODD[rng.integers(len(ODD))]
        u = check_usage(reported, input_bound=ib, output_bound=ob)
        assert type(u.input_tokens) is int and type(u.output_tokens) is int
        assert 0 <= u.input_tokens <= ib and 0 <= u.output_tokens <= ob
        ok = isinstance(reported, dict) and all(
            k in reported and _valid(reported[k], b) for k, b in zip(keys, (ib, ob), strict=False)
        )
        assert (u.error is None) == ok, (reported, u)
        if u.error is not None:
            assert (u.input_tokens, u.output_tokens) == (ib, ob) and "\n" not in u.error


def test_property_random_reported_usage_through_the_service_never_breaks_the_cap():
    rng = np.random.default_rng(3)
    for trial in range(12):
        answers = []
        for _ in range(40):
            if rng.random() < 0.15:
                answers.append(ANSWER)  # counted by cooplab
            else:
                usage = {"prompt_tokens": _random_value(rng, 400), "completion_tokens": _random_value(rng, 32)}
                answers.append({"text": ANSWER, "usage": usage if rng.random() < 0.9 else ODD[rng.integers(len(ODD))]})
        budget = Decimal(str(round(float(rng.uniform(0.0, 0.004)), 6)))
        ledger = WatchedLedger(budget=budget)
        spec = ModelSpec("scripted", f"p{trial}", max_tokens=32)
        svc = LLMService(
            models={"default": (spec, ScriptedChatModel(answers=answers, latency=0.0))},
            ledger=ledger,
            max_concurrency=int(rng.integers(1, 16)),
        )

        async def one(i, svc=svc):
            try:
                return await decide(
                    svc,
                    EFFORT,
                    [HumanMessage(content=f"agent {i} " + "x" * int(rng.integers(0, 200)))],
                    society=0,
                    agent=i,
                    round=1,
                    ctx={"previous_effort": 0.1},
                )
            except BudgetExhausted:
                return None

        async def all_():
            return await asyncio.gather(*(one(i) for i in range(40)))

        asyncio.run(all_())
        assert ledger.spent <= budget and ledger.peak <= budget and ledger.in_flight == 0, trial
        assert ledger.spent == sum(Decimal(e.cost) for e in ledger.entries)
        for e in ledger.entries:
            assert 0 <= e.output_tokens <= 32 and e.input_tokens >= 0


JSON_POOL = ODD[:24] + ["<html>", {"role": "assistant"}, [{"message": None}]]


def _mutate(obj, rng, depth=0):
    """A random structural mutation of a valid completion: replace or delete a random node."""
    if isinstance(obj, dict) and obj and depth < 4 and rng.random() < 0.75:
        k = list(obj)[rng.integers(len(obj))]
        obj = dict(obj)
        if rng.random() < 0.2:
            del obj[k]
        else:
            obj[k] = _mutate(obj[k], rng, depth + 1)
        return obj
    if isinstance(obj, list) and obj and depth < 4 and rng.random() < 0.75:
        obj = list(obj)
        obj[0] = _mutate(obj[0], rng, depth + 1)
        return obj
    v = JSON_POOL[rng.integers(len(JSON_POOL))]
    return v() if callable(v) else v


def fuzz_replies(seed: int, named_share: float = 0.3):
    """A server mode: each request gets a random named misbehaviour, a mutated completion, random
    bytes, a truncated body, or (sometimes) a good answer."""
    rng = np.random.default_rng(seed)
    lock = threading.Lock()
    named = [m for m in BODY_MODES if m != "hang"]

    def fuzz(req):
        with lock:
            r = rng.random()
            if r < named_share:
                return BODY_MODES[named[rng.integers(len(named))]](req)
            if r < 0.75:
                body = json.dumps(_mutate(completion(), rng)).encode()
                return Reply(200, body)
            if r < 0.85:
                return Reply(200, bytes(rng.integers(0, 256, int(rng.integers(0, 64))).astype(np.uint8)))
            if r < 0.9:
                full = json.dumps(completion()).encode()
                return Reply(200, full[: int(rng.integers(0, len(full)))])
            return BODY_MODES["ok"](req)

    return fuzz


def test_property_random_bodies_from_a_real_server_through_the_openai_path():
    """Every call ends as a validated answer, ModelUnavailable or BudgetExhausted, nothing else,
    and the ledger never passes the cap."""
    outcomes = {"answer": 0, "usage_error": 0, "unavailable": 0, "budget": 0}
    for seed in range(3):
        with MisbehavingServer(fuzz_replies(seed)) as srv:
            spec = parse_model_spec("openai:x", base_url=srv.url, max_tokens=32)
            budget = Decimal("0.004")
            ledger = WatchedLedger(budget=budget)
            svc = LLMService(
                models={"default": (spec, factory.make_chat_model(spec))},
                ledger=ledger,
                max_concurrency=8,
                backoff_base=0.0,
                max_transport_retries=2,
            )

            async def one(i, svc=svc):
                msgs: list[BaseMessage] = [HumanMessage(content=f"agent {i}: how much do you fish?")]
                try:
                    resp, _ = await svc.call(
                        agent=i,
                        society=0,
                        round=1,
                        phase="harvest",
                        messages=msgs,
                        schema=EFFORT.json_schema,
                        attempt=0,
                    )
                except ModelUnavailable as exc:
                    assert "\n" not in str(exc) and srv.url in str(exc)
                    return "unavailable"
                except BudgetExhausted:
                    return "budget"
                assert isinstance(resp.text, str)
                assert 0 <= resp.output_tokens <= 32 and 0 <= resp.input_tokens <= input_bound(
                    msgs, {"type": "json_object", "schema": EFFORT.json_schema}
                )
                return "usage_error" if resp.usage_error else "answer"

            async def all_():
                return await asyncio.gather(*(one(i) for i in range(30)))

            for o in asyncio.run(all_()):
                outcomes[o] += 1
            assert ledger.spent <= budget and ledger.peak <= budget and ledger.in_flight == 0
    assert (
        outcomes["unavailable"] > 0 and outcomes["usage_error"] > 0 and outcomes["answer"] + outcomes["usage_error"] > 0
    ), outcomes


@pytest.mark.parametrize("seed", range(4))
def test_property_cli_runs_against_a_randomly_misbehaving_server(seed, tmp_path, capsys, fast_backoff):
    """Whatever the endpoint sends, a run ends completed, budget_exhausted (exit 0) or stopped
    (exit 1, one line), always with summary.json and within the budget."""
    out = tmp_path / "run"
    budget = Decimal("0.004")
    with MisbehavingServer(fuzz_replies(100 + seed, named_share=0.2)) as srv:
        code, stdout, err = run(server_run(srv.url, out, budget=budget, rounds=3), capsys)
    s = summary_of(out)
    assert "Traceback" not in err
    if code == 1:
        assert s["status"] == "stopped" and "cooplab resume" in one_line(err)
    else:
        assert (
            code == 0
            and s["status"] in ("completed", "budget_exhausted")
            and json.loads(stdout)["status"] == s["status"]
        )
    assert_within_budget(s, budget)
    if s["ledger"]["calls"]:
        led = pd.read_parquet(out / "ledger.parquet")
        assert s["ledger"]["usage_errors"] == int(column(led, "usage_error").notna().sum())


# --- concurrency ---------------------------------------------------------------------------------
def test_many_concurrent_calls_against_a_real_server_never_overshoot_a_tiny_budget():
    with MisbehavingServer("huge") as srv:
        spec = parse_model_spec("openai:x", base_url=srv.url, max_tokens=32)
        budget = Decimal("0.002")
        ledger = WatchedLedger(budget=budget)
        svc = LLMService(models={"default": (spec, factory.make_chat_model(spec))}, ledger=ledger, max_concurrency=16)

        async def one(i):
            try:
                return await decide(
                    svc,
                    EFFORT,
                    [HumanMessage(content=f"agent {i} decide")],
                    society=0,
                    agent=i,
                    round=1,
                    ctx={"previous_effort": 0.1},
                )
            except BudgetExhausted:
                return None

        async def all_():
            return await asyncio.gather(*(one(i) for i in range(64)))

        results = asyncio.run(all_())
    done = [r for r in results if r is not None]
    assert 0 < len(done) < 64
    assert ledger.spent <= budget and ledger.peak <= budget and ledger.in_flight == 0
    assert ledger.totals()["usage_errors"] == len(ledger.entries) == len(done)


def test_a_concurrent_cli_run_with_huge_usage_ends_budget_exhausted_within_the_cap(tmp_path, capsys):
    out = tmp_path / "run"
    with MisbehavingServer("huge") as srv:
        code, stdout, err = run(
            server_run(srv.url, out, "--max-concurrency", 8, budget="0.004", agents=8, rounds=3), capsys
        )
    assert code == 0, err
    s = json.loads(stdout)
    assert s["status"] == "budget_exhausted" and Decimal(s["ledger"]["cost_usd"]) <= Decimal("0.004")
    assert s["ledger"]["usage_errors"] == s["ledger"]["calls"] > 0


# --- the bound -----------------------------------------------------------------------------------
def test_usage_of_every_path_goes_through_the_same_check():
    msgs: list[BaseMessage] = [HumanMessage(content="hello")]
    ib, ob = input_bound(msgs), 16
    # an endpoint's raw usage (OpenAI-compatible, scripted with "usage")
    assert (
        usage_of(
            AIMessage(content="x", response_metadata={"usage_raw": {"prompt_tokens": 5, "completion_tokens": 2}}),
            msgs,
            "x",
            input_bound=ib,
            output_bound=ob,
        ).error
        is None
    )
    assert usage_of(
        AIMessage(content="x", response_metadata={"usage_raw": None}), msgs, "x", input_bound=ib, output_bound=ob
    ).error
    # a backend's usage_metadata (local llama.cpp)
    big = AIMessage(content="x", usage_metadata={"input_tokens": ib + 1, "output_tokens": 1, "total_tokens": ib + 2})
    u = usage_of(big, msgs, "x", input_bound=ib, output_bound=ob)
    assert u.error and (u.input_tokens, u.output_tokens) == (ib, ob)
    # cooplab's own count (no usage at all): clamped, never flagged
    u = usage_of(AIMessage(content="word " * 100), msgs, "word " * 100, input_bound=ib, output_bound=ob)
    assert u.error is None and u.output_tokens == ob


def test_input_bound_counts_bytes_and_overheads():
    msgs = [HumanMessage(content="héllo"), AIMessage(content="🐟")]
    assert input_bound(msgs) == TEMPLATE_OVERHEAD + 2 * MESSAGE_OVERHEAD + len("héllo".encode()) + 4
    schema = {"type": "json_object", "schema": {"a": 1}}
    assert input_bound(msgs, schema) == input_bound(msgs) + len(json.dumps(schema, sort_keys=True).encode())


_TOKENIZER_CHILD = r"""
import json, sys
import numpy as np
import llama_cpp
from llama_cpp.llama_chat_format import Jinja2ChatFormatter
from langchain_core.messages import HumanMessage
from cooplab.agents.models.local import local_model_path
from cooplab.agents.usage import input_bound

llama = llama_cpp.Llama(model_path=str(local_model_path()), vocab_only=True, verbose=False)
template = llama.metadata["tokenizer.chat_template"]
fmt = Jinja2ChatFormatter(template=template, eos_token="<|im_end|>", bos_token="<|im_start|>")
rng = np.random.default_rng(5)
alphabet = list("abc xyz 0123456789 {}[]\":,.!?\n\t") + ["é", "ß", "漢", "字", "🐟", "🌊", "\u200b", "ﬁ", "Å"]
worst = 0.0
for _ in range(200):
    msgs = []
    for role in ("system", "user", "assistant", "user")[: int(rng.integers(1, 5))]:
        text = "".join(alphabet[i] for i in rng.integers(0, len(alphabet), int(rng.integers(0, 300))))
        msgs.append({"role": role, "content": text})
    prompt = fmt(messages=msgs).prompt
    n = len(llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))
    bound = input_bound([HumanMessage(content=m["content"]) for m in msgs])
    if n > bound:
        print(json.dumps({"violation": [n, bound, msgs]}))
        sys.exit(1)
    worst = max(worst, n / bound)
print(json.dumps({"worst_ratio": worst}))
"""


def test_input_bound_holds_for_a_real_tokenizer_and_chat_template():
    """The SmolLM2 BPE tokenizer with its own chat template never needs more tokens than the bound.
    llama.cpp's tokenizer is native code: it runs in a child process, never in the test runner."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", _TOKENIZER_CHILD], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    assert 0 < json.loads(p.stdout.strip().splitlines()[-1])["worst_ratio"] <= 1


def test_checked_completion_reads_raw_json_without_coercion():
    checked, usage = checked_completion(
        {"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": True, "completion_tokens": "3"}}
    )
    assert checked["choices"][0]["message"] == {"role": "assistant", "content": "hi"}
    assert usage == {"prompt_tokens": True, "completion_tokens": "3"}
    for bad in (
        b"",
        b"<html>",
        b"[1]",
        b'{"choices": []}',
        b'{"choices": [{"message": null}]}',
        b'{"choices": [{"message": {"content": 5}}]}',
    ):
        with pytest.raises(EndpointResponseError):
            checked_completion(bad)
