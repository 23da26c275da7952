"""A small offline viewer for a run directory's ``traces.jsonl``.

``serve(run_dir)`` starts a standard-library HTTP server on loopback in a background thread:

* ``GET /``               one HTML page (inline CSS and JS, no external assets) that draws
  the run tree: collapsible, with run type, name, duration and token counts; click a run
  to see its inputs, outputs, error and metadata. The page is package data,
  ``trace_viewer.html`` next to this module; ``__TITLE__`` in it becomes the run directory.
* ``GET /api/runs``       the runs of traces.jsonl as a JSON list (``?summary=1``: without
  inputs, outputs and extra, which is what the page loads first).
* ``GET /api/runs/<id>``  one run, in full.

The ``cooplab traces export|view`` commands are :mod:`cooplab.cli.traces`.
"""

from __future__ import annotations

import functools
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

from cooplab.graphs.tracing.export import traces_path as _traces_path

_SUMMARY_DROP = ("inputs", "outputs", "extra", "events", "serialized")
_MAX_SUMMARY_ERROR = 300
_PAGE_FILE = "trace_viewer.html"  # package data of cooplab.evals (pyproject.toml)


class _RunCache:
    """The runs of one traces file, re-read only when the file changes (it grows while a
    run is in progress). Lines that are not JSON run objects are skipped and counted."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[float, int] | None = None
        self.runs: list[dict[str, Any]] = []
        self.by_id: dict[str, dict[str, Any]] = {}
        self.bad_lines = 0

    def get(self) -> "_RunCache":
        try:
            st = self.path.stat()
            stamp = (st.st_mtime, st.st_size)
        except OSError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                self._load(stamp)
            return self

    def _load(self, stamp: tuple[float, int] | None) -> None:
        runs, bad = [], 0
        if stamp is not None:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        bad += 1
                        continue
                    if isinstance(rec, dict) and rec.get("id"):
                        runs.append(rec)
                    else:
                        bad += 1
        self.runs, self.bad_lines, self._stamp = runs, bad, stamp
        self.by_id = {str(r["id"]): r for r in runs}


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

        def do_GET(self) -> None:  # noqa: N802
            try:
                url = urlsplit(self.path)
                path = url.path.rstrip("/") or "/"
                if path in ("/", "/index.html"):
                    self._send(200, page, "text/html; charset=utf-8")
                elif path == "/api/runs":
                    c = cache.get()
                    q = parse_qs(url.query)
                    summary = q.get("summary", ["0"])[0] not in ("0", "false", "")
                    runs = [_summary(r) for r in c.runs] if summary else c.runs
                    self._json(200, runs)
                elif path.startswith("/api/runs/"):
                    rid = unquote(path[len("/api/runs/"):])
                    run = cache.get().by_id.get(rid)
                    if run is None:
                        self._json(404, {"error": f"no run {rid}"})
                    else:
                        self._json(200, run)
                elif path == "/api/info":
                    c = cache.get()
                    self._json(200, {"title": title, "file": str(c.path), "exists": c.path.is_file(),
                                     "runs": len(c.runs), "bad_lines": c.bad_lines})
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
