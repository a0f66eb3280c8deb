from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

from adapters.payloads.files import MANIFEST, FilePayloadStore
from adapters.payloads.memory import InMemoryPayloadStore
from domain.errors import PayloadMissing
from domain.payloads import chunk_count, rechunk
from domain.ports import PayloadStore
from tests.contracts.payload_contract import CHUNK, PayloadStoreContract


class TestInMemoryPayloadStore(PayloadStoreContract):
    def make_store(
        self, tmp_path: Path, chunk_size: int, clock: Callable[[], float]
    ) -> PayloadStore:
        return InMemoryPayloadStore(chunk_size, clock=clock)


class TestFilePayloadStore(PayloadStoreContract):
    def make_store(
        self, tmp_path: Path, chunk_size: int, clock: Callable[[], float]
    ) -> PayloadStore:
        return FilePayloadStore(tmp_path / "payloads", chunk_size, clock=clock)


def test_chunks_of_any_pieces_have_exactly_the_chunk_size() -> None:
    chunks = list(rechunk([b"abc", b"", b"defghij", b"k" * 9], 4))
    assert chunks == [b"abcd", b"efgh", b"ijkk", b"kkkk", b"kkk"]
    assert chunk_count(19, 4) == 5 and chunk_count(0, 4) == 0


# --- the file store on disk ----------------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "payloads"


def test_a_payload_is_a_directory_of_chunk_files_and_a_manifest(root: Path) -> None:
    ref = FilePayloadStore(root, CHUNK).put(b"z" * 40)
    where = root / ref.sha256[:2] / ref.sha256[2:4] / ref.sha256
    assert sorted(os.listdir(where)) == ["00000000", "00000001", "00000002", MANIFEST]
    assert (where / "00000002").read_bytes() == b"z" * 8


def test_chunks_zstd_shrinks_are_stored_compressed_and_read_back_exactly(root: Path) -> None:
    text = b"Lorem ipsum dolor sit amet, consectetur adipiscing elit.\r\n" * 200
    noise = os.urandom(4096)  # does not compress: stored as it is
    data = text[:4096] + noise + text[:1000]
    store = FilePayloadStore(root, 4096)
    ref = store.put(data)
    where = root / ref.sha256[:2] / ref.sha256[2:4] / ref.sha256
    manifest = json.loads((where / MANIFEST).read_bytes())
    assert manifest["zstd"] == [0, 2] and manifest["chunk_count"] == 3
    assert (where / "00000001").read_bytes() == noise
    assert (where / "00000000").stat().st_size < 4096 // 4
    assert b"".join(store.open(ref.sha256)) == data
    for start, end in [(0, 10), (4090, 4100), (4000, 9000), (8190, len(data)), (50, 50)]:
        assert store.read_range(ref.sha256, start, end) == data[start:end]


def test_a_payload_written_before_compression_still_reads(root: Path) -> None:
    """A manifest without ``zstd`` (payloads stored before ADR 0023): every chunk raw."""
    data = b"plain old chunk " * 600
    ref = FilePayloadStore(root, 4096).put(data)
    where = root / ref.sha256[:2] / ref.sha256[2:4] / ref.sha256
    manifest = json.loads((where / MANIFEST).read_bytes())
    for index in manifest.pop("zstd"):
        chunk = where / f"{index:08d}"
        chunk.write_bytes(zstandard.ZstdDecompressor().decompress(chunk.read_bytes()))
    (where / MANIFEST).write_text(json.dumps(manifest))
    store = FilePayloadStore(root, 4096)
    assert b"".join(store.open(ref.sha256)) == data
    assert store.read_range(ref.sha256, 4000, 5000) == data[4000:5000]


def test_a_write_that_crashed_is_invisible_and_swept_later(root: Path) -> None:
    store = FilePayloadStore(root, CHUNK)
    crashed = root / ".tmp" / "write-crashed"
    crashed.mkdir()
    (crashed / "00000000").write_bytes(b"half a payload")
    assert list(store.list()) == []
    assert store.discard_stale_writes(older_than=-1) == 1
    assert not crashed.exists()


def test_a_directory_without_a_manifest_is_no_payload_and_a_put_replaces_it(root: Path) -> None:
    store = FilePayloadStore(root, CHUNK)
    digest = hashlib.sha256(b"content").hexdigest()
    broken = root / digest[:2] / digest[2:4] / digest
    broken.mkdir(parents=True)
    (broken / "00000000").write_bytes(b"garbage")
    assert not store.exists(digest)
    store.put(b"content")
    assert b"".join(store.open(digest)) == b"content"


def test_a_short_write_is_never_committed(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FilePayloadStore(root, CHUNK)
    write = store._write_file
    monkeypatch.setattr(store, "_write_file", lambda path, data: write(path, data[:-1]))
    with pytest.raises(OSError, match="read back"):
        store.put(b"q" * 40)
    assert list(store.list()) == [] and os.listdir(root / ".tmp") == []


def test_a_payload_reads_back_whatever_chunk_size_the_reader_uses(root: Path) -> None:
    data = bytes(range(200))
    ref = FilePayloadStore(root, 16).put(data)
    reader = FilePayloadStore(root, 64)
    assert reader.read_range(ref.sha256, 30, 150) == data[30:150]
    assert reader.put(data) == ref


def test_open_reads_lazily_chunk_by_chunk(root: Path) -> None:
    store = FilePayloadStore(root, CHUNK)
    ref = store.put(b"w" * 64)
    chunks = store.open(ref.sha256)
    assert next(chunks) == b"w" * CHUNK
    store.delete(ref.sha256)
    with pytest.raises(PayloadMissing, match=ref.sha256):
        next(chunks)


def _put_from_another_process(root: str, seed: int) -> tuple[str, int, int]:
    data = bytes(range(256)) * 4096  # 1 MiB, the same in every process
    pieces = [data[i : i + 1000 + seed] for i in range(0, len(data), 1000 + seed)]
    ref = FilePayloadStore(Path(root), 4096).put_stream(pieces)
    return ref.sha256, ref.size, ref.chunk_count


def test_writers_in_several_processes_store_the_same_content_once(root: Path) -> None:
    FilePayloadStore(root, 4096)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        refs = pool.starmap(_put_from_another_process, [(str(root), seed) for seed in range(8)])
    data = bytes(range(256)) * 4096
    assert set(refs) == {(hashlib.sha256(data).hexdigest(), len(data), 256)}
    store = FilePayloadStore(root, 4096)
    assert [entry[0] for entry in store.list()] == [refs[0][0]]
    assert b"".join(store.open(refs[0][0])) == data
    assert os.listdir(root / ".tmp") == []
