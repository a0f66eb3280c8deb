"""``HBaseTableStore``: the table store port on a real HBase, through Thrift1 (happybase) and,
for writes, optionally Thrift2. Why it is the way it is: ``docs/adr/0007-hbase-table-store.md``.

The class is put together from four parts, each in its own module with its share of the
design: ``calls`` (the connection pool, Thrift2 clients, retries and errors), ``schema``
(table names, the catalog, table DDL), ``writes`` (``apply``) and ``reads`` (``get_cells``,
``scan_cells``). This module opens and closes the connections.
"""

from __future__ import annotations

import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from queue import Empty
from typing import Any

import happybase

from adapters.tables.hbase.calls import HBaseCalls, TableInfo, Thrift2Clients
from adapters.tables.hbase.reads import HBaseReads
from adapters.tables.hbase.schema import HBaseSchema
from adapters.tables.hbase.writes import THRIFT2_CALL_CELLS, HBaseWrites
from adapters.tables.hbase_thrift2 import load_thrift2
from projections.capabilities import MajorCompacting
from projections.tablestore import TableStore, TableStoreError, ValuesFromCells

_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-]{0,39}$")


class HBaseTableStore(HBaseReads, HBaseWrites, HBaseSchema, HBaseCalls, ValuesFromCells):
    """The ``TableStore`` port on HBase through a Thrift1 gateway; see the package's modules.

    ``retries`` transport failures are retried per call (backoff from 50 ms up to 2 s,
    never longer than ``retry_deadline_s`` in all); ``pool_size`` Thrift connections are
    shared by all threads, and ``apply`` sends independent version groups over up to
    ``write_concurrency`` of them at once.

    ``thrift2_port`` (a Thrift2 gateway, ``org.apache.hadoop.hbase.thrift2.ThriftServer``, on
    the same ``host``): writes go through Thrift2 ``putMultiple``/``deleteMultiple`` with a
    timestamp per cell, in calls of up to ``thrift2_batch_cells`` cells, up to
    ``write_concurrency`` calls at once; reads and table DDL stay on Thrift1. Thrift2's IDL
    is HBase's own, taken from the hbase-thrift jar (``thrift2_idl``: the ``hbase.thrift``
    file; default: ``hbase_thrift2.default_idl``, from the HBase jar cache).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        table_prefix: str = "letterlog",
        pool_size: int = 4,
        timeout_ms: int = 60_000,
        retries: int = 4,
        retry_deadline_s: float = 30.0,
        write_concurrency: int | None = None,
        thrift2_port: int | None = None,
        thrift2_idl: str | os.PathLike[str] | None = None,
        thrift2_batch_cells: int = THRIFT2_CALL_CELLS,
    ) -> None:
        if not isinstance(table_prefix, str) or not _PREFIX.match(table_prefix):
            raise ValueError(
                f"table_prefix: {table_prefix!r} must be 1..40 of [A-Za-z0-9.-] "
                "(no '_': it separates prefix and table name)"
            )
        if pool_size < 1:
            raise ValueError(f"pool_size: must be >= 1, got {pool_size}")
        if thrift2_batch_cells < 1:
            raise ValueError(f"thrift2_batch_cells: must be >= 1, got {thrift2_batch_cells}")
        self.host, self.port = host, int(port)
        self.thrift2_port = int(thrift2_port) if thrift2_port else None
        self._thrift2_batch_cells = thrift2_batch_cells
        self.table_prefix = table_prefix
        self._physical_prefix = f"{table_prefix}_".encode()
        self._timeout_ms = timeout_ms
        self._retries = retries
        self._retry_deadline = retry_deadline_s
        self._write_concurrency = max(1, write_concurrency or pool_size)
        self._acquire_timeout = max(30.0, 2 * timeout_ms / 1000)
        self._lock = threading.Lock()
        self._tables: dict[str, TableInfo] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False
        self._pool: happybase.ConnectionPool | None = None
        self._pool = self._with_retries(
            "connect",
            lambda: happybase.ConnectionPool(
                pool_size, host=self.host, port=self.port, timeout=timeout_ms
            ),
        )
        self._t2: Any = None
        self._clients2: Thrift2Clients | None = None
        if self.thrift2_port is not None:
            try:
                self._open_thrift2(thrift2_idl, timeout_ms)
            except BaseException:
                self.close()
                raise

    def _open_thrift2(self, idl: str | os.PathLike[str] | None, timeout_ms: int) -> None:
        assert self.thrift2_port is not None
        try:
            self._t2 = load_thrift2(idl)
        except OSError as error:
            raise TableStoreError(
                f"Thrift2 IDL unavailable ({error}); run `python -m devtools.devservers install` "
                "or pass thrift2_idl= (HBase's thrift2/hbase.thrift)"
            ) from error
        clients = Thrift2Clients(self.host, self.thrift2_port, self._write_concurrency, timeout_ms)
        # connect eagerly, as for Thrift1: a wrong address fails here
        first = self._with_retries("connect", clients.take, self._where(thrift2=True))
        clients.give(first)
        self._clients2 = clients

    def __repr__(self) -> str:
        thrift2 = f", thrift2={self.thrift2_port}" if self.thrift2_port else ""
        return f"HBaseTableStore({self.host}:{self.port}{thrift2}, prefix={self.table_prefix!r})"

    def close(self) -> None:
        """Close every pooled connection and the writer threads; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            executor, self._executor = self._executor, None
            pool, self._pool = self._pool, None
            clients2, self._clients2 = self._clients2, None
        if executor is not None:
            executor.shutdown(wait=True)
        if clients2 is not None:
            clients2.close()
        if pool is not None:
            while True:
                try:
                    conn = pool._queue.get_nowait()
                except Empty:
                    break
                conn.close()

    def __enter__(self) -> HBaseTableStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _capabilities(store: HBaseTableStore) -> tuple[TableStore, MajorCompacting]:
    """mypy checks here that the store keeps the port and the capability an erasure finds on
    it (``projections.capabilities.MajorCompacting``)."""
    return store, store
