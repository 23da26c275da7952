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

**Reuse of what was read** (:class:`PrefixStates`). llama.cpp keeps one sequence in its KV
cache, and llama-cpp-python by itself reuses only the prefix a prompt shares with the previous
call's, so agents whose calls interleave (the members of a team working at once, the players of a
game) re-read their whole prompt every time. Here, after every call the KV cells of its prompt
are copied out and kept, keyed by the prompt's tokens; before a call, the kept prompt sharing the
longest prefix with the new one is copied back when it shares more than the live KV cache, and
only the rest is read. The kept states are bounded in bytes (``reuse_bytes`` in the
configuration; about 23 KB per token for SmolLM2-135M), the least recently used dropped first.
Every answer is the answer of a cold read of its prompt (same seed, same tokens): see
:func:`_reusing` for the two rules that make it so, and ``tests/agents/test_local_reuse.py``.
Each answer's ``usage`` says how many prompt tokens were reused, as OpenAI's API does
(``usage.prompt_tokens_details.cached_tokens``). A request with ``"reuse": false`` is read cold
(from its first token; for tests and benchmarks).

This module imports only the standard library at the top, so it starts fast and never pulls the
rest of cooplab into the child.

``--check`` mode (used by ``scripts/setup.sh`` and ``cooplab doctor``): load the model, print the
build's system info and one short generation as JSON, and exit 0; exit 3 when the build carries
CPU-specific instructions (AVX-512, AMX) that make it unsafe to copy to another machine.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported in the functions that use it (the module starts on the standard library)
    import numpy as np

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
    threads = int(cfg.get("n_threads") or os.cpu_count() or 1)  # at most, when the count adapts (below)
    t0 = time.perf_counter()
    llama = _reusing(Llama, lib)(
        model_path=cfg["model_path"],
        n_ctx=int(cfg.get("n_ctx", 8192)),
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
        seed=0,
    )
    llama.states = PrefixStates(int(cfg.get("reuse_bytes") or 0))
    info = lib.llama_print_system_info().decode("utf-8", "replace").strip()
    import llama_cpp

    return llama, {
        "system_info": info,
        "load_s": round(time.perf_counter() - t0, 3),
        "threads": threads,
        "threads_adapt": not cfg.get("n_threads"),
        "llama_cpp_python": getattr(llama_cpp, "__version__", "?"),
        "extra_bufts": bool(cfg.get("extra_bufts", False)),
        "reuse_bytes": llama.states.max_bytes,
        "pid": os.getpid(),
    }


# --- threads: as many as there are free cores ---------------------------------------------
def _own_running() -> int:
    """This process's threads that are running or ready to run now (state R)."""
    n = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 1
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"R":
            n += 1
    return n


def runnable_elsewhere(samples: int = 5, gap: float = 0.001) -> int | None:
    """How many threads of other processes are running or waiting for a core right now: the
    kernel's count of runnable threads (the fourth field of /proc/loadavg) minus this process's
    own. The least of a few samples a millisecond apart, so that a passing blip does not count.
    None where /proc/loadavg cannot be read."""
    least = None
    for i in range(samples):
        try:
            with open("/proc/loadavg", "rb") as f:
                runnable = int(f.read().split()[3].split(b"/")[0])
        except (OSError, ValueError, IndexError):
            return None
        others = max(0, runnable - _own_running())
        least = others if least is None else min(least, others)
        if least == 0:
            break
        if i + 1 < samples:
            time.sleep(gap)
    return least


def threads_for_call(most: int, cpus: int, others: int | None) -> int:
    """Threads for the next call: one per core that other processes leave free, at least one and
    at most ``most``. On a busy machine llama.cpp's threads would otherwise wait at every layer
    for the one that shares a core with another process (generation measured 3-8x slower with two
    busy processes on 2 cores at 2 threads than at 1)."""
    if others is None:
        return most
    return max(1, min(most, cpus - others))


class ThreadCount:
    """Sets the llama.cpp context's thread count before each call (``llama_set_n_threads``) when
    the count adapts, and remembers the last one set."""

    def __init__(self, llama, lib, most: int, adapt: bool):
        self.llama, self.lib, self.most, self.adapt = llama, lib, most, adapt
        self.cpus = os.cpu_count() or 1
        self.current = most

    def before_call(self) -> int:
        if not self.adapt:
            return self.current
        n = threads_for_call(self.most, self.cpus, runnable_elsewhere())
        if n != self.current:
            try:
                self.lib.llama_set_n_threads(self.llama._ctx.ctx, n, n)
            except Exception:  # noqa: BLE001 - another llama-cpp-python: keep the count it has, never fail a call
                self.adapt = False
                return self.current
            self.current = n
        return n


# --- reuse of what was read ----------------------------------------------------------------
def common_prefix(a, b) -> int:
    """How many leading tokens the token arrays ``a`` and ``b`` share."""
    import numpy as np

    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if diff.size else n


class PrefixStates:
    """KV states of token sequences the model has read, for later prompts that begin the same
    way: at most ``max_bytes`` bytes of states (0: nothing is kept), least recently used out.

    A state is a ``(tokens, data)`` pair: ``data`` is llama.cpp's copy of the sequence's KV cells
    for exactly those tokens (``llama_state_seq_get_data``). A kept sequence that is a prefix of a
    new one is dropped (the new one serves every prompt the old one did, at least as far)."""

    def __init__(self, max_bytes: int):
        from collections import OrderedDict

        self.max_bytes = max(0, int(max_bytes))
        # id -> (tokens, data); least recently used first
        self._states: OrderedDict[int, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._ids = 0
        self.bytes = 0
        self.kept = self.restored = self.dropped = 0

    def __len__(self) -> int:
        return len(self._states)

    def longest(self, tokens) -> tuple[int | None, int]:
        """(id, shared tokens) of the kept state sharing the longest prefix with ``tokens`` ((None, 0) if none)."""
        best, best_n = None, 0
        for sid, (toks, _) in self._states.items():
            n = common_prefix(toks, tokens)
            if n > best_n:
                best, best_n = sid, n
        return best, best_n

    def take(self, sid: int) -> tuple[np.ndarray, np.ndarray]:
        """The state ``sid`` as (tokens, data), now the most recently used."""
        self._states.move_to_end(sid)
        self.restored += 1
        return self._states[sid]

    def covers(self, tokens) -> bool:
        """Whether a kept state begins with ``tokens`` (it is then marked as used)."""
        for sid, (toks, _) in self._states.items():
            if len(toks) >= len(tokens) and common_prefix(toks, tokens) == len(tokens):
                self._states.move_to_end(sid)
                return True
        return False

    def keep(self, tokens, data) -> bool:
        """Keep ``data``, the state of ``tokens``; False if it alone is over the bound."""
        if not self.max_bytes or len(data) > self.max_bytes:
            return False
        for sid in [sid for sid, (toks, _) in self._states.items() if common_prefix(toks, tokens) == len(toks)]:
            self._drop(sid)  # a prefix of the new sequence: superseded
        self._ids += 1
        self._states[self._ids] = (tokens, data)
        self.bytes += len(data)
        self.kept += 1
        while self.bytes > self.max_bytes:
            self._drop(next(iter(self._states)))
        return True

    def _drop(self, sid: int) -> None:
        _, data = self._states.pop(sid)
        self.bytes -= len(data)
        self.dropped += 1


def _reusing(Llama, lib):
    """``Llama`` (llama-cpp-python's class; ``lib``, its ``llama_cpp.llama_cpp`` bindings) that
    reuses kept states, and reads every prompt so that its answer is the answer of a cold read of
    that prompt (the whole prompt read from its first token):

    * llama.cpp computes a token read alone (a batch of one, as every generated token is) with
      other kernels than tokens read in a batch of two or more, and the numbers differ in their
      last bits (enough to change a sampled token now and then); in batches of two or more, a
      token's numbers do not depend on how the tokens around it were batched. So a prompt is never
      read with a token alone: at least its last two tokens are read (not one, as
      llama-cpp-python would when it has the rest), and a read is never cut into batches ending
      with a batch of one;
    * only prompt tokens are kept or reused, never the answer's (generated one at a time): after
      each call the sequence is cut back to its prompt.

    Before a prompt is read, the kept state sharing the longest prefix with it is restored when
    that is longer than what the live KV cache shares. ``prompt_read`` of ``prompt_tokens`` are
    the tokens actually read. A model whose memory cannot drop the cells after a position (a
    recurrent one: llama.cpp then refuses the cut) reads every prompt from its first token and
    keeps nothing."""
    import numpy as np

    u8p = __import__("ctypes").POINTER(__import__("ctypes").c_uint8)

    class ReusingLlama(Llama):
        states: PrefixStates
        reuse = True  # False: the next prompt is read from its first token
        prompt_tokens = prompt_read = 0
        _reading = False
        _clean = 0  # leading live tokens read as a prompt (never generated, never read alone)

        def eval(self, tokens):
            if not self._reading:
                return super().eval(tokens)
            self.prompt_read, self._reading = len(tokens), False
            nb = self.n_batch
            if len(tokens) > nb and len(tokens) % nb == 1 and nb > 2:  # the last batch would hold one token
                super().eval(tokens[: len(tokens) - 2])
                return super().eval(tokens[len(tokens) - 2 :])
            return super().eval(tokens)

        def generate(self, tokens, *args, **kwargs):
            tokens = list(tokens)
            n = len(tokens)
            self.prompt_tokens, self.prompt_read, self._reading = n, 0, True
            want = np.asarray(tokens, dtype=np.intc)
            live = min(common_prefix(self.input_ids[: self.n_tokens], want), self._clean)
            if self.reuse and len(self.states):
                sid, k = self.states.longest(want)
                if sid is not None and min(k, n - 2) > min(live, n - 2):
                    live = self._restore(*self.states.take(sid), want)
            keep = max(0, min(live, n - 2)) if self.reuse else 0  # at least two tokens read
            if not self._ctx.kv_cache_seq_rm(-1, keep, -1):
                self.forget()
                keep = 0
            self.n_tokens, self._requires_eval, self._clean = keep, True, n
            return super().generate(tokens, *args, **kwargs)  # llama-cpp-python reads tokens[keep:]

        def _restore(self, toks, data, want) -> int:
            """Restore a kept state; the prefix it shares with ``want`` (0 if it could not be restored)."""
            self._ctx.kv_cache_seq_rm(-1, 0, -1)
            if lib.llama_state_seq_set_data(self._ctx.ctx, data.ctypes.data_as(u8p), len(data), 0) != len(data):
                self._ctx.kv_cache_seq_rm(-1, 0, -1)
                self.n_tokens = self._clean = 0
                return 0
            self.input_ids[: len(toks)] = toks
            self.n_tokens = self._clean = len(toks)
            return common_prefix(toks, want)

        def remember(self) -> None:
            """Cut the sequence back to the last prompt (the answer's tokens are not reused) and keep
            its state, unless a kept one already begins with it."""
            n = self.prompt_tokens
            if n == 0 or self.n_tokens < n or self._clean < n:
                return
            if not self._ctx.kv_cache_seq_rm(-1, n, -1):  # the answer's cells cannot be dropped alone
                self.forget()
                return
            self.n_tokens, self._requires_eval = n, True  # the live logits are the answer's, not the prompt's
            if not self.states.max_bytes:
                return
            toks = self.input_ids[:n].copy()
            if self.states.covers(toks):
                return
            size = lib.llama_state_seq_get_size(self._ctx.ctx, 0)
            if not size or size > self.states.max_bytes:
                return
            data = np.empty(size, dtype=np.uint8)
            got = lib.llama_state_seq_get_data(self._ctx.ctx, data.ctypes.data_as(u8p), size, 0)
            if got:
                self.states.keep(toks, data[:got])

        def forget(self) -> None:
            """Empty the live KV cache: the next prompt is read from its first token (kept states stay)."""
            self._ctx.kv_cache_seq_rm(-1, 0, -1)
            self.n_tokens = self._clean = 0
            self._requires_eval = True

    return ReusingLlama


def answer(llama, call: dict, *, reuse: bool = True) -> dict:
    """One chat completion, reusing kept states (unless ``reuse`` is False), its usage saying how
    many prompt tokens were reused; then the sequence read is kept for later calls."""
    llama.reuse = reuse
    try:
        out = llama.create_chat_completion(**call)
    finally:
        llama.reuse = True
    usage = out.get("usage")
    if isinstance(usage, dict) and llama.prompt_tokens:
        usage["prompt_tokens_details"] = {"cached_tokens": max(0, llama.prompt_tokens - llama.prompt_read)}
    try:
        llama.remember()
    except Exception:  # noqa: BLE001 - keeping a state saves time later; failing to is never the call's failure
        try:
            llama.forget()  # what is live is no longer known to be the prompt's: the next call reads afresh
        except Exception:  # noqa: BLE001
            pass
    return out


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


def die_with_parent(parent: int | None, lines: "queue.Queue[str]", poll: float = 0.25) -> bool:
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

    lines: queue.Queue[str] = queue.Queue()
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
    import llama_cpp.llama_cpp as lib

    threads = ThreadCount(llama, lib, int(meta["threads"]), bool(meta["threads_adapt"]))
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
            n = threads.before_call()
            out = answer(llama, req["call"], reuse=req.get("reuse", True) is not False)
            send({"id": rid, "ok": True, "out": out, "threads": n})
        except Exception as exc:  # noqa: BLE001 - a bad request is the caller's error, not a crash
            send({"id": rid, "ok": False, "error": f"{exc}", "type": type(exc).__name__})
    return 0


def check(cfg: dict) -> int:
    """Load, report the build, generate a few tokens. Prints one JSON object."""
    llama, meta = _load(cfg)
    t0 = time.perf_counter()
    if os.environ.get("COOPLAB_LOCAL_FAULT", "").startswith("segv"):
        _fault("segv")  # tests of set-up's and doctor's crash reports
    out = llama.create_chat_completion(
        messages=[{"role": "user", "content": "Say OK."}], max_tokens=4, temperature=0.0, seed=0
    )
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
