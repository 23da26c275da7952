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

The workers are this interpreter running this module (:func:`serve`, with the run's import path and
without the current folder's), started on the first call, each model built before the worker says it is
ready (so neither a worker's start nor a provider's import falls in a call's timeout), and stopped by
:meth:`ModelProcesses.close` (the service's ``close``). Each talks to the run's process over a private
socket pair, in frames of a call id and a pickle: both ends are this program, nothing else can write to
the socket, and each end loads only messages, model specs, failures and plain values from it
(:class:`_Unpickler`), never a function. A failure of the model arrives as :class:`RemoteFailure`,
classified by the worker as the run's process would classify the original (transient or not, its HTTP
status, its one-line text), so retries and error lines are the same. A worker that dies fails its calls
as transient: the retry layer sends them again, to a worker started afresh.
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
from langchain_core.outputs import ChatResult

from cooplab.agents.models.errors import ModelProcessError, RemoteError, RemoteFailure, TransientModelError
from cooplab.agents.replay import ReplayChatModel

#: the most worker processes a run may ask for (``--model-processes``; cooplab.limits' rule says the same)
MAX_MODEL_PROCESSES = 64
#: the largest frame either end accepts (a prompt or an answer this large is refused as malformed)
MAX_FRAME = 256 * 1024 * 1024
_HEADER = struct.Struct(">IQ")  # the pickle's length, the call id
#: environment of a worker: LangSmith's own tracing off (the run's process reports every call once)
WORKER_ENV = {
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "COOPLAB_MODEL_PROCESS": "1",
}
#: seconds a worker may take to start and build its models before the run stops with one line
START_TIMEOUT = 120.0
#: how a worker is started: this module's ``main`` by import (so its classes are the run's, never ``__main__``'s)
_WORKER_CODE = "import sys; from cooplab.agents.model_processes import main; sys.exit(main())"


# --- what may move --------------------------------------------------------------------------------
def sendable(spec: Any, model: Any) -> bool:
    """Whether calls of ``model`` (made from ``spec``) can be answered by a worker process: it can be
    rebuilt there from its spec, and its answers do not depend on the order of the calls it gets."""
    from cooplab.agents.models.scripted import ScriptedChatModel

    if spec.kind in ("local", "instance", "builtin"):  # builtin: registered in Python, maybe only in this process
        return False
    if isinstance(model, ScriptedChatModel):
        if model.select == "prompt_hash":
            return True
        return model.cycle and all(len(s) <= 1 for s in (model.answers, *model.by_phase.values()))
    return True


# --- failures -------------------------------------------------------------------------------------------
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
#: the classes of the standard library a frame may hold, by module
_PLAIN = {
    "builtins": {"dict", "list", "tuple", "set", "frozenset", "str", "bytes", "bytearray", "int", "float", "complex"},
    "datetime": {"datetime", "date", "time", "timedelta", "timezone"},
    "decimal": {"Decimal"},
    "uuid": {"UUID"},
    "collections": {"OrderedDict", "defaultdict", "deque"},
}


def _loadable(module: str, name: str) -> Any:
    """The class ``module.name`` if a frame may hold its instances: a plain value type of the standard
    library, an exception, a LangChain message or generation, a model spec or a failure's facts; else None.
    Only modules already loaded are looked in, and never a function."""
    from langchain_core.outputs import Generation

    from cooplab.agents.models.errors import FailureFacts
    from cooplab.agents.models.spec import ModelSpec

    mod = sys.modules.get(module)
    value = getattr(mod, name, None) if mod is not None and "." not in name else None
    if not isinstance(value, type):
        return None
    if name in _PLAIN.get(module, ()):
        return value
    if module == "builtins" or module.startswith(("langchain_core.", "cooplab.", "google.", "openai", "anthropic")):
        # str: LangChain's text of a message or generation is a str of its own
        if issubclass(value, (BaseException, BaseMessage, Generation, str)) or value in (ModelSpec, FailureFacts):
            return value
    return None


class _Unpickler(pickle.Unpickler):
    """Loads what the two ends send (messages, generations, specs, failures, plain values) and refuses
    anything else a frame names, a function above all: an answer's text is the model's, and no frame is
    read as code."""

    def find_class(self, module: str, name: str) -> Any:
        value = _loadable(module, name)
        if value is None:
            raise pickle.UnpicklingError(f"a model process's frame names {module}.{name}, which no frame may hold")
        return value


def _loads(data: bytes) -> Any:
    import io

    return _Unpickler(io.BytesIO(data)).load()


def _frame(cid: int, obj: Any, data: bytes | None = None) -> bytes:
    """A frame of ``obj`` for call ``cid`` (``data``: ``obj`` pickled already)."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) if data is None else data
    return _HEADER.pack(len(data), cid) + data


async def _read_frame(reader: asyncio.StreamReader) -> tuple[int, Any] | None:
    """The next frame's call id and object (an :class:`Exception` when its bytes do not load), or None at
    the end of the stream."""
    try:
        head = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError:
        return None
    n, cid = _HEADER.unpack(head)
    if n > MAX_FRAME:
        raise ValueError(f"a model process sent a frame of {n} bytes (at most {MAX_FRAME})")
    data = await reader.readexactly(n)
    try:
        return cid, _loads(data)
    except Exception as exc:  # noqa: BLE001 - that frame's call fails, the others go on
        return cid, exc


def _plain(value: Any) -> Any:
    """``value`` with every object that is not a plain JSON value turned into its text (an SDK's enum
    in a response's metadata, say)."""
    import json

    return json.loads(json.dumps(value, default=str))


def _plain_answer(result: Any) -> Any:
    """A worker's answer (generation, ``llm_output``) with its metadata made plain (:func:`_plain`)."""
    generation, llm_output = result
    msg = generation.message
    msg = msg.model_copy(
        update={
            "response_metadata": _plain(msg.response_metadata),
            "additional_kwargs": _plain(msg.additional_kwargs),
        }
    )
    return (
        generation.model_copy(
            update={"message": msg, "text": str(generation.text), "generation_info": _plain(generation.generation_info)}
        ),
        _plain(llm_output),
    )


def _pickled_answer(result: Any) -> bytes:
    """The pickle of a worker's reply ``(True, result)`` as the run's process can load it: the answer as it
    is, else with its metadata made plain (what the run's process then records is that text); ValueError if
    even that does not load. Pickled once: the bytes checked are the bytes sent."""

    def encoded(value: Any) -> bytes | None:
        try:
            data = pickle.dumps((True, value), protocol=pickle.HIGHEST_PROTOCOL)
            _loads(data)
            return data
        except Exception:  # noqa: BLE001 - an SDK's own type in the metadata
            return None

    data = encoded(result)
    if data is None:
        data = encoded(_plain_answer(result))
    if data is None:
        raise ValueError("the model's answer holds objects a model process cannot send back")
    return data


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

    def send(self, cid: int, obj: Any) -> None:
        self.writer.write(_frame(cid, obj))

    def stop(self) -> None:
        """Ask the worker to end: shut the socket at once (the worker reads its end and exits;
        closing the stream would wait for the event loop)."""
        self.alive = False
        if self.listener is not None and not self.listener.done():
            try:
                self.listener.cancel()
            except RuntimeError:  # its loop is closed already
                pass
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # closed already
            pass
        try:
            self.writer.close()
        except RuntimeError:  # its loop is closed already
            pass
        self.sock.close()

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the process to end, killing it after ``timeout`` seconds."""
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _worker_env() -> dict[str, str]:
    """A worker's environment: this one's, LangSmith's tracing off, and the folders this process imports
    from beyond the interpreter's own (so a notebook that found cooplab by a path of its own finds it there
    too; the interpreter's standard library and packages come first, as in any process of it)."""
    own = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
    paths = [os.getcwd() if p == "" else p for p in sys.path]
    extra = [p for p in paths if os.path.isdir(p) and not os.path.realpath(p).startswith(own)]
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, **WORKER_ENV, "PYTHONPATH": os.pathsep.join(dict.fromkeys([*extra, *inherited]))}


class ModelProcesses:
    """``n`` worker processes answering model calls (see the module docstring). Started on the first
    :meth:`ready` in the event loop that makes it; a call from another loop starts them afresh there."""

    def __init__(self, n: int):
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_MODEL_PROCESSES:
            raise ValueError(f"model processes must be a whole number in 1..{MAX_MODEL_PROCESSES}, got {n!r}")
        self.n = n
        self.started = 0  # worker processes started in all (more than n after a worker died)
        self._workers: list[_Worker | None] = [None] * n
        self._specs: list[Any] = []  # the models every worker builds before it is ready
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None  # held while workers start or build a model
        self._failed: BaseException | None = None  # a start that failed: every later call fails the same
        self._ids = itertools.count(1)

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers running now."""
        return [w.proc.pid for w in self._workers if w is not None and w.alive]

    async def _start(self, i: int) -> _Worker:
        """Start worker ``i``, have it build every model of :attr:`_specs`, and wait until it says it is ready
        (at most :data:`START_TIMEOUT` seconds)."""
        parent, child = socket.socketpair()
        proc: subprocess.Popen | None = None
        w: _Worker | None = None
        try:
            proc = subprocess.Popen(
                [sys.executable, "-P", "-c", _WORKER_CODE, str(child.fileno())],
                pass_fds=[child.fileno()],
                stdin=subprocess.DEVNULL,
                env=_worker_env(),
                start_new_session=True,  # Ctrl-C in a terminal stops the run, which stops its workers
            )
            child.close()
            reader, writer = await asyncio.open_connection(sock=parent, limit=2**20)
            w = _Worker(proc, parent, reader, writer)
            w.send(0, ("build", list(self._specs)))
            async with asyncio.timeout(START_TIMEOUT):
                hello = await _read_frame(reader)
            if hello is None or hello[1] != "ready":
                why = hello[1] if hello is not None and isinstance(hello[1], BaseException) else None
                raise ModelProcessError(
                    f"a model process did not start (exit code {proc.poll()})" + (f": {why}" if why else "")
                )
        except BaseException as exc:
            child.close()
            if w is not None:
                w.stop()
            else:
                parent.close()
            if proc is not None and proc.poll() is None:
                proc.kill()
                await asyncio.to_thread(proc.wait)
            if isinstance(exc, TimeoutError):
                raise ModelProcessError(f"a model process did not start within {START_TIMEOUT:g} s") from None
            raise
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
                cid, reply = frame
                fut = w.pending.pop(cid, None)
                if fut is None or fut.done():
                    continue
                if isinstance(reply, BaseException):  # its bytes did not load: that call fails alone
                    fut.set_exception(RemoteError(f"the model process's answer could not be read: {reply}"))
                elif reply[0]:
                    fut.set_result(reply[1])
                else:
                    fut.set_exception(reply[1])
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

    async def ready(self, spec: Any = None) -> None:
        """Have every worker running (all started at once on the first call, a dead one again) with the model
        of ``spec`` built. A model call waits for this outside its call timeout: a worker's start (about a
        second of imports) and a provider's import are not the model's time."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self.close()
            self._loop, self._lock = loop, asyncio.Lock()
        assert self._lock is not None
        if self._failed is not None:
            raise self._failed
        new = spec is not None and spec not in self._specs
        if not new and all(w is not None and w.alive for w in self._workers):
            return
        async with self._lock:
            if self._failed is not None:
                raise self._failed
            down = [i for i, w in enumerate(self._workers) if w is None or not w.alive]
            for i in down:
                old = self._workers[i]
                self._workers[i] = None
                if old is not None:
                    old.stop()
                    await asyncio.to_thread(old.join)
            if spec is not None and spec not in self._specs:
                up = [w for w in self._workers if w is not None]
                self._specs.append(spec)  # a worker started from now on builds it first
                await asyncio.gather(*(self._send(w, ("build", [spec])) for w in up))
            started = await asyncio.gather(*(self._start(i) for i in down), return_exceptions=True)
            failed = next((e for e in started if isinstance(e, BaseException)), None)
            if failed is not None:
                self._failed = failed if isinstance(failed, ModelProcessError) else ModelProcessError(str(failed))
                raise self._failed

    async def _send(self, w: _Worker, request: Any) -> Any:
        """Send ``request`` to ``w`` and wait for its reply (cancelled there too if this wait is)."""
        cid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        w.pending[cid] = fut  # no suspension since ``w`` was seen alive: its end fails this too
        try:
            w.send(cid, request)
            if w.writer.transport.get_write_buffer_size() > 2**20:
                async with w.drain_lock:
                    await w.writer.drain()
            return await fut
        except BaseException as exc:
            w.pending.pop(cid, None)
            if not fut.done():
                fut.cancel()
            elif not fut.cancelled():
                fut.exception()  # retrieved: its failure is this call's, raised below or dropped with it
            if isinstance(exc, asyncio.CancelledError):  # a call timeout, a stopped run: the worker drops it
                if w.alive and not w.writer.is_closing():
                    w.send(cid, ("cancel",))
                raise
            if isinstance(exc, (ConnectionError, OSError)):  # the socket is gone: the worker with it
                raise TransientModelError("model process", f"could not reach the worker process: {exc}") from exc
            raise

    async def call(self, spec: Any, messages: list[BaseMessage], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """The answer of ``spec``'s model to ``messages`` with the call options ``kwargs``, from a worker: its
        generation and the model's ``llm_output``."""
        await self.ready(spec)
        live = [w for w in self._workers if w is not None and w.alive]
        if not live:  # every worker died since: the call is retried
            raise TransientModelError("model process", "no worker process is running")
        w = min(live, key=lambda w: len(w.pending))
        return await self._send(w, ("call", spec, messages, kwargs))

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
        """Have the workers running with this model built (``ProviderAdapter.invoke`` awaits this before an
        attempt's time starts)."""
        await self.pool.ready(self.spec)

    def _combine_llm_outputs(self, llm_outputs: list[dict | None]) -> dict:
        combine = getattr(self.original, "_combine_llm_outputs", None)
        return combine(llm_outputs) if combine is not None else {}

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kw: Any):
        raise NotImplementedError("a model answered by a worker process is called asynchronously (ainvoke)")

    async def _agenerate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        options = {**kwargs, **({"stop": stop} if stop else {})}
        generation, llm_output = await self.pool.call(self.spec, list(messages), options)
        return ChatResult(generations=[generation], llm_output=llm_output)


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
def _build(models: dict, specs: list[Any]) -> None:
    from cooplab.agents.models.factory import make_chat_model

    for spec in specs:
        if spec not in models:
            models[spec] = make_chat_model(spec)


async def _answer(models: dict, spec: Any, messages: list[BaseMessage], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """What the model's run gives inside ``ainvoke`` when no callback listens (``_agenerate_with_cache``, as
    LangChain calls it): its generation, with the metadata merged into the message, and the model's own
    ``llm_output`` (which the trace records); through ``agenerate`` for options LangChain reads itself."""
    from langchain_core.language_models import chat_models as lc

    from cooplab.agents.calls import LANGCHAIN_OPTIONS

    _build(models, [spec])
    model = models[spec]
    kwargs = dict(kwargs)
    stop = kwargs.pop("stop", None)
    if LANGCHAIN_OPTIONS.isdisjoint(kwargs) and hasattr(model, "_agenerate_with_cache"):
        normalize = lc._normalize_messages  # pyright: ignore[reportPrivateImportUsage]  # what ainvoke calls
        result = await model._agenerate_with_cache(normalize(messages), stop=stop, **kwargs)
        generation, llm_output = result.generations[0], result.llm_output
    else:
        out = await model.agenerate([messages], stop=stop, **kwargs)
        generation, llm_output = out.generations[0][0], out.llm_output
    msg = generation.message
    if msg.id is not None:  # the run's process names it, as its own call would
        generation = generation.model_copy(update={"message": msg.model_copy(update={"id": None})})
    return generation, llm_output


async def serve(fd: int) -> None:
    """A worker: build the models it is asked to, then answer the calls that arrive on the socket ``fd``
    until it closes."""
    import cooplab.agents.calls  # noqa: F401 - what every call needs, loaded before saying ready
    import cooplab.agents.models.factory  # noqa: F401

    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=fd), limit=2**20)
    models: dict[Any, Any] = {}
    tasks: dict[int, asyncio.Task] = {}
    greeted = False

    def reply(cid: int, ok: bool, value: Any) -> None:
        try:
            data = _frame(cid, (ok, value))
        except Exception as exc:  # noqa: BLE001 - whatever cannot be pickled is sent as its text
            data = _frame(cid, (False, RemoteError(f"the answer could not be sent back: {exc}")))
        if not writer.is_closing():
            writer.write(data)

    async def one(cid: int, spec: Any, messages: list[BaseMessage], kwargs: dict[str, Any]) -> None:
        try:
            data = _pickled_answer(await _answer(models, spec, messages, kwargs))
            if not writer.is_closing():
                writer.write(_frame(cid, None, data))
        except asyncio.CancelledError:
            return
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller
            try:
                sent = _as_sent(spec, models.get(spec), exc)
            except BaseException as inner:  # noqa: BLE001 - even what cannot be classified gets an answer
                sent = RemoteError(f"{type(exc).__name__}: {exc} (not classified: {inner!r})")
            reply(cid, False, sent)
        finally:
            tasks.pop(cid, None)

    try:
        while True:
            frame = await _read_frame(reader)
            if frame is None:
                break
            cid, request = frame
            if isinstance(request, BaseException):  # a request that does not load: refused alone
                reply(cid, False, RemoteError(f"the request could not be read: {request}"))
                continue
            op = request[0]
            if op == "call":
                tasks[cid] = asyncio.create_task(one(cid, *request[1:]))
            elif op == "cancel":
                task = tasks.pop(cid, None)
                if task is not None:
                    task.cancel()
            elif op == "build":
                try:
                    _build(models, request[1])
                    ok, value = True, None
                except Exception as exc:  # noqa: BLE001 - the run stops with this line
                    ok, value = False, ModelProcessError(f"a model process could not build its model: {exc}")
                if not greeted:  # the first build ends the start: ready, or why not
                    greeted = True
                    writer.write(_frame(cid, "ready" if ok else value))
                else:
                    reply(cid, ok, value)
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
