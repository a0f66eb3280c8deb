"""Reading: the log (events, positions in time), the read models as they were (``reading``,
saved views), a message's body, and the read models' upkeep (rebuild, verify, compact).

A part of the ``Letterlog`` facade (``adapters.embedded``; ``parts.FacadePart``); the
queries of the current read models are ``adapters.readside.queries.ReadModelQueries``."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import datetime
from typing import Any, Self
from uuid import UUID

from adapters.eventlog.reader import read_events
from adapters.eventlog.records import account_events
from adapters.facade.parts import FacadePart
from adapters.files.datadir import exclusive
from domain.errors import InvalidCommand, MessageNotFound
from domain.values import account_id_for, normalise_address
from projections import names as pn
from projections.capabilities import Checkpointing, Compacting, FileSized
from projections.codec import data_fields
from projections.keys import message_row


class Reading(FacadePart):
    """The log and the read models beyond the current queries."""

    def events(self, start: int = 1, stop: int | None = None,
               batch: int = 1000) -> Iterator[tuple[int, Any]]:
        """Decoded domain events from the log with their positions; a corrupt one raises."""
        return read_events(self.log, start, stop, batch)

    def position_at(self, when: datetime) -> int:
        """The position of the last event recorded at or before ``when`` (0: none); a
        binary search over the events' timestamps (the log appends in time order)."""
        low, high = 0, self.max_position()
        while low < high:
            middle = (low + high + 1) // 2
            found = next(self.events(start=middle, stop=middle), None)
            if found is not None and found[1].timestamp <= when:
                low = middle
            else:
                high = middle - 1
        return low

    def reading(self, *, view: str | None = None, as_of: int | None = None,
                account: str | None = None) -> Self:
        """This store's queries as they were: in the Spark-built view ``view``, or at
        position ``as_of`` for ``account`` (its events folded in this process). Read only."""
        if view is None and as_of is None:
            return self
        if view is not None and as_of is not None:
            raise InvalidCommand("--view and --as-of: give one of them")
        host = self._read()
        if view is not None:
            found = host.view(view)
        else:
            head = self.max_position()
            if as_of is None or not 0 <= as_of <= head:
                raise InvalidCommand(f"--as-of: {as_of} is not in 0..{head} (the log)")
            key = account_id_for(normalise_address(account or "")).bytes
            found = host.as_of(as_of, account_events(self.log, key, as_of))
        past = copy.copy(self)
        past.projections = found
        return past

    def body(self, account: str, mailbox: str, uid: int) -> Iterator[bytes]:
        """A message's bytes from the read model, chunk by chunk. Not an extraction (not
        counted), but refused exactly as ``extract`` refuses (``ExtractionRefused`` once the
        limit is used up or the extract-until date passed; ``InvalidState`` unless active),
        checked on the message's current state before any byte is returned."""
        host = self._read()

        cells = host.tables.get(host.physical(pn.MESSAGES),
                                message_row(self._mailbox_id(account, mailbox), uid),
                                [pn.DATA_BODY, pn.DATA_SUMMARY, pn.DATA_FIELDS,
                                 pn.DATA_MESSAGE])
        if not cells or pn.DATA_MESSAGE not in cells:
            raise MessageNotFound(f"no message with UID {uid} in {mailbox!r}")
        self.mail.check_extractable(UUID(bytes=bytes(cells[pn.DATA_MESSAGE])))
        fields = data_fields(cells.get(pn.DATA_FIELDS), cells.get(pn.DATA_SUMMARY))
        if not fields.get("inline"):  # its payload's address (its SHA-256 before ADR 0099)
            return self.payloads.open(str(fields.get("address") or fields["sha256"]))
        if pn.DATA_BODY in cells:  # a row written before ADR 0014 holds its own copy
            return iter((cells[pn.DATA_BODY],))
        return iter((self._inline_body(int(fields["body_event"]), uid),))

    def _inline_body(self, position: int, uid: int) -> bytes:
        """An inline body from the event at ``position`` of the log (stored there only)."""
        for _, event in self.events(position, position, batch=1):
            body = getattr(event, "personal", {}).get("body")
            if type(body) is bytes:
                return body
        raise MessageNotFound(f"the body of UID {uid} is no longer in the log")

    def rebuild(self, names: list[str] | None = None, progress: Any = None,
                workers: int | None = None) -> dict[str, Any]:
        """Every projection named (all: ``None``) rebuilt into fresh tables and switched in;
        ``workers``: the processes its fold takes (``None``: the ``rebuild_workers``
        setting; 1: this process alone)."""
        return dict(self._read().rebuild(names, progress, workers=workers))

    def build_view(self, view: str, names: list[str] | None, stop: int) -> dict[str, Any]:
        """The read-only view ``view`` as at position ``stop``, folded in this process,
        without the messages purged since (``erase_from_views``)."""
        host = self._read()
        built = dict(host.build_view(view, names, stop, host.default_fold()))
        self.erase_from_views()
        return built

    def views(self) -> list[Any]:
        """Every saved view (``SavedView``: name, position, projections, tables, bytes)."""
        from adapters.readside import views  # local: the read side (31 modules): not for show

        return views.saved_views(self._read().tables, sizes=True)

    def drop_view(self, name: str) -> Any:
        """Drops the view ``name`` (its tables and its row; ``NotFound`` if there is none,
        and nothing is dropped); the embedded tables' WAL is truncated after it."""
        from adapters.readside import views  # local: the read side (31 modules): not for show

        tables = self._read().tables
        with self.exclusive("views"):
            dropped = views.drop_view(tables, name)
        if isinstance(tables, Checkpointing):
            tables.checkpoint("TRUNCATE")
        return dropped

    def erase_from_views(self) -> dict[str, Any]:
        """Applies every purge and erasure in the log to every saved view that has not had
        it yet (after each purge run and erasure, and when a view is built)."""
        return self.shredding.erase_from_views(self._read().tables)

    def verify(self, names: list[str] | None = None, progress: Any = None) -> list[Any]:
        return list(self._read().verify(names, progress))

    def _embedded_tables(self) -> Any:
        """The embedded read models' table store, if open; None for another table store
        (which is not opened, let alone connected to, to answer about files)."""
        if self.settings.table_store != "embedded" or self.projections is None:
            return None
        return self.projections.tables

    def read_model_bytes(self) -> int | None:
        """What the embedded read models take on disk (None: another table store)."""
        tables = self._embedded_tables()
        return tables.file_bytes() if isinstance(tables, FileSized) else None

    def read_model_slack(self) -> float | None:
        """The share of the embedded read models' file that holds nothing (free pages and
        the unused bytes of pages in use; it reads every page): what ``compact_read_models``
        would take back. None: another table store, or not known."""
        tables = self._embedded_tables()
        return tables.slack() if isinstance(tables, Compacting) else None

    def compact_read_models(self) -> dict[str, int] | None:
        """Rewrites the embedded read models' file with full pages (ADR 0030); None for a
        table store that compacts itself (HBase)."""
        compacted: dict[str, int] | None = self._read().compact()
        return compacted

    def exclusive(self, name: str) -> Any:
        """A cross-process lock in the data directory (embedded mode)."""
        return exclusive(self.settings.data, name)
