"""Model processes: the model calls of a phase's decisions sent to worker processes.

A society's decisions are made concurrently on one event loop, and each needs some CPU: cooplab's own
(prompts, the call path, validation, the ledger, the trace), about 0.2-0.3 ms, and the model client's.
A hosted model's client is the larger part: the HTTP client, the SDK's request and response objects and
the LangChain integration cost 1-3 ms per call on these machines (``benchmarks/RESULTS.md``), so one
process serves a few hundred decisions per second however fast the server answers.

With ``llm.model_processes`` N > 0 (``--model-processes N``), the calls of :meth:`LLMService.ask
<cooplab.agents.decisions.LLMService.ask>` (every structured decision of a society or a game) reach
their model through one of N worker processes. Only the model's own ``ainvoke`` moves: the cache, the
budget's reservations and charges, retries, the rate limit, the ledger, the trace and the response
checks stay in the run's process, in the same order, so a run's results, ledger, cache entries and
traces are those of the same run in one process. In the run's process the model is stood in for by a
:class:`RemoteChatModel`, which describes itself as the real model (name, parameters, provider labels:
a trace reads the same) and whose answer comes from the worker.

What stays in the run's process: the local model (it already runs in a process of its own, and each
worker would load the weights again), a chat model object handed in from Python (it cannot be rebuilt
from its spec in another process), a scripted model whose answers follow the order of the calls (its
counter would be split over the workers; ``"select": "prompt_hash"`` scripts can move), and the calls
of tool-using agents.

The workers are this interpreter running this module (:func:`serve`), started on the first call and
stopped by :meth:`ModelProcesses.close` (the service's ``close``); each talks to the run's process over
a private socket pair, in length-prefixed pickles: both ends are this program, and nothing else can
write to the socket. A failure of the model arrives as :class:`RemoteFailure`, classified by the worker
as the run's process would classify the original (transient or not, its HTTP status, its one-line
text), so retries and error lines are the same. A worker that dies fails its calls as transient: the
retry layer sends them again, to a worker started afresh.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import pickle
import socket
import struct
import subprocess
import sys
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from cooplab.agents.models.errors import RemoteFailure, TransientModelError
from cooplab.agents.replay import ReplayChatModel

#: the most worker processes a run may ask for (``--model-processes``; cooplab.limits' rule says the same)
MAX_MODEL_PROCESSES = 64
#: the largest frame either end accepts (a prompt or an answer this large is refused as malformed)
MAX_FRAME = 256 * 1024 * 1024
_HEADER = struct.Struct(">I")
#: environment of a worker: LangSmith's own tracing off (the run's process reports every call once)
WORKER_ENV = {"LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false", "COOPLAB_MODEL_PROCESS": "1"}


# --- what may move --------------------------------------------------------------------------------
def sendable(spec: Any, model: Any) -> bool:
    """Whether calls of ``model`` (made from ``spec``) can be answered by a worker process: it can be
    rebuilt there from its spec, and its answers do not depend on the order of the calls it gets."""
    from cooplab.agents.models.scripted import ScriptedChatModel

    if spec.kind in ("local", "instance", "builtin"):  # builtin: registered in Python, maybe only in this process
        return False
    if isinstance(model, ScriptedChatModel):
        return model.select == "prompt_hash" or all(len(s) <= 1 for s in (model.answers, *model.by_phase.values()))
    return True


# --- failures -------------------------------------------------------------------------------------------
class ModelProcessError(RuntimeError):
    """A model process that could not start (its interpreter's error is printed above this)."""


class RemoteError(RuntimeError):
    """An error in a worker process that is not the model endpoint's (a programming error), and whose
    own exception could not be sent: its type and text."""


def _as_sent(spec: Any, model: Any, exc: BaseException) -> BaseException:
    """``exc`` as the run's process receives it: an endpoint failure as :class:`RemoteFailure`; any other
    error itself when it survives pickling unchanged (a scripted model's :class:`ScriptMissingPhase`), else
    :class:`RemoteError`."""
    from cooplab.agents.calls import adapter_type, failure_facts

    failure = (
        adapter_type(model)(spec, model).failure(exc) if model is not None and isinstance(exc, Exception) else None
    )
    if failure is not None:
        return RemoteFailure(str(failure.cause), failure.transient, failure_facts(failure.cause))
    try:
        back = _loads(pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL))
        if type(back) is type(exc) and str(back) == str(exc):
            return exc
    except Exception:  # noqa: BLE001 - whatever fails to pickle is sent as its text
        pass
    return RemoteError(f"{type(exc).__name__}: {exc}")


# --- frames -------------------------------------------------------------------------------------------
#: the only modules a frame may name classes of: messages, cooplab's own (specs, failures), plain values
_LOADABLE = ("langchain_core.", "cooplab.", "pydantic.", "pydantic_core.", "datetime", "decimal", "uuid", "collections")
_BUILTINS = frozenset(
    {"dict", "list", "tuple", "set", "frozenset", "str", "bytes", "bytearray", "int", "float", "complex", "bool"}
)


class _Unpickler(pickle.Unpickler):
    """Loads what the two ends send (messages, specs, failures, plain values) and refuses any other class or
    function a frame names: an answer's text is the model's, and no frame is read as code."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins":
            value = getattr(__import__("builtins"), name, None)
            if name in _BUILTINS or (isinstance(value, type) and issubclass(value, BaseException)):
                return value
        elif module.startswith(_LOADABLE):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"a model process's frame names {module}.{name}, which is not loaded")


def _loads(data: bytes) -> Any:
    import io

    return _Unpickler(io.BytesIO(data)).load()


def _frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


async def _read_frame(reader: asyncio.StreamReader) -> Any:
    """The next frame's object, or None at the end of the stream."""
    try:
        head = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError:
        return None
    (n,) = _HEADER.unpack(head)
    if n > MAX_FRAME:
        raise ValueError(f"a model process sent a frame of {n} bytes (at most {MAX_FRAME})")
    return _loads(await reader.readexactly(n))


# --- the run's side -------------------------------------------------------------------------------------
class _Worker:
    """One worker process and the run's end of its socket pair."""

    def __init__(
        self, proc: subprocess.Popen, sock: socket.socket, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ):
        self.proc, self.sock, self.reader, self.writer = proc, sock, reader, writer
        self.pending: dict[int, asyncio.Future] = {}
        self.alive = True
        self.listener: asyncio.Task | None = None
        self.drain_lock = asyncio.Lock()

    def stop(self) -> None:
        """Ask the worker to end: shut the socket at once (the worker reads its end and exits;
        closing the stream would wait for the event loop)."""
        self.alive = False
        if self.listener is not None and not self.listener.done():
            self.listener.cancel()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # closed already
            pass
        try:
            self.writer.close()
        except RuntimeError:  # its loop is closed already
            pass

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the process to end, killing it after ``timeout`` seconds."""
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class ModelProcesses:
    """``n`` worker processes answering model calls (see the module docstring). Started on the first
    :meth:`call` in the event loop that makes it; a call from another loop starts them afresh there."""

    def __init__(self, n: int):
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_MODEL_PROCESSES:
            raise ValueError(f"model processes must be a whole number in 1..{MAX_MODEL_PROCESSES}, got {n!r}")
        self.n = n
        self.calls = 0  # calls sent to a worker
        self.started = 0  # worker processes started in all (more than n after a worker died)
        self._workers: list[_Worker | None] = [None] * n
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None  # held while workers start
        self._ids = itertools.count()

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers running now."""
        return [w.proc.pid for w in self._workers if w is not None and w.alive]

    async def _start(self, i: int) -> _Worker:
        """Start worker ``i`` and wait until it has loaded what it needs (its "ready" frame)."""
        parent, child = socket.socketpair()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "cooplab.agents.model_processes", str(child.fileno())],
                pass_fds=[child.fileno()],
                stdin=subprocess.DEVNULL,
                env={**os.environ, **WORKER_ENV},
            )
        finally:
            child.close()
        reader, writer = await asyncio.open_connection(sock=parent, limit=2**20)
        w = _Worker(proc, parent, reader, writer)
        try:
            hello = await _read_frame(reader)
        except Exception as exc:  # noqa: BLE001 - whatever it sent, it is not ready
            hello = exc
        if hello != ("ready",):
            w.stop()
            w.join()
            raise ModelProcessError(
                f"a model process did not start (exit code {proc.returncode}); what it printed is above"
            )
        w.listener = asyncio.get_running_loop().create_task(self._listen(w))
        self._workers[i] = w
        self.started += 1
        return w

    async def _listen(self, w: _Worker) -> None:
        error: BaseException | None = None
        try:
            while True:
                frame = await _read_frame(w.reader)
                if frame is None:
                    break
                ok, cid, value = frame
                fut = w.pending.pop(cid, None)
                if fut is not None and not fut.done():
                    if ok:
                        fut.set_result(value)
                    else:
                        fut.set_exception(value)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a broken stream ends the worker; its calls are retried
            error = exc
        finally:
            w.alive = False
            code = w.proc.poll()
            why = f"exited with code {code}" if code is not None else f"stopped answering ({error or 'end of stream'})"
            for fut in w.pending.values():
                if not fut.done():
                    fut.set_exception(TransientModelError("model process", f"the worker process {why}"))
            w.pending.clear()

    async def ready(self) -> None:
        """Start every worker that is not running (all at once on the first call, a dead one again) and
        wait until each is ready. A model call waits for this outside its call timeout: a worker's start
        (about a second of imports) is not the model's time."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self.close()
            self._loop, self._lock = loop, asyncio.Lock()
        assert self._lock is not None
        if all(w is not None and w.alive for w in self._workers):
            return
        async with self._lock:
            down = [i for i, w in enumerate(self._workers) if w is None or not w.alive]
            for i in down:
                old = self._workers[i]
                if old is not None:
                    old.stop()
                    old.join()
                    self._workers[i] = None
            started = await asyncio.gather(*(self._start(i) for i in down), return_exceptions=True)
        failed = [e for e in started if isinstance(e, BaseException)]
        if failed and not any(w is not None and w.alive for w in self._workers):
            raise failed[0]

    async def _worker(self) -> _Worker:
        """The live worker with the fewest calls in flight (started first if none is running)."""
        await self.ready()
        live = [w for w in self._workers if w is not None and w.alive]
        if not live:  # every worker died since: the call is retried
            raise TransientModelError("model process", "no worker process is running")
        return min(live, key=lambda w: len(w.pending))

    async def call(self, spec: Any, messages: list[BaseMessage], kwargs: dict[str, Any]) -> BaseMessage:
        """The answer of ``spec``'s model to ``messages`` with the call options ``kwargs``, from a worker."""
        w = await self._worker()
        cid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        w.pending[cid] = fut  # no suspension since the worker was chosen alive: its end fails this too
        self.calls += 1
        try:
            w.writer.write(_frame(("call", cid, spec, messages, kwargs)))
            if w.writer.transport.get_write_buffer_size() > 2**20:
                async with w.drain_lock:
                    await w.writer.drain()
        except (ConnectionError, RuntimeError) as exc:  # the socket is gone: the worker with it
            w.pending.pop(cid, None)
            raise TransientModelError("model process", f"could not reach the worker process: {exc}") from exc
        try:
            return await fut
        except asyncio.CancelledError:  # a call timeout, a stopped run: the worker drops the call too
            w.pending.pop(cid, None)
            if w.alive and not w.writer.is_closing():
                w.writer.write(_frame(("cancel", cid, None, None, None)))
            raise

    def close(self) -> None:
        """Stop every worker (each ends when its socket closes); calls start them again."""
        workers = [w for w in self._workers if w is not None]
        for w in workers:
            w.stop()
        for w in workers:
            w.join()
        self._workers = [None] * self.n
        self._loop = self._lock = None

    def __del__(self) -> None:  # a pool never closed: its workers see their sockets close with this process
        for w in getattr(self, "_workers", []):
            if w is not None and w.proc.poll() is None:
                w.proc.kill()


class RemoteChatModel(ReplayChatModel):
    """The stand-in, in the run's process, of a model whose calls a worker answers: it describes itself
    as ``original`` (so a trace reads as the original's call) and asks ``pool`` for each answer."""

    message: AIMessage | None = None  # type: ignore[assignment]
    pool: Any = None
    spec: Any = None

    async def prepare(self) -> None:
        """Have the workers running (``ProviderAdapter.invoke`` awaits this before an attempt's time starts)."""
        await self.pool.ready()

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kw: Any):
        raise NotImplementedError("a model answered by a worker process is called asynchronously (ainvoke)")

    async def _agenerate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        options = {**kwargs, **({"stop": stop} if stop else {})}
        msg = await self.pool.call(self.spec, list(messages), options)
        return ChatResult(generations=[ChatGeneration(message=msg)])


def remote_model(original: Any, spec: Any, pool: ModelProcesses) -> RemoteChatModel:
    """The stand-in of ``original`` whose answers come from ``pool``'s workers."""
    return RemoteChatModel(
        original=original,
        pool=pool,
        spec=spec,
        cache=False,
        callbacks=original.callbacks,
        tags=original.tags,
        metadata=original.metadata,
        verbose=original.verbose,
    )


# --- the worker's side ----------------------------------------------------------------------------------
async def _answer(models: dict, spec: Any, messages: list[BaseMessage], kwargs: dict[str, Any]) -> BaseMessage:
    from cooplab.agents.calls import direct_call
    from cooplab.agents.models.factory import make_chat_model

    model = models.get(spec)
    if model is None:
        model = models[spec] = make_chat_model(spec)
    msg = await direct_call(model, messages, None, kwargs)
    if msg is None:
        msg = await model.ainvoke(messages, **kwargs)
    if isinstance(msg, AIMessage) and msg.id is not None:
        msg = msg.model_copy(update={"id": None})  # the run's process names it, as its own call would
    return msg


async def serve(fd: int) -> None:
    """A worker: answer the calls that arrive on the socket ``fd`` until it closes."""
    import cooplab.agents.calls  # noqa: F401 - what every call needs, loaded before saying ready
    import cooplab.agents.models.factory  # noqa: F401

    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=fd), limit=2**20)
    writer.write(_frame(("ready",)))
    models: dict[Any, Any] = {}
    tasks: dict[int, asyncio.Task] = {}

    async def one(cid: int, spec: Any, messages: list[BaseMessage], kwargs: dict[str, Any]) -> None:
        try:
            reply: tuple = (True, cid, await _answer(models, spec, messages, kwargs))
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller
            reply = (False, cid, _as_sent(spec, models.get(spec), exc))
        finally:
            tasks.pop(cid, None)
        try:
            data = _frame(reply)
        except Exception as exc:  # noqa: BLE001 - an answer that cannot be sent is the endpoint's fault
            data = _frame((False, cid, RemoteError(f"the answer could not be sent back: {exc}")))
        if not writer.is_closing():
            writer.write(data)

    try:
        while True:
            frame = await _read_frame(reader)
            if frame is None:
                break
            op, cid, spec, messages, kwargs = frame
            if op == "call":
                tasks[cid] = asyncio.create_task(one(cid, spec, messages, kwargs))
            elif op == "cancel":
                task = tasks.pop(cid, None)
                if task is not None:
                    task.cancel()
    finally:
        for task in list(tasks.values()):
            task.cancel()
        writer.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m cooplab.agents.model_processes FD (started by cooplab, not by hand)", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(int(args[0])))
    except (KeyboardInterrupt, ConnectionError):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
