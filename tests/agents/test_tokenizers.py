"""An OpenAI model's own token count (cooplab.agents.tokenizers): the encodings read from the pinned
files are tiktoken's own, a scripted model can report counts in them, and a missing file is one line."""

import hashlib
import os

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from cooplab.agents import model_files as mf
from cooplab.agents import tokenizers as tk
from cooplab.agents.models.scripted import ScriptedChatModel

URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
TEXTS = [
    "",
    "You fish from a shared lake. Last round you caught 12 tons; the stock is 87.5 tons.",
    "Réponse: 3 poissons — 漁獲量は 4 トン 🐟\n\n  indented\tand <|endoftext|> spelled out",
    '{"extract": 10, "message": "Let\'s all take little!!!"}' * 20,
    "1234567890 " * 50,
]


@pytest.fixture
def tiktoken_own(tmp_path, monkeypatch):
    """tiktoken's own get_encoding, reading the same pinned files from its cache (named by the
    SHA-1 of the URL it would download), so nothing is fetched."""
    import tiktoken
    import tiktoken.registry

    for name in tk.ENCODINGS:
        src = mf.model_dir("tiktoken") / f"{name}.tiktoken"
        os.symlink(src, tmp_path / hashlib.sha1(URL.format(name).encode()).hexdigest())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    return tiktoken.get_encoding


@pytest.mark.parametrize("name", sorted(tk.ENCODINGS))
def test_the_encodings_from_the_pinned_files_are_tiktokens_own(tiktoken_own, name):
    ours, theirs = tk.load(name), tiktoken_own(name)
    assert ours.n_vocab == theirs.n_vocab and ours.special_tokens_set == theirs.special_tokens_set
    for text in TEXTS:
        assert ours.encode(text, disallowed_special=()) == theirs.encode(text, disallowed_special=())


def test_which_models_have_an_encoding():
    assert tk.encoding_for("openai:gpt-4o-mini") == "o200k_base"
    assert tk.encoding_for("openai:gpt-4.1") == "o200k_base"
    assert tk.encoding_for("openai:gpt-4") == "cl100k_base"
    for spec in ("anthropic:claude-3-5-haiku-latest", "openai:my-finetune", "local", "scripted:x.json", "", None, 3):
        assert tk.encoding_for(spec) is None, spec


def test_a_scripted_model_reports_the_count_an_openai_model_would(tiktoken_own):
    own_enc = tiktoken_own("o200k_base")

    def n(text):
        return len(own_enc.encode(text, disallowed_special=()))

    msgs = [SystemMessage(TEXTS[1]), HumanMessage(TEXTS[2], name="harvester")]
    answer = '{"extract": 7}'
    out = ScriptedChatModel(answers=[answer], tokenizer="o200k_base").invoke(msgs)
    assert isinstance(out, AIMessage) and out.usage_metadata is not None
    framing = 3 * len(msgs) + 1 + 3  # per message, the name, the reply's priming
    expected_in = framing + n(TEXTS[1]) + n("harvester") + n(TEXTS[2])
    assert out.usage_metadata["input_tokens"] == expected_in
    assert out.usage_metadata["output_tokens"] == n(answer)
    assert out.response_metadata["token_count_source"] == "o200k_base"
    own = ScriptedChatModel(answers=[answer]).invoke(msgs)
    assert own.response_metadata["token_count_source"] == "cooplab"
    assert own.usage_metadata is not None and own.usage_metadata["input_tokens"] != expected_in


def test_a_missing_encoding_file_is_one_line_naming_the_fetch(tmp_path, monkeypatch):
    monkeypatch.setenv("COOPLAB_MODELS_DIR", str(tmp_path / "none"))
    monkeypatch.setattr(tk, "_LOADED", {})
    with pytest.raises(tk.TokenizerUnavailable) as e:
        tk.load("o200k_base")
    line = str(e.value)
    assert "\n" not in line and "cooplab models fetch tiktoken" in line
    with pytest.raises(tk.TokenizerUnavailable, match="cannot load the encoding"):
        tk.load("p50k_base")


def test_the_counting_encoding_is_part_of_a_model_objects_digest_only_when_set():
    from cooplab.agents.instances import settings_digest, settings_text

    plain, counting = ScriptedChatModel(answers=["a"]), ScriptedChatModel(answers=["a"], tokenizer="o200k_base")
    assert "tokenizer" not in settings_text(plain)  # objects made before the field keep their digests
    assert settings_digest(plain) != settings_digest(counting)
