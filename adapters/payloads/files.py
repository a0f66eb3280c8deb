"""The embedded payload store: one directory per payload, chunk files plus a manifest.

Layout: ``root/ab/cd/<sha256>/00000000, 00000001, ..., manifest.json``. A chunk that zstd
shrinks by at least an eighth is stored compressed (``zstd`` in the manifest lists those
chunks; a manifest without it has none, as payloads written before ADR 0023): mail's
base64 attachments and text bodies shrink, images and archives are kept as they are. A payload is
written into a private directory under ``root/.tmp`` (chunks first, the manifest last),
checked against its SHA-256, then renamed into place in one step: a reader sees all of
it or nothing, and a crash leaves only a temporary directory. When another writer
(another process, too) renamed the same content first, the temporary copy is discarded.

``written_at`` is the manifest's mtime. Putting content that is already stored writes
nothing but refreshes it, so orphan collection (grace period since written_at) never
takes a payload that a delivery in flight is about to reference.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from adapters.compression import compress, decompress
from domain.errors import PayloadMissing
from domain.payloads import (
    CHUNK_SIZE,
    PayloadRef,
    check_range,
    check_sha256,
    is_sha256,
    rechunk,
)

MANIFEST = "manifest.json"
WORTH_COMPRESSING = 7 / 8  # a chunk is stored compressed if that makes it this much smaller
PUT_THREADS = 8  # payloads of one batch written (and fsynced) at once


class FilePayloadStore:
    def __init__(
        self,
        root: Path,
        chunk_size: int = CHUNK_SIZE,
        *,
        durable: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``durable``: fsync chunks, manifest and directories before a put returns."""
        self.root = Path(root)
        self.chunk_size = chunk_size
        self._durable = durable
        self._clock = clock
        self._tmp = self.root / ".tmp"
        self._tmp.mkdir(parents=True, exist_ok=True)

    # --- writing ---------------------------------------------------------------------------

    def put(self, data: bytes) -> PayloadRef:
        existing = self._refresh(hashlib.sha256(data).hexdigest())
        return existing or self._write([data])

    def put_many(self, payloads: Sequence[bytes]) -> list[PayloadRef]:
        """``put`` of each, in threads: a put is mostly waiting on four fsyncs (chunk,
        manifest, the new directory, its parent), which release the GIL, so a batch's
        payloads wait for the disk together instead of one after another."""
        if len(payloads) < 2:
            return [self.put(data) for data in payloads]
        with ThreadPoolExecutor(max_workers=min(PUT_THREADS, len(payloads)),
                                thread_name_prefix="payload-put") as pool:
            return list(pool.map(self.put, payloads))

    def put_stream(self, chunks: Iterable[bytes]) -> PayloadRef:
        return self._write(chunks)

    def delete(self, sha256: str) -> bool:
        doomed = self._tmp / f"delete-{uuid.uuid4().hex}"
        try:
            os.rename(self._dir(sha256), doomed)  # atomic: readers see all or nothing
        except FileNotFoundError:
            return False
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def touch(self, sha256: str) -> bool:
        """Sets written_at to now (a release starts the grace period); False if absent."""
        return self._refresh(sha256) is not None

    def delete_unless_touched(self, sha256: str, horizon: float) -> int | None:
        """Deletes the payload if its written_at is still at or before ``horizon`` (epoch
        seconds); the bytes freed, or None if it is absent or was touched. It is moved aside
        first (atomic), then its time is checked where nobody can touch it any more: a put
        that touched it before the move keeps it (it is moved back), one after the move
        writes a fresh copy."""
        doomed = self._tmp / f"delete-{uuid.uuid4().hex}"
        try:
            os.rename(self._dir(sha256), doomed)
        except FileNotFoundError:
            return None
        try:
            manifest = json.loads((doomed / MANIFEST).read_bytes())
            touched = (doomed / MANIFEST).stat().st_mtime > horizon
        except FileNotFoundError:
            manifest, touched = {"size": 0}, False
        if touched:
            try:
                os.rename(doomed, self._dir(sha256))
                return None
            except OSError:  # a fresh copy is there already
                pass
        shutil.rmtree(doomed, ignore_errors=True)
        return None if touched else int(manifest["size"])

    def discard_stale_writes(self, older_than: float) -> int:
        """Remove temporary directories of writes that crashed over ``older_than`` s ago."""
        removed = 0
        for entry in os.scandir(self._tmp):
            if entry.stat().st_mtime < time.time() - older_than:
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += 1
        return removed

    # --- reading ---------------------------------------------------------------------------

    def exists(self, sha256: str) -> bool:
        return (self._dir(sha256) / MANIFEST).is_file()

    def open(self, sha256: str) -> Iterator[bytes]:
        manifest = self._manifest(sha256)
        return self._chunks(sha256, manifest["chunk_count"], frozenset(manifest.get("zstd", ())))

    def read_range(self, sha256: str, start: int, end: int) -> bytes:
        check_range(start, end)
        manifest = self._manifest(sha256)
        end = min(end, manifest["size"])
        if start >= end:
            return b""
        size = manifest["chunk_size"]
        compressed = frozenset(manifest.get("zstd", ()))
        pieces = []
        for index in range(start // size, (end - 1) // size + 1):
            offset = max(start - index * size, 0)
            length = min(end - index * size, size) - offset
            if index in compressed:
                pieces.append(self._chunk(sha256, index, True)[offset:offset + length])
                continue
            with self._chunk_file(sha256, index) as chunk:
                chunk.seek(offset)
                pieces.append(chunk.read(length))
        return b"".join(pieces)

    def size(self, sha256: str) -> int:
        return int(self._manifest(sha256)["size"])

    def list(self) -> Iterator[tuple[str, int, float]]:
        for manifest in self.root.glob(f"??/??/*/{MANIFEST}"):
            if not is_sha256(manifest.parent.name):
                continue
            try:
                size = json.loads(manifest.read_bytes())["size"]
                yield manifest.parent.name, size, manifest.stat().st_mtime
            except FileNotFoundError:  # deleted while listing
                continue

    # --- inside ----------------------------------------------------------------------------

    def _dir(self, sha256: str) -> Path:
        check_sha256(sha256)
        return self.root / sha256[:2] / sha256[2:4] / sha256

    def _write(self, chunks: Iterable[bytes]) -> PayloadRef:
        tmp = Path(tempfile.mkdtemp(prefix="write-", dir=self._tmp))
        try:
            digest, size, count, compressed = hashlib.sha256(), 0, 0, []
            for chunk in rechunk(chunks, self.chunk_size):
                digest.update(chunk)
                size += len(chunk)
                packed = compress(chunk)
                if len(packed) <= len(chunk) * WORTH_COMPRESSING:
                    compressed.append(count)
                    chunk = packed
                self._write_file(tmp / _chunk_name(count), chunk)
                count += 1
            ref = PayloadRef(digest.hexdigest(), size, count)
            self._verify(tmp, ref, frozenset(compressed))
            manifest = {"sha256": ref.sha256, "size": size, "chunk_size": self.chunk_size,
                        "chunk_count": count, "zstd": compressed}
            self._write_file(tmp / MANIFEST, json.dumps(manifest))
            self._stamp(tmp / MANIFEST)
            self._sync_dir(tmp)
            return self._commit(tmp, ref)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # nothing left after a rename

    def _verify(self, tmp: Path, ref: PayloadRef, compressed: frozenset[int]) -> None:
        """Read back what was written: a short write or a bad disk must not be committed."""
        digest = hashlib.sha256()
        for index in range(ref.chunk_count):
            data = (tmp / _chunk_name(index)).read_bytes()
            digest.update(decompress(data) if index in compressed else data)
        if digest.hexdigest() != ref.sha256:
            raise OSError(errno.EIO, f"payload {ref.sha256} read back with another sha256")

    def _commit(self, tmp: Path, ref: PayloadRef) -> PayloadRef:
        final = self._dir(ref.sha256)
        final.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(2):
            try:
                os.rename(tmp, final)
                break
            except OSError as error:
                if error.errno not in (errno.EEXIST, errno.ENOTEMPTY) or attempt:
                    raise
            existing = self._refresh(ref.sha256)
            if existing:  # another writer committed it first: keep theirs
                return existing
            shutil.rmtree(final, ignore_errors=True)  # a leftover without a manifest
        self._sync_dir(final.parent)
        return ref

    def _refresh(self, sha256: str) -> PayloadRef | None:
        """The stored payload's ref with written_at set to now, or None if it is absent."""
        try:
            self._stamp(self._dir(sha256) / MANIFEST)
            manifest = self._manifest(sha256)
        except (FileNotFoundError, PayloadMissing):
            return None
        return PayloadRef(sha256, manifest["size"], manifest["chunk_count"])

    def _stamp(self, path: Path) -> None:
        now = self._clock()
        os.utime(path, (now, now))

    def _manifest(self, sha256: str) -> dict[str, Any]:
        try:
            manifest: dict[str, Any] = json.loads((self._dir(sha256) / MANIFEST).read_bytes())
        except FileNotFoundError:
            raise PayloadMissing(f"payload {sha256} is not in the payload store") from None
        return manifest

    def _chunks(self, sha256: str, count: int, compressed: frozenset[int]) -> Iterator[bytes]:
        for index in range(count):
            yield self._chunk(sha256, index, index in compressed)

    def _chunk(self, sha256: str, index: int, compressed: bool) -> bytes:
        with self._chunk_file(sha256, index) as chunk:
            data = chunk.read()
        return decompress(data) if compressed else data

    def _chunk_file(self, sha256: str, index: int) -> BinaryIO:
        try:
            return open(self._dir(sha256) / _chunk_name(index), "rb")  # noqa: SIM115
        except FileNotFoundError:
            raise PayloadMissing(f"payload {sha256} is not in the payload store") from None

    def _write_file(self, path: Path, data: bytes | str) -> None:
        with open(path, "wb") as file:
            file.write(data.encode() if isinstance(data, str) else data)
            if self._durable:
                file.flush()
                os.fsync(file.fileno())

    def _sync_dir(self, path: Path) -> None:
        if self._durable:
            descriptor = os.open(path, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)


def _chunk_name(index: int) -> str:
    return f"{index:08d}"
