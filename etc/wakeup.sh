#!/usr/bin/env bash
# A hand-editable wakeup briefing, for units that set
#   [wakeup]
#   command = ["bash", "etc/wakeup.sh"]
# agentd runs it with the project root as the working directory (no shell
# string, a timeout applies) and gives its stdout to the agent as its first
# message. Edit freely; `agentd wakeup --module M` is the built-in alternative
# with a token budget and trimming.
#
# Environment: AGENTD_MODULE (module log to tail; default: global log),
#              WAKEUP_SCOPE (directory to list; default: .), WAKEUP_DECISIONS (default 5).
set -u
A=.agent
module="${AGENTD_MODULE:-}"
log="$A/decisions.log"
[ -n "$module" ] && [ -f "$A/decisions-$module.log" ] && log="$A/decisions-$module.log"

echo "## Current task"
[ -n "$module" ] && [ -f "$A/tasks/$module.md" ] && cat "$A/tasks/$module.md" && echo
cat "$A/current-task.md" 2>/dev/null || echo "(no $A/current-task.md)"
echo
echo "## Hard constraints"
cat "$A/constraints.md" 2>/dev/null || echo "(no $A/constraints.md)"
echo
echo "## Latest decisions ($log)"
tail -n "${WAKEUP_DECISIONS:-5}" "$log" 2>/dev/null || echo "(no decisions yet)"
echo
echo "## Files"
find "${WAKEUP_SCOPE:-.}" -type f -not -path '*/.git/*' -not -path "*/$A/*" -not -path '*/.venv/*' 2>/dev/null | sort | head -30
echo
echo "## Recent engram"
# this module's notes ([@module]) and the global ones (no tag), never another module's
grep -E "^- \[[^]]*\] \[[a-z]+\] (\[@${module:-global}\] |[^[])" "$A/engram.md" 2>/dev/null | tail -n 10
