"""Settings on the driver and in the executors.

The driver reads ``LETTERLOG_`` variables (``adapters.settings``) and ships them with the job
as plain JSON (``to_wire``); an executor rebuilds the same ``Settings`` from it, so a
cluster's executors need no environment of their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.settings import Settings


def to_wire(settings: Settings) -> dict[str, Any]:
    wire = settings.model_dump(mode="json")
    wire["data"] = str(Path(settings.data).resolve())
    return wire


def from_wire(wire: dict[str, Any]) -> Settings:
    return Settings(**wire)


def open_event_log(wire: dict[str, Any]) -> Any:
    """The event log (an eventsourcing application) the settings name, opened to read."""
    from adapters.embedded import postgres_env_from_dsn
    from adapters.eventlog.store import open_log, postgres_env, sqlite_env

    settings = from_wire(wire)
    if settings.event_store == "sqlite":
        env = sqlite_env(str(Path(settings.data) / "events.sqlite"), settings.durability)
    else:
        env = postgres_env(postgres_env_from_dsn(settings.postgres_dsn or ""))
    return open_log(env)


def open_tables(wire: dict[str, Any]) -> Any:
    """The table store the settings name: HBase, or the embedded ``tables.sqlite``."""
    settings = from_wire(wire)
    if settings.table_store == "hbase":
        from adapters.tables.hbase import HBaseTableStore

        extra: dict[str, Any] = {}
        if settings.hbase_thrift2_port:
            extra["thrift2_port"] = settings.hbase_thrift2_port
        return HBaseTableStore(settings.hbase_host, settings.hbase_port,
                               table_prefix=settings.hbase_table_prefix, **extra)
    from adapters.tables.sqlite import SqliteTableStore

    return SqliteTableStore(Path(settings.data) / "tables.sqlite")
