"""Micro-benchmark of :meth:`supervisor.session.transcript.Transcript.write` and of the redactor.

Run ``python -m bench.transcript_bench [--mb N]``.  Feeds chunks of
realistic agent output (ANSI-coloured lines as the PTY delivers them, with
``\\r\\n`` endings, a few OSC titles and cursor moves, some UTF-8) through the
whole path (redaction, raw ``.log``, clean ``.txt``) and prints MB/s: 64 KiB
chunks (a flood read in one go) and 4 KiB chunks (what one read of a PTY
usually returns).  Then the redactor alone (:meth:`Redactor.feed`), on the
same mix and on a *leaky* mix where one line in 40 holds a secret (an
``sk-`` key, a ``password=``, a URL password, a JWT) so the slow path (match,
map to raw bytes, cut out) is measured too.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from supervisor.session.redact import Redactor
from supervisor.session.transcript import Transcript

CHUNK = 64 * 1024


LEAKS = (
    "key \x1b[33msk-proj-Q7vB2mX9kL4pT8wR1nZ6yH3jF5dS0aGcE\x1b[0m loaded",
    "  db_password=Tr0ub4dorQq88x",
    "  DATABASE_URL=postgres://app:Pa55w0rdS3cr3t@db.internal:5432/app",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
)


def agent_output(size: int, light: bool = False, leaky: bool = False) -> bytes:
    """Deterministic ANSI-coloured agent output of at least ``size`` bytes.

    The default mix is dense (3-4 escape sequences per line, like a TUI
    agent); ``light=True`` colours one line in four (build and test logs).
    """
    lines: list[bytes] = []
    total = 0
    i = 0
    while total < size:
        kind = i % 8
        if kind == 0:
            line = f"\x1b[1m\x1b[36m●\x1b[0m Reading \x1b[4msrc/module_{i % 97}.py\x1b[24m (lines {i}-{i + 40})"
        elif kind == 1:
            line = f"\x1b[32m+    def handler_{i}(self, request: Request) -> Response:\x1b[0m"
        elif kind == 2:
            line = f"\x1b[31m-    return legacy_handler(request, retries={i % 5})\x1b[0m"
        elif kind == 3:
            line = f"\x1b]0;agent: step {i}\x07\x1b[2K\x1b[1G\x1b[33m⠋\x1b[0m Running tests… {i % 100}%"
        elif kind == 4:
            line = f"  test_feature_{i} \x1b[32mPASSED\x1b[0m                      [{i % 100:3d}%]"
        elif kind == 5:
            line = f"\x1b[90m# The transcript keeps the raw bytes and a clean view ({i})\x1b[39m"
        elif kind == 6:
            line = f"\x1b[38;5;208mwarning\x1b[0m: unused variable `tmp_{i}` at line {i % 300}"
        else:
            line = f"Export AGENT_HOME=/home/dev/work/project-{i % 13}; export PATH=$AGENT_HOME/bin:$PATH"
        if light and i % 4:
            line = f"    src/module_{i % 97}.py:{i % 400}: checked {i} names, {i % 7} warnings"
        if leaky and i % 40 == 7:
            line = LEAKS[(i // 40) % len(LEAKS)]
        raw = line.encode() + b"\r\n"
        lines.append(raw)
        total += len(raw)
        i += 1
    return b"".join(lines)


ENV = {"OPENAI_API_KEY": "sk-proj-benchmarkkeyvalue0123456789", "GITHUB_TOKEN": "ghp_bench0123456789abcdef"}


def run(megabytes: int, light: bool = False, chunk: int = CHUNK) -> float:
    """Write ``megabytes`` MB through a Transcript in ``chunk``-byte writes; return MB/s."""
    payload = agent_output(4 * 1024 * 1024, light)
    chunks = [payload[i:i + chunk] for i in range(0, len(payload) - chunk, chunk)]
    target = megabytes * 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        with Transcript(Path(tmp) / "t", "bench", ENV) as transcript:
            written = 0
            start = time.perf_counter()
            cpu_start = time.process_time()
            while written < target:
                for piece in chunks:
                    transcript.write(piece)
                    written += len(piece)
            transcript.flush()
            elapsed = time.perf_counter() - start
            cpu = time.process_time() - cpu_start
            tokens = transcript.estimated_tokens
    mbps = written / elapsed / 1e6
    print(f"transcript, {'light' if light else 'dense'} ANSI mix: {written / 1e6:.1f} MB in {elapsed:.3f} s: "
          f"{mbps:.1f} MB/s wall, {written / cpu / 1e6:.1f} MB/s per CPU-second "
          f"({chunk // 1024} KiB chunks, ~{tokens} tokens of clean text)")
    return mbps


def run_redactor(megabytes: int, leaky: bool, chunk: int = CHUNK) -> float:
    """Feed ``megabytes`` MB through :meth:`Redactor.feed` alone; return MB per CPU-second."""
    payload = agent_output(4 * 1024 * 1024, leaky=leaky)
    chunks = [payload[i:i + chunk] for i in range(0, len(payload) - chunk, chunk)]
    redactor = Redactor(ENV)
    target = megabytes * 1024 * 1024
    written = redacted = 0
    cpu_start = time.process_time()
    while written < target:
        for piece in chunks:
            redacted += redactor.feed(piece).count(b"[REDACTED]")
            written += len(piece)
    redactor.flush()
    cpu = time.process_time() - cpu_start
    mbps = written / cpu / 1e6
    print(f"redactor alone, {'leaky' if leaky else 'dense'} mix: {mbps:.1f} MB per CPU-second "
          f"({chunk // 1024} KiB chunks, {redacted} secrets cut out)")
    return mbps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256, help="megabytes to write (default 256)")
    megabytes = parser.parse_args().mb
    run(megabytes)
    run(megabytes, light=True)
    run(max(1, megabytes // 4), chunk=4096)
    run_redactor(megabytes, leaky=False)
    run_redactor(megabytes, leaky=True)
    run_redactor(max(1, megabytes // 4), leaky=True, chunk=4096)


if __name__ == "__main__":
    main()
