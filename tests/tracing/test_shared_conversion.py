"""The tracer converts and scrubs a message once, however many records carry it (a tool loop's model
calls each carry the whole conversation), and never serves a stale or unscrubbed copy."""

from langchain_core.messages import AIMessage, HumanMessage

from cooplab.graphs.tracing import convert, scrub, to_jsonable


def test_a_message_is_converted_once_and_reused_while_unchanged():
    m = HumanMessage(content="how many rows?")
    a = to_jsonable({"messages": [[m]]}, max_list=convert.MAX_MESSAGES)
    b = to_jsonable({"messages": [[m]]}, max_list=convert.MAX_MESSAGES)
    assert a == b and a["messages"][0][0] is b["messages"][0][0]  # the same converted value, not a new walk
    assert a["messages"][0][0]["kwargs"]["content"] == "how many rows?"


def test_a_changed_message_is_converted_again():
    m = AIMessage(content="first")
    before = to_jsonable(m)
    m.content = "second"  # LangChain messages are mutable: the memo must notice
    after = to_jsonable(m)
    assert before["kwargs"]["content"] == "first" and after["kwargs"]["content"] == "second"


def test_a_dead_message_s_id_reused_by_another_is_not_confused():
    vals = []
    for i in range(50):  # ids of freed objects are reused: every conversion must still be its own message's
        m = HumanMessage(content=f"message {i}")
        vals.append(to_jsonable(m)["kwargs"]["content"])
        del m
    assert vals == [f"message {i}" for i in range(50)]


def test_a_shared_converted_message_is_scrubbed_for_the_current_secrets():
    secret = "sk-live-0123456789abcdef0123"
    m = HumanMessage(content=f"the key is {secret}")
    conv = to_jsonable(m)
    assert secret not in str(scrub(conv, [secret]))  # scrubbed with the secret set...
    assert secret in str(scrub(conv, []))  # ...and not reused for another set of secrets
    assert secret not in str(scrub({"inputs": [conv, conv]}, [secret]))
    assert secret in str(conv)  # the shared value itself is never changed


def _hostile_values(secret: str) -> list:
    """Values a traced run can hold: nesting, secrets under keys and inside text, non-string keys,
    numbers of every kind, long lists and strings, cycles, messages, odd objects."""
    import datetime as dt
    import math
    from collections import OrderedDict
    from decimal import Decimal

    import numpy as np
    from pydantic import SecretStr

    cyc: dict = {"name": "loop"}
    cyc["self"] = cyc
    deep: dict = {}
    cur = deep
    for _ in range(40):
        cur["next"] = {}
        cur = cur["next"]
    m = HumanMessage(content=f"use {secret} please")
    return [
        {"api_key": secret, "max_tokens": 5, "password": 7, "input_token": 3, "Authorization": f"Bearer {secret}"},
        {"text": f"the key {secret} leaked", secret: "a secret as a key", 1: "int key", (1, 2): "tuple key"},
        {"1": "string one", 1: "int one", "nested": [{"token": secret}, [secret, "short", "abcd"]]},
        [math.nan, math.inf, -math.inf, 1.5, -0.0, True, None, 10**30, Decimal("1e999"), np.float64("nan")],
        list(range(100)),
        [secret] * 50,
        "x" * 30_000 + secret,
        secret,
        "abcd",
        cyc,
        deep,
        {"messages": [[m, m]], "when": dt.datetime(2026, 1, 2, 3, 4, 5), "odd": object.__new__(type("Odd", (), {}))},
        OrderedDict(a=secret, b=SecretStr("hidden")),
        {"arr": np.arange(10), "big": np.zeros(1000), "set": {3, 1, 2}, "tuple": (secret, 1)},
        {"exc": ValueError(f"bad {secret}"), "bytes": secret.encode()},
    ]


def test_safe_value_in_one_walk_equals_conversion_then_scrubbing():
    """The tracer converts and scrubs a record's parts in one walk (convert.safe_value): for every
    kind of value, secrets and list caps it must give exactly what the two steps give."""
    from cooplab.graphs.tracing import safe_value

    secret = "sk-live-0123456789abcdef0123"
    for secrets in ([secret, "abcd"], [], ["nan", "1.5", "int one", "short"]):
        for value in _hostile_values(secret):
            for max_list in (None, convert.MAX_MESSAGES, 3):
                expected = scrub(to_jsonable(value, max_list=max_list), secrets)
                got = safe_value(value, secrets, max_list=max_list)
                assert got == expected, (value, secrets, max_list)
                if secret in secrets:
                    assert secret not in str(got)


def test_a_traced_record_keeps_no_secret_from_its_inputs_outputs_or_extra(tmp_path, monkeypatch):
    """A secret of the environment placed in a node's input, its output, its metadata and a
    message is absent from every line the tracer writes, the journal included."""
    import json

    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from cooplab.graphs.tracing import JsonlTracer

    secret = "sk-env-9f8e7d6c5b4a3928"
    monkeypatch.setenv("OPENAI_API_KEY", secret)

    class S(TypedDict, total=False):
        note: str
        out: dict

    def node(state: S) -> dict:
        return {"out": {"echo": state.get("note"), "api_key": "plain-but-under-a-secret-key"}}

    g = StateGraph(S)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    path = tmp_path / "traces.jsonl"
    tracer = JsonlTracer(path)
    g.compile().invoke(
        {"note": f"key={secret}"}, {"callbacks": [tracer], "metadata": {"who": secret}, "run_name": f"run {secret}"}
    )
    text = path.read_text()
    assert text and secret not in text
    recs = [json.loads(line) for line in text.splitlines()]
    node_rec = next(r for r in recs if r["name"] == "n")
    assert node_rec["inputs"]["note"] == "key=***" and node_rec["outputs"]["out"]["api_key"] == "***"
    assert any(r["name"] == "run ***" for r in recs)


def test_lone_surrogates_in_shared_messages_and_in_a_record_s_own_text_become_u_fffd(tmp_path):
    """A shared message's text is cleaned once, when its JSON is made, and a record's own text when
    its line is made: every line the tracer writes is valid UTF-8, with U+FFFD for each lone surrogate."""
    import json

    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from cooplab.graphs.tracing import JsonlTracer

    msg = HumanMessage(content="bad \ud800 text")

    class S(TypedDict, total=False):
        messages: list
        note: str

    def node(state: S) -> dict:
        return {"note": state.get("note", "") + "+"}

    g = StateGraph(S)
    for n in ("a", "b"):
        g.add_node(n, node)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    path = tmp_path / "traces.jsonl"
    g.compile().invoke(
        {"messages": [msg], "note": "own \udfff text"}, {"callbacks": [JsonlTracer(path)], "run_name": "r\ud83d"}
    )
    raw = path.read_bytes()
    text = raw.decode("utf-8")  # strict: no lone surrogate reached the file
    recs = [json.loads(line) for line in text.splitlines()]
    nodes = [r for r in recs if r["name"] in ("a", "b")]
    assert len(nodes) == 2
    for r in nodes:
        assert r["inputs"]["messages"][0]["kwargs"]["content"] == "bad \ufffd text"
        assert r["inputs"]["note"].startswith("own \ufffd text")
    assert any(r["name"] == "r\ufffd" for r in recs)
