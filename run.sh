#!/usr/bin/env bash
# The main job: set up, run the rule-based CPR society, and reproduce the paper's ABM figures.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
OUT="${1:-runs}"
.venv/bin/cooplab run cpr --agents rule --env harsh --population mixed --replicates 100 --seed 0 --out "$OUT/cpr-rule" --force
.venv/bin/cooplab figures cpr-abm --out "$OUT/cpr-abm" --replicates 100 --seed 0
echo
echo "One society's run:        $OUT/cpr-rule  (summary.json, rounds.parquet, figures/run.png)"
echo "The paper's ABM figures:  $OUT/cpr-abm   (fig2_*.png, fig3_*.png, fig4_*.png, CSVs, claims.md)"
