"""The six behavioral games of "cooperative profiles" (§3.1.1) as the task ``game``: payoffs, Nash and
Pareto references, reference players, metrics and figures (docs/games.md)."""
