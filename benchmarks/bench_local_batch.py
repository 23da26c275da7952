"""Benchmark: what one evaluation of k tokens costs the local model (issue 41, point 5: what stands in the way).

    .venv/bin/python benchmarks/bench_local_batch.py            # ~1 min; writes "## Local model: the cost of a batch
                                                                # of tokens" in benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench_local_batch.py --quick    # smoke run (a short context, few repeats); writes
                                                                # nothing unless --out is given

Once prompts are reused (kept KV states), a science item's model time is mostly generation, one
token per evaluation. Drafting tokens and checking them in one evaluation (speculative decoding,
prompt-lookup drafts) pays off only when an evaluation of k tokens costs much less than k
evaluations of one. This measures it on this machine with the shipped model (SmolLM2-135M GGUF,
llama.cpp, ``--threads`` threads): after a context of ``--context`` tokens, the time of one
evaluation of k = 1, 2, 4, 8, 16 tokens (``--repeats`` times each, median; the context is rolled
back before each), and a cold read of 512 prompt tokens. For each k, the best case of drafting:
all k drafted tokens accepted, so k tokens for one evaluation of k, against k evaluations of one.

llama.cpp runs in this process (``llama_cpp.Llama``), not in cooplab's model process: the
evaluation itself is what is timed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import emit, machine_info  # noqa: E402

TITLE = "Local model: the cost of a batch of tokens"
TEXT = (
    "Two analysts share a table of orders. One of them loads the file, counts the rows per region and "
    "writes the counts down; the other fits a small model of the order value on the season and reports "
    "the error on held-out rows. "
)
BATCHES = (1, 2, 4, 8, 16)


def measure(context: int, repeats: int, threads: int) -> dict:
    import llama_cpp

    from cooplab.agents.models.local import local_model_path

    llm = llama_cpp.Llama(str(local_model_path()), n_ctx=max(1024, context + 64), n_threads=threads, verbose=False)
    toks: list[int] = []
    while len(toks) < context + max(BATCHES) + 512:
        toks += llm.tokenize(TEXT.encode(), add_bos=False)
    read = []
    for _ in range(max(1, repeats // 3)):
        llm.reset()
        t = time.perf_counter()
        llm.eval(toks[:512])
        read.append(time.perf_counter() - t)
    llm.reset()
    llm.eval(toks[:context])
    base = llm.n_tokens
    per_k: dict[int, float] = {}
    for k in BATCHES:
        ts = []
        for _ in range(repeats):
            llm.n_tokens = base  # roll back: the next evaluation writes over the same positions
            t = time.perf_counter()
            llm.eval(toks[context : context + k])
            ts.append(time.perf_counter() - t)
        per_k[k] = statistics.median(ts)
    return {"read_512_s": statistics.median(read), "per_k": per_k, "context": base, "threads": threads}


def report(m: dict, head: list[str], args: argparse.Namespace) -> str:
    one = m["per_k"][1]
    L = [
        f"## {TITLE}",
        "",
        f"`.venv/bin/python benchmarks/bench_local_batch.py{' --quick' if args.quick else ''}` "
        f"(context {m['context']} tokens, {m['threads']} threads, {args.repeats} repeats, medians).",
        "",
        *head,
        f"- OMP_WAIT_POLICY: {os.environ.get('OMP_WAIT_POLICY', 'unset')}",
        "",
        f"Reading a prompt: 512 tokens in one evaluation took {m['read_512_s'] * 1000:.0f} ms, "
        f"**{512 / m['read_512_s']:.0f} tokens/s**. Generating: one token per evaluation, "
        f"{one * 1000:.1f} ms, **{1 / one:.0f} tokens/s**.",
        "",
        "| tokens in one evaluation (k) | ms per evaluation | ms per token | / one token's evaluation | "
        "best case of a k-token draft (all accepted): speed-up of generation |",
        "|---:|---:|---:|---:|---:|",
    ]
    for k, t in m["per_k"].items():
        L.append(f"| {k} | {t * 1000:.1f} | {t * 1000 / k:.2f} | {t / one:.2f}x | {k * one / t:.2f}x |")
    L += [
        "",
        "The last column is an upper bound: every drafted token accepted, and no time spent drafting. A "
        "rejected draft costs the evaluation of k tokens for one token.",
        "",
    ]
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--context", type=int, default=1000, help="tokens read before the timed evaluations")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--quick", action="store_true", help="smoke size: a 64-token context, 3 repeats")
    ap.add_argument("--out", type=Path, default=None, help="write the section into this file instead of RESULTS.md")
    args = ap.parse_args(argv)
    if args.quick:
        args.context, args.repeats = 64, 3
    if args.context < 1 or args.repeats < 1 or args.threads < 1:
        ap.error("--context, --repeats and --threads must be at least 1")
    head = machine_info(versions=True)
    m = measure(args.context, args.repeats, args.threads)
    text = report(m, head, args)
    emit(TITLE, text, write=not args.quick or args.out is not None, out=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
