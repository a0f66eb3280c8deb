"""``HBaseTableStore``: the table store port on a real HBase, through Thrift1 (happybase) and,
for writes, optionally Thrift2.

Why it is the way it is: ``docs/adr/0007-hbase-table-store.md``. In short:

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

Writes
    Every cell carries an explicit timestamp = the mutation's version. Thrift1 has exactly
    one timestamp per ``mutateRowsTs`` call, so ``apply`` groups the batch by
    (table, version) and sends each group as one or more ``mutateRowsTs`` calls, with
    ``Put`` as a put mutation, ``DeleteColumn`` as a delete mutation of ``family:qualifier``
    (HBase ``Delete.addColumns``: all versions <= ts) and ``DeleteRow`` as delete mutations
    of every family (``Delete.addFamily`` per family, which is what ``Delete(row, ts)``
    does). Before that, the batch is reduced without changing its outcome: of several puts
    of one cell only the highest version is kept (the last one for equal versions), and
    puts that a delete of the same batch covers are dropped. Groups are sent concurrently
    over the connection pool when there are several: every operation commutes with every
    other (timestamps decide, not arrival order), so the order does not matter.

    Consequence (weaker than the port's "one ``apply`` is atomic per row"): a row's puts of
    one version are one HBase ``Put``, atomic; its deletes of that version are one
    ``Delete`` (the gateway sends puts, then deletes); mutations of one row with *different*
    versions are separate HBase operations. A reader can see some versions of a batch
    before others, never half of one version's puts. Thrift1 has no ``RowMutations``.

Writes through Thrift2 (``thrift2_port=``)
    Thrift2's ``TColumnValue`` and ``TColumn`` carry their own timestamp, so the reduced
    batch is sent per table as ``putMultiple`` (one ``TPut`` per row, every cell at its own
    version) and ``deleteMultiple`` (per row one ``TDelete`` of type ``DELETE_COLUMNS`` with
    its column deletes -- ``Delete.addColumns`` -- and one ``TDelete`` without columns at the
    row delete's version -- ``Delete(row, ts)``, every family), in calls of about
    ``thrift2_batch_cells`` cells / 4 MiB (whole rows), several at once. The number of calls
    no longer depends on the number of versions. A row's puts of one ``apply`` are one HBase
    ``Put`` (atomic, all versions), its deletes one or two ``Delete``s. Thrift2's IDL is
    HBase's own ``hbase.thrift``, read from the hbase-thrift jar at run time
    (``adapters.tables.hbase_thrift2.load_thrift2``). Reads and table DDL stay on Thrift1.

Reads
    ``getRowWithColumns`` and ``scannerOpenWithScan`` + ``scannerGetList``; HBase itself
    hides deleted cells and leaves out rows with nothing visible. Scans read in pages of
    whole rows, each page its own short-lived scanner resumed after the last row seen, so no
    connection or server-side scanner is held while the caller works on a row (writing while
    scanning is fine, and an abandoned iterator leaks nothing). Reversed scans use HBase's
    reversed scanner; bounds HBase cannot express exactly (an inclusive low bound, an
    exclusive high bound) are tightened on the client.

Errors
    Transport failures between this process and the Thrift gateway (``TTransportException``,
    ``OSError`` -- refused, reset, broken pipe, timeouts) are retried with exponential
    backoff (tenacity) on a fresh connection; that is safe because every write is
    idempotent. When the retries are spent, ``TableStoreError`` names the Thrift host and
    port. Region-level trouble (region moving, server busy) is retried by the HBase client
    inside the gateway (``hbase.client.retries.number``); what still fails comes back as a
    ``TableStoreError`` with HBase's message, ``TableNotFound`` or ``UnknownFamily``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from queue import Empty, SimpleQueue
from typing import Any, TypeVar

import happybase
from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)
from thriftpy2.transport import TTransportException

from projections.tablestore import (
    Cells,
    DeleteColumn,
    DeleteRow,
    InvalidMutation,
    KeyRange,
    Mutation,
    Put,
    StoreClosed,
    TableNotFound,
    TableSpec,
    TableSpecConflict,
    TableStoreError,
    UnknownFamily,
    ValuesFromCells,
    family_of,
    is_family_filter,
    key_range,
    validate_table_name,
)

# happybase registers its Thrift1 IDL (thriftpy2) as the module ``Hbase_thrift`` on import.
_thrift: Any = importlib.import_module("Hbase_thrift")

__all__ = ["HBaseTableStore", "SALT_SPLIT_KEYS", "hbase_shell_create"]

R = TypeVar("R")

SALT_SPLIT_KEYS: tuple[bytes, ...] = tuple(bytes([salt]) for salt in range(1, 128))
"""Split points for tables salted with one byte 0..127: 128 regions, one per salt."""

_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-]{0,39}$")
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (TTransportException, OSError, EOFError)
_MAX_CALL_MUTATIONS = 1000
_MAX_CALL_BYTES = 4 << 20
_THRIFT2_CALL_CELLS = 2000
_FIRST_PAGE = 128
_MAX_PAGE = 1024


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


@dataclass(frozen=True, slots=True)
class _Table:
    name: str
    physical: bytes
    families: frozenset[bytes]


@dataclass(slots=True)
class _Group:
    """One ``mutateRowsTs`` worth of work: rows -> Thrift mutations, all at one timestamp."""

    physical: bytes
    table: str
    version: int
    rows: dict[bytes, list[Any]] = field(default_factory=dict)


@dataclass(slots=True)
class _Reduced:
    """A checked batch, reduced without changing its outcome (see the module docstring)."""

    tables: dict[str, _Table]
    puts: dict[tuple[str, bytes, bytes], tuple[int, bytes]]
    column_deletes: dict[tuple[str, bytes, bytes], int]
    row_deletes: dict[tuple[str, bytes], int]


@dataclass(slots=True)
class _Call2:
    """One Thrift2 ``putMultiple`` (``TPut`` items) or ``deleteMultiple`` (``TDelete``)."""

    op: str
    physical: bytes
    table: str
    items: list[Any] = field(default_factory=list)


class _Thrift2Clients:
    """Thrift2 clients for any number of threads: an idle stack of at most ``keep`` clients;
    a thread takes one (or opens a new one), gives it back when the call got an answer,
    and discards it after a transport failure."""

    def __init__(self, host: str, port: int, keep: int, timeout_ms: int) -> None:
        self._address = (host, port, timeout_ms)
        self._idle: SimpleQueue[Any] = SimpleQueue()
        self._keep = keep
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> Any:
        try:
            return self._idle.get_nowait()
        except Empty:
            from adapters.tables.hbase_thrift2 import thrift2_client

            host, port, timeout_ms = self._address
            return thrift2_client(host, port, timeout_ms=timeout_ms)

    def give(self, client: Any) -> None:
        with self._lock:
            if not self._closed and self._idle.qsize() < self._keep:
                self._idle.put(client)
                return
        client.close()

    @staticmethod
    def discard(client: Any) -> None:
        with contextlib.suppress(Exception):  # it is broken already
            client.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        while True:
            try:
                self.discard(self._idle.get_nowait())
            except Empty:
                return


def _message(error: BaseException) -> str:
    raw = getattr(error, "message", None)
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    return str(raw if raw is not None else error)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else "(no message)"


class HBaseTableStore(ValuesFromCells):
    """The ``TableStore`` port on HBase through a Thrift1 gateway; see the module docstring.

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
        thrift2_batch_cells: int = _THRIFT2_CALL_CELLS,
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
        self._tables: dict[str, _Table] = {}
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
        self._clients2: _Thrift2Clients | None = None
        if self.thrift2_port is not None:
            try:
                self._open_thrift2(thrift2_idl, timeout_ms)
            except BaseException:
                self.close()
                raise

    def _open_thrift2(self, idl: str | os.PathLike[str] | None, timeout_ms: int) -> None:
        from adapters.tables.hbase_thrift2 import load_thrift2

        assert self.thrift2_port is not None
        try:
            self._t2 = load_thrift2(idl)
        except OSError as error:
            raise TableStoreError(
                f"Thrift2 IDL unavailable ({error}); run `python -m adapters.devservers install` "
                "or pass thrift2_idl= (HBase's thrift2/hbase.thrift)"
            ) from error
        clients = _Thrift2Clients(self.host, self.thrift2_port, self._write_concurrency, timeout_ms)
        # connect eagerly, as for Thrift1: a wrong address fails here
        first = self._with_retries("connect", clients.take, self._where(thrift2=True))
        clients.give(first)
        self._clients2 = clients

    def __repr__(self) -> str:
        thrift2 = f", thrift2={self.thrift2_port}" if self.thrift2_port else ""
        return f"HBaseTableStore({self.host}:{self.port}{thrift2}, prefix={self.table_prefix!r})"

    # -- calls, retries, errors --------------------------------------------------------------

    def _where(self, *, thrift2: bool = False) -> str:
        if thrift2:
            return f"HBase Thrift2 server at {self.host}:{self.thrift2_port}"
        return f"HBase Thrift server at {self.host}:{self.port}"

    def _with_retries(self, op: str, fn: Callable[[], R], where: str | None = None) -> R:
        retrying = Retrying(
            retry=retry_if_exception_type(_TRANSPORT_ERRORS),
            stop=stop_after_attempt(self._retries + 1) | stop_after_delay(self._retry_deadline),
            wait=wait_exponential(multiplier=0.05, min=0.05, max=2.0),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return fn()
        except _TRANSPORT_ERRORS as error:
            attempts = retrying.statistics.get("attempt_number", "?")
            raise TableStoreError(
                f"{where or self._where()} is unreachable or failing ({op}, {attempts} attempts): "
                f"{type(error).__name__}: {_first_line(_message(error))}"
            ) from error
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(self, op: str, fn: Callable[[Any], R], table: str | None = None) -> R:
        """Run ``fn(thrift_client)`` on a pooled connection, with retries and error mapping."""
        if self._closed or self._pool is None:
            raise StoreClosed(f"table store {self!r} is closed")
        pool = self._pool

        def once() -> R:
            with pool.connection(timeout=self._acquire_timeout) as conn:
                try:
                    return fn(conn.client)
                except (_thrift.IOError, _thrift.IllegalArgument) as error:
                    # an answer from HBase: the connection is fine, keep it in the pool
                    failure: BaseException = error
            raise self._translate(failure, table) from failure

        try:
            return self._with_retries(op, once)
        except happybase.NoConnectionsAvailable as error:
            raise TableStoreError(
                f"{self._where()}: no pooled connection free within {self._acquire_timeout} s"
            ) from error

    def _call2(self, op: str, fn: Callable[[Any], R], table: str) -> R:
        """Run ``fn(thrift2_client)`` with retries and error mapping (as ``_call``)."""
        clients = self._clients2
        if self._closed or clients is None:
            raise StoreClosed(f"table store {self!r} is closed")
        answers = (self._t2.TIOError, self._t2.TIllegalArgument)

        def once() -> R:
            client = clients.take()
            try:
                result = fn(client)
            except answers as error:
                # an answer from HBase: the connection is fine, keep it
                clients.give(client)
                failure: BaseException = error
            except BaseException:
                clients.discard(client)
                raise
            else:
                clients.give(client)
                return result
            raise self._translate(failure, table, thrift2=True) from failure

        return self._with_retries(op, once, self._where(thrift2=True))

    def _translate(
        self, error: BaseException, table: str | None, *, thrift2: bool = False
    ) -> TableStoreError:
        text = _message(error)
        if "TableNotFoundException" in text or "TableNotEnabledException" in text:
            if table is not None:
                self._forget(table)
            return TableNotFound(f"table {table!r} does not exist")
        if "NoSuchColumnFamilyException" in text:
            if table is not None:
                self._forget(table)
            return UnknownFamily(f"table {table!r}: {_first_line(text)}")
        return TableStoreError(
            f"{self._where(thrift2=thrift2)}: {type(error).__name__}: {_first_line(text)}"
        )

    # -- catalog -----------------------------------------------------------------------------

    def _physical(self, name: str) -> bytes:
        return self._physical_prefix + validate_table_name(name).encode()

    def _forget(self, name: str) -> None:
        with self._lock:
            self._tables.pop(name, None)

    def _table(self, name: str) -> _Table:
        found = self._tables.get(name)
        if found is not None:
            return found
        physical = self._physical(name)
        descriptors = self._call(
            "getColumnDescriptors", lambda c: c.getColumnDescriptors(physical), name
        )
        families = frozenset(family_of(key) for key in descriptors)
        table = _Table(name, physical, families)
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

    # -- tables ------------------------------------------------------------------------------

    def create_table(self, spec: TableSpec) -> None:
        physical = self._physical(spec.name)
        wanted = frozenset(f.encode() for f in spec.families)
        descriptors = [
            _thrift.ColumnDescriptor(
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
            except _thrift.AlreadyExists:
                return False
            return True

        if physical not in self._physical_names():
            self._call("createTable", create, spec.name)
        elif not self._call("isTableEnabled", lambda c: c.isTableEnabled(physical), spec.name):
            # left disabled by an interrupted drop_table: usable again rather than half gone
            self._call("enableTable", lambda c: c.enableTable(physical), spec.name)
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
            self._call2("modifyTable", lambda c, p=physical: reopen(c, p), name)
        return True

    def major_compact(self, names: Iterable[str]) -> None:
        """Asks HBase to major-compact these tables (Thrift1 ``majorCompact``; the region
        servers do it in the background): cells hidden by deletes, and the delete markers,
        leave the store files. Cells still in a memstore are not in any store file yet
        (``flush`` first)."""
        for name in names:
            physical = self._physical(name)
            self._call("majorCompact", lambda c, p=physical: c.majorCompact(p), name)

    def drop_table(self, name: str) -> None:
        physical = self._physical(name)
        self._forget(name)

        def drop(client: Any) -> None:
            for step in (client.disableTable, client.deleteTable):
                try:
                    step(physical)
                except _thrift.IOError as error:
                    text = _message(error)
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

    # -- writes ------------------------------------------------------------------------------

    def apply(self, mutations: Iterable[Mutation]) -> None:
        batch = self._reduce(mutations)
        if self._clients2 is not None:
            self._run(self._send2, self._plan2(batch))
        else:
            groups = self._plan(batch)
            self._run(self._send, [call for group in groups for call in self._split(group)])

    def _run(self, send: Callable[[Any], None], calls: Sequence[Any]) -> None:
        """Send every call; several at once over the writer threads when there are several.
        Every call commutes with every other (timestamps decide), so order does not matter;
        all are waited for, then the first failure is raised."""
        if not calls:
            return
        if len(calls) == 1 or self._write_concurrency == 1:
            for call in calls:
                send(call)
            return
        executor = self._writers()
        futures = [executor.submit(send, call) for call in calls]
        errors = [error for future in futures if (error := future.exception()) is not None]
        if errors:
            raise errors[0]

    def _reduce(self, mutations: Iterable[Mutation]) -> _Reduced:
        """Check the whole batch and reduce it (see the module docstring): per cell only the
        newest put (the last of equal versions), per cell/row only the newest delete, no put
        or column delete that a delete of the batch covers."""
        puts: dict[tuple[str, bytes, bytes], tuple[int, bytes]] = {}
        column_deletes: dict[tuple[str, bytes, bytes], int] = {}
        row_deletes: dict[tuple[str, bytes], int] = {}
        tables: dict[str, _Table] = {}
        for m in mutations:
            table = tables.get(m.table)
            if table is None:
                table = tables[m.table] = self._table(m.table)
            if isinstance(m, Put):
                self._check_family(table, m.column)
                key = (m.table, m.row, m.column)
                known = puts.get(key)
                if known is None or m.version >= known[0]:
                    puts[key] = (m.version, m.value)
            elif isinstance(m, DeleteColumn):
                self._check_family(table, m.column)
                key = (m.table, m.row, m.column)
                column_deletes[key] = max(m.version, column_deletes.get(key, -1))
            elif isinstance(m, DeleteRow):
                row_key = (m.table, m.row)
                row_deletes[row_key] = max(m.version, row_deletes.get(row_key, -1))
            else:
                raise InvalidMutation(f"mutation: {m!r:.80} is not a Put, DeleteColumn, DeleteRow")
        for key, (version, _) in list(puts.items()):
            name, row, _column = key
            if version <= max(column_deletes.get(key, -1), row_deletes.get((name, row), -1)):
                del puts[key]
        for key, version in list(column_deletes.items()):
            if version <= row_deletes.get((key[0], key[1]), -1):
                del column_deletes[key]
        return _Reduced(tables, puts, column_deletes, row_deletes)

    def _plan(self, batch: _Reduced) -> list[_Group]:
        """Thrift1: group a reduced batch by (table, version), one timestamp per call."""
        tables = batch.tables
        groups: dict[tuple[str, int], _Group] = {}

        def rows_of(name: str, version: int) -> dict[bytes, list[Any]]:
            group = groups.get((name, version))
            if group is None:
                group = groups[name, version] = _Group(tables[name].physical, name, version)
            return group.rows

        for (name, row, column), (version, value) in batch.puts.items():
            mutation = _thrift.Mutation(isDelete=False, column=column, value=value)
            rows_of(name, version).setdefault(row, []).append(mutation)
        for (name, row, column), version in batch.column_deletes.items():
            mutation = _thrift.Mutation(isDelete=True, column=column)
            rows_of(name, version).setdefault(row, []).append(mutation)
        for (name, row), version in batch.row_deletes.items():
            found = rows_of(name, version).setdefault(row, [])
            found.extend(
                _thrift.Mutation(isDelete=True, column=family)
                for family in sorted(tables[name].families)
            )
        return sorted(groups.values(), key=lambda g: (g.version, g.table))

    @staticmethod
    def _check_family(table: _Table, column: bytes) -> None:
        if family_of(column) not in table.families:
            raise UnknownFamily(f"column {column!r}: table {table.name!r} has no such family")

    @staticmethod
    def _split(group: _Group) -> Iterator[_Group]:
        """Cut a group into calls of at most ~1000 mutations / ~4 MiB (whole rows)."""
        part = _Group(group.physical, group.table, group.version)
        count = size = 0
        for row, mutations in group.rows.items():
            weight = sum(len(m.column) + len(m.value or b"") + 8 for m in mutations) + len(row)
            if part.rows and (
                count + len(mutations) > _MAX_CALL_MUTATIONS or size + weight > _MAX_CALL_BYTES
            ):
                yield part
                part = _Group(group.physical, group.table, group.version)
                count = size = 0
            part.rows[row] = mutations
            count += len(mutations)
            size += weight
        if part.rows:
            yield part

    def _send(self, group: _Group) -> None:
        batch = [_thrift.BatchMutation(row=row, mutations=ms) for row, ms in group.rows.items()]
        try:
            self._call(
                "mutateRowsTs",
                lambda c: c.mutateRowsTs(group.physical, batch, group.version, {}),
                group.table,
            )
        except TableStoreError as error:
            # A batch to a table dropped meanwhile fails as "RetriesExhausted...: <table>".
            if type(error) is TableStoreError and not self.table_exists(group.table):
                self._forget(group.table)
                raise TableNotFound(f"table {group.table!r} does not exist") from error
            raise

    def _plan2(self, batch: _Reduced) -> list[_Call2]:
        """Thrift2: per table, one ``TPut`` per row (every cell with its own timestamp), one
        ``TDelete`` per row for its column deletes (``DELETE_COLUMNS``: all versions <= the
        column's timestamp) and one per row delete (no columns, the row's timestamp: HBase's
        ``Delete(row, ts)``, every family). Cut into calls of ~``thrift2_batch_cells`` cells /
        ~4 MiB, whole rows."""
        t2 = self._t2
        put_rows: dict[tuple[str, bytes], list[Any]] = {}
        for (name, row, column), (version, value) in batch.puts.items():
            family, _, qualifier = column.partition(b":")
            cell = t2.TColumnValue(
                family=family, qualifier=qualifier, value=value, timestamp=version
            )
            put_rows.setdefault((name, row), []).append(cell)
        delete_rows: dict[tuple[str, bytes], list[Any]] = {}
        for (name, row, column), version in batch.column_deletes.items():
            family, _, qualifier = column.partition(b":")
            target = t2.TColumn(family=family, qualifier=qualifier, timestamp=version)
            delete_rows.setdefault((name, row), []).append(target)

        calls: list[_Call2] = []
        open_calls: dict[tuple[str, str], tuple[_Call2, list[int]]] = {}

        def add(op: str, name: str, item: Any, cells: int, size: int) -> None:
            found = open_calls.get((op, name))
            if found is not None:
                call, weight = found
                if (
                    weight[0] + cells > self._thrift2_batch_cells
                    or weight[1] + size > _MAX_CALL_BYTES
                ):
                    found = None
            if found is None:
                call = _Call2(op, batch.tables[name].physical, name)
                weight = [0, 0]
                open_calls[op, name] = (call, weight)
                calls.append(call)
            call.items.append(item)
            weight[0] += cells
            weight[1] += size

        for (name, row), cells in put_rows.items():
            size = len(row) + sum(
                len(c.family) + len(c.qualifier) + len(c.value) + 16 for c in cells
            )
            add("putMultiple", name, t2.TPut(row=row, columnValues=cells), len(cells), size)
        for (name, row), columns in delete_rows.items():
            delete = t2.TDelete(row=row, columns=columns, deleteType=t2.TDeleteType.DELETE_COLUMNS)
            size = len(row) + sum(len(c.family) + len(c.qualifier) + 16 for c in columns)
            add("deleteMultiple", name, delete, len(columns), size)
        for (name, row), version in batch.row_deletes.items():
            delete = t2.TDelete(row=row, timestamp=version)
            add("deleteMultiple", name, delete, 1, len(row) + 16)
        return calls

    def _send2(self, call: _Call2) -> None:
        def send(client: Any) -> None:
            if call.op == "putMultiple":
                client.putMultiple(call.physical, call.items)
                return
            failed = client.deleteMultiple(call.physical, call.items)
            if failed:
                raise TableStoreError(
                    f"{self._where(thrift2=True)}: deleteMultiple left {len(failed)} of "
                    f"{len(call.items)} deletes undone in table {call.table!r}"
                )

        try:
            self._call2(call.op, send, call.table)
        except TableStoreError as error:
            if type(error) is TableStoreError and not self.table_exists(call.table):
                self._forget(call.table)
                raise TableNotFound(f"table {call.table!r} does not exist") from error
            raise

    def _writers(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._closed:
                raise StoreClosed(f"table store {self!r} is closed")
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self._write_concurrency, thread_name_prefix="hbase-tables-write"
                )
            return self._executor

    # -- reads -------------------------------------------------------------------------------

    def _columns(self, table: _Table, columns: Sequence[bytes] | None) -> list[bytes] | None:
        """The port's column filter in Thrift1 terms: a family is ``b"family"`` (no colon);
        a column of a family also asked for as a whole is left out (HBase would narrow the
        family to that column)."""
        if columns is None:
            return None
        whole: set[bytes] = set()
        single: set[bytes] = set()
        for column in columns:
            family = family_of(column)
            if family not in table.families:
                raise UnknownFamily(f"column {column!r}: table {table.name!r} has no such family")
            if is_family_filter(column):
                whole.add(family)
            else:
                single.add(column)
        return sorted(whole) + sorted(c for c in single if family_of(c) not in whole)

    def get_cells(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Cells:
        t = self._table(table)
        wanted = self._columns(t, columns)
        if wanted == []:
            return {}
        found = self._call(
            "getRowWithColumns",
            lambda c: c.getRowWithColumns(t.physical, row, wanted, {}),
            table,
        )
        if not found:
            return {}
        return {col: (cell.value, cell.timestamp) for col, cell in sorted(found[0].columns.items())}

    def scan_cells(
        self,
        table: str,
        *,
        prefix: bytes | None = None,
        start: bytes | None = None,
        stop: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        columns: Sequence[bytes] | None = None,
    ) -> Iterator[tuple[bytes, Cells]]:
        t = self._table(table)  # fail at the call, not at the first next()
        wanted = self._columns(t, columns)
        bounds = key_range(prefix=prefix, start=start, stop=stop, reverse=reverse)
        if wanted == [] or bounds.is_empty() or (limit is not None and limit <= 0):
            return iter(())
        return self._scan(t, bounds, reverse, limit, wanted)

    def _scan(
        self,
        table: _Table,
        bounds: KeyRange,
        reverse: bool,
        limit: int | None,
        columns: list[bytes] | None,
    ) -> Iterator[tuple[bytes, Cells]]:
        low, high = bounds.low, bounds.high
        remaining = limit
        if reverse:
            # HBase: start = high bound (inclusive), stop = low bound (exclusive).
            start_row: bytes | None = high
            skip: bytes | None = None if bounds.high_inclusive else high
            stop_row = _below(low) if low is not None else None
        else:
            start_row, skip, stop_row = low, None, high
        page = _FIRST_PAGE if remaining is None else min(_MAX_PAGE, remaining + 1)
        while True:
            rows = self._page(table, start_row, stop_row, reverse, columns, page)
            last: bytes | None = None
            for result in rows:
                key = result.row
                last = key
                if key == skip:
                    continue
                if reverse and low is not None and key < low:
                    return
                yield (
                    key,
                    {c: (cell.value, cell.timestamp) for c, cell in sorted(result.columns.items())},
                )
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return
            if len(rows) < page or last is None:
                return
            if reverse:
                start_row, skip = last, last
            else:
                start_row = last + b"\x00"
            page = min(_MAX_PAGE, page * 4)
            if remaining is not None:
                page = min(page, remaining + 1)

    def _page(
        self,
        table: _Table,
        start: bytes | None,
        stop: bytes | None,
        reverse: bool,
        columns: list[bytes] | None,
        rows: int,
    ) -> list[Any]:
        scan = _thrift.TScan(
            startRow=start,
            stopRow=stop,
            columns=columns,
            caching=rows,
            reversed=reverse or None,
        )

        def read(client: Any) -> list[Any]:
            scanner = client.scannerOpenWithScan(table.physical, scan, {})
            try:
                return list(client.scannerGetList(scanner, rows))
            finally:
                client.scannerClose(scanner)

        return self._call("scan", read, table.name)

    # -- lifecycle ---------------------------------------------------------------------------

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


def _below(low: bytes) -> bytes | None:
    """An exclusive stop row for a reversed scan that must include ``low``: ``low`` minus one
    exactly when it ends with a zero byte, else a key just below it (the client drops the
    few rows between that key and ``low``). None: no bound."""
    if low.endswith(b"\x00"):
        return low[:-1] or None
    return low[:-1] + bytes([low[-1] - 1]) + b"\xff" * 8
