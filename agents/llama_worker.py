"""The local model's child process: one llama.cpp model behind a pipe.

``python -m cooplab.agents.llama_worker CONFIG_JSON`` loads a GGUF model with llama-cpp-python and
answers chat-completion requests, one JSON object per line:

    parent -> child   {"id": 7, "call": {<create_chat_completion kwargs>}, "fault": null}
    child -> parent   {"id": 7, "ok": true, "out": {<chat completion>}}
                      {"id": 7, "ok": false, "error": "...", "type": "ValueError"}

The first line the child writes is ``{"ready": true, "system_info": ..., ...}`` (or
``{"ready": false, "error": ...}`` when the model cannot be loaded). The protocol uses a private
copy of the original stdout; file descriptor 1 is pointed at stderr so that anything native code
prints cannot corrupt a frame.

The child dies with its parent, even in the middle of a generation (:func:`die_with_parent`): on
Linux the kernel sends it SIGKILL when the parent goes (``PR_SET_PDEATHSIG``); everywhere, a thread
reads stdin and ends the process at EOF (the parent closed the pipe, or died and the kernel closed
it), and another ends it when it is re-parented (the parent's pid, ``COOPLAB_LLAMA_PARENT``, is no
longer its parent).

Why a child process: llama.cpp is native code. On some CPUs a build or a kernel can crash
(SIGSEGV, SIGILL); in-process that kills the whole run, the test runner or the notebook. Here it
kills only this process; the parent sees EOF, reports a transient model error, and a run stops
cleanly at its last checkpoint (see ``cooplab.agents.local_model``).

This module imports only the standard library at the top, so it starts fast and never pulls the
rest of cooplab into the child.

``--check`` mode (used by ``scripts/setup.sh`` and ``cooplab doctor``): load the model, print the
build's system info and one short generation as JSON, and exit 0; exit 3 when the build carries
CPU-specific instructions (AVX-512, AMX) that make it unsafe to copy to another machine.
"""

from __future__ import annotations

import json
import os
import sys
import time

# CPU features that a portable build must not be compiled for (llama.cpp's system info names)
NON_PORTABLE = ("AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8", "AMX_TILE", "AMX_BF16", "AVX_VNNI")


def parse_system_info(text: str) -> dict[str, str]:
    """``"CPU : SSE3 = 1 | AVX2 = 1 | ... |"`` -> {"SSE3": "1", "AVX2": "1", ...} (all backends merged)."""
    feats: dict[str, str] = {}
    for part in text.replace(";", "|").split("|"):
        if ":" in part:
            part = part.split(":", 1)[1]
        if "=" in part:
            k, v = part.split("=", 1)
            k, v = k.strip(), v.strip()
            if k:
                feats[k] = v
    return feats


def non_portable_features(info: str) -> list[str]:
    feats = parse_system_info(info)
    return [k for k in NON_PORTABLE if feats.get(k) == "1"]


def _load(cfg: dict):
    import llama_cpp.llama_cpp as lib
    from llama_cpp import Llama

    if not cfg.get("extra_bufts", False):
        # No weight repacking into llama.cpp's extra CPU buffer types (AMX on CPUs that report it,
        # the interleaved "repack" layouts elsewhere). The AMX path crashed decode on an AVX-512/AMX
        # machine; without extra buffer types the same build answers. llama-cpp-python has no keyword
        # for it, so the default model parameters are adjusted, in this child process only.
        default_params = lib.llama_model_default_params

        def params_without_extra_bufts():
            p = default_params()
            if hasattr(p, "use_extra_bufts"):
                p.use_extra_bufts = False
            return p

        lib.llama_model_default_params = params_without_extra_bufts
    threads = int(cfg.get("n_threads") or os.cpu_count() or 1)
    t0 = time.perf_counter()
    llama = Llama(model_path=cfg["model_path"], n_ctx=int(cfg.get("n_ctx", 8192)), n_threads=threads,
                  n_threads_batch=threads, verbose=False, seed=0)
    info = lib.llama_print_system_info().decode("utf-8", "replace").strip()
    import llama_cpp

    return llama, {"system_info": info, "load_s": round(time.perf_counter() - t0, 3), "threads": threads,
                   "llama_cpp_python": getattr(llama_cpp, "__version__", "?"), "extra_bufts": bool(cfg.get("extra_bufts", False)),
                   "pid": os.getpid()}


PARENT_ENV = "COOPLAB_LLAMA_PARENT"  #: the pid of the process that started the worker
PR_SET_PDEATHSIG = 1  #: linux/prctl.h


def _pdeathsig() -> bool:
    """Ask the Linux kernel to SIGKILL this process when the thread that started it ends (the
    parent process starts workers from a thread that lives as long as it does). False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(parent: int | None, lines: "queue.Queue[str | None]", poll: float = 0.25) -> bool:
    """Tie this process's life to its parent's: PR_SET_PDEATHSIG where the kernel has it, and two
    daemon threads: one moves stdin's lines to ``lines`` and ends the process at EOF, the other
    ends it when the process is re-parented (its parent pid is no longer ``parent``). Returns
    whether the kernel signal is armed. Work in progress is abandoned: nobody is left to answer."""
    import threading

    armed = _pdeathsig()
    if parent is not None and os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(0)

    def read() -> None:
        for line in sys.stdin:
            lines.put(line)
        os._exit(0)  # EOF: the parent closed the pipe or is gone

    def watch() -> None:
        while True:
            if parent is not None and os.getppid() != parent:
                os._exit(0)
            time.sleep(poll)

    threading.Thread(target=read, name="llama-worker-stdin", daemon=True).start()
    threading.Thread(target=watch, name="llama-worker-parent", daemon=True).start()
    return armed


def _parent_pid() -> int | None:
    raw = os.environ.get(PARENT_ENV, "")
    return int(raw) if raw.isdigit() else None


def _fault(kind: str | None) -> None:
    """Fault injection for tests of the crash path: a genuine native crash of this process."""
    if kind == "segv":
        import ctypes

        ctypes.string_at(0)  # reads address 0: SIGSEGV
    elif kind == "abort":
        os.abort()


def serve(cfg: dict) -> int:
    import queue

    lines: queue.Queue[str | None] = queue.Queue()
    die_with_parent(_parent_pid(), lines)  # before the model loads: a load can take long too
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # native prints go to stderr, never into a frame
    sys.stdout = sys.stderr

    def send(obj: dict) -> None:
        proto.write(json.dumps(obj, allow_nan=False, default=str) + "\n")
        proto.flush()

    try:
        llama, meta = _load(cfg)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as one line
        send({"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    send({"ready": True, **meta})
    while True:
        line = lines.get()
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            rid = req.get("id")
        except (ValueError, AttributeError):
            send({"id": None, "ok": False, "error": "malformed request", "type": "ProtocolError"})
            continue
        try:
            _fault(req.get("fault"))
            out = llama.create_chat_completion(**req["call"])
            send({"id": rid, "ok": True, "out": out})
        except Exception as exc:  # noqa: BLE001 - a bad request is the caller's error, not a crash
            send({"id": rid, "ok": False, "error": f"{exc}", "type": type(exc).__name__})
    return 0


def check(cfg: dict) -> int:
    """Load, report the build, generate a few tokens. Prints one JSON object."""
    llama, meta = _load(cfg)
    t0 = time.perf_counter()
    if os.environ.get("COOPLAB_LOCAL_FAULT", "").startswith("segv"):
        _fault("segv")  # tests of set-up's and doctor's crash reports
    out = llama.create_chat_completion(messages=[{"role": "user", "content": "Say OK."}], max_tokens=4, temperature=0.0, seed=0)
    meta["generation_s"] = round(time.perf_counter() - t0, 3)
    meta["generated"] = out["choices"][0]["message"].get("content") or ""
    meta["completion_tokens"] = (out.get("usage") or {}).get("completion_tokens")
    meta["non_portable"] = non_portable_features(meta["system_info"])
    print(json.dumps(meta))
    return 3 if meta["non_portable"] and not cfg.get("allow_native") else 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--check":
        cfg = json.loads(argv[1]) if len(argv) > 1 else {}
        if "model_path" not in cfg:
            from cooplab.agents.model_files import ModelFilesError, verified_path

            try:
                cfg["model_path"] = str(verified_path("smollm2", "the local model"))
            except ModelFilesError as exc:
                print(exc, file=sys.stderr)
                return 2
        return check(cfg)
    if len(argv) != 1:
        print("usage: python -m cooplab.agents.llama_worker CONFIG_JSON | --check [CONFIG_JSON]", file=sys.stderr)
        return 2
    return serve(json.loads(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
