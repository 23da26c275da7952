"""Docker backend: locked-down containers, orphan sweeping, exit cleanup."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any, Optional

from .models import LABEL, SandboxConfig, SandboxError, SandboxUnavailable, parse_bytes
from .transport import BOOT, DockerTransport, runner_options, runner_source

_client: Any = None
_client_lock = threading.Lock()
_swept = False
_live: "weakref.WeakSet[DockerTransport]" = weakref.WeakSet()
_live_lock = threading.Lock()

CONTAINER_DATA_DIR = "/data"
STAGING_PREFIX = "cooplab-sandbox-data-"
STAGING_OWNER = "owner.json"
_staging_lock = threading.Lock()
_staging_root: Optional[Path] = None
_staged: dict[tuple, Path] = {}
CONTAINER_WORKDIR = "/tmp/work"
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "MPLBACKEND": "Agg",
    "MPLCONFIGDIR": "/tmp/.config/matplotlib",
    "XDG_CACHE_HOME": "/tmp/.cache",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}


def _proc_start_time(pid: int) -> Optional[str]:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rfind(b")") + 2 :].split()[19].decode()
    except (OSError, IndexError):
        return None


OWNER = {
    f"{LABEL}": "1",
    f"{LABEL}.host": socket.gethostname(),
    f"{LABEL}.pid": str(os.getpid()),
    f"{LABEL}.pid_start": _proc_start_time(os.getpid()) or "",
}


def get_client(timeout: int = 60) -> Any:
    """A docker SDK client, or SandboxUnavailable if no daemon answers."""
    global _client
    with _client_lock:
        if _client is not None:
            return _client
        try:
            import docker  # type: ignore
        except ImportError as e:  # pragma: no cover - declared dependency
            raise SandboxUnavailable("the 'docker' Python package is not installed") from e
        try:
            client = docker.from_env(timeout=timeout)
            client.ping()
        except Exception as e:
            raise SandboxUnavailable(f"no Docker daemon answers ({type(e).__name__}: {e})") from e
        _client = client
        return client


def daemon_available() -> bool:
    try:
        get_client()
        return True
    except SandboxUnavailable:
        return False


def image_id(image: str) -> str | None:
    """The id (sha256:...) of a local image, or None if it is missing or no daemon answers."""
    try:
        return get_client().images.get(image).id
    except Exception:
        return None


def image_available(image: str) -> bool:
    try:
        get_client().images.get(image)
        return True
    except SandboxUnavailable:
        return False
    except Exception:
        return False


def _owner_alive(labels: dict) -> bool:
    if labels.get(f"{LABEL}.host") != socket.gethostname():
        return True  # not ours to judge
    try:
        pid = int(labels.get(f"{LABEL}.pid", "0"))
    except ValueError:
        return False
    if pid <= 0:
        return False
    start = _proc_start_time(pid)
    if start is None:
        return False
    want = labels.get(f"{LABEL}.pid_start")
    return not want or want == start


def sweep_orphans(force: bool = False) -> list[str]:
    """Remove labelled containers whose owner process is gone.  Runs once per
    process unless ``force``; returns the removed container ids."""
    global _swept
    if _swept and not force:
        return []
    _swept = True
    client = get_client()
    removed = []
    for c in client.api.containers(all=True, filters={"label": LABEL}):
        labels = c.get("Labels") or {}
        # a live owner's container is never ours to remove, whatever its state: another process
        # (a sweep's cell on a Ray worker) may have created it and not started it yet
        if _owner_alive(labels):
            continue
        try:
            client.api.remove_container(c["Id"], force=True)
            removed.append(c["Id"])
        except Exception:
            pass
    return removed


def _cleanup_at_exit() -> None:
    with _live_lock:
        items = list(_live)
    for t in items:
        try:
            t.kill()
        except Exception:
            pass
    if _staging_root is not None:
        shutil.rmtree(_staging_root, ignore_errors=True)


# -- dataset staging --------------------------------------------------------
# A bind mount shows its source path in the container's /proc/self/mountinfo.
# The dataset is therefore mounted from a private directory under the temp
# directory, whose path says nothing about where the user keeps the file.


def sweep_staging(parent: Optional[Path] = None) -> list[Path]:
    """Remove staging directories (under ``parent``, default the temp
    directory) whose owner process is gone; returns them."""
    parent = Path(parent or tempfile.gettempdir())
    removed = []
    for d in parent.glob(STAGING_PREFIX + "*"):
        try:
            if not d.is_dir() or d.is_symlink() or d.stat().st_uid != os.getuid():
                continue
            owner = json.loads((d / STAGING_OWNER).read_text())
        except (OSError, ValueError):
            continue  # not ours, or being created right now
        if isinstance(owner, dict) and not _owner_alive(owner):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _staging_dir() -> Path:
    """This process's staging directory (mode 0700: only the Docker daemon,
    which runs as root or as this user, needs to reach it)."""
    global _staging_root
    if _staging_root is None or not _staging_root.is_dir():
        sweep_staging()
        root = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX))
        (root / STAGING_OWNER).write_text(json.dumps(OWNER))
        _staging_root = root
    return _staging_root


def staged_dataset(dataset: Path) -> Path:
    """The file the sandbox mounts for ``dataset``: a hard link to it (or a
    copy, across file systems) in the staging directory, made once per
    version of the file and shared by this process's sandboxes."""
    try:
        st = os.stat(dataset)
    except OSError as e:
        raise SandboxError(f"cannot read the dataset {dataset} ({e.strerror or e})") from e
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _staging_lock:
        staged = _staged.get(key)
        if staged is not None and staged.exists():
            return staged
        try:
            entry = Path(tempfile.mkdtemp(dir=_staging_dir()))
            staged = entry / dataset.name
            try:
                os.link(dataset, staged)
            except OSError:
                try:
                    shutil.copy2(dataset, staged)
                except OSError:
                    shutil.rmtree(entry, ignore_errors=True)
                    raise
        except OSError as e:
            raise SandboxError(
                f"cannot stage the dataset for the sandbox in {tempfile.gettempdir()} "
                f"({e.strerror or e}); free space there or set TMPDIR"
            ) from e
        _staged[key] = staged
        return staged


atexit.register(_cleanup_at_exit)


def _forget(t: DockerTransport) -> None:
    with _live_lock:
        _live.discard(t)


def container_spec(config: SandboxConfig) -> tuple[dict, dict]:
    """(create_container kwargs, host_config kwargs) making the sandbox: all
    the limits are here."""
    from docker.types import Ulimit  # type: ignore

    mem = parse_bytes(config.memory)
    env = dict(BASE_ENV)
    for name in config.env_allowlist:
        if name in os.environ:
            env[name] = os.environ[name]
    env.update(config.extra_env)
    binds = {}
    dataset = None
    if config.dataset is not None:
        dataset = f"{CONTAINER_DATA_DIR}/{config.dataset.name}"
        binds[str(staged_dataset(config.dataset))] = {"bind": dataset, "mode": "ro"}
    opts = runner_options(config, mode="container", dataset=dataset, workdir=CONTAINER_WORKDIR)
    tmpfs_bytes = parse_bytes(config.tmpfs_size)
    create = dict(
        image=config.image,
        command=["python3", "-I", "-c", BOOT, runner_source(), "supervise", json.dumps(opts)],
        stdin_open=True,
        tty=False,
        detach=True,
        user=config.user,
        environment=env,
        labels=dict(OWNER),
        working_dir="/tmp",
        network_disabled=config.network == "none",
    )
    host = dict(
        network_mode=config.network,
        mem_limit=mem,
        memswap_limit=mem,  # no swap
        nano_cpus=int(config.cpus * 1e9),
        pids_limit=config.pids_limit,
        read_only=True,
        tmpfs={"/tmp": f"rw,nosuid,nodev,size={tmpfs_bytes},mode=1777"},
        shm_size=config.shm_size,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        ipc_mode="private",
        binds=binds,
        ulimits=[
            Ulimit(name="core", soft=0, hard=0),
            Ulimit(name="nofile", soft=1024, hard=1024),
            Ulimit(name="stack", soft=8 << 20, hard=8 << 20),
        ],
        log_config={"type": "none", "config": {}},
        auto_remove=True,
        init=False,
        privileged=False,
    )
    return create, host


def start_container(config: SandboxConfig) -> DockerTransport:
    """Create, start and hand-shake one sandbox container (cold start)."""
    client = get_client()
    sweep_orphans()
    if not image_available(config.image):
        raise SandboxUnavailable(
            f"sandbox image {config.image!r} is missing; build it with `cooplab sandbox build` "
            "(images are never pulled implicitly)"
        )
    create, host = container_spec(config)
    api = client.api
    cfg = api.create_container_config(host_config=api.create_host_config(**host), **create)
    cfg["StdinOnce"] = True  # stdin closes when the host disconnects -> the runner exits
    cid = api.create_container_from_config(cfg)["Id"]
    try:
        sock = api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        api.start(cid)
    except Exception:
        try:
            api.remove_container(cid, force=True)
        except Exception:
            pass
        raise
    try:
        transport = DockerTransport(client, cid, sock, start_timeout=config.start_timeout, on_close=_forget)
    except Exception:
        try:
            api.remove_container(cid, force=True)
        except Exception:
            pass
        raise
    with _live_lock:
        _live.add(transport)
    return transport


def list_sandbox_containers() -> list[dict]:
    return get_client().api.containers(all=True, filters={"label": LABEL})
