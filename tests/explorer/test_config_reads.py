"""The explorer reads each served run's config.json once while it stays the same (evals/explorer/runs.py
``ConfigCache``): a run's page looks up its parent and its forks among every run served, and before,
every page view read and parsed every run's config.json again. A changed file is read again."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cooplab.evals.explorer import runs
from cooplab.evals.explorer.pages import Site


def write(folder: Path, thread: str, parent: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    record: dict = {"thread_id": thread}
    if parent is not None:
        record["fork"] = {"parent_thread_id": parent, "at_round": 2, "changes": {"set": {"r": 0.6}}}
    (folder / "config.json").write_text(json.dumps({"task": "cpr", "record": record}))


def fork_names(page: dict) -> list[str]:
    blocks = next((s for s in page["sections"] if s.get("title") == "Forks"), {"blocks": []})["blocks"]
    table = next((b for b in blocks if b["kind"] == "table"), None)
    return [] if table is None else sorted(row[0]["text"] for row in table["rows"])


def test_a_page_view_reads_only_the_config_files_that_changed(tmp_path, monkeypatch):
    for i in range(6):
        write(tmp_path / f"other-{i}", f"other-{i}")
    write(tmp_path / "base", "base")
    write(tmp_path / "fork-a", "fork-a", parent="base")
    write(tmp_path / "fork-b", "fork-b", parent="other-0")
    reads: list[str] = []
    real = runs.read_json

    def counted(path: Path):
        if path.name == "config.json":
            reads.append(path.parent.name)
        return real(path)

    monkeypatch.setattr(runs, "read_json", counted)
    site = Site(roots=[tmp_path], task_for=lambda name: None)
    site.scan()
    base = next(r.id for r in site._runs.values() if r.out.name == "base")
    page, status = site.run_page({"id": base})
    assert status == 200 and fork_names(page) == ["fork-a"]
    assert sorted(set(reads)) == sorted(p.name for p in tmp_path.iterdir())  # every file read once at least
    reads.clear()
    page, _ = site.run_page({"id": base})
    assert fork_names(page) == ["fork-a"]
    assert reads == []  # nothing changed: nothing read again
    # a run becomes a fork of base (its file rewritten, same size or not): seen on the next view, and
    # only that file is read
    cfg = tmp_path / "fork-b" / "config.json"
    st = cfg.stat()
    write(tmp_path / "fork-b", "fork-b", parent="base")
    os.utime(cfg, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    page, _ = site.run_page({"id": base})
    assert fork_names(page) == ["fork-a", "fork-b"]
    assert reads == ["fork-b"]
    # a damaged file is a note on its page again and again, not a parse per view
    reads.clear()
    (tmp_path / "other-1" / "config.json").write_text("{not json")
    for _ in range(2):
        page, _ = site.run_page({"id": next(r.id for r in site._runs.values() if r.out.name == "other-1")})
        assert any("config.json is damaged" in n for n in page["notes"])
    assert reads == ["other-1"]
