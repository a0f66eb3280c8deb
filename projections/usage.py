"""What a mailbox holds on disk (``letterlog du``), from its ``messages`` rows alone;
nothing here reads an aggregate or the log.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from projections import names as n
from projections.codec import data_fields
from projections.keys import messages_prefix
from projections.queries import Physical, _same
from projections.tablestore import TableStore


@dataclass(frozen=True)
class Usage:
    """What one mailbox holds: ``delivered`` is the sum of its messages' sizes; ``stored``
    counts each distinct payload once (copies and duplicates share it), plus the bodies kept
    inline."""

    messages: int
    deleted: int
    delivered: int
    inline: int
    payloads: dict[str, int]

    @property
    def stored(self) -> int:
        return self.inline + sum(self.payloads.values())


def _rows(store: TableStore, mailbox_id: UUID, physical: Physical
          ) -> Iterator[tuple[bytes | None, dict[str, Any]]]:
    for _, cells in store.scan(physical(n.MESSAGES), prefix=messages_prefix(mailbox_id),
                               columns=[n.META_STATE, n.DATA_SUMMARY, n.DATA_FIELDS]):
        yield cells.get(n.META_STATE), data_fields(cells.get(n.DATA_FIELDS),
                                                   cells.get(n.DATA_SUMMARY))


def mailbox_usage(store: TableStore, mailbox_id: UUID,
                  physical: Physical = _same) -> Usage:
    """Messages (soft-deleted ones apart: they hold their bytes until purged) and bytes."""
    messages = deleted = delivered = inline = 0
    payloads: dict[str, int] = {}
    for state, fields in _rows(store, mailbox_id, physical):
        size = int(fields.get("size", 0))
        delivered += size
        if state == b"deleted":
            deleted += 1
        else:
            messages += 1
        if fields.get("inline"):
            inline += size
        else:
            payloads[str(fields.get("address") or fields.get("sha256", ""))] = size
    return Usage(messages, deleted, delivered, inline, payloads)
