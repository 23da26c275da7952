"""Plant objects in the blobs of a real ``checkpoints.sqlite``, as a crafted run folder would.

LangGraph's serializer writes an object it does not know natively as a msgpack extension holding
``(module, name, arguments)``; its default reader rebuilds it as ``getattr(import_module(module),
name)(*arguments)``. :func:`plant` adds such an extension to stored values of a real run's file,
keeping everything else byte for byte, so a reader that builds it runs what it names.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import ormsgpack

OPT = ormsgpack.OPT_NON_STR_KEYS
SINGLE_ARG, POS_ARGS, KW_ARGS, METHOD, PYDANTIC_V2, NUMPY = 0, 1, 2, 3, 5, 6


def ext(code: int, *fields: Any) -> ormsgpack.Ext:
    """An extension object as LangGraph writes it: ``code`` and its msgpack-encoded fields."""
    return ormsgpack.Ext(code, ormsgpack.packb(tuple(fields), option=OPT))


def payloads(marker: Path) -> dict[str, tuple[ormsgpack.Ext, str]]:
    """Objects that create ``marker``-named files when built, each with the type a reader names
    when it refuses it: a shell command, a harmless-looking builtin, a cooplab function of our own
    (a module a reader might trust), and an object array (numpy's pickled objects)."""
    return {
        "os.system": (ext(POS_ARGS, "os", "system", [f"touch {marker}.os"]), "os.system"),
        "builtins.exec": (
            ext(POS_ARGS, "builtins", "exec", [f"open({str(marker) + '.exec'!r}, 'w').close()"]),
            "builtins.exec",
        ),
        "cooplab.write_json": (
            ext(KW_ARGS, "cooplab.graphs.rundir", "write_json", {"path": f"{marker}.json", "obj": {}}),
            "cooplab.graphs.rundir.write_json",
        ),
        "pathlib.Path": (ext(POS_ARGS, "pathlib", "Path", ["/etc", "passwd"]), "pathlib.Path"),
        "object array": (ext(NUMPY, "|O", [1], "C", b"\0" * 8), "'|O'"),
    }


def _keep(code: int, data: bytes) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, data)


def plant(db: Path, value: ormsgpack.Ext, *, where: str = "checkpoint", key: str = "planted") -> int:
    """Add ``value`` under ``key`` to stored values of ``db``: ``where="checkpoint"``: the
    channel values of every top-level checkpoint; ``"first"``: of the oldest top-level checkpoint
    only (a reader of the latest state never sees it); ``"write"``: a pending write's value (the
    value becomes ``[old value, planted]``); ``"subgraph"``: every subgraph checkpoint. Returns
    the rows changed."""
    conn = sqlite3.connect(str(db))
    try:
        n = 0
        if where == "write":
            rows = conn.execute(
                "SELECT rowid, value FROM writes WHERE type = 'msgpack' ORDER BY rowid DESC LIMIT 1"
            ).fetchall()
            for rowid, blob in rows:
                old = ormsgpack.unpackb(blob, ext_hook=_keep, option=OPT)
                conn.execute(
                    "UPDATE writes SET value = ? WHERE rowid = ?", (ormsgpack.packb([old, value], option=OPT), rowid)
                )
                n += 1
        else:
            ns = "checkpoint_ns != ''" if where == "subgraph" else "checkpoint_ns = ''"
            order = " ORDER BY checkpoint_id LIMIT 1" if where == "first" else ""
            rows = conn.execute(
                f"SELECT rowid, checkpoint FROM checkpoints WHERE type = 'msgpack' AND {ns}{order}"
            ).fetchall()
            for rowid, blob in rows:
                cp = ormsgpack.unpackb(blob, ext_hook=_keep, option=OPT)
                cp.setdefault("channel_values", {})[key] = value
                conn.execute(
                    "UPDATE checkpoints SET checkpoint = ? WHERE rowid = ?", (ormsgpack.packb(cp, option=OPT), rowid)
                )
                n += 1
        conn.commit()
        return n
    finally:
        conn.close()
