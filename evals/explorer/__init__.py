"""The run explorer: the one way to read a run (docs/explorer.md), served as a local web app by
``cooplab view DIR ...`` and ``cooplab traces view DIR`` (:mod:`.app`), and written to one HTML file
by ``cooplab report DIR`` (:mod:`cooplab.evals.report`) from the same pages and templates.

* :mod:`.runs`    finding run directories under folders and reading them without ever raising;
* :mod:`.views`   what a run's page shows: the task's :meth:`~cooplab.graphs.task.Task.explore` hook,
  else the built-in view of CPR, diners and games, else the generic view; key numbers for the list;
* :mod:`.render`  sections (:mod:`cooplab.graphs.explore` blocks) into template data, plots as their
  numbers; where links lead (the app's URLs, or a file's anchors); the Jinja environment;
* :mod:`.markdown`  Markdown of a run as HTML (markdown-it-py, raw HTML, links and images off);
* :mod:`.traces`  a run's model calls (prompt, answer, who, when, tokens, what the ledger charged)
  from traces.jsonl;
* :mod:`.groups`  sweeps, profiles and folders of results: their pages;
* :mod:`.pages`   the pages' contents (list, run, group, comparison, model calls);
* :mod:`.app`     the Starlette app, the Host check, the security headers, and :func:`~.app.serve`.

The app sits in the evals layer: it reads run directories itself and gets the registered tasks
through a lookup function the command line passes in (``task_for``), so it imports neither the
engine nor the tasks.
"""
