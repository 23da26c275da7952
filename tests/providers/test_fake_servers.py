"""The fake provider servers (``tests/fakes``) speak each provider's real wire protocol: checked with
the providers' own SDKs and LangChain integrations pointed at 127.0.0.1 (anthropic, ollama,
google-genai; langchain-anthropic, langchain-ollama, langchain-google-genai), so the end-to-end tests
in this folder exercise the real client code. Also the reason a hostile case is worth testing:
what each SDK hands on for it (a usage report it does not check, a validation error, ...)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import anthropic
import httpx
import httpx2
import ollama
import pytest
from anthropic.types import TextBlock, ToolUseBlock
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from langchain_anthropic import ChatAnthropic
from langchain_core.tools import tool
from langchain_google_genai import ChatGoogleGenerativeAI
from langchain_ollama import ChatOllama
from pydantic import BaseModel

from tests.fakes import anthropic_server as an
from tests.fakes import google_server as gg
from tests.fakes import ollama_server as ol
from tests.fakes.base import ANSWER


class Decision(BaseModel):
    effort: float
    vote: int


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def hi() -> list[Any]:
    """One user message, in the shape every SDK here takes."""
    return [{"role": "user", "content": "hi"}]


def text(block: Any) -> str:
    """The text of an Anthropic content block that must be a text block."""
    assert isinstance(block, TextBlock), block
    return block.text


def tool_use(block: Any) -> ToolUseBlock:
    """An Anthropic content block that must be a tool call."""
    assert isinstance(block, ToolUseBlock), block
    return block


# --- Anthropic -----------------------------------------------------------------------------------
def anthropic_client(srv: an.AnthropicServer, **kw) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=srv.url, api_key="test-key", max_retries=0, **kw)


def test_anthropic_sdk_reads_messages_tools_and_events():
    with an.AnthropicServer("ok") as srv:
        c = anthropic_client(srv)
        m = c.messages.create(model="claude-x", max_tokens=64, messages=hi())
        assert text(m.content[0]) == ANSWER and m.stop_reason == "end_turn" and str(m._request_id).startswith("req_")
        assert (m.usage.input_tokens, m.usage.output_tokens) == (120, 12)
        forced = c.messages.create(
            model="claude-x",
            max_tokens=64,
            messages=hi(),
            tool_choice={"type": "tool", "name": "Decision"},
            tools=[{"name": "Decision", "input_schema": {"type": "object"}}],
        )
        assert forced.stop_reason == "tool_use" and tool_use(forced.content[0]).name == "Decision"
        assert tool_use(forced.content[0]).input == json.loads(ANSWER)
        with c.messages.stream(model="claude-x", max_tokens=64, messages=hi()) as events:
            streamed = events.get_final_message()
        assert text(streamed.content[0]) == ANSWER and streamed.usage.output_tokens == 12
        assert [r.path for r in srv.calls()] == ["/v1/messages"] * 3 and srv.calls()[0].body["max_tokens"] == 64


def test_langchain_anthropic_structured_output_both_ways_and_tool_calls():
    with an.AnthropicServer("ok") as srv:
        # pydantic aliases (model, max_tokens) and a str made a SecretStr: pyright reads only field names and types
        settings: dict[str, Any] = {"model": "claude-x", "max_tokens": 64, "api_key": "test-key"}
        llm = ChatAnthropic(base_url=srv.url, max_retries=0, **settings)
        msg = llm.invoke("hi")
        assert msg.usage_metadata is not None
        assert (
            msg.content == ANSWER
            and msg.usage_metadata["input_tokens"] == 120
            and msg.usage_metadata["output_tokens"] == 12
        )
        for method in ("function_calling", "json_schema"):
            assert llm.with_structured_output(Decision, method=method).invoke("hi") == Decision(effort=0.3, vote=1)
        assert srv.calls()[1].body["tool_choice"]["name"] == "Decision" and "output_config" in srv.calls()[2].body
        srv.answer = an.Answer(tool_calls=[("add", {"a": 1, "b": 2})])
        call = asyncio.run(llm.bind_tools([add]).ainvoke("add 1 and 2")).tool_calls[0]
        assert (call["name"], call["args"]) == ("add", {"a": 1, "b": 2})


@pytest.mark.parametrize(
    "mode,error",
    [
        ("400", anthropic.BadRequestError),
        ("401", anthropic.AuthenticationError),
        ("403", anthropic.PermissionDeniedError),
        ("404", anthropic.NotFoundError),
        ("413", anthropic.RequestTooLargeError),
        ("429", anthropic.RateLimitError),
        ("500", anthropic.InternalServerError),
        ("529", anthropic.OverloadedError),
    ],
)
def test_anthropic_errors_arrive_as_the_sdks_own(mode, error):
    with an.AnthropicServer(mode) as srv:
        with pytest.raises(error) as e:
            anthropic_client(srv).messages.create(model="claude-x", max_tokens=64, messages=hi())
    assert e.value.body["error"]["type"] and e.value.request_id.startswith("req_")


@pytest.mark.parametrize("mode", an.USAGE_ERROR_MODES)
def test_anthropic_sdk_hands_on_hostile_usage_unchecked(mode):
    """Why cooplab checks usage itself: the SDK takes whatever the server reports (or raises)."""
    with an.AnthropicServer(mode) as srv:
        m = anthropic_client(srv).messages.create(model="claude-x", max_tokens=64, messages=hi())
    assert text(m.content[0]) == ANSWER
    assert (
        mode in ("huge", "over_max_tokens")
        or type(getattr(m.usage, "input_tokens", None)) is not int
        or m.usage.input_tokens < 0
    )


# --- Ollama --------------------------------------------------------------------------------------
def test_ollama_client_streams_and_lists():
    with ol.OllamaServer("ok") as srv:
        c = ollama.Client(host=srv.url)
        whole = c.chat(model="llama3", messages=hi(), stream=False)
        assert whole.message.content == ANSWER and (whole.prompt_eval_count, whole.eval_count) == (120, 12)
        parts = list(c.chat(model="llama3", messages=hi(), stream=True))
        assert (
            len(parts) > 2
            and "".join(str(p.message.content) for p in parts) == ANSWER
            and parts[-1].done
            and parts[-1].eval_count == 12
        )
        assert [m.model for m in c.list().models] == ["llama3"] and "tools" in (c.show("llama3").capabilities or [])
        with pytest.raises(ollama.ResponseError):
            c.show("mistral")


def test_langchain_ollama_streams_by_default_with_format_and_tools():
    with ol.OllamaServer("ok") as srv:
        llm = ChatOllama(model="llama3", base_url=srv.url, num_predict=64)
        msg = llm.invoke("hi")
        assert msg.content == ANSWER and msg.usage_metadata == {
            "input_tokens": 120,
            "output_tokens": 12,
            "total_tokens": 132,
        }
        assert llm.with_structured_output(Decision, method="json_schema").invoke("hi") == Decision(effort=0.3, vote=1)
        first, second = srv.calls()
        assert first.body["stream"] is True and second.body["format"]["required"] == ["effort", "vote"]
        srv.answer = ol.Answer(tool_calls=[("add", {"a": 1, "b": 2})])
        call = asyncio.run(llm.bind_tools([add]).ainvoke("add")).tool_calls[0]
        assert (call["name"], call["args"]) == ("add", {"a": 1, "b": 2})


@pytest.mark.parametrize("mode,status", [("400", 400), ("404", 404), ("500", 500), ("503", 503), ("stream_error", -1)])
def test_ollama_errors_arrive_as_response_errors(mode, status):
    with ol.OllamaServer(mode) as srv, pytest.raises(ollama.ResponseError) as e:
        list(ollama.Client(host=srv.url).chat(model="llama3", messages=hi(), stream=True))
    assert e.value.status_code == status and e.value.error


@pytest.mark.parametrize("mode", ol.MALFORMED_MODES)
def test_ollama_malformed_streams_are_not_answers(mode):
    """Each malformed mode makes the client raise, or ends a stream without ``done``. What it raises
    is not only its own errors: a JSON list as a line is an AttributeError from inside the client,
    so an adapter has to treat any exception of a call as the server's failure."""
    with ol.OllamaServer(mode) as srv:
        try:
            parts = list(ollama.Client(host=srv.url).chat(model="llama3", messages=hi(), stream=True))
        except (ValueError, AttributeError, ollama.ResponseError, httpx.HTTPError):
            return
    assert not parts or not parts[-1].done


# --- Google --------------------------------------------------------------------------------------
def google_client(srv: gg.GoogleServer, **kw) -> genai.Client:
    opts = genai_types.HttpOptions(base_url=srv.url, retry_options=genai_types.HttpRetryOptions(attempts=1), **kw)
    return genai.Client(api_key="test-key", http_options=opts)


def test_google_sdk_reaches_a_loopback_server():
    with gg.GoogleServer("ok") as srv:
        c = google_client(srv)
        r = c.models.generate_content(model="gemini-x", contents="hi")
        assert r.usage_metadata is not None
        assert r.text == ANSWER and (r.usage_metadata.prompt_token_count, r.usage_metadata.candidates_token_count) == (
            120,
            12,
        )
        assert asyncio.run(c.aio.models.generate_content(model="gemini-x", contents="hi")).text == ANSWER
        assert (
            "".join(str(ch.text) for ch in c.models.generate_content_stream(model="gemini-x", contents="hi")) == ANSWER
        )
        paths = [re.sub(r"^/v1(beta)?/", "/VERSION/", r.path) for r in srv.calls()]  # google-genai 2.x: v1beta, 3.x: v1
        assert paths == ["/VERSION/models/gemini-x:generateContent"] * 2 + [
            "/VERSION/models/gemini-x:streamGenerateContent?alt=sse"
        ]
        assert srv.calls()[0].headers["x-goog-api-key"] == "test-key"


def test_langchain_google_genai_structured_output_both_ways_and_tool_calls():
    with gg.GoogleServer("ok") as srv:
        llm = ChatGoogleGenerativeAI(
            model="gemini-x", base_url=srv.url, api_key="test-key", max_retries=0, max_output_tokens=64
        )
        msg = llm.invoke("hi")
        assert msg.usage_metadata is not None
        assert msg.content == ANSWER and (msg.usage_metadata["input_tokens"], msg.usage_metadata["output_tokens"]) == (
            120,
            12,
        )
        for method in ("json_schema", "function_calling"):
            assert llm.with_structured_output(Decision, method=method).invoke("hi") == Decision(effort=0.3, vote=1)
        schema_call, forced_call = srv.calls()[1:]
        assert schema_call.body["generationConfig"]["responseMimeType"] == "application/json"
        assert forced_call.body["toolConfig"]["functionCallingConfig"] == {
            "allowedFunctionNames": ["Decision"],
            "mode": "ANY",
        }
        srv.answer = gg.Answer(tool_calls=[("add", {"a": 1, "b": 2})])
        call = asyncio.run(llm.bind_tools([add]).ainvoke("add")).tool_calls[0]
        assert (call["name"], call["args"]) == ("add", {"a": 1, "b": 2})


@pytest.mark.parametrize(
    "mode,error",
    [
        ("400", genai_errors.ClientError),
        ("403", genai_errors.ClientError),
        ("404", genai_errors.ClientError),
        ("429", genai_errors.ClientError),
        ("500", genai_errors.ServerError),
        ("503", genai_errors.ServerError),
    ],
)
def test_google_errors_arrive_as_the_sdks_own(mode, error):
    with gg.GoogleServer(mode) as srv, pytest.raises(error) as e:
        client = google_client(srv)  # held: a client nobody refers to closes its connections
        client.models.generate_content(model="gemini-x", contents="hi")
    assert e.value.code == int(mode) and e.value.status == gg.STATUS[int(mode)]


# --- every server: a hanging server leaves the decision to the client's timeout --------------------
def test_a_hanging_server_is_cut_by_each_clients_timeout():
    with an.AnthropicServer("hang") as a, ol.OllamaServer("hang") as o, gg.GoogleServer("hang") as g:
        with pytest.raises(anthropic.APITimeoutError):
            anthropic_client(a, timeout=0.5).messages.create(model="claude-x", max_tokens=64, messages=hi())
        with pytest.raises(httpx.TimeoutException):
            ollama.Client(host=o.url, timeout=0.5).chat(model="llama3", messages=hi())
        client = google_client(g, timeout=500)  # milliseconds
        with pytest.raises((httpx.TimeoutException, httpx2.TimeoutException)):  # google-genai 3.x uses httpx2
            client.models.generate_content(model="gemini-x", contents="hi")
        assert [len(s.calls()) for s in (a, o, g)] == [1, 1, 1]
