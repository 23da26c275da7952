"""Cache keys and call ids do not depend on where the checkout or a model file lies (issue 38.0),
and identifiers read back from a run's tables stay text."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pandas as pd

import cooplab
from cooplab.agents.models import parse_model_spec
from cooplab.graphs.rundir import read_table, write_table

from .misbehaving_server import ANSWER


def _keys(cache: Path) -> set[str]:
    db = sqlite3.connect(cache)
    try:
        return {row[0] for row in db.execute("SELECT key FROM responses")}
    finally:
        db.close()


def test_a_scripted_file_is_named_by_its_content_not_by_its_folder(tmp_path):
    first = tmp_path / "clone-a" / "examples" / "answers.json"
    second = tmp_path / "elsewhere" / "deeper" / "still" / "fisher-answers.json"
    for p in (first, second):
        p.parent.mkdir(parents=True)
    first.write_text(json.dumps({"answers": [ANSWER]}))
    shutil.copy(first, second)
    assert parse_model_spec(f"scripted:{first}").identity() == parse_model_spec(f"scripted:{second}").identity()
    runs = {}
    for name, script in (("a", first), ("b", second)):
        runs[name] = cooplab.run(task="cpr", agents="llm", model=f"scripted:{script}", n_agents=2, rounds=1,
                                 cache=str(tmp_path / f"{name}.sqlite"), out=tmp_path / name, quiet=True)
        assert runs[name].status == "completed", runs[name].stopped
        assert json.loads((tmp_path / name / "config.json").read_text())["llm"]["model"] == f"scripted:{script}"  # the path given
    ids = [sorted(runs[n].ledger["call_id"]) for n in "ab"]
    assert ids[0] == ids[1] and len(ids[0]) > 0
    assert _keys(tmp_path / "a.sqlite") == _keys(tmp_path / "b.sqlite")
    # other content, other keys
    second.write_text(json.dumps({"answers": [ANSWER, ANSWER]}))
    assert parse_model_spec(f"scripted:{first}").identity() != parse_model_spec(f"scripted:{second}").identity()


def test_call_ids_read_back_from_a_csv_table_stay_text(tmp_path):
    ids = ["5e41512851534475", "0123456789012345", "00000000000000e1", "a1b2c3d4e5f60718"]
    write_table(pd.DataFrame({"call_id": ids, "model": ["1", "2", "3", "4"], "input_tokens": [1, 2, 3, 4]}), tmp_path, "ledger", csv=True)
    back = read_table(tmp_path, "ledger")
    assert back["call_id"].tolist() == ids and back["model"].tolist() == ["1", "2", "3", "4"]
    assert back["input_tokens"].tolist() == [1, 2, 3, 4]
