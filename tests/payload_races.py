"""Interleavings of a put with a conditional delete (``delete_unless_touched``) of the HBase
payload store, for any table store: a ``Hooked`` table store runs a step of the other party
right after one of its writes. In each, the put has returned (a delivery may commit an
event naming the payload's address), so the payload at the address it returned must be whole
and readable at the end (ADR 0099: a put that cannot re-use a payload being deleted stores
the content under a new address)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from adapters.payloads.hbase import DOOMED, TOUCHED, HBasePayloadStore
from projections.tablestore import Cells, Mutation, Put, TableStore
from tests.contracts.payload_contract import FakeClock

MakeStore = Callable[[Any, FakeClock], HBasePayloadStore]
DATA = b"a payload two deliveries share " * 3


class Hooked:
    """A table store that runs ``hook()`` once, right after the first ``apply`` holding a
    put of ``column`` (``column=None``: right after the next row read)."""

    def __init__(self, tables: TableStore) -> None:
        self.tables = tables
        self.column: bytes | None = None
        self.hook: Callable[[], None] | None = None

    def after(self, column: bytes | None, hook: Callable[[], None]) -> None:
        self.column, self.hook = column, hook

    def apply(self, mutations: Iterable[Mutation]) -> None:
        batch = list(mutations)
        self.tables.apply(batch)
        if self.hook is not None and any(isinstance(m, Put) and m.column == self.column
                                         for m in batch):
            hook, self.hook = self.hook, None
            hook()

    def get_cells(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> Cells:
        cells = self.tables.get_cells(table, row, columns)
        if self.hook is not None and self.column is None:
            hook, self.hook = self.hook, None
            hook()
        return cells

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tables, name)


def put_between_the_decision_and_the_mark(make: MakeStore, tables: Hooked) -> None:
    """The deleter has read the payload untouched since its horizon; a delivery re-uses it
    (touches it and reads it back unmarked) before the deleter marks it: the deleter's second
    look sees the touch and keeps it."""
    clock = FakeClock()
    deleter, writer = make(tables, clock), make(tables, clock)
    ref = writer.put(DATA)
    clock.now += 60
    put: list[Any] = []
    tables.after(None, lambda: put.append(writer.put(DATA)))
    assert deleter.delete_unless_touched(ref.address, clock.now) is None
    assert tables.hook is None
    assert put == [ref]
    assert b"".join(writer.open(ref.address)) == DATA


def put_between_the_mark_and_the_check(make: MakeStore, tables: Hooked) -> None:
    """The deleter has marked the payload; a delivery puts it before the deleter looks again:
    the deleter sees the touch and keeps it (or the put, seeing the mark, wrote it again)."""
    clock = FakeClock()
    deleter, writer = make(tables, clock), make(tables, clock)
    ref = writer.put(DATA)
    clock.now += 60
    put: list[Any] = []
    tables.after(DOOMED, lambda: put.append(writer.put(DATA)))
    deleter.delete_unless_touched(ref.address, clock.now)
    assert tables.hook is None  # the put ran between the two
    assert b"".join(writer.open(put[0].address)) == DATA


def delete_between_the_touch_and_the_check(make: MakeStore, tables: Hooked) -> None:
    """A delivery has touched the stored payload; a deleter whose horizon is later decides,
    marks and deletes before the put reads back: the put finds it gone and writes it again."""
    clock = FakeClock()
    deleter, writer = make(tables, clock), make(tables, clock)
    ref = writer.put(DATA)
    clock.now += 60
    tables.after(TOUCHED, lambda: deleter.delete_unless_touched(ref.address, clock.now + 1))
    again = writer.put(DATA)
    assert tables.hook is None
    assert again.sha256 == ref.sha256 and again.address != ref.address  # stored anew
    assert b"".join(writer.open(again.address)) == DATA
    assert [address for address, _, _ in writer.list()] == [again.address]


def delete_while_a_fresh_copy_is_written(make: MakeStore, tables: Hooked) -> None:
    """The deleter marks a copy and deletes it in the instant a second host, whose clock is
    behind, writes the same content fresh after the delete: the fresh copy is written again
    until it is visible above the delete."""
    ahead, behind = FakeClock(), FakeClock()
    ahead.now += 5
    deleter, writer = make(tables, ahead), make(tables, behind)
    ref = deleter.put(DATA)
    assert deleter.delete_unless_touched(ref.address, ahead.now) == len(DATA)
    again = writer.put(DATA)
    assert b"".join(writer.open(again.address)) == DATA


RACES = (put_between_the_decision_and_the_mark, put_between_the_mark_and_the_check,
         delete_between_the_touch_and_the_check, delete_while_a_fresh_copy_is_written)
