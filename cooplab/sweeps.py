"""What every sweep shares: the error type, run-directory names, and running the runs of a sweep
concurrently (finished ones skipped, interrupted ones resumed, a failure kept with the others going)."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable


class SweepError(ValueError):
    """A sweep config that cannot be used; the message is one line."""


def slug(text: str) -> str:
    """A model spec or name as a directory-name part (``openai:gpt-4o`` -> ``openai-gpt-4o``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.split("/")[-1]).strip("-")


def run_all(todo: list[dict[str, Any]], one: Callable[[dict[str, Any]], str], *, parallel: int, noun: str,
            log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Run ``one(item)`` for every item (each has a ``dir``), ``parallel`` at a time. ``one`` returns
    "ran", "resumed" or "skipped"; an exception is recorded under "failed" and the others go on."""
    done: list[str] = []
    ran: list[str] = []
    resumed: list[str] = []
    failed: list[dict[str, str]] = []
    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = {pool.submit(one, c): c for c in todo}
        for fut in as_completed(futures):
            c = futures[fut]
            name = Path(c["dir"]).name
            try:
                kind = fut.result()
            except Exception as exc:  # keep the other runs going; report at the end
                with lock:
                    failed.append({noun: name, "error": f"{type(exc).__name__}: {exc}"})
                log(f"{noun} {name}: FAILED ({type(exc).__name__}: {exc})")
                continue
            with lock:
                {"skipped": done, "ran": ran, "resumed": resumed}[kind].append(name)
            log(f"{noun} {name}: {kind} ({len(done) + len(ran) + len(resumed) + len(failed)}/{len(todo)})")
    return {"ran": ran, "resumed": resumed, "skipped": done, "failed": failed}
