"""The quota ledger's view of the log (``domain.quota.UsageSource``): an account's usage
from the ``counters`` read model at a position it is known to reflect, and the account's
counted events after it, read from the log (only those events are decoded; every other
row is skipped by its topic or, for a counted topic, by the account in its msgpack)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from uuid import UUID

from adapters.eventlog.reader import _uuid_of, row_decoder, row_pages
from adapters.eventlog.records import account_key
from domain.quota import COUNTED, Usage
from projections import names as n
from projections.codec import listed_usage
from projections.keys import account_row
from projections.tablestore import TableNotFound

COUNTED_TOPICS = frozenset(f"{c.__module__}:{c.__qualname__}" for c in COUNTED)

Snapshot = Callable[[UUID], tuple[int, Usage]]


def counters_snapshot(host: Any, account_id: UUID) -> tuple[int, Usage]:
    """The account's usage from ``counters`` and a position it reflects: the position the
    embedded read models were caught up to before the row was read, or the row's own
    ``c:pos`` if later (every later event that changes the usage would have moved it)."""
    if host is None or not getattr(host, "live", False):
        return 0, Usage()  # none here, or the stream workers' (they may lag): fold the log
    position = int(host.position())
    row = host.tables.get(host.physical(n.COUNTERS), account_row(account_id),
                          [n.CT_COUNTS])
    messages, size = listed_usage(row)
    stored = row.get(n.CT_POS)
    if stored is not None:
        position = max(position, int(stored))
    return position, Usage(messages, size)


class LogUsage:
    """``UsageSource`` over a ``MailLog``; ``snapshot`` (default: none, fold from the
    start) gives an account's usage up to a position."""

    def __init__(self, log: Any, snapshot: Snapshot | None = None) -> None:
        self.log = log
        self._snapshot = snapshot
        self._decode: Callable[[Any], tuple[int, Any]] | None = None

    def snapshot(self, account_id: UUID) -> tuple[int, Usage]:
        return (0, Usage()) if self._snapshot is None else self._snapshot(account_id)

    def events(self, start: int, stop: int,
               accounts: Iterable[UUID]) -> Iterator[tuple[int, object]]:
        keys = {a.bytes for a in accounts}
        if self._decode is None:
            self._decode = row_decoder(self.log)
        decode = self._decode
        for rows in row_pages(self.log, start, stop, 2000):
            for row in rows:
                _, originator_id, _, topic, state = row
                if topic in COUNTED_TOPICS and \
                        account_key(_uuid_of(originator_id), topic, state) in keys:
                    yield decode(row)


class TablesSnapshot:
    """Snapshots from the embedded ``tables.sqlite`` of a process that keeps no read models
    (``letterlog lda``): opened on the first check, read only; if they cannot be read, the
    account's usage is folded from the start of the log."""

    def __init__(self, path: Any) -> None:
        self.path = path
        self._host: Any = None

    def __call__(self, account_id: UUID) -> tuple[int, Usage]:

        try:
            return counters_snapshot(self._open(), account_id)
        except (sqlite3.Error, TableNotFound, OSError):
            return 0, Usage()

    def _open(self) -> Any:
        if self._host is None:
            if not self.path.is_file():
                return None
            from adapters.facade import countertables  # local: tables.sqlite: not for show

            self._host = countertables.open_counters(self.path)
        return self._host

    def close(self) -> None:
        if self._host is not None:
            self._host.close()
