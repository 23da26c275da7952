"""The notebook quickstart (examples/notebooks/quickstart.ipynb) executed in a real Jupyter kernel,
whose cells run inside the kernel's running event loop (issue 38, items 1 and 3): a scripted LLM
society, its tables, plots that stay inline, a run interrupted with the kernel's interrupt (as the
■ button does) and resumed, a sweep, a run reopened, and a table of many runs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
from pathlib import Path

import nbformat
import pytest
from jupyter_client.provisioning.local_provisioner import LocalProvisioner
from nbclient import NotebookClient
from nbformat import NotebookNode

from tests.helpers.progress import checkpoints

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "notebooks" / "quickstart.ipynb"


def text_of(cell) -> str:
    """Everything a cell printed or returned, as text."""
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append(o.get("text", ""))
        elif o.get("output_type") == "error":
            parts.append(f"{o.get('ename')}: {o.get('evalue')}")
        else:
            parts.append((o.get("data") or {}).get("text/plain", ""))
    return "\n".join(parts)


def cell_with(nb, needle: str) -> tuple[int, NotebookNode]:
    """The first code cell whose source holds ``needle``, whitespace aside (the formatter may wrap a call)."""
    bare = "".join(needle.split())
    return next((i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code" and bare in "".join(c.source.split()))


@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    """A kernel spec of this interpreter (whatever kernels the machine has), and a cache of the test's own."""
    spec = tmp_path / "jupyter" / "kernels" / "cooplab-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "cooplab test",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("COOPLAB_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel picks its own (inline) backend
    return "cooplab-test"


def test_the_quickstart_runs_in_a_kernel_and_resumes_an_interrupted_run(tmp_path, kernel_env):
    where = tmp_path / "examples"
    shutil.copytree(ROOT / "examples" / "scripted", where / "scripted")
    (where / "notebooks").mkdir()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name=kernel_env, resources={"metadata": {"path": str(where / "notebooks")}}
    )
    long_run = where / "notebooks" / "runs" / "long"
    interrupted = threading.Event()
    at, long_cell = cell_with(nb, 'out="runs/long"')
    assert "raises-exception" in long_cell.metadata.get("tags", [])  # so it also runs top to bottom uninterrupted

    def interrupt_when_checkpointed(pid: int) -> None:
        """The kernel's interrupt (SIGINT, as Jupyter sends it) once the run has written a few checkpoints."""
        while not interrupted.is_set():
            if checkpoints(long_run) >= 3:
                os.kill(pid, signal.SIGINT)
                interrupted.set()
                return
            threading.Event().wait(0.05)

    with client.setup_kernel():
        km = client.km
        assert km is not None and isinstance(km.provisioner, LocalProvisioner)  # setup_kernel started it here
        assert km.provisioner.process is not None
        pid = km.provisioner.process.pid
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            watcher = None
            if i == at:
                watcher = threading.Thread(target=interrupt_when_checkpointed, args=(pid,), daemon=True)
                watcher.start()
            client.execute_cell(cell, i)
            if watcher is not None:
                interrupted.set()
                watcher.join()
                assert "KeyboardInterrupt" in text_of(cell), text_of(cell)  # it stopped mid-run ...
                assert not (long_run / "summary.json").exists() and checkpoints(long_run) >= 3  # ... at a checkpoint

    errors = [
        (i, text_of(c))
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and i != at and any(o.get("output_type") == "error" for o in c.get("outputs", []))
    ]
    assert not errors, errors
    assert "status='completed'" in text_of(
        cell_with(nb, 'out="runs/society"')[1]
    )  # a run inside the kernel's running loop
    assert "agent_id" in text_of(cell_with(nb, "run.decisions[")[1])
    _, resumed = cell_with(nb, 'cooplab.resume("runs/long"')
    assert text_of(resumed) == "('completed', 8)"  # resumed from its checkpoint to the end
    for needle in ("plt.show()", "Image(filename", "runs.plot.scatter"):  # plots drawn inline, after cooplab ran
        _, c = cell_with(nb, needle)
        assert any("image/png" in (o.get("data") or {}) for o in c.outputs), (needle, c.outputs)
    assert "inline" in text_of(cell_with(nb, "matplotlib.get_backend()")[1])
    _, table = cell_with(nb, 'cooplab.sweep("cpr"')
    assert text_of(table).count("completed") == 4
    _, many = cell_with(nb, 'cooplab.load_runs("runs")')
    assert text_of(many).count("completed") == 2 + 4  # society, long, and the sweep's four cells
    assert "runs/society" in text_of(many)
