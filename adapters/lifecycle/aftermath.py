"""What follows a purge run or an erasure once it is done (``Shredding.after``): no plain
text lingers outside the log. The saved views lose the purged messages (before the files'
WAL is truncated); run files a killed Spark job left are removed; the SQLite files' WAL is
truncated and what is left unfinished recorded (``completion``); the embedded tables a
purge deletes from are flushed and compacted (HBase's by ``erase complete``: ``scaleout``,
told what an erasure there owes by ``record_scale_out``). ``Shredding`` builds it when a
purge or an erasure first needs it: a command that only reads never loads it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from adapters.eventlog.reader import row_decoder, row_pages
from adapters.files.datadir import exclusive
from adapters.files.rundirs import remove_stale_runs
from adapters.lifecycle.completed import Completion
from adapters.lifecycle.completion import KeyCluster, complete
from adapters.lifecycle.pendingerasures import PendingErasures
from adapters.lifecycle.scaleout import record_erasure
from adapters.readside.views import erase_purged
from projections import names as pn
from projections.capabilities import MajorCompacting

if TYPE_CHECKING:
    from adapters.config.settings import Settings
    from adapters.eventlog.store import MailLog
    from projections.tablestore import TableStore


@runtime_checkable
class VaultedKeys(Protocol):
    """Data keys whose key-encryption keys are in a vault of their own (a file, or the key
    cluster: ``completion.KeyCluster``)."""

    vault: object


class Aftermath:
    """The aftermath of purges and erasures on one store (module docstring)."""

    def __init__(self, settings: Settings, log: MailLog) -> None:
        self.settings = settings
        self.log = log

    def max_position(self) -> int:
        return int(self.log.recorder.max_notification_id() or 0)

    def record_scale_out(self, payloads: Iterable[str], began: float, messages: int) -> None:
        """On scale-out: what ``letterlog erase complete`` owes for this purge or erasure."""
        record_erasure(self, payloads, began, messages)

    def outside(self, host: Any | None) -> list[str]:
        """The saved views lose the purged messages (their tables returned), and run files a
        killed Spark job left are removed: both before the files' WAL is truncated."""
        in_views = self.erase_from_views(host.tables)["tables"] if host is not None else []
        remove_stale_runs(Path(self.settings.data))
        return in_views

    def compact(self, host: Any | None, in_views: list[str]) -> None:
        """The embedded tables a purge deletes from, and ``in_views``, flushed, then
        major-compacted (HBase's: after the workers, by ``erase complete``: ``scaleout``)."""
        if host is None:
            return
        tables, physical = host.tables, host.physical
        if isinstance(tables, MajorCompacting) and self.settings.table_store != "hbase":
            purged = [physical(t) for t in pn.PURGED_FROM] + in_views
            tables.flush(purged)
            tables.major_compact(purged)

    def complete(self, *, record: bool = False, messages: int = 0) -> Completion:
        """Finishes the erasures still pending on this store's SQLite files (``letterlog
        erase complete``); with ``record``, one left unfinished (of ``messages``) is
        recorded."""
        s = self.settings
        keys = self.log.keys
        vault = keys.vault if isinstance(keys, VaultedKeys) else None
        return complete(s.data, s.key_vault, wait=s.erase_wait_seconds, record=record,
                        position=self.max_position(), messages=messages,
                        key_cluster=vault if isinstance(vault, KeyCluster) else None)

    def pending(self) -> list[dict[str, Any]]:
        """The erasures not yet finished on the SQLite files (``letterlog erase status``)."""
        return [r for _, r in PendingErasures(self.settings.data).records()]

    def erase_from_views(self, tables: TableStore) -> dict[str, Any]:
        """Every purge and erasure in the log applied to each saved view not yet given it."""
        return erase_from_views(self.settings, self.log, tables)


def erase_from_views(settings: Settings, log: MailLog, tables: TableStore) -> dict[str, Any]:
    """``Aftermath.erase_from_views`` for a process that opens no payload store (the Spark
    job, which builds views from the log and the tables alone)."""
    with exclusive(settings.data, "views"):
        return erase_purged(tables, int(log.recorder.max_notification_id() or 0),
                            lambda start, stop: row_pages(log, start, stop, 2000),
                            row_decoder(log),
                            lambda i, version: log.repository.get(i, version=version))
