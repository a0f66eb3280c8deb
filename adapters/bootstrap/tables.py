"""The read side ``Settings`` name: the tables the read models are in (the embedded
``<data>/tables.sqlite``, or HBase as the stream workers write it), the tables the stream
workers write, and the host that keeps an embedded store's read models current."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from adapters.bootstrap.eventstore import event_log
from adapters.config.settings import Settings
from adapters.eventlog.reader import read_events
from adapters.eventlog.store import MailLog
from adapters.files import datadir
from adapters.files.filemodes import private_dir
from adapters.readside.host import Fold, ProjectionHost
from adapters.tables.sqlite import SqliteTableStore
from projections.tablestore import TableStore


def stream_tables(settings: Settings, *, timeout: float | None = None) -> TableStore:
    """The tables the stream workers write: HBase for ``table_store=hbase``; else
    ``<data>/stream-tables.sqlite`` (never the file the embedded projector writes).
    ``timeout``: seconds an HBase call waits and retries (default ``hbase_timeout``)."""
    if settings.table_store == "hbase":
        from adapters.bootstrap import hbase  # local: happybase, thriftpy2: HBase's clients only

        return hbase.hbase_tables(settings, timeout=timeout)
    private_dir(settings.data)
    return SqliteTableStore(Path(settings.data) / datadir.STREAM_TABLES)


def read_model_tables(settings: Settings) -> TableStore:
    """The table store the read models are in: HBase (``table_store=hbase``, as the stream
    workers write it) or the embedded ``<data>/tables.sqlite``."""
    if settings.table_store == "hbase":
        return stream_tables(settings)
    return SqliteTableStore(Path(settings.data) / datadir.READ_MODELS)


def projection_host(settings: Settings, log: MailLog) -> ProjectionHost:
    """The read models of an embedded store: ``<data>/tables.sqlite``, kept current by this
    process; or, with ``table_store=hbase``, HBase, read only (stream workers project)."""
    events = partial(read_events, log)

    def max_position() -> int:
        return int(log.recorder.max_notification_id() or 0)

    tables = read_model_tables(settings)
    if settings.table_store == "hbase":
        return ProjectionHost(tables, events, None, max_position, live=False)
    return ProjectionHost(tables, events, Path(settings.data) / datadir.PROJECTIONS_LOCK,
                          max_position, parallel=partial(parallel_fold, settings))


def parallel_fold(settings: Settings, workers: int, single: Fold) -> Fold:
    """A rebuild's fold over ``workers`` processes (0: ``rebuild_workers``, whose 0 is the
    cores), each reading its range of the log the settings name (``log_range_reader``)."""
    # local: only a rebuild needs it (every command that opens a store builds this host)
    from adapters.readside.rangefold import RangeFold

    return RangeFold(partial(log_range_reader, settings), Path(settings.data),
                     workers or settings.rebuild_workers, single)


def log_range_reader(settings: Settings) -> tuple[Callable[[int, int], Iterator[Any]],
                                                  Callable[[], None]]:
    """The log the settings name, opened in the calling process (a rebuild's child):
    ``(events(start, stop), close)``."""
    log = event_log(settings)
    return partial(read_events, log), log.close
