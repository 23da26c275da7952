"""Write constraints.txt: the exact versions of everything ``cooplab[all]`` installs, read from the
current environment (run it in the project's .venv after a full set-up).

    .venv/bin/python scripts/lock.py            # rewrites constraints.txt
    .venv/bin/python scripts/lock.py --check    # exit 1 if constraints.txt differs from the environment

``scripts/setup.sh`` installs with ``-c constraints.txt`` so that a paper's numbers can be rerun with
the same versions. Local version labels (``1.2.3+cpu``) are dropped: ``==1.2.3`` matches them.
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "constraints.txt"


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure() -> dict[str, str]:
    """name -> version of every distribution cooplab[all] needs, transitively, as installed here."""
    seen: dict[str, str] = {}
    todo: list[tuple[str, frozenset[str]]] = [("cooplab", frozenset({"all", "local", "analysis", "dev"}))]
    while todo:
        name, extras = todo.pop()
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        key = norm(dist.metadata["Name"])
        if key in seen and not extras:
            continue
        seen[key] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
                continue
            if norm(req.name) == "cooplab":  # cooplab[all] -> its own extras
                todo.append(("cooplab", frozenset(req.extras)))
                continue
            if norm(req.name) not in seen or req.extras:
                todo.append((req.name, frozenset(req.extras)))
    seen.pop("cooplab", None)
    return seen


def render(pins: dict[str, str]) -> str:
    head = (
        "# Exact versions of everything cooplab[all] installs (scripts/lock.py writes this file from the project's "
        ".venv).\n"
        "# scripts/setup.sh installs with -c constraints.txt, so reruns use the same versions.\n"
    )
    return head + "".join(f"{n}=={v.split('+')[0]}\n" for n, v in sorted(pins.items()))


def main() -> int:
    text = render(closure())
    if "--check" in sys.argv:
        same = OUT.exists() and OUT.read_text() == text
        print(
            "constraints.txt is up to date"
            if same
            else "constraints.txt differs from this environment (run scripts/lock.py)"
        )
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT} ({text.count(chr(10)) - 2} pins)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
