"""The writer's handle on the second process of ``Letterlog.projecting_in_a_second_process``
(ADR 0027): ``Follower`` starts ``python -m adapters.cli.follower`` and wakes it
after each append.

The follower's standard input carries, first, one line of JSON: the settings of the store to
follow. Then every byte that arrives means "the log has grown": the follower catches the read
models up with the log, as far as it has grown by then, and blocks on its input again (no
polling: an idle follower costs nothing). End of input means the writer is done: the follower
catches up once more and exits 0. Catch-ups take the projection host's file lock, so that
process and any other writer of the same read models never project at once.

A started interpreter of its own (not a ``multiprocessing`` child): no SQLite connection is
inherited, nothing of the parent's main module is imported again. Started with ``-P``: the
working directory is not put first on the module path, so a directory holding another
``adapters`` package (a checkout, say) never replaces the installed one.

Or forked ahead (ADR 0115): a command that knows it will project in bulk (an import) forks
its follower before it opens any database or starts a thread (``adapters.cli.follower.
prestart``), so the follower starts with the modules already imported instead of importing
them again in a new interpreter; it waits for the same first line. ``offer_spare`` hands it
here, and the next ``Follower`` with the same ``linger`` takes it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any


class Forked:
    """A follower forked from this process, with what ``Follower`` uses of a
    ``subprocess.Popen``: ``pid``, ``poll`` and ``wait``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped already (SIGCHLD ignored): as subprocess does
                self.returncode = 0
                return 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code; ``subprocess.TimeoutExpired`` if it runs on past ``timeout``."""
        if self.returncode is not None:
            return self.returncode
        if timeout is not None and not self._ends_within(timeout):
            raise subprocess.TimeoutExpired(f"follower {self.pid}", timeout)
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:  # reaped already (SIGCHLD ignored): its code is lost
            self.returncode = 0
            return 0
        self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def _ends_within(self, timeout: float) -> bool:
        """Whether it has ended, or ends, within ``timeout`` seconds (not reaped): its
        pidfd becomes readable when it ends; a kernel without pidfds is asked every 10 ms."""
        try:
            ended = os.pidfd_open(self.pid)
        except ProcessLookupError:  # reaped already
            return True
        except OSError:  # no pidfd on this kernel (before Linux 5.3)
            deadline = time.monotonic() + timeout
            try:
                while os.waitid(os.P_PID, self.pid,
                                os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                    if time.monotonic() > deadline:
                        return False
                    time.sleep(0.01)
            except ChildProcessError:  # reaped already
                pass
            return True
        try:
            return bool(select.select([ended], [], [], timeout)[0])
        finally:
            os.close(ended)


_spare: tuple[Forked, int, float] | None = None
"""A follower forked ahead, its input's writing end and its linger (``offer_spare``)."""


def offer_spare(process: Forked, input_fd: int, linger: float) -> None:
    """``process`` (forked, waiting for its first line on the other end of ``input_fd``)
    becomes the next ``Follower`` with this ``linger``. A process that never takes it
    closes ``input_fd`` when it ends; the spare then exits without opening anything."""
    global _spare
    if _spare is not None:
        os.close(_spare[1])
    _spare = (process, input_fd, linger)


def _forgot_spare_in_child() -> None:
    """In a process forked later (the mbox reader): its copy of the spare's input is closed,
    or the follower would wait for that process too before it sees its input end."""
    global _spare
    if _spare is not None:
        with contextlib.suppress(OSError):
            os.close(_spare[1])
        _spare = None


os.register_at_fork(after_in_child=_forgot_spare_in_child)


@contextlib.contextmanager
def sigint_ignored() -> Any:
    """SIGINT ignored while the follower is started (from the main thread; elsewhere the
    follower ignores it itself). A terminal's Ctrl-C reaches the whole process group: the
    writer decides what an interrupt means (an import says what landed), and the follower,
    told by its input closing, catches up and exits quietly, never with a traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class Follower:
    """The writer's handle on a follower process: ``start``, ``wake`` after each append,
    ``stop`` (closes its input: it catches up once more and exits)."""

    def __init__(self, settings_json: str, linger: float = 0.0) -> None:
        global _spare
        self.proc: subprocess.Popen[bytes] | Forked
        self._input: IO[bytes]
        if _spare is not None and _spare[2] == linger and _spare[0].poll() is None:
            self.proc, fd, _ = _spare
            _spare = None
            self._input = os.fdopen(fd, "wb")
        else:
            with sigint_ignored():  # inherited: a Python started so leaves SIGINT ignored
                started = subprocess.Popen(
                    [sys.executable, "-P", "-m", "adapters.cli.follower",
                     *(["--linger", f"{linger:g}"] if linger else [])], stdin=subprocess.PIPE)
            assert started.stdin is not None  # stdin=PIPE
            self.proc, self._input = started, started.stdin
        try:
            self._input.write(settings_json.encode() + b"\n")
            self._input.flush()
        except OSError:
            pass  # it died at once: found when it is woken or waited for

    def wake(self) -> bool:
        """Tells the follower the log has grown; False if it is gone."""
        try:
            self._input.write(b"+")
            self._input.flush()
            return True
        except OSError:
            return False

    def stop(self, timeout: float | None = None) -> int | None:
        """Ends its input and waits for it (``timeout``: None if it is still running)."""
        with contextlib.suppress(OSError):
            self._input.close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
