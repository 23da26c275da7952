"""Within-society norm similarity (Gupta et al. 2025, §4.2.4).

Each agent's norm text is embedded with all-MiniLM-L6-v2 (the pinned files of
:mod:`cooplab.agents.model_files`, run in NumPy by :mod:`cooplab.evals.minilm`) and L2-normalized to n_i.
Then

    S_ind   = 2 / (N (N-1)) sum_{i<j} n_i . n_j           (mean pairwise cosine: homogeneity)
    S_align = (1/N) sum_i n_i . n_bar,  n_bar = sum_i n_i / ||sum_i n_i||   (alignment)
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pandas as pd

from cooplab.evals.typed import as_frame, as_series, groups, tuples

#: the packages the embedder needs (all in the analysis extra)
EMBEDDER_PACKAGES = ("safetensors", "tokenizers", "scipy")
_SURROGATE = re.compile("[\ud800-\udfff]")


@lru_cache(maxsize=1)
def _model():
    from cooplab.agents.model_files import verified_dir
    from cooplab.extras import require

    require("analysis", "norm similarity (sentence embeddings)", EMBEDDER_PACKAGES)
    from cooplab.evals.minilm import MiniLM

    return MiniLM(verified_dir("minilm", "norm similarity (sentence embeddings)"))


def embedder_record() -> dict:
    """What an analysis records about the embedder: the pinned files (names, SHA-256, origin) and
    the libraries that computed the vectors."""
    from importlib.metadata import version

    from cooplab.agents.model_files import record

    return {
        **record("minilm"),
        "runtime": "cooplab.evals.minilm (NumPy), "
        + ", ".join(f"{d} {version(d)}" for d in ("numpy", "safetensors", "tokenizers")),
    }


def _text(t: object) -> str:
    """A text the tokenizer accepts: lone surrogates (possible in a model's JSON answer) become
    U+FFFD, as they would in any UTF-8 file."""
    return _SURROGATE.sub("\ufffd", str(t))


def embed(texts: list[str]) -> np.ndarray:
    """Unit-norm sentence embeddings, one row per text."""
    if not texts:
        return np.zeros((0, 384))
    v = np.asarray(_model().encode([_text(t) for t in texts]), dtype=float)
    return v / np.linalg.norm(v, axis=1, keepdims=True).clip(min=1e-12)


def s_ind(n: np.ndarray) -> float:
    """Mean pairwise cosine similarity of unit vectors (NaN for fewer than two)."""
    N = len(n)
    if N < 2:
        return float("nan")
    gram = n @ n.T
    return float((gram.sum() - np.trace(gram)) / (N * (N - 1)))


def s_align(n: np.ndarray) -> float:
    """Mean cosine between each unit vector and the normalized mean vector."""
    if len(n) == 0:
        return float("nan")
    total = n.sum(axis=0)
    norm = np.linalg.norm(total)
    if norm == 0:
        return 0.0
    return float((n @ (total / norm)).mean())


def norm_similarity(norms: pd.DataFrame) -> pd.DataFrame:
    """``norms``: rows (society, round, agent, text). Returns S_ind and S_align per (society, round)."""
    if norms.empty:
        return pd.DataFrame(columns=["society", "round", "n_agents", "S_ind", "S_align"])
    texts = norms["text"].astype(str).tolist()
    unique = list(dict.fromkeys(texts))
    vecs = dict(zip(unique, embed(unique), strict=False))
    rows = []
    for (s, r), g in groups(norms, ["society", "round"], sort=True):
        n = np.stack([vecs[t] for t in g["text"].astype(str)])
        rows.append({"society": s, "round": r, "n_agents": len(g), "S_ind": s_ind(n), "S_align": s_align(n)})
    return pd.DataFrame(rows)


def agent_norm_texts(decisions: pd.DataFrame, beliefs: pd.DataFrame, rounds: pd.DataFrame) -> pd.DataFrame:
    """Each living agent's norm text per round: its latest proposal if it has made one (group
    decision on), else its personal belief (OSL, Neither: the initial template)."""
    import json

    props = as_frame(decisions[decisions["phase"] == "propose"]) if len(decisions) else decisions
    latest: dict[tuple[int, int], str] = {}
    by_round: dict[int, list] = {}
    for row in tuples(props):
        by_round.setdefault(int(row.round), []).append(row)
    out = []
    alive_rounds = as_series(rounds.groupby("replicate")["round"].max()).to_dict() if len(rounds) else {}
    initial = {(int(b.society), int(b.agent)): b.initial_belief for b in tuples(beliefs)}
    agents_per_soc: dict[int, list[int]] = {}
    for s, i in initial:
        agents_per_soc.setdefault(s, []).append(i)
    for s, last in alive_rounds.items():
        for r in range(1, int(last) + 1):
            for row in by_round.get(r, []):
                if int(row.society) == s and row.parsed:
                    latest[(s, int(row.agent))] = json.loads(row.parsed)["proposal"]
            for i in agents_per_soc.get(int(s), []):
                out.append(
                    {"society": int(s), "round": r, "agent": i, "text": latest.get((int(s), i), initial[(int(s), i)])}
                )
    return pd.DataFrame(out)
