import os
from pathlib import Path

import numpy as np
import pytest

from cooplab.tasks.cpr.params import make_params
from cooplab.tasks.cpr.society import Condition, init_state


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
