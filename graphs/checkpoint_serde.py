"""What a cooplab checkpoint may hold, and the one serializer every checkpoint saver uses.

LangGraph's default serializer (``JsonPlusSerializer``) writes an object it does not know natively
as a msgpack *extension*: ``(module, name, arguments)``, and by default rebuilds it on load as
``getattr(import_module(module), name)(*arguments)``. A checkpoint file is data that arrives from
elsewhere (a colleague's zip, a downloaded sweep), so that turns it into code: a blob holding
``("os", "system", ["touch X"])`` runs the command when the file is read.

:class:`CheckpointSerializer` writes exactly what LangGraph writes, but reads back only the values
cooplab's graphs store, and builds each of them itself, never by importing a name the file gives:

- plain msgpack values (``None``, booleans, numbers, strings, bytes, lists, maps);
- numpy arrays of booleans, integers, floats or complex numbers (no object, string, record or
  datetime arrays), whose bytes match their shape;
- the chat messages of tool-using agents (LangChain's ``AIMessage``, ``HumanMessage``,
  ``SystemMessage``, ``ToolMessage``, ``ChatMessage``, ``RemoveMessage``: pydantic models,
  validated), LangGraph's ``Send`` and its delta-channel snapshots;
- ``set``, ``frozenset`` and ``Decimal`` (built from their plain contents);
- the types a third-party task declares in :attr:`cooplab.graphs.task.Task.checkpoint_types`.

Anything else (any other extension, any other stored format such as ``pickle`` or LangGraph's
older ``json``) raises :class:`CheckpointRefused`, naming what was refused, before anything of it
is built: nothing named in a checkpoint is ever imported or called. :func:`scan` walks every blob of
a ``checkpoints.sqlite`` the same way without building anything (a resume checks the whole file
before it reads a checkpoint).
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any, NoReturn

import ormsgpack
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

# LangGraph's extension codes (langgraph/checkpoint/serde/jsonplus.py)
EXT_CONSTRUCTOR_SINGLE_ARG = 0
EXT_CONSTRUCTOR_POS_ARGS = 1
EXT_CONSTRUCTOR_KW_ARGS = 2
EXT_METHOD_SINGLE_ARG = 3
EXT_PYDANTIC_V1 = 4
EXT_PYDANTIC_V2 = 5
EXT_NUMPY_ARRAY = 6
EXT_DELTA_SNAPSHOT = 7

#: numpy dtype kinds a checkpoint may hold: bool, signed and unsigned integers, floats, complex
NUMPY_KINDS = frozenset("biufc")
#: dimensions of a stored array at most
MAX_NDIM = 32
_OPT = ormsgpack.OPT_NON_STR_KEYS


class CheckpointRefused(ValueError):
    """A checkpoint holds a value cooplab never stores (``what`` names it); nothing of it was built."""

    def __init__(self, what: str):
        self.what = what
        super().__init__(
            f"it holds {what}, which no cooplab checkpoint holds; it was refused unread "
            "(nothing named in it was imported or run)"
        )


def _messages() -> dict[tuple[str, str], type]:
    from langchain_core import messages as m

    classes = (m.AIMessage, m.HumanMessage, m.SystemMessage, m.ToolMessage, m.ChatMessage, m.RemoveMessage)
    return {(c.__module__, c.__name__): c for c in classes}


def _send(args: Any) -> Any:
    from langgraph.types import Send

    if not isinstance(args, (list, tuple)) or len(args) not in (2, 3) or not isinstance(args[0], str):
        raise ValueError("a malformed Send")
    return Send(args[0], args[1]) if len(args) == 2 else Send(args[0], args[1], timeout=args[2])


def _collection(kind: type) -> Callable[[Any], Any]:
    def build(arg: Any) -> Any:
        if not isinstance(arg, (list, tuple)):
            raise ValueError(f"a malformed {kind.__name__}")
        return kind(arg)

    return build


def _decimal(arg: Any) -> Decimal:
    if not isinstance(arg, str) or len(arg) > 1000:
        raise ValueError("a malformed Decimal")
    return Decimal(arg)


def _array(meta: Any) -> Any:
    """A numpy array from LangGraph's ``(dtype, shape, order, bytes)``: only plain numeric dtypes,
    and only when the bytes are exactly the shape's (else ValueError: nothing is guessed)."""
    import numpy as np

    if not isinstance(meta, (list, tuple)) or len(meta) != 4:
        raise ValueError("a malformed array")
    dtype_str, shape, order, buf = meta
    if (
        not isinstance(dtype_str, str)
        or len(dtype_str) > 8
        or not isinstance(buf, (bytes, bytearray))
        or order not in ("C", "F")
    ):
        raise ValueError("a malformed array")
    if (
        not isinstance(shape, (list, tuple))
        or len(shape) > MAX_NDIM
        or not all(type(n) is int and n >= 0 for n in shape)
    ):
        raise ValueError("a malformed array shape")
    dtype = np.dtype(dtype_str)
    if dtype.kind not in NUMPY_KINDS or dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise CheckpointRefused(f"a numpy array of dtype {dtype_str!r}")
    count = 1
    for n in shape:
        count *= n
    if count * dtype.itemsize != len(buf):
        raise ValueError("an array whose bytes do not match its shape")
    return np.frombuffer(buf, dtype=dtype).reshape(shape, order=order)


class _Refusal(Exception):
    pass


def _default(obj: Any) -> Any:
    """LangGraph's msgpack ``default`` with numpy arrays first, written exactly as LangGraph writes
    them (the same bytes). LangGraph's own ``default`` reaches arrays last, after a dozen checks
    of which one, ``isinstance(obj, SendProtocol)`` against a runtime protocol, costs about 10 us:
    a society's state is mostly arrays and every superstep's checkpoint writes each of them."""
    np = sys.modules.get("numpy")
    if np is not None and type(obj) is np.ndarray:
        order = "F" if obj.flags.f_contiguous and not obj.flags.c_contiguous else "C"
        if obj.flags.c_contiguous:
            mv = memoryview(obj)
            try:
                return ormsgpack.Ext(EXT_NUMPY_ARRAY, _encode((obj.dtype.str, obj.shape, order, mv)))
            finally:
                mv.release()
        return ormsgpack.Ext(EXT_NUMPY_ARRAY, _encode((obj.dtype.str, obj.shape, order, obj.tobytes(order="A"))))
    return jsonplus._msgpack_default(obj)


def _encode(obj: Any) -> bytes:
    return ormsgpack.packb(obj, default=_default, option=jsonplus._option)


class CheckpointSerializer(JsonPlusSerializer):
    """LangGraph's serializer for writing; for reading, only what cooplab stores (module docstring).
    ``extra``: further classes a task's state holds (pydantic models, dataclasses, named tuples,
    enums), rebuilt from their stored fields and validated by their own constructors."""

    def __init__(self, extra: Iterable[type] = ()) -> None:
        super().__init__(pickle_fallback=False, allowed_json_modules=None, allowed_msgpack_modules=None)
        self._known: dict[tuple[int, str, str], Callable[[Any], Any]] = {
            (EXT_CONSTRUCTOR_POS_ARGS, "langgraph.types", "Send"): _send,
            (EXT_CONSTRUCTOR_SINGLE_ARG, "builtins", "set"): _collection(set),
            (EXT_CONSTRUCTOR_SINGLE_ARG, "builtins", "frozenset"): _collection(frozenset),
            (EXT_CONSTRUCTOR_SINGLE_ARG, "decimal", "Decimal"): _decimal,
        }
        for (module, name), cls in _messages().items():
            self._known[(EXT_PYDANTIC_V2, module, name)] = _validated(cls)
        for cls in extra:
            self._admit(cls)

    def _admit(self, cls: type) -> None:
        import dataclasses
        import enum

        key = (cls.__module__, cls.__name__)
        if hasattr(cls, "model_validate"):
            self._known[(EXT_PYDANTIC_V2, *key)] = _validated(cls)
        elif dataclasses.is_dataclass(cls) or hasattr(cls, "_asdict"):
            self._known[(EXT_CONSTRUCTOR_KW_ARGS, *key)] = lambda kw, cls=cls: cls(**_mapping(kw))
        elif issubclass(cls, enum.Enum):
            self._known[(EXT_CONSTRUCTOR_SINGLE_ARG, *key)] = cls
        else:
            raise TypeError(
                f"checkpoint_types: {cls.__qualname__} is not a pydantic model, dataclass, named tuple or enum"
            )

    def with_msgpack_allowlist(self, extra_allowlist: Any) -> "CheckpointSerializer":
        """Fixed: LangGraph's strict mode may ask to widen the list; cooplab's list is its own."""
        return self

    # --- writing ---------------------------------------------------------------------------
    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """What LangGraph's serializer writes (the same bytes), numpy arrays found first."""
        if obj is None or isinstance(obj, (bytes, bytearray)):
            return super().dumps_typed(obj)
        try:
            return "msgpack", _encode(obj)
        except ormsgpack.MsgpackEncodeError:
            return super().dumps_typed(obj)  # raises as LangGraph does

    # --- reading ---------------------------------------------------------------------------
    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, blob = data
        if type_ in ("null", "bytes", "bytearray"):
            return super().loads_typed(data)
        if type_ != "msgpack":
            raise CheckpointRefused(f"a value stored as {str(type_)[:40]!r}")
        return self._unpack(blob, build=True)

    def _unpack(self, blob: bytes, *, build: bool) -> Any:
        refused: list[str] = []
        hook = self._hook(refused, build)
        try:
            return ormsgpack.unpackb(blob, ext_hook=hook, option=_OPT)
        except Exception as exc:
            if refused:
                raise CheckpointRefused(refused[0]) from None
            raise ValueError(f"a malformed value ({type(exc).__name__}: {str(exc)[:120]})") from None

    def _hook(self, refused: list[str], build: bool) -> Callable[[int, bytes], Any]:
        known = self._known

        def refuse(what: str) -> NoReturn:
            refused.append(what)
            raise _Refusal(what)

        def hook(code: int, data: bytes) -> Any:
            inner = ormsgpack.unpackb(data, ext_hook=hook, option=_OPT)
            if code == EXT_DELTA_SNAPSHOT:
                if not build:
                    return None
                from langgraph.checkpoint.serde.types import _DeltaSnapshot

                return _DeltaSnapshot(inner)
            if code == EXT_NUMPY_ARRAY:
                try:
                    return _array(inner) if build else _array_check(inner)
                except CheckpointRefused as exc:
                    refuse(exc.what)
            if code in (
                EXT_CONSTRUCTOR_SINGLE_ARG,
                EXT_CONSTRUCTOR_POS_ARGS,
                EXT_CONSTRUCTOR_KW_ARGS,
                EXT_METHOD_SINGLE_ARG,
                EXT_PYDANTIC_V1,
                EXT_PYDANTIC_V2,
            ):
                if (
                    not isinstance(inner, (list, tuple))
                    or len(inner) < 3
                    or not all(isinstance(x, str) for x in inner[:2])
                ):
                    refuse(f"a malformed extension value (code {code})")
                module, name = inner[0][:120], inner[1][:120]
                make = known.get((code, module, name))
                if make is None:
                    refuse(
                        f"a value of type {module}.{name}"
                        if code != EXT_METHOD_SINGLE_ARG
                        else f"a call of {module}.{name}.{str(inner[3] if len(inner) > 3 else '')[:60]}"
                    )
                return make(inner[2]) if build else None
            refuse(f"an extension value of unknown code {code}")

        return hook

    # --- checking a whole file -------------------------------------------------------------
    def check(self, type_: str, blob: bytes | None) -> None:
        """Raise :class:`CheckpointRefused` if the stored value would be refused (nothing is built)."""
        if type_ in ("null", "bytes", "bytearray") or blob is None:
            return
        if type_ != "msgpack":
            raise CheckpointRefused(f"a value stored as {str(type_)[:40]!r}")
        self._unpack(blob, build=False)


def _array_check(meta: Any) -> None:
    """:func:`_array`'s check of the dtype, without building the array."""
    import numpy as np

    if not isinstance(meta, (list, tuple)) or len(meta) != 4:
        raise ValueError("a malformed array")
    try:
        dtype = np.dtype(meta[0]) if isinstance(meta[0], str) and len(meta[0]) <= 8 else None
    except TypeError:
        dtype = None
    if (
        dtype is None
        or dtype.kind not in NUMPY_KINDS
        or dtype.hasobject
        or dtype.fields is not None
        or dtype.subdtype is not None
    ):
        raise CheckpointRefused(f"a numpy array of dtype {str(meta[0])[:20]!r}")
    return None


def _mapping(kw: Any) -> dict[str, Any]:
    if not isinstance(kw, dict) or not all(isinstance(k, str) for k in kw):
        raise ValueError("malformed fields")
    return kw


def _validated(cls: type) -> Callable[[Any], Any]:
    return lambda kw: cls.model_validate(_mapping(kw))


def serializer(task: Any = None) -> CheckpointSerializer:
    """The serializer of a run's checkpoints: cooplab's types plus ``task.checkpoint_types``."""
    return CheckpointSerializer(getattr(task, "checkpoint_types", ()) or ())


def scan(path: str | Path, serde: CheckpointSerializer | None = None, *, uri: bool = False) -> None:
    """Check every stored value of a ``checkpoints.sqlite`` (checkpoints and pending writes, every
    thread and subgraph) without building anything: :class:`CheckpointRefused` for the first one
    that would be refused. ``path`` is opened as given (``uri=True``: an SQLite URI, e.g. read-only)."""
    serde = serde or CheckpointSerializer()
    db = sqlite3.connect(str(path), uri=uri)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table, column in (("checkpoints", "checkpoint"), ("writes", "value")):
            if table in tables:
                for type_, blob in db.execute(f"SELECT type, {column} FROM {table}"):  # noqa: S608 - fixed names
                    serde.check(str(type_) if type_ is not None else "null", blob)
    finally:
        db.close()


__all__ = ["CheckpointRefused", "CheckpointSerializer", "scan", "serializer"]
