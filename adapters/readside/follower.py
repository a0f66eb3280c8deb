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

import json
import os
import sys


def follow(settings_json: str | bytes, wakeups: int) -> int:
    """Follows the log named by ``settings_json`` while ``wakeups`` (a file descriptor)
    delivers bytes, until it is at its end; returns how many events it projected."""
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
        finally:
            host.close()
    finally:
        log.close()


def main() -> int:
    fd = sys.stdin.fileno()
    line = b""
    while b"\n" not in line:  # unbuffered: what follows the line is left for ``follow``
        chunk = os.read(fd, 1)
        if not chunk:
            return 0  # the writer went away before saying what to follow
        line += chunk
    follow(line, fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
