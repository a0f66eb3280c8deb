"""A host that moved its payloads to HBase (ADR 0072): new ones go to HBase, its old payload
files are read where they are until ``migrate`` copies them (on the in-memory table store;
tests/services/test_payloads_scaleout.py runs the same on the real servers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.payloads.files import FilePayloadStore
from adapters.payloads.hbase import HBasePayloadStore
from adapters.payloads.layered import LayeredPayloadStore
from adapters.tables.memory import InMemoryTableStore
from domain.errors import PayloadMissing
from tests.contracts.payload_contract import FakeClock

OLD, NEW = b"written before the move " * 20, b"written after the move " * 20


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def remote(clock: FakeClock) -> HBasePayloadStore:
    return HBasePayloadStore(InMemoryTableStore(), 64, clock=clock)


@pytest.fixture
def files(tmp_path: Path, clock: FakeClock) -> FilePayloadStore:
    return FilePayloadStore(tmp_path / "payloads", 64, clock=clock, durable=False)


@pytest.fixture
def store(remote: HBasePayloadStore, files: FilePayloadStore) -> LayeredPayloadStore:
    return LayeredPayloadStore(lambda: remote, files, 64)


def test_hbase_is_not_connected_until_a_payload_is_used(files: FilePayloadStore) -> None:
    def unreachable() -> HBasePayloadStore:
        raise AssertionError("connected")

    LayeredPayloadStore(unreachable, files).close()


def test_new_payloads_go_to_hbase_and_old_files_are_read_where_they_are(
        store: LayeredPayloadStore, remote: HBasePayloadStore, files: FilePayloadStore) -> None:
    old = files.put(OLD)
    new = store.put(NEW)
    assert remote.exists(new.address) and not files.exists(new.address)
    assert b"".join(store.open(old.address)) == OLD
    assert store.read_range(old.address, 5, 30) == OLD[5:30]
    assert store.size(old.address) == len(OLD) and store.exists(old.address)
    with pytest.raises(PayloadMissing):
        store.open("0" * 64)


def test_list_names_each_payload_once_with_its_latest_write(
        store: LayeredPayloadStore, remote: HBasePayloadStore, files: FilePayloadStore,
        clock: FakeClock) -> None:
    both = files.put(OLD)
    clock.now += 10
    remote.put_stream([OLD], address=both.address)
    here = files.put(b"only here" * 10)
    assert sorted(store.list()) == sorted([(both.address, len(OLD), clock.now),
                                           (here.address, 90, clock.now)])


def test_a_delete_or_release_reaches_both_copies(
        store: LayeredPayloadStore, remote: HBasePayloadStore, files: FilePayloadStore,
        clock: FakeClock) -> None:
    ref = files.put(OLD)
    remote.put_stream([OLD], address=ref.address)  # a copy (as migrate makes)
    clock.now += 60
    assert store.delete_unless_touched(ref.address, clock.now) == len(OLD)
    assert not remote.exists(ref.address) and not files.exists(ref.address)
    other = files.put(NEW)
    assert store.delete(other.address) and not store.exists(other.address)


def test_migrate_copies_every_file_idempotently_and_removes_on_request(
        store: LayeredPayloadStore, remote: HBasePayloadStore,
        files: FilePayloadStore) -> None:
    refs = [files.put(OLD), files.put(NEW)]
    remote.put_stream([NEW], address=refs[1].address)
    seen: list[tuple[int, int]] = []
    done = store.migrate(progress=lambda n, total: seen.append((n, total)))
    assert (done.files, done.copied, done.present, done.removed) == (2, 1, 1, 0)
    assert seen == [(1, 2), (2, 2)]
    again = store.migrate(remove=True)
    assert (again.copied, again.present, again.removed) == (0, 2, 2)
    assert list(files.list()) == []
    for ref, data in zip(refs, (OLD, NEW), strict=True):
        assert b"".join(remote.open(ref.address)) == data
