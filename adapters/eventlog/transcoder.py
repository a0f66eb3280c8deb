"""msgpack transcoder for the event store (about three times faster than the library's JSON
transcoder on letterlog's events, and smaller).

Extension types (stable forever; the log outlives the code):
  1 UUID (16 raw bytes)
  2 datetime, timezone-aware, as int64 microseconds since the epoch, UTC
  3 set, 4 frozenset (msgpack arrays inside)
  5 Decimal (its string)
  6 a compressed value: zstd frame of the msgpack of the value (ADR 0014). An event's
    ``personal`` part (envelope, attachment names, inline body) is stored so: mail is written
    to the log once, at about a third of its size. Events written before ADR 0014 hold it as
    a plain map; both forms decode to the same dict.
  7 a message's personal data (``domain.personal.Personal``) sealed with its data key:
    ``key id (16) + nonce (12) + AES-256-GCM ciphertext`` of the zstd frame of the msgpack of
    its dict (compressed first: ciphertext does not compress); ``adapters.eventlog.sealing``.
    It opens as ``Personal``, shredded (empty) if the key was destroyed. With a key store
    (every letterlog log has one) ``personal`` is always written so.
Tuples become lists. A naive datetime is refused: every time in letterlog is UTC-aware.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgpack
from eventsourcing.persistence import Mapper, StoredEvent, Transcoder
from eventsourcing.utils import get_topic

from adapters.eventlog import sealing
from adapters.eventlog.compression import compress as _compress
from adapters.eventlog.compression import decompress as _decompress
from domain.personal import Personal
from domain.speedups import uuid_of_bytes, uuid_of_int

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_Q = struct.Struct(">q")
_UUID, _DATETIME, _SET, _FROZENSET, _DECIMAL, _COMPRESSED, _SEALED = 1, 2, 3, 4, 5, 6, 7
COMPRESSED_FIELD = "personal"  # the field of an event (or snapshot) stored compressed


_tuple_new = tuple.__new__
_ExtType = msgpack.ExtType


def _ext(code: int, data: bytes) -> msgpack.ExtType:
    """``msgpack.ExtType(code, data)`` without its argument checks (a third of the cost; an
    event holds a few UUIDs and date-times), for the codes above and ``bytes`` data only."""
    return _tuple_new(_ExtType, (code, data))


def _default(obj: Any) -> Any:
    if isinstance(obj, UUID):
        return _ext(_UUID, obj.bytes)
    if isinstance(obj, datetime):
        if obj.tzinfo is None:
            raise TypeError(f"naive datetime {obj.isoformat()} cannot be stored; use UTC")
        delta = obj - _EPOCH
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return _ext(_DATETIME, _Q.pack(micros))
    if isinstance(obj, frozenset):  # packed inside another pack: a packer of its own
        return _ext(_FROZENSET, _fresh_packb(sorted(obj, key=repr)))
    if isinstance(obj, set):
        return _ext(_SET, _fresh_packb(sorted(obj, key=repr)))
    if isinstance(obj, Decimal):
        return _ext(_DECIMAL, str(obj).encode())
    raise TypeError(f"cannot encode {type(obj).__name__} in an event")


uuid_from_int = uuid_of_int  # decoding builds a few UUIDs per event (domain.speedups)
_from_bytes = int.from_bytes


_DATETIMES: dict[bytes, datetime] = {}  # the events of one command share their times
# a log's accounts, mailboxes and threads recur from event to event: ~80% of the UUIDs an
# event holds were decoded before (UUIDs are immutable: one instance serves them all)
_UUIDS: dict[bytes, UUID] = {}


def ext_hook(code: int, data: bytes) -> Any:
    """msgpack's ext_hook for the extension types above (``unpackb`` passes it)."""
    # Called a few times per event: a UUID seen before (most are) and date-times built inline.
    if code == _UUID:
        u = _UUIDS.get(data)
        if u is None:
            if len(data) != 16:
                raise ValueError(f"a UUID is 16 bytes, not {len(data)}")
            u = uuid_of_bytes(data)
            if len(_UUIDS) >= 65536:
                _UUIDS.clear()
            _UUIDS[data] = u
        return u
    if code == _DATETIME:
        found = _DATETIMES.get(data)
        if found is None:
            if len(data) != 8:
                raise ValueError(f"a datetime is 8 bytes, not {len(data)}")
            found = _EPOCH + timedelta(0, 0, _from_bytes(data, signed=True))
            if len(_DATETIMES) >= 4096:
                _DATETIMES.clear()
            _DATETIMES[data] = found
        return found
    if code == _SET:
        return set(unpackb(data))
    if code == _FROZENSET:
        return frozenset(unpackb(data))
    if code == _DECIMAL:
        return Decimal(data.decode())
    if code == _COMPRESSED:
        return unpackb(_decompress(data))
    if code == _SEALED:
        return open_personal(data)
    return msgpack.ExtType(code, data)


def _fresh_packb(obj: Any) -> bytes:
    return msgpack.packb(obj, default=_default, use_bin_type=True, datetime=False)  # type: ignore[no-any-return]


_packers = threading.local()


def packb(obj: Any) -> bytes:
    """``obj`` as msgpack: the same bytes as ``msgpack.packb`` with these options, by one
    ``Packer`` per thread (``msgpack.packb`` builds one per call: a sixth of an event's
    encoding). A packer is not re-entrant, so ``_default`` packs a set inside an event with
    a packer of its own."""
    packer = getattr(_packers, "p", None)
    if packer is None:
        packer = _packers.p = msgpack.Packer(default=_default, use_bin_type=True,
                                             datetime=False)
    try:
        return packer.pack(obj)  # type: ignore[no-any-return]
    except BaseException:
        packer.reset()  # a failed pack leaves its partial output in the buffer
        raise


def unpackb(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=ext_hook, raw=False, strict_map_key=False)


def compressed(value: Any) -> msgpack.ExtType:
    """``value`` as extension type 6: what ``ext_hook`` turns back into ``value``."""
    return _ext(_COMPRESSED, _compress(packb(value)))


def seal_personal(personal: Personal, keys: sealing.KeyStore) -> msgpack.ExtType:
    """The seal step: the message's key (taken from ``keys`` the first time its personal data
    is written, then kept on the object) over the compressed msgpack of its dict."""
    if personal.shredded:
        raise TypeError(f"{personal!r}: its key was destroyed; it cannot be written again")
    if personal.key_id is None or personal.key is None:
        personal.key_id, personal.key = keys.new_key()
    return _ext(_SEALED, sealing.seal(personal.key, personal.key_id,
                                      _compress(packb(personal.data))))


_PERSONAL_KEY = b"\xa8" + COMPRESSED_FIELD.encode()  # the field's name as a msgpack fixstr
_EXT_HEADERS = {0xC7: 3, 0xC8: 4, 0xC9: 6}  # ext 8/16/32: header bytes, the type byte last


def sealed_key_ids(blobs: Iterable[bytes | None]) -> set[bytes]:
    """The key ids (16 bytes each) of the sealed ``personal`` parts in ``blobs`` (stored
    states, or Kafka record values holding them), read from where the bytes say one is (the
    field's name,
    then an extension of type 7 whose first 16 bytes are its key id, ``sealing.seal``),
    without unpacking them. For ``sealing.keys_read_ahead`` only: an id read where there is
    none is read ahead for nothing, and a sealed part missed is read on its own."""
    found: set[bytes] = set()
    name, headers, sealed = _PERSONAL_KEY, _EXT_HEADERS, bytes((_SEALED,))
    for blob in blobs:
        if not blob or not isinstance(blob, (bytes, bytearray)):
            continue  # a memoryview (no ``find``): its keys are read one by one
        at = blob.find(name)
        while at != -1:
            head = at + len(name)
            size = headers.get(blob[head]) if head < len(blob) else None
            if size is not None and blob[head + size - 1:head + size] == sealed \
                    and len(blob) >= head + size + 16:
                found.add(bytes(blob[head + size:head + size + 16]))
            at = blob.find(name, head)
    return found


def ext_hook_for(keys: Mapping[bytes, bytes]) -> Callable[[int, bytes], Any]:
    """``ext_hook`` opening sealed parts with ``keys`` (``sealing.keys_read_ahead``) first."""
    if not keys:
        return ext_hook

    def hook(code: int, data: bytes) -> Any:
        if code == _SEALED:
            return open_personal(data, keys)
        return ext_hook(code, data)

    return hook


def open_personal(data: bytes, keys: Mapping[bytes, bytes] | None = None) -> Personal:
    key_id, key, plaintext = sealing.open_sealed(data, keys)
    if plaintext is None:
        return Personal(key_id=key_id, shredded=True)
    return Personal(unpackb(_decompress(plaintext)), key_id=key_id, key=key)


def pack_state(state: Any, keys: sealing.KeyStore | None = None) -> bytes:
    """An event's (or snapshot's) state as stored: its ``personal`` part sealed (a
    ``Personal``, with a key store) or compressed (a plain map)."""
    if type(state) is dict:
        personal = state.get(COMPRESSED_FIELD)
        if isinstance(personal, Personal):
            if keys is None:
                raise TypeError("personal data is only written sealed: the log has no key store")
            state = dict(state)
            state[COMPRESSED_FIELD] = seal_personal(personal, keys)
        elif type(personal) is dict and personal:
            state = dict(state)
            state[COMPRESSED_FIELD] = compressed(personal)
    return packb(state)


def pack_owned_state(state: dict[str, Any], keys: sealing.KeyStore | None) -> bytes:
    """``pack_state`` of a dict the caller made for this call alone (``EventMapper``): its
    ``personal`` part is sealed (or compressed) in place, not in a copy."""
    personal = state.get(COMPRESSED_FIELD)
    if isinstance(personal, Personal):
        if keys is None:
            raise TypeError("personal data is only written sealed: the log has no key store")
        state[COMPRESSED_FIELD] = seal_personal(personal, keys)
    elif type(personal) is dict and personal:
        state[COMPRESSED_FIELD] = compressed(personal)
    return packb(state)


class EventMapper(Mapper[UUID]):
    """The library's ``Mapper`` with its write side in one step for every event: the topic
    and class version looked up once per class, the event's fields copied once (the
    library's copy, then the transcoder's copy to seal the personal part in) and packed.
    The stored event is the same, byte for byte; reading is the library's (upcasters
    included). With the library's compressor or cipher set, it is the library's path."""

    def __init__(self, transcoder: Transcoder, compressor: Any = None,
                 cipher: Any = None) -> None:
        super().__init__(transcoder=transcoder, compressor=compressor, cipher=cipher)
        self._classes: dict[type, tuple[str, int]] = {}
        self._own = (isinstance(transcoder, MsgpackTranscoder) and compressor is None
                     and cipher is None)

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        if not self._own:
            return super().to_stored_event(domain_event)
        cls = type(domain_event)
        found = self._classes.get(cls)
        if found is None:
            found = self._classes[cls] = (get_topic(cls), getattr(cls, "class_version", 1))
        topic, class_version = found
        state = dict(vars(domain_event))
        originator_id = state.pop("originator_id")
        originator_version = state.pop("originator_version")
        if class_version > 1:
            state["class_version"] = class_version
        keys = self.transcoder.keys  # type: ignore[attr-defined]
        return StoredEvent(originator_id=originator_id, originator_version=originator_version,
                           topic=topic, state=pack_owned_state(state, keys))


class MsgpackTranscoder(Transcoder):
    """The eventsourcing Transcoder that every letterlog event store uses; with a key store,
    personal data is sealed (without one, an event carrying personal data cannot be written)."""

    def __init__(self, keys: sealing.KeyStore | None = None) -> None:
        self.keys = keys

    def encode(self, obj: Any) -> bytes:
        return pack_state(obj, self.keys)

    def decode(self, data: bytes) -> Any:
        return unpackb(data)
