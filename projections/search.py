"""IMAP SEARCH's common keys over a mailbox's ``messages`` rows (newest first, the row
order); nothing here reads an aggregate or the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from projections.queries import MessageSummary, Physical, _same, mailbox_messages
from projections.tablestore import TableStore

PAGE = 500


@dataclass(frozen=True)
class SearchCriteria:
    """All given keys must hold (IMAP SEARCH's implicit AND). Text keys match a substring,
    case-insensitively; dates compare the internal date (``since`` inclusive, ``before``
    exclusive); sizes are strict (``larger``: more than N bytes)."""

    sender: str | None = None
    subject: str | None = None
    flags: frozenset[str] = frozenset()
    unflags: frozenset[str] = frozenset()
    labels: frozenset[str] = frozenset()
    since: datetime | None = None
    before: datetime | None = None
    larger: int | None = None
    smaller: int | None = None

    def matches(self, m: MessageSummary) -> bool:
        if self.larger is not None and m.size <= self.larger:
            return False
        if self.smaller is not None and m.size >= self.smaller:
            return False
        flags, labels = set(m.flags), set(m.labels)
        if not self.flags <= flags or self.unflags & flags or not self.labels <= labels:
            return False
        if self.since is not None or self.before is not None:
            try:
                when = datetime.fromisoformat(m.internal_date)
            except ValueError:
                return False
            if self.since is not None and when < self.since:
                return False
            if self.before is not None and when >= self.before:
                return False
        return _contains(m.sender, self.sender) and _contains(m.subject, self.subject)


def _contains(text: str | None, needle: str | None) -> bool:
    return needle is None or needle.casefold() in (text or "").casefold()


def search_mailbox(store: TableStore, mailbox_id: UUID, criteria: SearchCriteria, *,
                   limit: int = 50, before_uid: int | None = None,
                   physical: Physical = _same) -> list[MessageSummary]:
    """The mailbox's listed messages that match, newest first; page with ``before_uid`` (the
    lowest UID of the previous page), as ``mailbox_messages``."""
    found: list[MessageSummary] = []
    cursor = before_uid
    while len(found) < limit:
        page = mailbox_messages(store, mailbox_id, limit=PAGE, before_uid=cursor,
                                physical=physical)
        found += [m for m in page if criteria.matches(m)][:limit - len(found)]
        if len(page) < PAGE:
            break
        cursor = page[-1].uid
    return found
