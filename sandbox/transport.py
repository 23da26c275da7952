"""Host side of the host <-> in-sandbox runner protocol.

A *transport* is one started sandbox (a container or a local process tree)
running ``runner.py supervise``.  It speaks newline-delimited JSON: the host
writes requests to the runner's stdin, the runner answers with lines
``<nonce> <json>`` on its stdout.  The nonce is random per sandbox and is
only ever known to the host and the supervisor process (the worker that runs
user code never receives it), so nothing the user's code prints can be taken
for a frame: user output travels inside frames, JSON-encoded, and any line
without the nonce is ignored.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Optional

from .models import SandboxConfig, SandboxError

RUNNER_PATH = Path(__file__).with_name("runner.py")
BOOT = "import sys;exec(sys.argv[1])"
MAX_FRAME = 128 * 1024 * 1024


def runner_source() -> str:
    return RUNNER_PATH.read_text()


class TransportClosed(SandboxError):
    """The sandbox went away (process or container exited)."""


class FrameParser:
    """Splits a byte stream into frames carrying ``nonce``; ignores the rest."""

    def __init__(self, nonce: str):
        self.prefix = (nonce + " ").encode()
        self.buf = bytearray()
        self.frames: deque[dict] = deque()
        self.ignored_lines = 0

    def feed(self, data: bytes) -> None:
        self.buf += data
        while True:
            nl = self.buf.find(b"\n")
            if nl < 0:
                if len(self.buf) > MAX_FRAME:
                    raise SandboxError("sandbox sent an oversized frame")
                return
            line = bytes(self.buf[:nl])
            del self.buf[: nl + 1]
            if not line.startswith(self.prefix):
                self.ignored_lines += 1
                continue
            try:
                frame = json.loads(line[len(self.prefix) :])
            except ValueError:
                self.ignored_lines += 1
                continue
            if isinstance(frame, dict):
                self.frames.append(frame)


def runner_options(config: SandboxConfig, *, mode: str, dataset: Optional[str], workdir: str) -> dict:
    return {
        "mode": mode,
        "dataset": dataset,
        "workdir": workdir,
        "timeout": config.timeout,
        "interrupt_grace": config.interrupt_grace,
        "max_output_bytes": config.max_output_bytes,
        "max_result_chars": config.max_result_chars,
        "max_figures": config.max_figures,
        "max_figure_bytes": config.max_figure_bytes,
        "idle_timeout": config.idle_timeout,
        "start_timeout": config.start_timeout,
        "memory_label": config.memory,
        "memory_bytes": config.memory_bytes,
        "max_file_bytes": _parse(config.tmpfs_size),
        "pids_limit": config.pids_limit,
        "preload": list(config.preload),
    }


def _parse(v: str) -> int:
    from .models import parse_bytes

    return parse_bytes(v)


class Transport:
    """Base class: one started sandbox."""

    backend = "?"

    def __init__(self) -> None:
        self.nonce = secrets.token_hex(16)
        self.parser = FrameParser(self.nonce)
        self.ready_info: dict = {}
        self.closed = False
        #: seconds it took to start this sandbox, up to its ready handshake (set by ``start_transport``)
        self.start_seconds = 0.0
        self.stderr_tail: deque[bytes] = deque(maxlen=64)

    # subclasses implement: _write(bytes), _read_some(timeout) -> bytes|None (b"" = EOF), kill()
    def _write(self, data: bytes) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _read_some(self, timeout: float) -> Optional[bytes]:  # pragma: no cover - abstract
        raise NotImplementedError

    def kill(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def send(self, obj: dict) -> None:
        try:
            self._write((json.dumps(obj, allow_nan=False) + "\n").encode())
        except OSError as e:
            raise TransportClosed(f"sandbox channel closed: {e}") from e

    def recv(self, deadline: float) -> Optional[dict]:
        """Next frame, or None when ``deadline`` (monotonic) passes."""
        while not self.parser.frames:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            data = self._read_some(remaining)
            if data is None:
                continue
            if data == b"":
                raise TransportClosed("sandbox exited" + self._stderr_hint())
            self.parser.feed(data)
        return self.parser.frames.popleft()

    def _stderr_hint(self) -> str:
        tail = b"".join(self.stderr_tail).decode("utf-8", "replace").strip()
        return f" (stderr: {tail[-2000:]})" if tail else ""

    def handshake(self, timeout: float) -> dict:
        self.send({"op": "hello", "nonce": self.nonce})
        deadline = time.monotonic() + timeout
        while True:
            frame = self.recv(deadline)
            if frame is None:
                self.kill()
                raise SandboxError(f"{self.backend} sandbox did not become ready within {timeout:.0f} s")
            if frame.get("type") == "ready":
                self.ready_info = frame
                if not frame.get("ok", False):
                    self.kill()
                    log = (frame.get("log") or "").strip()
                    raise SandboxError(
                        (frame.get("error") or "sandbox failed to start") + (f"\n{log[-3000:]}" if log else "")
                    )
                return frame

    def alive(self) -> bool:
        """Cheap, non-blocking check that the sandbox has not exited (e.g. after
        its idle timeout)."""
        if self.closed:
            return False
        try:
            data = self._read_some(0)
        except OSError:
            return False
        if data == b"":
            return False
        if data:
            self.parser.feed(data)
        return True

    def ping(self, timeout: float = 2.0) -> bool:
        try:
            self.send({"op": "ping", "id": -1})
            deadline = time.monotonic() + timeout
            while True:
                frame = self.recv(deadline)
                if frame is None:
                    return False
                if frame.get("type") == "pong":
                    return bool(frame.get("alive"))
        except SandboxError:
            return False

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.send({"op": "close"})
        except Exception:
            pass
        self.kill()


class LocalTransport(Transport):
    """The runner as a host subprocess: best-effort limits, NOT a security boundary."""

    backend = "local"

    def __init__(self, config: SandboxConfig):
        super().__init__()
        self.workdir = tempfile.mkdtemp(prefix="cooplab-sbx-")
        os.chmod(self.workdir, 0o700)
        dataset = None
        if config.dataset is not None:
            dataset = str(config.dataset)
        opts = runner_options(config, mode="local", dataset=dataset, workdir=self.workdir)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": self.workdir,
            "TMPDIR": self.workdir,
            "LANG": "C.UTF-8",
            "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": os.path.join(self.workdir, ".mpl"),
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        for name in config.env_allowlist:
            if name in os.environ:
                env[name] = os.environ[name]
        env.update(config.extra_env)
        python = config.local_python or sys.executable
        self.proc = subprocess.Popen(
            [python, "-I", "-c", BOOT, runner_source(), "supervise", json.dumps(opts)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.workdir,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        out, err = self.proc.stdout, self.proc.stderr
        assert out is not None and err is not None  # both made as pipes just above
        self._out = out.fileno()
        self._err = err.fileno()
        os.set_blocking(self._out, False)
        os.set_blocking(self._err, False)
        self.handshake(config.start_timeout)

    def _write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def _read_some(self, timeout: float) -> Optional[bytes]:
        fds = [self._out, self._err]
        r, _, _ = select.select(fds, [], [], min(timeout, 1.0))
        if self._err in r:
            try:
                chunk = os.read(self._err, 65536)
                if chunk:
                    self.stderr_tail.append(chunk)
            except BlockingIOError:
                pass
        if self._out in r:
            try:
                return os.read(self._out, 1 << 20)
            except BlockingIOError:
                return None
        return None

    def kill(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        # the worker runs in its own session: kill what is left there too
        worker = self.ready_info.get("pid")
        if worker:
            try:
                os.killpg(int(worker), signal.SIGKILL)
            except (ProcessLookupError, PermissionError, ValueError):
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if f:
                    f.close()
            except OSError:
                pass
        shutil.rmtree(self.workdir, ignore_errors=True)


class DockerTransport(Transport):
    """The runner as PID 1 of a locked-down container (see docker_backend)."""

    backend = "docker"

    def __init__(self, client: Any, container_id: str, sock: Any, *, start_timeout: float, on_close: Any = None):
        super().__init__()
        self.client = client
        self.container_id = container_id
        self._sockio = sock
        self.sock: socket.socket = getattr(sock, "_sock", sock)
        self.sock.setblocking(True)
        self._rawbuf = bytearray()
        self._on_close = on_close
        self._kill_lock = threading.Lock()
        self.handshake(start_timeout)

    def _write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_some(self, timeout: float) -> Optional[bytes]:
        """Read docker's multiplexed attach stream; return stdout payload."""
        r, _, _ = select.select([self.sock], [], [], min(timeout, 1.0))
        if not r:
            return None
        try:
            chunk = self.sock.recv(1 << 20)
        except (ConnectionResetError, OSError):
            chunk = b""
        if not chunk:
            return b""
        self._rawbuf += chunk
        out = bytearray()
        buf = self._rawbuf
        while len(buf) >= 8:
            size = int.from_bytes(buf[4:8], "big")
            if len(buf) < 8 + size:
                break
            stream = buf[0]
            payload = bytes(buf[8 : 8 + size])
            del buf[: 8 + size]
            if stream == 1:
                out += payload
            elif stream == 2:
                self.stderr_tail.append(payload)
        return bytes(out) if out else None

    def kill(self) -> None:
        with self._kill_lock:
            if self.closed:
                return
            self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            self.client.api.remove_container(self.container_id, force=True)
        except Exception:
            pass
        if self._on_close is not None:
            try:
                self._on_close(self)
            except Exception:
                pass
