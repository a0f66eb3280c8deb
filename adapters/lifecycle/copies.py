"""Copies of a message's content: other messages with the same SHA-256.

Erasing a message destroys its own key and rows; a copy (made by ``copy``, or the same bytes
delivered twice or to several recipients) is another message and keeps its content.
``erase-message`` names the copies left in the same account and says, without naming them,
whether other accounts hold the same content.

Where they are found, in the read models (caught up before this is asked):

* a payload (a message over the inline limit): its ``payload_refs`` row names every message
  that refers to it and its account, whatever the message's state (soft-deleted and
  expunged ones too, until they are purged);
* an inline message: one scan of the ``messages`` table's summaries (listed and soft-deleted
  messages; an expunged inline copy has no row any more and is not found: its purge follows
  from the ``deleted`` queue).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

from projections import names as n
from projections.codec import decode_summary, decode_uuid
from projections.keys import payload_row
from projections.queries import mailbox_names
from projections.tablestore import TableStore


@dataclass
class Copies:
    """The copies of one message's content: ids in its own account, and whether any other
    account holds the same content."""

    same_account: list[UUID] = field(default_factory=list)
    other_accounts: bool = False


def copies_of(tables: TableStore, physical: Callable[[str], str], *, message_id: UUID,
              account_id: UUID, sha256: str, inline: bool) -> Copies:
    """Every other unpurged message with ``sha256`` (see the module docstring)."""
    found = Copies()
    if len(sha256) != 64:
        return found  # purged already: nothing of its content is known
    seen: set[UUID] = {message_id}
    if not inline:
        refs = tables.get(physical(n.PAYLOAD_REFS), payload_row(sha256))
        for column, owner in sorted(refs.items()):
            if not column.startswith(n.REF_PREFIX) or len(owner) != 16:
                continue  # an upload's chunk reference carries no account
            other = UUID(bytes=column[len(n.REF_PREFIX):])
            if other in seen:
                continue
            seen.add(other)
            if owner == account_id.bytes:
                found.same_account.append(other)
            else:
                found.other_accounts = True
        return found
    own = {m.bytes for m in mailbox_names(tables, account_id, physical).values()}
    wanted = sha256.encode()
    for row, cells in tables.scan(physical(n.MESSAGES), columns=[n.DATA_MESSAGE,
                                                               n.DATA_SUMMARY]):
        summary = cells.get(n.DATA_SUMMARY)
        if summary is None or wanted not in summary or decode_summary(summary)[2] != sha256:
            continue
        stored = cells[n.DATA_MESSAGE]
        other = UUID(bytes=stored) if len(stored) == 16 else decode_uuid(stored)
        if other in seen:
            continue
        seen.add(other)
        if row[1:17] in own:
            found.same_account.append(other)
        else:
            found.other_accounts = True
    return found
