"""The scale-out shape's HBase, built from ``Settings``: a table store on the settings' HBase
(Thrift1, and Thrift2 writes if configured), the payload table on a table store of its own,
and the layered payloads (HBase, then this host's old files: ``letterlog payloads
migrate``, ADR 0072). Its client libraries (happybase, thriftpy2) are imported here, at the
top: only a store whose settings name HBase imports this module."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from adapters.config.settings import Settings
from adapters.files import datadir
from adapters.files.filemodes import private_dir
from adapters.payloads.files import FilePayloadStore
from adapters.payloads.hbase import HBasePayloadStore
from adapters.payloads.layered import LayeredPayloadStore
from adapters.tables.hbase import HBaseTableStore


def hbase_tables(settings: Settings, *, timeout: float | None = None) -> HBaseTableStore:
    """A table store on the settings' HBase (Thrift1, and Thrift2 writes if configured).
    ``timeout``: seconds an HBase call waits and retries (default ``hbase_timeout``)."""
    extra: dict[str, Any] = {}
    thrift2 = settings.hbase_thrift2_port or settings.stream.hbase_thrift2_port
    if thrift2:
        extra["thrift2_port"] = int(thrift2)
        extra["thrift2_idl"] = settings.hbase_thrift2_idl
    seconds = timeout if timeout is not None else settings.hbase_timeout
    return HBaseTableStore(settings.hbase_host, settings.hbase_port,
                           table_prefix=settings.hbase_table_prefix,
                           pool_size=settings.stream.hbase_pool,
                           timeout_ms=int(seconds * 1000), retry_deadline_s=seconds,
                           **extra)


def hbase_payloads(settings: Settings) -> HBasePayloadStore:
    """The payload table in HBase, on a table store of its own (the read models' settings:
    host, port, prefix, timeout; Thrift2 writes if configured), created if absent."""
    tables = hbase_tables(settings)
    try:
        return HBasePayloadStore(tables, threads=settings.stream.hbase_pool, owns_tables=True,
                                 spool_dir=private_dir(settings.data))
    except BaseException:
        tables.close()
        raise


def layered_payloads(settings: Settings) -> LayeredPayloadStore:
    """HBase's payload table (connected on first use), then this host's payload files."""
    local = Path(settings.data) / datadir.PAYLOADS
    return LayeredPayloadStore(partial(hbase_payloads, settings),
                               FilePayloadStore(local) if local.is_dir() else None)
