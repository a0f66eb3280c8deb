"""A failed command's one line on standard error, and its exit status, for what the machine
did (a full disk, an I/O error, a dead pipe, PostgreSQL not answering, a busy store): never a
traceback."""

from __future__ import annotations

import errno
import os
import sys

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
    """One line for a command the log's PostgreSQL did not answer, or None: only a command
    that loaded PostgreSQL's client can have failed on it."""
    if "psycopg" not in sys.modules:
        return None
    # the log's client and pydantic, after a failed command that loaded psycopg alone
    from adapters.cli.postgresdown import postgres_down  # local: after a psycopg failure alone

    return postgres_down(e, state.data)


TEMPORARY = (("domain.errors", "StoreBusy"), ("projections.tablemodel", "TableStoreUnavailable"),
             ("domain.directory", "DirectoryUnavailable"))
"""A busy store, or a table store or user directory that does not answer: the machine, not
the input (exit status 1, not 2)."""


def temporary(e: BaseException) -> bool:
    """Whether ``e`` is one of the ``TEMPORARY`` errors. A class whose module no command
    loaded has no instance: its module is looked up, never imported (``--help`` and the
    fast reads load neither the table store's port nor the user directory's)."""
    kinds = [getattr(sys.modules[module], name) for module, name in TEMPORARY
             if module in sys.modules]
    return isinstance(e, tuple(kinds))
