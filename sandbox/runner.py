"""In-sandbox runner for cooplab's ``run_code`` tool.

This file is executed *inside* the sandbox (a container, or a local
subprocess).  It must only use the standard library at the top level: the
same text runs two processes:

``supervise``
    A small, long-lived process (PID 1 in a container).  It talks to the host
    over stdin/stdout with a line protocol, starts the *worker*, enforces the
    timeout (SIGINT first, then SIGKILL), caps the worker's output, result and
    figures, and decides the status of every call.  It never imports pandas,
    so the OOM killer picks the worker, not the supervisor.

``worker``
    Holds the user's variables.  It reads requests on fd 3 (a pipe) and writes
    results on fd 4 (a Unix socket); its stdout/stderr are pipes read by the
    supervisor.  It never sees the host channel nor the session nonce.

The user's code runs inside the worker and can do anything the worker can
(write to fd 4 included), so nothing the worker writes is trusted by itself.
A call ends when the worker *stops itself* (SIGSTOP) after writing its result:
the kernel reports the stop to the supervisor (waitpid WUNTRACED, woken by
SIGCHLD), which then kills every other process of the sandbox (every one
with a live thread), checks that every thread of the worker is stopped, reads
the pipes to the end and takes the newest frame carrying the call's random id
among the bytes the kernel says the worker process wrote (SO_PASSCRED): no
other process can answer for it.  A frame written while the
code is still running is never read as the answer; the code keeps running
until the timeout.  Threads that outlive their call make the supervisor
restart the worker, so nothing of one call runs during a later one.  The
worker is resumed (SIGCONT) when the next request is sent.

Host -> supervisor: one JSON object per line on stdin.  The first line is
``{"op": "hello", "nonce": ...}``.  Supervisor -> host: every frame is one
line ``<nonce> <json>``; the host ignores any line without the nonce.  When
stdin reaches end-of-file (the host is gone) the supervisor kills the worker
and exits at once, even in the middle of a call.

It is started as ``python3 -I -c "import sys;exec(sys.argv[1])" <this source>
supervise <json options>`` so that the supervisor can start the worker with the
same text without needing a file on disk.
"""

import base64
import ctypes
import io
import json
import os
import select
import signal
import socket
import struct
import sys
import time

PROTOCOL_VERSION = 2
REQ_FD = 3
RES_FD = 4
MAX_SECONDS = 1000000  # longest timeout accepted (as in models.MAX_SECONDS)
MAX_ERROR_TYPE = 200  # characters of an error's type name
MAX_ERROR_MESSAGE = 2000
MAX_TRACEBACK = 8000
UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid


# --------------------------------------------------------------------------
# helpers shared by both processes
# --------------------------------------------------------------------------


def _set_nondumpable():
    """Make /proc/<pid>/{fd,mem,environ} of this process unreadable to its
    unprivileged children (they share our uid)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except Exception:
        pass


#: syscalls our own seccomp filter refuses (EPERM), on top of the container's profile:
#: io_uring_setup, io_uring_enter, io_uring_register. They have these numbers on every
#: architecture Docker runs us on (x86_64, its i386 and x32 ABIs, aarch64, arm).
BLOCKED_SYSCALLS = (425, 426, 427)
_X32_BIT = 0x40000000
_EPERM = 1


def _lazy_pyplot(ns):
    """``plt`` as the code finds it: a stand-in that imports matplotlib's pyplot (Agg) the first
    time the code touches it, then puts the real module in its place. Importing pyplot is about
    0.3 s, half of a sandbox's start, and most calls never draw."""
    import types

    class LazyPyplot(types.ModuleType):
        def _load(self):
            scope = {}
            exec("import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as real", scope)
            real = scope["real"]

            if ns.get("plt") is self:
                ns["plt"] = real
            return real

        def __getattr__(self, name):
            return getattr(self._load(), name)

        def __setattr__(self, name, value):
            setattr(self._load(), name, value)

        def __dir__(self):
            return dir(self._load())

        def __repr__(self):
            return repr(self._load())

    return LazyPyplot("matplotlib.pyplot")


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _block_syscalls():
    """Install a seccomp filter on this process (inherited by every child, never removable)
    that makes the :data:`BLOCKED_SYSCALLS` fail with EPERM and allows everything else.

    Filters stack: the kernel applies this one and the container's profile (Docker's default)
    and the stricter answer wins, so this only takes away. Docker's default profile allows
    io_uring before Docker 25, and io_uring's submission queue bypasses per-syscall filtering,
    so it is refused here whatever the daemon's version. Raises OSError if the kernel refuses."""
    ld, alu_and, jge, jgt, ret = 0x20, 0x54, 0x35, 0x25, 0x06  # BPF_LD|W|ABS, ALU|AND|K, JMP|JGE|K, JMP|JGT|K, RET|K
    lo, hi = min(BLOCKED_SYSCALLS), max(BLOCKED_SYSCALLS)
    assert list(BLOCKED_SYSCALLS) == list(range(lo, hi + 1))
    prog = [
        (ld, 0, 0, 0),  # A = seccomp_data.nr
        (alu_and, 0, 0, ~_X32_BIT & 0xFFFFFFFF),  # the x32 ABI's numbers are nr | 0x40000000
        (jge, 0, 2, lo),  # nr < lo: allow
        (jgt, 1, 0, hi),  # nr > hi: allow
        (ret, 0, 0, 0x00050000 | _EPERM),  # SECCOMP_RET_ERRNO | EPERM
        (ret, 0, 0, 0x7FFF0000),  # SECCOMP_RET_ALLOW
    ]
    insns = (_SockFilter * len(prog))(*[_SockFilter(*i) for i in prog])
    fprog = _SockFprog(len(prog), insns)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    # PR_SET_NO_NEW_PRIVS (38): required to install a filter without CAP_SYS_ADMIN (Docker's
    # no-new-privileges has set it already in a container)
    if libc.prctl(38, 1, None, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "prctl(PR_SET_NO_NEW_PRIVS): " + os.strerror(err))
    # PR_SET_SECCOMP (22), SECCOMP_MODE_FILTER (2)
    if libc.prctl(22, 2, ctypes.cast(ctypes.pointer(fprog), ctypes.c_void_p), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "prctl(PR_SET_SECCOMP): " + os.strerror(err))


def _cap_text(text, limit):
    """Keep head and tail of ``text`` when longer than ``limit`` chars; the
    result (marker included) is at most ``limit`` chars, so capping twice
    changes nothing."""
    if text is None or len(text) <= limit:
        return text, False
    marker = "\n... [%d characters truncated] ...\n"
    keep = max(limit - len(marker % len(text)), 0)
    head = keep - keep // 2
    tail = keep - head
    return text[:head] + marker % (len(text) - keep) + (text[-tail:] if tail else ""), True


class Capture:
    """Keeps the first ``head`` and last ``tail`` bytes of a byte stream."""

    def __init__(self, limit):
        self.head_cap = limit // 2
        self.tail_cap = limit - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data):
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_cap + 65536:
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def truncated(self):
        return self.total > self.head_cap + self.tail_cap

    def text(self):
        tail = bytes(self.tail[-self.tail_cap :]) if self.tail_cap else b""
        if not self.truncated:
            return (bytes(self.head) + tail).decode("utf-8", "replace")
        skipped = self.total - len(self.head) - len(tail)
        return (
            bytes(self.head).decode("utf-8", "replace")
            + "\n... [%d bytes of output truncated] ...\n" % skipped
            + tail.decode("utf-8", "replace")
        )


# --------------------------------------------------------------------------
# supervisor
# --------------------------------------------------------------------------

THREADS_NOTE = (
    "cooplab sandbox: %d thread(s) started by this code were still running when the call ended, so "
    "the sandbox was restarted (variables lost, df reloaded). Join every thread before the code ends."
)


def _check_seconds(value):
    """``value`` as seconds in (0, MAX_SECONDS]; ValueError otherwise (NaN,
    infinities, zero, negative, huge, not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("timeout must be a number of seconds, got %r" % (value,))
    try:
        seconds = float(value)
    except OverflowError:
        seconds = float("inf")
    if not 0 < seconds <= MAX_SECONDS:  # False for NaN too
        raise ValueError("timeout must be positive, finite and at most %d s, got %r" % (MAX_SECONDS, value))
    return seconds


def _valid_text(text):
    """``text`` with lone surrogates (not encodable as UTF-8) backslash-escaped."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _clean_error(err):
    """The worker's error object, checked and capped (it may come from the code)."""
    if err is None:
        return None
    if not isinstance(err, dict):
        return {"type": "InvalidResult", "message": "the worker sent a malformed error", "traceback": ""}
    etype, msg, tb = err.get("type"), err.get("message"), err.get("traceback")
    etype = _valid_text(etype)[:MAX_ERROR_TYPE] if isinstance(etype, str) and etype else "Error"
    msg = _cap_text(_valid_text(msg), MAX_ERROR_MESSAGE)[0] if isinstance(msg, str) else ""
    tb = _cap_text(_valid_text(tb), MAX_TRACEBACK)[0] if isinstance(tb, str) else ""
    return {"type": etype, "message": msg, "traceback": tb}


class ResultChannel:
    """What the worker wrote to its result socket during one call.  Only the last
    ``limit`` bytes are kept: the supervisor computes ``limit`` from the caps so
    that a legitimate frame always fits, and a worker writing gigabytes costs
    no more memory than that."""

    MAX_LINES = 1000  # lines examined from the end when looking for the frame

    def __init__(self, limit):
        self.limit = limit
        self.buf = bytearray()
        self.cut = False  # the start of the buffer was dropped

    def clear(self):
        self.buf = bytearray()
        self.cut = False

    def feed(self, data):
        self.buf += data
        if len(self.buf) > 2 * self.limit:
            del self.buf[: len(self.buf) - self.limit]
            self.cut = True

    def last_frame(self, want_type, want_id=None):
        """The newest complete line that is a frame of ``want_type`` (and
        ``want_id``), or None.  Called only while the worker is frozen."""
        data, cut = self.buf, self.cut
        if len(data) > self.limit:
            data, cut = data[len(data) - self.limit :], True
        end = data.rfind(b"\n")
        for _ in range(self.MAX_LINES):
            if end < 0:
                break
            start = data.rfind(b"\n", 0, end)
            if start < 0 and cut:
                break  # this line's beginning was dropped
            line = bytes(data[start + 1 : end])
            end = start
            if not line:
                continue
            try:
                msg = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(msg, dict) and msg.get("type") == want_type and (want_id is None or msg.get("id") == want_id):
                return msg
        return None


def _on_sigchld(signum, frame):
    """SIGCHLD only wakes the select loop (through the wakeup fd)."""


def _sigkill(pid):
    """SIGKILL ``pid`` (the whole thread group, even with its leader gone); whether it was sent."""
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def sweep_strays(listing, kill, *, churn, reap=lambda: None, expired=lambda: False, pause=lambda: None):
    """Kill strays pass after pass until a pass finds nothing to do; True then, False once ``expired()``.

    ``listing()`` yields ``(pid, state)`` for one pass, each state read when its pid is reached:
    ``"stray"`` (alive, to ``kill(pid)``, which says whether the signal was sent), ``"zombie"`` (dead,
    not yet reaped) or ``"gone"`` (listed, vanished before it was looked at); pids to spare are not
    yielded. Without ``churn`` (the local backend) a pass that sent no kill ends the sweep. With
    ``churn`` (a container, where every process is ours) a process that died or vanished may have
    forked a child the listing does not hold (a process that forks and exits in a loop), so such a
    pass forces another one: a pass ends the sweep only if it sent no kill, nothing in it vanished
    and every zombie in it was already one in the pass before (a zombie that stays counts once)."""
    zombies = set()
    while True:
        found = changed = False
        seen = set()
        for pid, state in listing():
            if state == "stray":
                found = kill(pid) or found
            elif churn and state in ("zombie", "gone"):
                seen.add(pid)
                if state == "gone" or pid not in zombies:
                    changed = True
        reap()
        zombies = seen
        if not found and not changed:
            return True
        if expired():
            return False
        pause()


class Supervisor:
    """Runs the worker and decides every call's outcome from facts the worker
    cannot fake: the worker ends a call by stopping itself (SIGSTOP), which the
    kernel reports to its parent (waitpid WUNTRACED); only while it is stopped,
    with every thread frozen and no other process left that could resume it,
    is its result read.  Time, output, result and figure limits are applied
    here."""

    #: the wake-up pipe SIGCHLD writes to (made by run() before anything polls it)
    sig_r: int
    sig_w: int
    #: the worker's request pipe (made by spawn_worker() before any request is sent)
    req_w: int

    def __init__(self, opts):
        self.opts = opts
        self.mode = opts.get("mode", "container")
        self.nonce = None
        self.worker_pid = None
        self.worker_status = None  # raw wait status once reaped
        self.worker_stopped = False  # last waitpid report: stopped
        self.foreign_continue = False  # resumed by another process since our last SIGCONT
        self.res_r = self.out_r = self.err_r = None  # None once read to end-of-file
        self.res_sock = None  # the result channel (self.res_r is its fd)
        self.req_pending = bytearray()
        self.stdin_buf = bytearray()
        self.stdin_eof = False
        self.ready_msg = None
        self.baseline = {}  # tid -> start time of the worker's threads when it became ready
        self.res = ResultChannel(self._result_budget())
        self.boot_capture = Capture(16384)

    def _result_budget(self):
        """Upper bound of a legitimate worker frame (JSON with \\uXXXX escapes)."""
        o = self.opts
        chars = int(o.get("max_result_chars", 20000)) + MAX_ERROR_TYPE + MAX_ERROR_MESSAGE + MAX_TRACEBACK + 400
        fig_b64 = 4 * ((int(o.get("max_figure_bytes", 2000000)) + 2) // 3) + 8
        return 12 * chars + int(o.get("max_figures", 5)) * fig_b64 + 65536

    # -- host channel -----------------------------------------------------
    def emit(self, frame):
        line = (self.nonce or "") + " " + json.dumps(frame, separators=(",", ":")) + "\n"
        data = line.encode("ascii")
        view = memoryview(data)
        while view:
            n = os.write(1, view)
            view = view[n:]

    def _read_host(self):
        try:
            chunk = os.read(0, 1 << 20)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.stdin_eof = True
        else:
            self.stdin_buf += chunk

    def _drain_sig(self):
        while True:
            try:
                if not os.read(self.sig_r, 4096):
                    return
            except (BlockingIOError, InterruptedError, OSError):
                return

    def read_request(self, timeout):
        """Return the next JSON request from stdin, None on idle timeout,
        or "EOF" when the host went away."""
        deadline = time.monotonic() + timeout
        while True:
            nl = self.stdin_buf.find(b"\n")
            if nl >= 0:
                line = bytes(self.stdin_buf[:nl])
                del self.stdin_buf[: nl + 1]
                if not line.strip():
                    continue
                try:
                    req = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if isinstance(req, dict):
                    return req
                continue
            if self.stdin_eof:
                return "EOF"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            r, _, _ = select.select([0, self.sig_r], [], [], min(remaining, 5.0))
            if self.sig_r in r:
                self._drain_sig()
            self.reap()
            if 0 in r:
                self._read_host()

    # -- worker management -------------------------------------------------
    def spawn_worker(self):
        req_r, req_w = os.pipe()
        # The result channel is a socket: with SO_PASSCRED set before anyone writes, the kernel
        # tells the reader which process wrote each chunk, and never merges two writers' bytes
        # in one read.  Only the worker's own bytes are kept (see _read_result).
        self.res_sock, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.res_sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.res_sock.setblocking(False)
        res_r, res_w = self.res_sock.fileno(), peer.detach()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        devnull = os.open(os.devnull, os.O_RDONLY)
        src = sys.argv[1]
        argv = [sys.executable, "-I", "-c", "import sys;exec(sys.argv[1])", src, "worker", json.dumps(self.opts)]
        env = dict(os.environ)
        actions = [
            (os.POSIX_SPAWN_DUP2, devnull, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
            (os.POSIX_SPAWN_DUP2, req_r, REQ_FD),
            (os.POSIX_SPAWN_DUP2, res_w, RES_FD),
        ]
        # The worker gets a process group of its own inside our session: the
        # group is then never "orphaned", so the kernel never sends it
        # SIGHUP + SIGCONT when one of its processes exits while it is stopped.
        self.worker_pid = os.posix_spawn(sys.executable, argv, env, file_actions=actions, setpgroup=0)
        self.worker_status = None
        self.worker_stopped = False
        for fd in (req_r, res_w, out_w, err_w, devnull):
            os.close(fd)
        for fd in (req_w, out_r, err_r):
            os.set_blocking(fd, False)
        self.req_w, self.res_r, self.out_r, self.err_r = req_w, res_r, out_r, err_r
        self.req_pending = bytearray()
        self.res.clear()

    def reap(self):
        """Collect child status changes: exits of any child (we are PID 1 in a
        container), stops and continues of the worker."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG | os.WUNTRACED | os.WCONTINUED)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if pid == 0:
                return
            if pid != self.worker_pid or self.worker_status is not None:
                continue
            if os.WIFSTOPPED(status):
                self.worker_stopped = True
            elif os.WIFCONTINUED(status):
                # our own SIGCONTs are reported in resume_worker: another process did this
                self.worker_stopped = False
                self.foreign_continue = True
            else:
                self.worker_status = status
                self.worker_stopped = False

    def worker_alive(self):
        self.reap()
        return self.worker_pid is not None and self.worker_status is None

    def _signal_worker(self, sig):
        if self.worker_pid and self.worker_status is None:
            try:
                os.kill(self.worker_pid, sig)
            except ProcessLookupError:
                pass

    def resume_worker(self):
        self.worker_stopped = False
        self._signal_worker(signal.SIGCONT)
        # The kernel records the continue while sending it: collect that report now,
        # so that any later one means another process stopped and resumed the worker.
        if self.worker_pid and self.worker_status is None:
            try:
                pid, status = os.waitpid(self.worker_pid, os.WNOHANG | os.WCONTINUED)
            except ChildProcessError:
                pid = 0
            if pid and not (os.WIFCONTINUED(status) or os.WIFSTOPPED(status)):
                self.worker_status = status
        self.foreign_continue = False

    @staticmethod
    def _pids():
        out = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                out.append(int(name))
        return out

    @staticmethod
    def _stat(path):
        """Fields of a /proc stat file after the command name: [state, ppid,
        pgrp, session, ...], or None."""
        try:
            with open(path, "rb") as f:
                data = f.read()
            return data[data.rfind(b")") + 2 :].split()
        except OSError:
            return None

    @classmethod
    def _alive(cls, pid):
        """Some thread of process ``pid`` has not exited.  The stat line of the
        process is its leader thread's: it says Z once that thread has exited,
        even while other threads of the process run on."""
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            return False
        for tid in tids:
            st = cls._stat("/proc/%d/task/%s/stat" % (pid, tid))
            if st and st[0] not in (b"Z", b"X"):
                return True
        return False

    def _is_stray(self, pid, fields):
        if self.mode == "container":
            return True
        # local mode: our session (LocalTransport starts us as a session leader);
        # a process that left it escapes (the local backend is no boundary)
        try:
            if os.getsid(0) == os.getpid():
                return int(fields[3]) == os.getpid()
            return int(fields[2]) == self.worker_pid
        except (ValueError, IndexError, OSError):
            return False

    def kill_strays(self, include_worker=False):
        """Kill every process of the sandbox except the supervisor (and the
        worker unless ``include_worker``).  A process counts while any of its
        threads is alive, whatever its name, session or leader's state.
        True once none is left alive; False if some still were after 5 s."""
        keep = {os.getpid()}
        if not include_worker and self.worker_pid:
            keep.add(self.worker_pid)
        if include_worker and self.mode == "container":
            # we are PID 1: this reaches every other process of the namespace at once,
            # including children forked while it is delivered
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        deadline = time.monotonic() + 5
        container = self.mode == "container"

        def listing():
            for p in self._pids():
                if p in keep or (container and p == 1):
                    continue
                if not self._alive(p):  # gone, or a zombie waiting for its parent
                    if container:
                        yield p, ("gone" if self._stat("/proc/%d/stat" % p) is None else "zombie")
                    continue
                st = self._stat("/proc/%d/stat" % p)
                if st and self._is_stray(p, st):
                    yield p, "stray"

        return sweep_strays(
            listing,
            _sigkill,
            churn=container,
            reap=self.reap,
            expired=lambda: time.monotonic() > deadline,
            pause=lambda: time.sleep(0.002),
        )

    def kill_worker(self):
        self._signal_worker(signal.SIGKILL)
        self.kill_strays(include_worker=True)
        deadline = time.monotonic() + 5
        while self.worker_pid and self.worker_status is None and time.monotonic() < deadline:
            self.reap()
            if self.worker_status is None:
                r, _, _ = select.select([self.sig_r], [], [], 0.05)
                if r:
                    self._drain_sig()
        self.worker_stopped = False

    def tasks(self):
        """{tid: start time} of the worker's threads."""
        out = {}
        base = "/proc/%d/task" % self.worker_pid
        try:
            names = os.listdir(base)
        except OSError:
            return out
        for name in names:
            st = self._stat("%s/%s/stat" % (base, name))
            if st and len(st) > 19:
                out[name] = (st[0], st[19])
        return out

    def frozen(self):
        """Every thread of the worker is in the stopped state."""
        tasks = self.tasks()
        return bool(tasks) and all(state in (b"T", b"Z", b"X") for state, _ in tasks.values())

    def new_threads(self):
        """Threads of the worker that were not there when it became ready."""
        now = {tid: start for tid, (_, start) in self.tasks().items()}
        new = [tid for tid, start in now.items() if self.baseline.get(tid) != start]
        if not new:
            self.baseline = now  # threads that ended are forgotten
        return new

    @staticmethod
    def oom_kills():
        for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
            try:
                with open(path) as f:
                    for line in f:
                        parts = line.split()
                        if len(parts) == 2 and parts[0] == "oom_kill":
                            return int(parts[1])
            except (OSError, ValueError):
                continue
        return None

    # -- moving data -------------------------------------------------------
    def _close_eof(self, fd):
        """``fd`` reached end-of-file: stop polling it."""
        try:
            os.close(fd)
        except OSError:
            pass
        if fd == self.res_r:
            sock = self.res_sock
            assert sock is not None  # res_r is this socket's fd
            sock.detach()  # the fd is closed above
            self.res_sock = self.res_r = None
        elif fd == self.out_r:
            self.out_r = None
        elif fd == self.err_r:
            self.err_r = None

    def _read_result(self):
        """One chunk from the result socket and the pid of the process that
        wrote it (the kernel's word: a process cannot claim another's pid)."""
        sock = self.res_sock
        assert sock is not None  # read only while self.res_r (its fd) is open
        data, ancillary, _, _ = sock.recvmsg(1 << 20, socket.CMSG_SPACE(UCRED.size))
        sender = None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= UCRED.size:
                sender = UCRED.unpack_from(payload)[0]
        return data, sender

    def _read_fd(self, fd, out_cap, err_cap):
        sender = None
        try:
            if fd == self.res_r:
                data, sender = self._read_result()
            else:
                data = os.read(fd, 1 << 20)
        except (BlockingIOError, InterruptedError):
            return -1
        except OSError:
            data = b""
        if not data:
            return 0
        if fd == self.res_r:
            # bytes from any other process (a fork of the code, a stray of an earlier call) are
            # dropped: they can never become an answer
            if sender == self.worker_pid:
                self.res.feed(data)
        elif fd == self.out_r:
            out_cap.feed(data)
        else:
            err_cap.feed(data)
        return len(data)

    def drain(self, out_cap, err_cap):
        """Read whatever is in the worker's pipes now (complete once the worker
        is frozen and no other process holds the pipes)."""
        for fd in (self.out_r, self.err_r, self.res_r):
            if fd is None:
                continue
            while True:
                n = self._read_fd(fd, out_cap, err_cap)
                if n == 0:
                    self._close_eof(fd)
                if n <= 0:
                    break

    def _flush_request(self):
        try:
            n = os.write(self.req_w, self.req_pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.req_pending = bytearray()  # the worker closed its end: it will not answer
            return
        del self.req_pending[:n]

    def wait_worker(self, deadline, out_cap, err_cap):
        """Move data between the pipes until the worker stops itself ("STOPPED"),
        dies ("DEAD"), the host goes away ("EOF") or ``deadline`` ("TIMEOUT")."""
        while True:
            self.reap()
            if self.worker_status is not None:
                self.drain(out_cap, err_cap)
                return "DEAD"
            if self.worker_stopped or self.foreign_continue:
                # (resumed by another process: it was stopped; settle() stops it again)
                self.foreign_continue = False
                return "STOPPED"
            if self.stdin_eof:
                return "EOF"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "TIMEOUT"
            rfds = [self.sig_r, 0] + [fd for fd in (self.res_r, self.out_r, self.err_r) if fd is not None]
            wfds = [self.req_w] if self.req_pending else []
            r, w, _ = select.select(rfds, wfds, [], min(remaining, 5.0))
            if w:
                self._flush_request()
            for fd in r:
                if fd == self.sig_r:
                    self._drain_sig()
                elif fd == 0:
                    self._read_host()
                elif self._read_fd(fd, out_cap, err_cap) == 0:
                    self._close_eof(fd)

    def settle(self, out_cap, err_cap):
        """The worker reported a stop.  Kill every other process (nothing can
        resume it afterwards), make sure all its threads are stopped (stop it
        again if a process resumed it before dying), then read everything it
        wrote.  False if it could not be frozen (it is then killed)."""
        if not self.kill_strays():
            self.kill_worker()  # something could not be killed: nothing of this sandbox is trusted
            return False
        if not self.frozen():
            self.worker_stopped = False
            self._signal_worker(signal.SIGSTOP)
            deadline = time.monotonic() + 5
            while not (self.worker_stopped and self.frozen()):
                self.reap()
                if self.worker_status is not None or time.monotonic() > deadline:
                    self.kill_worker()
                    return False
                r, _, _ = select.select([self.sig_r], [], [], 0.05)
                if r:
                    self._drain_sig()
        self.drain(out_cap, err_cap)
        return True

    def send_worker(self, obj):
        self.req_pending += (json.dumps(obj) + "\n").encode()
        self._flush_request()

    # -- main loop -----------------------------------------------------------
    def wait_ready(self, timeout):
        if self.ready_msg is not None:
            return self.ready_msg
        deadline = time.monotonic() + timeout
        while True:
            ev = self.wait_worker(deadline, self.boot_capture, self.boot_capture)
            if ev == "EOF":
                self.shutdown()
            if ev == "TIMEOUT":
                return {
                    "type": "ready",
                    "ok": False,
                    "error": "worker did not start in time",
                    "log": self.boot_capture.text(),
                }
            if ev == "DEAD" or not self.settle(self.boot_capture, self.boot_capture):
                return {
                    "type": "ready",
                    "ok": False,
                    "error": "worker died during start-up",
                    "log": self.boot_capture.text(),
                }
            msg = self.res.last_frame("ready")
            if msg is None:
                self.resume_worker()
                continue
            self.res.clear()
            self.baseline = {tid: start for tid, (_, start) in self.tasks().items()}
            msg["log"] = self.boot_capture.text()
            self.ready_msg = msg
            return msg

    def run(self):
        _set_nondumpable()
        refused = None
        try:
            _block_syscalls()  # before the worker exists: it and all it starts inherit the filter
        except (OSError, AttributeError) as e:
            if self.mode == "container":  # fail closed: no code runs without the filter
                refused = f"the sandbox could not install its seccomp filter (io_uring stays open): {e}"
        if self.mode == "container":
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self._prepare_tmp()
        self.sig_r, self.sig_w = os.pipe()
        os.set_blocking(self.sig_r, False)
        os.set_blocking(self.sig_w, False)
        signal.signal(signal.SIGCHLD, _on_sigchld)
        signal.set_wakeup_fd(self.sig_w, warn_on_full_buffer=False)
        if refused is not None:
            hello = self.read_request(float(self.opts.get("hello_timeout", 600)))
            if isinstance(hello, dict) and hello.get("op") == "hello":
                self.nonce = str(hello.get("nonce"))
                self.emit({"type": "ready", "ok": False, "error": refused, "protocol": PROTOCOL_VERSION})
            self.shutdown()
        self.spawn_worker()
        hello = self.read_request(float(self.opts.get("hello_timeout", 600)))
        if not isinstance(hello, dict) or hello.get("op") != "hello":
            self.shutdown()
        self.nonce = str(hello.get("nonce"))
        ready = self.wait_ready(float(self.opts.get("start_timeout", 120)))
        ready.setdefault("ok", True)
        ready["protocol"] = PROTOCOL_VERSION
        self.emit(ready)
        if not ready.get("ok"):
            self.shutdown()
        idle = float(self.opts.get("idle_timeout", 900))
        while True:
            req = self.read_request(idle)
            if req is None or req == "EOF":
                break
            op = req.get("op")
            if op == "exec":
                self.emit(self.do_exec(req))
            elif op == "ping":
                self.emit({"type": "pong", "id": req.get("id"), "alive": self.worker_alive()})
            elif op == "close":
                break
        self.shutdown()

    def shutdown(self):
        try:
            self.kill_worker()
        finally:
            os._exit(0)

    def _prepare_tmp(self):
        os.makedirs(self.opts.get("workdir", "/tmp/work"), exist_ok=True)
        src = "/opt/cooplab/mplconfig"
        dst = "/tmp/.config/matplotlib"
        try:
            if os.path.isdir(src) and not os.path.exists(dst):
                os.makedirs(dst, exist_ok=True)
                for name in os.listdir(src):
                    with open(os.path.join(src, name), "rb") as fi, open(os.path.join(dst, name), "wb") as fo:
                        fo.write(fi.read())
        except OSError:
            pass

    @staticmethod
    def _rejected(call_id, message):
        return {
            "type": "result",
            "id": call_id,
            "status": "error",
            "worker_dead": False,
            "error": {"type": "ValueError", "message": message, "traceback": ""},
            "stdout": "",
            "stderr": "",
            "duration": 0.0,
        }

    def _check_figures(self, figures):
        """(kept base64 strings, number dropped) under the figure caps."""
        if not isinstance(figures, list):
            return [], 0
        max_n = int(self.opts.get("max_figures", 5))
        max_b = int(self.opts.get("max_figure_bytes", 2000000))
        max_len = 4 * ((max_b + 2) // 3)
        kept, dropped = [], 0
        for fig in figures:
            if len(kept) >= max_n or not isinstance(fig, str) or len(fig) > max_len:
                dropped += 1
                continue
            try:
                size = len(base64.b64decode(fig, validate=True))
            except ValueError:
                dropped += 1
                continue
            if size > max_b:
                dropped += 1
                continue
            kept.append(fig)
        return kept, dropped

    def _apply_result(self, frame, msg, interrupted, timeout):
        """Fill ``frame`` from the worker's result ``msg``, re-applying every cap."""
        result = msg.get("result")
        result_truncated = msg.get("result_truncated") is True
        if isinstance(result, str):
            result, cut = _cap_text(_valid_text(result), int(self.opts.get("max_result_chars", 20000)))
            result_truncated = result_truncated or cut
        else:
            result = None
        figures, dropped = self._check_figures(msg.get("figures"))
        claimed = msg.get("figures_dropped")
        if isinstance(claimed, int) and not isinstance(claimed, bool) and 0 <= claimed <= 1000000:
            dropped += claimed
        err = _clean_error(msg.get("error"))
        frame.update(
            {
                "result": result,
                "result_truncated": result_truncated,
                "figures": figures,
                "figures_dropped": dropped,
                "error": err,
            }
        )
        if interrupted:
            # the supervisor had to interrupt the code: a timeout whatever it reports
            message = "execution interrupted after %.1f s timeout (state kept)" % timeout
            if err and err["type"] != "KeyboardInterrupt":
                message += "; then %s: %s" % (err["type"], err["message"])
            frame["status"] = "timeout"
            frame["error"] = {"type": "TimeoutError", "message": message, "traceback": err["traceback"] if err else ""}
        elif err and err["type"] == "MemoryError":
            frame["status"] = "oom"
        elif err:
            frame["status"] = "error"
        else:
            frame["status"] = "ok"

    def do_exec(self, req):
        call_id = req.get("id")
        try:
            timeout = _check_seconds(req["timeout"] if req.get("timeout") is not None else self.opts.get("timeout", 30))
        except ValueError as e:
            return self._rejected(call_id, str(e))
        code = req.get("code", "")
        if not isinstance(code, str):
            return self._rejected(call_id, "code must be a string")
        grace = float(self.opts.get("interrupt_grace", 2.0))
        limit = int(self.opts.get("max_output_bytes", 65536))
        out_cap, err_cap = Capture(limit), Capture(limit)
        start = time.monotonic()
        oom_before = self.oom_kills()
        if not self.worker_alive():
            return {
                "type": "result",
                "id": call_id,
                "status": "crashed",
                "worker_dead": True,
                "error": {"type": "WorkerDead", "message": "the worker is not running", "traceback": ""},
                "stdout": "",
                "stderr": "",
                "duration": 0.0,
            }
        # the worker has been frozen since the previous call: nothing belongs to this one yet
        self.drain(Capture(0), Capture(0))
        self.res.clear()
        # a fresh random id per call: a frame for this call cannot be prepared in advance
        wid = os.urandom(16).hex()
        # resume first: the worker then waits for the request, so no stop it reports
        # from now on can predate it
        self.resume_worker()
        self.send_worker({"id": wid, "code": code})
        deadline = start + timeout
        interrupted = killed = False
        msg = None
        threads = []
        while True:
            ev = self.wait_worker(deadline, out_cap, err_cap)
            if ev == "EOF":
                self.shutdown()  # the host is gone: nobody will read the result
            if ev == "DEAD":
                break
            if ev == "TIMEOUT":
                if not interrupted:
                    interrupted = True
                    self._signal_worker(signal.SIGINT)
                    deadline = time.monotonic() + grace
                    continue
                killed = True
                self.kill_worker()
                break
            # STOPPED
            if not self.settle(out_cap, err_cap):
                break
            msg = self.res.last_frame("result", wid)
            if msg is not None:
                threads = self.new_threads()
                break
            # stopped by the code itself (SIGSTOP, SIGTSTP) without finishing: go on
            self.resume_worker()
        duration = time.monotonic() - start
        frame = {
            "type": "result",
            "id": call_id,
            "duration": round(duration, 4),
            "stdout": out_cap.text(),
            "stderr": err_cap.text(),
            "stdout_truncated": out_cap.truncated,
            "stderr_truncated": err_cap.truncated,
            "stdout_bytes": out_cap.total,
            "stderr_bytes": err_cap.total,
            "interrupted": interrupted,
            "worker_dead": False,
        }
        if msg is not None:
            self._apply_result(frame, msg, interrupted, timeout)
            if threads:
                # a thread that outlived its call could write into later calls: restart
                self.kill_worker()
                frame["worker_dead"] = True
                frame["threads_left"] = len(threads)
                sep = "\n" if frame["stderr"] and not frame["stderr"].endswith("\n") else ""
                frame["stderr"] += sep + THREADS_NOTE % len(threads) + "\n"
                if frame.get("status") == "ok":
                    # a leftover thread could have written this call's frame itself: not an
                    # answer to trust; the call is an error (output kept, result dropped)
                    frame.update(
                        {
                            "status": "error",
                            "result": None,
                            "result_truncated": False,
                            "figures": [],
                            "figures_dropped": 0,
                            "error": {
                                "type": "ThreadsLeftRunning",
                                "message": THREADS_NOTE % len(threads),
                                "traceback": "",
                            },
                        }
                    )
            return frame
        # the worker is gone (or was killed)
        if not killed:
            self.kill_worker()
        frame["worker_dead"] = True
        status = self.worker_status
        sig = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None
        code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
        oom_after = self.oom_kills()
        if killed:
            frame["status"] = "timeout"
            frame["error"] = {
                "type": "TimeoutError",
                "message": "execution did not stop after SIGINT; killed after %.1f s "
                "(session restarted, state reset)" % timeout,
                "traceback": "",
            }
        elif sig == signal.SIGKILL and oom_before is not None and oom_after is not None and oom_after > oom_before:
            frame["status"] = "oom"
            frame["error"] = {
                "type": "MemoryError",
                "message": "killed by the out-of-memory killer (memory limit %s); "
                "session restarted, state reset" % self.opts.get("memory_label", "?"),
                "traceback": "",
            }
        else:
            frame["status"] = "crashed"
            if sig is not None:
                try:
                    signame = signal.Signals(sig).name
                except ValueError:
                    signame = str(sig)
                message = "worker killed by signal %s" % signame
            else:
                message = "worker exited with code %s" % code
            frame["error"] = {
                "type": "WorkerCrashed",
                "message": message + "; session restarted, state reset",
                "traceback": err_cap.text()[-4000:],
            }
        return frame


# --------------------------------------------------------------------------
# worker
# --------------------------------------------------------------------------


def _local_isolation(opts):
    """Best-effort limits for the local backend (NOT a security boundary)."""
    import resource

    def setlim(which, value):
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass

    mem = int(opts.get("memory_bytes") or 0)
    if mem:
        setlim(resource.RLIMIT_AS, mem)
    setlim(resource.RLIMIT_CORE, 0)
    fsize = int(opts.get("max_file_bytes") or 0)
    if fsize:
        setlim(resource.RLIMIT_FSIZE, fsize)
    setlim(resource.RLIMIT_NOFILE, 1024)
    pids = int(opts.get("pids_limit") or 0)
    if pids and os.getuid() != 0:
        setlim(resource.RLIMIT_NPROC, pids)
    if opts.get("no_network", True):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000
            if libc.unshare(CLONE_NEWNET) != 0:
                libc.unshare(CLONE_NEWUSER | CLONE_NEWNET)
        except Exception:
            pass


class Worker:
    def __init__(self, opts):
        self.opts = opts
        self.cell = 0
        self.main_pid = os.getpid()
        self.base_tasks = 0

    def send(self, obj):
        # the leading newline ends any partial line the code may have left in the pipe
        data = ("\n" + json.dumps(obj, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            n = os.write(RES_FD, view)
            view = view[n:]

    @staticmethod
    def stop():
        """End of a call: stop (every thread of) this process.  The supervisor
        learns of it from the kernel, reads the result, and sends SIGCONT with
        the next request."""
        os.kill(os.getpid(), signal.SIGSTOP)

    def setup(self):
        opts = self.opts
        if opts.get("mode") == "local":
            _local_isolation(opts)
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
        except OSError:
            pass
        sys.stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=False
        )
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
        )
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        workdir = opts.get("workdir")
        if workdir:
            os.makedirs(workdir, exist_ok=True)
            os.chdir(workdir)
        import builtins

        self.ns = {"__name__": "__main__", "__builtins__": builtins}
        load_error = None
        self._warm_thread_pools()
        os.environ["MPLBACKEND"] = "Agg"  # the code's own `import matplotlib.pyplot` draws off screen too
        for stmt in ("import numpy as np", "import pandas as pd"):
            try:
                exec(stmt, self.ns)
            except Exception as e:  # a missing library is not fatal
                print("cooplab sandbox: %s failed: %r" % (stmt, e), file=sys.stderr)
        self.ns["plt"] = _lazy_pyplot(self.ns)
        for mod in opts.get("preload", []):
            try:
                __import__(mod)
            except Exception:
                pass
        dataset = opts.get("dataset")
        if dataset:
            try:
                pd = self.ns["pd"]
                low = dataset.lower()
                if low.endswith((".parquet", ".pq")):
                    self.ns["df"] = pd.read_parquet(dataset)
                elif low.endswith((".tsv", ".tab")):
                    self.ns["df"] = pd.read_csv(dataset, sep="\t")
                else:
                    self.ns["df"] = pd.read_csv(dataset)
            except Exception as e:
                load_error = "%s: %s" % (type(e).__name__, e)
        sys.stdout.flush()
        sys.stderr.flush()
        info = {"type": "ready", "ok": load_error is None, "python": sys.version.split()[0], "pid": os.getpid()}
        if load_error:
            info["error"] = "dataset failed to load: " + load_error
        if "df" in self.ns:
            try:
                info["df_shape"] = list(self.ns["df"].shape)
            except Exception:
                pass
        self.base_tasks = self._task_count()
        self.send(info)
        self.stop()

    @staticmethod
    def _task_count():
        try:
            return len(os.listdir("/proc/self/task"))
        except OSError:
            return 0

    def _let_threads_exit(self):
        """A thread the code joined may still be exiting in the kernel for a
        moment after ``join()`` returned; wait for that (at most 0.2 s) so that
        the supervisor does not take it for a thread left running.  Only an
        optimisation against needless restarts: the supervisor decides."""
        threading = sys.modules.get("threading")
        if self._task_count() <= self.base_tasks:
            return
        if threading is not None and threading.active_count() > 1:
            return  # Python threads still running: nothing to wait for
        deadline = time.monotonic() + 0.2
        while self._task_count() > self.base_tasks and time.monotonic() < deadline:
            time.sleep(0.001)

    @staticmethod
    def _warm_thread_pools():
        """Start the thread pools that libraries otherwise start on first use,
        so that they are in the supervisor's thread baseline and the call that
        first uses them is not taken for one that left threads running.
        pyarrow (parquet, pandas' pyarrow engines): one CPU and one I/O thread
        (the sandbox has about one CPU), started by a tiny CSV read, and the
        system allocator instead of jemalloc, whose background threads start
        per arena, at unpredictable times."""
        import importlib.util

        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
        try:
            if importlib.util.find_spec("pyarrow") is None:
                return
            import pyarrow
            import pyarrow.csv

            pyarrow.set_cpu_count(1)
            pyarrow.set_io_thread_count(1)
            pyarrow.csv.read_csv(pyarrow.BufferReader(b"a,b\n1,2\n"))
        except Exception:
            pass

    def read_request(self, buf):
        while True:
            nl = buf.find(b"\n")
            if nl >= 0:
                line = bytes(buf[:nl])
                del buf[: nl + 1]
                return json.loads(line)
            chunk = os.read(REQ_FD, 1 << 20)
            if not chunk:
                os._exit(0)
            buf += chunk

    def loop(self):
        buf = bytearray()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        while True:
            # While idle (between calls) a stray SIGINT must not kill us.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            req = self.read_request(buf)
            out = self.run_cell(req.get("code", ""))
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if os.getpid() != self.main_pid:  # a fork of the user's code
                os._exit(0)
            self._let_threads_exit()
            out["type"] = "result"
            out["id"] = req.get("id")
            self.send(out)
            self.stop()

    def _format_error(self, exc):
        import traceback

        tb = exc.__traceback__
        # hide the runner's own frame
        while tb is not None and tb.tb_frame.f_code.co_filename != self._filename:
            tb = tb.tb_next
        # the innermost frames matter most; a bounded walk keeps deep recursion cheap
        lines = traceback.format_exception(type(exc), exc, tb, limit=-50)
        text, _ = _cap_text("".join(lines), MAX_TRACEBACK)
        msg, _ = _cap_text(str(exc), MAX_ERROR_MESSAGE)
        return {"type": type(exc).__name__[:MAX_ERROR_TYPE], "message": msg, "traceback": text}

    def reap_zombies(self):
        """Collect our children that are already dead (killed background
        processes) so that they do not pile up against the pids limit."""
        me = os.getpid()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    data = f.read()
                fields = data[data.rfind(b")") + 2 :].split()
                if fields[0] == b"Z" and int(fields[1]) == me:
                    os.waitpid(int(name), os.WNOHANG)
            except (OSError, ValueError, IndexError):
                pass

    def run_cell(self, code):
        import ast
        import linecache

        self.reap_zombies()
        self.cell += 1
        self._filename = "<cell-%d>" % self.cell
        linecache.cache[self._filename] = (len(code), None, code.splitlines(True), self._filename)
        out = {"result": None, "error": None, "figures": [], "figures_dropped": 0, "result_truncated": False}
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            try:
                tree = ast.parse(code, self._filename, "exec")
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                exec(compile(tree, self._filename, "exec"), self.ns)
                if last is not None:
                    value = eval(compile(last, self._filename, "eval"), self.ns)
                    if value is not None:
                        self.ns["_"] = value
                        text = repr(value)
                        out["result"], out["result_truncated"] = _cap_text(
                            text, int(self.opts.get("max_result_chars", 20000))
                        )
            except SystemExit:
                if os.getpid() != self.main_pid:
                    os._exit(0)
                raise
            except BaseException as exc:  # includes KeyboardInterrupt
                if os.getpid() != self.main_pid:
                    os._exit(0)
                out["error"] = self._format_error(exc)
            try:
                self._collect_figures(out)
            except BaseException as exc:
                if out["error"] is None:
                    out["error"] = self._format_error(exc)
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:
                pass
        return out

    def _collect_figures(self, out):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        nums = plt.get_fignums()
        if not nums:
            return
        max_n = int(self.opts.get("max_figures", 5))
        max_b = int(self.opts.get("max_figure_bytes", 2000000))
        dpi = int(self.opts.get("figure_dpi", 100))
        for num in nums:
            if len(out["figures"]) >= max_n:
                out["figures_dropped"] += 1
                continue
            buf = io.BytesIO()
            try:
                plt.figure(num).savefig(buf, format="png", dpi=dpi)
            except Exception:
                out["figures_dropped"] += 1
                continue
            data = buf.getvalue()
            if len(data) > max_b:
                out["figures_dropped"] += 1
                continue
            out["figures"].append(base64.b64encode(data).decode("ascii"))
        plt.close("all")


def main(argv):
    role = argv[2] if len(argv) > 2 else "supervise"
    opts = json.loads(argv[3]) if len(argv) > 3 else {}
    if role == "worker":
        w = Worker(opts)
        w.setup()
        w.loop()
    else:
        Supervisor(opts).run()


if __name__ == "__main__":
    main(sys.argv)
