"""The explorer's web app: Starlette routes, Jinja templates, the Host check and security headers.

    app = create_app([Path("runs")], task_for=registry_lookup)
    server, url = serve([Path("runs")], task_for=registry_lookup)   # uvicorn on 127.0.0.1, a thread

Pages (all server-rendered; the only scripts are the package's own ``static/explorer.js``, which
sorts and filters tables, and ``static/plots.js``, which draws the plots from their numbers):

* ``/``                          the runs under the folders (task, status, model, key numbers, date)
* ``/run?id=ID[&agent=A][&round=R]``  one run: the task's sections (its ``explore`` hook, the built-in
  view, or the generic one); ``agent`` follows one agent, ``round`` opens one round
* ``/compare?a=ID&b=ID``         two runs side by side: key numbers, the plots of both overlaid
* ``/group?id=ID[&metric=M]``   a sweep (its cells by condition, one aggregate plot) or a profile
  (profile.json, its games and figure)
* ``/traces?id=ID[&round=R][&agent=A][&phase=P]``  the run's model calls (prompt and answer), filtered
* ``/static/...``                the page's CSS and script (package data, no CDN)

Safety: every request must name this server by a loopback name and its port in ``Host``
(:func:`host_allowed`; 400 without exactly one Host, 421 for another name: a page whose domain was
pointed at 127.0.0.1, DNS rebinding, reads nothing); every response carries a Content-Security-Policy that allows
scripts and styles from this
server only (no inline script, no eval), images from this server and ``data:`` URIs, no frames, no
requests elsewhere. Run text reaches the page only through Jinja's autoescape.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from cooplab.evals.explorer import pages
from cooplab.evals.explorer.render import package_dir, templates

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

#: the traces page of the explorer served on one run directory (its id is "0"), as ``cooplab traces view`` opens it
TRACES_PAGE = "traces?id=0"
#: the names a request may call this server by (with its port)
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")

#: task name -> its registered Task (None when it is not installed); the command line passes the registry's
TaskLookup = Callable[[str], Any]


def host_allowed(host: str | None, bound: tuple[Any, ...]) -> bool:
    """Whether a request's ``Host`` header names this server by a loopback name (or the literal
    address it is bound to) and its bound port. Any other name (a domain pointed at 127.0.0.1 by
    DNS rebinding, ``localhost.example.com``, ``127.0.0.1.nip.io``), another port, or no Host is refused."""
    if not host:
        return False
    addr, port = str(bound[0]), int(bound[1])
    names: set[str] = set(LOOPBACK_NAMES)
    try:
        ip = ipaddress.ip_address(addr)
        if not ip.is_unspecified:
            names.add(f"[{ip.compressed}]" if ip.version == 6 else ip.compressed)
    except ValueError:
        pass
    host = host.strip().lower()
    allowed = {f"{n}:{port}" for n in names} | (names if port == 80 else set())
    return host in allowed


class Guard:
    """ASGI middleware: refuse requests not addressed to this server by a loopback name (400/421),
    add the security headers to every response."""

    def __init__(self, app: Any, bound: Callable[[], tuple[str, int]]):
        self.app, self.bound = app, bound

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hosts = [v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"]
        if len(hosts) != 1:
            await self._refuse(400, "a request needs exactly one Host header", scope, receive, send)
            return
        if not host_allowed(hosts[0], self.bound()):
            await self._refuse(
                421,
                "this explorer answers only requests for localhost, 127.0.0.1 or [::1] on its own port",
                scope,
                receive,
                send,
            )
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.decode("latin-1").lower() not in {h.lower() for h in HEADERS}
                ]
                headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _refuse(self, code: int, text: str, scope: dict, receive: Any, send: Any) -> None:
        await JSONResponse({"error": text}, status_code=code, headers=HEADERS)(scope, receive, send)


def create_app(
    roots: list[Path], *, task_for: TaskLookup | None = None, bound: Callable[[], tuple[str, int]] | None = None
) -> Any:
    """The ASGI app over the run directories under ``roots``. ``task_for`` maps a task name to its
    Task (for the ``explore`` hook); ``bound`` gives the (address, port) the server listens on, for
    the Host check (default: 127.0.0.1:80)."""
    env = templates()
    site = pages.Site(roots=[Path(r) for r in roots], task_for=task_for or (lambda name: None))

    def page(name: str, ctx: dict[str, Any], code: int = 200) -> HTMLResponse:
        # text UTF-8 cannot hold (a lone surrogate from a file or a folder name) becomes "?", never a 500
        body = env.get_template(name).render(**ctx).encode("utf-8", "replace")
        return HTMLResponse(body, status_code=code)

    async def index(request: Request) -> Response:
        return page("index.html", site.index(dict(request.query_params)))

    async def run(request: Request) -> Response:
        ctx, code = site.run_page(dict(request.query_params))
        return page("run.html" if code == 200 else "error.html", ctx, code)

    async def compare(request: Request) -> Response:
        ctx, code = site.compare_page(dict(request.query_params))
        return page("compare.html" if code == 200 else "error.html", ctx, code)

    async def group(request: Request) -> Response:
        ctx, code = site.group_page(dict(request.query_params))
        return page("group.html" if code == 200 else "error.html", ctx, code)

    async def traces(request: Request) -> Response:
        ctx, code = site.traces_page(dict(request.query_params))
        return page("traces.html" if code == 200 else "error.html", ctx, code)

    routes = [
        Route("/", index),
        Route("/run", run),
        Route("/group", group),
        Route("/compare", compare),
        Route("/traces", traces),
        Mount("/static", app=StaticFiles(directory=str(package_dir("static"))), name="static"),
    ]
    app = Starlette(routes=routes)
    return Guard(app, bound or (lambda: ("127.0.0.1", 80)))


def serve(
    roots: list[Path], *, host: str = "127.0.0.1", port: int = 0, task_for: TaskLookup | None = None
) -> tuple[Any, str]:
    """Serve the explorer on ``host:port`` (0: any free port) from a daemon thread; returns (server,
    url) once it accepts connections. Stop with :func:`stop`. An address that cannot be bound raises
    OSError."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    addr = sock.getsockname()[:2]
    app = create_app(roots, task_for=task_for, bound=lambda: addr)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign] - the thread is not the main one
    ready = threading.Event()
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), name="cooplab-explorer", daemon=True)
    server._cooplab_thread = thread  # type: ignore[attr-defined]
    server._cooplab_sock = sock  # type: ignore[attr-defined]
    thread.start()
    while not server.started and thread.is_alive():
        ready.wait(0.02)
    if not server.started:
        raise OSError(f"the explorer could not start on {host}:{port}")
    shown = f"[{addr[0]}]" if ":" in str(addr[0]) else addr[0]
    return server, f"http://{shown}:{addr[1]}/"


def stop(server: Any) -> None:
    """Stop a server started by :func:`serve` and wait for its thread."""
    server.should_exit = True
    thread = getattr(server, "_cooplab_thread", None)
    if thread is not None:
        thread.join(timeout=30)
    sock = getattr(server, "_cooplab_sock", None)
    if sock is not None:
        sock.close()
