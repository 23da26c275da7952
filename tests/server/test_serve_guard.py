"""The guard in front of ``langgraph dev`` (cooplab.runs.server_app.ServeGuard), in this process
around a small app: which Host, Origin and content type reach LangGraph's server (issue 37,
point 2). test_langgraph_dev_guard.py checks the same in front of the real server, with a browser."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from cooplab.runs import server_app
from cooplab.runs.server_app import STUDIO_ORIGIN, ServeGuard

ROOT = Path(__file__).resolve().parents[2]


async def echo(request: Request) -> JSONResponse:
    return JSONResponse({"method": request.method, "headers": dict(request.headers)})


INNER = Starlette(routes=[Route("/x", echo, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])])


def ask(
    method: str,
    headers: dict[str, str],
    *,
    body: bytes | None = None,
    guard: ServeGuard | None = None,
    root_path: str = "",
) -> httpx.Response:
    app = guard or ServeGuard(INNER, origins=[STUDIO_ORIGIN])
    transport = httpx.ASGITransport(app=app, root_path=root_path)

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:2024") as c:
            return await c.request(method, "/x", headers=headers, content=body)

    return asyncio.run(go())


def passed(r: httpx.Response) -> bool:
    return r.status_code == 200 and "method" in r.json()


def refusal(r: httpx.Response) -> str:
    assert r.status_code == 403, r.text
    message = r.json()["message"]
    assert "\n" not in message
    return message


JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    "host", ["127.0.0.1:2024", "localhost:2024", "LocalHost", "[::1]:2024", "localhost.:8000", "127.0.0.1"]
)
def test_the_loopback_names_pass(host):
    assert passed(ask("GET", {"host": host}))
    assert passed(ask("POST", {"host": host, **JSON}, body=b"{}"))


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:2024",
        "127.0.0.1.nip.io:2024",
        "localhost.evil.example",
        "localhost:2024@evil",
        "",
        "127.0.0.2:2024",
        "[::2]:2024",
        "local host",
    ],
)
def test_any_other_host_is_refused(host):
    assert "Host" in refusal(ask("GET", {"host": host}))


def test_the_operator_may_add_host_names(monkeypatch):
    monkeypatch.setenv(server_app.HOSTS_ENV, " lab-box.internal , [fd00::1] ")
    guard = ServeGuard(INNER, origins=[STUDIO_ORIGIN])
    assert passed(ask("GET", {"host": "lab-box.internal:2024"}, guard=guard))
    assert passed(ask("GET", {"host": "[fd00::1]:2024"}, guard=guard))
    assert passed(ask("GET", {"host": "localhost:2024"}, guard=guard))
    assert "Host" in refusal(ask("GET", {"host": "other.internal:2024"}, guard=guard))


@pytest.mark.parametrize(
    "origin", [STUDIO_ORIGIN, STUDIO_ORIGIN + "/", "HTTPS://SMITH.LANGCHAIN.COM:443", "http://127.0.0.1:2024"]
)
def test_studio_and_the_servers_own_pages_pass(origin):
    assert passed(ask("POST", {"origin": origin, **JSON}, body=b"{}"))
    assert passed(ask("GET", {"origin": origin}))


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:8000",
        "http://localhost:2024",
        "https://smith.langchain.com.evil.example",
        "http://smith.langchain.com",
        "https://evil.example",
        "null",
        "file://",
        "chrome-extension://abc",
        "https://smith.langchain.com/studio",
        "not an origin",
    ],
)
def test_any_other_origin_is_refused_for_every_method(origin):
    for method in ("GET", "POST", "OPTIONS", "DELETE"):
        assert "origin" in refusal(ask(method, {"origin": origin, **JSON}, body=b"{}" if method == "POST" else None))


def test_a_star_in_the_cors_settings_allows_no_other_origin():
    guard = ServeGuard(INNER, origins=["*"])
    assert "origin" in refusal(ask("POST", {"origin": "https://evil.example", **JSON}, body=b"{}", guard=guard))
    assert passed(ask("POST", {"origin": "http://127.0.0.1:2024", **JSON}, body=b"{}", guard=guard))


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=b",
        "application/jsonp",
        "application/json-patch+json",
        None,
    ],
)
@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_a_state_change_that_is_not_json_is_refused(method, content_type):
    headers = {} if content_type is None else {"content-type": content_type}
    assert "application/json" in refusal(ask(method, headers, body=b'{"assistant_id": "cpr"}'))


@pytest.mark.parametrize("content_type", ["application/json", "Application/JSON; charset=utf-8"])
def test_json_passes(content_type):
    assert passed(ask("POST", {"content-type": content_type}, body=b"{}"))


def test_a_request_without_a_body_needs_no_content_type():
    """The SDK deletes a thread and cancels a run without a body."""
    assert passed(ask("DELETE", {}))
    assert passed(ask("POST", {}))
    assert "application/json" in refusal(ask("POST", {"content-type": "text/plain"}))


def test_a_cross_site_change_without_an_origin_is_refused_but_a_link_opens():
    assert "cross-site" in refusal(ask("POST", {"sec-fetch-site": "cross-site", **JSON}, body=b"{}"))
    assert passed(ask("GET", {"sec-fetch-site": "cross-site"}))  # a link to /docs from another page
    assert passed(ask("POST", {"sec-fetch-site": "same-origin", **JSON}, body=b"{}"))


def test_two_origins_or_two_hosts_are_refused():
    async def go(headers):
        transport = httpx.ASGITransport(app=ServeGuard(INNER, origins=[STUDIO_ORIGIN]))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:2024") as c:
            return await c.get("/x", headers=headers)

    assert asyncio.run(go([("origin", STUDIO_ORIGIN), ("origin", "https://evil.example")])).status_code == 403
    assert asyncio.run(go([("host", "localhost"), ("host", "evil.example")])).status_code == 403


def test_the_servers_own_in_process_requests_pass():
    """langgraph_sdk.get_client() without a URL calls the server in its process as http://api, root path /noauth."""
    assert passed(
        ask("POST", {"host": "api", "content-type": "text/plain"}, body=b"{}", root_path=server_app.IN_PROCESS_ROOT)
    )
    assert "Host" in refusal(ask("POST", {"host": "api", **JSON}, body=b"{}"))


def test_studios_private_network_preflight_is_handed_on_without_the_private_network_request():
    """LangGraph's CORS settings cannot allow it; its dev server approves it after the CORS check."""
    got = ask(
        "OPTIONS",
        {
            "origin": STUDIO_ORIGIN,
            "access-control-request-method": "POST",
            "access-control-request-private-network": "true",
        },
    ).json()["headers"]
    assert "access-control-request-private-network" not in got and got["access-control-request-method"] == "POST"


def test_a_refusal_says_why_on_the_servers_stderr(capfd):
    refusal(ask("POST", {"origin": "https://evil.example", "content-type": "text/plain"}, body=b"{}"))
    err = capfd.readouterr().err
    assert "cooplab: refused POST '/x'" in err and "https://evil.example" in err


def test_langgraph_json_puts_the_guard_in_front_and_allows_only_studio():
    http = json.loads((ROOT / "langgraph.json").read_text())["http"]
    assert http["app"] == "cooplab.runs.server_app:app"
    assert http["cors"]["allow_origins"] == [STUDIO_ORIGIN] and http["cors"].get("allow_credentials") is False
    guards = [m for m in server_app.app.user_middleware if m.cls is ServeGuard]
    assert len(guards) == 1 and server_app.app.routes == []
