#!/usr/bin/env bash
# The main job: set up, run the LLM CPR society on the embedded local model (SmolLM2-135M,
# about 5 minutes on 2 cores), analyze it, and reproduce the paper's rule-based ABM figures.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh --extras local,analysis   # what the main job needs (test.sh installs every extra)
OUT="${1:-runs}"
C=.venv/bin/cooplab
$C run cpr --agents llm --model local --env harsh --population mixed --n-agents 4 --rounds 8 --seed 0 --out "$OUT/cpr-llm" --force
$C analyze cpr "$OUT/cpr-llm" --out "$OUT/cpr-llm/analysis"
$C figures cpr-abm --out "$OUT/cpr-abm" --replicates 100 --seed 0
echo
echo "LLM society run:   $OUT/cpr-llm   (summary.json, decisions.parquet, ledger.parquet, figures/run.png, analysis/)"
echo "its traces:        $C traces view $OUT/cpr-llm    (a local viewer on 127.0.0.1; Ctrl-C to stop)"
echo "ABM validation:    $OUT/cpr-abm   (fig2_*.png, fig3_*.png, fig4_*.png, CSVs, claims.md)"
