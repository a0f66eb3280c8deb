"""Read-side queries over the read models (through the table store port only).

Every function takes the table store and a ``physical`` function mapping logical table names
to the physical tables readers currently use (blue/green rebuilds switch it). Nothing here
reads an aggregate or the log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any
from uuid import UUID

from projections import names as n
from projections.codec import (
    data_fields,
    decode_counters,
    decode_datetime,
    decode_json,
    decode_names,
    decode_ref,
    decode_summary,
    decode_uuid,
    uuid_of_16_bytes,
)
from projections.keys import (
    PURGE_SHARDS,
    account_row,
    label_prefix,
    label_row_message,
    mailbox_name_row,
    mailbox_names_prefix,
    mailbox_row,
    message_row,
    message_row_uid,
    messages_prefix,
    minute_bucket,
    payload_row,
    purge_row_parts,
    purge_shard_prefix,
    thread_prefix,
    thread_row_message,
)
from projections.tablestore import TableStore

Physical = Callable[[str], str]
LISTED = (b"active", b"expired")
_LISTING_COLUMNS = [
    n.META_FLAGS, n.META_LABELS, n.META_MODSEQ, n.META_STATE, n.META_THREAD,
    n.DATA_MESSAGE, n.DATA_SUMMARY,
]


def _same(name: str) -> str:
    return name


@dataclass(frozen=True)
class MessageSummary:
    message_id: UUID
    mailbox_id: UUID
    uid: int
    modseq: int
    state: str
    flags: list[str]
    labels: list[str]
    size: int
    internal_date: str
    sha256: str
    thread_id: UUID | None
    subject: str | None
    sender: str | None
    truncated: list[str] = field(default_factory=list)  # limits that stopped the parse

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("message_id", "mailbox_id", "thread_id"):
            d[k] = str(d[k]) if d[k] is not None else None
        return d


_new = object.__new__
_set = object.__setattr__


@lru_cache(maxsize=4096)
def _names(data: bytes) -> tuple[str, ...]:
    """Flags and labels repeat from message to message: decode each distinct value once."""
    return tuple(decode_names(data))


_STATES = {state: state.decode() for state in (b"active", b"deleted", b"expired")}
_uuid16 = uuid_of_16_bytes


def _summary(mailbox_id: UUID, row: bytes, cells: dict[bytes, bytes]) -> MessageSummary:
    get = cells.get
    summary = get(n.DATA_SUMMARY)
    if summary is not None:
        size, internal_date, sha256, subject, sender, truncated = decode_summary(summary)[:6]
    else:  # a row written before ADR 0028: ``_with_fields`` read its ``data:fields``
        size, internal_date, sha256, subject, sender, truncated = _from_fields(get(n.DATA_FIELDS))
    thread, flags, labels = get(n.META_THREAD), get(n.META_FLAGS), get(n.META_LABELS)
    state = get(n.META_STATE, b"")
    # the dataclass's own fields, set at once: its generated frozen ``__init__`` sets them one
    # ``object.__setattr__`` call at a time, a fifth of a listing's time (50 rows a page)
    message_id = cells[n.DATA_MESSAGE]
    found = _new(MessageSummary)
    _set(found, "__dict__", {
        "message_id": _uuid16(message_id) if len(message_id) == 16 else decode_uuid(message_id),
        "mailbox_id": mailbox_id,
        "uid": message_row_uid(row),
        "modseq": int(get(n.META_MODSEQ, b"0")),
        "state": _STATES.get(state) or state.decode(),
        "flags": list(_names(flags)) if flags is not None else [],
        "labels": list(_names(labels)) if labels is not None else [],
        "size": size if type(size) is int else int(size or 0),
        "internal_date": internal_date if type(internal_date) is str else str(internal_date or ""),
        "sha256": sha256 if type(sha256) is str else str(sha256 or ""),
        "thread_id": (_uuid16(thread) if len(thread) == 16 else decode_uuid(thread))
        if thread else None,
        "subject": subject,
        "sender": sender,
        "truncated": [str(limit) for limit in truncated] if truncated else [],
    })
    return found


def _from_fields(value: bytes | None) -> tuple[Any, Any, Any, Any, Any, Any]:
    """A listing's values from a ``data:fields`` cell written before ADR 0028."""
    fields = data_fields(value)
    envelope = fields.get("envelope")
    if not isinstance(envelope, dict):
        envelope = {}
    return (fields.get("size", 0), fields.get("internal_date", ""), fields.get("sha256", ""),
            envelope.get("subject"), envelope.get("from"), _truncated(fields.get("facts")))


def _with_fields(store: TableStore, table: str, row: bytes,
                 cells: dict[bytes, bytes]) -> dict[bytes, bytes]:
    """A listed row's cells; a row written before ADR 0028 (no ``data:summary``) gets its
    ``data:fields`` read too, to list it from there."""
    if n.DATA_SUMMARY in cells:
        return cells
    return {**cells, **(store.get(table, row, [n.DATA_FIELDS]) or {})}


def _truncated(facts: object) -> list[str]:
    found = facts.get("truncated") if isinstance(facts, dict) else None
    return [str(limit) for limit in found] if isinstance(found, list) else []


def mailbox_messages(
    store: TableStore, mailbox_id: UUID, *, limit: int = 50, before_uid: int | None = None,
    include_deleted: bool = False, physical: Physical = _same,
) -> list[MessageSummary]:
    """Newest first; page with ``before_uid`` (the lowest UID of the previous page).

    Scans ``limit`` rows; only when some of them are not listed (soft-deleted) does it scan
    on past the last row read, for as many more rows as the skipped share suggests."""
    if limit <= 0 or (before_uid is not None and before_uid <= 1):
        return []
    prefix = messages_prefix(mailbox_id)
    start = message_row(mailbox_id, before_uid - 1) if before_uid else prefix
    table = physical(n.MESSAGES)
    out: list[MessageSummary] = []
    rows = limit
    while True:
        page = list(store.scan(table, prefix=prefix, start=start, limit=rows,
                               columns=_LISTING_COLUMNS))
        listed = [(row, cells) for row, cells in page
                  if include_deleted or cells.get(n.META_STATE) in LISTED]
        out += [_summary(mailbox_id, row, _with_fields(store, table, row, cells))
                for row, cells in listed[:limit - len(out)]]
        if len(out) >= limit or len(page) < rows:
            return out
        start = page[-1][0] + b"\x00"
        rows = _rows_for(limit - len(out), read=len(page), listed=len(listed))


def _rows_for(missing: int, *, read: int, listed: int) -> int:
    """How many rows to scan next for ``missing`` listed messages, at the listed share seen
    so far (at most 1000 rows a scan)."""
    return min(1000, max(missing, -(-missing * read // max(listed, 1))))


def _placed(store: TableStore, refs: list[tuple[UUID, UUID, int]],
            physical: Physical) -> list[MessageSummary]:
    out = []
    table = physical(n.MESSAGES)
    for message_id, mailbox_id, uid in refs:
        row = message_row(mailbox_id, uid)
        cells = store.get(table, row, _LISTING_COLUMNS)
        if cells and cells.get(n.DATA_MESSAGE) == message_id.bytes:
            out.append(_summary(mailbox_id, row, _with_fields(store, table, row, cells)))
    return out


def label_messages(store: TableStore, account_id: UUID, label: str, *, limit: int = 50,
                   physical: Physical = _same) -> list[MessageSummary]:
    """A label's messages across the account's mailboxes, newest first."""
    refs = []
    for row, cells in store.scan(physical(n.LABEL_INDEX), prefix=label_prefix(account_id, label),
                                 limit=limit):
        mailbox_id, uid = decode_ref(cells[n.IX_REF])
        refs.append((label_row_message(row), mailbox_id, uid))
    return _placed(store, refs, physical)


def thread_messages(store: TableStore, thread_id: UUID, *, limit: int = 200,
                    physical: Physical = _same) -> list[MessageSummary]:
    refs = []
    for row, cells in store.scan(physical(n.THREADS), prefix=thread_prefix(thread_id),
                                 limit=limit):
        mailbox_id, uid = decode_ref(cells[n.IX_REF])
        refs.append((thread_row_message(row), mailbox_id, uid))
    return _placed(store, refs, physical)


@dataclass(frozen=True)
class Counts:
    messages: int
    unread: int
    bytes: int


def counters(store: TableStore, account_id: UUID, physical: Physical = _same
             ) -> tuple[dict[UUID, Counts], dict[str, Counts]]:
    """Per mailbox and per label: messages, unread, bytes (one row read, the counts only:
    not the row's soft-delete markers)."""
    row = store.get(physical(n.COUNTERS), account_row(account_id), [n.CT_COUNTS])
    boxes, labels = decode_counters(row)
    return ({k: Counts(*v) for k, v in boxes.items()}, {k: Counts(*v) for k, v in labels.items()})


def listed_mail(store: TableStore, physical: Physical = _same) -> Counts:
    """Every account's listed messages and their bytes, from the counters (one row per
    account, the counts only; unread is summed too): the mail a store holds for its users
    (soft-deleted messages, which wait for their purge, are not counted)."""
    messages = unread = size = 0
    for _, row in store.scan(physical(n.COUNTERS), columns=[n.CT_COUNTS]):
        boxes, _ = decode_counters(row)
        for m, u, b in boxes.values():
            messages, unread, size = messages + m, unread + u, size + b
    return Counts(messages, unread, size)


def mailbox_counts(store: TableStore, account_id: UUID, mailbox_id: UUID,
                   physical: Physical = _same) -> Counts:
    column = n.CT_MAILBOX + mailbox_id.bytes
    row = store.get(physical(n.COUNTERS), account_row(account_id), [column])
    boxes, _ = decode_counters(row)
    return Counts(*boxes.get(mailbox_id, (0, 0, 0)))


def label_counts(store: TableStore, account_id: UUID, label: str,
                 physical: Physical = _same) -> Counts:
    column = n.CT_LABEL + label.encode()
    row = store.get(physical(n.COUNTERS), account_row(account_id), [column])
    _, labels = decode_counters(row)
    return Counts(*labels.get(label, (0, 0, 0)))


def mailbox_status(store: TableStore, mailbox_id: UUID,
                   physical: Physical = _same) -> dict[str, Any] | None:
    """IMAP STATUS: name, uidvalidity, uidnext, highest modseq, messages, unseen, bytes."""
    row = store.get(physical(n.MAILBOXES), mailbox_row(mailbox_id))
    if not row:
        return None
    account_id = UUID(bytes=row[n.MB_ACCOUNT])
    c = mailbox_counts(store, account_id, mailbox_id, physical)
    return {
        "mailbox_id": str(mailbox_id),
        "account_id": str(account_id),
        "name": row.get(n.MB_NAME, b"").decode(),
        "role": row.get(n.MB_ROLE, b"").decode(),
        "uidvalidity": int(row.get(n.MB_UIDVALIDITY, b"0")),
        "uidnext": int(row.get(n.MB_UIDNEXT, b"1")),
        "highestmodseq": int(row.get(n.MB_HIGHESTMODSEQ, b"0")),
        "deleted": row.get(n.MB_DELETED) == b"1",
        "messages": c.messages,
        "unseen": c.unread,
        "bytes": c.bytes,
    }


def mailbox_id_named(store: TableStore, account_id: UUID, name: str,
                     physical: Physical = _same) -> UUID | None:
    row = store.get(physical(n.MAILBOX_NAMES), mailbox_name_row(account_id, name))
    value = row.get(n.MN_MAILBOX)
    return UUID(bytes=value) if value else None


def mailbox_names(store: TableStore, account_id: UUID,
                  physical: Physical = _same) -> dict[str, UUID]:
    prefix = mailbox_names_prefix(account_id)
    return {row[len(prefix):].decode(): UUID(bytes=cells[n.MN_MAILBOX])
            for row, cells in store.scan(physical(n.MAILBOX_NAMES), prefix=prefix)}


def subscriptions(store: TableStore, account_id: UUID, physical: Physical = _same) -> list[str]:
    row = store.get(physical(n.SUBSCRIPTIONS), account_row(account_id))
    return sorted(c[len(n.SUB_PREFIX):].decode() for c in row if c.startswith(n.SUB_PREFIX))


def account_labels(store: TableStore, account_id: UUID,
                   physical: Physical = _same) -> dict[str, Any]:
    row = store.get(physical(n.ACCOUNTS), account_row(account_id))
    return {c[len(n.LABEL_PREFIX):].decode(): decode_json(v)
            for c, v in row.items() if c.startswith(n.LABEL_PREFIX)}


def payload_references(store: TableStore, sha256: str, physical: Physical = _same) -> list[UUID]:
    row = store.get(physical(n.PAYLOAD_REFS), payload_row(sha256))
    return [UUID(bytes=c[len(n.REF_PREFIX):]) for c in row if c.startswith(n.REF_PREFIX)]


@dataclass(frozen=True)
class PurgeEntry:
    queue: str
    shard: int
    bucket: int
    message_id: UUID
    reason: str
    due: str

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["message_id"] = str(self.message_id)
        return d


QUEUES = ("deleted", "expired", "expiring", "incomplete")


def due_purge_entries(store: TableStore, now: datetime, *, queues: tuple[str, ...] = QUEUES,
                      ttls: Mapping[str, timedelta] | None = None, limit: int = 1000,
                      physical: Physical = _same) -> list[PurgeEntry]:
    """Entries due at ``now`` or earlier (``since`` + the queue's TTL), per queue and shard
    in ``since`` order."""
    out: list[PurgeEntry] = []
    for queue in queues:
        ttl = (ttls or {}).get(queue, timedelta(0))
        horizon = minute_bucket(now - ttl)
        for shard in range(PURGE_SHARDS):
            prefix = purge_shard_prefix(queue, shard)
            stop = prefix + (horizon + 1).to_bytes(8, "big")
            for row, cells in store.scan(physical(n.PURGE_QUEUE), start=prefix, stop=stop):
                q, s, b, mid = purge_row_parts(row)
                due = decode_datetime(cells[n.PQ_SINCE]) + ttl
                out.append(PurgeEntry(q, s, b, mid, cells.get(n.PQ_REASON, b"").decode(),
                                      due.isoformat()))
                if len(out) >= limit:
                    return out
    return out


def account_address(store: TableStore, account_id: UUID,
                    physical: Physical = _same) -> str | None:
    """The address of an account the log has opened; None for one it never has."""
    row = store.get(physical(n.ACCOUNTS), account_row(account_id), [n.ACC_ADDRESS])
    value = row.get(n.ACC_ADDRESS)
    return value.decode() if value else None
