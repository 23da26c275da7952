import os
from pathlib import Path

import numpy as np
import pytest

from cooplab.tasks.cpr.params import make_params
from cooplab.tasks.cpr.society import Condition, init_state

# --- pytest-xdist (test.sh runs two workers with --dist loadfile) ---------------------------------
# A test file runs whole on one worker, in order, so its module fixtures are built once. Files that
# start Ray share one unit of work: a private Ray instance and the two-node cluster that
# `ray stop --force` tears down (it stops every Ray process on the machine) must never run at the
# same time on two workers.
SHARED_GROUPS = {
    "ray": (
        "agents/test_integration_llm.py",
        "benchmarks/test_smoke.py",
        "runner/test_sweep_budget.py",
        "runner/test_sweep_executors.py",
        "science/test_bench.py",
    ),
}
_GROUP_OF = {f: g for g, files in SHARED_GROUPS.items() for f in files}


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its file (``tests/x/test_y.py``), or its file's group."""
    file = nodeid.split("::", 1)[0]
    return _GROUP_OF.get(file.removeprefix("tests/"), file)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which the core install does not have
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None  # another --dist asked for: xdist's own scheduler
    from xdist.scheduler import LoadScopeScheduling

    class FilesAndGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return FilesAndGroups(config, log)


@pytest.fixture
def small_state():
    """A factory for an initial CPR state with chosen traits."""

    def make(replicates=1, population="mixed", seed=0, **params):
        p = make_params(**params)
        return init_state([Condition(p, population)], replicates, seed)

    return make


def set_traits(state, **traits):
    S, N = state["alive"].shape
    for k, v in traits.items():
        state[k] = np.broadcast_to(np.asarray(v, dtype=float), (S, N)).copy()
    return state


# --- Docker (tests marked ``docker``) ---------------------------------------------------------
# They need a Docker daemon and the sandbox image (``bash scripts/ensure-docker.sh``). Without them
# they are skipped, except when the CI environment variable is set: then they FAIL, so that a CI
# without Docker cannot look green.
def _docker_problem(image: str) -> str | None:
    from cooplab.sandbox import docker_backend

    if not docker_backend.daemon_available():
        return "no Docker daemon answers"
    if not docker_backend.image_available(image):
        return f"sandbox image {image} is missing (run: cooplab sandbox build)"
    return None


@pytest.fixture(scope="session")
def docker_ready() -> None:
    from cooplab.sandbox import SandboxConfig

    problem = _docker_problem(SandboxConfig().image)
    if problem:
        msg = f"Docker sandbox unavailable: {problem}; run `bash scripts/ensure-docker.sh`"
        if os.environ.get("CI"):
            pytest.fail(msg + " (CI is set, so docker tests must not be skipped)", pytrace=False)
        pytest.skip(msg)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory) -> Path:
    """A CSV the sandbox loads as ``df``: columns a (0..99), b = a / 2, label = a % 2."""
    p = tmp_path_factory.mktemp("data") / "data.csv"
    p.write_text("a,b,label\n" + "".join(f"{i},{i * 0.5},{i % 2}\n" for i in range(100)))
    os.chmod(p, 0o644)
    os.chmod(p.parent, 0o755)
    return p


@pytest.fixture(scope="session")
def cooplab_wheel(tmp_path_factory):
    """The wheel of this checkout (``tests/helpers/wheel.py``), built once per test process."""
    from tests.helpers.wheel import build_wheel

    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture
def fast_backoff(monkeypatch):
    """Retries without waiting (the count of retries is unchanged): wraps the runner's service."""
    from cooplab.runs import runner as cpr_runner

    build = cpr_runner.build_service

    def quick(*a, **kw):
        svc = build(*a, **kw)
        svc.backoff_base = 0.0
        return svc

    monkeypatch.setattr(cpr_runner, "build_service", quick)
