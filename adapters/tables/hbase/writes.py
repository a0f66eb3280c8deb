"""HBase writes: ``apply`` through Thrift1 ``mutateRowsTs`` or Thrift2
``putMultiple``/``deleteMultiple``.

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

A fold's tables (``load``, ``BulkLoading``)
    A folding runner hands over its tables as records already reduced (at most one cell
    and one tombstone per ``(row, column)``, in key order): ``load`` turns them into
    ``TPut``s and ``TDelete``s row by row, without ``Put`` objects to reduce again, and plans
    them with any mutations given beside into the same calls. The cells written are those of
    ``apply`` of the same mutations. Without Thrift2, ``load`` is that ``apply``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from adapters.tables.hbase.calls import HBaseParts, TableInfo, thrift1
from projections.tablestore import (
    DeleteColumn,
    DeleteRow,
    InvalidMutation,
    Mutation,
    Put,
    StoreClosed,
    TableLoad,
    TableNotFound,
    TableStoreError,
    UnknownFamily,
    family_of,
    hidden,
    replaces,
)

_MAX_CALL_MUTATIONS = 1000
_MAX_CALL_BYTES = 4 << 20
THRIFT2_CALL_CELLS = 2000


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

    tables: dict[str, TableInfo]
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


class _Plan2:
    """Thrift2 calls being filled: per (operation, table) the open call takes whole rows
    until it holds ~``cells`` cells or ~4 MiB, then the next one opens."""

    def __init__(self, cells: int) -> None:
        self.limit = cells
        self.calls: list[_Call2] = []
        self._open: dict[tuple[str, str], tuple[_Call2, list[int]]] = {}

    def add(self, op: str, name: str, physical: bytes, item: Any, cells: int,
            size: int) -> None:
        found = self._open.get((op, name))
        if found is not None:
            call, weight = found
            if weight[0] + cells > self.limit or weight[1] + size > _MAX_CALL_BYTES:
                found = None
        if found is None:
            call = _Call2(op, physical, name)
            weight = [0, 0]
            self._open[op, name] = (call, weight)
            self.calls.append(call)
        call.items.append(item)
        weight[0] += cells
        weight[1] += size


class HBaseWrites(HBaseParts):
    """``apply``: a batch reduced, planned into calls and sent over the pool; ``load``: a
    fold's tables, already reduced, straight into Thrift2 calls."""

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
        tables: dict[str, TableInfo] = {}
        for m in mutations:
            table = tables.get(m.table)
            if table is None:
                table = tables[m.table] = self._table(m.table)
            if isinstance(m, Put):
                self._check_family(table, m.column)
                key = (m.table, m.row, m.column)
                known = puts.get(key)
                if replaces(m.version, None if known is None else known[0]):
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
            if hidden(version, max(column_deletes.get(key, -1), row_deletes.get((name, row), -1))):
                del puts[key]
        for key, version in list(column_deletes.items()):
            if hidden(version, row_deletes.get((key[0], key[1]), -1)):
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
            mutation = thrift1.Mutation(isDelete=False, column=column, value=value)
            rows_of(name, version).setdefault(row, []).append(mutation)
        for (name, row, column), version in batch.column_deletes.items():
            mutation = thrift1.Mutation(isDelete=True, column=column)
            rows_of(name, version).setdefault(row, []).append(mutation)
        for (name, row), version in batch.row_deletes.items():
            found = rows_of(name, version).setdefault(row, [])
            found.extend(
                thrift1.Mutation(isDelete=True, column=family)
                for family in sorted(tables[name].families)
            )
        return sorted(groups.values(), key=lambda g: (g.version, g.table))

    @staticmethod
    def _check_family(table: TableInfo, column: bytes) -> None:
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
        batch = [thrift1.BatchMutation(row=row, mutations=ms) for row, ms in group.rows.items()]
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

    def _plan2(self, batch: _Reduced, plan: _Plan2 | None = None) -> list[_Call2]:
        """Thrift2: per table, one ``TPut`` per row (every cell with its own timestamp), one
        ``TDelete`` per row for its column deletes (``DELETE_COLUMNS``: all versions <= the
        column's timestamp) and one per row delete (no columns, the row's timestamp: HBase's
        ``Delete(row, ts)``, every family). Cut into calls of ~``thrift2_batch_cells`` cells /
        ~4 MiB, whole rows (added to ``plan`` if given)."""
        t2 = self._t2
        plan = plan if plan is not None else _Plan2(self._thrift2_batch_cells)
        value_of = t2.TColumnValue  # (family, qualifier, value, timestamp): positional is cheaper
        put_rows: dict[tuple[str, bytes], list[Any]] = {}
        for (name, row, column), (version, value) in batch.puts.items():
            family, _, qualifier = column.partition(b":")
            put_rows.setdefault((name, row), []).append(value_of(family, qualifier, value, version))
        delete_rows: dict[tuple[str, bytes], list[Any]] = {}
        for (name, row, column), version in batch.column_deletes.items():
            family, _, qualifier = column.partition(b":")
            target = t2.TColumn(family=family, qualifier=qualifier, timestamp=version)
            delete_rows.setdefault((name, row), []).append(target)

        tables = batch.tables
        for (name, row), cells in put_rows.items():
            size = len(row) + sum(
                len(c.family) + len(c.qualifier) + len(c.value) + 16 for c in cells
            )
            plan.add("putMultiple", name, tables[name].physical,
                     t2.TPut(row=row, columnValues=cells), len(cells), size)
        for (name, row), columns in delete_rows.items():
            size = len(row) + sum(len(c.family) + len(c.qualifier) + 16 for c in columns)
            plan.add("deleteMultiple", name, tables[name].physical,
                     self._column_deletes(row, columns), len(columns), size)
        for (name, row), version in batch.row_deletes.items():
            delete = t2.TDelete(row=row, timestamp=version)
            plan.add("deleteMultiple", name, tables[name].physical, delete, 1, len(row) + 16)
        return plan.calls

    def load(self, loads: Sequence[TableLoad], mutations: Iterable[Mutation] = ()) -> None:
        """A fold's tables written as they are (``BulkLoading``; see the module docstring):
        the cells and tombstones of ``loads`` -- at most one per ``(row, column)``, in key
        order, so nothing is left to reduce -- go straight into Thrift2 calls, one ``TPut``
        per row; ``mutations`` are reduced and planned as ``apply`` does; all the calls are
        sent together. Without a Thrift2 gateway it is ``apply`` of the same mutations."""
        if self._clients2 is None:
            self.apply([*(m for load in loads for m in load.mutations()), *mutations])
            return
        plan = _Plan2(self._thrift2_batch_cells)
        for load in loads:
            self._load2(load, plan)
        extra = list(mutations)
        if extra:
            self._plan2(self._reduce(extra), plan)
        self._run(self._send2, plan.calls)

    def _load2(self, load: TableLoad, plan: _Plan2) -> None:
        """One table's folded cells and tombstones into ``plan`` (whole rows per call)."""
        t2 = self._t2
        table = self._table(load.table)
        name, physical = load.table, table.physical
        columns: dict[bytes, tuple[bytes, bytes]] = {}  # column -> (family, qualifier), checked
        value_of = t2.TColumnValue
        row: bytes | None = None
        cells: list[Any] = []
        size = 0
        for key, column, value, version in load.cells:
            if key != row:
                if cells:
                    plan.add("putMultiple", name, physical, t2.TPut(row=row, columnValues=cells),
                             len(cells), size)
                row, cells, size = key, [], len(key)
            split = columns.get(column)
            if split is None:
                self._check_family(table, column)
                family, _, qualifier = column.partition(b":")
                split = columns[column] = (family, qualifier)
            cells.append(value_of(split[0], split[1], value, version))
            size += len(column) + len(value) + 16
        if cells:
            plan.add("putMultiple", name, physical, t2.TPut(row=row, columnValues=cells),
                     len(cells), size)
        row = None
        targets: list[Any] = []
        for key, column, version in load.tombs:
            if not column:  # a row delete: HBase's Delete(row, ts), every family
                plan.add("deleteMultiple", name, physical, t2.TDelete(row=key, timestamp=version),
                         1, len(key) + 16)
                continue
            if key != row:
                if targets:
                    plan.add("deleteMultiple", name, physical, self._column_deletes(row, targets),
                             len(targets), len(row or b"") + 32 * len(targets))
                row, targets = key, []
            split = columns.get(column)
            if split is None:
                self._check_family(table, column)
                family, _, qualifier = column.partition(b":")
                split = columns[column] = (family, qualifier)
            targets.append(t2.TColumn(family=split[0], qualifier=split[1], timestamp=version))
        if targets:
            plan.add("deleteMultiple", name, physical, self._column_deletes(row, targets),
                     len(targets), len(row or b"") + 32 * len(targets))

    def _column_deletes(self, row: bytes | None, columns: list[Any]) -> Any:
        t2 = self._t2
        return t2.TDelete(row=row, columns=columns, deleteType=t2.TDeleteType.DELETE_COLUMNS)

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
