"""The local model's thread count follows the free cores: one thread per core that other
processes leave free, set before each call, unless the user fixed the count; the answers do not
depend on it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cooplab.agents import llama_worker as lw
from cooplab.agents import local_model as lm


@pytest.mark.parametrize(
    ("most", "cpus", "others", "want"),
    [(2, 2, 0, 2), (2, 2, 1, 1), (2, 2, 5, 1), (8, 8, 3, 5), (2, 8, 0, 2), (4, 4, None, 4)],
)
def test_threads_for_a_call_are_the_free_cores_between_one_and_the_most(most, cpus, others, want):
    assert lw.threads_for_call(most, cpus, others) == want


def test_runnable_elsewhere_counts_a_busy_process_and_not_this_ones_own_threads():
    base = lw.runnable_elsewhere()
    assert base is not None and base >= 0
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        # the burner runs or waits for a core in every sample; wait until it shows (it starts first)
        seen = 0
        for _ in range(2000):
            seen = lw.runnable_elsewhere() or 0
            if seen >= 1:
                break
        assert seen >= 1
    finally:
        burner.kill()
        burner.wait()


class _Lib:
    def __init__(self):
        self.set: list[tuple[int, int]] = []

    def llama_set_n_threads(self, ctx, n, nb):
        self.set.append((n, nb))


class _Llama:
    class _ctx:  # noqa: N801 - llama-cpp-python's attribute names
        ctx = object()


def test_the_count_is_set_before_a_call_only_when_it_changes_and_never_when_fixed(monkeypatch):
    lib = _Lib()
    busy = iter([0, 1, 1, 0])
    monkeypatch.setattr(lw, "runnable_elsewhere", lambda: next(busy))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    tc = lw.ThreadCount(_Llama(), lib, most=2, adapt=True)
    assert [tc.before_call() for _ in range(4)] == [2, 1, 1, 2]
    assert lib.set == [(1, 1), (2, 2)]
    fixed = lw.ThreadCount(_Llama(), lib, most=2, adapt=False)
    monkeypatch.setattr(lw, "runnable_elsewhere", lambda: 9)
    assert fixed.before_call() == 2 and lib.set == [(1, 1), (2, 2)]


def test_a_llama_cpp_without_the_setter_keeps_its_count_and_never_fails_a_call(monkeypatch):
    class Old:
        pass  # no llama_set_n_threads

    monkeypatch.setattr(lw, "runnable_elsewhere", lambda: 1)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    tc = lw.ThreadCount(_Llama(), Old(), most=2, adapt=True)
    assert tc.before_call() == 2 and tc.adapt is False and tc.before_call() == 2


def _answers(p: lm.LocalModelProcess) -> list[str]:
    calls = [
        {"messages": [{"role": "user", "content": f"Name {k + 2} things a fisher carries."}], "max_tokens": 16}
        for k in range(2)
    ]
    return [
        p.chat({**c, "temperature": 0.7, "seed": 7 + i})["choices"][0]["message"]["content"]
        for i, c in enumerate(calls)
    ]


@pytest.mark.integration
def test_the_real_model_uses_fewer_threads_beside_a_busy_process_and_answers_the_same():
    """Beside a process that keeps a core busy the worker reads and generates with the cores left
    (on 2 cores, one thread: llama.cpp's threads otherwise wait at every layer for the one sharing
    a core); a count the user fixed is kept; the answers are the same at either count."""
    from cooplab.agents.models.local import local_model_path

    cpus = os.cpu_count() or 1
    if cpus < 2:
        pytest.fail("this test needs at least 2 cores (the project's machines have 2)")
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        auto = lm.LocalModelProcess(str(local_model_path()), n_ctx=1024)
        try:
            a = _answers(auto)
        finally:
            auto.close()
    finally:
        burner.kill()
        burner.wait()
    assert auto.meta["threads_adapt"] is True
    assert sum(auto.threads_used.values()) == 2 and max(auto.threads_used) <= cpus - 1
    fixed = lm.LocalModelProcess(str(local_model_path()), n_ctx=1024, n_threads=cpus)
    try:
        f = _answers(fixed)  # no busy process now: a fixed count is slow beside one
    finally:
        fixed.close()
    assert fixed.meta["threads_adapt"] is False and fixed.threads_used == {cpus: 2}
    assert a == f
