"""Fixtures shared by the science tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from cooplab.tasks.science import datasets as D
from cooplab.tasks.science.oracle import oracle_stdout, parse_oracle_output

#: the seeds every task is checked on by the tests that sweep seeds (oracle, data-blind reports)
SWEEP_SEEDS = range(20)


@dataclass(frozen=True)
class Seeded:
    """One generated (task, seed): its ground truth, data file, and what the oracle's program printed."""

    truth: dict
    data_path: Path
    stdout: str

    @property
    def recovered(self) -> dict:
        return parse_oracle_output(self.stdout)

    @property
    def columns(self) -> list[str]:
        with open(self.data_path, encoding="utf-8") as f:
            return f.readline().strip().split(",")


@pytest.fixture(scope="session")
def seeded(tmp_path_factory) -> dict[tuple[str, int], Seeded]:
    """Every (task, seed in :data:`SWEEP_SEEDS`), generated and analysed by the oracle once per session."""
    root = tmp_path_factory.mktemp("seeded")
    out = {}
    for task in D.TASKS:
        for seed in SWEEP_SEEDS:
            ds = D.generate(task, seed, root / task / str(seed))
            out[task, seed] = Seeded(ds.truth, ds.data_path, oracle_stdout(task, ds.data_path))
    return out
