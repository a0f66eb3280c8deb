"""The PayloadStore contract. Each adapter's test class subclasses PayloadStoreContract
and implements ``make_store``; every test here then runs against that adapter."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.errors import InvalidCommand, PayloadMissing
from domain.payloads import is_sha256
from domain.ports import PayloadStore

CHUNK = 16  # small chunks, so that short test data crosses chunk borders
ABSENT = "0" * 64

# One store serves every example; each adapter's subclass is its own executor by design.
reuse_store = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors],
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False)]


class PayloadStoreContract:
    def make_store(
        self, tmp_path: Path, chunk_size: int, clock: Callable[[], float]
    ) -> PayloadStore:
        raise NotImplementedError

    @pytest.fixture
    def clock(self) -> FakeClock:
        return FakeClock()

    @pytest.fixture
    def store(self, tmp_path: Path, clock: FakeClock) -> PayloadStore:
        return self.make_store(tmp_path, CHUNK, clock)

    # --- writing -------------------------------------------------------------------------

    def test_put_returns_a_fresh_address_the_content_digest_size_and_chunk_count(
        self, store: PayloadStore
    ) -> None:
        """ADR 0099: the address says nothing about the content (not its SHA-256)."""
        data = bytes(range(40))
        ref = store.put(data)
        assert (ref.sha256, ref.size, ref.chunk_count) == (sha(data), 40, 3)
        assert is_sha256(ref.address) and ref.address != ref.sha256
        assert ref.address != store.put(bytes(range(41))).address
        assert store.chunk_size == CHUNK

    def test_putting_the_same_bytes_twice_stores_them_once(self, store: PayloadStore) -> None:
        first = store.put(b"same bytes" * 5)
        again = store.put(b"same bytes" * 5)
        assert first == again
        assert [entry[0] for entry in store.list()] == [first.address]

    def test_put_many_stores_each_and_answers_in_order(self, store: PayloadStore) -> None:
        payloads = [bytes([n]) * (10 + n) for n in range(6)] + [b"\x01" * 11]  # a repeat
        refs = store.put_many(payloads)
        assert refs == [store.put(data) for data in payloads]
        assert [r.sha256 for r in refs] == [sha(p) for p in payloads]
        assert sorted(a for a, _, _ in store.list()) == sorted({r.address for r in refs})
        for data, ref in zip(payloads, refs, strict=True):
            assert b"".join(store.open(ref.address)) == data

    @reuse_store
    @given(data=st.binary(max_size=200), cuts=st.lists(st.integers(0, 200), max_size=8))
    def test_a_stream_in_any_pieces_is_stored_like_one_put(
        self, store: PayloadStore, data: bytes, cuts: list[int]
    ) -> None:
        ref = store.put_stream(pieces(data, cuts))
        assert ref == store.put(data)
        assert b"".join(store.open(ref.address)) == data

    def test_a_failed_stream_leaves_nothing_behind(self, store: PayloadStore) -> None:
        def broken() -> Iterator[bytes]:
            yield b"x" * 40
            raise ConnectionError("client went away")

        with pytest.raises(ConnectionError):
            store.put_stream(broken())
        assert list(store.list()) == []
        assert not store.exists(sha(b"x" * 40))

    def test_a_stream_of_text_is_rejected(self, store: PayloadStore) -> None:
        with pytest.raises(InvalidCommand, match="bytes"):
            store.put_stream(["not bytes"])  # type: ignore[list-item]

    def test_the_empty_payload_has_no_chunks(self, store: PayloadStore) -> None:
        ref = store.put(b"")
        assert (ref.size, ref.chunk_count) == (0, 0)
        assert list(store.open(ref.address)) == []
        assert store.read_range(ref.address, 0, 10) == b""

    # --- reading -------------------------------------------------------------------------

    def test_open_yields_chunks_of_chunk_size_that_rejoin_byte_exact(
        self, store: PayloadStore
    ) -> None:
        data = bytes(range(256)) * 2
        chunks = list(store.open(store.put(data).address))
        assert [len(c) for c in chunks] == [CHUNK] * (len(data) // CHUNK)
        assert b"".join(chunks) == data

    @reuse_store
    @given(data=st.binary(max_size=100), start=st.integers(0, 120), length=st.integers(0, 120))
    def test_a_range_reads_exactly_the_slice(
        self, store: PayloadStore, data: bytes, start: int, length: int
    ) -> None:
        ref = store.put(data)
        assert store.read_range(ref.address, start, start + length) == data[start : start + length]

    @pytest.mark.parametrize(("start", "end"), [(-1, 4), (5, 4)])
    def test_an_invalid_range_is_rejected(self, store: PayloadStore, start: int, end: int) -> None:
        ref = store.put(b"0123456789")
        with pytest.raises(InvalidCommand, match="range"):
            store.read_range(ref.address, start, end)

    def test_exists_and_size_describe_a_stored_payload(self, store: PayloadStore) -> None:
        ref = store.put(b"y" * 33)
        assert store.exists(ref.address)
        assert store.size(ref.address) == 33
        assert not store.exists(ABSENT)

    @pytest.mark.parametrize(
        "read",
        [
            lambda s: s.open(ABSENT),
            lambda s: s.read_range(ABSENT, 0, 1),
            lambda s: s.size(ABSENT),
        ],
        ids=["open", "read_range", "size"],
    )
    def test_a_missing_payload_is_named_at_once(
        self, store: PayloadStore, read: Callable[[PayloadStore], object]
    ) -> None:
        with pytest.raises(PayloadMissing, match=ABSENT):
            read(store)

    @pytest.mark.parametrize("address", ["../../etc/passwd", "ABC", "0" * 63, "G" * 64, ""])
    def test_a_malformed_address_is_rejected(self, store: PayloadStore, address: str) -> None:
        with pytest.raises(InvalidCommand, match="sha256"):
            store.exists(address)
        with pytest.raises(InvalidCommand, match="sha256"):
            store.open(address)

    # --- deleting and listing ------------------------------------------------------------

    def test_delete_removes_a_payload_and_says_whether_it_was_there(
        self, store: PayloadStore
    ) -> None:
        ref = store.put(b"to be purged")
        assert store.delete(ref.address) is True
        assert store.delete(ref.address) is False
        assert not store.exists(ref.address)
        with pytest.raises(PayloadMissing):
            store.open(ref.address)

    def test_list_gives_address_size_and_write_time_of_every_payload(
        self, store: PayloadStore, clock: FakeClock
    ) -> None:
        a = store.put(b"a" * 20)
        clock.now += 60
        b = store.put(b"b" * 3)
        assert sorted(store.list()) == sorted(
            [(a.address, 20, clock.now - 60), (b.address, 3, clock.now)]
        )

    def test_putting_again_refreshes_the_write_time(
        self, store: PayloadStore, clock: FakeClock
    ) -> None:
        """So orphan collection never takes a payload a delivery in flight relies on."""
        ref = store.put(b"old content")
        clock.now += 13 * 3600
        store.put_stream([b"old ", b"content"])
        assert list(store.list()) == [(ref.address, 11, clock.now)]

    def test_a_payload_deleted_can_be_stored_again(
        self, store: PayloadStore, clock: FakeClock
    ) -> None:
        """A delete must not hide a later put of the same content (HBase's tombstones hide
        every cell up to their version, puts that arrive later included)."""
        data = bytes(range(50))
        ref = store.put(data)
        store.put(data)  # refreshed in the same instant
        assert store.delete(ref.address)
        again = store.put(data)
        assert again.sha256 == ref.sha256
        assert again.address != ref.address  # nothing kept the old address's content
        assert b"".join(store.open(again.address)) == data
        assert [entry[0] for entry in store.list()] == [again.address]
        with pytest.raises(PayloadMissing):
            store.open(ref.address)

    def test_a_copy_keeps_the_address_it_is_given(self, store: PayloadStore) -> None:
        """A backup, a restore or a migration copies a payload under the address the log
        names it by; a copy never replaces other content at that address."""
        data, where = bytes(range(60)), "ab" * 32
        copy = store.put_stream(pieces(data, [7]), address=where)
        assert (copy.address, copy.sha256, copy.size) == (where, sha(data), 60)
        assert b"".join(store.open(where)) == data
        assert store.put_stream([data], address=where) == copy  # again: kept
        with pytest.raises((OSError, InvalidCommand)):
            store.put_stream([b"other content"], address=where)
        assert b"".join(store.open(where)) == data
        with pytest.raises(InvalidCommand, match="sha256"):
            store.put_stream([data], address="../../etc/passwd")


class ReleasableContract:
    """What the purge jobs use of a payload store beyond the port: ``touch`` (a release
    starts the grace period) and ``delete_unless_touched`` (orphan collection). Mixed into
    the contract of each store that has them."""

    def test_touch_refreshes_the_write_time_of_a_stored_payload_only(
        self, store: Any, clock: FakeClock
    ) -> None:
        ref = store.put(b"released later" * 3)
        clock.now += 3600
        assert store.touch(ref.address) is True
        assert store.touch(ABSENT) is False
        assert list(store.list()) == [(ref.address, 42, clock.now)]

    def test_an_untouched_payload_is_deleted_and_its_size_returned(
        self, store: Any, clock: FakeClock
    ) -> None:
        ref = store.put(b"orphan" * 7)
        clock.now += 60
        assert store.delete_unless_touched(ref.address, clock.now - 1) == 42
        assert not store.exists(ref.address)
        assert store.delete_unless_touched(ref.address, clock.now) is None

    def test_a_payload_touched_after_the_horizon_is_kept(
        self, store: Any, clock: FakeClock
    ) -> None:
        ref = store.put(b"re-used" * 5)
        horizon = clock.now
        clock.now += 60
        store.put(b"re-used" * 5)  # a delivery re-used it after the horizon
        assert store.delete_unless_touched(ref.address, horizon) is None
        assert b"".join(store.open(ref.address)) == b"re-used" * 5
