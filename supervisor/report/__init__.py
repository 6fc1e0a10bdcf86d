"""Proving the agent came back whole (issue 16 sections 1 and 2).

:mod:`.figures` counts how a resumed session came back (actions to its first
productive edit, re-reads of unchanged files, repeated commands, constraint
breaks, time to resume) from two trails and blob hashes; :mod:`.probes` checks
that the new session received the task, the decisions, the files in flight,
the last command, the WIP commit and every hard constraint; :mod:`.gather`
reads the project for both (the keeper calls it at each session's end and
respawn); :mod:`.table` sums the history up per unit and for the project.
"""
