"""In-sandbox runner for cooplab's ``run_code`` tool.

This file is executed *inside* the sandbox (a container, or a local
subprocess).  It must only use the standard library at the top level: the
same text runs two processes:

``supervise``
    A small, long-lived process (PID 1 in a container).  It talks to the host
    over stdin/stdout with a line protocol, starts the *worker*, enforces the
    timeout (SIGINT first, then SIGKILL), caps the worker's output, and decides
    the status of every call.  It never imports pandas, so the OOM killer picks
    the worker, not the supervisor.

``worker``
    Holds the user's variables.  It reads requests on fd 3 and writes results
    on fd 4; its stdout/stderr are pipes read by the supervisor.  It never
    sees the host channel nor the session nonce.

Host -> supervisor: one JSON object per line on stdin.  The first line is
``{"op": "hello", "nonce": ...}``.  Supervisor -> host: every frame is one
line ``<nonce> <json>``; the host ignores any line without the nonce.

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
import sys
import time

PROTOCOL_VERSION = 1
REQ_FD = 3
RES_FD = 4
MAX_WORKER_MESSAGE = 64 * 1024 * 1024


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


def _cap_text(text, limit):
    """Keep head and tail of ``text`` when longer than ``limit`` chars."""
    if text is None or len(text) <= limit:
        return text, False
    half = max(limit // 2, 1)
    skipped = len(text) - 2 * half
    return text[:half] + "\n... [%d characters truncated] ...\n" % skipped + text[-half:], True


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
        tail = bytes(self.tail[-self.tail_cap:]) if self.tail_cap else b""
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


class Supervisor:
    def __init__(self, opts):
        self.opts = opts
        self.mode = opts.get("mode", "container")
        self.nonce = None
        self.worker_pid = None
        self.worker_status = None  # raw wait status once reaped
        self.req_w = self.res_r = self.out_r = self.err_r = None
        self.res_buf = bytearray()
        self.stdin_buf = bytearray()
        self.ready_msg = None
        self.boot_capture = Capture(16384)

    # -- host channel -----------------------------------------------------
    def emit(self, frame):
        line = (self.nonce or "") + " " + json.dumps(frame, separators=(",", ":")) + "\n"
        data = line.encode("ascii")
        view = memoryview(data)
        while view:
            n = os.write(1, view)
            view = view[n:]

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
                    return json.loads(line)
                except ValueError:
                    continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                r, _, _ = select.select([0], [], [], min(remaining, 5.0))
            except InterruptedError:
                continue
            self.reap()
            if r:
                chunk = os.read(0, 1 << 20)
                if not chunk:
                    return "EOF"
                self.stdin_buf += chunk

    # -- worker management -------------------------------------------------
    def spawn_worker(self):
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        devnull = os.open(os.devnull, os.O_RDONLY)
        src = sys.argv[1]
        argv = [sys.executable, "-I", "-c", "import sys;exec(sys.argv[1])", src, "worker",
                json.dumps(self.opts)]
        env = dict(os.environ)
        actions = [
            (os.POSIX_SPAWN_DUP2, devnull, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
            (os.POSIX_SPAWN_DUP2, req_r, REQ_FD),
            (os.POSIX_SPAWN_DUP2, res_w, RES_FD),
        ]
        kwargs = {"file_actions": actions}
        if self.mode == "local":
            kwargs["setsid"] = True
        self.worker_pid = os.posix_spawn(sys.executable, argv, env, **kwargs)
        self.worker_status = None
        for fd in (req_r, res_w, out_w, err_w, devnull):
            os.close(fd)
        for fd in (res_r, out_r, err_r):
            os.set_blocking(fd, False)
        self.req_w, self.res_r, self.out_r, self.err_r = req_w, res_r, out_r, err_r
        self.res_buf = bytearray()

    def close_worker_fds(self):
        for fd in (self.req_w, self.res_r, self.out_r, self.err_r):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.req_w = self.res_r = self.out_r = self.err_r = None

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if pid == 0:
                return
            if pid == self.worker_pid:
                self.worker_status = status

    def worker_alive(self):
        self.reap()
        return self.worker_pid is not None and self.worker_status is None

    def _pids(self):
        out = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                out.append(int(name))
        return out

    def _stat(self, pid):
        """(state, session id) of ``pid`` or None."""
        try:
            with open("/proc/%d/stat" % pid, "rb") as f:
                data = f.read()
            fields = data[data.rfind(b")") + 2:].split()
            return fields[0], int(fields[3])
        except (OSError, ValueError, IndexError):
            return None

    def kill_strays(self, include_worker=False):
        """Kill every process of the sandbox except the supervisor (and the
        worker unless ``include_worker``).  Repeats until none is left."""
        me = os.getpid()
        keep = {me}
        if not include_worker and self.worker_pid:
            keep.add(self.worker_pid)
        for _ in range(200):
            found = False
            victims = []
            for p in self._pids():
                if p in keep or (self.mode == "container" and p == 1):
                    continue
                st = self._stat(p)
                if st is None or st[0] in (b"Z", b"X"):
                    continue  # gone, or a zombie waiting for its parent
                if self.mode == "container" or st[1] == self.worker_pid:
                    victims.append(p)
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                    found = True
                except (ProcessLookupError, PermissionError):
                    pass
            self.reap()
            if not found:
                # wait a little for zombies to be reaped, then re-check once
                return
            time.sleep(0.005)

    def kill_worker(self):
        if self.worker_pid and self.worker_status is None:
            try:
                os.kill(self.worker_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.kill_strays(include_worker=True)
        deadline = time.monotonic() + 5
        while self.worker_status is None and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.01)

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

    # -- pumping -----------------------------------------------------------
    def pump(self, deadline, out_cap, err_cap):
        """Move data from the worker pipes until a full worker message is
        available, the worker died, or ``deadline``.  Returns the message
        dict, "DEAD", or None (deadline)."""
        while True:
            msg = self._pop_message()
            if msg is not None:
                return msg
            fds = [fd for fd in (self.res_r, self.out_r, self.err_r) if fd is not None]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                r, _, _ = select.select(fds, [], [], min(remaining, 0.05))
            except InterruptedError:
                r = []
            eof = False
            for fd in r:
                if self._read_fd(fd, out_cap, err_cap) == 0 and fd in (self.res_r, self.out_r, self.err_r):
                    eof = True
                    self._close_eof(fd)
            if (eof or not r) and not self.worker_alive():
                self.drain(out_cap, err_cap)
                msg = self._pop_message()
                return msg if msg is not None else "DEAD"

    def _close_eof(self, fd):
        """``fd`` reached end-of-file: stop polling it."""
        try:
            os.close(fd)
        except OSError:
            pass
        if fd == self.res_r:
            self.res_r = None
        elif fd == self.out_r:
            self.out_r = None
        elif fd == self.err_r:
            self.err_r = None

    def _read_fd(self, fd, out_cap, err_cap):
        try:
            data = os.read(fd, 1 << 20)
        except (BlockingIOError, InterruptedError):
            return -1
        except OSError:
            data = b""
        if not data:
            return 0
        if fd == self.res_r:
            self.res_buf += data
            if len(self.res_buf) > MAX_WORKER_MESSAGE:
                self.res_buf = bytearray()
                self.kill_worker()
        elif fd == self.out_r:
            out_cap.feed(data)
        else:
            err_cap.feed(data)
        return len(data)

    def drain(self, out_cap, err_cap):
        for fd in (self.out_r, self.err_r, self.res_r):
            if fd is None:
                continue
            for _ in range(4096):
                n = self._read_fd(fd, out_cap, err_cap)
                if n == 0:
                    self._close_eof(fd)
                if n <= 0:
                    break

    def _pop_message(self):
        while True:
            nl = self.res_buf.find(b"\n")
            if nl < 0:
                return None
            line = bytes(self.res_buf[:nl])
            del self.res_buf[: nl + 1]
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict):
                return msg

    def send_worker(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        view = memoryview(data)
        try:
            while view:
                n = os.write(self.req_w, view)
                view = view[n:]
            return True
        except OSError:
            return False

    # -- main loop -----------------------------------------------------------
    def wait_ready(self, timeout):
        if self.ready_msg is not None:
            return self.ready_msg
        deadline = time.monotonic() + timeout
        while True:
            msg = self.pump(deadline, self.boot_capture, self.boot_capture)
            if msg is None:
                return {"type": "ready", "ok": False, "error": "worker did not start in time",
                        "log": self.boot_capture.text()}
            if msg == "DEAD":
                return {"type": "ready", "ok": False, "error": "worker died during start-up",
                        "log": self.boot_capture.text()}
            if msg.get("type") == "ready":
                msg["log"] = self.boot_capture.text()
                self.ready_msg = msg
                return msg

    def run(self):
        _set_nondumpable()
        if self.mode == "container":
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self._prepare_tmp()
        self.spawn_worker()
        hello = self.read_request(float(self.opts.get("hello_timeout", 600)))
        if not isinstance(hello, dict) or hello.get("op") != "hello":
            self.shutdown()
            return
        self.nonce = str(hello.get("nonce"))
        ready = self.wait_ready(float(self.opts.get("start_timeout", 120)))
        ready.setdefault("ok", True)
        ready["protocol"] = PROTOCOL_VERSION
        self.emit(ready)
        if not ready.get("ok"):
            self.shutdown()
            return
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

    def do_exec(self, req):
        call_id = req.get("id")
        timeout = float(req.get("timeout") or self.opts.get("timeout", 30))
        grace = float(self.opts.get("interrupt_grace", 2.0))
        limit = int(self.opts.get("max_output_bytes", 65536))
        out_cap, err_cap = Capture(limit), Capture(limit)
        start = time.monotonic()
        oom_before = self.oom_kills()
        if not self.worker_alive():
            return {"type": "result", "id": call_id, "status": "crashed", "worker_dead": True,
                    "error": {"type": "WorkerDead", "message": "the worker is not running", "traceback": ""},
                    "stdout": "", "stderr": "", "duration": 0.0}
        # drop anything the worker printed between calls (background threads)
        self.drain(Capture(0), Capture(0))
        self.res_buf = bytearray()
        self.send_worker({"id": call_id, "code": req.get("code", "")})
        deadline = start + timeout
        interrupted = killed = False
        msg = None
        while True:
            got = self.pump(deadline, out_cap, err_cap)
            if isinstance(got, dict):
                if got.get("type") == "result" and got.get("id") == call_id:
                    msg = got
                    break
                continue
            if got == "DEAD":
                break
            # deadline passed
            if not interrupted:
                interrupted = True
                try:
                    os.kill(self.worker_pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
                deadline = time.monotonic() + grace
                continue
            killed = True
            self.kill_worker()
            break
        if msg is not None:
            # let output written just before the result arrive
            self.drain(out_cap, err_cap)
        self.kill_strays(include_worker=False)
        self.drain(out_cap, err_cap)
        duration = time.monotonic() - start
        frame = {"type": "result", "id": call_id, "duration": round(duration, 4),
                 "stdout": out_cap.text(), "stderr": err_cap.text(),
                 "stdout_truncated": out_cap.truncated, "stderr_truncated": err_cap.truncated,
                 "stdout_bytes": out_cap.total, "stderr_bytes": err_cap.total,
                 "interrupted": interrupted, "worker_dead": False}
        if msg is not None:
            err = msg.get("error")
            frame.update({k: msg.get(k) for k in ("result", "result_truncated", "figures",
                                                   "figures_dropped", "error")})
            if interrupted and err and err.get("type") == "KeyboardInterrupt":
                frame["status"] = "timeout"
                frame["error"] = {"type": "TimeoutError",
                                  "message": "execution interrupted after %.1f s timeout (state kept)" % timeout,
                                  "traceback": err.get("traceback", "")}
            elif err and err.get("type") == "MemoryError":
                frame["status"] = "oom"
            elif err:
                frame["status"] = "error"
            else:
                frame["status"] = "ok"
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
            frame["error"] = {"type": "TimeoutError",
                              "message": "execution did not stop after SIGINT; killed after %.1f s "
                                         "(session restarted, state reset)" % timeout,
                              "traceback": ""}
        elif sig == signal.SIGKILL and oom_before is not None and oom_after is not None and oom_after > oom_before:
            frame["status"] = "oom"
            frame["error"] = {"type": "MemoryError",
                              "message": "killed by the out-of-memory killer (memory limit %s); "
                                         "session restarted, state reset" % self.opts.get("memory_label", "?"),
                              "traceback": ""}
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
            frame["error"] = {"type": "WorkerCrashed", "message": message + "; session restarted, state reset",
                              "traceback": err_cap.text()[-4000:]}
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

    def send(self, obj):
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            n = os.write(RES_FD, view)
            view = view[n:]

    def setup(self):
        opts = self.opts
        if opts.get("mode") == "local":
            _local_isolation(opts)
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
        except OSError:
            pass
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", write_through=False)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        workdir = opts.get("workdir")
        if workdir:
            os.makedirs(workdir, exist_ok=True)
            os.chdir(workdir)
        import builtins
        self.ns = {"__name__": "__main__", "__builtins__": builtins}
        load_error = None
        for stmt in ("import numpy as np", "import pandas as pd",
                     "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt"):
            try:
                exec(stmt, self.ns)
            except Exception as e:  # a missing library is not fatal
                print("cooplab sandbox: %s failed: %r" % (stmt, e), file=sys.stderr)
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
        info = {"type": "ready", "ok": load_error is None, "python": sys.version.split()[0],
                "pid": os.getpid()}
        if load_error:
            info["error"] = "dataset failed to load: " + load_error
        if "df" in self.ns:
            try:
                info["df_shape"] = list(self.ns["df"].shape)
            except Exception:
                pass
        self.send(info)

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
            out["type"] = "result"
            out["id"] = req.get("id")
            self.send(out)

    def _format_error(self, exc):
        import traceback
        tb = exc.__traceback__
        # hide the runner's own frame
        while tb is not None and tb.tb_frame.f_code.co_filename != self._filename:
            tb = tb.tb_next
        # the innermost frames matter most; a bounded walk keeps deep recursion cheap
        lines = traceback.format_exception(type(exc), exc, tb, limit=-50)
        text, _ = _cap_text("".join(lines), 8000)
        msg, _ = _cap_text(str(exc), 2000)
        return {"type": type(exc).__name__, "message": msg, "traceback": text}

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
                fields = data[data.rfind(b")") + 2:].split()
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
                            text, int(self.opts.get("max_result_chars", 20000)))
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
