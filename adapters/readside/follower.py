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
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
from typing import IO, Any


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
        with sigint_ignored():  # inherited: a Python started so leaves SIGINT ignored
            self.proc: subprocess.Popen[bytes] = subprocess.Popen(
                [sys.executable, "-P", "-m", "adapters.cli.follower",
                 *(["--linger", f"{linger:g}"] if linger else [])], stdin=subprocess.PIPE)
        assert self.proc.stdin is not None  # stdin=PIPE
        self._input: IO[bytes] = self.proc.stdin
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
