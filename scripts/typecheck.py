"""pyright in basic mode on the whole tree, held to a baseline that may only go down.

The user's folders install into one namespace (agents/ is cooplab.agents, ...; pyproject's
``package-dir``), which pyright cannot follow through setuptools' editable finder. So the tree is
copied once into ``build/typecheck/`` in its installed shape (``cooplab/agents/...``) beside
tests/, benchmarks/, examples/ and scripts/, pyright runs there with the ``[tool.pyright]``
settings of pyproject.toml, and every finding is named by its path in the repository.

    .venv/bin/python scripts/typecheck.py            check: no file has more errors than the baseline
    .venv/bin/python scripts/typecheck.py --update   write the current counts as the new baseline
    .venv/bin/python scripts/typecheck.py --list F   print the findings of the files F (repository paths)

Exit 0 when no file has more errors than ``scripts/pyright-baseline.json`` says, 1 when one has
(each such file and its new findings are printed), 2 when pyright cannot run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "typecheck"
BASELINE = ROOT / "scripts" / "pyright-baseline.json"
NAMESPACE = {"cooplab": "cooplab", "agents": "cooplab/agents", "graphs": "cooplab/graphs", "sandbox": "cooplab/sandbox"}
NAMESPACE |= {"tasks": "cooplab/tasks", "evals": "cooplab/evals"}
BESIDE = ("tests", "benchmarks", "examples", "scripts")


def _copy_tree() -> dict[str, str]:
    """Copy the .py files into OUT in the installed shape; returns {copied path: repository path}."""
    if OUT.exists():
        shutil.rmtree(OUT)
    names: dict[str, str] = {}
    for src, dst in [*NAMESPACE.items(), *((b, b) for b in BESIDE)]:
        for f in sorted((ROOT / src).rglob("*.py")):
            rel = f.relative_to(ROOT / src)
            if "__pycache__" in rel.parts:
                continue
            target = OUT / dst / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, target)
            names[str(target)] = f"{src}/{rel}"
    return names


def _installed(folder: str) -> str:
    """Where a repository folder (``agents/models``) sits in the copied tree (``cooplab/agents/models``)."""
    top, _, rest = folder.strip("/").partition("/")
    base = NAMESPACE.get(top, top)
    return f"{base}/{rest}" if rest else base


def _config(under: list[str] | None = None) -> dict:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pyright"]
    conf = {k: v for k, v in conf.items() if k not in ("include", "exclude")}
    conf["include"] = [_installed(u) for u in under] if under else ["cooplab", *BESIDE]
    conf["ignore"] = [_installed(p) for p in conf.get("ignore", [])]  # repository paths -> the copied tree's
    conf["extraPaths"] = ["."]
    conf["venvPath"] = str(ROOT)
    conf["venv"] = ".venv"
    return conf


def run_pyright(under: list[str] | None = None) -> list[dict]:
    """Every error pyright reports, as {file (repository path), line, rule, message}."""
    names = _copy_tree()
    (OUT / "pyrightconfig.json").write_text(json.dumps(_config(under), indent=1))
    exe = ROOT / ".venv" / "bin" / "pyright"
    if not exe.exists():
        print("typecheck: .venv/bin/pyright is missing; run bash scripts/setup.sh (the dev extra)", file=sys.stderr)
        raise SystemExit(2)
    cmd = [str(exe), "--outputjson", "-p", str(OUT / "pyrightconfig.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        print(f"typecheck: pyright did not answer with JSON: {proc.stderr.strip()[-400:]}", file=sys.stderr)
        raise SystemExit(2) from None
    found = []
    for d in report.get("generalDiagnostics", []):
        if d.get("severity") != "error":
            continue
        found.append(
            {
                "file": names.get(d["file"], d["file"]),
                "line": d["range"]["start"]["line"] + 1,
                "rule": d.get("rule", ""),
                "message": d["message"].splitlines()[0],
            }
        )
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="pyright (basic) on the whole tree against a baseline that only goes down")
    ap.add_argument("--update", action="store_true", help="write the current counts as the baseline")
    ap.add_argument("--list", nargs="*", metavar="FILE", help="print the findings of these files (all when none)")
    ap.add_argument("--under", nargs="+", metavar="DIR", help="check only these folders (faster; --list only)")
    args = ap.parse_args(argv)
    if args.under and args.list is None:
        ap.error("--under only goes with --list (the baseline is checked on the whole tree)")
    found = run_pyright(args.under)
    now = Counter(f["file"] for f in found)
    if args.list is not None:
        for f in sorted(found, key=lambda f: (f["file"], f["line"])):
            if not args.list or f["file"] in args.list:
                print(f"{f['file']}:{f['line']}: {f['rule']}: {f['message']}")
        return 0
    if args.update:
        BASELINE.write_text(json.dumps(dict(sorted(now.items())), indent=1) + "\n")
        print(f"typecheck: baseline written, {sum(now.values())} errors in {len(now)} files")
        return 0
    base = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    worse = {f: n for f, n in now.items() if n > base.get(f, 0)}
    total, was = sum(now.values()), sum(base.values())
    if worse:
        for f in sorted(worse):
            print(f"{f}: {worse[f]} pyright errors, the baseline allows {base.get(f, 0)}")
            for d in found:
                if d["file"] == f:
                    print(f"  {f}:{d['line']}: {d['rule']}: {d['message']}")
        print(f"typecheck: {len(worse)} files have more pyright errors than scripts/pyright-baseline.json allows")
        return 1
    lower = " (lower than the baseline: run scripts/typecheck.py --update to hold it there)" if total < was else ""
    print(f"typecheck: {total} pyright errors in {len(now)} files, none over the baseline{lower}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
