"""Extraction to a file or a stream: it counts only once the bytes are written.

Reserve (the policy's N is never exceeded, even by concurrent extractions), write, then
confirm; any failure releases the reservation, so a failed extraction does not count. A file
is written to a temporary file in the target directory and then put in place: no partial
file is ever left under the target name, and an existing file is replaced only with
``force``. The output path is checked before anything is reserved.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO
from uuid import UUID

from domain.errors import InvalidCommand
from domain.results import Reservation


def _named(e: OSError, message_id: UUID, path: Path, tmp: Path | None) -> OSError:
    """A failed write named as the user knows it: the output file and the message, never
    the temporary file beside it (``.out.eml.x1y2.part``). A payload file that could not be
    read keeps its name, said to be the message's payload."""
    written = {None, str(tmp) if tmp else None, str(path), str(path.parent)}
    if e.filename is not None and str(e.filename) not in written:
        return OSError(e.errno, f"{e.strerror or e} (the payload of message {message_id}; "
                                f"nothing written to {path}, not counted)", e.filename)
    return OSError(e.errno, f"{e.strerror or e} (writing message {message_id}; "
                            f"not counted)", str(path))


def check_output(path: Path, force: bool) -> Path:
    """The target's directory, or InvalidCommand naming what is wrong with ``path``."""
    if path.is_dir():
        raise InvalidCommand(f"output: {path} is a directory")
    if path.exists() and not force:
        raise InvalidCommand(f"output: {path} exists (--force replaces it)")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InvalidCommand(f"output: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidCommand(f"output: directory {parent} is not writable")
    return parent


class Extractor:
    """Extractions of one store's messages (its command side: reserve, content, confirm,
    release)."""

    def __init__(self, mail: Any) -> None:
        self.mail = mail

    def to_bytes(self, message_id: UUID) -> bytes:
        with self._reserved(message_id) as reservation:
            data = b"".join(self.mail.content(message_id))
            self.mail.confirm_extraction(reservation)
        return data

    def to_stream(self, message_id: UUID, out: BinaryIO) -> dict[str, Any]:
        size = 0
        with self._reserved(message_id) as reservation:
            for chunk in self.mail.content(message_id):
                out.write(chunk)
                size += len(chunk)
            out.flush()
            change = self.mail.confirm_extraction(reservation)
        return self._report(message_id, size, change)

    def to_file(self, message_id: UUID, path: Path, *, force: bool = False) -> dict[str, Any]:
        parent = check_output(path, force)
        with self._reserved(message_id) as reservation:
            tmp = None
            try:
                fd, tmp_name = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.",
                                                suffix=".part")
                tmp = Path(tmp_name)
                size = self._write(fd, self.mail.content(message_id))
                self._place(tmp, path, force)
            except OSError as e:
                raise _named(e, message_id, path, tmp) from None
            finally:
                if tmp is not None:
                    tmp.unlink(missing_ok=True)
            try:
                change = self.mail.confirm_extraction(reservation)
            except BaseException:
                path.unlink(missing_ok=True)  # not counted: the user does not keep the bytes
                raise
        return {**self._report(message_id, size, change), "file": str(path)}

    @contextlib.contextmanager
    def _reserved(self, message_id: UUID) -> Iterator[Reservation]:
        reservation = self.mail.reserve_extraction(message_id)
        confirmed = False
        try:
            yield reservation
            confirmed = True
        finally:
            if not confirmed:
                with contextlib.suppress(Exception):  # the reservation lapses anyway
                    self.mail.release_extraction(reservation, "the bytes were not written")

    @staticmethod
    def _write(fd: int, chunks: Iterator[bytes]) -> int:
        size = 0
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
                size += len(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        return size

    @staticmethod
    def _place(tmp: Path, path: Path, force: bool) -> None:
        if force:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)  # fails if the target appeared meanwhile: never overwrites
        except FileExistsError:
            raise InvalidCommand(f"output: {path} exists (--force replaces it)") from None
        except OSError:  # a file system without hard links
            if path.exists():
                raise InvalidCommand(f"output: {path} exists (--force replaces it)") from None
            os.replace(tmp, path)

    @staticmethod
    def _report(message_id: UUID, size: int, change: Any) -> dict[str, Any]:
        return {"message_id": str(message_id), "size": size, "position": change.position,
                "count": change.extra.get("count"),
                "extractions_to_date": change.extra.get("extractions_to_date")}
