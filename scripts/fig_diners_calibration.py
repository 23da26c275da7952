"""docs/img/diners_calibration.png from the samples.csv of two `cooplab calibrate diners` runs (seeds 0 and 1).

Usage: python scripts/fig_diners_calibration.py SEED0/samples.csv SEED1/samples.csv docs/img/diners_calibration.png
"""

import sys

import pandas as pd

from cooplab.evals.canvas import subplots

a, b, out = sys.argv[1:4]
runs = {"seed 0": pd.read_csv(a), "seed 1": pd.read_csv(b)}
for df in runs.values():
    df["gain"] = (df.value_ratio - 0.25) * df.extra_price
    df["up"] = df.unstated_pk * df.unstated_k
    df["four"] = df.holds_9b & df.holds_9c & df.holds_10a & df.holds_10b
fig, ax = subplots(1, 3, figsize=(13, 3.9), constrained_layout=True)
df = runs["seed 0"]
ax[0].scatter(df.gain[~df.four], df.up[~df.four], s=10, c="0.7", label=f"not all four ({(~df.four).sum()})")
ax[0].scatter(
    df.gain[df.four], df.up[df.four], s=14, c="tab:blue", label=f"9(b), 9(c), 10(a), 10(b) hold ({df.four.sum()})"
)
ax[0].scatter([2.0], [1.0], marker="X", s=120, c="tab:red", edgecolors="k", label="our choices")
ax[0].set(
    xscale="log",
    yscale="log",
    xlabel="lone defector's gain (value_ratio - 1/4) x extra_price",
    ylabel="p of 'unstated' (unstated_pk x unstated_k)",
    title="(a) the four reproducible leaders (seed 0)",
)
ax[0].legend(fontsize=7, loc="lower left")
for (name, d), col in zip(runs.items(), ("tab:blue", "tab:orange"), strict=False):
    ax[1].scatter(d.memory, d.effect_10c, s=8, c=col, alpha=0.6, label=name)
    ax[2].scatter(d.up, d.effect_9a, s=8, c=col, alpha=0.6, label=name)
ax[1].axhline(0, c="k", lw=0.8)
ax[1].set(
    xlabel="memory (pi <- memory x pi + u)",
    ylabel="M share - largest other share",
    title="(b) 10(c): M largest, combination 2, 6:1?",
)
ax[2].axhline(0, c="k", lw=0.8)
ax[2].set(
    xscale="log",
    xlabel="p of 'unstated'",
    ylabel="P share - largest other share",
    title="(c) 9(a): P largest, combination 1, unstated?",
)
for x in ax[1:]:
    x.legend(fontsize=7)
    x.grid(alpha=0.3)
fig.savefig(out, dpi=75)
