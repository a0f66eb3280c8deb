"""The file store's links from content to address (ADR 0099), mixed into ``FilePayloadStore``.

Addresses (ADR 0099): a new payload gets a random address; ``root/.digests/ab/<sha256>`` is
a second hard link to its file, named by the content's SHA-256, through which a put of the
same content finds the address it has (and refreshes it). The link is removed before the
payload is (so a crash in between leaves the payload, which the erasure's completion deletes
again, never a link without it), and ``discard_stale_writes`` removes a link left alone (its
payload gone, one link count): once a payload is deleted nothing here ties its address to
its content. Payloads stored before are addressed by their SHA-256 and keep it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.files.filemodes import private_dir
from adapters.payloads.stored import read_packed
from domain.payloads import PayloadRef, check_sha256, is_sha256

__all__ = ["DIGESTS", "ContentLinks"]

DIGESTS = ".digests"  # the content's links: root/.digests/ab/<sha256>


class ContentLinks:
    """``root/.digests/ab/<sha256>``: a second name of a stored payload's file."""

    root: Path
    _tmp: Path
    _clock: Callable[[], float]

    if TYPE_CHECKING:  # the store's
        def _file(self, sha256: str) -> Path: ...

        def _refresh(self, sha256: str) -> PayloadRef | None: ...

    def _digest_file(self, sha256: str) -> Path:
        check_sha256(sha256)
        return Path(f"{self.root}/{DIGESTS}/{sha256[:2]}/{sha256}")

    def _known(self, sha256: str) -> PayloadRef | None:
        """The payload stored with this content, its written_at set to now; None if there is
        none. Through the content's link (the file's second name: touching it touches the
        payload), checked to be the file at its address still (a payload being deleted is
        not); else a payload stored before ADR 0099, under its SHA-256."""
        link = self._digest_file(sha256)
        now = self._clock()
        try:
            os.utime(link, (now, now))
            linked = os.stat(link)
        except FileNotFoundError:
            return self._refresh(sha256)
        stored = read_packed("", link)
        if stored is None or not stored.sha256:
            return self._refresh(sha256)
        try:
            at_home = os.path.samestat(os.stat(self._file(stored.sha256)), linked)
        except FileNotFoundError:
            at_home = False
        return stored.ref if at_home else self._refresh(sha256)

    def _link_digest(self, tmp: Path, ref: PayloadRef) -> None:
        """``tmp`` (committed at its address) linked under its content's SHA-256, unless a
        stored payload of the same content is linked there already; a link whose payload is
        gone is replaced."""
        link = self._digest_file(ref.sha256)
        if not link.parent.is_dir():
            private_dir(link.parent)
        try:
            os.link(tmp, link)
        except FileExistsError:
            if self._known(ref.sha256) is not None:
                return
            staged = self._tmp / f"link-{uuid.uuid4().hex}"
            os.link(tmp, staged)
            os.replace(staged, link)
        # not fsynced: a link lost in a crash costs one more copy of the content, no more

    def _unlink_digest(self, sha256: str, payload: Path) -> None:
        """The content's link removed if it is ``payload``'s (another copy's is kept)."""
        if not is_sha256(sha256):
            return
        link = self._digest_file(sha256)
        try:
            if os.path.samefile(link, payload):
                link.unlink()
        except FileNotFoundError:
            pass

    def _sweep_links(self) -> int:
        """Every link left alone (its payload gone: one link count) removed; how many."""
        removed = 0
        for link in self.root.glob(f"{DIGESTS}/??/*"):
            try:
                alone = link.stat().st_nlink == 1
            except FileNotFoundError:
                continue
            if alone:
                link.unlink(missing_ok=True)
                removed += 1
        return removed
