"""How cell values are encoded (one documented encoding, ``docs/tables.md``).

* integers: ASCII decimal (``b"42"``);
* booleans: ``b"1"`` / ``b"0"``;
* strings: UTF-8;
* UUIDs: their 16 raw bytes;
* a message's place (label_index, threads): mailbox id (16 bytes) + UID (8 bytes big-endian);
* counters: ``b"messages,unread,bytes"``, ASCII decimals;
* date-times: ISO 8601 in UTC with microseconds, ``2026-03-01T12:00:00.000000+00:00``;
* lists and dicts: compact JSON, sorted keys, UTF-8 (not ASCII-escaped); inside JSON,
  date-times as above, UUIDs as their canonical string, sets as sorted lists, NaN and
  infinities (not JSON) as ``null``. Bytes never go into JSON (``TypeError``): raw bytes get
  a cell of their own.

``put`` builds a ``Put`` without re-validating it: projectors call it only with row keys from
``projections.keys``, column constants from ``projections.names`` and values from the
encoders here, which always give non-empty ``bytes`` keys and ``bytes`` values; the runner
checks each event's position once. It is ~2x cheaper than the validating constructor and
falls back to it if ``Put`` ever stops being a slotted dataclass.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any
from uuid import UUID

import orjson

from domain.speedups import uuid_of_bytes
from projections import names as n
from projections.tablestore import Put

_dumps = orjson.dumps

TRUE = b"1"
FALSE = b"0"


def encode_int(value: int) -> bytes:
    if type(value) is not int:
        raise TypeError(f"expected an int, got {type(value).__name__}")
    return b"%d" % value


def decode_int(data: bytes | None, default: int = 0) -> int:
    return default if data is None else int(data)


def encode_bool(value: bool) -> bytes:
    return TRUE if value else FALSE


def decode_bool(data: bytes | None) -> bool:
    return data == TRUE


def encode_str(value: str) -> bytes:
    return value.encode()


def encode_uuid(value: UUID) -> bytes:
    return value.bytes


uuid_of_16_bytes = uuid_of_bytes
"""``decode_uuid`` for a caller that checked ``len(data) == 16`` on a ``bytes`` value."""


def decode_uuid(data: bytes) -> UUID:
    """``UUID(bytes=data)`` without its keyword checks (a listing builds two a row)."""
    if type(data) is not bytes or len(data) != 16:
        return UUID(bytes=data)  # raises the usual error
    return uuid_of_bytes(data)


_REF = struct.Struct(">16sQ")


def encode_ref(mailbox_id: UUID, uid: int) -> bytes:
    """Where a message is: its mailbox id (16 bytes) and UID (8 bytes big-endian)."""
    return _REF.pack(mailbox_id.bytes, uid)


def decode_ref(data: bytes) -> tuple[UUID, int]:
    mailbox, uid = _REF.unpack(data)
    return UUID(bytes=mailbox), int(uid)


def encode_counts(messages: int, unread: int, octets: int) -> bytes:
    """Counters: ``b"messages,unread,bytes"`` in ASCII decimal."""
    return b"%d,%d,%d" % (messages, unread, octets)


def decode_counts(data: bytes) -> tuple[int, int, int]:
    messages, unread, octets = data.split(b",")
    return int(messages), int(unread), int(octets)


def iso(value: datetime) -> str:
    """ISO 8601, UTC, always with microseconds."""
    if value.tzinfo is UTC and type(value) is datetime:
        # orjson's RFC 3339 text, in a fifth of ``isoformat``'s time: the same text, but for
        # a zero fraction, which it leaves out (a Date header's seconds)
        text = _dumps(value)[1:-1].decode()
        return text if value.microsecond else text[:19] + ".000000+00:00"
    if value.tzinfo is not UTC:
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value.isoformat()}: every time in letterlog is UTC")
        value = value.astimezone(UTC)
    return value.isoformat(timespec="microseconds")


def encode_datetime(value: datetime) -> bytes:
    return iso(value).encode()


def decode_datetime(data: bytes) -> datetime:
    return datetime.fromisoformat(data.decode())


def _json_default(obj: object) -> Any:
    if isinstance(obj, datetime):
        return iso(obj)
    if isinstance(obj, UUID):
        return str(obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj, key=repr)
    if isinstance(obj, bytes | bytearray | memoryview):
        raise TypeError("bytes never go into JSON; give them a cell of their own")
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default
)


def _c_encode() -> Callable[[object], str]:
    """The C encoder that ``JSONEncoder.encode`` builds on every call, built once (without
    the circular-reference check: event values are trees). Same output as ``_ENCODER``."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - a Python without the C accelerator
        return _ENCODER.encode
    encoder = make(None, _json_default, json.encoder.encode_basestring, None, ":", ",",
                   True, False, True)

    def encode(value: object) -> str:
        return "".join(encoder(value, 0))

    return encode


_ENCODE = _c_encode()


# orjson writes the same bytes as the encoder above for what projectors give it (sorted keys,
# compact, UTF-8; date-times, dataclasses and subclasses of built-ins are passed to
# ``_json_default`` as the encoder above passes them), faster (ADR 0035). What it
# refuses (non-string keys, integers beyond 64 bits, a ``default`` that raises) goes
# through the encoder above, which accepts or rejects it as before. The differences, for
# floats only (no projector writes one): NaN and infinities, which are not JSON, are
# written as ``null``; a number may be spelled otherwise (``0.00006103515625`` for
# ``6.103515625e-05``), never changed.
_exact, _memoryview = bytes, memoryview
_OPTIONS = (orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
            | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS)


def encode_json(value: object) -> bytes:
    try:
        # copied to its size: orjson's own ``bytes`` keeps the 4 KiB buffer it wrote into,
        # and a rebuild holds millions of cells (3.4 GB instead of 1.3 GB for 1M events)
        return _exact(_memoryview(_dumps(value, _json_default, _OPTIONS)))
    except TypeError:  # orjson.JSONEncodeError is one
        pass
    if isinstance(value, str | int | float | bool) or value is None:
        return _ENCODER.encode(value).encode()
    return _ENCODE(value).encode()


@lru_cache(maxsize=1024)
def _encode_policy(kind: str, limit: int | None, until: datetime | None) -> bytes:
    return encode_json({"kind": kind, "limit": limit, "until": until})


def encode_policy(policy: dict[str, Any]) -> bytes:
    """An extraction policy ``{"kind", "limit", "until"}`` as JSON (cached: few policies)."""
    if policy.keys() != {"kind", "limit", "until"}:
        return encode_json(policy)
    return _encode_policy(policy["kind"], policy["limit"], policy["until"])


_DECODER = json.JSONDecoder()
_decode_json_text = _DECODER.decode
_LOADS = orjson.loads


def decode_json(data: bytes) -> Any:
    """Our JSON is always UTF-8: orjson reads it (several times faster than ``json``); what
    it refuses (``NaN`` written before ADR 0035, integers beyond 64 bits, invalid JSON) goes
    through ``json``'s decoder, which accepts or rejects it as ``json.loads`` does."""
    try:
        return _LOADS(data)
    except orjson.JSONDecodeError:
        pass
    return _decode_json_text(data.decode())


@lru_cache(maxsize=4096)
def _encode_names(names: tuple[str, ...]) -> bytes:
    return _ENCODE(sorted(names)).encode()


def encode_names(names: Iterable[str]) -> bytes:
    """A set of flags or labels: a sorted JSON list of strings (cached: few combinations)."""
    key = tuple(names)
    for name in key:
        if type(name) is not str:
            raise TypeError(f"expected strings, got {type(name).__name__}")
    return _encode_names(key)


def decode_names(data: bytes | None) -> list[str]:
    return [] if data is None else list(json.loads(data))


# -- building puts cheaply -------------------------------------------------------------------

_new = object.__new__
_slots = Put.__dict__


def _fast_put(table: str, row: bytes, column: bytes, value: bytes, version: int) -> Put:
    p = _new(Put)
    _set_table(p, table)
    _set_row(p, row)
    _set_column(p, column)
    _set_value(p, value)
    _set_version(p, version)
    return p


put: Callable[[str, bytes, bytes, bytes, int], Put]
try:
    _set_table = _slots["table"].__set__
    _set_row = _slots["row"].__set__
    _set_column = _slots["column"].__set__
    _set_value = _slots["value"].__set__
    _set_version = _slots["version"].__set__
    _probe = ("t", b"r", b"f:q", b"v", 1)
    if _fast_put(*_probe) != Put(*_probe):  # pragma: no cover - a changed Put
        raise TypeError("Put changed shape")
    put = _fast_put
except (KeyError, AttributeError, TypeError):  # pragma: no cover - a changed Put
    put = Put


Counts = tuple[int, int, int]  # messages, unread, bytes


def decode_counters(row: dict[bytes, bytes]) -> tuple[dict[UUID, Counts], dict[str, Counts]]:
    """A counters row as ``({mailbox id: (messages, unread, bytes)}, {label: (...)})``."""
    mailboxes: dict[UUID, Counts] = {}
    labels: dict[str, Counts] = {}
    start_m, start_l = len(n.CT_MAILBOX), len(n.CT_LABEL)
    for column, value in row.items():
        if column.startswith(n.CT_MAILBOX):
            mailboxes[UUID(bytes=column[start_m:])] = decode_counts(value)
        elif column.startswith(n.CT_LABEL):
            labels[column[start_l:].decode()] = decode_counts(value)
    return mailboxes, labels


# -- a message row's data cells (ADR 0028) -------------------------------------------------------

def decode_summary(value: bytes) -> list[Any]:
    """A ``data:summary`` cell: ``[size, internal_date, sha256, subject, sender, truncated]``
    (later versions may append items; readers take the first six)."""
    found = decode_json(value)
    if type(found) is not list or len(found) < 6:
        raise ValueError(f"data:summary: expected a JSON array of six items, got {value[:80]!r}")
    return found


def data_fields(value: bytes | None, summary: bytes | None = None) -> dict[str, Any]:
    """A message row's data as one dict ({} if there is none or it is not an object): the
    ``data:fields`` cell with what ``data:summary`` holds put back in (rows written before
    ADR 0028 have no summary: their ``data:fields`` holds everything)."""
    found = decode_json(value) if value else {}
    if not isinstance(found, dict):
        found = {}
    if summary:
        size, internal_date, sha256, subject, sender = decode_summary(summary)[:5]
        found.update(size=size, internal_date=internal_date, sha256=sha256)
        envelope = found.get("envelope")
        if type(envelope) is dict:
            envelope.update(subject=subject)
            envelope["from"] = sender
    return found


def listed_usage(row: dict[bytes, bytes]) -> tuple[int, int]:
    """An account's ``counters`` row as quotas count it: (listed messages, their bytes)."""
    boxes, _ = decode_counters(row)
    return (sum(c[0] for c in boxes.values()), sum(c[2] for c in boxes.values()))
