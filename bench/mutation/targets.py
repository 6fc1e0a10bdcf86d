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
    "supervisor.unitstate": ["tests/test_lifecycle.py"],
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
    # the stream's own tests (test_transcript.py) and the matcher's (the pure tests of the secret rules)
    "supervisor.session.redact": ["tests/test_transcript.py", "tests/test_secret_matcher.py",
                                  "tests/test_redact_stream.py", "-k", "redact or pattern or secret or lookalike or bearer or shapes or env_values or "
                                  "key_split or prompt or pem or hold or chunking or escapes"],
    "supervisor.session.shapes": ["tests/test_transcript.py", "-k", "redact or pattern or secret or lookalike or bearer "
                                  "or shapes or env_values or key_split or prompt or pem or hold or chunking or escapes"],
}

#: module -> {mutant key: why it is equivalent (no caller can see the change)}; left out of the score
EQUIVALENT: dict[str, dict[str, str]] = {
    "supervisor.memory.decisions": {
        '_previous_snapshot: 1 -> (2)':
            'the newest of the last two decisions is the newest of the last one',
        '_reserve_snapshot_id: "" -> "XX"':
            'a missing last_snapshot becomes a text that is no snapshot id either way, and ulid() ignores an `after` that is not a ULID',
        '_maybe_roll: "epochs" -> ""':
            'the epoch number in local/state.json is a cache: without it _latest_epoch() scans the directory and finds the same number',
        '_maybe_roll: write_state(paths, state) -> pass':
            'the same cache, not written: readers scan the directory instead',
        '_latest_epoch: "epochs" -> ""':
            'the cache not read: the directory scan finds the same number',
        '_latest_epoch: 0 -> (1)':
            'a cached epoch 1 not trusted: the directory scan finds the same number',
        '_latest_epoch: cached > 0 -> (cached >= 0)':
            'a cached 0 is then checked against epoch-0, which never exists, so the directory is scanned as before',
        'latest: epoch <= 0 -> (epoch < 0)':
            'one more turn of the loop reads epoch 0, which never exists, and adds nothing',
        'latest_merged: count > 0 -> (count >= 0)':
            'latest() returns nothing for a count of 0 or less, so the slice has nothing to cut',
    },
    "supervisor.memory.lineformat": {
        'Decision: "" -> "XX"':
            'the default of Decision.why: every Decision the product makes passes a why (parse() refuses a line without one, build_decision() validates it)',
        '_unescape: "\\\\" -> ""':
            'the fast path for a value without a backslash: without it the loop copies such a value unchanged',
        '_split_unescaped: "\\\\" -> ""':
            'the fast path for text without a backslash: without it the loop splits on every separator the same way',
        '_split_unescaped: i + 1 -> (i - 1)':
            'differs only for a lone backslash at the very end, where text[i:i+2] is that one character either way',
        '_split_unescaped: i + 1 < len(text) -> (i + 1 <= len(text))':
            'differs only for a lone backslash at the very end, where text[i:i+2] is that one character either way',
        'parse: len(text) - len(text.rstrip("\\\\")) -> (len(text) + len(text.rstrip(\'\\\\\')))':
            'only the parity is used: (n + m) % 2 == (n - m) % 2',
    },
    "supervisor.scope.rules": {
        "forbid_globs_from_constraints: 1 -> (2)":
            "only the part before the first ' #' is kept ([0]), so how many more splits are made does not matter",
        "check: glob.strip() and matches(path, [glob]) -> (glob.strip() or matches(path, [glob]))":
            "a blank glob compiles to (?:/.*)?, which matches only '' or a path starting with '/', and a changed "
            "path is always a non-empty relative path: the guard only spares the match",
        "check: glob.strip() and matches(path, [glob]) -> (glob.strip() or matches(path, [glob])) #2":
            "the same guard for constraints.md's globs: a blank glob matches no relative path",
        'overlaps: "**" -> ""':
            "'' and '**' both leave check() unrestricted (blank globs are dropped), and the only example '**' adds, "
            "x/x, is offered by every glob that could match it (_synthetic turns each wildcard into x)",
        'overlaps: "**" -> "" #2': "the same stand-in for the other scope",
        "overlaps.both: return False -> return None": "both() is only tested for truth, and None is false",
        "overlaps: 1 -> (2)":
            "the second synthetic path of a glob is the first plus '/x', which removesuffix('/x') turns back into "
            "the first: the same outer prefix twice",
    },
    "supervisor.report.figures": {
        '<module>: "str | None" -> ""':
            "the string is a forward reference inside the Blobs type alias: typing only, never evaluated",
        'baseline: "" -> "XX"': "is_command() admits only actions with a command, so `action.command or \"\"` never "
                                "takes its fallback",
        'baseline: "" -> "XX" #2': "the same fallback, for command_inputs(): is_command() admits only actions with "
                                   "a command",
        'resumed: "" -> "XX"': "the same fallback in resumed(): is_command() admits only actions with a command",
    },
    "supervisor.continuity.briefing": {
        "cut_text: 1 -> (2)":
            "(lo + hi + 2) // 2 is still a midpoint in (lo, hi] whenever lo < hi, so the binary search ends on "
            "the same longest prefix that fits",
    },
    "supervisor.session.redact": {
        '<module>: "API_KEY" -> ""':
            'API_KEY ends with _KEY, one of SECRET_ENV_SUFFIXES, so it stays a secret name; no variable has the empty name',
        'Redactor._run: u < len(body) -> (u <= len(body))':
            'at u == len(body) a string counted open holds nothing more: raw_cut is u == len(body) and _esc is body[u:] == b"" either way',
        'Redactor._tail_raw: len(text) - t -> (len(text) + t)':
            'the fast path only: h is the same for t == 0, else longer than the tail, so the raw bytes never equal it and '
            'the slow path (text_runs) gives the same index',
        'Redactor._tail_raw: h <= u -> (h < u)':
            'the fast path only: h == u falls to the slow path, which gives the same index',
        'Redactor._tail_raw: u - h -> (u + h)':
            'the fast path only: body[u+h:u] is empty, equal to the tail only when h == 0, where u + h == u - h',
        'Redactor._tail_raw: 0 -> (1)':
            'an ESC at index 0 has all the text after it, so a tail never reaches into it: u - h is right without the check',
        'Redactor._tail_raw: 1 -> (2)':
            'the fast path only: esc is never -2, so every call takes the slow path, which gives the same index',
        'Redactor._tail_raw: sequence_end(body, esc) <= u - h -> (sequence_end(body, esc) < u - h)':
            'the fast path only: an escape ending exactly where the tail starts goes to the slow path, the same index',
        '_merge: break -> continue':
            'the spans are sorted: once one starts at or after cut, every later one does too and is skipped either way',
        '_cut_text: nxt < e -> (nxt <= e)':
            'a line move exactly at a span\'s end is one newline either way: here, or as q[e:e] + "\\n" in the next loop',
        'redact_text: env and secret_env_values(env) -> (env or secret_env_values(env))':
            'an environment without secret values makes a Redactor with no values: the default one\'s result, only slower',
    },
    "supervisor.continuity.policy": {
        "due: figure.window > 0 -> (figure.window >= 0)":
            "a figure with window 0 has ratio 0.0 (ContextFigure.ratio), and both limits are above 0 "
            "(the unit file refuses less), so a zero window never reaches either limit",
    },
}

#: module -> {mutant key: why it is left alive on purpose}; these count against the score
KEPT: dict[str, dict[str, str]] = {
    "supervisor.session.redact": {
        '<module>: 256 -> (257)':
            'CONTEXT is a size, not a rule: a name and its separator fit in far less, and no shape spans 256 bytes of '
            'released text before its value',
    },
    "supervisor.memory.decisions": {
        '<module>: 16 -> (17)':
            'MERGE_SLACK is a margin, not a rule: one more line read from each tail to see lines a merge left out of order',
        'latest: len(entries) >= count -> (len(entries) > count)':
            "it reads one epoch more than needed; the newest `count` are the same unless that epoch holds a line newer than the live log's, which only two clones that both rolled can make, and then reading further is no worse",
    },
    "supervisor.scope.rules": {
        "overlaps: 1 -> (2) #2":
            "it adds, after every other candidate, each example one level deeper below the other scope's glob; "
            "no pair of globs was found where only that deeper path overlaps, and overlaps() is a documented "
            "heuristic (its Limits), so the extra candidates are not pinned",
    },
    "supervisor.continuity.policy": {
        "<module>: 10.0 -> (11.0)":
            "PERSON_IDLE is a tuning number, not a documented rule: the rule that agentd holds its typing "
            "PERSON_IDLE seconds after a person's keystroke is pinned at its edge with the constant itself "
            "(test_policy_watch); which number is right no test can say",
    },
}
