"""The common-pool-resource fishery (Gupta et al. 2025)."""
