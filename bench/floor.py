"""The bare PTY reader: the floor that agentd's read path is measured against.

One process, one selector over K PTYs, ``os.read`` of what a PTY has and one
``os.write`` of it to a log file per child.  No redaction, no clean text, no
screen, no event loop: the least any supervisor that reads agents through
PTYs must pay.  Standard library only::

    python bench/floor.py CONFIG.json

``CONFIG.json``: ``{"logs": DIR, "programs": {NAME: ARGV}}``.  Each child gets
a PTY (its stdin, stdout and stderr) in a new session; its output goes to
``DIR/NAME.log``.  The reader runs until SIGTERM, then SIGKILLs its children.
"""

from __future__ import annotations

import errno
import json
import os
import selectors
import signal
import subprocess
import sys

READ_SIZE = 65536


def main(argv: list[str]) -> int:
    config = json.loads(open(argv[0]).read())
    logs = config["logs"]
    selector = selectors.DefaultSelector()
    children = []
    for name, args in config["programs"].items():
        master, slave = os.openpty()
        children.append(subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                                         close_fds=True))
        os.close(slave)
        os.set_blocking(master, False)
        log = os.open(os.path.join(logs, f"{name}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        selector.register(master, selectors.EVENT_READ, log)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    read, write = os.read, os.write
    while not stopping and selector.get_map():
        try:
            events = selector.select()
        except InterruptedError:
            continue
        for key, _ in events:
            try:
                data = read(key.fd, READ_SIZE)
            except BlockingIOError:
                continue
            except OSError as exc:
                if exc.errno != errno.EIO:  # EIO: the slave side is closed (Linux's end of a PTY)
                    raise
                data = b""
            if not data:
                selector.unregister(key.fd)
                continue
            view = memoryview(data)
            while view:
                view = view[write(key.data, view):]
    for child in children:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
