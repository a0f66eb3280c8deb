"""``messages``: one row per message in a mailbox (James' MESSAGES table, FB's key layout).

Row key: ``salt(mailbox) + mailbox id (16) + reversed uid (8)``: a forward scan of a
mailbox's prefix lists it newest (highest UID) first. Two families:

* ``meta`` -- what changes: flags, labels, modseq, state, thread, policy, extracts;
* ``data`` -- what never changes for one row key, in three cells: ``data:message`` (the
  message id, 16 bytes), ``data:fields`` (one JSON object: account, size, internal date,
  sha256, inline, copied_from, facts, and the personal envelope and attachment names; for a
  stored message whose payload has an address of its own (ADR 0099) ``address``; for an
  inline message ``body_event``, the log position of the event that holds its body: the body
  is stored once, in the log, ADR 0014). Packed because nothing ever updates them one by one:
  a delivery writes 9 cells instead of 19 (rebuilds and catch-up write and fold per cell),
  and a listing reads 7 cells a row instead of 11. Tables written before ADR 0014 also hold
  ``data:body`` (the inline body); readers take it where it is there.

Written whole on ``Delivered`` / ``UploadCompleted`` and at the new key on ``Moved`` (the old
key's row is deleted at the same position); ``meta`` cells are updated by the other changes;
a soft-deleted message keeps its row with ``state = deleted``; ``Expunged`` deletes the row.
``UploadBegun`` writes nothing (no UID yet). ``Expired`` updates the state; ``Purged`` deletes
the row (if it still has one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from domain.message import Arrival, Arrived, Message, Placed, Written
from domain.personal import Personal
from domain.sealed_facts import digest
from domain.values import MessageState
from projections import names as n
from projections.codec import (
    encode_int,
    encode_json,
    encode_names,
    encode_policy,
    iso,
    put,
)
from projections.keys import RowReader, message_row
from projections.mutationfold import RowPut
from projections.tablestore import DeleteRow, Mutation, TableSpec

T = n.MESSAGES
TABLES = (TableSpec(T, (n.F_META, n.F_DATA)),)
_ACTIVE = MessageState.ACTIVE.value.encode()
_ZERO = b"0"
_WITHOUT_ROW = frozenset({MessageState.EXPUNGED.value, MessageState.INCOMPLETE.value})


def _row(e: Placed) -> bytes:
    return message_row(e.mailbox_id, e.uid)


def _full_row(e: Written, p: int, state: bytes, row: bytes) -> list[Mutation]:
    summary, fields = _data(e, p)
    cells: list[Mutation] = [
        put(T, row, n.META_FLAGS, encode_names(e.flags), p),
        put(T, row, n.META_LABELS, encode_names(e.labels), p),
        put(T, row, n.META_MODSEQ, b"%d" % p, p),
        put(T, row, n.META_STATE, state, p),
        put(T, row, n.META_THREAD, e.thread_id.bytes, p),
        put(T, row, n.DATA_MESSAGE, e.originator_id.bytes, p),
        put(T, row, n.DATA_SUMMARY, summary, p),
        put(T, row, n.DATA_FIELDS, fields, p),
        put(T, row, n.META_POLICY, encode_policy(e.policy), p),
    ]
    return cells


def _data(e: Written, p: int) -> tuple[bytes, bytes]:
    """``data:summary`` and ``data:fields`` (ADR 0028; ``codec.split_fields`` gives the same
    from the whole, as ``codec.data_fields`` reads it back). JSON: UUIDs as strings, dates in
    ISO 8601. An inline body is not copied: ``body_event`` is the log position of the event
    that holds it."""
    size = e.size
    if type(size) is not int:
        raise TypeError(f"size: expected an int, got {type(size).__name__}")
    facts = e.facts
    account = e.account_id
    text = _ACCOUNTS.get(account.int)
    if text is None:  # the few accounts of a log: their text once each
        if len(_ACCOUNTS) >= 65536:
            _ACCOUNTS.clear()
        text = _ACCOUNTS[account.int] = str(account)
    personal = e.personal
    sealed_media = personal.get("content_type") if not _shredded(personal) else None
    if sealed_media is not None and type(facts) is dict:  # the live row shows the whole one
        facts = {**facts, "content_type": sealed_media}
    fields: dict[str, Any] = {"account": text, "inline": bool(e.inline), "facts": facts}
    if not e.inline and e.address and e.address != digest(e.sha256, personal):  # ADR 0099
        fields["address"] = e.address
    if e.inline and not _shredded(e.personal):
        body = e.personal.get("body")
        if type(body) is not bytes:
            raise TypeError(f"personal.body: expected bytes, got {type(body).__name__}")
        fields["body_event"] = p
    copied_from = e.copied_from if isinstance(e, Arrival) else None
    if copied_from is not None:
        fields["copied_from"] = str(copied_from)
    envelope = personal.get("envelope")
    subject = sender = None
    if envelope is not None:
        sent_at = envelope.get("sent_at")
        if type(envelope) is dict and "subject" in envelope and "from" in envelope:
            subject, sender = envelope["subject"], envelope["from"]
            envelope = envelope.copy()  # one copy, changed in place
            del envelope["subject"], envelope["from"]
        elif type(sent_at) is datetime:
            envelope = {**envelope}
        if type(sent_at) is datetime:
            # the text the encoder's ``default`` would give, made here: the C encoder calling
            # back into Python for the date-time took ~40% of this cell's encoding
            envelope["sent_at"] = iso(sent_at)
        fields["envelope"] = envelope
    attachments = personal.get("attachment_names")
    if attachments is not None:
        fields["attachments"] = attachments
    truncated = facts.get("truncated") if type(facts) is dict else None
    summary = [size, iso(e.internal_date), digest(e.sha256, personal), subject, sender,
               truncated if type(truncated) is list else []]
    return encode_json(summary), encode_json(fields)


_ACCOUNTS: dict[int, str] = {}  # UUID.int -> its text


def _shredded(personal: Mapping[str, Any]) -> bool:
    """Whether the personal part's key was destroyed (it opened empty)."""
    return isinstance(personal, Personal) and personal.shredded




def _delivered(e: Arrived, p: int) -> list[Mutation]:
    row = _row(e)
    cells = _full_row(e, p, _ACTIVE, row)
    cells.append(put(T, row, n.META_EXTRACTS, _ZERO, p))
    return cells


def _moved(e: Message.Moved, p: int) -> list[Mutation]:
    old = message_row(e.from_mailbox_id, e.from_uid)
    row = _row(e)
    cells = _full_row(e, p, e.state.encode(), row)
    cells.append(put(T, row, n.META_EXTRACTS, encode_int(e.extract_count), p))
    return [DeleteRow(T, old, p), *cells]


def _flags(e: Message.FlagsChanged, p: int) -> list[Mutation]:
    row = _row(e)
    return [
        put(T, row, n.META_FLAGS, encode_names(e.flags), p),
        put(T, row, n.META_MODSEQ, b"%d" % p, p),
    ]


def _labels(e: Message.LabelsChanged, p: int) -> list[Mutation]:
    row = _row(e)
    return [
        put(T, row, n.META_LABELS, encode_names(e.labels), p),
        put(T, row, n.META_MODSEQ, b"%d" % p, p),
    ]


def _state(e: Message.Changed, p: int) -> list[Mutation]:
    row = _row(e)
    return [
        put(T, row, n.META_STATE, e.state.encode(), p),
        put(T, row, n.META_MODSEQ, b"%d" % p, p),
    ]


def _expunged(e: Message.Expunged, p: int) -> list[Mutation]:
    return [DeleteRow(T, _row(e), p)]


def _purged(e: Message.Purged, p: int) -> list[Mutation]:
    """The row goes (an expunged message's went already; an incomplete one never had one)."""
    if e.old_state in _WITHOUT_ROW:
        return []
    return [DeleteRow(T, _row(e), p)]


def _extracted(e: Message.Extracted, p: int) -> list[Mutation]:
    row = _row(e)
    return [
        put(T, row, n.META_EXTRACTS, encode_int(e.count), p),
        put(T, row, n.META_STATE, e.state.encode(), p),
        put(T, row, n.META_MODSEQ, b"%d" % p, p),
    ]


def _policy(e: Message.PolicyChanged, p: int) -> list[Mutation]:
    row = _row(e)
    return [
        put(T, row, n.META_POLICY, encode_policy(e.policy), p),
        put(T, row, n.META_EXTRACTS, _ZERO, p),
        put(T, row, n.META_STATE, e.state.encode(), p),
        put(T, row, n.META_MODSEQ, b"%d" % p, p),
    ]


_HANDLERS: dict[type, Callable[[Any, int], list[Mutation]]] = {
    Message.Delivered: _delivered,
    Message.UploadCompleted: _delivered,
    Message.Moved: _moved,
    Message.FlagsChanged: _flags,
    Message.LabelsChanged: _labels,
    Message.Deleted: _state,
    Message.Restored: _state,
    Message.Expunged: _expunged,
    Message.Extracted: _extracted,
    Message.PolicyChanged: _policy,
    Message.Expired: _state,
    Message.Purged: _purged,
}
HANDLED = frozenset(_HANDLERS)


def project(event: object, position: int, read: RowReader) -> list[Mutation]:
    handler = _HANDLERS.get(type(event))
    return [] if handler is None else handler(event, position)


# -- the fold form (``registry.FOLD_FORMS``, ADR 0106): the same cells, a row's in one ``RowPut`` --

_Folded = list[Mutation | RowPut]


def _full_cells(e: Written, p: int, state: bytes,
                extracts: bytes) -> tuple[tuple[bytes, bytes], ...]:
    summary, fields = _data(e, p)
    return (
        (n.META_FLAGS, encode_names(e.flags)),
        (n.META_LABELS, encode_names(e.labels)),
        (n.META_MODSEQ, b"%d" % p),
        (n.META_STATE, state),
        (n.META_THREAD, e.thread_id.bytes),
        (n.DATA_MESSAGE, e.originator_id.bytes),
        (n.DATA_SUMMARY, summary),
        (n.DATA_FIELDS, fields),
        (n.META_POLICY, encode_policy(e.policy)),
        (n.META_EXTRACTS, extracts),
    )


def _delivered_row(e: Arrived, p: int) -> _Folded:
    return [RowPut(T, _row(e), _full_cells(e, p, _ACTIVE, _ZERO), p)]


def _moved_row(e: Message.Moved, p: int) -> _Folded:
    old = message_row(e.from_mailbox_id, e.from_uid)
    cells = _full_cells(e, p, e.state.encode(), encode_int(e.extract_count))
    return [DeleteRow(T, old, p), RowPut(T, _row(e), cells, p)]


def _flags_row(e: Message.FlagsChanged, p: int) -> _Folded:
    cells = ((n.META_FLAGS, encode_names(e.flags)), (n.META_MODSEQ, b"%d" % p))
    return [RowPut(T, _row(e), cells, p)]


def _labels_row(e: Message.LabelsChanged, p: int) -> _Folded:
    cells = ((n.META_LABELS, encode_names(e.labels)), (n.META_MODSEQ, b"%d" % p))
    return [RowPut(T, _row(e), cells, p)]


def _state_row(e: Message.Changed, p: int) -> _Folded:
    cells = ((n.META_STATE, e.state.encode()), (n.META_MODSEQ, b"%d" % p))
    return [RowPut(T, _row(e), cells, p)]


def _extracted_row(e: Message.Extracted, p: int) -> _Folded:
    cells = ((n.META_EXTRACTS, encode_int(e.count)), (n.META_STATE, e.state.encode()),
             (n.META_MODSEQ, b"%d" % p))
    return [RowPut(T, _row(e), cells, p)]


def _policy_row(e: Message.PolicyChanged, p: int) -> _Folded:
    cells = ((n.META_POLICY, encode_policy(e.policy)), (n.META_EXTRACTS, _ZERO),
             (n.META_STATE, e.state.encode()), (n.META_MODSEQ, b"%d" % p))
    return [RowPut(T, _row(e), cells, p)]


_ROW_HANDLERS: dict[type, Callable[[Any, int], Sequence[Mutation | RowPut]]] = {
    Message.Expunged: _expunged,
    Message.Purged: _purged,
    Message.Delivered: _delivered_row,
    Message.UploadCompleted: _delivered_row,
    Message.Moved: _moved_row,
    Message.FlagsChanged: _flags_row,
    Message.LabelsChanged: _labels_row,
    Message.Deleted: _state_row,
    Message.Restored: _state_row,
    Message.Extracted: _extracted_row,
    Message.PolicyChanged: _policy_row,
    Message.Expired: _state_row,
}


def fold_project(event: object, position: int,
                 read: RowReader) -> Sequence[Mutation | RowPut]:
    """``project`` for a fold: each row's cells in one ``RowPut`` (the same fold)."""
    handler = _ROW_HANDLERS.get(type(event))
    return [] if handler is None else handler(event, position)
