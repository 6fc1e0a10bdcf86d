"""A scripted fake coding agent.  THIS IS A TEST DOUBLE, not an agent.

It behaves like an interactive coding agent in a terminal so that agentd's
tests and the demo unit can exercise real PTYs, real processes and real
signals without an API key: it prints a banner, then a prompt (no newline
after it), reads one message at a time, "works" (prints output), and prints
the prompt again.  All output goes straight to fd 1 with ``os.write``
(unbuffered).  Standard library only; starts fast.

Input, like a real TUI
----------------------
When stdin is a terminal it is switched to a raw-ish mode at start (ICANON,
ECHO, ISIG, IEXTEN off; ICRNL, INLCR, IGNCR, IXON off; output processing
such as ONLCR left alone, so ``\n`` still prints as ``\r\n``) and restored
on every exit the program controls (``exit``, ``crash``, Ctrl-D, EOF,
``--crash-after``, SIGTERM/SIGHUP with the default disposition).  The fake
agent does its own line editing (:class:`LineEditor`):

* printable characters are echoed if the terminal had ECHO on at start (so
  under pexpect with ``echo=False`` nothing is echoed, as before);
* Backspace (DEL or ^H) deletes a character, Ctrl-U the whole line;
* Enter (``\r`` or ``\n``; ``\r\n`` counts once) submits the message;
* a bracketed paste ``ESC[200~ ... ESC[201~`` is taken verbatim, newlines
  included, and the following Enter submits it as ONE message (no 4 KiB
  canonical line limit: a 12 KiB paste arrives whole);
* other escape sequences (arrow keys) are ignored;
* Ctrl-C discards the line (``^C``, new prompt); while busy (``sleep``, a
  slow checkpoint) it interrupts the work and goes back to the prompt;
* Ctrl-D on an empty line exits with status 0, like real agents.

Empty messages just re-prompt and are not logged.  The hard constraints' digest
agentd types after its messages (``agentd: the project's N hard constraints``,
after a blank line or, typed line by line, at the end of the line) is logged
with the message and then set aside, as a person reads past it: ``run ...``
stays a command.

Messages
--------
A one-line message whose first word is a command below runs it.  A message
whose first line starts with ``CHECKPOINT`` (the daemon's checkpoint prompt)
runs the ``--on-checkpoint`` behaviour.  Anything else is a *task*: the agent
prints ``working on: <first line, truncated>`` and ``--task-lines``
deterministic work lines (so the transcript grows), then the prompt.

``--on-checkpoint`` modes:

``confirm`` (default)  like an agent using its shell: runs
                       ``agentd [--root $AGENTD_ROOT] note TEXT --confirmed``
                       and ``agentd ... decide TEXT --why "because ..., so
                       ..." --tag task`` and ``agentd ... task-state TEXT``
                       (the "State at interruption" line of its module's
                       task) (argv lists, ``agentd`` from PATH, else
                       ``python -m supervisor``), prints ``checkpoint
                       written``.  Every text names ``$AGENTD_SESSION``
                       (:func:`checkpoint_texts`).
``ignore``             prints ``I have nothing to add.``, writes nothing.
``slow:S``             busy for S seconds (Ctrl-C interrupts it: nothing
                       written), then ``confirm``.

Run: ``python -m supervisor.fakeagent [flags]``

Commands (typed at the prompt, one per line)
--------------------------------------------
``echo TEXT``          print TEXT
``work N``             print N lines of deterministic, plausible agent output
                       (ANSI-coloured with ``--color``)
``write PATH TEXT``    append TEXT + newline to PATH (relative to the working
                       directory), print ``wrote PATH``
``env NAME``           print the value of environment variable NAME (empty
                       line when unset)
``run ARGV...``        run a program like an agent's shell tool (argv split
                       like a shell would, never run through one), print
                       ``$ ARGV...``, its output, then ``[exit N]``
``crash CODE``         exit at once with status CODE
``exit``               exit with status 0
``sleep S``            be busy for S seconds, then prompt again
``hold PATH [N]``      print N work lines (default 0), then be busy until PATH
                       exists (a test ends the turn when it chooses; Ctrl-C
                       interrupts), print ``released by PATH``, prompt again
``hang``               stop answering: read no more input (Ctrl-C included)
                       and print nothing more (``--work-interval`` output
                       included), until a signal ends the process
``ask S``              show an approval dialog ("Would you like to run the following
                       command?" ... "1. Yes, proceed") and wait S seconds for an
                       answer nobody gives (Ctrl-C declines it), then prompt again
``flood N``            write exactly N bytes of deterministic payload
                       (:func:`flood_payload`) as fast as possible, then prompt
``spawn``              start a long-lived grandchild (a sleeping Python
                       process), print ``grandchild PID``
``spawn-setsid``       same, but the grandchild runs in a new session (setsid:
                       it escapes the process group), print ``grandchild PID``
``pid``                print this process's pid
``help``               list the commands
Anything else is a task (see above); empty lines just re-prompt.

Flags
-----
``--prompt TEXT``               prompt (default ``fake> ``)
``--banner TEXT``               banner printed first
``--crash-after SECONDS``       exit on its own after SECONDS with
                                ``--exit-code`` (default 1)
``--crash-unless PATH``         exit at once (status 1) unless PATH exists
``--exit-code N``               status for ``--crash-after`` (default 1) and
                                ``--exit-after-output`` (default 0)
``--ignore-sigterm``            ignore SIGTERM (SIGKILL still kills it; the
                                ignored disposition is inherited by grandchildren)
``--ignore-sighup``             ignore SIGHUP; on terminal hang-up / EOF of
                                stdin keep running (like an agent that survives
                                its terminal) instead of exiting 0
``--spawn-grandchild``          ``spawn`` at start
``--spawn-setsid-grandchild``   ``spawn-setsid`` at start
``--flood BYTES``               ``flood BYTES`` at start
``--print-env NAME``            print ``NAME=value`` at start (repeatable)
``--work-interval SECONDS``     print ``--work-lines`` lines (default 3) every
                                SECONDS on its own, from a background thread
``--work-lines N``              lines per ``--work-interval`` tick
``--color``                     ANSI colours in ``work`` output
``--exit-after-output TEXT``    after the start-up actions print TEXT and exit
                                immediately (tests that the last bytes before
                                exit are not lost)
``--script FILE``               run the commands in FILE (one per line, ``#``
                                comments) at start, as if typed
``--input-log PATH``            append every submitted message, exactly as
                                received and before it is interpreted, as a
                                JSON line ``{"n": N, "text": "..."}`` (N from 1)
``--on-checkpoint MODE``        ``confirm`` (default), ``ignore``, ``slow:S``
``--task-lines N``              work lines printed per task (default 4)
``--plan-script FILE``          what to do for each task of a plan (supervisor/fakeagent/plan.py)

``--work-interval`` output never corrupts the line being typed: at the prompt
the line is erased, the work printed, and the prompt plus the typed text
redrawn.

Start-up order: banner, ``--print-env``, grandchildren, ``--flood``,
``--script``, ``--exit-after-output``, then the prompt loop.  Grandchildren
get /dev/null for stdin/stdout/stderr, so they never hold the terminal open.
"""

from __future__ import annotations

from .agent import (
           COMMANDS,
           DEFAULT_BANNER,
           DEFAULT_PROMPT,
           FakeAgent,
           checkpoint_texts,
           main,
)
from .terminal import out
from .work import flood_payload, work_lines

__all__ = ["COMMANDS", "DEFAULT_BANNER", "DEFAULT_PROMPT", "FakeAgent", "checkpoint_texts", "flood_payload", "main", "out",
           "work_lines"]
