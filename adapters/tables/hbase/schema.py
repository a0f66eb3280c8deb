"""HBase tables: names, the catalog (HBase itself), creating, flushing, compacting and
dropping tables.

Tables
    Logical table ``T`` is the HBase table ``{prefix}_{T}`` in the default namespace (Thrift1
    cannot create namespaces). The prefix has no ``_``, so the first ``_`` of a physical name
    separates prefix and logical name and two stores with different prefixes never see each
    other's tables. HBase itself is the catalog: ``list_tables`` is ``getTableNames``
    filtered by the prefix, a table's families are its column descriptors (cached per store,
    dropped from the cache when HBase says the table or family is gone).

    Every family is created with ``VERSIONS => 1``: a read returns the cell with the highest
    timestamp whatever order the puts arrived in, and flushes/compactions throw the rest
    away, so re-applied events cost no space. The port's deletes always cover *every*
    version up to theirs, so dropping old versions never changes what a reader sees.

    Thrift1's ``createTable`` takes no split keys and Thrift1 has no split call at all, so
    tables are created with one region and split by HBase as they grow.
    ``hbase_shell_create(spec)`` prints the ``create`` statement with the 127 salt split
    points for an operator to run first; ``create_table`` then finds the table and accepts
    it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from functools import partial
from operator import methodcaller
from typing import Any

from adapters.tables.hbase.calls import HBaseParts, TableInfo, error_message, thrift1
from projections.tablestore import TableSpec, TableSpecConflict, family_of, validate_table_name

SALT_SPLIT_KEYS: tuple[bytes, ...] = tuple(bytes([salt]) for salt in range(1, 128))
"""Split points for tables salted with one byte 0..127: 128 regions, one per salt."""


def hbase_shell_create(spec: TableSpec, *, table_prefix: str = "letterlog") -> str:
    """The ``hbase shell`` statement creating ``spec`` pre-split by the salt byte.

    Thrift1 cannot pre-split; run this first and ``create_table`` accepts the table."""
    families = ", ".join(
        f"{{NAME => '{f}', VERSIONS => 1, BLOOMFILTER => 'ROW'}}" for f in spec.families
    )
    name = f"{table_prefix}_{spec.name}"
    if not spec.split_by_salt:
        return f"create '{name}', {families}"
    splits = ", ".join(f'"\\x{key[0]:02X}"' for key in SALT_SPLIT_KEYS)
    return f"create '{name}', {families}, SPLITS => [{splits}]"


class HBaseSchema(HBaseParts):
    """Logical table names to HBase tables, and table DDL (Thrift1)."""

    def _physical(self, name: str) -> bytes:
        return self._physical_prefix + validate_table_name(name).encode()

    def _forget(self, name: str) -> None:
        with self._lock:
            self._tables.pop(name, None)

    def _table(self, name: str) -> TableInfo:
        found = self._tables.get(name)
        if found is not None:
            return found
        physical = self._physical(name)
        descriptors = self._call(
            "getColumnDescriptors", lambda c: c.getColumnDescriptors(physical), name
        )
        families = frozenset(family_of(key) for key in descriptors)
        table = TableInfo(name, physical, families)
        with self._lock:
            self._tables[name] = table
        return table

    def _physical_names(self) -> list[bytes]:
        return self._call("getTableNames", lambda c: list(c.getTableNames()))

    def physical_name(self, name: str) -> str:
        """The HBase table behind logical table ``name``."""
        return self._physical(name).decode()

    def regions(self, name: str) -> int:
        """How many regions the table has (1 unless pre-split or grown)."""
        table = self._table(name)
        return len(self._call("getTableRegions", lambda c: c.getTableRegions(table.physical), name))

    def create_table(self, spec: TableSpec) -> None:
        physical = self._physical(spec.name)
        wanted = frozenset(f.encode() for f in spec.families)
        descriptors = [
            thrift1.ColumnDescriptor(
                name=family + b":",
                maxVersions=1,
                compression="NONE",
                inMemory=False,
                bloomFilterType="ROW",
                blockCacheEnabled=True,
                timeToLive=-1,
            )
            for family in sorted(wanted)
        ]

        def create(client: Any) -> bool:
            try:
                client.createTable(physical, descriptors)
            except thrift1.AlreadyExists:
                return False
            except thrift1.IOError as error:
                # created by another process between our look and our call (two workers
                # starting together): HBase answers with an IOError naming the exception
                if "TableExistsException" not in error_message(error):
                    raise
                return False
            return True

        def enable(client: Any) -> None:
            try:
                client.enableTable(physical)
            except thrift1.IOError as error:
                # not disabled after all: another process's create was still enabling it
                if "TableNotDisabledException" not in error_message(error):
                    raise

        if physical not in self._physical_names():
            self._call("createTable", create, spec.name)
        elif not self._call("isTableEnabled", lambda c: c.isTableEnabled(physical), spec.name):
            # left disabled by an interrupted drop_table: usable again rather than half gone
            # (or still being enabled by the process creating it)
            self._call("enableTable", enable, spec.name)
        self._forget(spec.name)
        existing = self._table(spec.name).families
        if existing != wanted:
            raise TableSpecConflict(
                f"table {spec.name!r} exists with families "
                f"{tuple(sorted(f.decode() for f in existing))!r}, not {spec.families!r}"
            )

    def flush(self, names: Iterable[str]) -> bool:
        """Writes these tables' memstores out to store files, so that a major compaction
        after it sees every cell (after a purge: the deleted cells and their delete markers
        leave the files) and the write-ahead log that held them can be archived. HBase's
        Thrift gateways have no flush call, but closing a region flushes it: through the
        Thrift2 gateway a table attribute (``letterlog.flushed_at``) is changed and HBase
        reopens the table's regions online, one at a time (``modifyTable`` returns when
        they are back). Without a Thrift2 gateway nothing is done (disabling the tables
        through Thrift1 would fail the stream workers' writes meanwhile) and False is
        returned: the region servers flush on their own schedule
        (``hbase.regionserver.optionalcacheflushinterval``)."""
        if self._clients2 is None:
            return False
        t2 = self._t2

        def reopen(client: Any, physical: bytes) -> None:
            descriptor = client.getTableDescriptor(t2.TTableName(qualifier=physical))
            descriptor.attributes = dict(descriptor.attributes or {})
            descriptor.attributes[b"letterlog.flushed_at"] = b"%d" % time.time_ns()
            client.modifyTable(descriptor)

        for name in names:
            physical = self._physical(name)
            self._call2("modifyTable", partial(reopen, physical=physical), name)
        return True

    def major_compact(self, names: Iterable[str]) -> None:
        """Asks HBase to major-compact these tables (Thrift1 ``majorCompact``; the region
        servers do it in the background): cells hidden by deletes, and the delete markers,
        leave the store files. Cells still in a memstore are not in any store file yet
        (``flush`` first)."""
        for name in names:
            physical = self._physical(name)
            self._call("majorCompact", methodcaller("majorCompact", physical), name)

    def drop_table(self, name: str) -> None:
        physical = self._physical(name)
        self._forget(name)

        def drop(client: Any) -> None:
            for step in (client.disableTable, client.deleteTable):
                try:
                    step(physical)
                except thrift1.IOError as error:
                    text = error_message(error)
                    if "TableNotFoundException" in text:
                        return
                    if "TableNotEnabledException" not in text:
                        raise

        if physical in self._physical_names():
            self._call("dropTable", drop, name)
        self._forget(name)

    def table_exists(self, name: str) -> bool:
        return self._physical(name) in self._physical_names()

    def list_tables(self) -> list[str]:
        cut = len(self._physical_prefix)
        return sorted(
            physical[cut:].decode()
            for physical in self._physical_names()
            if physical.startswith(self._physical_prefix)
        )
