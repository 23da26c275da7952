"""Sandbox sessions (one per agent) and the warm pool."""

from __future__ import annotations

import base64
import logging
import queue
import secrets
import threading
import time
from typing import Literal, Optional, Union

from .models import ErrorInfo, ExecResult, SandboxConfig, SandboxError, check_seconds
from .transport import LocalTransport, Transport, TransportClosed

log = logging.getLogger(__name__)

Backend = Literal["docker", "local", "auto"]
HOST_MARGIN = 15.0  # seconds the host waits beyond timeout + grace before killing the sandbox


def resolve_backend(backend: str) -> str:
    """'auto' -> 'docker' when a daemon answers, else 'local'."""
    if backend not in ("docker", "local", "auto"):
        raise ValueError(f"unknown sandbox backend {backend!r} (docker, local or auto)")
    if backend != "auto":
        return backend
    from . import docker_backend

    return "docker" if docker_backend.daemon_available() else "local"


def start_transport(config: SandboxConfig, backend: str) -> Transport:
    backend = resolve_backend(backend)
    t0 = time.perf_counter()
    if backend == "local":
        t: Transport = LocalTransport(config)
    else:
        from . import docker_backend

        t = docker_backend.start_container(config)
    t.start_seconds = time.perf_counter() - t0
    return t


class SandboxPool:
    """Keeps ``size`` started, hand-shaken sandboxes (imports done, dataset
    loaded) so that sessions start fast.  A sandbox is handed to exactly one
    session and destroyed with it: containers are never reused."""

    def __init__(
        self, config: Optional[SandboxConfig] = None, size: int = 2, backend: Union[Backend, str] = "auto", **overrides
    ):  # backend: checked by resolve_backend
        self.config = (config or SandboxConfig()).with_overrides(**overrides)
        self.backend = resolve_backend(backend)
        self.size = max(0, int(size))
        self._ready: "queue.Queue[Transport]" = queue.Queue()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a fill ended (a sandbox is ready, or the start failed)
        self._filling = 0
        self._waiting = 0  # acquire() calls waiting for a fill in progress
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.last_error: Optional[BaseException] = None
        self._refill()

    def _refill(self) -> None:
        with self._lock:
            if self._closed:
                return
            missing = self.size - self._ready.qsize() - self._filling
            if missing <= 0:
                return
            self._filling += missing
            self._threads = [t for t in self._threads if t.is_alive()]
            started = [
                threading.Thread(target=self._fill_one, daemon=True, name="cooplab-sandbox-pool")
                for _ in range(missing)
            ]
            self._threads.extend(started)
        for th in started:
            th.start()

    def _fill_one(self) -> None:
        t: Optional[Transport] = None
        try:
            t = start_transport(self.config, self.backend)
        except BaseException as e:  # keep the error for diagnostics
            self.last_error = e
            log.warning("sandbox pool: could not start a sandbox: %s", e)
        with self._lock:
            self._filling -= 1
            closed = self._closed
            if t is not None and not closed:
                self._ready.put(t)
            self._changed.notify_all()
        if t is not None and closed:
            t.kill()

    def acquire(self) -> Transport:
        """A ready sandbox: from the pool if one is there; else the one a fill in progress is starting, when no
        other caller waits for it (it is ready sooner than a new start would be); else a cold start."""
        try:
            while True:
                with self._lock:
                    t = self._take_locked()
                if t is None:
                    break
                if t.ping(2.0):
                    return t
                t.kill()
        finally:
            self._refill()
        return start_transport(self.config, self.backend)

    def _take_locked(self) -> Optional[Transport]:
        """A ready sandbox, waiting for a fill in progress that nobody else waits for; None when there is none."""
        deadline = time.monotonic() + self.config.start_timeout + HOST_MARGIN
        waiting = False
        try:
            while True:
                try:
                    return self._ready.get_nowait()
                except queue.Empty:
                    pass
                if self._closed or self._filling <= self._waiting - (1 if waiting else 0):
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                if not waiting:
                    waiting = True
                    self._waiting += 1
                self._changed.wait(left)
        finally:
            if waiting:
                self._waiting -= 1

    def wait_ready(self, n: Optional[int] = None, timeout: float = 120.0) -> bool:
        n = self.size if n is None else n
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._ready.qsize() >= n:
                return True
            time.sleep(0.05)
        return False

    def session(self) -> "SandboxSession":
        return SandboxSession(self.config, backend=self.backend, pool=self)

    def close(self) -> None:
        """Destroy the ready sandboxes, and wait for the starts in progress to end and destroy theirs, so that no
        sandbox of the pool outlives this call."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
            self._changed.notify_all()
        while True:
            try:
                self._ready.get_nowait().kill()
            except queue.Empty:
                break
        for th in threads:
            if th is not threading.current_thread():
                th.join(self.config.start_timeout + HOST_MARGIN)

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SandboxSession:
    """A persistent Python sandbox bound to one agent.

    >>> with SandboxSession(SandboxConfig(dataset="data.csv"), backend="auto") as s:
    ...     r = s.run_code("df.shape")

    Variables persist across ``run_code`` calls.  After a restart (hard
    timeout, out-of-memory kill, crash) the dataset is reloaded as ``df`` and
    the result has ``state_reset=True``.
    """

    def __init__(
        self,
        config: Optional[SandboxConfig] = None,
        *,
        backend: Union[Backend, str] = "auto",  # checked by resolve_backend
        pool: Optional[SandboxPool] = None,
        **overrides,
    ):
        self.config = (config or SandboxConfig()).with_overrides(**overrides)
        self.pool = pool
        self.backend = pool.backend if pool is not None else resolve_backend(backend)
        self._transport: Optional[Transport] = None
        self._lock = threading.RLock()
        self._pending_reset = False
        self._closed = False
        self.restarts = 0
        #: seconds its first sandbox took to start (ahead of time when it came from a warm pool); None until started
        self.start_seconds: Optional[float] = None

    # -- lifecycle --------------------------------------------------------
    def start(self) -> "SandboxSession":
        with self._lock:
            if self._closed:
                raise SandboxError("session is closed")
            if self._transport is None:
                if self.pool is not None:
                    self._transport = self.pool.acquire()
                else:
                    self._transport = start_transport(self.config, self.backend)
                if self.start_seconds is None:
                    self.start_seconds = self._transport.start_seconds
        return self

    @property
    def info(self) -> dict:
        return dict(self._transport.ready_info) if self._transport else {}

    @property
    def container_id(self) -> Optional[str]:
        return getattr(self._transport, "container_id", None)

    def restart(self) -> None:
        """Throw the sandbox away and start a fresh one (state reset)."""
        with self._lock:
            old, self._transport = self._transport, None
            if old is not None:
                old.kill()
            self.restarts += 1
            self._pending_reset = True
            self.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            t, self._transport = self._transport, None
        if t is not None:
            t.close()

    def __enter__(self) -> "SandboxSession":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # best effort
        try:
            if self._transport is not None:
                self._transport.kill()
        except Exception:
            pass

    # -- execution --------------------------------------------------------
    def run_code(self, code: str, timeout: Optional[float] = None) -> ExecResult:
        """Run ``code`` in the session; never raises for errors of the code."""
        if not isinstance(code, str):
            raise TypeError("code must be a string")
        timeout = check_seconds(self.config.timeout if timeout is None else timeout)
        with self._lock:
            if self._closed:
                raise SandboxError("session is closed")
            if self._transport is not None and not self._transport.alive():
                # the sandbox went away while idle (idle timeout, killed from outside)
                self.restart()
            if self._transport is None:
                self.start()
            t = self._transport
            assert t is not None
            call_id = secrets.token_hex(8)
            started = time.monotonic()
            frame: Optional[dict] = None
            failure: Optional[ExecResult] = None
            try:
                t.send({"op": "exec", "id": call_id, "code": code, "timeout": timeout})
                deadline = started + timeout + self.config.interrupt_grace + HOST_MARGIN
                while frame is None:
                    f = t.recv(deadline)
                    if f is None:
                        failure = ExecResult(
                            status="timeout",
                            error=ErrorInfo(
                                type="TimeoutError",
                                message=f"sandbox unresponsive after {timeout:.1f} s; it was killed "
                                "and restarted (state reset)",
                            ),
                        )
                        break
                    if f.get("type") == "result" and f.get("id") == call_id:
                        frame = f
            except TransportClosed as e:
                failure = ExecResult(
                    status="crashed",
                    error=ErrorInfo(type="SandboxCrashed", message=f"{e}; the sandbox was restarted (state reset)"),
                )
            duration = time.monotonic() - started
            if frame is not None:
                result = self._from_frame(frame)
                restart = bool(frame.get("worker_dead"))
            else:
                assert failure is not None
                result = failure
                restart = True
            result.duration = round(duration, 4)
            if self._pending_reset:
                result.state_reset = True
                self._pending_reset = False
            if restart:
                try:
                    self.restart()
                    self._pending_reset = False
                    result.state_reset = True
                except SandboxError as e:
                    self._transport = None
                    self._pending_reset = True
                    result.state_reset = True
                    extra = f" (restart failed: {e})"
                    if result.error is not None:
                        result.error.message += extra
            return result

    @staticmethod
    def _from_frame(frame: dict) -> ExecResult:
        # the supervisor already sends valid text; this keeps ExecResult printable whatever happens
        text = _valid_text
        figures = []
        for b64 in frame.get("figures") or []:
            try:
                figures.append(base64.b64decode(b64))
            except (ValueError, TypeError):
                pass
        err = frame.get("error")
        truncated = bool(
            frame.get("stdout_truncated")
            or frame.get("stderr_truncated")
            or frame.get("result_truncated")
            or frame.get("figures_dropped")
        )
        result = frame.get("result")
        return ExecResult(
            status=frame.get("status", "crashed"),
            stdout=text(frame.get("stdout") or ""),
            stderr=text(frame.get("stderr") or ""),
            result=text(result) if isinstance(result, str) else None,
            figures=figures,
            error=ErrorInfo(
                type=text(err.get("type") or "Error"),
                message=text(err.get("message") or ""),
                traceback=text(err.get("traceback") or ""),
            )
            if isinstance(err, dict)
            else None,
            truncated=truncated,
        )


def _valid_text(value: object) -> str:
    """``value`` as a str that encodes to UTF-8 (lone surrogates backslash-escaped)."""
    s = value if isinstance(value, str) else str(value)
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")


def open_session(
    config: Optional[SandboxConfig] = None,
    backend: Union[Backend, str] = "auto",
    pool: Optional[SandboxPool] = None,
    **overrides,
) -> SandboxSession:
    """Create and start a session (use it as a context manager)."""
    return SandboxSession(config, backend=backend, pool=pool, **overrides).start()
