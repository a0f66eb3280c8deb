"""The wire form of a logged event outside the event store (Kafka records, Spark rows).

key:   the account id (16 bytes): one account's events share a partition, so they stay in order
value: msgpack ``{"p": position, "id": originator id (16 bytes), "v": originator version,
       "t": topic, "s": the stored state bytes exactly as in the event store}``

``decode_record`` turns a value back into ``(position, domain event)`` exactly as the event
store's mapper would (through ``log_reader.EventDecoder``, without the mapper's per-event
overhead); anything malformed raises ``CorruptEvent`` naming what it could. ``account_key``
finds a stored event's key without building the event; ``account_events`` reads one account's
events by it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import msgpack
from eventsourcing.persistence import Mapper, StoredEvent
from eventsourcing.utils import resolve_topic

from adapters.eventlog.reader import EventDecoder, _corrupt, _uuid_of, row_decoder, row_pages
from adapters.eventlog.transcoder import MsgpackTranscoder, ext_hook, uuid_from_int
from domain.errors import CorruptEvent

_MAPPER: Mapper[UUID] = Mapper(transcoder=MsgpackTranscoder())
_DECODE = EventDecoder()
_UUID_EXT = 1  # adapters.eventlog.transcoder's extension type for a UUID
_KNOWN_TOPICS: set[str] = set()
_IDS: dict[bytes, UUID] = {}  # an aggregate's records share its id (UUIDs are immutable)


def mapper() -> Mapper[UUID]:
    return _MAPPER


def account_of(event: Any) -> UUID:
    """The account an event belongs to (the Kafka key)."""
    account_id = getattr(event, "account_id", None)
    if isinstance(account_id, UUID):
        return account_id
    originator: UUID = event.originator_id  # Account events: the aggregate is the account
    return originator


def account_key(originator_id: UUID, topic: str, state: bytes) -> bytes:
    """``account_of(event).bytes`` for a stored event, read from its msgpack state without
    building the event: the map is walked key by key and every other value skipped unbuilt,
    up to ``account_id`` (2-3x faster than unpacking the whole state, measured on the bench
    log; the relay keys every event with it, and the Spark rebuild every event it shuffles).
    Raises if the state is not a map or the topic names no class; the caller turns that into
    ``CorruptEvent``. The rest of the state is checked when the event is decoded."""
    if topic not in _KNOWN_TOPICS:
        resolve_topic(topic)
        _KNOWN_TOPICS.add(topic)
    fields = msgpack.Unpacker(None, raw=False, strict_map_key=False)
    fields.feed(state)
    for _ in range(fields.read_map_header()):
        if fields.unpack() != "account_id":
            fields.skip()
            continue
        account = fields.unpack()
        if (type(account) is msgpack.ExtType and account.code == _UUID_EXT
                and len(account.data) == 16):
            return bytes(account.data)
        break
    return originator_id.bytes


@dataclass(frozen=True)
class EventRecord:
    position: int
    originator_id: UUID
    originator_version: int
    topic: str
    state: bytes

    def encode(self) -> bytes:
        packed: bytes = msgpack.packb(
            {"p": self.position, "id": self.originator_id.bytes, "v": self.originator_version,
             "t": self.topic, "s": self.state}, use_bin_type=True)
        return packed

    def stored_event(self) -> StoredEvent:
        return StoredEvent(originator_id=self.originator_id,
                           originator_version=self.originator_version,
                           topic=self.topic, state=self.state)

    def event(self, hook: Callable[[int, bytes], Any] = ext_hook) -> Any:
        """The domain event; ``hook``: ``transcoder.ext_hook_for`` the keys of its batch."""
        try:
            return _DECODE(self.originator_id, self.originator_version, self.topic, self.state,
                           hook)
        except Exception as e:
            if _unavailable(e):
                raise  # the key store's database did not answer: not the event's fault
            raise CorruptEvent(
                f"event at position {self.position} (aggregate {self.originator_id}, version "
                f"{self.originator_version}, topic {self.topic!r}) cannot be decoded: {e}"
            ) from e


def _unavailable(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) is a database or connection failure -- the key
    store's server down or restarting -- rather than something wrong with the event."""
    seen: BaseException | None = error
    for _ in range(5):
        if seen is None:
            return False
        module = type(seen).__module__
        if module.startswith(("psycopg", "sqlite3")) or isinstance(seen, ConnectionError
                                                                   | TimeoutError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def record_from_notification(n: Any) -> EventRecord:
    return EventRecord(int(n.id), n.originator_id, int(n.originator_version), n.topic,
                       bytes(n.state))


def decode_value(value: bytes) -> EventRecord:
    """A Kafka record value back to an EventRecord (``CorruptEvent`` if malformed)."""
    try:
        d = msgpack.unpackb(value, raw=False)
        raw = d["id"]
        originator_id = _IDS.get(raw)
        if originator_id is None:  # UUID(bytes=raw), without its checks but the length
            if type(raw) is not bytes or len(raw) != 16:
                raise ValueError(f"an aggregate id is 16 bytes, not {raw!r}")
            if len(_IDS) >= 65536:
                _IDS.clear()
            originator_id = _IDS[raw] = uuid_from_int(int.from_bytes(raw))
        return EventRecord(int(d["p"]), originator_id, int(d["v"]), str(d["t"]),
                           bytes(d["s"]))
    except Exception as e:
        raise CorruptEvent(f"record is not a letterlog event ({len(value or b'')} bytes): "
                           f"{type(e).__name__}: {e}") from e


def decode_record(value: bytes, hook: Callable[[int, bytes], Any] = ext_hook
                  ) -> tuple[int, Any]:
    rec = decode_value(value)
    return rec.position, rec.event(hook)


def account_events(log: Any, account: bytes, stop: int | None = None,
                   batch: int = 2000) -> Iterator[tuple[int, Any]]:
    """The events of one account (its 16-byte id) up to ``stop``: every stored event's
    account is read from its msgpack without building the event, and only the account's
    events are decoded."""
    decode = row_decoder(log)
    for rows in row_pages(log, 1, stop, batch):
        for row in rows:
            position, originator_id, version, topic, state = row
            try:
                key = account_key(_uuid_of(originator_id), topic, state)
            except Exception as e:
                raise _corrupt(position, originator_id, version, topic, e) from e
            if key == account:
                yield decode(row)
