"""all-MiniLM-L6-v2 sentence embeddings in NumPy: no PyTorch, no sentence-transformers.

The model is a 6-layer BERT encoder (hidden size 384, 12 heads, erf GELU, LayerNorm eps 1e-12);
a sentence's embedding is the mean of the last layer's token vectors over its real tokens (the
attention mask), scaled to unit length, as the model's sentence-transformers configuration says
(``modules.json``: Transformer, mean Pooling, Normalize; ``sentence_bert_config.json``: at most
256 tokens). The weights are read with ``safetensors`` and the text is tokenized with
``tokenizers`` from the model's own ``tokenizer.json``: each file with the library that defines its
format. The files are the pinned ones of :mod:`cooplab.agents.model_files` (``minilm``).

Computed in float32 like the PyTorch reference; the test suite compares with vectors the reference
(sentence-transformers on PyTorch) produced for the same texts and requires agreement to 1e-5
(tests/evals/test_minilm.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

MAX_TOKENS = 256  # sentence_bert_config.json's max_seq_length


class MiniLM:
    """The encoder loaded from a model directory holding the pinned ``minilm`` files."""

    def __init__(self, directory: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        directory = Path(directory)
        cfg = json.loads((directory / "config.json").read_text())
        self.layers = int(cfg["num_hidden_layers"])
        self.eps = float(cfg["layer_norm_eps"])
        self.heads = int(cfg["num_attention_heads"])
        self.width = int(cfg["hidden_size"])
        self.max_tokens = min(
            int(json.loads((directory / "sentence_bert_config.json").read_text())["max_seq_length"]),
            int(cfg["max_position_embeddings"]),
        )
        self.w = {k: v for k, v in load_file(str(directory / "model.safetensors")).items() if v.dtype == np.float32}
        tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
        tok.no_padding()  # padding is done here, per batch, with the attention mask
        tok.enable_truncation(max_length=self.max_tokens)
        self.tokenizer = tok

    # --- the encoder ---------------------------------------------------------------------------
    def _layer_norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + np.float32(self.eps)) * self.w[f"{name}.weight"] + self.w[f"{name}.bias"]

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        """A linear layer on the last axis, as one 2-D matrix product (NumPy runs a 3-D one as
        many small products, several times slower)."""
        w = self.w[f"{name}.weight"]
        return (x.reshape(-1, x.shape[-1]) @ w.T + self.w[f"{name}.bias"]).reshape(*x.shape[:-1], w.shape[0])

    def _attention(self, x: np.ndarray, bias: np.ndarray, p: str) -> np.ndarray:
        b, n, d = x.shape
        h = self.heads

        def split(t: np.ndarray) -> np.ndarray:  # contiguous: NumPy's matmul is far slower on strided views
            return np.ascontiguousarray(t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3))

        q, k, v = (split(self._dense(x, f"{p}.attention.self.{w}")) for w in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(d // h)) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        ctx = (scores / scores.sum(-1, keepdims=True)) @ v
        return self._dense(ctx.transpose(0, 2, 1, 3).reshape(b, n, d), f"{p}.attention.output.dense")

    def _hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The last layer's token vectors, shape (batch, tokens, 384)."""
        from scipy.special import erf

        n = ids.shape[1]
        x = (
            self.w["embeddings.word_embeddings.weight"][ids]
            + self.w["embeddings.position_embeddings.weight"][:n]
            + self.w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._layer_norm(x, "embeddings.LayerNorm")
        bias = np.where(mask[:, None, None, :] > 0, np.float32(0), np.finfo(np.float32).min).astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            x = self._layer_norm(x + self._attention(x, bias, p), f"{p}.attention.output.LayerNorm")
            inner = self._dense(x, f"{p}.intermediate.dense")
            inner = (inner * np.float32(0.5) * (np.float32(1) + erf(inner / np.float32(np.sqrt(2))))).astype(np.float32)
            x = self._layer_norm(x + self._dense(inner, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        return x

    # --- sentences ----------------------------------------------------------------------------
    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Token ids per text ([CLS] ... [SEP], at most ``max_tokens``); surrounding whitespace is
        stripped first, as sentence-transformers does."""
        return [e.ids for e in self.tokenizer.encode_batch([str(t).strip() for t in texts])]

    def _batches(self, lengths: list[int], batch_size: int) -> list[list[int]]:
        """Indices of texts grouped by similar length, so that padding stays small: a batch holds
        at most ``batch_size`` texts, and its longest is at most twice its shortest plus 8 tokens."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        batches: list[list[int]] = []
        for i in order:
            if batches and len(batches[-1]) < batch_size and lengths[i] <= 2 * lengths[batches[-1][0]] + 8:
                batches[-1].append(i)
            else:
                batches.append([i])
        return batches

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Unit-length float32 embeddings, one row per text."""
        ids = self.tokenize(texts)
        out = np.zeros((len(ids), self.width), dtype=np.float32)
        for chunk in self._batches([len(t) for t in ids], batch_size):
            width = max(len(ids[i]) for i in chunk)
            tokens = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.float32)
            for row, i in enumerate(chunk):
                tokens[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1
            hidden = self._hidden(tokens, mask)
            pooled = (hidden * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), np.float32(1e-9))
            out[chunk] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))
        return out
