"""A rerun that does not execute code it has already executed.

A run with the response cache on replays its model calls; :class:`ReplayingSandboxPool` does the
same for the agents' ``run_code`` calls. It wraps the run's :class:`~cooplab.sandbox.pool.AgentSandboxPool`
and keeps every call's result (output, figures, status) and the seconds it was charged in the cache
file, keyed by everything that decides what the code does:

* the sandbox: the backend, the docker image's id (or, locally, the Python and library versions),
  the limits that change behaviour (memory, CPUs, output caps, the environment), the dataset's
  SHA-256 (never its path: a rerun lives in another folder);
* the run's seed and the calling agent;
* the code, and every code the agent ran before it in its session (a chain of digests), since
  variables persist between calls.

A call whose key is stored is answered from the cache without a sandbox: no start, no execution,
and the ledger is charged the seconds the first run was charged, so a rerun's budget lines, and
therefore its prompts and its model-cache keys, are the first run's. At the first call that is
not stored (the rerun took another path, or the first run never got that far) the agent's sandbox
is started and the code the agent ran since its last state reset is run again, in order, before
the new call, so the new call sees the variables it would have seen; that catch-up is not charged
(the first run paid for it).

A reset is followed as the first run lived it: after a call that timed out or crashed (its sandbox
restarted, its variables lost) the catch-up starts after that call; after a call that found its
sandbox restarted before it ran, the catch-up starts with that call.

What a rerun cannot replay: code whose effect is outside the sandbox's variables (there is none:
no network, the workspace is a tmpfs), and a run resumed from a checkpoint (its sessions start
empty, as they always have: the keys of its calls after the resume have a shorter history, and a
rerun of the whole run executes those calls again).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import threading
from typing import Any, Optional

from cooplab.limits import sha256_file

from .models import ExecResult, SandboxConfig

#: the version of the key and of the stored value (a change makes old rows misses, never wrong answers)
FORMAT = 1
#: libraries whose versions decide what code does in the local backend (the docker image's id covers them there)
LOCAL_LIBRARIES = ("numpy", "pandas", "scipy", "scikit-learn", "matplotlib", "seaborn")
#: SandboxConfig fields that do not change what code does (the dataset's path is replaced by its digest)
NOT_IN_KEY = frozenset({"dataset", "idle_timeout", "start_timeout", "local_python"})


def runtime_identity(config: SandboxConfig, backend: str) -> dict[str, Any] | None:
    """What the code runs on: the docker image's id, or the local interpreter's and libraries'
    versions. None when it cannot be known (a missing image): then nothing is cached."""
    if backend == "docker":
        from . import docker_backend

        image = docker_backend.image_id(config.image)
        return {"image_id": image} if image else None
    import platform
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in LOCAL_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    # another interpreter than ours: its versions are not these; its path is what the user gave
    return {"python": platform.python_version(), "libraries": versions, "interpreter": config.local_python}


def scope_of(config: SandboxConfig, backend: str, seed: Any) -> str | None:
    """The digest shared by every key of one run's calls, or None when the sandbox's runtime cannot be identified."""
    runtime = runtime_identity(config, backend)
    if runtime is None:
        return None
    limits = {k: v for k, v in config.model_dump(mode="json").items() if k not in NOT_IN_KEY}
    dataset = sha256_file(config.dataset) if config.dataset is not None else None
    blob = json.dumps(
        {"format": FORMAT, "backend": backend, "runtime": runtime, "limits": limits, "dataset": dataset, "seed": seed},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def call_key(scope: str, agent_id: str, before: str, code: str, timeout: Optional[float]) -> str:
    """The key of a call: the run's scope, the agent, the key of the agent's previous call ("" for
    its first), the code and its timeout."""
    blob = json.dumps([FORMAT, scope, agent_id, before, code, timeout], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def encode(result: ExecResult, seconds: float) -> str:
    data = result.model_dump(mode="python", exclude={"figures"})
    data["figures"] = [base64.b64encode(f).decode("ascii") for f in result.figures]
    return json.dumps({"result": data, "seconds": seconds}, ensure_ascii=False, separators=(",", ":"))


def decode(text: Any, bound: float) -> tuple[ExecResult, float] | None:
    """A stored call, or None when it is not one (damaged or foreign rows are misses, never answers):
    the seconds must be a finite number in [0, ``bound``] (the most a live call can be charged)."""
    try:
        data = json.loads(text)
        seconds = data["seconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            return None
        seconds = float(seconds)
        if not (math.isfinite(seconds) and 0.0 <= seconds <= bound):
            return None
        raw = dict(data["result"])
        figures = raw.pop("figures", [])
        if not isinstance(figures, list) or not all(isinstance(f, str) for f in figures):
            return None
        raw["figures"] = [base64.b64decode(f, validate=True) for f in figures]
        return ExecResult.model_validate(raw), seconds
    except (ValueError, TypeError, KeyError, RecursionError):
        return None


class _Agent:
    """One agent's place in its session: the key of its last call and the code its sandbox would hold."""

    __slots__ = ("last", "live", "ran", "stale", "lock", "queue")

    def __init__(self) -> None:
        self.last = ""  # the key of the agent's last call
        self.live: list[str] = []  # the code run since the last state reset, as the first run lived it
        self.ran = 0  # how many of ``live`` (from the start) the real sandbox has run; the rest came from the cache
        self.stale = False  # the real sandbox holds variables the first run lost (a replayed reset)
        self.lock = threading.Lock()  # one call of an agent at a time
        self.queue: asyncio.Lock | None = None  # ... taken in the order the calls arrive (asyncio)


class ReplayingSandboxPool:
    """A sandbox pool whose calls are kept in, and answered from, the response cache (module docstring).

    ``store`` has ``get_sandbox(key) -> text | None`` and ``put_sandbox(key, text)``
    (:class:`~cooplab.agents.cache.ResponseCache`). Everything else is the wrapped pool's."""

    def __init__(self, pool: Any, store: Any, scope: str):
        self._pool = pool
        self._store = store
        self._scope = scope
        self._agents: dict[str, _Agent] = {}
        self._lock = threading.Lock()
        self.replayed = 0  # calls answered from the cache
        self.executed = 0  # calls run in a sandbox (catch-up runs not counted)

    @classmethod
    def wrap(cls, pool: Any, store: Any, seed: Any) -> Any:
        """``pool`` with its calls cached in ``store``, or ``pool`` itself when ``store`` keeps
        nothing (the cache is off) or the sandbox's runtime cannot be identified."""
        if pool is None or getattr(store, "path", None) is None:  # no cache, or --cache off
            return pool
        scope = scope_of(pool.config, pool.backend, seed)
        return pool if scope is None else cls(pool, store, scope)

    def __getattr__(self, name: str) -> Any:  # config, backend, isolated, session, usage, agents, ...
        return getattr(self._pool, name)

    def _agent(self, agent_id: str) -> _Agent:
        with self._lock:
            a = self._agents.get(agent_id)
            if a is None:
                a = self._agents[agent_id] = _Agent()
            return a

    def max_call_seconds(self, timeout: Optional[float] = None) -> float:
        return self._pool.max_call_seconds(timeout)

    def run(self, agent_id: str, code: str, timeout: Optional[float] = None) -> Any:
        """:meth:`AgentSandboxPool.run`, from the cache when the call is stored."""
        from .pool import SandboxCall

        if not isinstance(code, str):
            raise TypeError("code must be a string")
        a = self._agent(agent_id)
        with a.lock:
            key = call_key(self._scope, agent_id, a.last, code, timeout)
            stored = self._store.get_sandbox(key)
            hit = decode(stored, self.max_call_seconds(timeout)) if stored is not None else None
            if hit is not None:
                result, seconds = hit
                self.replayed += 1
            else:
                result, seconds = self._execute(a, agent_id, code, timeout)
                self.executed += 1
                self._store.put_sandbox(key, encode(result, seconds))
            a.last = key
            self._follow(a, result, code, replayed=hit is not None)
            return SandboxCall(agent_id, result, seconds, self._pool.backend)

    async def arun(self, agent_id: str, code: str, timeout: Optional[float] = None) -> Any:
        """:meth:`run` from asyncio. Two calls of one agent in flight at once (two ``run_code``
        calls in one answer) run in the order they arrived, so that their keys' chain is the
        same on a rerun."""
        a = self._agent(agent_id)
        if a.queue is None:
            a.queue = asyncio.Lock()
        async with a.queue:
            return await asyncio.to_thread(self.run, agent_id, code, timeout)

    def _execute(self, a: _Agent, agent_id: str, code: str, timeout: Optional[float]) -> tuple[ExecResult, float]:
        """Run ``code`` in the real sandbox after the code it has not run yet (its catch-up, not
        charged); the seconds charged are the call's own, and its sandbox's start when this call
        started it (as a live call would be)."""
        pending = a.live[a.ran :]
        if a.stale:  # the first run's sandbox lost its variables here; throw this one's away too
            self._pool.discard(agent_id)
            a.stale = False
        started_here = agent_id not in self._pool.agents()
        for earlier in pending:
            self._pool.run(agent_id, earlier, timeout)
        call = self._pool.run(agent_id, code, timeout)
        seconds = call.seconds
        if started_here and pending:  # the catch-up's first call carried the start; the call is charged it
            seconds += self._pool.session(agent_id).start_seconds or 0.0
        return call.result, min(seconds, self.max_call_seconds(timeout))

    @staticmethod
    def _follow(a: _Agent, result: ExecResult, code: str, *, replayed: bool) -> None:
        """What the sandbox holds after the call, as the first run lived it (module docstring)."""
        # a replayed reset while the real sandbox holds code: it keeps variables the first run lost there
        held = replayed and a.ran > 0
        if result.status in ("timeout", "crashed"):  # the sandbox was restarted after the code: nothing kept
            a.stale = a.stale or held
            a.live, a.ran = [], 0
        elif result.state_reset:  # it was restarted before the code ran: the code ran in a fresh sandbox
            a.stale = a.stale or held
            a.live, a.ran = [code], 0 if replayed else 1
        else:
            a.live.append(code)
            if not replayed:  # the real sandbox ran the catch-up, then this code
                a.ran = len(a.live)

    def stats(self) -> dict[str, int]:
        return {"sandbox_replayed": self.replayed, "sandbox_executed": self.executed}

    def close(self) -> None:
        self._pool.close()


__all__ = ["ReplayingSandboxPool", "call_key", "decode", "encode", "scope_of"]
