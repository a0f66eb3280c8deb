"""The embedded payload store: one file per payload (ADR 0031).

Layout: ``root/ab/<address>``, one level of at most 256 directories. The file holds the
payload's chunks one after another, then an index (JSON: size, chunk size, each chunk's
stored length and whether it is zstd-compressed, and since ADR 0099 the address and the
content's SHA-256), then a 12-byte trailer (the index's
length, 8 bytes big-endian, and the magic ``LLP1``). A chunk that zstd shrinks by at least
an eighth is stored compressed (ADR 0023): mail's base64 attachments and text bodies shrink,
images and archives are kept as they are. Chunks stay independent, so a byte range reads only
the chunks it covers, and a stored chunk is read by seeking to its offset.

Addresses (ADR 0099): a new payload gets a random address; ``contentlinks`` keeps the
content's link to it (a second hard link named by the content's SHA-256) while it is stored.

A payload is written into a private file under ``root/.tmp``, fsynced, read back and checked
against the bytes written (their length and CRC-32; ADR 0100), then linked into place in one
step (a hard link, which never replaces: a reader sees all of it or nothing, and a crash
leaves only a temporary file). When another
writer (another process, too) stored the same content first, the temporary copy is
discarded and theirs kept; two writers racing may both keep theirs, under two addresses. A
put costs two fsyncs: the file and its directory.

Payloads written before ADR 0031 are directories ``root/ab/cd/<sha256>/`` of chunk files
plus ``manifest.json``; they are read, listed, refreshed and deleted as they are (no
migration), and a put of the same content keeps them.

``written_at`` is the file's mtime (a legacy payload's: its manifest's). Putting content that
is already stored writes nothing but refreshes it, so orphan collection (grace period since
written_at) never takes a payload that a delivery in flight is about to reference.

Reading a stored payload's index (either layout) is ``stored``'s.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from adapters.eventlog.compression import compress
from adapters.files.filemodes import create_private, private_dir
from adapters.payloads.contentlinks import DIGESTS, ContentLinks
from adapters.payloads.stored import (
    MAGIC,
    MANIFEST,
    TRAILER,
    Stored,
    read_legacy,
    read_packed,
)
from domain.errors import PayloadMissing
from domain.payloads import (
    CHUNK_SIZE,
    PayloadRef,
    check_range,
    check_sha256,
    is_sha256,
    new_address,
    rechunk,
)

__all__ = ["DIGESTS", "MANIFEST", "PUT_THREADS", "WORTH_COMPRESSING", "FilePayloadStore"]

WORTH_COMPRESSING = 7 / 8  # a chunk is stored compressed if that makes it this much smaller
PUT_THREADS = 8  # payloads of one batch written (and fsynced) at once
_VERIFY_BLOCK = 1 << 20  # a payload is read back a MiB at a time (never whole)


class FilePayloadStore(ContentLinks):
    def __init__(
        self,
        root: Path,
        chunk_size: int = CHUNK_SIZE,
        *,
        durable: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``durable``: fsync the file and its directory before a put returns."""
        self.root = Path(root)
        self.chunk_size = chunk_size
        self._durable = durable
        self._clock = clock
        self._tmp = self.root / ".tmp"
        private_dir(self._tmp)  # and the root: 0700, files 0600 (adapters.files.filemodes)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0
        self._pool_lock = threading.Lock()

    # --- writing ---------------------------------------------------------------------------

    def put(self, data: bytes) -> PayloadRef:
        sha256 = hashlib.sha256(data).hexdigest()  # hashed once: the write reuses it
        return self._known(sha256) or self._write([data], content=sha256)

    def put_many(self, payloads: Sequence[bytes]) -> list[PayloadRef]:
        """``put`` of each, in threads: a put is mostly waiting on two fsyncs (the file and
        its directory), which release the GIL, so a batch's payloads wait for the disk
        together instead of one after another."""
        if len(payloads) < 2:
            return [self.put(data) for data in payloads]
        unique = list(dict.fromkeys(payloads))  # the same content twice: one address
        refs = dict(zip(unique, self._threads().map(self.put, unique), strict=True))
        return [refs[data] for data in payloads]

    def _threads(self) -> ThreadPoolExecutor:
        """The store's put threads, started once (a pool per call started up to 8 threads for
        each batch: about 0.8 ms a batch). A pool's threads do not survive a fork, so a forked
        process (a command server's child) starts its own."""
        pid = os.getpid()
        if self._pool is None or self._pool_pid != pid:
            with self._pool_lock:
                if self._pool is None or self._pool_pid != pid:
                    self._pool = ThreadPoolExecutor(PUT_THREADS, thread_name_prefix="payload-put")
                    self._pool_pid = pid
        return self._pool

    def close(self) -> None:
        """Stops the put threads (idle ones; a put under way finishes first)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None and self._pool_pid == os.getpid():
            pool.shutdown(wait=True)

    def put_stream(self, chunks: Iterable[bytes], *, address: str | None = None) -> PayloadRef:
        return self._write(chunks, address)

    def delete(self, sha256: str) -> bool:
        stored = self._stored(sha256)
        if stored is not None:  # the content's link first: a crash leaves the payload
            self._unlink_digest(stored.digest, stored.home)
        deleted = False
        while (moved := self._move_aside(sha256)) is not None:  # the file, a legacy copy
            _remove(moved[0])
            deleted = True
        return deleted

    def touch(self, sha256: str) -> bool:
        """Sets written_at to now (a release starts the grace period); False if absent."""
        return self._refresh(sha256) is not None

    def delete_unless_touched(self, sha256: str, horizon: float) -> int | None:
        """Deletes the payload if its written_at is still at or before ``horizon`` (epoch
        seconds); the bytes freed, or None if it is absent or was touched. It is moved aside
        first (atomic), then its time is checked where nobody can touch it any more: a put
        that touched it before the move keeps it (it is moved back), one after the move
        writes a fresh copy."""
        moved = self._move_aside(sha256)
        if moved is None:
            return None
        doomed, home = moved
        stored = (read_legacy(sha256, doomed) if doomed.is_dir()
                  else read_packed(sha256, doomed))
        touched = stored is not None and stored.written_at > horizon
        if touched:
            try:
                self._put_back(doomed, home)
                return None
            except OSError:  # a fresh copy is there already
                pass
        if stored is not None:
            self._unlink_digest(stored.digest, doomed)
        _remove(doomed)
        return None if touched else (stored.size if stored is not None else 0)

    def discard_stale_writes(self, older_than: float) -> int:
        """Remove temporary files (and directories) of writes that crashed over
        ``older_than`` s ago, and every content link whose payload is gone (a delete killed
        between moving the payload aside and removing it)."""
        removed = 0
        for entry in os.scandir(self._tmp):
            if entry.stat(follow_symlinks=False).st_mtime < time.time() - older_than:
                stored = read_packed("", Path(entry.path)) if entry.is_file() else None
                if stored is not None and stored.digest:
                    self._unlink_digest(stored.digest, Path(entry.path))
                _remove(Path(entry.path))
                removed += 1
        return removed + self._sweep_links()

    # --- reading ---------------------------------------------------------------------------

    def exists(self, sha256: str) -> bool:
        return self._stored(sha256) is not None

    def open(self, sha256: str) -> Iterator[bytes]:
        stored = self._found(sha256)
        return (stored.chunk(index) for index in range(len(stored.chunks)))

    def read_range(self, sha256: str, start: int, end: int) -> bytes:
        check_range(start, end)
        stored = self._found(sha256)
        end = min(end, stored.size)
        if start >= end:
            return b""
        size = stored.chunk_size
        pieces = []
        for index in range(start // size, (end - 1) // size + 1):
            offset = max(start - index * size, 0)
            pieces.append(stored.piece(index, offset, min(end - index * size, size) - offset))
        return b"".join(pieces)

    def size(self, sha256: str) -> int:
        return self._found(sha256).size

    def list(self) -> Iterator[tuple[str, int, float]]:
        for path in self.root.glob("??/*"):
            name = path.name
            if is_sha256(name) and name[:2] == path.parent.name:
                stored = read_packed(name, path)
            elif len(name) == 2:  # a directory of payloads written before ADR 0031
                yield from self._list_legacy(path)
                continue
            else:
                continue
            if stored is not None:  # else: deleted while listing
                yield name, stored.size, stored.written_at

    def _list_legacy(self, directory: Path) -> Iterator[tuple[str, int, float]]:
        for manifest in directory.glob(f"*/{MANIFEST}"):
            name = manifest.parent.name
            stored = read_legacy(name, manifest.parent) if is_sha256(name) else None
            if stored is not None:
                yield name, stored.size, stored.written_at

    # --- inside ----------------------------------------------------------------------------

    def file_of(self, sha256: str) -> Path:
        """Where the payload's file is (or would be)."""
        return self._file(sha256)

    def _file(self, sha256: str) -> Path:
        check_sha256(sha256)  # one Path from one string: a put builds a dozen of these
        return Path(f"{self.root}/{sha256[:2]}/{sha256}")

    def _legacy_dir(self, sha256: str) -> Path:
        return Path(f"{self.root}/{sha256[:2]}/{sha256[2:4]}/{sha256}")

    def _stored(self, sha256: str) -> Stored | None:
        return (read_packed(sha256, self._file(sha256))
                or read_legacy(sha256, self._legacy_dir(sha256)))

    def _found(self, sha256: str) -> Stored:
        stored = self._stored(sha256)
        if stored is None:
            raise PayloadMissing(f"payload {sha256} is not in the payload store")
        return stored

    def _write(self, chunks: Iterable[bytes], address: str | None = None, *,
               content: str | None = None) -> PayloadRef:
        """``address``: a copy's, kept; None: a new payload (a fresh address, unless the
        content is stored already). ``content``: the chunks' SHA-256 if the caller has it
        (``put``), else it is computed here."""
        given = address is not None
        address = check_sha256(address) if address is not None else new_address()
        tmp = self._tmp / f"write-{uuid.uuid4().hex}"
        descriptor = create_private(tmp)
        try:
            digest = None if content is not None else hashlib.sha256()
            size, index, written, crc = 0, [], 0, 0
            with os.fdopen(descriptor, "wb") as file:
                for chunk in rechunk(chunks, self.chunk_size):
                    if digest is not None:
                        digest.update(chunk)
                    size += len(chunk)
                    packed = compress(chunk)
                    compressed = len(packed) <= len(chunk) * WORTH_COMPRESSING
                    if compressed:
                        chunk = packed
                    self._write_out(file, chunk)
                    written, crc = written + len(chunk), zlib.crc32(chunk, crc)
                    index.append([len(chunk), int(compressed)])
                sha256 = digest.hexdigest() if digest is not None else content or ""
                trailer = json.dumps({"size": size, "chunk_size": self.chunk_size,
                                      "chunks": index, "address": address,
                                      "sha256": sha256},
                                     separators=(",", ":")).encode()
                trailer += TRAILER.pack(len(trailer), MAGIC)
                self._write_out(file, trailer)
                written, crc = written + len(trailer), zlib.crc32(trailer, crc)
                file.flush()
                if self._durable:
                    os.fsync(file.fileno())
            ref = PayloadRef(sha256, size, len(index), address)
            self._verify(tmp, ref, written, crc)
            now = self._clock()
            os.utime(tmp, (now, now))
            return self._commit(tmp, ref, given)
        finally:
            tmp.unlink(missing_ok=True)  # linked into place, or abandoned

    def _write_out(self, file: Any, data: bytes) -> None:
        file.write(data)

    def _verify(self, tmp: Path, ref: PayloadRef, length: int, crc: int) -> None:
        """Read back what was written: a short write or a bad disk must not be committed.
        The file's bytes (stored chunks, index, trailer) are compared with those handed to
        the file, by their length and CRC-32, a block at a time: a check of the disk's
        copy, without decompressing every chunk and hashing the content a third time
        (ADR 0100; zstd's own frames carry their content size)."""
        back, read = 0, 0
        with open(tmp, "rb") as file:
            while block := file.read(_VERIFY_BLOCK):
                back, read = zlib.crc32(block, back), read + len(block)
        if (read, back) != (length, crc):
            raise OSError(errno.EIO, f"payload {ref.sha256} read back with other bytes "
                          f"({read} of {length} bytes)")

    def _commit(self, tmp: Path, ref: PayloadRef, given: bool) -> PayloadRef:
        # stored already (a new payload: its content, also before ADR 0031; a copy: its
        # address): kept
        existing = self._same_at(ref) if given else self._known(ref.sha256)
        if existing:
            return existing
        final = self._file(ref.address)
        if not final.parent.is_dir():
            private_dir(final.parent)
            self._sync_dir(self.root)
        for attempt in range(2):
            try:
                os.link(tmp, final)  # never replaces: a reader never sees two versions
                break
            except FileExistsError:
                if attempt:
                    raise
            existing = self._same_at(ref)
            if existing:  # another writer committed it first: keep theirs
                return existing
            final.unlink(missing_ok=True)  # a damaged file, without a whole index
        self._sync_dir(final.parent)
        self._link_digest(tmp, ref)
        return ref

    def _same_at(self, ref: PayloadRef) -> PayloadRef | None:
        """The payload at ``ref``'s address, refreshed, if it holds the same content; None if
        there is none; an error if it holds other content (a copy never replaces)."""
        existing = self._refresh(ref.address)
        if existing is not None and existing.sha256 != ref.sha256:
            raise OSError(errno.EEXIST, f"payload {ref.address} is stored already with other "
                          "content; nothing was replaced")
        return existing

    def _refresh(self, sha256: str) -> PayloadRef | None:
        """The stored payload's ref with written_at set to now, or None if it is absent."""
        stored = self._stored(sha256)
        if stored is None:
            return None
        now = self._clock()
        try:
            os.utime(stored.home, (now, now))
        except FileNotFoundError:  # deleted meanwhile
            return None
        return stored.ref

    def _move_aside(self, sha256: str) -> tuple[Path, Path] | None:
        """Moves the payload (file, or a legacy directory) into ``.tmp`` in one step: who
        reads it from now on finds it missing. (Where it was moved, where it was)."""
        for home in (self._file(sha256), self._legacy_dir(sha256)):
            doomed = self._tmp / f"delete-{uuid.uuid4().hex}"
            try:
                os.rename(home, doomed)
            except (FileNotFoundError, NotADirectoryError):
                continue
            return doomed, home
        return None

    def _put_back(self, doomed: Path, home: Path) -> None:
        if doomed.is_dir():
            os.rename(doomed, home)
        else:
            os.link(doomed, home)  # fails if a fresh copy is there already
            doomed.unlink()

    def _sync_dir(self, path: Path) -> None:
        if self._durable:
            descriptor = os.open(path, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
