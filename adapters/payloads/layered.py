"""The payloads of a host that moved to HBase (ADR 0072): new payloads go to HBase, and
payload files this host's data directory still holds (written before the move) are read,
listed, released and deleted where they are until ``letterlog payloads migrate`` has copied
them over.

HBase is connected on first use, not when a store opens: commands whose messages travel
inline (most mail) need only the log, so they go on while HBase does not answer; a payload
put then fails with ``TableStoreUnavailable`` (temporary: exit 1, lda 75, LMTP 4.x.x).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from domain.errors import PayloadMissing
from domain.payloads import CHUNK_SIZE, PayloadRef

if TYPE_CHECKING:
    from adapters.payloads.files import FilePayloadStore
    from adapters.payloads.hbase import HBasePayloadStore

R = TypeVar("R")
Progress = Callable[[int, int], None]  # (payloads done, of)


@dataclass
class Migration:
    """What ``migrate`` did: payload files copied, found in HBase already, removed here."""

    files: int = 0
    copied: int = 0
    present: int = 0
    removed: int = 0
    bytes_copied: int = 0


class LayeredPayloadStore:
    """``PayloadStore``: HBase (``remote()``, opened on first use), then this host's payload
    files (``local``; None: there are none)."""

    def __init__(self, remote: Callable[[], HBasePayloadStore],
                 local: FilePayloadStore | None, chunk_size: int = CHUNK_SIZE) -> None:
        self._open_remote = remote
        self._remote: HBasePayloadStore | None = None
        self._lock = threading.Lock()
        self.local = local
        self.chunk_size = chunk_size

    @property
    def remote(self) -> HBasePayloadStore:
        if self._remote is None:
            with self._lock:
                if self._remote is None:
                    self._remote = self._open_remote()
        return self._remote

    # --- writing: HBase ------------------------------------------------------------------
    def put(self, data: bytes) -> PayloadRef:
        return self.remote.put(data)

    def put_many(self, payloads: Sequence[bytes]) -> list[PayloadRef]:
        return self.remote.put_many(payloads)

    def put_stream(self, chunks: Iterable[bytes], *, address: str | None = None) -> PayloadRef:
        return self.remote.put_stream(chunks, address=address)

    # --- reading: HBase, then the files ----------------------------------------------------
    def exists(self, sha256: str) -> bool:
        return self.remote.exists(sha256) or (
            self.local is not None and self.local.exists(sha256))

    def open(self, sha256: str) -> Iterator[bytes]:
        return self._either(lambda store: store.open(sha256))

    def read_range(self, sha256: str, start: int, end: int) -> bytes:
        return self._either(lambda store: store.read_range(sha256, start, end))

    def size(self, sha256: str) -> int:
        return self._either(lambda store: store.size(sha256))

    def list(self) -> Iterator[tuple[str, int, float]]:
        """Every payload once; one in both places with the later write time."""
        here = {sha: (size, at) for sha, size, at in self.local.list()} if self.local else {}
        for sha, size, at in self.remote.list():
            local = here.pop(sha, None)
            yield sha, size, max(at, local[1]) if local else at
        for sha, (size, at) in here.items():
            yield sha, size, at

    # --- releasing and deleting: both ------------------------------------------------------
    def delete(self, sha256: str) -> bool:
        gone = self.remote.delete(sha256)
        return (self.local is not None and self.local.delete(sha256)) or gone

    def touch(self, sha256: str) -> bool:
        touched = self.remote.touch(sha256)
        return (self.local is not None and self.local.touch(sha256)) or touched

    def delete_unless_touched(self, sha256: str, horizon: float) -> int | None:
        freed = [self.remote.delete_unless_touched(sha256, horizon)]
        if self.local is not None:
            freed.append(self.local.delete_unless_touched(sha256, horizon))
        found = [size for size in freed if size is not None]
        return max(found) if found else None

    def discard_stale_writes(self, older_than: float) -> int:
        """The host's old files' (HBase leaves nothing behind: a write that died is listed
        and collected)."""
        return self.local.discard_stale_writes(older_than) if self.local is not None else 0

    def close(self) -> None:
        if self._remote is not None:
            self._remote.close()
        if self.local is not None:
            self.local.close()

    # --- the move ------------------------------------------------------------------------
    def migrate(self, *, remove: bool = False,
                progress: Progress = lambda done, total: None) -> Migration:
        """Copies every payload file of this host into HBase (idempotent: one there already
        is only refreshed), checking each by its size there; ``remove``: then deletes the
        file. A payload deleted meanwhile is skipped."""
        outcome = Migration()
        if self.local is None:
            return outcome
        entries = list(self.local.list())
        outcome.files = len(entries)
        for done, (sha, size, _) in enumerate(entries, 1):
            try:
                if self.remote.exists(sha):
                    self.remote.touch(sha)
                    outcome.present += 1
                else:
                    # the same address: the log refers to it (ADR 0099)
                    ref = self.remote.put_stream(self.local.open(sha), address=sha)
                    if ref.address != sha or self.remote.size(sha) != size:
                        raise OSError(f"payload {sha}: copied into HBase as {ref.address}, "
                                      f"{ref.size} bytes (not {size}); nothing removed")
                    outcome.copied += 1
                    outcome.bytes_copied += size
            except PayloadMissing:  # purged meanwhile
                continue
            if remove and self.local.delete(sha):
                outcome.removed += 1
            progress(done, len(entries))
        return outcome

    def _either(self, read: Callable[[HBasePayloadStore | FilePayloadStore], R]) -> R:
        try:
            return read(self.remote)
        except PayloadMissing:
            if self.local is None:
                raise
            return read(self.local)

