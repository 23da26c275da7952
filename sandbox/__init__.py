"""cooplab.sandbox: the sandboxed Python executor (in progress)."""
