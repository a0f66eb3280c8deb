"""A failed command's one line on standard error, and its exit status, for what the machine
did (a full disk, an I/O error, a dead pipe, PostgreSQL not answering): never a traceback."""

from __future__ import annotations

import errno
import os
import sys
from urllib.parse import urlparse

from adapters.cli.common import state


def _error(message: str, code: int) -> int:
    sys.stderr.write(f"letterlog: error: {message}\n")
    return code


def _machine_error(e: BaseException) -> int | None:
    """A full disk, an I/O error, a dead pipe: one line (or silence), never a traceback."""
    if isinstance(e, BrokenPipeError) or getattr(e, "errno", None) == errno.EPIPE:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # as if killed by SIGPIPE, like other tools in a pipe
    text = str(e)
    down = _postgres_down(e)
    if down is not None:
        return _error(down, 1)
    if isinstance(e, OSError):
        where = f"{e.filename}: " if e.filename else ""
        if e.errno == errno.ENOSPC:
            return _error(f"{where}no space left on device (nothing more was written)", 1)
        return _error(f"{where}{e.strerror or e}", 1)
    if "disk is full" in text or "disk I/O error" in text:
        return _error(f"{state.data}: {text} (the command was not recorded)", 1)
    return None


def _postgres_down(e: BaseException) -> str | None:
    """One line for a command the log's PostgreSQL did not answer (down, frozen, refusing),
    naming the server, or None (docs/operations.md: exit 1, the machine)."""
    if "psycopg" not in sys.modules:
        return None
    # local: the log's client, after a failed command alone
    from adapters.eventlog.postgreslog import postgres_unreachable

    why = postgres_unreachable(e)
    if why is None:
        return None
    where = "the event store's server"
    try:
        # local: pydantic, after a PostgreSQL failure alone
        from adapters.config.settings import load_settings

        dsn = urlparse(load_settings(data=state.data).postgres_dsn or "")
        where = f"{dsn.hostname}:{dsn.port or 5432}"
    except Exception:  # noqa: BLE001, S110 - the line without the address
        pass
    return (f"PostgreSQL at {where} is not answering ({why}); nothing was done "
            "(LETTERLOG_POSTGRES_TIMEOUT bounds the wait)")
