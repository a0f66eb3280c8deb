"""The log reader gives exactly the events the eventsourcing mapper gives, and names a
corrupt one by its position, aggregate and version."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar
from uuid import UUID, uuid4

import msgpack
import pytest
from eventsourcing.compressor import ZlibCompressor
from eventsourcing.persistence import Mapper, StoredEvent
from eventsourcing.utils import get_topic

from adapters.embedded import Letterlog
from adapters.eventlog.reader import EventDecoder, plain_decoder, read_events
from adapters.eventlog.store import MailLog
from adapters.eventlog.transcoder import MsgpackTranscoder, packb
from adapters.payloads.memory import InMemoryPayloadStore
from domain.errors import CorruptEvent
from domain.service import Mailstore
from tests.factories import make_mail

ADA = "ada@example.org"


def _mapped(log: Any) -> list[tuple[int, Any]]:
    found = log.recorder.select_notifications(start=1, limit=10_000)
    return [(n.id, log.mapper.to_domain_event(n)) for n in found]


def _assert_same(got: list[tuple[int, Any]], expected: list[tuple[int, Any]]) -> None:
    assert [p for p, _ in got] == [p for p, _ in expected]
    for (_, a), (_, b) in zip(got, expected, strict=True):
        assert type(a) is type(b) and a.__dict__ == b.__dict__
        assert {k: type(v) for k, v in vars(a).items()} == {k: type(v) for k, v in vars(b).items()}


def _busy(mail: Any) -> None:
    for i in range(5):
        d = mail.deliver(account=ADA, raw=make_mail(f"m{i}", message_id=f"<{i}@x>"),
                         labels=["work"], extract_until=datetime(2030, 1, 1, tzinfo=UTC))
        mail.flag(d.message_id, ["\\Seen"])
    mail.create_mailbox(ADA, "Archive")
    mail.move(d.message_id, "Archive")


def test_sqlite_log_reads_as_the_mapper_reads_it(tmp_path: Path) -> None:
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        _busy(store)
        expected = _mapped(store.log)
        _assert_same(list(store.events(batch=3)), expected)
        _assert_same(list(store.events(start=4, stop=9, batch=2)), expected[3:9])


ZLIB = {"COMPRESSOR_TOPIC": "eventsourcing.compressor:ZlibCompressor"}


@pytest.mark.parametrize("env", [{}, ZLIB])
def test_other_event_stores_read_through_notifications(env: dict[str, str]) -> None:
    log = MailLog(env={"PERSISTENCE_MODULE": "eventsourcing.popo", **env})
    assert (plain_decoder(log.mapper) is None) == bool(env)
    _busy(Mailstore(log, InMemoryPayloadStore()))
    expected = _mapped(log)
    _assert_same(list(read_events(log, batch=4)), expected)
    _assert_same(list(read_events(log, start=2, stop=6, batch=4)), expected[1:6])


def test_a_corrupt_event_is_named_by_position_aggregate_and_version(tmp_path: Path) -> None:
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        _busy(store)
        position, event = _mapped(store.log)[-1]
        con = sqlite3.connect(tmp_path / "d" / "events.sqlite")
        con.execute("UPDATE stored_events SET state = x'c1c1c1' WHERE rowid = ?", (position,))
        con.commit()
        con.close()
        with pytest.raises(CorruptEvent, match=(
                f"position {position} \\(aggregate {event.originator_id}, version "
                f"{event.originator_version}")):
            list(store.events())


def test_an_unknown_topic_or_a_malformed_uuid_or_time_fails_to_decode() -> None:
    decode = EventDecoder()
    with pytest.raises(Exception, match="nowhere"):
        decode(uuid4(), 1, "nowhere:Thing", packb({}))
    for field, ext, size in (("id", 1, 16), ("timestamp", 2, 8)):
        state = msgpack.packb({"name": "x", field: msgpack.ExtType(ext, b"\x00" * (size - 1))})
        with pytest.raises(ValueError, match=f"{size} bytes"):
            decode(uuid4(), 1, get_topic(Renamed), state)


@dataclass(frozen=True)
class Renamed:
    originator_id: UUID
    originator_version: int
    timestamp: datetime
    name: str
    class_version: ClassVar[int] = 3

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["name"] = state.pop("old_name", "?")

    @staticmethod
    def upcast_v2_v3(state: dict[str, Any]) -> None:
        state["name"] = state["name"].upper()


def test_old_event_versions_are_upcast_as_the_mapper_does() -> None:
    mapper: Mapper[UUID] = Mapper(transcoder=MsgpackTranscoder())
    when = datetime(2026, 1, 1, tzinfo=UTC)
    aggregate = uuid4()
    for state in ({"timestamp": when, "old_name": "ada"},
                  {"timestamp": when, "name": "bob", "class_version": 2},
                  {"timestamp": when, "name": "CY", "class_version": 3}):
        stored = StoredEvent(originator_id=aggregate, originator_version=7,
                             topic=get_topic(Renamed), state=packb(state))
        expected = mapper.to_domain_event(stored)
        got = EventDecoder()(aggregate.hex, 7, stored.topic, stored.state)
        assert type(got) is Renamed and got.__dict__ == expected.__dict__
        paged = list(EventDecoder().events(  # a page decodes each row as a call does
            iter([[(3, aggregate.hex, 7, stored.topic, stored.state)]])))
        assert [(p, type(e), e.__dict__) for p, e in paged] == [(3, Renamed, expected.__dict__)]


def test_a_corrupt_event_comes_after_the_events_before_it_in_its_page(tmp_path: Path) -> None:
    with Letterlog.open(tmp_path / "d", durability="normal") as store:
        _busy(store)
        expected = _mapped(store.log)
        position = expected[len(expected) // 2][0]
        con = sqlite3.connect(tmp_path / "d" / "events.sqlite")
        con.execute("UPDATE stored_events SET state = x'c1c1c1' WHERE rowid = ?", (position,))
        con.commit()
        con.close()
        seen: list[tuple[int, Any]] = []
        with pytest.raises(CorruptEvent, match=f"position {position} "):
            for item in read_events(store.log, batch=len(expected)):  # one page
                seen.append(item)
        _assert_same(seen, [item for item in expected if item[0] < position])


def test_a_compressed_log_goes_through_the_mapper() -> None:
    compressed = Mapper(transcoder=MsgpackTranscoder(), compressor=ZlibCompressor())
    assert plain_decoder(compressed) is None
    assert plain_decoder(Mapper(transcoder=MsgpackTranscoder())) is not None
