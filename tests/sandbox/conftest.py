"""Fixtures for the sandbox tests.

Tests marked ``docker`` need a Docker daemon and the sandbox image
(``bash scripts/ensure-docker.sh``).  Without them they are skipped, except
when the CI environment variable is set: then they FAIL, so that a CI
without Docker cannot look green.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import pytest

from cooplab.sandbox import SandboxConfig, SandboxPool, SandboxSession


class Limits(TypedDict):
    """The SandboxConfig limits these tests shorten."""

    timeout: float
    interrupt_grace: float


FAST = Limits(timeout=3.0, interrupt_grace=1.0)


def pytest_configure(config):
    config.addinivalue_line("markers", "docker: needs a Docker daemon and the sandbox image (fails under CI=...)")


# docker_ready and dataset: tests/conftest.py


@pytest.fixture(scope="session")
def docker_pool(docker_ready, dataset):
    pool = SandboxPool(SandboxConfig(dataset=dataset, **FAST), size=2, backend="docker")
    yield pool
    pool.close()


def pytest_collection_modifyitems(config, items):
    # parametrized docker cases get the marker here (a mark used at conftest import time
    # would warn before pytest_configure has registered it)
    here = Path(__file__).parent
    for item in items:
        if here not in Path(item.path).parents:
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == "docker":
            item.add_marker(pytest.mark.docker)


@pytest.fixture(params=["local", "docker"])
def backend(request) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_ready")
    return request.param


@pytest.fixture
def session(backend, dataset, request):
    """A fresh session on each backend (docker sessions come from the warm pool)."""
    if backend == "docker":
        pool = request.getfixturevalue("docker_pool")
        s = pool.session().start()
    else:
        s = SandboxSession(SandboxConfig(dataset=dataset, **FAST), backend="local").start()
    yield s
    s.close()


@pytest.fixture
def dsession(docker_pool):
    """A fresh docker session from the warm pool."""
    s = docker_pool.session().start()
    yield s
    s.close()
