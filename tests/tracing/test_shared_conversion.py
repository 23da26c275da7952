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
