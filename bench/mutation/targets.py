"""The modules a mutation run covers, each with its own pure tests, and the survivors known to be equivalent.

Each module maps to the pytest arguments of the tests written for it (files,
or files with ``-k``): pure tests only, no process, no PTY, no network (the
runner refuses a test that starts a process).  ``EQUIVALENT`` names, per
module, each mutant that no test can kill because it does not change what
the module does, with the reason; its key is the one the run prints
(``scope: original -> replacement``).
"""

from __future__ import annotations

TARGETS: dict[str, list[str]] = {
    "supervisor.daemon.lifecycle": ["tests/test_lifecycle.py"],
    "supervisor.continuity.policy": ["tests/test_checkpoint_policy.py", "tests/test_policy_watch.py",
                                     "tests/test_freeze.py", "-k", "not in_a_real_session"],
    "supervisor.daemon.ordering": ["tests/test_ordering.py"],
    "supervisor.continuity.briefing": ["tests/test_briefing.py"],
    "supervisor.report.figures": ["tests/test_report.py", "-k",
                                  "not blob_of and not command_names and not settled_decisions_come"],
    "supervisor.scope.rules": ["tests/test_scope_rules.py", "tests/test_scopeguard.py", "-k",
                              "not scopeguard or forbid_lines or attribution or writable or test_check or overlaps"],
    "supervisor.memory.decisions": ["tests/memory/test_decisions.py"],
    "supervisor.memory.lineformat": ["tests/memory/test_lineformat.py"],
    # being rewritten by another engineer: covered by the runner, their tests are theirs
    "supervisor.session.redact": ["tests/test_transcript.py", "-k", "redact or pattern or secret or lookalike or bearer "
                                  "or shapes or env_values or key_split or prompt or pem or hold or chunking or escapes"],
    "supervisor.session.shapes": ["tests/test_transcript.py", "-k", "redact or pattern or secret or lookalike or bearer "
                                  "or shapes or env_values or key_split or prompt or pem or hold or chunking or escapes"],
}

#: module -> {mutant key: why it is equivalent}
EQUIVALENT: dict[str, dict[str, str]] = {}
