"""cooplab's version (a base module: imports nothing)."""

__version__ = "0.1.0"
