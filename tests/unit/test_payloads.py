from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import signal
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zstandard

from adapters.payloads.files import MANIFEST, FilePayloadStore
from adapters.payloads.hbase import HBasePayloadStore
from adapters.payloads.memory import InMemoryPayloadStore
from adapters.tables.memory import InMemoryTableStore
from domain.errors import PayloadMissing
from domain.payloads import chunk_count, rechunk
from domain.ports import PayloadStore
from tests.contracts.payload_contract import CHUNK, PayloadStoreContract, ReleasableContract


class TestInMemoryPayloadStore(PayloadStoreContract):
    def make_store(
        self, tmp_path: Path, chunk_size: int, clock: Callable[[], float]
    ) -> PayloadStore:
        return InMemoryPayloadStore(chunk_size, clock=clock)


class TestFilePayloadStore(PayloadStoreContract, ReleasableContract):
    def make_store(
        self, tmp_path: Path, chunk_size: int, clock: Callable[[], float]
    ) -> PayloadStore:
        return FilePayloadStore(tmp_path / "payloads", chunk_size, clock=clock)


class TestTablePayloadStore(PayloadStoreContract, ReleasableContract):
    """The HBase payload store on the in-memory table store (HBase's delete semantics, kept
    tombstones included); tests/services/test_payloads_hbase.py runs it on a real HBase."""

    def make_store(
        self, tmp_path: Path, chunk_size: int, clock: Callable[[], float]
    ) -> PayloadStore:
        return HBasePayloadStore(InMemoryTableStore(), chunk_size, clock=clock, threads=3)


def test_chunks_of_any_pieces_have_exactly_the_chunk_size() -> None:
    chunks = list(rechunk([b"abc", b"", b"defghij", b"k" * 9], 4))
    assert chunks == [b"abcd", b"efgh", b"ijkk", b"kkkk", b"kkk"]
    assert chunk_count(19, 4) == 5 and chunk_count(0, 4) == 0


# --- the file store on disk ----------------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "payloads"


def index_of(path: Path) -> dict[str, Any]:
    """The index of a payload file (ADR 0031): JSON before the 12-byte trailer."""
    raw = path.read_bytes()
    length, magic = struct.unpack(">Q4s", raw[-12:])
    assert magic == b"LLP1"
    return dict(json.loads(raw[-12 - length:-12]))


def legacy_payload(root: Path, data: bytes, chunk: int, *, compressed: bool) -> Path:
    """A payload as stores before ADR 0031 wrote it: a directory of chunk files and a
    manifest (before ADR 0023: no ``zstd`` list, every chunk raw)."""
    digest = hashlib.sha256(data).hexdigest()
    where = root / digest[:2] / digest[2:4] / digest
    where.mkdir(parents=True)
    pieces = [data[i:i + chunk] for i in range(0, len(data), chunk)]
    for index, piece in enumerate(pieces):
        stored = zstandard.ZstdCompressor().compress(piece) if compressed else piece
        (where / f"{index:08d}").write_bytes(stored)
    manifest: dict[str, Any] = {"sha256": digest, "size": len(data), "chunk_size": chunk,
                                "chunk_count": len(pieces)}
    if compressed:
        manifest["zstd"] = list(range(len(pieces)))
    (where / MANIFEST).write_text(json.dumps(manifest))
    return where


def test_a_payload_is_one_file_of_chunks_an_index_and_a_trailer(root: Path) -> None:
    ref = FilePayloadStore(root, CHUNK).put(b"z" * 40)
    assert os.listdir(root / ref.address[:2]) == [ref.address]
    path = root / ref.address[:2] / ref.address
    assert index_of(path) == {"size": 40, "chunk_size": CHUNK,
                              "chunks": [[CHUNK, 0], [CHUNK, 0], [8, 0]],
                              "address": ref.address, "sha256": ref.sha256}
    # the content's link: the same file under its SHA-256 (ADR 0099)
    assert os.path.samefile(root / ".digests" / ref.sha256[:2] / ref.sha256, path)
    assert path.read_bytes().startswith(b"z" * 40)


def test_chunks_zstd_shrinks_are_stored_compressed_and_read_back_exactly(root: Path) -> None:
    text = b"Lorem ipsum dolor sit amet, consectetur adipiscing elit.\r\n" * 200
    noise = os.urandom(4096)  # does not compress: stored as it is
    data = text[:4096] + noise + text[:1000]
    store = FilePayloadStore(root, 4096)
    ref = store.put(data)
    path = root / ref.address[:2] / ref.address
    chunks = index_of(path)["chunks"]
    assert [z for _, z in chunks] == [1, 0, 1] and chunks[1][0] == 4096
    assert chunks[0][0] < 4096 // 4
    assert path.read_bytes()[chunks[0][0]:chunks[0][0] + 4096] == noise
    assert b"".join(store.open(ref.address)) == data
    for start, end in [(0, 10), (4090, 4100), (4000, 9000), (8190, len(data)), (50, 50)]:
        assert store.read_range(ref.address, start, end) == data[start:end]


@pytest.mark.parametrize("compressed", [True, False], ids=["adr-0023", "before-adr-0023"])
def test_payloads_written_as_directories_before_adr_0031_still_work(
        root: Path, compressed: bool) -> None:
    data = b"plain old chunk " * 600
    where = legacy_payload(root, data, 4096, compressed=compressed)
    digest = where.name
    store = FilePayloadStore(root, 1024, clock=lambda: 2_000_000_000.0)
    assert store.exists(digest) and store.size(digest) == len(data)
    assert b"".join(store.open(digest)) == data
    assert store.read_range(digest, 4000, 5000) == data[4000:5000]
    assert store.put(data).sha256 == digest  # kept as it is, and refreshed
    assert not (root / digest[:2] / digest).exists()
    assert list(store.list()) == [(digest, len(data), 2_000_000_000.0)]
    assert store.delete_unless_touched(digest, horizon=2_000_000_000.0 - 1) is None
    assert store.exists(digest)  # touched after the horizon: moved back
    assert store.delete_unless_touched(digest, horizon=2_000_000_000.0) == len(data)
    assert not store.exists(digest) and not where.exists()
    legacy_payload(root, data, 4096, compressed=compressed)
    assert store.delete(digest) and list(store.list()) == []


def test_a_streamed_put_of_content_stored_as_a_directory_keeps_the_one_copy(
        root: Path) -> None:
    data = b"streamed again " * 500
    where = legacy_payload(root, data, 4096, compressed=True)
    store = FilePayloadStore(root, 4096)
    assert store.put_stream([data[:100], data[100:]]).sha256 == where.name
    assert not (root / where.name[:2] / where.name).exists()  # no second copy
    assert store.delete(where.name) and not store.exists(where.name)
    assert not where.exists()


def test_both_copies_are_erased_if_both_are_there(root: Path) -> None:
    data = b"two copies " * 500
    where = legacy_payload(root, data, 4096, compressed=False)
    packed = root / where.name[:2] / where.name
    legacy_payload_moved = where.rename(root / "aside")  # a new-layout copy beside it
    FilePayloadStore(root, 4096).put_stream([data], address=where.name)
    legacy_payload_moved.rename(where)
    assert packed.is_file() and (where / MANIFEST).is_file()
    store = FilePayloadStore(root, 4096)
    assert store.delete(where.name)
    assert not packed.exists() and not where.exists() and not store.exists(where.name)


def test_a_write_that_crashed_is_invisible_and_swept_later(root: Path) -> None:
    store = FilePayloadStore(root, CHUNK)
    (root / ".tmp" / "write-crashed").write_bytes(b"half a payload")
    crashed_dir = root / ".tmp" / "write-crashed-before-adr-0031"
    crashed_dir.mkdir()
    (crashed_dir / "00000000").write_bytes(b"half a payload")
    assert list(store.list()) == []
    assert store.discard_stale_writes(older_than=-1) == 2
    assert os.listdir(root / ".tmp") == []


def test_a_damaged_file_or_a_directory_without_a_manifest_is_no_payload(root: Path) -> None:
    store = FilePayloadStore(root, CHUNK)
    digest = hashlib.sha256(b"content").hexdigest()
    broken = root / digest[:2] / digest[2:4] / digest
    broken.mkdir(parents=True)
    (broken / "00000000").write_bytes(b"garbage")
    (root / digest[:2] / digest).write_bytes(b"content, and no index")
    assert not store.exists(digest)
    with pytest.raises(PayloadMissing, match=digest):
        store.open(digest)
    ref = store.put(b"content")  # a new payload, under a new address (ADR 0099)
    assert b"".join(store.open(ref.address)) == b"content"
    assert [address for address, _, _ in store.list()] == [ref.address]
    store.put_stream([b"content"], address=digest)  # a copy there replaces the damaged file
    assert b"".join(store.open(digest)) == b"content"


@pytest.mark.parametrize("index", [b'{"x": 1}', b'{"size": 7, "chunk_size": 16, '
                                   b'"chunks": [["7"]]}', b"not json", b"\xff\xfe"])
def test_a_file_whose_index_is_damaged_is_no_payload(root: Path, index: bytes) -> None:
    store = FilePayloadStore(root, CHUNK)
    digest = hashlib.sha256(b"content").hexdigest()
    (root / digest[:2]).mkdir()
    (root / digest[:2] / digest).write_bytes(
        b"content" + index + struct.pack(">Q4s", len(index), b"LLP1"))
    assert not store.exists(digest) and list(store.list()) == []
    assert store.put_stream([b"content"], address=digest).address == digest  # a copy
    assert b"".join(store.open(digest)) == b"content"


def test_a_short_write_is_never_committed(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FilePayloadStore(root, CHUNK)
    write = store._write_out
    monkeypatch.setattr(store, "_write_out", lambda file, data: write(file, data[:-1]))
    with pytest.raises(OSError, match="read back"):
        store.put(b"q" * 40)
    assert list(store.list()) == [] and os.listdir(root / ".tmp") == []


def test_a_byte_the_disk_gives_back_changed_is_never_committed(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The read-back check compares the file with the bytes handed to it (ADR 0100): one
    byte changed on its way to the disk, the length the same, and the put fails."""
    store = FilePayloadStore(root, CHUNK)
    write = store._write_out
    monkeypatch.setattr(store, "_write_out",
                        lambda file, data: write(file, bytes([data[0] ^ 1]) + data[1:]))
    with pytest.raises(OSError, match="read back"):
        store.put(bytes(range(256)) * 40)
    assert list(store.list()) == [] and os.listdir(root / ".tmp") == []


def test_a_put_fsyncs_the_file_and_its_directory_only(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FilePayloadStore(root, CHUNK)
    store.put(b"first")
    for n in range(256):  # every fan-out directory there (a new one syncs the root too)
        (root / f"{n:02x}").mkdir(exist_ok=True)
    second = b"second"
    synced: list[int] = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or fsync(fd))
    ref = store.put(second)
    assert b"".join(store.open(ref.address)) == second
    assert len(synced) == 2  # before ADR 0031: four (chunk, manifest, directory, parent)
    store.put(second)  # already stored: refreshed, nothing written
    assert len(synced) == 2


def test_a_payload_reads_back_whatever_chunk_size_the_reader_uses(root: Path) -> None:
    data = bytes(range(200))
    ref = FilePayloadStore(root, 16).put(data)
    reader = FilePayloadStore(root, 64)
    assert reader.read_range(ref.address, 30, 150) == data[30:150]
    assert reader.put(data) == ref


def test_open_reads_lazily_chunk_by_chunk(root: Path) -> None:
    store = FilePayloadStore(root, CHUNK)
    ref = store.put(b"w" * 64)
    chunks = store.open(ref.address)
    assert next(chunks) == b"w" * CHUNK
    store.delete(ref.address)
    with pytest.raises(PayloadMissing, match=ref.address):
        next(chunks)


def _put_from_another_process(root: str, seed: int) -> tuple[str, int, int]:
    data = bytes(range(256)) * 4096  # 1 MiB, the same in every process
    pieces = [data[i : i + 1000 + seed] for i in range(0, len(data), 1000 + seed)]
    ref = FilePayloadStore(Path(root), 4096).put_stream(pieces)
    return ref.address, ref.sha256, ref.size, ref.chunk_count


def test_writers_in_several_processes_store_the_same_content_once(root: Path) -> None:
    FilePayloadStore(root, 4096)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        refs = pool.starmap(_put_from_another_process, [(str(root), seed) for seed in range(8)])
    data = bytes(range(256)) * 4096
    assert {ref[1:] for ref in refs} == {(hashlib.sha256(data).hexdigest(), len(data), 256)}
    store = FilePayloadStore(root, 4096)
    # writers racing may each keep their copy (ADR 0099); each is whole, none is lost
    assert sorted(entry[0] for entry in store.list()) == sorted({ref[0] for ref in refs})
    for address in {ref[0] for ref in refs}:
        assert b"".join(store.open(address)) == data
    assert os.listdir(root / ".tmp") == []


def test_put_many_keeps_its_threads_from_batch_to_batch(root: Path) -> None:
    import threading

    store = FilePayloadStore(root)
    before = {t.ident for t in threading.enumerate()}
    store.put_many([b"a" * 100, b"b" * 100, b"c" * 100])
    started = {t.ident for t in threading.enumerate()} - before
    assert started, "a batch is written in threads"
    for n in range(5):
        refs = store.put_many([b"%d" % n * 100, b"x%d" % n * 100])
        assert [r.sha256 for r in refs] == [hashlib.sha256(b"%d" % n * 100).hexdigest(),
                                            hashlib.sha256(b"x%d" % n * 100).hexdigest()]
    assert {t.ident for t in threading.enumerate()} - before == started  # none started since
    store.close()
    assert not {t.ident for t in threading.enumerate() if t.is_alive()} & started


def test_put_many_in_a_forked_child_starts_threads_of_its_own(root: Path) -> None:
    store = FilePayloadStore(root)
    # the parent's threads exist before the fork, all of them idle (a pool would hand the
    # child's puts to them, and they are not in the child)
    store.put_many([b"parent-%d" % i for i in range(16)])
    pid = os.fork()
    if pid == 0:  # the child: the parent's threads are not here; a put must still finish
        code = 1
        signal.alarm(30)  # a put waiting for threads that are not there: killed, not hung
        try:
            refs = store.put_many([b"child-1", b"child-2", b"child-3"])
            code = 0 if [store.exists(r.address) for r in refs] == [True] * 3 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # -14 (SIGALRM): it hung
    assert b"child-2" in [b"".join(store.open(a)) for a, _, _ in store.list()]
    store.close()


def test_a_delete_killed_midway_leaves_no_content_link_after_the_sweep(root: Path) -> None:
    """ADR 0099: a delete moves the payload aside, then drops its content link and removes
    it. Killed in between, the bytes sit in ``.tmp`` and ``.digests`` still names the content;
    the ``payloads`` job's sweep removes both, and a link left alone (its payload gone, one
    link count) too."""
    store = FilePayloadStore(root, CHUNK)
    ref = store.put(b"a template around a code: 4712" * 10)
    link = root / ".digests" / ref.sha256[:2] / ref.sha256
    os.rename(root / ref.address[:2] / ref.address, root / ".tmp" / "delete-killed")
    assert link.exists() and not store.exists(ref.address)
    other = store.put(b"another content" * 10)
    alone = root / ".digests" / other.sha256[:2] / other.sha256
    (root / other.address[:2] / other.address).unlink()  # a link left alone
    assert alone.stat().st_nlink == 1
    assert store.discard_stale_writes(older_than=-1) == 2  # the file, the link left alone
    assert not link.exists() and not alone.exists()
    assert os.listdir(root / ".tmp") == []
    assert [p for p in root.rglob("*") if p.is_file()] == []
    again = store.put(b"a template around a code: 4712" * 10)
    assert again.address != ref.address and store.exists(again.address)
