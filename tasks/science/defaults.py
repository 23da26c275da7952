"""Defaults every science entry point shares (``cooplab run science``, ``cooplab bench science``,
your own data, science sweeps and ``cooplab.run(task="science")``), kept in a module without
imports so that the command line can show them in ``--help`` without loading the task."""

#: Output tokens one model call of a science team may write unless the run says otherwise
#: (``--max-tokens``, ``max_tokens=``). A ``run_code`` call holding a 40-60 line pandas/SciPy
#: analysis is about 400-800 tokens, and a report section with its numbers about as much; 1024
#: leaves room for either in one call. Budget reservations are this cap times the output price
#: (USD 0.003 per 1K tokens by default: about USD 0.003 a call). docs/science.md, "Output cap".
MAX_TOKENS = 1024
