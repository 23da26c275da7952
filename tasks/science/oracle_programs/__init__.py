"""The oracle's analysis programs, one module per science task (``ecology``, ``anomaly``,
``biomarker``, ``geospatial``).

Each module is two things at once. Imported, it is an ordinary module whose ``analyze(df)``
returns the recovered facts as a dict (importing it runs no analysis). Sent as source text to
the sandbox's ``run_code`` (:data:`cooplab.tasks.science.oracle.ORACLE_CODE` is read from these
files), it runs where a DataFrame ``df`` is preloaded and prints ``ORACLE_RESULT <json>``: the
module tail runs only when ``df`` is defined in the namespace the text executes in.

The sandbox has numpy, pandas and the standard library but nothing of cooplab, so these modules
import only ``json``, ``math``, ``numpy`` and ``pandas`` (and this ``__init__`` imports nothing).
"""

#: the task whose program each module holds (module name = task name)
PROGRAMS = ("ecology", "anomaly", "biomarker", "geospatial")
