"""A stored payload read from its file (the format: ``files``' docstring, ADR 0031): the
index and trailer of a payload file, or the manifest of a payload written before ADR 0031 (a
directory of chunk files), as ``Stored``: where each chunk is, and its bytes.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from adapters.eventlog.compression import decompress
from domain.errors import PayloadMissing
from domain.payloads import PayloadRef

__all__ = ["MAGIC", "MANIFEST", "TRAILER", "Stored", "chunk_name", "read_legacy",
           "read_packed"]

MAGIC = b"LLP1"
TRAILER = struct.Struct(">Q4s")  # the index's length, the magic
MANIFEST = "manifest.json"  # payloads written before ADR 0031


class Stored:
    """One stored payload's index: where each chunk is and how it is stored. Chunks are
    read by opening the payload again each time, so that a payload deleted while it is
    being read raises ``PayloadMissing`` instead of yielding what was unlinked."""

    def __init__(self, sha256: str, size: int, chunk_size: int,
                 chunks: list[tuple[str, int, int, bool]], home: Path,
                 written_at: float, digest: str = "") -> None:
        self.sha256 = sha256  # the address
        self.digest = digest or sha256  # the content's SHA-256 (the address before ADR 0099)
        self.home = home  # the file whose mtime is written_at
        self.size = size
        self.chunk_size = chunk_size
        self.chunks = chunks  # (file, offset, stored length, compressed) per chunk
        self.written_at = written_at

    @property
    def ref(self) -> PayloadRef:
        return PayloadRef(self.digest, self.size, len(self.chunks), self.sha256)

    def chunk(self, index: int) -> bytes:
        path, offset, length, compressed = self.chunks[index]
        data = self._read(path, offset, length)
        return decompress(data) if compressed else data

    def piece(self, index: int, start: int, length: int) -> bytes:
        """``length`` bytes of chunk ``index`` from ``start``."""
        path, offset, stored, compressed = self.chunks[index]
        if compressed:
            return decompress(self._read(path, offset, stored))[start:start + length]
        return self._read(path, offset + start, length)

    def _read(self, path: str, offset: int, length: int) -> bytes:
        try:
            with open(path, "rb") as file:
                file.seek(offset)
                return file.read(length)
        except FileNotFoundError:
            raise PayloadMissing(f"payload {self.sha256} is not in the payload store") from None


def read_packed(sha256: str, path: Path) -> Stored | None:
    """The index of a payload file (``sha256``: its address; a file written since ADR 0099
    names its address and its content's SHA-256 in its index); None if there is none, or no
    whole one."""
    try:
        with open(path, "rb") as file:
            end = file.seek(0, os.SEEK_END)
            if end < TRAILER.size:
                return None
            file.seek(end - TRAILER.size)
            length, magic = TRAILER.unpack(file.read(TRAILER.size))
            if magic != MAGIC or length > end - TRAILER.size:
                return None
            file.seek(end - TRAILER.size - length)
            index = json.loads(file.read(length))
            written_at = os.fstat(file.fileno()).st_mtime
        chunks, offset, name = [], 0, str(path)
        for stored, compressed in index["chunks"]:
            chunks.append((name, offset, int(stored), bool(compressed)))
            offset += int(stored)
        return Stored(str(index.get("address") or sha256), int(index["size"]),
                      int(index["chunk_size"]), chunks, path, written_at,
                      str(index.get("sha256", "")))
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, ValueError, KeyError,
            TypeError):
        return None


def read_legacy(sha256: str, directory: Path) -> Stored | None:
    """A payload written before ADR 0031 (a directory); None if it has no manifest."""
    name = os.path.join(directory, MANIFEST)  # a string: most lookups find none
    try:
        with open(name, "rb") as file:
            raw = file.read()
            written_at = os.fstat(file.fileno()).st_mtime
    except (FileNotFoundError, NotADirectoryError):
        return None
    manifest = json.loads(raw)
    compressed = frozenset(manifest.get("zstd", ()))  # absent: written before ADR 0023
    chunks = [(os.path.join(directory, chunk_name(i)), 0, -1, i in compressed)
              for i in range(manifest["chunk_count"])]
    return Stored(sha256, manifest["size"], manifest["chunk_size"], chunks,
                   Path(name), written_at)


def chunk_name(index: int) -> str:
    return f"{index:08d}"
