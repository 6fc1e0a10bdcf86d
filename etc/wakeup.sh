#!/usr/bin/env bash
# A hand-editable wakeup briefing: what a person (or an agent) reads first.
#
#   bash etc/wakeup.sh [MODULE]       # at a shell, in the project root
#
# or for a unit that sets
#   [wakeup]
#   command = ["bash", "etc/wakeup.sh"]
# (agentd runs it in the project root, no shell string, with a timeout, and
# gives its stdout to the agent as its first message; AGENTD_MODULE names the
# unit's module).  Edit freely; `agentd wakeup --module M` is the built-in
# briefing, with a token budget, trimming and where the agent stopped.
#
# It reads only the memory in .agent/ and the project's files (never agentd's
# own state directory): the task, the hard constraints, the latest decisions
# (the module's and the global ones, or every log's, merged by time; one an
# agent recorded again unchanged but for its numbers shown once), the files,
# the recent summary and the recent engram.
#
# Environment: AGENTD_MODULE (when no MODULE is given), WAKEUP_SCOPE (directory
# to list; default: .), WAKEUP_DECISIONS (default 5), WAKEUP_FILES (default 30).
set -u
A=.agent
module="${1:-${AGENTD_MODULE:-}}"
[ "$module" = global ] && module=

echo "## Current task"
if [ -n "$module" ] && [ -f "$A/tasks/$module.md" ]; then
    sed "s/^/[$module] /" "$A/tasks/$module.md" | grep -v "^\[$module\] # " | grep -v "^\[$module\] \$"
fi
cat "$A/current-task.md" 2>/dev/null || echo "(no $A/current-task.md: run \`agentd init\`)"
echo
echo "## Hard constraints"
cat "$A/constraints.md" 2>/dev/null || echo "(no $A/constraints.md)"
echo
if [ -n "$module" ]; then
    logs=("$A/decisions.log" "$A/decisions-$module.log")
    echo "## Latest decisions ($module + global, oldest first)"
else
    logs=("$A/decisions.log" "$A"/decisions-*.log)
    echo "## Latest decisions (every module, oldest first)"
fi
for log in "${logs[@]}"; do
    [ -f "$log" ] || continue
    name=$(basename "$log" .log); name=${name#decisions-}; [ "$name" = decisions ] && name=global
    grep -v '^[[:space:]]*$' "$log" | sed "s/^/$name	/"
done | LC_ALL=C sort -s -t '	' -k2,2 | awk -F '	' '
    # a decision an agent recorded (| by: UNIT) again unchanged but for its numbers: the newest, once
    { line = $2; key = ""
      if (line ~ /\| by: /) { k = $1; w = split(line, word, " ")
                              for (j = 3; j <= w; j++) k = k " " (word[j] ~ /[0-9]/ ? "#" : word[j]); key = k }
      n++; mod[n] = $1; text[n] = line; times[n] = 1
      if (key != "") { if (key in last) { hide[last[key]] = 1; times[n] = times[last[key]] + 1 }; last[key] = n } }
    END { for (i = 1; i <= n; i++) if (!hide[i]) print "(" mod[i] ") " text[i] (times[i] > 1 ? " (recorded " times[i] " times)" : "") }
' | tail -n "${WAKEUP_DECISIONS:-5}" | grep . || echo "(no decisions yet)"
echo
echo "## Files (${WAKEUP_SCOPE:-.})"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -c core.quotepath=off ls-files --cached --others --exclude-standard -- "${WAKEUP_SCOPE:-.}" 2>/dev/null
else
    find "${WAKEUP_SCOPE:-.}" -name '.?*' -prune -o -type f -print 2>/dev/null | sed 's|^\./||'
fi | grep -v -E '(^|/)\.(agent|agentd|git|venv)(/|$)|(^|/)(node_modules|__pycache__)/' | LC_ALL=C sort | head -n "${WAKEUP_FILES:-30}"
echo
echo "## Recent summary"
grep -v -i '^#[[:space:]]*recent summary[[:space:]]*$' "$A/recent-summary.md" 2>/dev/null | sed '/./,$!d' | grep . \
    || echo "(no $A/recent-summary.md)"
echo
echo "## Recent engram"
# this module's notes ([@module]) and the global ones (no tag), never another module's
grep -E "^- \[[^]]*\] \[[a-z]+\] (\[@${module:-global}\] |[^[])" "$A/engram.md" 2>/dev/null | tail -n 10 | grep . \
    || echo "(no notes yet)"
