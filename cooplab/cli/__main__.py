"""``python -m cooplab.cli``: the same as the ``cooplab`` command."""

from cooplab.cli import entry

entry()
