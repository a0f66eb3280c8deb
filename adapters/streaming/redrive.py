"""``redrive``: dead letters applied again after a fix, through the partition's own
projections and the same batch store as the workers (``adapters.streaming.deadletters``
keeps the letters; ``letterlog dead-letters redrive``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import Any

from adapters.eventlog.records import decode_record
from adapters.streaming.batchstore import REDO, BatchStore
from adapters.streaming.deadletters import (
    DEAD_LETTERS,
    attempt_cell,
    close_letter,
    dead_letter_row,
    list_dead_letters,
    now_iso,
    operator,
)
from adapters.streaming.partitions import Physical, partition_projections
from domain.errors import CorruptEvent
from projections import names as n
from projections.registry import ALL, Projection
from projections.runner import ProjectionRunner, identity
from projections.tablestore import (
    Put,
    TableStore,
)


def redrive(store: TableStore, *, projections: Sequence[Projection] = ALL,
            physical: Physical = identity, topics: Collection[str] | None = None,
            topic: str | None = None, limit: int | None = None,
            clock: Callable[[], float] = time.time) -> dict[str, Any]:
    """Applies every dead letter again (after a fix) through the partition's own projections;
    closes the ones that now succeed (recorded as ``redriven``) and records another attempt
    on the others (``times`` counts it).

    ``topics``: the Kafka topics whose records may be applied (None: any); ``topic`` limits
    the dead letters taken. Re-applying is idempotent, so a redrive that crashes before
    closing a letter and runs again changes nothing more; ``counters`` skips an event older
    than what its account's row holds already (rebuild ``counters`` if such an event
    mattered). Returns ``{"redriven": n, "failed": n, "details": [...]}``."""
    table = physical(DEAD_LETTERS.name)
    report: dict[str, Any] = {"redriven": 0, "failed": 0, "details": []}
    # through the same door as the workers: a row a crash left half-written is completed
    # before it is read, tracking is written after the data
    reads = frozenset(physical(t) for p in projections for t in p.reads)
    batch = BatchStore(store, physical(n.TRACKING), reads, physical(REDO.name))
    if reads:
        store.create_table(replace(REDO, name=physical(REDO.name)))
    for letter in list_dead_letters(store, physical=physical, topic=topic, limit=limit):
        row = dead_letter_row(letter.topic, letter.partition, letter.offset)
        cells = store.get(table, row)
        try:
            if topics is not None and letter.topic not in topics:
                raise CorruptEvent(f"record from topic {letter.topic!r}, not one of "
                                   f"{sorted(topics)}")
            position, event = decode_record(letter.value)
            renamed = partition_projections(projections, letter.topic, letter.partition)
            batch.begin()
            runner = ProjectionRunner(batch, renamed, physical)
            runner.rewind(position - 1)
            runner.apply_events([(position, event)])
            batch.flush()
        except CorruptEvent as error:
            now = clock()
            report["failed"] += 1
            report["details"].append({**letter.as_dict(), "redriven": False,
                                      "error": str(error)})
            column, value = attempt_cell(cells, now, f"redrive by {operator()}", 1, str(error))
            version = int(now * 1000)
            times = int(cells.get(n.DL_TIMES, b"1")) + 1  # a redrive's try counts as one more
            store.apply([Put(table, row, n.DL_ERROR, str(error).encode(), version),
                         Put(table, row, n.DL_LAST_SEEN, now_iso(now).encode(), version),
                         Put(table, row, n.DL_TIMES, b"%d" % times, version),
                         Put(table, row, column, value, version)])
            continue
        close_letter(store, letter, cells, "redriven", "applied again by redrive",
               physical=physical, now=clock())
        report["redriven"] += 1
        report["details"].append({**letter.as_dict(), "redriven": True, "position": position})
    return report
