"""The wire form of a logged event outside the event store (Kafka records, Spark rows).

key:   the account id (16 bytes): one account's events share a partition, so they stay in order
value: msgpack ``{"p": position, "id": originator id (16 bytes), "v": originator version,
       "t": topic, "s": the stored state bytes exactly as in the event store}``

``decode_record`` turns a value back into ``(position, domain event)`` through the same
mapper as the event store; anything malformed raises ``CorruptEvent`` naming what it could.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

import msgpack
from eventsourcing.persistence import Mapper, StoredEvent

from adapters.transcoder import MsgpackTranscoder
from domain.errors import CorruptEvent

_MAPPER: Mapper[UUID] = Mapper(transcoder=MsgpackTranscoder())


def mapper() -> Mapper[UUID]:
    return _MAPPER


def account_of(event: Any) -> UUID:
    """The account an event belongs to (the Kafka key)."""
    account_id = getattr(event, "account_id", None)
    if isinstance(account_id, UUID):
        return account_id
    return event.originator_id  # Account events: the aggregate is the account


@dataclass(frozen=True)
class EventRecord:
    position: int
    originator_id: UUID
    originator_version: int
    topic: str
    state: bytes

    def encode(self) -> bytes:
        return msgpack.packb({"p": self.position, "id": self.originator_id.bytes,
                              "v": self.originator_version, "t": self.topic, "s": self.state},
                             use_bin_type=True)

    def stored_event(self) -> StoredEvent:
        return StoredEvent(originator_id=self.originator_id,
                           originator_version=self.originator_version,
                           topic=self.topic, state=self.state)

    def event(self) -> Any:
        try:
            return _MAPPER.to_domain_event(self.stored_event())
        except Exception as e:
            raise CorruptEvent(
                f"event at position {self.position} (aggregate {self.originator_id}, version "
                f"{self.originator_version}, topic {self.topic!r}) cannot be decoded: {e}"
            ) from e


def record_from_notification(n: Any) -> EventRecord:
    return EventRecord(int(n.id), n.originator_id, int(n.originator_version), n.topic,
                       bytes(n.state))


def decode_value(value: bytes) -> EventRecord:
    """A Kafka record value back to an EventRecord (``CorruptEvent`` if malformed)."""
    try:
        d = msgpack.unpackb(value, raw=False)
        return EventRecord(int(d["p"]), UUID(bytes=d["id"]), int(d["v"]), str(d["t"]),
                           bytes(d["s"]))
    except Exception as e:
        raise CorruptEvent(f"record is not a letterlog event ({len(value or b'')} bytes): "
                           f"{type(e).__name__}: {e}") from e


def decode_record(value: bytes) -> tuple[int, Any]:
    rec = decode_value(value)
    return rec.position, rec.event()
