"""The guard in front of ``langgraph dev`` (langgraph.json's ``http.app``): which requests reach
LangGraph's server at all.

The server listens on loopback, and every web page the person at this machine opens can send
requests to loopback. LangGraph's own server answers any origin, any ``Host`` and any content type,
so a page on another site could start runs, and a site whose name it points at 127.0.0.1 (DNS
rebinding) could read their results. :class:`ServeGuard` runs before every middleware of LangGraph's
server (its CORS, its private-network approval) and answers 403, with one line saying why, to:

* a ``Host`` that is not one of this machine's loopback names (``localhost``, ``127.0.0.1``,
  ``[::1]``, any port) or a name the operator adds in ``$COOPLAB_SERVE_ALLOWED_HOSTS``
  (comma-separated): a page reached through another name is a rebinding page;
* an ``Origin`` that is neither the server's own (``/docs``) nor one the CORS settings allow
  (langgraph.json's ``http.cors.allow_origins``: LangGraph Studio, https://smith.langchain.com;
  ``*`` there allows nothing here), ``Origin: null`` included, and a state-changing request a
  browser marks as cross-site (``Sec-Fetch-Site``) without an Origin. So a private-network
  preflight is approved for Studio only (LangGraph's dev server approves every one);
* a state-changing request (POST, PUT, PATCH, DELETE) with a body, or a content type, that is not
  ``application/json``: a ``text/plain`` or form POST needs no CORS preflight, so a browser sends it
  to any server, whatever that server's CORS settings say.

Clients that are not browsers (``langgraph-sdk``, curl) send JSON to ``127.0.0.1`` without an Origin
and pass. Requests the server makes to itself in its own process (``langgraph_sdk.get_client()``
without a URL) carry the root path ``/noauth``, which no network request can set, and pass.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.middleware import Middleware

#: the origin of LangGraph Studio (LangSmith's web app), the one other origin langgraph.json allows
STUDIO_ORIGIN = "https://smith.langchain.com"
#: the host names every served request may carry (this machine's loopback names)
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
#: more host names the operator allows (comma-separated), e.g. the machine's name on a trusted network
HOSTS_ENV = "COOPLAB_SERVE_ALLOWED_HOSTS"
#: the root path of the server's in-process requests to itself (langgraph_sdk's loopback transport)
IN_PROCESS_ROOT = "/noauth"
#: methods that change state on the server
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: the preflight header of Chrome's private-network access; the CORS settings of langgraph.json cannot
#: allow it, so for an allowed origin the guard hands the preflight on without it, and LangGraph's
#: dev server adds its approval (``Access-Control-Allow-Private-Network``) to the answer
PNA_REQUEST = b"access-control-request-private-network"
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def _host_name(host: str) -> tuple[str, int | None] | None:
    """(lower-case name without brackets, port or None) of a Host header, or None when malformed."""
    host = host.strip()
    try:
        parts = urlsplit(f"//{host}")
        name, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not name or parts.path or parts.query or parts.fragment or parts.username is not None:
        return None
    return name.rstrip("."), port


def _origin(text: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an Origin (default port filled in), or None when it is not a URL origin."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    if (
        parts.scheme not in _DEFAULT_PORTS
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.username is not None
    ):
        return None
    return parts.scheme, parts.hostname.rstrip("."), port if port is not None else _DEFAULT_PORTS[parts.scheme]


def extra_hosts() -> list[str]:
    """The host names of ``$COOPLAB_SERVE_ALLOWED_HOSTS`` (lower case, brackets and blanks dropped)."""
    return [h.strip().strip("[]").lower() for h in os.environ.get(HOSTS_ENV, "").split(",") if h.strip().strip("[]")]


def cors_origins() -> list[str]:
    """The origins LangGraph's CORS settings allow in this server (langgraph.json's
    ``http.cors.allow_origins``, or ``$CORS_CONFIG``), else Studio's."""
    try:
        from langgraph_api import config
    except ImportError:  # not inside LangGraph's server
        return [STUDIO_ORIGIN]
    cors = getattr(config, "CORS_CONFIG", None) or {}
    origins = cors.get("allow_origins") if isinstance(cors, dict) else None
    return list(origins) if isinstance(origins, (list, tuple)) else [STUDIO_ORIGIN]


class ServeGuard:
    """ASGI middleware: answers 403 to a request from a page that must not drive this server (the
    module docstring says which); passes every other request on unchanged."""

    def __init__(self, app: Any, *, origins: Iterable[str] | None = None, hosts: Iterable[str] | None = None) -> None:
        self.app = app
        given = cors_origins() if origins is None else list(origins)
        self.origins = {
            o for o in (_origin(x) for x in given if isinstance(x, str) and x.strip() != "*") if o is not None
        }
        self.hosts = {h.strip("[]").lower() for h in (list(LOOPBACK_HOSTS) + extra_hosts() if hosts is None else hosts)}

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") not in ("http", "websocket") or scope.get("root_path") == IN_PROCESS_ROOT:
            return await self.app(scope, receive, send)
        why = self.refusal(scope)
        if why is None:
            if (
                scope.get("method") == "OPTIONS"
            ):  # an allowed origin's private-network preflight: LangGraph's middleware approves it
                scope = {
                    **scope,
                    "headers": [(k, v) for k, v in scope.get("headers") or [] if k.lower() != PNA_REQUEST],
                }
            return await self.app(scope, receive, send)
        method = scope.get("method", "WEBSOCKET")
        print(f"cooplab: refused {method} {scope.get('path', '')!r}: {why}", file=sys.stderr, flush=True)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"error": "Forbidden", "message": why}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def refusal(self, scope: Mapping[str, Any]) -> str | None:
        """Why this request is refused (one line), or None to pass it on."""
        headers: dict[str, list[str]] = {}
        for key, value in scope.get("headers") or []:
            headers.setdefault(key.decode("latin-1").lower(), []).append(value.decode("latin-1"))
        hosts = headers.get("host", [])
        if len(hosts) != 1:
            return "a request needs exactly one Host header"
        host = _host_name(hosts[0])
        if host is None or host[0] not in self.hosts:
            return (
                f"Host {hosts[0][:100]!r} is not a name of this server ({', '.join(sorted(self.hosts))}); a page that "
                "reaches it "
                f"under another name is refused (the operator can add names in ${HOSTS_ENV})"
            )
        method = str(scope.get("method", "GET")).upper()
        origins = headers.get("origin", [])
        if len(origins) > 1:
            return "a request may carry one Origin header"
        if origins:
            origin = _origin(origins[0])
            scheme = str(scope.get("scheme") or "http")
            own = (scheme, host[0], host[1] if host[1] is not None else _DEFAULT_PORTS.get(scheme, 80))
            if origin is None or (origin != own and origin not in self.origins):
                allowed = ", ".join(
                    sorted(f"{s}://{h}" + ("" if p == _DEFAULT_PORTS[s] else f":{p}") for s, h, p in self.origins)
                )
                return (
                    f"origin {origins[0][:100]!r} may not use this server (allowed: its own pages and "
                    f"{allowed or 'no other origin'}, "
                    "langgraph.json's http.cors.allow_origins)"
                )
        elif method in UNSAFE_METHODS and headers.get("sec-fetch-site", [""])[0].lower() in ("cross-site", "same-site"):
            return "a cross-site request without an Origin may not change anything here"
        if method in UNSAFE_METHODS and scope["type"] == "http":
            types = headers.get("content-type", [])
            has_body = (
                any(v.strip() not in ("", "0") for v in headers.get("content-length", []))
                or "transfer-encoding" in headers
            )
            media = types[0].split(";", 1)[0].strip().lower() if len(types) == 1 else None
            if (types or has_body) and media != "application/json":
                got = "no content type" if not types else f"content type {', '.join(types)[:100]!r}"
                return f"a {method} request to this server sends JSON (Content-Type: application/json), got {got}"
        return None


#: langgraph.json's ``http.app``: no routes of its own, only the guard in front of LangGraph's server
app = Starlette(middleware=[Middleware(ServeGuard)])

__all__ = ["HOSTS_ENV", "LOOPBACK_HOSTS", "STUDIO_ORIGIN", "ServeGuard", "app", "cors_origins", "extra_hosts"]
