"""Plans: the overnight run (issue 28).  The person writes what to do and how to check each step; agentd
drives the agents through it, checks every claim of "done" itself, stops what runs away, and reports.

One module per idea (see docs/plan.md and docs/architecture.md):

* :mod:`.spec`      what a plan file holds (the schema, defaults, durations, the deadline)
* :mod:`.planfile`  reading a plan file, its errors with file and line, the rules that need the units
* :mod:`.state`     a run's durable state (atomic writes), its events and check logs
* :mod:`.policy`    what happens next: pure rules, decisions as values, the clock an argument
* :mod:`.runner`    one run carried out, through the ``Units`` and ``Workshop`` Protocols
* :mod:`.integrate` the git work with pygit2: scope snapshots, a task's candidate tree, its commit
* :mod:`.checks`    agentd's own verdict: ``done_when`` in a clean checkout, fenced, contained, timed out
* :mod:`.notify`    events to the ``[notify]`` commands, /metrics and the dashboard
* :mod:`.report`    the morning report: table, JSON, Markdown
* :mod:`.service`   the daemon's side: the runs, their control commands, resuming after a restart
* :mod:`.daemonside` the units and the repository as a run sees them (the Protocols' real side)
"""
