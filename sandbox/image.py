"""Building the sandbox image offline (debootstrap + ``docker import``) and
diagnosing the Docker set-up.  Images are never pulled."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Callable, Optional

from .models import DEFAULT_IMAGE, SandboxError

DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SUITE = "bookworm"
PACKAGES = [
    "python3",
    "python3-pandas",
    "python3-numpy",
    "python3-scipy",
    "python3-sklearn",
    "python3-matplotlib",
    "python3-seaborn",
    "fonts-dejavu-core",
]
# Debian bookworm has no pyarrow package: read_parquet needs it, so the build
# unpacks a manylinux wheel from PyPI (built against numpy 1.x, matching bookworm).
PYARROW_REQ = "pyarrow==15.0.2"
SANDBOX_UID = 10001
VERSION_FILE = "etc/cooplab-sandbox-version"
IMAGE_VERSION = "1"

Log = Callable[[str], None]


def _default_log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _run(cmd: list[str], log: Log, **kw) -> None:
    log("+ " + " ".join(cmd[:8]) + (" ..." if len(cmd) > 8 else ""))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if proc.returncode != 0:
        raise SandboxError(f"command failed ({proc.returncode}): {' '.join(cmd[:6])}\n{proc.stdout[-3000:]}")


def _customize_rootfs(root: Path, log: Log, with_pyarrow: bool) -> None:
    # non-root user the runner uses
    with open(root / "etc/passwd", "a") as f:
        f.write(f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:cooplab sandbox:/tmp:/usr/sbin/nologin\n")
    with open(root / "etc/group", "a") as f:
        f.write(f"sandbox:x:{SANDBOX_UID}:\n")
    (root / "data").mkdir(exist_ok=True)
    if with_pyarrow:
        dl = Path(tempfile.mkdtemp(prefix="cooplab-wheel-"))
        try:
            _run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--python-version",
                    "3.11",
                    "--platform",
                    "manylinux2014_x86_64",
                    "-d",
                    str(dl),
                    PYARROW_REQ,
                ],
                log,
            )
            target = root / "usr/local/lib/python3.11/dist-packages"
            target.mkdir(parents=True, exist_ok=True)
            for whl in dl.glob("*.whl"):
                with zipfile.ZipFile(whl) as z:
                    z.extractall(target)
        except SandboxError as e:
            log(f"warning: pyarrow not added (parquet datasets will not load): {e}")
        finally:
            shutil.rmtree(dl, ignore_errors=True)
    # warm matplotlib's font cache and byte-compile what we added (rootfs is read-only at run time)
    mpl = root / "opt/cooplab/mplconfig"
    mpl.mkdir(parents=True, exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "MPLCONFIGDIR": "/opt/cooplab/mplconfig", "HOME": "/root", "LANG": "C.UTF-8"}
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    _run(
        [
            chroot,
            str(root),
            "python3",
            "-c",
            "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt; "
            "plt.plot([1]); plt.savefig('/dev/null', format='png'); import pandas, scipy, sklearn, seaborn",
        ],
        log,
        env=env,
    )
    _run(
        [chroot, str(root), "python3", "-m", "compileall", "-q", "/usr/local/lib/python3.11/dist-packages"],
        log,
        env=env,
    )
    for p in (mpl, *mpl.rglob("*")):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    # slim down
    for pattern in (
        "var/cache/apt/archives/*.deb",
        "var/lib/apt/lists/*",
        "usr/share/doc/*",
        "usr/share/man/*",
        "usr/share/locale/*",
        "var/log/*",
    ):
        for p in glob.glob(str(root / pattern)):
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                try:
                    os.unlink(p)
                except OSError:
                    pass
    (root / VERSION_FILE).write_text(IMAGE_VERSION + "\n")


def build_image(
    image: str = DEFAULT_IMAGE,
    *,
    mirror: Optional[str] = None,
    suite: str = DEFAULT_SUITE,
    with_pyarrow: bool = True,
    keep_rootfs: bool = False,
    log: Log = _default_log,
) -> str:
    """debootstrap a Debian rootfs with the scientific Python stack and
    ``docker import`` it as ``image``.  Needs root, debootstrap, a Debian
    mirror and a running Docker daemon.  Returns the image id."""
    from . import docker_backend

    if os.geteuid() != 0:
        raise SandboxError("building the sandbox image needs root (debootstrap, chroot)")
    if shutil.which("debootstrap") is None:
        raise SandboxError("debootstrap is not installed: apt-get install -y debootstrap")
    client = docker_backend.get_client(timeout=600)
    mirror = mirror or os.environ.get("COOPLAB_DEBIAN_MIRROR") or DEFAULT_MIRROR
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="cooplab-rootfs-", dir=os.environ.get("COOPLAB_BUILD_DIR", "/var/tmp")))
    root = work / "rootfs"
    try:
        log(f"debootstrap {suite} from {mirror} into {root} (about 2 minutes)")
        _run(["debootstrap", "--variant=minbase", "--include=" + ",".join(PACKAGES), suite, str(root), mirror], log)
        _customize_rootfs(root, log, with_pyarrow)
        log(f"importing rootfs into Docker as {image}")
        changes = [
            "ENV PATH=/usr/local/bin:/usr/bin:/bin",
            "ENV LANG=C.UTF-8",
            f"USER {SANDBOX_UID}:{SANDBOX_UID}",
            "WORKDIR /tmp",
            f"LABEL org.cooplab.sandbox.version={IMAGE_VERSION}",
            'CMD ["python3"]',
        ]
        docker_cli = shutil.which("docker")
        if docker_cli:
            cmd = [docker_cli, "import"]
            for c in changes:
                cmd += ["--change", c]
            cmd += ["-", image]
            tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
            imp = subprocess.run(cmd, stdin=tar.stdout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            assert tar.stdout is not None
            tar.stdout.close()
            if tar.wait() != 0 or imp.returncode != 0:
                raise SandboxError(f"docker import failed: {imp.stdout[-2000:]}")
        else:
            tarball = work / "rootfs.tar"
            _run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(tarball), "."], log)
            repo, _, tag = image.partition(":")
            client.api.import_image_from_file(str(tarball), repository=repo, tag=tag or "latest", changes=changes)
        img = client.images.get(image)
        log(f"built {image} ({img.short_id}) in {time.monotonic() - t0:.0f} s")
        return img.id
    finally:
        if not keep_rootfs:
            shutil.rmtree(work, ignore_errors=True)


def doctor(image: str = DEFAULT_IMAGE) -> tuple[bool, list[str]]:
    """Report on the Docker set-up: (docker backend usable, report lines)."""
    from . import docker_backend

    lines: list[str] = []
    ok = True
    try:
        import docker  # type: ignore  # noqa: F401

        lines.append(f"docker SDK: {docker.__version__}")
    except ImportError:
        lines.append("docker SDK: MISSING -> pip install 'docker>=7'")
        return False, lines
    try:
        client = docker_backend.get_client(timeout=10)
        v = client.version()
        lines.append(f"daemon: answers (Docker {v.get('Version')}, API {v.get('ApiVersion')})")
    except Exception as e:
        lines.append(f"daemon: NOT answering ({e})")
        lines.append(
            "  fix: sudo bash scripts/ensure-docker.sh   (installs docker.io, starts dockerd, builds the image)"
        )
        lines.append("  meanwhile the 'local' backend works (NOT a security boundary)")
        return False, lines
    try:
        img = client.images.get(image)
        size = img.attrs.get("Size", 0) / 1e6
        lines.append(f"image: {image} present ({img.short_id}, {size:.0f} MB)")
    except Exception:
        ok = False
        lines.append(f"image: {image} MISSING")
        opt = "" if image == DEFAULT_IMAGE else f" --image {image}"
        lines.append(
            f"  fix: sudo cooplab sandbox build{opt}   (debootstrap + docker import, ~2-3 min, "
            "no registry needed; or: sudo bash scripts/ensure-docker.sh)"
        )
        lines.append("   or, on a host that can pull: docker build -t " + image + " sandbox/")
    try:
        n = len(docker_backend.list_sandbox_containers())
        lines.append(f"sandbox containers currently present: {n}")
    except Exception:
        pass
    lines.append("docker backend: " + ("READY" if ok else "not ready"))
    return ok, lines
