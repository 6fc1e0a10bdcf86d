"""Runs inside a loopback-only network namespace: the fake model server and ``agentd start --foreground``.

Started by tests/test_codex_e2e.py as::

    unshare -rn sh -c 'ip link set lo up && exec "$@"' jail PYTHON tests/codex_jail.py \
        --root PROJECT --port 8080 --control SOCK --log REQUESTS.jsonl --daemon-log OUT

The namespace is new, so the fixed port is always free.  The test (outside the
namespace) talks to the daemon through its control socket (a filesystem
object, reachable from any network namespace) and to this helper through
``--control``, a Unix socket taking one JSON object per connection:

``{"op": "control", ...}``   update the fake server's knobs (tests/fake_responses.py)
``{"op": "server", "up": false|true}``   stop / start the model server (same port)
``{"op": "ping"}``

SIGTERM: stop the daemon (SIGTERM: it stops its units) and the server, then exit.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import fake_responses


class Server:
    def __init__(self, port: int, log: str) -> None:
        self.port, self.log = port, log
        self.httpd = None
        self.thread: threading.Thread | None = None

    def up(self) -> None:
        if self.httpd is None:
            self.httpd = fake_responses.serve(self.port, None, self.log)
            self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
            self.thread.start()

    def down(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--control", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--daemon-log", required=True)
    args = ap.parse_args()

    server = Server(args.port, args.log)
    server.up()
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ctl.bind(args.control)
    ctl.listen(8)
    out = open(args.daemon_log, "ab")
    daemon = subprocess.Popen([sys.executable, "-m", "supervisor", "--root", args.root, "start", "--foreground"],
                              cwd=args.root, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    done = threading.Event()

    def finish(*_: object) -> None:
        done.set()
        try:
            ctl.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        ctl.close()

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    threading.Thread(target=lambda: (daemon.wait(), None), daemon=True).start()
    while not done.is_set():
        try:
            conn, _ = ctl.accept()
        except OSError:
            break
        with conn:
            try:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                req = json.loads(data or b"{}")
                op = req.pop("op", "ping")
                if op == "control":
                    with fake_responses._lock:
                        fake_responses.CONTROL.update(req)
                        reply = dict(fake_responses.CONTROL)
                elif op == "server":
                    server.up() if req.get("up") else server.down()
                    reply = {"up": server.httpd is not None}
                else:
                    reply = {"pid": os.getpid(), "daemon": daemon.pid, "daemon_rc": daemon.poll()}
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except Exception as exc:  # noqa: BLE001 - report to the test
                conn.sendall(json.dumps({"error": str(exc)}).encode() + b"\n")
    if daemon.poll() is None:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    server.down()


if __name__ == "__main__":
    main()
