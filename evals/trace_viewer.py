"""A small offline viewer for a run directory's ``traces.jsonl``.

``serve(run_dir)`` starts a standard-library HTTP server on loopback in a background thread:

* ``GET /``               one HTML page (inline CSS and JS, no external assets) that draws
  the run tree: collapsible, with run type, name, duration and token counts; click a run
  to see its inputs, outputs, error and metadata. The page is package data,
  ``trace_viewer.html`` next to this module; ``__TITLE__`` in it becomes the run directory.
* ``GET /api/runs``       the runs of traces.jsonl as a JSON list (``?summary=1``: without
  inputs, outputs and extra, which is what the page loads first).
* ``GET /api/runs/<id>``  one run, in full.
* ``GET /api/info``       the file, how many runs it holds, which lines could not be read, and
  ``ledger``: what the run's ledger charged for model calls (calls, tokens, cost; null without one).

Token counts come from two places and the page says which is which: an ``llm`` run's
``prompt_tokens``/``completion_tokens`` are what the model *reported*; the ledger *charges* at most
the call's output cap, at the run's prices. Each model call the ledger charged also gets
``charged_prompt_tokens``, ``charged_completion_tokens`` and ``cost_usd`` (matched by its call id).

Only requests addressed to this server by a loopback name are answered: the ``Host`` header
must be ``localhost``, ``127.0.0.1`` or ``[::1]`` (or the literal address it is bound to) with
the bound port, else 421 (400 without a Host). A web page that points its own domain name at
127.0.0.1 (DNS rebinding) therefore gets no prompt or answer out of a running viewer.

A line of traces.jsonl that cannot be read (not JSON, not a run object, nested deeper than
:data:`cooplab.limits.MAX_JSON_DEPTH` levels) is skipped and its number reported in ``/api/info``;
the rest of the file is served as usual.

The ``cooplab traces export|view`` commands are :mod:`cooplab.cli.traces`.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import sys
import threading
import time
import webbrowser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cooplab.graphs.tracing.charges import Charge, ledger_charges, ledger_totals, match_charges
from cooplab.graphs.tracing.export import traces_path as _traces_path
from cooplab.limits import parse_json

_SUMMARY_DROP = ("inputs", "outputs", "extra", "events", "serialized")
_MAX_SUMMARY_ERROR = 300
_MAX_BAD_LINE_NUMBERS = 20  # the numbers of unreadable lines listed in /api/info (all are counted)
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_PAGE_FILE = "trace_viewer.html"  # package data of cooplab.evals (pyproject.toml)


def _stamp(path: Path) -> tuple[float, int] | None:
    """A file's modification time and size (None when it cannot be read): what tells it changed."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime, st.st_size


#: the files beside traces.jsonl that what the ledger charged is read from (:mod:`~cooplab.graphs.tracing.charges`)
_CHARGE_FILES = ("ledger.parquet", "ledger.csv", "config.json")


class _RunCache:
    """The runs of one traces file, re-read only when the file changes (it grows while a
    run is in progress). Lines that are not JSON run objects (or are nested too deeply to
    handle) are skipped: counted, and the first few listed by number. What the ledger charged
    for each model call is matched again only when the runs, the ledger or config.json change."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[float, int] | None = None
        self._charged: dict[str, Charge] = {}
        self._charged_stamp: tuple[Any, ...] | None = None
        self.runs: list[dict[str, Any]] = []
        self.by_id: dict[str, dict[str, Any]] = {}
        self.bad_lines = 0
        self.bad_line_numbers: list[int] = []
        self.read_error: str | None = None

    def get(self) -> "_RunCache":
        stamp = _stamp(self.path)
        with self._lock:
            if stamp != self._stamp:
                self._load(stamp)
            return self

    def charged(self) -> dict[str, Charge]:
        """What the run's ledger charged for each model call of the file, by run id (none without a ledger)."""
        with self._lock:
            stamp = (self._stamp, *(_stamp(self.path.parent / name) for name in _CHARGE_FILES))
            if stamp != self._charged_stamp:
                self._charged = match_charges(self.runs, ledger_charges(self.path.parent))
                self._charged_stamp = stamp
            return self._charged

    def _load(self, stamp: tuple[float, int] | None) -> None:
        runs: list[dict[str, Any]] = []
        bad: list[int] = []
        self.read_error = None
        if stamp is not None:
            try:
                with open(self.path, encoding="utf-8", errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        if not line.strip():
                            continue
                        rec = _run_or_none(line)
                        if rec is None:
                            bad.append(n)
                        else:
                            runs.append(rec)
            except OSError as exc:  # unreadable now (permissions, removed): say so, serve what was read
                self.read_error = f"cannot read {self.path.name}: {exc.strerror or exc}"
        self.runs, self.bad_lines, self.bad_line_numbers, self._stamp = runs, len(bad), bad[:_MAX_BAD_LINE_NUMBERS], stamp
        self.by_id = {str(r["id"]): r for r in runs}


def _run_or_none(line: str) -> dict[str, Any] | None:
    """One line of traces.jsonl as a run object, or None if it is not one (not JSON, not an
    object with an id, nested deeper than the JSON depth cap)."""
    try:
        rec = parse_json(line, "line", error=ValueError)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) and rec.get("id") else None


def host_allowed(host: str | None, bound: tuple[Any, ...]) -> bool:
    """Whether a request's ``Host`` header names this server by a loopback name (or the literal
    address it is bound to) and its bound port. Any other name (a domain pointed at 127.0.0.1 by
    DNS rebinding, ``localhost.example.com``, ``127.0.0.1.nip.io``), another port, or no Host is refused."""
    if not host:
        return False
    addr, port = str(bound[0]), int(bound[1])
    names = set(LOOPBACK_NAMES)
    try:
        ip = ipaddress.ip_address(addr)
        if not ip.is_unspecified:
            names.add(f"[{ip.compressed}]" if ip.version == 6 else ip.compressed)
    except ValueError:
        pass
    host = host.strip().lower()
    allowed = {f"{n}:{port}" for n in names} | (names if port == 80 else set())
    return host in allowed


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in run.items() if k not in _SUMMARY_DROP}
    meta = ((run.get("extra") or {}).get("metadata") or {}) if isinstance(run.get("extra"), dict) else {}
    for k in ("langgraph_node", "langgraph_step", "ls_model_name", "ls_provider"):
        if k in meta:
            out[k] = meta[k]
    usage = (run.get("extra") or {}).get("usage_metadata") if isinstance(run.get("extra"), dict) else None
    if isinstance(usage, dict) and "total_tokens" not in out:
        out["prompt_tokens"] = usage.get("input_tokens")
        out["completion_tokens"] = usage.get("output_tokens")
        out["total_tokens"] = usage.get("total_tokens")
    err = out.get("error")
    if isinstance(err, str) and len(err) > _MAX_SUMMARY_ERROR:
        out["error"] = err[:_MAX_SUMMARY_ERROR] + "..."
    return out


def _with_charge(run: dict[str, Any], charged: dict[str, Charge]) -> dict[str, Any]:
    """A model call's record with what the ledger charged for it beside the tokens the model
    reported: ``charged_prompt_tokens``, ``charged_completion_tokens``, ``cost_usd``."""
    ch = charged.get(str(run.get("id")))
    if ch is None:
        return run
    return {**run, "charged_prompt_tokens": ch.input_tokens, "charged_completion_tokens": ch.output_tokens, "cost_usd": float(ch.cost)}


@functools.cache
def _page_template() -> str:
    """The viewer page (package data), with its ``__TITLE__`` placeholders."""
    return resources.files(__package__).joinpath(_PAGE_FILE).read_text(encoding="utf-8")


def _make_handler(cache: _RunCache, title: str):
    page = _page_template().replace("__TITLE__", _html_escape(title)).encode("utf-8")

    class Handler(BaseHTTPRequestHandler):
        server_version = "cooplab-traces/1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header(
                "Content-Security-Policy",
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                "connect-src 'self'; img-src data:",
            )
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, code: int, obj: Any) -> None:
            body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            self._send(code, body, "application/json; charset=utf-8")

        def do_HEAD(self) -> None:  # noqa: N802
            self.do_GET()

        def _addressed_here(self) -> bool:
            """Refuse (400/421, nothing served) a request whose Host is missing, repeated or not ours."""
            hosts = self.headers.get_all("Host") or []
            if len(hosts) != 1:
                self._json(400, {"error": "a request needs exactly one Host header"})
                return False
            if not host_allowed(hosts[0], self.server.server_address):
                self._json(421, {"error": "this viewer answers only requests for localhost, 127.0.0.1 or [::1] on its own port"})
                return False
            return True

        def do_GET(self) -> None:  # noqa: N802
            try:
                if not self._addressed_here():
                    return
                url = urlsplit(self.path)
                path = url.path.rstrip("/") or "/"
                if path in ("/", "/index.html"):
                    self._send(200, page, "text/html; charset=utf-8")
                elif path == "/api/runs":
                    c = cache.get()
                    q = parse_qs(url.query)
                    summary = q.get("summary", ["0"])[0] not in ("0", "false", "")
                    charged = c.charged()
                    self._json(200, [_with_charge(_summary(r) if summary else r, charged) for r in c.runs])
                elif path.startswith("/api/runs/"):
                    rid = unquote(path[len("/api/runs/"):])
                    c = cache.get()
                    run = c.by_id.get(rid)
                    if run is None:
                        self._json(404, {"error": f"no run {rid}"})
                    else:
                        self._json(200, _with_charge(run, c.charged()))
                elif path == "/api/info":
                    c = cache.get()
                    self._json(200, {"title": title, "file": str(c.path), "exists": c.path.is_file(),
                                     "runs": len(c.runs), "bad_lines": c.bad_lines, "bad_line_numbers": c.bad_line_numbers,
                                     "read_error": c.read_error, "ledger": ledger_totals(c.path.parent)})
                else:
                    self._json(404, {"error": "not found"})
            except (BrokenPipeError, ConnectionResetError):
                pass
            except Exception as exc:  # keep serving
                try:
                    self._json(500, {"error": f"{type(exc).__name__}: {exc}"})
                except Exception:
                    pass

    return Handler


def serve(run_dir: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``run_dir``'s traces on ``host:port`` (0: any free port) from a daemon thread.
    Returns ``(server, url)``; stop with ``server.shutdown(); server.server_close()``."""
    path = _traces_path(run_dir)
    cache = _RunCache(path)
    title = str(Path(run_dir))
    server = ThreadingHTTPServer((host, port), _make_handler(cache, title))
    server.daemon_threads = True
    t = threading.Thread(target=server.serve_forever, name="trace-viewer", daemon=True)
    t.start()
    h, p = server.server_address[:2]
    shown = f"[{h}]" if ":" in str(h) else h
    return server, f"http://{shown}:{p}/"


def view(run_dir: str | os.PathLike[str], port: int = 0, open_browser: bool = False, *,
         host: str = "127.0.0.1", block: bool = True) -> tuple[ThreadingHTTPServer, str]:
    """Start the viewer, print its URL, and (``block``) wait until Ctrl-C, then stop it."""
    server, url = serve(run_dir, host=host, port=port)
    print(f"trace viewer for {run_dir}: {url}  (Ctrl-C to stop)" if block else url, flush=True)
    if open_browser:
        try:
            webbrowser.open(url)
        except Exception:
            pass
    if not block:
        return server, url
    try:
        while True:
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("trace viewer stopped", file=sys.stderr)
    finally:
        server.shutdown()
        server.server_close()
    return server, url


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
