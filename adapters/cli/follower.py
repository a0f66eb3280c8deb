"""``python -m adapters.cli.follower``: the follower itself, an entry point
(``adapters.readside.follower.Follower`` starts it; its module docstring says what the input
carries). It opens the store named on its first input line through the composition root and
catches the read models up each time its input says the log has grown.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import sys
import threading
import time
from typing import Any

from adapters.startup import collector, dataclass_code

if __name__ == "__main__":  # the process's own imports below make objects that live as long
    collector.starting()  # as it does: no collection walks them (ADR 0110)
    dataclass_code.install()  # and define the event classes (ADR 0116)

from adapters.bootstrap.eventstore import event_log  # noqa: E402
from adapters.bootstrap.tables import projection_host  # noqa: E402
from adapters.cli.leaving import leave  # noqa: E402
from adapters.config.settings import load_settings  # noqa: E402
from adapters.readside.follower import Forked, offer_spare, sigint_ignored  # noqa: E402

CHECKPOINT_EVERY = 2000
"""Events projected between two checkpoints of the read models' write-ahead log, each made
when nothing is waiting to be projected (ADR 0111): while an importer appends, this process
copies the log's pages into the file on its own core, where the importer's close would
otherwise copy all of them at its end (0.2-0.3 s for 5,000 messages)."""

RETRY_MAX = 10.0
"""Seconds at most between two tries of a catch-up that failed (a locked ``tables.sqlite``:
a long report, a rebuild, another writer)."""


def _say(text: str) -> None:
    """One line on standard error (the LMTP server's log): never a traceback."""
    os.write(2, f"letterlog follower: {text}\n".encode("utf-8", "replace"))


def follow(settings_json: str | bytes, wakeups: int, linger: float = 0.0) -> int:
    """Follows the log named by ``settings_json`` while ``wakeups`` (a file descriptor)
    delivers bytes, until it is at its end; returns how many events it projected.
    ``linger``: seconds to wait after each catch-up, so that a writer waking it once per
    message (an LMTP server) has it project many messages per catch-up, not one.

    A catch-up that fails (the read models locked past their busy timeout, a full disk) is
    said once on standard error and tried again, with growing pauses (at most
    ``RETRY_MAX``) and at each wake-up, until it succeeds: the follower never dies of it
    (the mail is in the log; only the read models wait). At the end of its input it tries
    once more and exits 0 either way: the next reader catches up."""
    settings = load_settings(**json.loads(settings_json))
    log = event_log(settings)
    failing: str | None = None
    projected = 0
    checkpointed = 0  # ``projected`` at the last checkpoint

    def idle() -> None:
        """Nothing to project right now: checkpoint if enough was projected since the last
        one. A checkpoint that fails is left to the next (it changes nothing visible)."""
        nonlocal checkpointed
        if host is None or projected - checkpointed < CHECKPOINT_EVERY:
            return
        if select.select([wakeups], [], [], 0)[0]:
            return  # more to project first
        checkpointed = projected
        try:
            host.checkpoint()
        except Exception as e:  # noqa: BLE001 - a busy or full disk: the next one, or the close
            _say(f"checkpoint of the read models left for later ({type(e).__name__}: {e})")

    host: Any = None

    def catch_up() -> bool:
        nonlocal failing, projected, host
        try:
            if host is None:  # opening the read models takes their lock too
                host = projection_host(settings, log)
            projected += int(host.catch_up())
        except Exception as e:  # noqa: BLE001 - said, and tried again
            why = f"{type(e).__name__}: {' '.join(str(e).split())}"
            if failing is None:
                _say(f"read models not updated ({why}); trying again")
            failing = why
            return False
        if failing is not None:
            _say("read models current again")
            failing = None
        return True

    try:
        try:
            owed = not catch_up()
            pause = 0.0
            while True:
                if owed:
                    pause = min(max(0.5, pause * 2), RETRY_MAX)
                ready, _, _ = select.select([wakeups], [], [], pause if owed else None)
                if not ready:  # a pause after a failure ended: try again
                    owed = not catch_up()
                    continue
                more = os.read(wakeups, 65536)  # the writer appended, or is done
                owed = not catch_up()
                if not owed:
                    pause = 0.0
                if not more:
                    return projected
                if not owed:
                    idle()
                if linger:  # let the next wake-ups gather: one catch-up for all of them
                    time.sleep(linger)
        finally:
            if host is not None:
                host.close()
    finally:
        log.close()


def serve(fd: int, linger: float) -> int:
    """The follower's work: the store named by the first line of ``fd``, followed while
    ``fd`` delivers bytes (``follow``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the writer's to act on (``Follower``); a
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # service's stop too: its input ends
    line = b""
    while b"\n" not in line:  # unbuffered: what follows the line is left for ``follow``
        chunk = os.read(fd, 1)
        if not chunk:
            return 0  # the writer went away before saying what to follow
        line += chunk
    collector.started()
    with collector.bulk_collections():  # it projects in bulk: an import, an LMTP server's mail
        follow(line, fd, linger)
    return 0


def main() -> int:
    linger = float(sys.argv[sys.argv.index("--linger") + 1]) if "--linger" in sys.argv else 0.0
    return serve(sys.stdin.fileno(), linger)


def _clean_to_fork() -> bool:
    """Whether this process may fork its follower: one thread (a lock held by another would
    stay held in the child for good) and no SQLite database open (SQLite keeps a process's
    locks on a file in memory: a child that opened the same file would believe it held
    them). Linux only: it reads ``/proc/self/fd``."""
    if threading.active_count() != 1:
        return False
    try:
        descriptors = os.listdir("/proc/self/fd")
    except OSError:
        return False
    for name in descriptors:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # the listing's own descriptor, closed by now
        if target.endswith((".sqlite", ".sqlite-wal", ".sqlite-shm", "-journal")):
            return False
    return True


def prestart(linger: float = 0.0) -> bool:
    """Forks this process's follower now (ADR 0115), before the store is opened: it starts
    with every module this process imported (a new interpreter spends ~0.2 s of CPU
    importing them again) and waits for the settings of the store to follow, which the next
    ``Follower`` sends. False if this process may not fork (``_clean_to_fork``): the
    follower is then started as a new interpreter when needed."""
    if not _clean_to_fork():
        return False
    reading, writing = os.pipe()
    with sigint_ignored():  # a Ctrl-C to the group is the importer's (``Follower``)
        pid = os.fork()
    if pid == 0:  # the follower: it leaves with os._exit, never through the parent's
        code = 1  # exit handlers (its temporary directories, its children: not this one's)
        try:
            os.close(writing)
            gc.freeze()  # what the fork inherited is never walked or collected here
            code = serve(reading, linger)
        except BaseException as e:  # noqa: BLE001 - said in one line, as the follower does
            _say(f"stopped: {type(e).__name__}: {e}")
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os._exit(code)
    os.close(reading)
    offer_spare(Forked(pid), writing, linger)
    return True


if __name__ == "__main__":
    leave(main())  # without the interpreter's teardown: its writer waits for this exit
