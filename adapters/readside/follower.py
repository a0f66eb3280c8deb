"""``python -m adapters.readside.follower``: the second process of
``Letterlog.projecting_in_a_second_process`` (ADR 0027).

Its standard input carries, first, one line of JSON: the settings of the store to follow.
Then every byte that arrives means "the log has grown": the follower catches the read models
up with the log, as far as it has grown by then, and blocks on its input again (no polling:
an idle follower costs nothing). End of input means the writer is done: the follower catches
up once more and exits 0. Catch-ups take the projection host's file lock, so this process
and any other writer of the same read models never project at once.

A started interpreter of its own (not a ``multiprocessing`` child): no SQLite connection is
inherited, nothing of the parent's main module is imported again.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from typing import Any


@contextlib.contextmanager
def _sigint_ignored() -> Any:
    """SIGINT ignored while the follower is started (from the main thread; elsewhere the
    follower ignores it itself). A terminal's Ctrl-C reaches the whole process group: the
    writer decides what an interrupt means (an import says what landed), and the follower,
    told by its input closing, catches up and exits quietly, never with a traceback."""
    import signal
    import threading

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
        with _sigint_ignored():  # inherited: a Python started so leaves SIGINT ignored
            self.proc: subprocess.Popen[bytes] = subprocess.Popen(
                [sys.executable, "-m", "adapters.readside.follower",
                 *(["--linger", f"{linger:g}"] if linger else [])], stdin=subprocess.PIPE)
        self._input: Any = self.proc.stdin
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


def follow(settings_json: str | bytes, wakeups: int, linger: float = 0.0) -> int:
    """Follows the log named by ``settings_json`` while ``wakeups`` (a file descriptor)
    delivers bytes, until it is at its end; returns how many events it projected.
    ``linger``: seconds to wait after each catch-up, so that a writer waking it once per
    message (an LMTP server) has it project many messages per catch-up, not one."""
    from adapters.bootstrap import event_log, projection_host
    from adapters.settings import load_settings

    settings = load_settings(**json.loads(settings_json))
    log = event_log(settings)
    try:
        host = projection_host(settings, log)
        try:
            projected = int(host.catch_up())
            while True:
                more = os.read(wakeups, 65536)  # blocks until the writer appended, or is done
                projected += int(host.catch_up())
                if not more:
                    return projected
                if linger:  # let the next wake-ups gather: one catch-up for all of them
                    time.sleep(linger)
        finally:
            host.close()
    finally:
        log.close()


def main() -> int:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the writer's to act on (``Follower``)
    fd = sys.stdin.fileno()
    line = b""
    while b"\n" not in line:  # unbuffered: what follows the line is left for ``follow``
        chunk = os.read(fd, 1)
        if not chunk:
            return 0  # the writer went away before saying what to follow
        line += chunk
    linger = float(sys.argv[sys.argv.index("--linger") + 1]) if "--linger" in sys.argv else 0.0
    follow(line, fd, linger)
    return 0


if __name__ == "__main__":
    sys.exit(main())
