"""One sandbox session per agent: the pool that tool-using agents take their ``run_code`` sandbox from.

:class:`AgentSandboxPool` hands out one :class:`~cooplab.sandbox.session.SandboxSession` per
agent id, created lazily on the agent's first call, reused for all its later calls (variables
persist for that agent, never across agents) and closed with the pool::

    with AgentSandboxPool(SandboxConfig(dataset="data.csv"), backend="docker") as pool:
        call = pool.run("data.lead", "df.shape")        # or: await pool.arun(...)
        call.result.status, call.result.result, call.seconds

Rules (docs/sandbox.md):

* ``backend="docker"`` (the default: agents run model-written code) never falls back to the
  local backend: a missing daemon or image raises :class:`SandboxUnavailable` (at construction
  with ``check=True``, the default, else at the first call), and a session that would not be a
  container is refused.
* ``backend="auto"`` is docker when a daemon answers, else local, as documented for
  ``SandboxSession``; the resolved backend is in :attr:`backend` and a warning is logged when it
  is local. ``backend="local"`` is no security boundary.
* ``warm=N`` keeps N started sandboxes ready (the existing warm :class:`SandboxPool`), so an
  agent's first call does not wait for a cold start (it is still charged the seconds that start took).
  ``expected=K`` says how many agents will use the pool: the warm pool never holds more sandboxes
  than agents still to come, so a run that knows its agents ends without a spare started for nobody.

Every call reports the seconds it used (wall time of the session's ``run_code`` on the host,
restarts after a crash included, and on an agent's first call the seconds its sandbox took to
start), which the ``run_code`` tool charges to the ledger as ``sandbox_seconds``;
:meth:`max_call_seconds` is a true upper bound of it, used
to reserve the charge before the call. Thread-safe and usable from asyncio (``arun`` runs the
blocking call in a worker thread); calls of one agent run one at a time, calls of different
agents in parallel.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Optional

from .models import (
    ExecResult,
    SandboxConfig,
    SandboxError,
    SandboxUnavailable,
    check_seconds,
)
from .session import HOST_MARGIN, Backend, SandboxPool, SandboxSession, resolve_backend

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SandboxCall:
    """The outcome of one pooled call: the sandbox's result and the host seconds it used."""

    agent_id: str
    result: ExecResult
    seconds: float
    backend: str


class AgentSandboxPool:
    """One sandbox session per agent id (see the module docstring)."""

    def __init__(
        self,
        config: Optional[SandboxConfig] = None,
        *,
        backend: Backend = "docker",
        warm: int = 0,
        expected: Optional[int] = None,
        check: bool = True,
        **overrides,
    ):
        if backend not in ("docker", "local", "auto"):
            raise ValueError(f"unknown sandbox backend {backend!r} (docker, local or auto)")
        if isinstance(warm, bool) or not isinstance(warm, int) or warm < 0:
            raise ValueError(f"warm must be a non-negative integer, got {warm!r}")
        if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int) or expected < 0):
            raise ValueError(f"expected must be a non-negative integer or None, got {expected!r}")
        self.config = (config or SandboxConfig()).with_overrides(**overrides)
        self.requested = backend
        self.backend = resolve_backend(backend)
        if backend == "docker" and self.backend != "docker":  # pragma: no cover - resolve_backend keeps it
            raise SandboxUnavailable("docker was asked for; refusing to fall back to the local backend")
        if self.backend == "local" and backend == "auto":
            log.warning("sandbox pool: no Docker daemon answers; backend 'auto' uses the LOCAL backend (no isolation)")
        if check and self.backend == "docker":
            self._check_docker()
        self._lock = threading.Lock()
        self._sessions: dict[str, SandboxSession] = {}
        self._starting: dict[str, threading.Lock] = {}
        self._stats: dict[str, list] = {}  # agent -> [calls, seconds]
        self._closed = False
        self._warm_size = warm
        self._expected = expected
        self._handed = 0  # sessions started (each took a warm sandbox, or started its own)
        size = warm if expected is None else min(warm, expected)
        self._warm = SandboxPool(self.config, size=size, backend=self.backend) if size else None

    def _check_docker(self) -> None:
        from . import docker_backend

        if not docker_backend.daemon_available():
            raise SandboxUnavailable(
                "no Docker daemon answers; start it with `sudo bash scripts/ensure-docker.sh` "
                "(a docker sandbox pool never falls back to local execution)"
            )
        if not docker_backend.image_available(self.config.image):
            raise SandboxUnavailable(
                f"sandbox image {self.config.image!r} is missing; build it with `cooplab sandbox build`"
            )

    # -- sessions ---------------------------------------------------------------------------
    @property
    def isolated(self) -> bool:
        """True when sessions are containers (the docker backend)."""
        return self.backend == "docker"

    @property
    def closed(self) -> bool:
        return self._closed

    def agents(self) -> list[str]:
        with self._lock:
            return sorted(self._sessions)

    def _started(self, agent_id: str) -> SandboxSession | None:  # under self._lock
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        return self._sessions.get(agent_id)

    def session(self, agent_id: str) -> SandboxSession:
        """The started session of ``agent_id`` (created on first use, then reused)."""
        return self._session(agent_id)[0]

    def _session(self, agent_id: str) -> tuple[SandboxSession, bool]:
        """The started session of ``agent_id``, and whether this call started it."""
        if not isinstance(agent_id, str) or not agent_id.strip():
            raise ValueError(f"an agent id must be a non-empty string, got {agent_id!r}")
        with self._lock:
            s = self._started(agent_id)
            if s is not None:
                return s, False
            starting = self._starting.setdefault(agent_id, threading.Lock())
        with starting:  # one start per agent; other agents start in parallel
            with self._lock:
                s = self._started(agent_id)
                if s is not None:
                    return s, False
            if self._warm is not None and self._expected is not None:
                with self._lock:  # keep ready no more sandboxes than the agents still to come after this one
                    self._handed += 1
                    left = max(0, self._expected - self._handed)
                self._warm.size = min(self._warm_size, left)  # the refill after this session's take
            s = SandboxSession(self.config, backend=self.backend, pool=self._warm)
            if s.backend != self.backend:  # pragma: no cover - SandboxSession keeps the pool's backend
                raise SandboxUnavailable(f"a {s.backend} session was made for a {self.backend} pool")
            s.start()
            with self._lock:
                if self._closed:
                    s.close()
                    raise SandboxError("the sandbox pool is closed")
                self._sessions[agent_id] = s
                self._stats.setdefault(agent_id, [0, 0.0])
            return s, True

    def discard(self, agent_id: str) -> None:
        """Throw ``agent_id``'s sandbox away (its variables with it): its next call starts a new one
        and is charged that start, as a first call is. Nothing happens for an agent without one."""
        with self._lock:
            s = self._sessions.pop(agent_id, None)
        if s is not None:
            s.close()

    # -- calls ------------------------------------------------------------------------------
    def max_call_seconds(self, timeout: Optional[float] = None) -> float:
        """An upper bound of the seconds one call can report: the timeout, the interrupt grace,
        the host's margin and one restart of the sandbox (a crashed or killed sandbox is replaced
        within the call)."""
        t = check_seconds(self.config.timeout if timeout is None else timeout)
        return t + self.config.interrupt_grace + HOST_MARGIN + self.config.start_timeout

    def run(self, agent_id: str, code: str, timeout: Optional[float] = None) -> SandboxCall:
        """Run ``code`` in ``agent_id``'s session; never raises for errors of the code (see
        :class:`ExecResult`), raises :class:`SandboxError` when the sandbox cannot be used. The
        seconds reported include starting the session on an agent's first call (within the bound
        of :meth:`max_call_seconds`, which counts one start): the seconds its sandbox took to start, also when a
        warm pool started it ahead of time, so a call costs the same whether its sandbox was waiting or not."""
        session, started = self._session(agent_id)
        t0 = time.perf_counter()
        result = session.run_code(code, timeout=timeout)
        seconds = time.perf_counter() - t0
        if started:  # the first call of an agent includes starting its session: compute it used
            seconds += session.start_seconds or 0.0
        with self._lock:
            st = self._stats.setdefault(agent_id, [0, 0.0])
            st[0] += 1
            st[1] += seconds
        return SandboxCall(agent_id, result, seconds, self.backend)

    async def arun(self, agent_id: str, code: str, timeout: Optional[float] = None) -> SandboxCall:
        """:meth:`run` from asyncio (the blocking call runs in a worker thread)."""
        return await asyncio.to_thread(self.run, agent_id, code, timeout)

    def usage(self) -> dict[str, dict[str, float]]:
        """Per agent: calls made and host seconds used."""
        with self._lock:
            return {a: {"calls": c, "seconds": round(s, 6)} for a, (c, s) in sorted(self._stats.items())}

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Close every session (destroying its sandbox) and the warm pool; idempotent."""
        with self._lock:
            self._closed = True
            sessions, self._sessions = list(self._sessions.values()), {}
        errors = []
        for s in sessions:
            try:
                s.close()
            except Exception as exc:  # noqa: BLE001 - close the others anyway
                errors.append(exc)
        if self._warm is not None:
            self._warm.close()
        if errors:
            log.warning("sandbox pool: %d session(s) did not close cleanly: %s", len(errors), errors[0])

    def __enter__(self) -> "AgentSandboxPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def __aenter__(self) -> "AgentSandboxPool":
        return self

    async def __aexit__(self, *exc) -> None:
        await asyncio.to_thread(self.close)


__all__ = ["AgentSandboxPool", "SandboxCall"]
