"""Run directories: what every run leaves behind (config -> graph -> run dir -> evals)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cooplab import __version__


class RunDirError(ValueError):
    """A user-facing problem with a run directory."""


def prepare_out(out: Path, *, force: bool = False) -> Path:
    """Create ``out`` (and parents) and check it is writable; refuse to clobber a finished run."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".cooplab-write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise RunDirError(f"cannot write to --out {out}: {exc.strerror or exc}") from None
    if (out / "config.json").exists() and not force:
        raise RunDirError(f"{out} already holds a run; pass --force to overwrite it or 'cooplab resume {out}' to continue it")
    if force:
        for name in ("checkpoints.sqlite", "checkpoints.sqlite-wal", "checkpoints.sqlite-shm", "summary.json"):
            (out / name).unlink(missing_ok=True)
    return out


def code_version() -> str:
    here = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = ""
    return f"{__version__}+{sha}" if sha else __version__


def machine() -> str:
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if np.isfinite(v) else None
    if isinstance(x, Path):
        return str(x)
    return x


def write_json(path: Path, obj: Any) -> None:
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(_jsonable(obj), indent=2) + "\n")
    tmp.replace(path)


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def history_frame(state: dict[str, Any]) -> pd.DataFrame:
    """The per-round table: one row per (society, round) the society was running."""
    hist = state.get("history") or []
    if not hist:
        return pd.DataFrame()
    S = len(state["T_s"])
    cols = [k for k in hist[0] if k not in ("round", "active")]
    active = np.stack([h["active"] for h in hist])  # (rounds, S)
    rounds = np.array([h["round"] for h in hist])
    ri, si = np.nonzero(active)
    data = {
        "condition": np.asarray(state["condition"])[si],
        "replicate": np.asarray(state["replicate"])[si],
        "round": rounds[ri],
    }
    for c in cols:
        arr = np.stack([np.broadcast_to(np.asarray(h[c], dtype=float), (S,)) for h in hist])
        data[c] = arr[ri, si]
    df = pd.DataFrame(data)
    return df.sort_values(["condition", "replicate", "round"], kind="stable").reset_index(drop=True)


def agents_frame(state: dict[str, Any]) -> pd.DataFrame:
    """Final per-agent traits and wealth."""
    S, N = state["alive"].shape
    return pd.DataFrame(
        {
            "condition": np.repeat(np.asarray(state["condition"]), N),
            "replicate": np.repeat(np.asarray(state["replicate"]), N),
            "agent": np.tile(np.arange(N), S),
            "alive": state["alive"].ravel(),
            "e": state["e"].ravel(),
            "m": state["m"].ravel(),
            "p": state["p"].ravel(),
            "g": state["g"].ravel(),
            "wealth": state["P"].ravel(),
        }
    )


def write_table(df: pd.DataFrame, out: Path, stem: str, csv: bool = False) -> Path:
    path = out / f"{stem}.{'csv' if csv else 'parquet'}"
    if csv:
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path, index=False)
    return path


def read_table(out: Path, stem: str) -> pd.DataFrame:
    for ext, reader in (("parquet", pd.read_parquet), ("csv", pd.read_csv)):
        p = Path(out) / f"{stem}.{ext}"
        if p.exists():
            return reader(p)
    raise RunDirError(f"{out} has no {stem}.parquet or {stem}.csv; is it a cooplab run directory?")
