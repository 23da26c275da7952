"""pyright in basic mode on the whole tree: any error fails the check.

The user's folders install into one namespace (agents/ is cooplab.agents, ...; pyproject's
``package-dir``), which pyright cannot follow through setuptools' editable finder. So the tree is
copied once into ``build/typecheck/`` in its installed shape (``cooplab/agents/...``) beside
tests/, benchmarks/, examples/ and scripts/, pyright runs there with the ``[tool.pyright]``
settings of pyproject.toml, and every finding is named by its path in the repository.

    .venv/bin/python scripts/typecheck.py                 check: no pyright error anywhere
    .venv/bin/python scripts/typecheck.py --under DIR...  check only these folders (repository paths)
    .venv/bin/python scripts/typecheck.py --list [F...]   print the findings (of the files F), exit 0

Exit 0 when pyright finds no error, 1 when it finds one (every finding is printed, named by its
repository path), 2 when pyright cannot run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "typecheck"
VENV = ROOT / ".venv"  # where pyright and the installed packages are
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
    conf["venvPath"] = str(VENV.parent)
    conf["venv"] = VENV.name
    return conf


def run_pyright(under: list[str] | None = None) -> list[dict]:
    """Every error pyright reports, as {file (repository path), line, rule, message}."""
    names = _copy_tree()
    (OUT / "pyrightconfig.json").write_text(json.dumps(_config(under), indent=1))
    exe = VENV / "bin" / "pyright"
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
    ap = argparse.ArgumentParser(description="pyright (basic) on the whole tree: no error allowed")
    ap.add_argument("--list", nargs="*", metavar="FILE", help="print the findings of these files (all when none)")
    ap.add_argument("--under", nargs="+", metavar="DIR", help="check only these folders (faster)")
    args = ap.parse_args(argv)
    found = sorted(run_pyright(args.under), key=lambda f: (f["file"], f["line"]))
    if args.list is not None:
        for f in found:
            if not args.list or f["file"] in args.list:
                print(f"{f['file']}:{f['line']}: {f['rule']}: {f['message']}")
        return 0
    where = " under " + " ".join(args.under) if args.under else ""
    if found:
        for f in found:
            print(f"{f['file']}:{f['line']}: {f['rule']}: {f['message']}")
        files = len({f["file"] for f in found})
        print(f"typecheck: {len(found)} pyright errors in {files} files{where}; the tree must have none (fix the code)")
        return 1
    print(f"typecheck: no pyright errors{where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
