"""The Spark job's door: everything ``spark_replay`` takes from ``adapters`` comes through
here (an import-linter contract holds it), and nothing of the facade or the command side.

What the job opens, on the driver and in each executor:

- the event log, to read (``event_log``; its page reader, decoder and account key below);
- the tables (``read_model_tables``, and the run files' stores: ``run_tables``);
- the catalog and the read side that rebuilds through it (``rebuilding``: the log, the read
  models' host for ``rebuild``/``build_view``, ``position_at``, ``erase_from_views``);
- the read models as they are, for the export's names (``read_models``: tables and
  catalog, no log, nothing caught up or written);
- the launcher's helpers it shares with the CLI (``adapters.sparkjob.launch``) and the rebuild lock.

No ``Letterlog`` facade, no ``Mailstore``, no payload store, no quotas, no purge jobs: a
rebuild and an export never append to the log.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from adapters.bootstrap.eventstore import event_log
from adapters.bootstrap.tables import projection_host, read_model_tables
from adapters.config.settings import Settings, load_settings
from adapters.eventlog.reader import _corrupt as corrupt_event
from adapters.eventlog.reader import _uuid_of as uuid_of
from adapters.eventlog.reader import page_hook, read_events, row_decoder, row_pages
from adapters.eventlog.records import account_key
from adapters.eventlog.transcoder import uuid_from_int
from adapters.files.rundirs import remove_stale_runs, run_directory
from adapters.lifecycle.aftermath import erase_from_views
from adapters.readside.catalog import Catalog
from adapters.readside.rebuild_lock import rebuild_lock
from adapters.sparkjob.checks import check_master, require_store
from adapters.sparkjob.environment import DEFAULT_MASTER, conf_dir, defaults_file, java_home
from adapters.sparkjob.launch import PROGRESS_PREFIX
from adapters.sparkjob.outcome import python_exception
from adapters.tables.memory import InMemoryTableStore
from adapters.tables.sqlite import SqliteTableStore

if TYPE_CHECKING:
    from adapters.eventlog.store import MailLog
    from adapters.readside.host import ProjectionHost
    from projections.tablestore import TableStore

__all__ = ["DEFAULT_MASTER", "PROGRESS_PREFIX", "Rebuilding", "Settings", "account_key",
           "check_master", "conf_dir", "corrupt_event", "defaults_file", "event_log",
           "java_home", "load_settings", "page_hook", "python_exception", "read_model_tables",
           "read_models", "rebuild_lock", "rebuilding", "remove_stale_runs", "require_store",
           "row_decoder", "row_pages", "run_directory", "run_tables", "uuid_from_int",
           "uuid_of"]


@dataclass
class Rebuilding:
    """What a Spark rebuild works on: the log (read) and the read side's host."""

    settings: Settings
    log: MailLog
    host: ProjectionHost

    def position_at(self, when: datetime) -> int:
        """The position of the last event recorded at or before ``when`` (0: none)."""
        low, high = 0, int(self.log.recorder.max_notification_id() or 0)
        while low < high:
            middle = (low + high + 1) // 2
            found = next(read_events(self.log, middle, middle), None)
            if found is not None and found[1].timestamp <= when:
                low = middle
            else:
                high = middle - 1
        return low

    def erase_from_views(self) -> dict[str, Any]:
        """Every purge and erasure in the log applied to the views that lack it."""
        return erase_from_views(self.settings, self.log, self.host.tables)


@contextmanager
def rebuilding(settings: Settings) -> Iterator[Rebuilding]:
    """The log and the read models' host of the store ``settings`` name, closed after."""
    log = event_log(settings)
    try:
        host = projection_host(settings, log)
        try:
            yield Rebuilding(settings, log, host)
        finally:
            host.close()
    finally:
        log.close()


@contextmanager
def read_models(settings: Settings) -> Iterator[tuple[TableStore, Any]]:
    """The read models' tables and their catalog's ``physical`` (logical -> physical
    table), as they are: nothing caught up, nothing written."""
    tables = read_model_tables(settings)
    try:
        catalog = Catalog(tables)
        catalog.refresh()
        yield tables, catalog.physical
    finally:
        tables.close()


def run_tables(path: str | None, synchronous: str = "OFF") -> TableStore:
    """A task's run file (``path``, written without fsync: a failed attempt's is never
    merged), or tables in memory (``None``)."""
    if path is None:
        return InMemoryTableStore()

    return SqliteTableStore(path, synchronous=synchronous)


