"""cooplab's checkpoint serializer writes exactly LangGraph's bytes, arrays without LangGraph's
long ``default`` chain (a runtime-protocol isinstance per array per checkpoint)."""

from __future__ import annotations

import numpy as np
import pytest
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from cooplab.graphs.checkpoint_serde import CheckpointSerializer


class _Sub(np.ndarray):
    pass


VALUES = [
    np.zeros((1, 10)),
    np.arange(12, dtype=np.int64).reshape(3, 4).T,  # Fortran order
    np.ones(5, bool)[::2],  # neither order: written from a copy
    np.zeros(0),
    np.zeros((3, 0), np.float32),
    np.zeros(3).view(_Sub),  # a subclass: LangGraph's own path
    {"a": np.arange(3), "b": [1, 2.5, "x", None, {"c": np.eye(2)}]},
    [np.zeros((2, 2), order="F"), {1, 2}, frozenset({3})],
    7,
    "text",
    None,
    b"raw",
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_the_bytes_are_langgraph_s_and_read_back(value):
    ours, theirs = CheckpointSerializer(), JsonPlusSerializer()
    assert ours.dumps_typed(value) == theirs.dumps_typed(value)
    back = ours.loads_typed(ours.dumps_typed(value))
    if isinstance(value, np.ndarray):
        np.testing.assert_array_equal(back, value)
        assert back.dtype == value.dtype and back.shape == value.shape


def test_arrays_skip_langgraph_s_default_chain(monkeypatch):
    seen: list[type] = []
    real = jsonplus._msgpack_default

    def counting(obj):
        seen.append(type(obj))
        return real(obj)

    monkeypatch.setattr(jsonplus, "_msgpack_default", counting)
    state = {"stock": np.zeros(4), "alive": np.ones((2, 3), bool), "order": np.zeros((2, 2), order="F")}
    for v in state.values():
        CheckpointSerializer().dumps_typed(v)
    CheckpointSerializer().dumps_typed(state)
    assert seen == []
    CheckpointSerializer().dumps_typed({1, 2})  # anything else: LangGraph's own chain
    assert seen == [set]


def test_what_langgraph_cannot_write_fails_the_same_way():
    for bad in (np.float32(3), object()):
        with pytest.raises(TypeError) as theirs:
            JsonPlusSerializer(pickle_fallback=False).dumps_typed(bad)
        with pytest.raises(TypeError) as ours:
            CheckpointSerializer().dumps_typed(bad)
        assert str(ours.value) == str(theirs.value)
