"""The common-pool-resource fishery (Gupta et al. 2025)."""

#: what ``cooplab params cpr`` prints (``text``) and prints with ``--json`` (``json``), kept beside
#: the parameters so that the console script answers without loading the command line or pydantic;
#: written by scripts/params_table.py from :func:`cooplab.cli.cpr.params_output`, checked by
#: tests/cli/test_startup.py
TABLE_FILE = "params_table.json"
