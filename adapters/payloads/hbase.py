"""The payload store in the distributed table store: HBase on the scale-out path (ADR 0072).

Built on the table store port (``projections.tablestore``), so it runs on HBase through the
same connections, retries, typed errors and table prefix as the read models
(``HBaseTableStore``), and on the in-memory and SQLite table stores in tests.

Table ``payloads`` (HBase ``{prefix}_payloads``), one row per payload, keyed by the raw 32
bytes of its address (random since ADR 0099, its SHA-256 before; uniformly spread either
way: no salt needed), two families:

- ``c``: one cell per chunk (128 KiB), qualifier the chunk's index (4 bytes big-endian),
  value a flag byte (``z``: zstd, ``r``: raw) and the chunk. A chunk zstd shrinks by at least
  an eighth is stored compressed (``adapters.eventlog.compression``, as the file store does); the
  flag travels with the chunk, so a reader never depends on another writer's choice.
- ``m``: ``m:manifest`` (JSON: size, chunk size, chunk count), ``m:digest`` (the content's
  SHA-256, raw), ``m:touched`` (a random token; its version is the last put, re-use or
  release), and ``m:doomed`` while a conditional delete is deciding.

The content's link (ADR 0099): a row keyed ``#`` + the content's raw SHA-256 (33 bytes,
never a payload's key) holds ``m:address``, the address of the payload stored with that
content, through which a put of the same content finds it. A delete removes the link (if it
names the payload) before the payload's row: a crash in between leaves the payload, which
the erasure's completion deletes again, never a link without it. Once a payload is deleted
and compacted, nothing in the table ties its address to its content.

Every cell's version is a time in milliseconds. A payload is visible when its manifest is:
the chunks are written first (in calls of ``CHUNKS_PER_CALL``), the manifest last, all at
the same version ``W``; a delete is one row delete at a version at least that of every cell
it saw, so chunks and manifest go together and a reader sees all of a payload or nothing.
A read that finds a chunk gone (deleted while read) raises ``PayloadMissing``.

A put of content already stored writes only ``m:touched`` (``written_at`` refreshed: the
grace period of orphan collection starts again); if a conditional delete is deciding on that
payload, the put stores the content anew under a new address. Versions of a put are always
above every version it saw, and a put reads the row back after writing: if a delete hid what
it wrote (another host's clock ahead of this one), it writes again at a higher version.

``delete_unless_touched`` (orphan collection, a purge run's release, ``erase complete``)
must never take a payload that a put has just promised to a delivery. It writes
``m:doomed`` at version ``D`` (the highest it saw), reads the row again and deletes the row
at ``D`` only if ``m:touched`` is still the token it decided on; a put that refreshes a
payload reads the row back after its touch and, finding ``m:doomed``, writes the whole
payload again above ``D``. Either the deleter sees the put's touch, or the put sees the
deleter's mark: a put never returns a payload that is then deleted under it.
(``put_stream`` with a given address, a copy's, keeps the address: it writes the payload
again above ``D`` there.)

Deleted cells are tombstones until HBase major-compacts the table; ``letterlog erase
complete`` flushes and compacts this table with the read models (docs/lifecycle.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from adapters.eventlog.compression import compress, decompress
from domain.errors import PayloadMissing
from domain.payloads import (
    CHUNK_SIZE,
    PayloadRef,
    check_range,
    check_sha256,
    new_address,
    rechunk,
)
from projections.tablestore import Cells, DeleteColumn, DeleteRow, Put, TableSpec, TableStore

TABLE = "payloads"
FAMILIES = ("c", "m")
MANIFEST = b"m:manifest"
TOUCHED = b"m:touched"
DOOMED = b"m:doomed"
DIGEST = b"m:digest"
ADDRESS = b"m:address"  # in a content's link row
LINK = b"#"  # a content's link row: LINK + its raw SHA-256
META = b"m:"
CHUNKS_PER_CALL = 16  # chunks written (or read) per call: 2 MiB of 128 KiB chunks
WORTH_COMPRESSING = 7 / 8  # as the file store: stored compressed if this much smaller
ZSTD, RAW = b"z", b"r"
SPOOL_BYTES = 8 << 20  # an upload is kept in memory up to this size, then in a temp file
VISIBLE_TRIES = 24  # a put hidden by a delete from a clock ahead: 2^k ms more each time


def chunk_column(index: int) -> bytes:
    return b"c:" + struct.pack(">I", index)


def row_of(sha256: str) -> bytes:
    return bytes.fromhex(check_sha256(sha256))


def link_of(sha256: str) -> bytes:
    """The row of the content's link (ADR 0099)."""
    return LINK + bytes.fromhex(check_sha256(sha256))


@dataclass(frozen=True, slots=True)
class _Row:
    """What a row's ``m`` family says: the manifest (None: no payload), the versions seen."""

    manifest: dict[str, int] | None
    version: int  # the manifest's (the payload's write)
    touched: tuple[bytes, int] | None
    doomed: int | None
    highest: int  # every version seen
    digest: str  # the content's SHA-256 ("": written before ADR 0099, the address is)

    @property
    def marked(self) -> bool:
        """A conditional delete is deciding on this copy (a mark below the manifest's
        version was meant for an older copy, left by a deleter that was killed)."""
        return self.doomed is not None and self.doomed >= self.version

    def holds(self, address: str, digest: str) -> bool:
        """Whether this row (at ``address``) is of content ``digest``."""
        return self.digest == digest or (not self.digest and address == digest)

    @property
    def written_at_ms(self) -> int:
        return max(self.version, self.touched[1] if self.touched else 0)

    @classmethod
    def of(cls, cells: Cells) -> _Row:
        manifest = None
        if MANIFEST in cells:
            manifest = {k: int(v) for k, v in json.loads(cells[MANIFEST][0]).items()}
        versions = [version for _, version in cells.values()]
        return cls(manifest, cells[MANIFEST][1] if MANIFEST in cells else 0,
                   cells.get(TOUCHED), cells[DOOMED][1] if DOOMED in cells else None,
                   max(versions, default=0),
                   cells[DIGEST][0].hex() if DIGEST in cells else "")


class HBasePayloadStore:
    """``PayloadStore`` on a ``TableStore`` (HBase on the scale-out path; module docstring).
    ``threads``: payloads of one ``put_many`` written at once (1: one after another);
    ``table``: the logical table (created unless ``create=False``); ``owns_tables``: ``close``
    closes the table store too; ``spool_dir``: where an upload past ``SPOOL_BYTES`` is
    spooled (the data directory: never a shared temporary directory)."""

    def __init__(self, tables: TableStore, chunk_size: int = CHUNK_SIZE, *,
                 clock: Callable[[], float] = time.time, threads: int = 1,
                 table: str = TABLE, create: bool = True, owns_tables: bool = False,
                 spool_dir: Path | None = None) -> None:
        self.tables = tables
        self._spool_dir = spool_dir
        self._owns_tables = owns_tables
        self.table = table
        self.chunk_size = chunk_size
        self._clock = clock
        self._threads = max(1, threads)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0
        self._lock = threading.Lock()
        if create:
            tables.create_table(TableSpec(table, FAMILIES, split_by_salt=False))

    # --- writing -------------------------------------------------------------------------

    def put(self, data: bytes) -> PayloadRef:
        sha256 = hashlib.sha256(data).hexdigest()
        return self._put_content(sha256, len(data), lambda: rechunk([data], self.chunk_size))

    def put_many(self, payloads: Sequence[bytes]) -> list[PayloadRef]:
        if len(payloads) < 2 or self._threads == 1:
            return [self.put(data) for data in payloads]
        unique = list(dict.fromkeys(payloads))  # the same content twice: one address
        refs = dict(zip(unique, self._executor().map(self.put, unique), strict=True))
        return [refs[data] for data in payloads]

    def put_stream(self, chunks: Iterable[bytes], *, address: str | None = None) -> PayloadRef:
        """The upload is hashed while it is spooled (memory, then a private temporary file in
        ``spool_dir`` past ``SPOOL_BYTES``, deleted when done): whether its content is stored
        already is known only at its end. A stream that fails writes nothing. ``address``: a
        copy's, kept."""
        digest, size = hashlib.sha256(), 0
        with tempfile.SpooledTemporaryFile(
                SPOOL_BYTES, dir=str(self._spool_dir) if self._spool_dir else None) as spool:
            for chunk in rechunk(chunks, self.chunk_size):
                digest.update(chunk)
                size += len(chunk)
                spool.write(chunk)

            def replay() -> Iterator[bytes]:
                spool.seek(0)
                while piece := spool.read(self.chunk_size):
                    yield piece

            if address is not None:
                return self._store(check_sha256(address), digest.hexdigest(), size, replay)
            return self._put_content(digest.hexdigest(), size, replay)

    def touch(self, sha256: str) -> bool:
        """Sets written_at to now (a release starts the grace period); False if absent."""
        row = self._row(sha256)
        if row.manifest is None:
            return False
        self._touch(sha256, row)
        return True

    def delete(self, sha256: str) -> bool:
        """The payload deleted (and the chunks of a write that never finished); False if
        no payload was there."""
        row = self._row(sha256)
        if row.manifest is None and row.touched is None:
            return False
        self._unlink(row.digest, sha256)  # first: a crash leaves the payload, not the link
        self.tables.apply([DeleteRow(self.table, row_of(sha256), max(self._now(), row.highest))])
        return row.manifest is not None

    def delete_unless_touched(self, sha256: str, horizon: float) -> int | None:
        """Deletes the payload if its written_at is still at or before ``horizon`` (epoch
        seconds); the bytes freed, or None if it is absent or was touched (see the module
        docstring: a put meanwhile either is seen here or sees the mark and writes again).
        The chunks of a write that never finished (``list`` names it with size 0) go the
        same way: 0 bytes freed."""
        key = row_of(sha256)
        row = self._row(sha256)
        if (row.manifest is None and row.touched is None) or (
                row.written_at_ms > horizon * 1000):
            return None
        doomed = row.highest
        self.tables.apply([Put(self.table, key, DOOMED, uuid.uuid4().bytes, doomed)])
        again = self._row(sha256)
        if row.manifest is not None and again.manifest is None:
            return None  # deleted by another meanwhile
        if again.touched != row.touched or again.version != row.version:
            self.tables.apply([DeleteColumn(self.table, key, DOOMED, doomed)])
            return None
        self._unlink(again.digest or row.digest, sha256)  # first: see ``delete``
        self.tables.apply([DeleteRow(self.table, key, doomed)])
        return row.manifest["size"] if row.manifest is not None else 0

    # --- reading -------------------------------------------------------------------------

    def exists(self, sha256: str) -> bool:
        return self._row(sha256).manifest is not None

    def size(self, sha256: str) -> int:
        return self._found(sha256)["size"]

    def open(self, sha256: str) -> Iterator[bytes]:
        manifest = self._found(sha256)
        return self._chunks(sha256, 0, manifest["chunks"])

    def read_range(self, sha256: str, start: int, end: int) -> bytes:
        check_range(start, end)
        manifest = self._found(sha256)
        end = min(end, manifest["size"])
        if start >= end:
            return b""
        size = manifest["chunk_size"]
        first, last = start // size, (end - 1) // size + 1
        joined = b"".join(self._chunks(sha256, first, last))
        return joined[start - first * size:end - first * size]

    def list(self) -> Iterator[tuple[str, int, float]]:
        """Every payload, and every write that has not finished (or never will: the writer
        died between its chunks and its manifest) with size 0 and the time it began, so
        that orphan collection deletes its chunks after the grace period too."""
        for key, cells in self.tables.scan_cells(self.table, columns=[META]):
            row = _Row.of(cells)
            if row.manifest is not None or row.touched is not None:
                size = row.manifest["size"] if row.manifest is not None else 0
                yield key.hex(), size, row.written_at_ms / 1000

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None and self._pool_pid == os.getpid():
            pool.shutdown(wait=True)
        if self._owns_tables:
            self.tables.close()

    # --- inside --------------------------------------------------------------------------

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def _row(self, sha256: str) -> _Row:
        return _Row.of(self.tables.get_cells(self.table, row_of(sha256), [META]))

    def _found(self, sha256: str) -> dict[str, int]:
        manifest = self._row(sha256).manifest
        if manifest is None:
            raise PayloadMissing(f"payload {sha256} is not in the payload store")
        return manifest

    def _chunks(self, sha256: str, first: int, last: int) -> Iterator[bytes]:
        key = row_of(sha256)
        for start in range(first, last, CHUNKS_PER_CALL):
            wanted = [chunk_column(i) for i in range(start, min(last, start + CHUNKS_PER_CALL))]
            cells = self.tables.get_cells(self.table, key, wanted)
            for column in wanted:
                if column not in cells:  # deleted while it was read
                    raise PayloadMissing(f"payload {sha256} is not in the payload store")
                stored = cells[column][0]
                yield decompress(stored[1:]) if stored[:1] == ZSTD else stored[1:]

    def _put_content(self, digest: str, size: int,
                     chunks: Callable[[], Iterable[bytes]]) -> PayloadRef:
        """The content stored: the payload its link names (or, before ADR 0099, the one under
        its SHA-256) refreshed, if it is there and no delete is deciding on it; else written
        under a new address, and linked."""
        found = self.tables.get_cells(self.table, link_of(digest), [ADDRESS])
        known = [found[ADDRESS][0].hex()] if ADDRESS in found else []
        for address in [*known, digest]:  # the link's; a payload stored before ADR 0099
            row = self._row(address)
            if row.manifest is None or row.marked or not row.holds(address, digest):
                continue
            self._touch(address, row)
            again = self._row(address)
            if again.manifest is not None and not again.marked:
                return PayloadRef(digest, size, again.manifest["chunks"], address)
        address = new_address()
        ref = self._write(address, digest, size, chunks, 0)
        self.tables.apply([Put(self.table, link_of(digest), ADDRESS, bytes.fromhex(address),
                               self._now())])
        return ref

    def _unlink(self, digest: str, address: str) -> None:
        """The content's link deleted if it names ``address`` (another copy's is kept)."""
        if not digest:
            return
        key = link_of(digest)
        found = self.tables.get_cells(self.table, key, [ADDRESS])
        if ADDRESS in found and found[ADDRESS][0] == bytes.fromhex(address):
            self.tables.apply([DeleteRow(self.table, key, max(self._now(), found[ADDRESS][1]))])

    def _store(self, address: str, digest: str, size: int,
               chunks: Callable[[], Iterable[bytes]]) -> PayloadRef:
        """A copy stored at ``address`` (or refreshed) and visible, its ref returned."""
        row = self._row(address)
        if row.manifest is not None and not row.holds(address, digest):
            raise OSError(f"payload {address} is stored already with other content; nothing "
                          "was replaced")
        if row.manifest is not None and not row.marked:
            self._touch(address, row)
            again = self._row(address)
            if again.manifest is not None and not again.marked:
                return PayloadRef(digest, size, again.manifest["chunks"], address)
            row = again
        return self._write(address, digest, size, chunks, row.highest)

    def _touch(self, sha256: str, row: _Row) -> None:
        version = max(self._now(), row.highest + 1)
        self.tables.apply([Put(self.table, row_of(sha256), TOUCHED, uuid.uuid4().bytes, version)])

    def _write(self, sha256: str, digest: str, size: int,
               chunks: Callable[[], Iterable[bytes]], seen: int) -> PayloadRef:
        """Chunks, then the manifest, all at one version above ``seen``; read back, and
        written again higher while a delete hides them. ``sha256``: the address."""
        key = row_of(sha256)
        version = max(self._now(), seen + 1)
        for attempt in range(VISIBLE_TRIES):
            # the write's start is visible to orphan collection before any chunk: a writer
            # that dies before its manifest leaves chunks that ``list`` still names
            count, batch = 0, [Put(self.table, key, TOUCHED, uuid.uuid4().bytes, version)]
            for index, chunk in enumerate(chunks()):
                packed = compress(chunk)
                value = (ZSTD + packed if len(packed) <= len(chunk) * WORTH_COMPRESSING
                         else RAW + chunk)
                batch.append(Put(self.table, key, chunk_column(index), value, version))
                count = index + 1
                if len(batch) >= CHUNKS_PER_CALL:
                    self.tables.apply(batch)
                    batch = []
            manifest = json.dumps({"size": size, "chunk_size": self.chunk_size,
                                   "chunks": count}, separators=(",", ":")).encode()
            self.tables.apply([*batch, Put(self.table, key, DIGEST, bytes.fromhex(digest),
                                           version),
                               Put(self.table, key, MANIFEST, manifest, version),
                               Put(self.table, key, TOUCHED, uuid.uuid4().bytes, version)])
            # (a batch's TOUCHED and the last one's: the same cell and version, the later wins)
            row = self._row(sha256)
            if row.manifest is not None and row.version >= version and not row.marked:
                return PayloadRef(digest, size, count, sha256)
            version = max(self._now(), row.highest + 1, version + (1 << attempt))
        raise OSError(f"payload {sha256}: what was written stays hidden by a delete (a clock "
                      "far ahead on another host?); try again")

    def _executor(self) -> ThreadPoolExecutor:
        pid = os.getpid()
        with self._lock:
            if self._pool is None or self._pool_pid != pid:
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="payload-put")
                self._pool_pid = pid
            return self._pool
