"""``python -m cooplab.cli``: the same as the ``cooplab`` command (its process set-up included)."""

from cooplab._entry import entry

entry()
