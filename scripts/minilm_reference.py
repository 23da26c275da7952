"""Write tests/evals/data/minilm_reference.npz: all-MiniLM-L6-v2 embeddings of a fixed set of texts
computed by the reference implementation (sentence-transformers on PyTorch), from the same pinned
files cooplab's NumPy encoder reads (``cooplab models fetch minilm``).

cooplab itself no longer needs PyTorch; this script does, once, to produce the vectors the test
suite compares against (tests/evals/test_minilm.py, agreement to 1e-5). Run it in a throwaway
environment that has ``sentence-transformers`` and ``torch`` installed:

    python scripts/minilm_reference.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "evals" / "data" / "minilm_reference.npz"


def texts() -> list[str]:
    """The norm texts CPR societies start from and the shipped scripted models propose, the
    embedding test's sentences, and texts that exercise the tokenizer's edges."""
    beliefs = json.loads((ROOT / "tasks" / "cpr" / "prompts" / "beliefs.json").read_text())
    scripted = []
    for name in ("cautious", "greedy"):
        for answer in json.loads((ROOT / "examples" / "scripted" / f"{name}.json").read_text())["by_phase"]["propose"]:
            scripted += [t for t in json.loads(answer).values() if t not in scripted]
    edges = [
        "Keep the lake healthy for our grandchildren.",
        "",
        "   ",
        "  Leading and trailing spaces.\n\t",
        "Café, naïve résumé: ÜBER-fishing is wrong!",
        "湖里的鱼要留给子孙后代。",
        "🐟🐟🐟 no limits 🎣",
        "Cap each catch at 12.5 tonnes/round (max: 3 rounds!) -- 100% agreed?",
        "tab\there\x00and\x07control",
        "fish " * 400,
        "Nobody catches more than ten tonnes a round. " * 30,
        "x",
    ]
    return [*beliefs["altruistic"], *beliefs["selfish"], *scripted, *edges]


def main() -> int:
    # the reference's own stack, installed only to write the reference (never in cooplab's environments)
    import sentence_transformers  # pyright: ignore[reportMissingImports]
    import torch  # pyright: ignore[reportMissingImports]
    from sentence_transformers import SentenceTransformer  # pyright: ignore[reportMissingImports]

    from cooplab.agents.model_files import verified_dir

    model = SentenceTransformer(str(verified_dir("minilm", "the reference embeddings")), device="cpu")
    items = texts()
    vecs = model.encode(items, batch_size=64, convert_to_numpy=True, show_progress_bar=False).astype(np.float32)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        OUT,
        texts=np.array(items),
        vectors=vecs,
        made_with=np.array(f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}"),
    )
    print(f"wrote {OUT}: {len(items)} texts x {vecs.shape[1]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
