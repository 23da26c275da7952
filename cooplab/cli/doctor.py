"""``cooplab doctor``: is this machine ready? CPU features, the llama.cpp build, a test generation of
the local model (in a child process), the Docker daemon and sandbox image, and Chromium.

Each check is a dict ``{"name", "ok", "summary", "details", "fix"}``; ``ok`` is True, False, or None
(informational). The command exits 1 when a check failed, 0 otherwise."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
from typing import Any, Optional

import typer

# the CPU flags that matter to llama.cpp's CPU backend, in /proc/cpuinfo's spelling
CPU_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "bmi2",
    "avx_vnni",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_vbmi",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
)


def cpu_features(cpuinfo: str | None = None) -> dict[str, Any]:
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            cpuinfo = ""
    model, flags = "", set()
    for line in cpuinfo.splitlines():
        key, _, val = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = val.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(val.split())
    present = [f for f in CPU_FLAGS if f in flags]
    return {
        "arch": platform.machine(),
        "model": model or platform.processor() or "?",
        "flags": present,
        "amx": any(f.startswith("amx") for f in present),
        "avx512": any(f.startswith("avx512") for f in present),
    }


def check_cpu() -> dict[str, Any]:
    c = cpu_features()
    return {
        "name": "cpu",
        "ok": None,
        "summary": f"{c['arch']}, {c['model']}; {' '.join(c['flags']) or 'no listed SIMD flags'}",
        "details": c,
        "fix": None,
    }


def check_extras() -> dict[str, Any]:
    """Which extras are installed (information: the core works without any), and which tasks."""
    from cooplab.extras import EXTRAS, missing
    from cooplab.runs import registry

    state = {extra: not missing(extra) for extra in EXTRAS}
    tasks, broken = [], []
    for name in registry.names():
        try:
            registry.get(name)
            tasks.append(name)
        except registry.UnknownTask as exc:
            broken.append(str(exc))
    summary = ", ".join(f"{e} {'yes' if ok else 'no'}" for e, ok in state.items()) + f"; tasks: {', '.join(tasks)}"
    if broken:
        summary += f"; {len(broken)} task(s) fail to load: {'; '.join(broken)}"
    fix = (
        None
        if all(state.values())
        else f"pip install 'cooplab[{','.join(e for e, ok in state.items() if not ok)}]' for the rest"
    )
    return {
        "name": "extras",
        "ok": False if broken else None,
        "summary": summary,
        "details": {"extras": state, "tasks": tasks, "broken_tasks": broken},
        "fix": fix,
    }


def check_local_model(timeout: float = 300.0) -> dict[str, Any]:
    from cooplab.extras import missing

    # find_spec, not import: importing llama_cpp loads native code, which stays in child processes
    gone = missing("local")
    if gone:
        return {
            "name": "local model",
            "ok": False,
            "summary": f"not installed (missing: {', '.join(gone)})",
            "details": {},
            "fix": "pip install 'cooplab[local]' (from a checkout: bash scripts/setup.sh, which builds llama.cpp "
            "portably)",
        }
    from cooplab.agents.model_files import problems

    wrong = problems("smollm2")
    if wrong:
        return {
            "name": "local model",
            "ok": False,
            "summary": f"model file not ready: {wrong[0]}",
            "details": {},
            "fix": "cooplab models fetch smollm2",
        }

    from cooplab.agents.local_model import check_local_model as run_check

    r = run_check(timeout=timeout)
    build = r.get("system_info", "?")
    if r.get("ok"):
        summary = (
            f"llama-cpp-python {r.get('llama_cpp_python')}, generated {r.get('completion_tokens')} tokens in "
            f"{r.get('generation_s')} s (load {r.get('load_s')} s, {r.get('threads')} threads, extra buffer types "
            f"{'on' if r.get('extra_bufts') else 'off'}); build: {build}"
        )
        return {"name": "local model", "ok": True, "summary": summary, "details": r, "fix": None}
    return {
        "name": "local model",
        "ok": False,
        "summary": f"{r.get('error')}; build: {build}",
        "details": r,
        "fix": "bash scripts/setup.sh --rebuild-llama",
    }


def check_docker(image: str | None = None) -> dict[str, Any]:
    try:
        from cooplab.sandbox.image import DEFAULT_IMAGE, doctor
    except ImportError as exc:  # pragma: no cover
        return {
            "name": "docker",
            "ok": False,
            "summary": f"sandbox layer unavailable: {exc}",
            "details": {},
            "fix": None,
        }
    ok, lines = doctor(image or DEFAULT_IMAGE)
    fixes = [ln.split("fix:", 1)[1].strip() for ln in lines if "fix:" in ln]
    return {
        "name": "docker",
        "ok": ok,
        "summary": "; ".join(ln.strip() for ln in lines if "fix:" not in ln),
        "details": {"lines": lines},
        "fix": fixes[0] if fixes else None,
    }


def check_chromium() -> dict[str, Any]:
    exe = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if not exe:
        return {
            "name": "chromium",
            "ok": False,
            "summary": "not found (only the tests of the explorer's and the report's pages need it)",
            "details": {},
            "fix": "bash scripts/ensure-chromium.sh",
        }
    try:
        v = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {
            "name": "chromium",
            "ok": False,
            "summary": f"{exe} does not answer --version: {exc}",
            "details": {"path": exe},
            "fix": "bash scripts/ensure-chromium.sh",
        }
    return {
        "name": "chromium",
        "ok": True,
        "summary": f"{v} ({exe})",
        "details": {"path": exe, "version": v},
        "fix": None,
    }


def run_checks(
    *, model: bool = True, docker: bool = True, chromium: bool = True, image: str | None = None
) -> list[dict[str, Any]]:
    checks = [check_cpu(), check_extras()]
    if model:
        checks.append(check_local_model())
    if docker:
        checks.append(check_docker(image))
    if chromium:
        checks.append(check_chromium())
    return checks


def doctor_cmd(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    no_model: bool = typer.Option(False, "--no-model", help="Skip the local model's test generation."),
    no_docker: bool = typer.Option(False, "--no-docker", help="Skip the Docker daemon and sandbox image check."),
    no_chromium: bool = typer.Option(False, "--no-chromium", help="Skip the Chromium check."),
    image: Optional[str] = typer.Option(None, help="Sandbox image name:tag to look for."),
) -> None:
    """Check this machine: CPU features, the llama.cpp build and a test generation (in a child
    process), the Docker daemon and sandbox image, and Chromium. Exit 1 when a check fails."""
    checks = run_checks(model=not no_model, docker=not no_docker, chromium=not no_chromium, image=image)
    failed = [c for c in checks if c["ok"] is False]
    if as_json:
        typer.echo(json.dumps({"ok": not failed, "checks": checks}, indent=2, default=str))
    else:
        for c in checks:
            mark = {True: "ok  ", False: "FAIL", None: "info"}[c["ok"]]
            typer.echo(f"{mark} {c['name']:<12} {c['summary']}")
            if c["ok"] is False and c.get("fix"):
                typer.echo(f"     {'':<12} fix: {c['fix']}")
    raise typer.Exit(1 if failed else 0)
