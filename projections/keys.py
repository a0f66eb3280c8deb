"""Row keys and data-carrying column qualifiers of every read model, built in one place.

Conventions (see ``docs/tables.md``):

* salt: ``zlib.crc32(entity) % 128`` as one byte in front of keys that start with an id whose
  rows must spread over pre-split regions;
* UUIDs as their 16 raw bytes;
* reversed numbers: ``2**63 - 1 - n`` as 8 bytes big-endian (a forward scan is newest first);
* inverted ids: every byte ``b`` replaced by ``255 - b`` (time-ordered UUIDv7 message ids then
  sort newest first);
* strings (names, labels) as UTF-8, terminated by 0x00 where something follows them.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeAlias
from uuid import UUID

from domain.identity import NameRefused, canonical_name
from projections import names as n

# tracking rows are owned by projections.tracking; their names stay importable from here
from projections.tracking import (
    tracked as tracked,
)
from projections.tracking import (
    tracking_generation as tracking_generation,
)
from projections.tracking import (
    tracking_position as tracking_position,
)
from projections.tracking import (
    tracking_row as tracking_row,
)

RowReader: TypeAlias = Callable[[str, bytes], dict[bytes, bytes]]
"""Reads the current visible row ``(table, row key) -> {column: value}`` ({} if none)."""

SALTS = 128
PURGE_SHARDS = 16
MAX_LONG = 2**63 - 1

_Q = struct.Struct(">Q")
_SALT = [bytes((i,)) for i in range(SALTS)]
_INVERT = bytes(range(255, -1, -1))
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def salt(entity: bytes) -> bytes:
    """One byte, ``crc32(entity) % 128``: a stable spread over 128 pre-split regions."""
    return _SALT[zlib.crc32(entity) % SALTS]


def salted(entity: bytes) -> bytes:
    """``salt(entity) + entity``."""
    return _SALT[zlib.crc32(entity) % SALTS] + entity


def reversed_number(value: int) -> bytes:
    """``2**63 - 1 - value``, 8 bytes big-endian: larger numbers sort first."""
    return _Q.pack(MAX_LONG - value)


def unreverse_number(data: bytes) -> int:
    return MAX_LONG - int(_Q.unpack(data)[0])


def inverted(data: bytes) -> bytes:
    """Every byte ``b`` as ``255 - b``: the byte order of the result is the reverse."""
    return data.translate(_INVERT)


# -- mailboxes, accounts, subscriptions, counters (row = the entity's 16 bytes) --------------


def mailbox_row(mailbox_id: UUID) -> bytes:
    return mailbox_id.bytes


def account_row(account_id: UUID) -> bytes:
    return account_id.bytes


# -- mailbox_names -----------------------------------------------------------------------------


def mailbox_names_prefix(account_id: UUID) -> bytes:
    """Every mailbox name of an account, in name byte order."""
    return salted(account_id.bytes)


def mailbox_name_row(account_id: UUID, name: str) -> bytes:
    return salted(account_id.bytes) + name.encode()


# -- messages ----------------------------------------------------------------------------------


def messages_prefix(mailbox_id: UUID) -> bytes:
    """Every message of a mailbox; a forward scan gives the highest UID first."""
    return salted(mailbox_id.bytes)


_MAILBOX_PREFIXES: dict[int, bytes] = {}  # UUID.int -> salted id: a projector's hot path


def message_row(mailbox_id: UUID, uid: int) -> bytes:
    prefix = _MAILBOX_PREFIXES.get(mailbox_id.int)
    if prefix is None:
        if len(_MAILBOX_PREFIXES) >= 65536:
            _MAILBOX_PREFIXES.clear()
        prefix = _MAILBOX_PREFIXES[mailbox_id.int] = salted(mailbox_id.bytes)
    return prefix + _Q.pack(MAX_LONG - uid)


def message_row_parts(row: bytes) -> tuple[UUID, int]:
    """``(mailbox id, uid)`` of a messages row key."""
    return UUID(bytes=row[1:17]), message_row_uid(row)


def message_row_uid(row: bytes) -> int:
    """The UID of a messages row key (the mailbox id is the scan's)."""
    return MAX_LONG - int(_Q.unpack_from(row, 17)[0])


# -- label_index -------------------------------------------------------------------------------


def label_prefix(account_id: UUID, label: str) -> bytes:
    """Every message of an account carrying ``label``, newest (message id) first."""
    return salted(account_id.bytes) + label.encode() + b"\x00"


def label_row(account_id: UUID, label: str, message_id: UUID) -> bytes:
    return salted(account_id.bytes) + label.encode() + b"\x00" + message_id.bytes.translate(_INVERT)


def label_row_message(row: bytes) -> UUID:
    return UUID(bytes=row[-16:].translate(_INVERT))


# -- threads -----------------------------------------------------------------------------------


def thread_prefix(thread_id: UUID) -> bytes:
    """Every message of a thread, newest (message id) first."""
    return salted(thread_id.bytes)


def thread_row(thread_id: UUID, message_id: UUID) -> bytes:
    return salted(thread_id.bytes) + message_id.bytes.translate(_INVERT)


def thread_row_message(row: bytes) -> UUID:
    return UUID(bytes=row[17:33].translate(_INVERT))


# -- counters: columns -------------------------------------------------------------------------


def mailbox_counter_column(mailbox_id: UUID) -> bytes:
    """The column counting one mailbox's messages in its account's counters row."""
    return n.CT_MAILBOX + mailbox_id.bytes


def label_counter_column(label: str) -> bytes:
    """The column counting one label's messages in its account's counters row."""
    return n.CT_LABEL + label.encode()


def deleted_marker_column(message_id: UUID) -> bytes:
    """A soft-deleted message's marker in its account's counters row (family ``d``, apart
    from the counts so that reading the counts never reads the markers)."""
    return n.CT_DELETED + message_id.bytes


# -- subscriptions, accounts, payload_refs: columns ------------------------------------------


def subscription_column(name: str) -> bytes:
    return n.SUB_PREFIX + name.encode()


def label_column(label: str) -> bytes:
    return n.LABEL_PREFIX + label.encode()


def payload_row(sha256: str) -> bytes:
    """The payload's SHA-256 as 64 lower-case hex ASCII bytes."""
    if len(sha256) != 64:
        raise ValueError(f"sha256: {sha256!r:.80} is not 64 hex digits")
    return bytes.fromhex(sha256).hex().encode()


def payload_ref_column(message_id: UUID) -> bytes:
    return n.REF_PREFIX + message_id.bytes


# -- acl, visible_mailboxes, roots ------------------------------------------------------------


def acl_column(identifier: str) -> bytes:
    return n.ACL_PREFIX + identifier.encode()


def visible_prefix(identifier: str) -> bytes:
    """Every mailbox ``identifier`` (a user, ``$group``, ``anyone``, ``authenticated``, or
    one of those negated) has ``l`` on: one scan."""
    ident = identifier.encode()
    return salted(ident) + ident + b"\x00"


def visible_row(identifier: str, mailbox_id: UUID) -> bytes:
    return visible_prefix(identifier) + mailbox_id.bytes


def root_row(user: str) -> bytes:
    """A user's name as the identity rule has it (``domain.identity``); a name of an old
    event that the rule refuses, folded to lower case (no user can act as it now)."""
    try:
        return canonical_name(user, "user").encode()
    except NameRefused:
        return user.casefold().encode()


# -- purge_queue, purge_pointer --------------------------------------------------------------


def purge_shard(message_id: UUID) -> int:
    return zlib.crc32(message_id.bytes) % PURGE_SHARDS


def minute_bucket(when: datetime) -> int:
    """Whole minutes since the Unix epoch (UTC); 0 for anything earlier."""
    if when.tzinfo is None:
        raise ValueError(f"naive datetime {when.isoformat()}: every time in letterlog is UTC")
    return max(0, int((when - _EPOCH).total_seconds()) // 60)


def purge_shard_prefix(queue: str, shard: int) -> bytes:
    """One shard of one queue, in due-minute order."""
    return queue.encode() + b"\x00" + bytes((shard,))


def purge_bucket_prefix(queue: str, shard: int, bucket: int) -> bytes:
    """One minute bucket of one shard of one queue."""
    return queue.encode() + b"\x00" + bytes((shard,)) + _Q.pack(bucket)


def purge_row(queue: str, message_id: UUID, due: datetime) -> bytes:
    mid = message_id.bytes
    shard = zlib.crc32(mid) % PURGE_SHARDS
    return queue.encode() + b"\x00" + bytes((shard,)) + _Q.pack(minute_bucket(due)) + mid


def purge_row_parts(row: bytes) -> tuple[str, int, int, UUID]:
    """``(queue, shard, minute bucket, message id)`` of a purge_queue row key."""
    queue, _, rest = row.partition(b"\x00")
    return queue.decode(), rest[0], int(_Q.unpack(rest[1:9])[0]), UUID(bytes=rest[9:25])


def purge_pointer_row(queue: str, shard: int) -> bytes:
    return queue.encode() + b"\x00" + bytes((shard,))
