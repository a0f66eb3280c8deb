"""``python -m adapters.cli.follower``: the follower itself, an entry point
(``adapters.readside.follower.Follower`` starts it; its module docstring says what the input
carries). It opens the store named on its first input line through the composition root and
catches the read models up each time its input says the log has grown.
"""

from __future__ import annotations

import json
import os
import sys
import time


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
