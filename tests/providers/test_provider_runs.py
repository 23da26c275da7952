"""Runs through the CLI against each provider's fake server on 127.0.0.1 (``tests/fakes``), through the
provider's real SDK: a CPR society, a game profile and a science team complete with exact ledger
totals (the servers' reported tokens times the given prices) inside the budget; hostile usage is
charged at the call's bound, flagged and counted; a server that sends no usable answer, refuses,
hangs or sends too much stops the run cleanly, with one line and a resumable run directory, never a
traceback (docs/models.md, "Providers")."""

from __future__ import annotations

import json
from decimal import Decimal

import pandas as pd
import pytest

from cooplab.evals.typed import column, scalar
from tests.fakes import anthropic_server, google_server, ollama_server
from tests.fakes.base import ANSWER

from ._support import (
    BUDGET,
    GAME_ANSWER,
    PER_CALL,
    PRICE_IN,
    PRICE_OUT,
    PROVIDERS,
    SERVERS,
    cpr_run,
    one_line,
    profile_run,
    run,
    science_answer,
    science_run,
    summary_of,
)

MODULES = {"anthropic": anthropic_server, "ollama": ollama_server, "google_genai": google_server}
RETRIES = 4  # every failing call is tried 1 + RETRIES times, a refused one once


def native_structured_output(provider: str, body: dict) -> bool:
    """Whether a request asks for the decision's JSON schema through the provider's own mechanism."""
    if provider == "anthropic":
        return (body.get("tool_choice") or {}).get("type") == "tool" or "format" in (body.get("output_config") or {})
    if provider == "ollama":
        return isinstance(body.get("format"), dict) and body["format"].get("type") == "object"
    cfg = body.get("generationConfig") or {}
    return "responseJsonSchema" in cfg or "responseSchema" in cfg or "toolConfig" in body


def assert_exact_ledger(s: dict, out, calls: int) -> None:
    """The ledger holds every answered call at the reported tokens and the given prices, within the budget."""
    led = s["ledger"]
    assert led["calls"] == calls and led["usage_errors"] == 0, led
    assert (led["input_tokens"], led["output_tokens"]) == (120 * calls, 12 * calls)
    assert Decimal(led["cost_usd"]) == calls * PER_CALL <= Decimal(led["budget_usd"])
    rows = pd.read_parquet(out / "ledger.parquet")
    rows = rows[rows["kind"] == "tokens"]
    assert len(rows) == calls and sum(Decimal(c) for c in rows["cost_usd_exact"]) == calls * PER_CALL


# --- well-behaved servers: every task runs to completion, exactly accounted ---------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_cpr_society_runs_on_each_provider_with_an_exact_ledger(provider, tmp_path, capsys, figures_recorded):
    out = tmp_path / "run"
    with SERVERS[provider]("ok") as srv:
        code, stdout, err = run(cpr_run(provider, srv.url, out), capsys)
        calls = srv.calls()
    assert code == 0, err
    s = summary_of(out)
    assert json.loads(stdout)["status"] == s["status"] == "completed" and s["rounds_completed"] == 2
    assert len(calls) == 8  # 2 rounds x 2 phases x 2 agents
    assert_exact_ledger(s, out, len(calls))
    assert all(native_structured_output(provider, r.body) for r in calls), calls[0].body
    assert all(r.body.get("model") == "fake-model" or "/models/fake-model:" in r.path for r in calls)
    d = pd.read_parquet(out / "decisions.parquet")
    assert not bool(d["fallback_used"].any()) and bool((d["attempts"] == 1).all())
    # the run reached its figure step with its two rounds (drawing it is tests/cpr/test_run_figure.py's)
    assert [(len(c["rounds"]), c["outdir"]) for c in figures_recorded] == [(2, out / "figures")]


@pytest.mark.integration
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_game_profile_runs_on_each_provider_with_an_exact_ledger(provider, tmp_path, capsys):
    out = tmp_path / "profile"
    with SERVERS[provider]("ok", answer=GAME_ANSWER) as srv:
        code, stdout, err = run(profile_run(provider, srv.url, out), capsys)
        calls = len(srv.calls())
    assert code == 0, err
    p = json.loads(stdout)
    assert set(p["games"]) == {"cpr", "public-goods"} and all(g["included"] for g in p["games"].values())
    t = p["totals"]
    assert t["calls"] == t["decisions"] == calls > 0 and t["fallback_used"] == 0 and t["cached_calls"] == 0
    assert (t["input_tokens"], t["output_tokens"]) == (120 * calls, 12 * calls)
    assert Decimal(str(t["cost_usd"])) == calls * PER_CALL <= BUDGET


@pytest.mark.integration
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_science_team_runs_on_each_provider_with_an_exact_ledger(provider, tmp_path, capsys):
    """The four teams, each member answering with the provider's native tool calls (write_artifact,
    mark_complete): every pass completes and writes its artifact; tokens are the only cost."""
    out = tmp_path / "science"
    server = SERVERS[provider]
    with server("ok", answer=science_answer(server)) as srv:
        code, stdout, err = run(science_run(provider, srv.url, out), capsys)
        calls = srv.calls()
    assert code == 0, err
    s = json.loads(stdout)
    assert s["status"] == "completed" and s["passes"] == ["data#1", "model#1", "eval#1", "writing#1"]
    assert any(server.talk(r.body).tools for r in calls)  # the tools went out in the provider's own format
    for name in ("dataset_description", "model_architecture", "evaluation_report", "final_paper"):
        assert (out / "artifacts" / f"{name}.v1.md").exists()
    led = s["ledger"]
    assert led["calls"] == len(calls) and (led["input_tokens"], led["output_tokens"]) == (
        120 * len(calls),
        12 * len(calls),
    )
    assert Decimal(led["cost_usd"]) == len(calls) * PER_CALL <= Decimal(led["budget_usd"])


# --- hostile usage: charged at the bound, flagged, counted -----------------------------------------
@pytest.mark.parametrize("mode", anthropic_server.USAGE_ERROR_MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_hostile_usage_is_charged_at_the_bound_and_counted(provider, mode, tmp_path, capsys, fast_backoff):
    out = tmp_path / "run"
    with SERVERS[provider](mode) as srv:
        code, stdout, err = run(cpr_run(provider, srv.url, out), capsys)
        calls = len(srv.calls())
    assert code == 0, err
    s = summary_of(out)
    assert s["status"] == "completed" and Decimal(s["ledger"]["cost_usd"]) <= BUDGET
    led = pd.read_parquet(out / "ledger.parquet")
    assert s["ledger"]["calls"] == len(led) == calls == 8 and s["ledger"]["usage_errors"] == len(led)
    assert led["usage_error"].str.startswith("the endpoint:").all()
    # charged at the bound: the request's bytes + overheads and max_tokens (64), never the report
    assert bool((led["output_tokens"] == 64).all()) and bool((led["input_tokens"] < 10_000).all())
    assert sum(Decimal(c) for c in led["cost_usd_exact"]) == Decimal(s["ledger"]["cost_usd"])
    d = pd.read_parquet(out / "decisions.parquet")
    usage_errors = int(scalar(column(d, "usage_errors").sum()))
    assert usage_errors == len(led) and not bool(d["fallback_used"].any())  # the answers were used


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_concurrent_run_with_huge_usage_ends_budget_exhausted_within_the_cap(provider, tmp_path, capsys):
    """8 agents, 8 calls at a time, each reporting 10^9 tokens: charged at their bounds, the run
    ends when the next reservation would not fit, and never spends past the cap."""
    out = tmp_path / "run"
    cap = Decimal("0.004")
    with SERVERS[provider]("huge") as srv:
        args = cpr_run(provider, srv.url, out, "--max-concurrency", 8, agents=8, rounds=3)
        args[args.index("--budget") + 1] = cap
        code, stdout, err = run(args, capsys)
        calls = len(srv.calls())
    assert code == 0, err
    s = json.loads(stdout)
    assert s["status"] == "budget_exhausted" and Decimal(s["ledger"]["cost_usd"]) <= cap
    assert s["ledger"]["usage_errors"] == s["ledger"]["calls"] == calls > 0  # every answered call is in the ledger


#: answers that say nothing: each provider's way of an empty or refused answer
EMPTY_ANSWERS = [
    ("anthropic", "empty_content"),
    ("anthropic", "refusal"),
    ("ollama", "empty_answer"),
    ("google_genai", "safety"),
    ("google_genai", "blocked_prompt"),
]


@pytest.mark.parametrize("provider,mode", EMPTY_ANSWERS)
def test_an_empty_answer_is_paid_and_falls_back(provider, mode, tmp_path, capsys):
    """An answer with no text is an answer (the server did the work): each decision asks up to 3
    times, pays each call as reported, then takes its fallback; the run completes."""
    out = tmp_path / "run"
    with SERVERS[provider](mode) as srv:
        code, stdout, err = run(cpr_run(provider, srv.url, out, rounds=1), capsys)
        calls = len(srv.calls())
    assert code == 0, err
    s = json.loads(stdout)
    d = pd.read_parquet(out / "decisions.parquet")
    attempts = scalar(column(d, "attempts").sum())
    assert s["status"] == "completed" and bool(d["fallback_used"].all()) and calls == attempts == 4 * 3
    out_tokens = 0 if mode == "blocked_prompt" else 12  # a blocked prompt reports no output
    assert (s["ledger"]["calls"], s["ledger"]["input_tokens"], s["ledger"]["output_tokens"]) == (
        calls,
        120 * calls,
        out_tokens * calls,
    )
    assert Decimal(s["ledger"]["cost_usd"]) == calls * (120 * PRICE_IN + out_tokens * PRICE_OUT) / 1000


# --- a broken server: a clean stop, one line, resumable ----------------------------------------------
def _broken(provider: str) -> list[tuple[str, str]]:
    m = MODULES[provider]
    return [(provider, mode) for mode in m.MALFORMED_MODES + m.RETRIED_ERRORS + m.FINAL_ERRORS]


@pytest.mark.parametrize("provider,mode", [case for p in PROVIDERS for case in _broken(p)])
def test_a_broken_server_stops_the_run_cleanly(provider, mode, tmp_path, capsys, fast_backoff):
    out = tmp_path / "run"
    # the first round's two effort calls succeed, then the server breaks
    with SERVERS[provider](mode, script=["ok", "ok"]) as srv:
        code, stdout, err = run(cpr_run(provider, srv.url, out), capsys)
        seen = srv.modes_seen()
        line = one_line(err)
        assert code == 1 and stdout == ""
        assert f"cooplab resume {out}" in line
        s = summary_of(out)
        assert s["status"] == "stopped" and s["rounds_completed"] == 0 and s["ledger"]["calls"] == 2
        assert Decimal(s["ledger"]["cost_usd"]) == 2 * PER_CALL
        tries = 1 if mode in MODULES[provider].FINAL_ERRORS else 1 + RETRIES
        assert seen[:2] == ["ok", "ok"] and len(seen) == 2 + 2 * tries, seen
        # the server mended, the run resumes to its end and pays each answered call once
        srv.mode = "ok"
        code, stdout, err = run(["resume", out, "-q", "--json"], capsys)
        answered = srv.modes_seen().count("ok")
    assert code == 0, err
    s = json.loads(stdout)
    assert s["status"] == "completed" and s["ledger"]["calls"] == answered == 8
    assert Decimal(s["ledger"]["cost_usd"]) == 8 * PER_CALL


def calls_read_under_a_timeout(srv) -> int:
    """The calls the server has read once one whole call's attempts (1 + RETRIES) are in. With a call
    timeout, an attempt the client gives up on before its request went out (its event loop late on a busy
    machine) never reaches the server, so the other agent's count can fall short of 1 + RETRIES; the
    error line checks the retries of the call that stopped the run."""
    return len(srv.wait_calls(1 + RETRIES))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_hanging_server_is_cut_at_the_call_timeout(provider, tmp_path, capsys, fast_backoff):
    out = tmp_path / "run"
    with SERVERS[provider]("hang") as srv:
        code, stdout, err = run(cpr_run(provider, srv.url, out, "--call-timeout", "0.5", rounds=1), capsys)
        requests = calls_read_under_a_timeout(srv)  # each of the 2 agents asks 1 + RETRIES times
    line = one_line(err)
    assert (
        code == 1 and stdout == "" and "within the call timeout of 0.5 s, 5 times" in line and "cooplab resume" in line
    )
    s = summary_of(out)
    assert s["status"] == "stopped" and s["ledger"]["calls"] == 0 and 1 + RETRIES <= requests <= 2 * (1 + RETRIES)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_server_trickling_its_answer_is_cut_at_the_call_timeout(provider, tmp_path, capsys, fast_backoff):
    """A valid answer, one byte every 50 ms: no read ever waits long, the call timeout still ends
    every attempt, and the client gives up on every delivery."""
    out = tmp_path / "run"
    with SERVERS[provider]("trickle") as srv:
        code, stdout, err = run(cpr_run(provider, srv.url, out, "--call-timeout", "0.5", rounds=1), capsys)
        requests = calls_read_under_a_timeout(srv)
        deliveries = srv.wait_deliveries(requests)  # each ends when the server finds its client gone
    line = one_line(err)
    assert code == 1 and stdout == "" and "within the call timeout of 0.5 s, 5 times" in line
    assert summary_of(out)["ledger"]["calls"] == 0 and 1 + RETRIES <= requests <= 2 * (1 + RETRIES)
    assert not any(d.complete for d in deliveries)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_oversize_answer_is_not_read_past_its_cap(provider, tmp_path, capsys, fast_backoff):
    """300 MB of answer, made as it is sent: cooplab stops reading long before, every attempt."""
    out = tmp_path / "run"
    with SERVERS[provider]("oversize") as srv:
        code, stdout, err = run(cpr_run(provider, srv.url, out, rounds=1), capsys)
        requests = len(srv.wait_calls(2 * (1 + RETRIES)))
        deliveries = srv.wait_deliveries(requests)  # each ends when the client hangs up
    line = one_line(err)
    assert code == 1 and stdout == "" and "cooplab resume" in line
    assert summary_of(out)["ledger"]["calls"] == 0
    assert requests == 2 * (1 + RETRIES) and not any(d.complete for d in deliveries)
    assert max(d.sent for d in deliveries) < 32 * 2**20, [d.sent for d in deliveries]


SURROGATE, CLEAN = "\ud800", "\ufffd"  # a lone surrogate is valid JSON ("\\ud800"), never UTF-8 text


@pytest.mark.parametrize("provider", PROVIDERS)
def test_lone_surrogates_in_answers_arrive_clean(provider, tmp_path, capsys):
    out = tmp_path / "run"
    answer = ANSWER[:-1] + ', "note": "' + SURROGATE + '"}'
    with SERVERS[provider]("ok", answer=answer) as srv:
        code, stdout, err = run(cpr_run(provider, srv.url, out, rounds=1), capsys)
    assert code == 0, err
    d = pd.read_parquet(out / "decisions.parquet")
    assert bool(d["raw"].str.contains(CLEAN).all()) and not bool(d["fallback_used"].any())
    for path in out.rglob("*.jsonl"):
        assert SURROGATE not in path.read_bytes().decode("utf-8")  # strict UTF-8
