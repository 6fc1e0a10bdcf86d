"""The read path of a :class:`~.pty.Session`: its PTY read without blocking, in batches, to the transcript
and the listeners.

The master fd is non-blocking and registered with the event loop; each wakeup
reads with ``os.read`` until ``EAGAIN`` or a short read (the PTY had no more),
at most :data:`READ_CAP` bytes, and that batch is processed once: one
redaction pass, one clean-text pass, one write per transcript file, one call
per listener, on disk before the next batch is read.  A slow stream is parked
(:mod:`.parking`): read with the other slow streams on one timer.  Linux
reports the end of a PTY as ``EIO``: taken as end of file, and the bytes still
buffered are drained first, so the last output before an exit is never lost.

Two kinds of listeners see the output.  *Raw* listeners (:meth:`PtyReader.add_listener`:
the screen, turn detection) get every batch at once, as read.  *Output*
listeners (:meth:`PtyReader.add_output_listener`: attached viewers) get what the
transcript wrote, redacted: a possible secret prefix reaches them only once
its token has ended, however long that takes.
"""

from __future__ import annotations

import asyncio
import errno
import os
import time
from collections.abc import Callable

from .parking import parking_of, slow_stream
from .transcript import Transcript

READ_SIZE = 65536
#: Most bytes read in one wakeup before they are processed and written (one batch; see _read_available).
READ_CAP = 262144
#: A read shorter than this emptied the PTY (a full one hands over ~4 KiB): the batch ends there.
SHORT_READ = 2048


class PtyReader:
    """The reading half of a :class:`~.pty.Session` (it holds the fd, the loop, the transcript)."""

    _fd: int
    _loop: asyncio.AbstractEventLoop | None
    _listeners: list[Callable[[bytes], None]]
    _output_listeners: list[Callable[[bytes], None]]
    _last_read_at: float  # monotonic time of the last wakeup that read something
    _input_at: float  # monotonic time input was last queued for the agent (its echo and answer are not parked)
    transcript: Transcript
    eof: bool
    last_output_at: float

    def add_listener(self, callback: Callable[[bytes], None]) -> None:
        """``callback(raw_bytes)`` for every chunk read, at once and unredacted (screen, turn detection)."""
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[bytes], None]) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    def add_output_listener(self, callback: Callable[[bytes], None]) -> None:
        """``callback(redacted_bytes)`` for what the transcript appends to the ``.log`` (attached viewers)."""
        self._output_listeners.append(callback)

    def remove_output_listener(self, callback: Callable[[bytes], None]) -> None:
        if callback in self._output_listeners:
            self._output_listeners.remove(callback)

    def _output(self, data: bytes) -> None:
        if data:
            for listener in list(self._output_listeners):
                listener(data)

    # -- output -----------------------------------------------------------------
    def _on_readable(self) -> None:
        got = self._read_available()
        if got <= 0 or self.eof or self._loop is None:
            return
        # A small amount soon after the last read (a slow stream): stop watching
        # the fd and let the loop's parking read it with the other slow streams,
        # so the next few bursts are read together (see .parking).
        if self._slow(got):
            self._loop.remove_reader(self._fd)
            parking_of(self._loop).park(self)

    def _slow(self, got: int) -> bool:
        now = self.last_output_at
        elapsed = now - self._last_read_at
        self._last_read_at = now
        return slow_stream(got, elapsed, now - self._input_at)

    def poll_parked(self) -> bool:
        """Parked (a slow stream): read what came; stay parked while it is still a slow stream."""
        if self._fd < 0 or self.eof or self._loop is None:
            return False
        got = self._read_available()
        if got > 0 and not self.eof and self._slow(got):
            return True
        self.watch_again()
        return False

    def watch_again(self) -> None:
        """Watch the PTY again (after a quiet interval or a fast read; or the parked read failed)."""
        if self._fd >= 0 and not self.eof and self._loop is not None:
            self._loop.add_reader(self._fd, self._on_readable)

    def _read_available(self, cap: int | None = READ_CAP) -> int:
        """Read what is there, until ``EAGAIN`` or ``cap`` bytes (None: everything, batch by batch).

        Each batch (the reads of one wakeup, at most :data:`READ_CAP` bytes) is
        processed once: one redaction pass, one clean-text pass, one write per
        transcript file, one call per listener; it is on disk before the next
        batch is read.  So one flood cannot starve the other agents, and a
        PTY's ~4 KiB reads do not each pay the per-chunk work.
        Returns the number of bytes read (-1 after the end of the PTY).
        """
        total = 0
        fd = self._fd
        read = os.read
        while True:
            chunks: list[bytes] = []
            got = 0
            ended = False
            while got < READ_CAP:
                try:
                    data = read(fd, READ_SIZE)
                except BlockingIOError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EIO:  # Linux: EIO once the slave side is closed
                        raise
                    data = b""
                if not data:
                    ended = True
                    break
                chunks.append(data)
                got += len(data)
                if len(data) < SHORT_READ:
                    break  # the PTY had no more: skip the read that would say EAGAIN (epoll wakes us again)
            if got:
                self._deliver(chunks[0] if len(chunks) == 1 else b"".join(chunks))
                total += got
                self.last_output_at = time.monotonic()
            if ended:
                self._on_eof()
                return -1
            if cap is not None or got < READ_CAP:
                return total

    def _deliver(self, data: bytes) -> None:
        """One batch: the transcript (redacted), then the output listeners and the raw listeners."""
        try:  # never raises OSError (a full disk is counted there); nothing may cost the listeners the batch
            released = self.transcript.write(data)
        except Exception:  # noqa: BLE001 - e.g. closed meanwhile: the screen and turn detection go on
            released = b""
        if released and self._output_listeners:
            self._output(released)
        listeners = self._listeners
        if len(listeners) == 1:
            listeners[0](data)
        else:
            for listener in list(listeners):
                listener(data)

    def _on_eof(self) -> None:
        if self.eof:
            return
        self.eof = True
        if self._loop is not None and self._fd >= 0:
            self._loop.remove_reader(self._fd)
        self._output(self.transcript.flush())  # the stream has ended: nothing more can follow

    def drain(self) -> None:
        """Read everything still buffered in the PTY (called when the process has exited).

        What the redactor holds back stays held while the PTY is open (a
        grandchild may still be printing the rest of a secret); it is written
        at the end of the PTY or by :meth:`close`.
        """
        if self._fd >= 0 and not self.eof:
            self._read_available(cap=None)
