"""The local model behind a process boundary (parent side).

:class:`LocalModelProcess` starts ``python -m cooplab.agents.llama_worker`` and talks to it over
pipes (see that module for the protocol). One process serves one model; calls are sequential
(llama.cpp's context is not thread-safe), which costs nothing on a CPU where one generation
already uses every core.

A crash of the model process (SIGSEGV in native code, SIGILL from an instruction the CPU lacks,
the OOM killer) surfaces as :class:`LocalModelCrashed`, a transient model error: the caller's
retry loop restarts the process and, if the crash repeats, gives up with ``ModelUnavailable``,
which stops a run cleanly at its last checkpoint (status ``stopped``, resumable). Nothing native
ever runs in the caller's process.

The model process dies with this one (SIGTERM, SIGKILL, a crash: see ``llama_worker``'s
``die_with_parent``). Workers are started from one daemon thread that lives as long as this
process (:func:`_spawn`), because Linux's parent-death signal fires when the *thread* that
started a child ends: a worker started from an executor's or a notebook helper's thread would
otherwise die with that thread.

Environment:
  ``COOPLAB_LOCAL_EXTRA_BUFTS=1``  let llama.cpp repack weights into its extra CPU buffer types
                                  (off by default: the AMX buffer type crashed on AMX CPUs)
  ``COOPLAB_LOCAL_TIMEOUT``       seconds one generation may take before the process is killed (600)
  ``COOPLAB_LOCAL_REUSE_MB``      megabytes of KV states the model process keeps to reuse prompt prefixes
                                  across calls and agents (512; 0 turns reuse off; see ``llama_worker``)
  ``COOPLAB_LOCAL_FAULT``         fault injection for tests: ``segv`` or ``segv-after:N`` (every
                                  call after the N-th makes the model process crash for real)
"""

from __future__ import annotations

import atexit
import json
import math
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any

from .models.errors import PermanentModelError, TransientModelError


class LocalModelCrashed(TransientModelError):
    """The model process died (or hung) during a call."""

    def __init__(self, message: str):
        super().__init__("crashed", message)


class LocalModelError(PermanentModelError):
    """The model process is alive but refused the request or could not load the model."""


def _signal_name(rc: int | None) -> str:
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"exit code {rc}"


_SPAWN_QUEUE: "queue.Queue[tuple[Future, tuple, dict]]" = queue.Queue()
_SPAWNER: threading.Thread | None = None
_SPAWNER_LOCK = threading.Lock()


def _spawner() -> None:
    while True:
        fut, args, kw = _SPAWN_QUEUE.get()
        try:
            fut.set_result(subprocess.Popen(*args, **kw))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            fut.set_exception(exc)


def _spawn(*args: Any, **kw: Any) -> subprocess.Popen:
    """``subprocess.Popen(*args, **kw)`` run by the process-long spawner thread (started on first use)."""
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None or not _SPAWNER.is_alive():  # also after a fork: the thread is not in the child
            _SPAWNER = threading.Thread(target=_spawner, name="cooplab-llama-spawner", daemon=True)
            _SPAWNER.start()
    fut: Future = Future()
    _SPAWN_QUEUE.put((fut, args, kw))
    return fut.result()


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        v = float(raw)
    except ValueError:
        raise LocalModelError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise LocalModelError(f"{name} must be a finite number of seconds > 0, got {raw!r}")
    return v


#: megabytes of kept KV states by default (``COOPLAB_LOCAL_REUSE_MB``): about 22,000 tokens of SmolLM2-135M
REUSE_MB = 512.0
#: the largest setting accepted (1 TiB): a bound on hostile input, not a recommendation
MAX_REUSE_MB = 1024.0 * 1024


def reuse_mb_setting() -> float:
    """``COOPLAB_LOCAL_REUSE_MB``: megabytes of KV states kept for reuse (0: off); a one-line
    :class:`LocalModelError` when it is not a number from 0 to :data:`MAX_REUSE_MB`."""
    raw = os.environ.get("COOPLAB_LOCAL_REUSE_MB")
    if raw is None or raw.strip() == "":
        return REUSE_MB
    try:
        v = float(raw)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or not 0 <= v <= MAX_REUSE_MB:
        raise LocalModelError(
            f"COOPLAB_LOCAL_REUSE_MB must be a number of megabytes from 0 (no reuse) to {MAX_REUSE_MB:g}, got {raw!r}"
        )
    return v


class LocalModelProcess:
    def __init__(
        self,
        model_path: str,
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        extra_bufts: bool | None = None,
        timeout: float | None = None,
        start_timeout: float = 300.0,
        argv: list[str] | None = None,
        reuse_mb: float | None = None,
    ):
        if extra_bufts is None:
            extra_bufts = os.environ.get("COOPLAB_LOCAL_EXTRA_BUFTS", "") in ("1", "true", "yes")
        reuse_mb = reuse_mb_setting() if reuse_mb is None else float(reuse_mb)
        self.cfg = {
            "model_path": model_path,
            "n_ctx": int(n_ctx),
            "n_threads": n_threads,
            "extra_bufts": bool(extra_bufts),
            "reuse_bytes": int(reuse_mb * 1024 * 1024),
        }
        self.timeout = timeout if timeout is not None else _env_float("COOPLAB_LOCAL_TIMEOUT", 600.0)
        self.start_timeout = start_timeout
        # the child's command line (tests substitute a stand-in that speaks the same protocol)
        self.argv = argv or [sys.executable, "-m", "cooplab.agents.llama_worker"]
        self.proc: subprocess.Popen | None = None
        self.meta: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.calls = 0  # answered calls, over all processes
        self.prompt_tokens = 0  # prompt tokens of the answered calls
        self.reused_tokens = 0  # of which the model process reused from what it had read
        self.restarts = 0  # processes started after the first
        self.threads_used: dict[int, int] = {}  # llama.cpp threads of the answered calls -> how many calls
        self.crashes: list[str] = []
        self._next_id = 0
        self._buf = b""
        self._stderr_tail: deque[bytes] = deque(maxlen=40)
        fault = os.environ.get("COOPLAB_LOCAL_FAULT", "")
        self._fault_after: int | None = None
        if fault == "segv":
            self._fault_after = 0
        elif fault.startswith("segv-after:"):
            self._fault_after = int(fault.split(":", 1)[1])

    # -- process management ---------------------------------------------------------------
    def _start(self) -> None:
        if self.proc is not None:
            self.restarts += 1
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "COOPLAB_LLAMA_PARENT": str(os.getpid())}
        self.proc = _spawn(
            [*self.argv, json.dumps(self.cfg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        self._buf = b""
        self._stderr_tail = deque(maxlen=40)  # this process's own: the last one's reader may still write to its old one
        threading.Thread(target=self._drain_stderr, args=(self.proc, self._stderr_tail), daemon=True).start()
        hello = self._read_frame(self.start_timeout, starting=True)
        if not hello.get("ready"):
            err = hello.get("error", "unknown error")
            self._kill()
            raise LocalModelError(f"the local model could not be loaded: {err}")
        self.meta = {k: v for k, v in hello.items() if k != "ready"}

    @staticmethod
    def _drain_stderr(proc: subprocess.Popen, tail: deque) -> None:
        assert proc.stderr is not None
        for line in iter(proc.stderr.readline, b""):
            tail.append(line[-500:])

    def _kill(self) -> None:
        p = self.proc
        if p is None:
            return
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                p.kill()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for f in (p.stdin, p.stdout):
            try:
                f and f.close()
            except OSError:
                pass

    def close(self) -> None:
        with self.lock:
            if self.proc is not None and self.proc.poll() is None:
                try:
                    assert self.proc.stdin is not None  # spawned with a pipe to its stdin
                    self.proc.stdin.close()  # EOF: the worker exits by itself
                    self.proc.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            self._kill()
            self.proc = None

    def _crashed(self, what: str) -> LocalModelCrashed:
        rc = self.proc.poll() if self.proc else None
        self._kill()
        tail = b"".join(self._stderr_tail).decode("utf-8", "replace").strip().splitlines()[-3:]
        msg = f"the local model process {what} ({_signal_name(rc)})" + (
            f"; its last words: {' / '.join(tail)}" if tail else ""
        )
        self.crashes.append(msg)
        return LocalModelCrashed(msg)

    def _read_frame(self, timeout: float, starting: bool = False) -> dict:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._crashed(
                    "did not start in time" if starting else f"did not answer within {timeout:g} s and was killed"
                )
            r, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not r:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                raise self._crashed("died while starting" if starting else "died during a call")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            frame = json.loads(line)
        except ValueError:
            frame = None
        if not isinstance(frame, dict):
            raise self._crashed("sent a malformed frame")
        return frame

    # -- calls ----------------------------------------------------------------------------
    def chat(self, call: dict[str, Any], *, reuse: bool = True) -> dict[str, Any]:
        """One ``create_chat_completion`` in the model process. Thread-safe (calls are serialized).
        ``reuse=False`` makes the model read the whole prompt afresh (a cold read)."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            self._next_id += 1
            rid = self._next_id
            fault = None
            if self._fault_after is not None and self.calls >= self._fault_after:
                fault = "segv"
            proc = self.proc
            assert proc is not None and proc.stdin is not None  # _start spawned it, with a pipe to its stdin
            try:
                req = {"id": rid, "call": call, "fault": fault, **({} if reuse else {"reuse": False})}
                proc.stdin.write((json.dumps(req) + "\n").encode())
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                raise self._crashed("was gone before the call") from None
            frame = self._read_frame(self.timeout)
            if frame.get("id") != rid:
                raise self._crashed(f"answered call {frame.get('id')!r} instead of {rid}")
            if not frame.get("ok"):
                raise LocalModelError(f"llama.cpp refused it ({frame.get('type')}: {frame.get('error')})")
            self.calls += 1
            self._count(frame["out"])
            n = frame.get("threads")
            if type(n) is int and 0 < n <= 4096:
                self.threads_used[n] = self.threads_used.get(n, 0) + 1
            return frame["out"]

    def _count(self, out: Any) -> None:
        """Add a call's prompt tokens and reused tokens to the totals (what the child reported,
        counted only when it is two integers that make sense)."""
        usage = out.get("usage") if isinstance(out, dict) else None
        details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
        n = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        k = details.get("cached_tokens", 0) if isinstance(details, dict) else 0
        if type(n) is int and type(k) is int and 0 <= k <= n:
            self.prompt_tokens += n
            self.reused_tokens += k


_PROCS: dict[tuple, LocalModelProcess] = {}
_PROCS_LOCK = threading.Lock()


def get_local_model(model_path: str, n_ctx: int = 8192, n_threads: int | None = None) -> LocalModelProcess:
    """The shared model process for these settings (started lazily, on the first call; its reuse
    bound, ``COOPLAB_LOCAL_REUSE_MB``, is read when it is made)."""
    key = (model_path, n_ctx, n_threads)
    with _PROCS_LOCK:
        if key not in _PROCS:
            _PROCS[key] = LocalModelProcess(model_path, n_ctx=n_ctx, n_threads=n_threads)
        return _PROCS[key]


@atexit.register
def _close_all() -> None:
    for p in list(_PROCS.values()):
        try:
            p.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def check_local_model(
    model_path: str | None = None, timeout: float = 300.0, allow_native: bool = False
) -> dict[str, Any]:
    """Run ``llama_worker --check`` in a child process: the build's system info and one short
    generation. Never raises for a crash: returns ``{"ok": False, "error": ...}``."""
    cfg: dict[str, Any] = {"allow_native": allow_native}
    if model_path:
        cfg["model_path"] = model_path
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "cooplab.agents.llama_worker", "--check", json.dumps(cfg)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"the test generation did not finish in {timeout:g} s"}
    res: dict[str, Any] = {}
    for line in reversed(p.stdout.strip().splitlines()):
        try:
            res = json.loads(line)
            break
        except ValueError:
            continue
    res["returncode"] = p.returncode
    res["wall_s"] = round(time.perf_counter() - t0, 3)
    res["ok"] = p.returncode == 0
    rebuild = "rebuild it portable: bash scripts/setup.sh --rebuild-llama"
    if p.returncode == 3:
        res["error"] = (
            f"llama-cpp-python was built for the CPU it was compiled on ({', '.join(res.get('non_portable', []))}); "
            f"{rebuild}"
        )
    elif p.returncode == -signal.SIGILL:
        res["error"] = f"it died with SIGILL: the build uses an instruction this CPU lacks; {rebuild}"
    elif p.returncode < 0:
        res["error"] = (
            f"it crashed ({_signal_name(p.returncode).removeprefix('signal ')}) in llama.cpp on this CPU; "
            "'.venv/bin/cooplab doctor' shows the CPU features and the build"
        )
    elif p.returncode > 0:
        tail = " / ".join((p.stderr or "").strip().splitlines()[-2:])
        res["error"] = f"the test generation failed (exit {p.returncode})" + (f": {tail}" if tail else "")
    return res


def main(argv: list[str] | None = None) -> int:
    """``python -m cooplab.agents.local_model --check``: one line, exit 0 (works) or 1 (why not)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["--check"]:
        print("usage: python -m cooplab.agents.local_model --check", file=sys.stderr)
        return 2
    r = check_local_model()
    if r["ok"]:
        print(
            f"local model: ok ({r.get('completion_tokens')} tokens in {r.get('generation_s')} s, build: "
            f"{r.get('system_info')})"
        )
        return 0
    print(f"the local model failed its test generation: {r['error']}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
