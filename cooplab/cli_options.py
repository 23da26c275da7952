"""CLI options shared by every ``cooplab run <society>`` command, declared once.

Used as ``model: ModelOpt = "local"``; the default stays in the command's signature.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

OutOpt = Annotated[Path, typer.Option("--out", help="Run directory to write (created if missing).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of every random draw (recorded in config.json).")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Write tables as CSV instead of Parquet.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite an existing run directory.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print summary.json to stdout.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]

# --- LLM agents (checked and assembled by cooplab.cli._llm_options) --------------------------
ModelOpt = Annotated[str, typer.Option("--model", help="LLM agents' model: local (SmolLM2-135M via llama.cpp), openai:NAME, scripted:FILE.")]
AgentModelOpt = Annotated[Optional[list[str]], typer.Option("--agent-model", help="Per-agent model, repeatable: --agent-model 2=openai:gpt-4o-mini (agents count from 0).")]
BaseUrlOpt = Annotated[Optional[str], typer.Option("--base-url", help="OpenAI-compatible server URL for openai:NAME (vLLM, llama_cpp.server, ...).")]
TemperatureOpt = Annotated[float, typer.Option("--temperature", help="Sampling temperature of LLM agents.")]
MaxTokensOpt = Annotated[int, typer.Option("--max-tokens", help="Output token cap per LLM call.")]
MaxConcurrencyOpt = Annotated[int, typer.Option("--max-concurrency", help="Concurrent model calls at most.")]
RpsOpt = Annotated[Optional[float], typer.Option("--rps", help="Requests per second at most (default: unlimited).")]
BudgetOpt = Annotated[Optional[float], typer.Option("--budget", help="Budget cap in USD; the run ends with status budget_exhausted when it is spent.")]
PriceInOpt = Annotated[float, typer.Option("--price-in", help="USD per 1K input tokens.")]
PriceOutOpt = Annotated[float, typer.Option("--price-out", help="USD per 1K output tokens.")]
CacheOpt = Annotated[Optional[str], typer.Option("--cache", help="Response cache file (default ~/.cache/cooplab/llm-cache.sqlite or $COOPLAB_CACHE); 'off' disables it.")]
