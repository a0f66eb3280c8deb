"""The append path's cheaper steps (ADR 0085). ``EventMapper``: the write side of the
library's mapper in one step; what it stores is what the library's ``Mapper`` over the same
transcoder stores, byte for byte, for every kind of event (sealed personal parts with the
same nonce), and it reads back through the library's path, upcasters included. The
transcoder's per-thread packer. A bulk block's spaced young collections."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID, uuid4

import msgpack
import pytest
from eventsourcing.persistence import Mapper

from adapters.eventlog import sealing
from adapters.eventlog.transcoder import EventMapper, MsgpackTranscoder, packb
from domain.delivery_key import DeliveryKey
from domain.mailbox import Mailbox
from domain.message import Arrival, Message
from domain.personal import Personal


def _arrival(personal: Personal) -> Arrival:
    return Arrival(account_id=UUID(int=1), mailbox_id=UUID(int=2), uid=7, uidvalidity=9,
                   size=120, sha256="", inline=True,
                   internal_date=datetime(2026, 11, 28, 8, 0, tzinfo=UTC), flags=["\\Seen"],
                   labels=["work"], policy={"kind": "indefinite"}, thread_id=UUID(int=3),
                   facts={"content_type": "text/plain", "defects": [], "part_count": 1},
                   personal=personal)


def _events() -> list[object]:
    key_id, key = UUID(int=5), b"k" * 32
    personal = Personal({"envelope": {"subject": "hi", "to": ["a@b.c"]}, "body": b"x" * 300},
                        key_id=key_id, key=key)
    message = Message.deliver(uuid4(), _arrival(personal))
    claim = DeliveryKey.claim(UUID(int=1), "mbox:abc:1", message.id)
    mailbox = Mailbox.create(UUID(int=2), UUID(int=1), "INBOX", "inbox", 9)
    mailbox.allocate_uids([message.id])
    return [*message.collect_events(), *claim.collect_events(), *mailbox.collect_events()]


@pytest.fixture
def fixed_nonce(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sealing.os, "urandom", lambda n: b"\x01" * n)


@pytest.mark.usefixtures("fixed_nonce")
def test_it_stores_what_the_library_mapper_stores_byte_for_byte() -> None:
    transcoder = MsgpackTranscoder(sealing.MemoryKeyStore())
    ours, theirs = EventMapper(transcoder), Mapper[UUID](transcoder=transcoder)
    events = _events()
    assert {type(e).__name__ for e in events} >= {"Delivered", "Claimed", "UidsAllocated"}
    for event in events:
        mine, library = ours.to_stored_event(event), theirs.to_stored_event(event)
        assert mine == library
        assert type(mine.state) is bytes and mine.topic == library.topic


def test_what_it_stores_reads_back_as_the_same_event_through_the_library() -> None:
    keys = sealing.MemoryKeyStore()
    sealing.register(keys)
    transcoder = MsgpackTranscoder(keys)
    mapper = EventMapper(transcoder)
    event = Message.deliver(uuid4(), _arrival(Personal({"body": b"raw bytes"})))
    [delivered] = event.collect_events()
    back = mapper.to_domain_event(mapper.to_stored_event(delivered))
    assert type(back) is Message.Delivered and back.uid == 7
    assert back.personal["body"] == b"raw bytes" and back.personal.key_id is not None
    state = mapper.to_stored_event(delivered).state
    assert msgpack.unpackb(state, raw=False, strict_map_key=False,
                           ext_hook=lambda code, data: code)["class_version"] == 4


def test_it_leaves_the_event_as_it_was() -> None:
    personal = Personal({"body": b"x"})
    [delivered] = Message.deliver(uuid4(), _arrival(personal)).collect_events()
    EventMapper(MsgpackTranscoder(sealing.MemoryKeyStore())).to_stored_event(delivered)
    assert delivered.personal is personal  # sealed in the stored copy, not in the event


def test_with_the_library_cipher_or_compressor_it_is_the_library_path() -> None:
    class Upper:
        def compress(self, data: bytes) -> bytes:
            return b"Z" + data

        def decompress(self, data: bytes) -> bytes:
            return data[1:]

    transcoder = MsgpackTranscoder(sealing.MemoryKeyStore())
    mailbox = Mailbox.create(UUID(int=2), UUID(int=1), "INBOX", "inbox", 9)
    [created] = mailbox.collect_events()
    stored = EventMapper(transcoder, compressor=Upper()).to_stored_event(created)
    assert stored.state.startswith(b"Z")


def test_the_thread_packer_survives_a_value_it_cannot_pack() -> None:
    with pytest.raises(TypeError):
        packb({"a": object()})
    assert packb({"s": {2, 1}, "n": 1}) == msgpack.packb(
        {"s": msgpack.ExtType(3, msgpack.packb([1, 2])), "n": 1}, use_bin_type=True)


class _Commits:
    """A key store's commit as the pool sees it: records what it committed, optionally slow
    (an event the test sets lets it return) or failing."""

    def __init__(self) -> None:
        import threading

        self.committed: list[UUID] = []
        self.release = threading.Event()
        self.release.set()
        self.fail: Exception | None = None

    def __call__(self, keys: list[tuple[UUID, bytes]]) -> None:
        self.release.wait(10)
        if self.fail is not None:
            raise self.fail
        self.committed.extend(k for k, _ in keys)


def test_the_pool_commits_the_next_keys_ahead_and_hands_out_only_committed_ones() -> None:
    import threading

    pool, commits = sealing._Pool(), _Commits()
    first = [pool.take(commits)[0]]  # the first refill, in the caller's thread
    assert first[0] in commits.committed
    commits.release.clear()  # the refill ahead will not commit until the test says so
    first += [pool.take(commits)[0] for _ in range(sealing.POOL_FIRST - 1)]  # no wait
    assert set(first) <= set(commits.committed) and len(set(first)) == sealing.POOL_FIRST
    waiting: list[UUID] = []
    taker = threading.Thread(target=lambda: waiting.append(pool.take(commits)[0]))
    taker.start()
    taker.join(0.2)
    assert taker.is_alive() and not waiting  # the pool is empty, its refill not committed
    commits.release.set()
    taker.join(10)
    assert waiting and waiting[0] in commits.committed and waiting[0] not in first
    assert len(commits.committed) == 3 * sealing.POOL_FIRST  # 8 here, 16 ahead


def test_a_refill_ahead_that_fails_is_made_again_by_the_take_that_needs_it() -> None:
    pool, commits = sealing._Pool(), _Commits()
    for _ in range(sealing.POOL_FIRST - sealing.POOL_FIRST // 4):
        pool.take(commits)
    commits.fail = OSError("the key table is gone")
    with pytest.raises(OSError, match="gone"):
        for _ in range(sealing.POOL):
            pool.take(commits)
    commits.fail = None
    assert pool.take(commits)[0] in commits.committed


def test_close_waits_for_the_refill_on_its_way_and_gives_back_every_unused_key() -> None:
    pool, commits = sealing._Pool(), _Commits()
    used = {pool.take(commits)[0] for _ in range(sealing.POOL_FIRST - 1)}
    unused = set(pool.drain())
    assert unused and not unused & used and unused | used == set(commits.committed)


def test_a_forked_child_starts_with_an_empty_pool_of_its_own() -> None:
    pool, commits = sealing._Pool(), _Commits()
    parent = pool.take(commits)[0]
    sealing._after_fork_in_child()
    assert pool.drain() == []
    assert pool.take(commits)[0] != parent
