"""The run explorer (``cooplab view DIR ...``): a local web app to read runs the way a researcher
reads them (docs/explorer.md).

* :mod:`.runs`    finding run directories under folders and reading them without ever raising;
* :mod:`.views`   what a run's page shows: the task's :meth:`~cooplab.graphs.task.Task.explore` hook,
  else the built-in view of CPR, diners and games, else the generic view; key numbers for the list;
* :mod:`.render`  sections (:mod:`cooplab.graphs.explore` blocks) into template data; SVG plots;
* :mod:`.traces`  a run's model calls (prompt, answer, who, when) from traces.jsonl;
* :mod:`.pages`   the pages' contents (list, run, comparison, model calls);
* :mod:`.app`     the Starlette app, the Host check, the security headers, and :func:`~.app.serve`.

The app sits in the evals layer: it reads run directories itself and gets the registered tasks
through a lookup function the command line passes in (``task_for``), so it imports neither the
engine nor the tasks.
"""
