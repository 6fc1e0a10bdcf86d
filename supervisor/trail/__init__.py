"""What an agent recorded of its own work, as plain data (:mod:`.model`), read by one parser per kind.

:mod:`.codex` reads Codex's rollout, :mod:`.claude` Claude Code's session
transcript, :mod:`.generic` a generic agent's screen.  Pure functions over the
agent's own files: no daemon, no clock.  The continuity cycle keeps a trail at
each session's end (``continuity/keeper.py``); the fragmentation report
(issue 16) counts actions, re-reads and repeated commands from the same data.
"""
