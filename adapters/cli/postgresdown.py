"""The one line for a command that the log's PostgreSQL did not answer (down, frozen,
refusing), naming the server: exit status 1, the machine (docs/operations.md)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from adapters.config.settings import load_settings
from adapters.eventlog.postgreslog import postgres_unreachable


def postgres_down(e: BaseException, data: Path) -> str | None:
    """The line for ``e`` if PostgreSQL did not answer, else None."""
    why = postgres_unreachable(e)
    if why is None:
        return None
    where = "the event store's server"
    try:
        dsn = urlparse(load_settings(data=data).postgres_dsn or "")
        where = f"{dsn.hostname}:{dsn.port or 5432}"
    except Exception:  # noqa: BLE001, S110 - the line without the address
        pass
    return (f"PostgreSQL at {where} is not answering ({why}); nothing was done "
            "(LETTERLOG_POSTGRES_TIMEOUT bounds the wait)")
