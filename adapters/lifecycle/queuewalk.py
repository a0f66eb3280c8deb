"""Walking one shard of a purge queue, as the message purge's jobs (``jobs``) and the rule
events' purge (``rule_events``) both do: from the shard's pointer (``purge_pointer``: the
last bucket done) less the peek-back window, the queue's one-minute buckets up to the
horizon, the pointer advanced once a bucket is done. The pointer only grows (its cell's
version is the bucket number), so two purgers never move it back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from itertools import groupby
from uuid import UUID

from projections import names as n
from projections.keys import (
    minute_bucket,
    purge_bucket_prefix,
    purge_pointer_row,
    purge_row_parts,
)
from projections.tablestore import Put, Row, TableStore


def pointer(tables: TableStore, queue: str, shard: int) -> int | None:
    """The last bucket done in ``queue``'s ``shard`` (None: never walked)."""
    value = tables.get(n.PURGE_POINTER, purge_pointer_row(queue, shard),
                       [n.PP_BUCKET]).get(n.PP_BUCKET)
    return None if value is None else int(value)


def first_bucket(tables: TableStore, queue: str, shard: int, peek_back: timedelta) -> int:
    """Where a walk of the shard starts: its pointer less the peek-back window (0 before the
    first walk)."""
    done = pointer(tables, queue, shard)
    peek = int(peek_back.total_seconds() // 60)
    return 0 if done is None else max(0, done - peek)


def buckets(tables: TableStore, table: str, queue: str, shard: int, start: int,
            horizon: int) -> Iterator[tuple[int, list[tuple[UUID, Row]]]]:
    """The shard's buckets from ``start`` to ``horizon`` in ``table`` (physical), each with
    its entries: (id, cells)."""
    rows = tables.scan(table, start=purge_bucket_prefix(queue, shard, start),
                       stop=purge_bucket_prefix(queue, shard, horizon + 1))
    parsed = ((purge_row_parts(row), cells) for row, cells in rows)
    for bucket, group in groupby(parsed, key=lambda item: item[0][2]):
        yield bucket, [(parts[3], cells) for parts, cells in group]


def advance(tables: TableStore, queue: str, shard: int, bucket: int, now: datetime) -> None:
    """The pointer cell's version is the bucket: the highest one written wins. Never past
    the present minute (``now``): entries still to come count from now or later, and a run
    ``--now`` in the future must not make the jobs skip them."""
    bucket = min(bucket, minute_bucket(now))
    tables.apply([Put(n.PURGE_POINTER, purge_pointer_row(queue, shard),
                      n.PP_BUCKET, b"%d" % bucket, bucket)])
