"""Data keys read a page at a time (ADR 0117): a page of the log, or a batch of Kafka records,
reads its sealed parts' keys in one query, decodes exactly as a read per event does, holds
no key after the page, and falls back to a read per event whenever the read ahead cannot
answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

import msgpack
import pytest

from adapters.embedded import Letterlog
from adapters.eventlog import sealing
from adapters.eventlog.records import record_from_notification
from adapters.eventlog.transcoder import (
    MsgpackTranscoder,
    ext_hook,
    ext_hook_for,
    packb,
    sealed_key_ids,
)
from adapters.eventlog.wrappedkeys import WrappedKeyStore
from adapters.streaming.projector import StreamProjector
from adapters.tables.memory import InMemoryTableStore
from devtools.bench.keyreads import CountedKeyTable
from domain.personal import Personal
from tests.factories import make_mail
from tests.stream_support import TOPIC, Log, assert_equal_to_fold, story

ADA = "ada@example.org"


def _personal_key_ids(event: Any) -> set[bytes]:
    return {v.key_id.bytes for v in vars(event).values()
            if isinstance(v, Personal) and v.key_id is not None}


def _stored(store: Any) -> list[Any]:
    return store.log.recorder.select_notifications(start=1, limit=10_000)


def _key_store(store: Any) -> WrappedKeyStore:
    keys = store.log.keys
    assert isinstance(keys, WrappedKeyStore)
    return keys


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with Letterlog.open(tmp_path / "d", durability="normal") as s:
        for i in range(12):
            s.deliver(account=ADA, raw=make_mail(f"m{i}", message_id=f"<{i}@x>"),
                      labels=["work"])
        yield s


def test_the_key_ids_read_from_the_bytes_are_those_of_the_sealed_parts(store: Any) -> None:
    """Every stored state and every Kafka record value: the ids read without unpacking are
    exactly the key ids of the events' sealed ``personal`` parts (and none for the rest)."""
    stored = _stored(store)
    sealed = 0
    for n in stored:
        truth = _personal_key_ids(store.log.mapper.to_domain_event(n))
        sealed += bool(truth)
        assert sealed_key_ids([n.state]) == truth
        assert sealed_key_ids([record_from_notification(n).encode()]) == truth
    assert sealed == 12  # one delivery each
    everything = sealed_key_ids([n.state for n in stored])
    assert len(everything) == 12


def test_bytes_that_only_look_sealed_cost_nothing_but_a_wasted_read() -> None:
    plain = packb({"personal": {"subject": "x"}, "note": "personal"})
    assert sealed_key_ids([plain, b"", None, b"\xa8personal", b"\xa8personal\xc7",
                           memoryview(plain)]) == set()  # type: ignore[list-item]
    keys = sealing.MemoryKeyStore()
    p = Personal({"subject": "hello"})
    state = MsgpackTranscoder(keys).encode({"personal": p})
    assert p.key_id is not None
    assert sealed_key_ids([state, state[:40]]) == {p.key_id.bytes}  # a cut copy: too short
    keys.close()


def test_a_page_reads_its_keys_in_one_query_and_decodes_as_the_mapper(store: Any) -> None:
    keys = _key_store(store)
    counted = CountedKeyTable.wrap(keys)
    try:
        expected = [(n.id, store.log.mapper.to_domain_event(n)) for n in _stored(store)]
        counted.one = counted.many = 0
        got = list(store.events(batch=1000))
    finally:
        counted.unwrap(keys)
    assert (counted.one, counted.many) == (0, 1)
    assert [(p, type(e), e.__dict__) for p, e in got] == \
        [(p, type(e), e.__dict__) for p, e in expected]


def test_a_destroyed_key_read_ahead_opens_as_shredded_and_a_later_page_reads_again(
        store: Any) -> None:
    keys = _key_store(store)
    in_order = [k for n in _stored(store) for k in sorted(sealed_key_ids([n.state]))]
    first, last = in_order[0], in_order[-1]  # the first page's, the last page's
    assert keys.destroy([UUID(bytes=first)]) == 1
    events = store.events(batch=4)
    position, event = next(events)
    # erased while the first page is being read: the last page's read finds it destroyed
    assert keys.destroy([UUID(bytes=last)]) == 1
    seen = [v for _, e in [(position, event), *events] for v in vars(e).values()
            if isinstance(v, Personal)]
    assert len(seen) == 12
    assert [p.key_id.bytes for p in seen if p.shredded] == [first, last]


def test_a_read_ahead_that_fails_falls_back_to_a_read_per_key(store: Any,
                                                              monkeypatch: Any) -> None:
    keys = _key_store(store)
    expected = [(n.id, store.log.mapper.to_domain_event(n)) for n in _stored(store)]

    def down(key_ids: Any) -> Any:
        raise ConnectionError("the key table's server went away")

    monkeypatch.setattr(keys, "get_many", down)
    counted = CountedKeyTable.wrap(keys)
    try:
        got = list(store.events(batch=5))
    finally:
        counted.unwrap(keys)
    assert counted.one == 12  # every sealed event read its key on its own
    assert [(p, e.__dict__) for p, e in got] == [(p, e.__dict__) for p, e in expected]


def test_a_key_no_store_holds_is_still_an_error_not_a_purge() -> None:
    elsewhere = sealing.MemoryKeyStore()
    state = MsgpackTranscoder(elsewhere).encode({"personal": Personal({"subject": "x"})})
    elsewhere.close()
    keep_one_open = sealing.MemoryKeyStore()
    try:
        ahead = sealing.keys_read_ahead(sealed_key_ids([state]))
        assert ahead == {}
        with pytest.raises(sealing.KeyStoreMissing):
            msgpack.unpackb(state, ext_hook=ext_hook_for(ahead), raw=False)
    finally:
        keep_one_open.close()


def test_keys_read_ahead_open_what_they_hold_and_leave_the_rest_to_a_read_each() -> None:
    keys = sealing.MemoryKeyStore()
    try:
        p, q = Personal({"subject": "p"}), Personal({"subject": "q"})
        one = MsgpackTranscoder(keys).encode({"personal": p})
        two = MsgpackTranscoder(keys).encode({"personal": q})
        assert p.key_id is not None and q.key_id is not None
        ahead = sealing.keys_read_ahead(sealed_key_ids([one]))
        assert ahead == {p.key_id.bytes: keys.get(p.key_id)}
        assert keys.destroy([p.key_id]) == 1  # after the read: the page holds what it read
        hook = ext_hook_for(ahead)
        assert dict(msgpack.unpackb(one, ext_hook=hook, raw=False)["personal"]) == {
            "subject": "p"}
        assert dict(msgpack.unpackb(two, ext_hook=hook, raw=False)["personal"]) == {
            "subject": "q"}  # not read ahead: read on its own
        assert sealing.keys_read_ahead(sealed_key_ids([one])) == {
            p.key_id.bytes: sealing.DESTROYED}
        assert msgpack.unpackb(one, ext_hook=ext_hook_for(sealing.keys_read_ahead(
            sealed_key_ids([one]))), raw=False)["personal"].shredded
        assert ext_hook_for({}) is ext_hook
    finally:
        keys.close()


def test_a_stream_batch_reads_its_keys_once_and_projects_the_fold(monkeypatch: Any) -> None:
    log = Log()
    story(log.mail)
    records = log.records()
    calls: list[int] = []
    many = sealing.MemoryKeyStore.get_many

    def counting(self: Any, key_ids: Any) -> Any:
        calls.append(len(key_ids))
        return many(self, key_ids)

    monkeypatch.setattr(sealing.MemoryKeyStore, "get_many", counting)
    for read_ahead in (True, False):
        if not read_ahead:
            monkeypatch.delattr(sealing.MemoryKeyStore, "get_many")
        store = InMemoryTableStore()
        projector = StreamProjector(store, [TOPIC], sleep=lambda s: None)
        projector.create_tables()
        projector.apply(records)
        assert_equal_to_fold(store, log)
    sealed = sealed_key_ids([r.value for r in records])
    assert calls == [len(sealed)] and sealed
