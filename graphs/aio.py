"""Running a coroutine from synchronous code, also where an event loop is already running.

``asyncio.run`` refuses to start inside a running event loop: a Jupyter kernel's, an async web
handler's, an ``async def`` script's. The synchronous API (``cooplab.run``, ``resume``,
``sweep``, the science judge) must work there all the same, so :func:`run_sync` runs the
coroutine on a worker thread's own event loop when the calling thread already has one, and waits
for it; elsewhere it is plain ``asyncio.run``.

The coroutine is made on the thread that runs it (``make`` is a function returning it), so a
failure before it starts never leaves a coroutine that was never awaited. The caller's context
variables (tracing, the running workspace) are copied to the worker. Ctrl-C while waiting (a
notebook's "interrupt the kernel": KeyboardInterrupt; under ``asyncio.run``: the cancellation of
the caller's task) cancels the coroutine on its own loop, waits for it to wind down (a run keeps
its last checkpoint) and raises the same in the caller.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any, Awaitable, Callable, TypeVar

T = TypeVar("T")


def loop_running() -> bool:
    """Whether the calling thread is inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _Worker(threading.Thread):
    """One coroutine on its own event loop in its own (daemon) thread."""

    def __init__(self, make: Callable[[], Awaitable[T]], context: contextvars.Context):
        super().__init__(name="cooplab-run-sync", daemon=True)
        self._make, self._context = make, context
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._cancelled = False
        self.result: Any = None
        self.error: BaseException | None = None
        # set when run() ends. Not Thread.join/is_alive: on Python 3.11 a KeyboardInterrupt that lands
        # inside join() releases the thread's own state lock (the bpo-45274 fix), after which the thread
        # counts as stopped while its coroutine still runs
        self.done = threading.Event()

    async def _main(self) -> Any:
        with self._lock:
            self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
            if self._cancelled:  # interrupted before the coroutine was made
                raise asyncio.CancelledError
        return await self._make()

    def run(self) -> None:
        try:
            with asyncio.Runner() as runner:
                self.result = runner.run(self._main(), context=self._context)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            self.error = exc
        finally:
            self.done.set()

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._loop is not None and self._task is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._task.cancel)


def _wait(worker: _Worker, caller: asyncio.Task | None = None, asked: int = 0) -> None:
    """Wait for ``worker`` to end, in short waits: a Ctrl-C the kernel hands to another thread still
    raises KeyboardInterrupt here within a fraction of a second, and a cancellation of the
    caller's task (``asyncio.run``'s Ctrl-C handler cancels its main task) raises CancelledError."""
    while not worker.done.wait(0.2):
        if caller is not None and caller.cancelling() > asked:
            raise asyncio.CancelledError


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """``make()``'s coroutine run to completion and its result returned (its exception raised):
    with ``asyncio.run`` when no event loop runs in this thread, else on a worker thread's own
    event loop (see the module docstring)."""
    if not loop_running():

        async def main() -> T:
            return await make()

        return asyncio.run(main())
    worker = _Worker(make, contextvars.copy_context())
    caller = (
        asyncio.current_task()
    )  # the caller's task: cancelled by asyncio.run's own Ctrl-C handler, or by its framework
    asked = caller.cancelling() if caller is not None else 0
    try:
        worker.start()
        _wait(worker, caller, asked)
    except (KeyboardInterrupt, asyncio.CancelledError):
        worker.cancel()
        _wait(
            worker
        )  # the coroutine winds down (a run keeps its last checkpoint); a second Ctrl-C leaves it to finish alone
        raise
    if worker.error is not None:
        error = worker.error
        worker.error = None  # no reference cycle through the traceback
        raise error
    return worker.result
