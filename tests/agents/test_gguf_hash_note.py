"""A big ``local:`` model file is hashed with a word on stderr (issue 37, point 8): reading hundreds
of GB to name the model's answers in the cache must not look like a hang."""

from __future__ import annotations

import os

from cooplab.agents.models import local


def sparse_gguf(path, size: int):
    """A GGUF-looking file of ``size`` bytes that takes no space on disk (a hole after the magic)."""
    with open(path, "wb") as fh:
        fh.write(b"GGUF")
        fh.truncate(size)
    return str(path)


def test_a_big_model_file_is_announced_once_before_it_is_hashed(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(local, "HASH_NOTE_BYTES", 1 << 20)
    big = sparse_gguf(tmp_path / "huge.gguf", 3 << 20)
    first = local.gguf_identity(big)
    again = local.gguf_identity(big)  # hashed once per process: no second note
    err = capsys.readouterr().err
    assert first == again and len(first["sha256"]) == 64
    notes = [line for line in err.splitlines() if big in line]
    assert len(notes) == 1 and "hash" in notes[0] and "3.1 MB" in notes[0], err


def test_a_small_model_file_is_hashed_without_a_word(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(local, "HASH_NOTE_BYTES", 1 << 20)
    small = sparse_gguf(tmp_path / "small.gguf", 1000)
    local.gguf_identity(small)
    assert capsys.readouterr().err == "" and os.path.getsize(small) == 1000
