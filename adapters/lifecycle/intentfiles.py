"""The erasure intents kept in the data directory, ``<data>/erasures-intent/`` (the
embedded store's; ``intents`` says what an intent is for and which a store uses): one JSON
file each, fsynced with its directory before the erasure or purge run appends anything,
held by an exclusive ``flock`` while it runs. ``Held`` and the fields and ``held`` block
every intent has (a file here, a row in ``sharedintents``) are here too."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from adapters.files.filemodes import create_private, fsync_dir, private_dir

INTENT_DIR = "erasures-intent"


class Held(Protocol):
    """One intent held by this process: a file (``Intent``) or a row (``SharedIntent``)."""

    body: dict[str, Any]

    @property
    def kind(self) -> str: ...
    @property
    def position(self) -> int: ...
    @property
    def began(self) -> float: ...
    def finish(self) -> None: ...
    def release(self) -> None: ...


class _Fields:
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body.get("kind", ""))

    @property
    def position(self) -> int:
        return int(self.body.get("position", 0))

    @property
    def began(self) -> float:
        return float(self.body.get("began", 0.0))


class _Holding:
    """``held`` over ``begin``: the intent removed when the block ends, left if it raises."""

    def begin(self, kind: str, position: int, **fields: Any) -> Held:
        raise NotImplementedError

    @contextlib.contextmanager
    def held(self, kind: str, position: int, **fields: Any) -> Iterator[Held]:
        """``begin``; removed when the block ends normally, left (unlocked) if it raises."""
        intent = self.begin(kind, position, **fields)
        try:
            yield intent
        except BaseException:
            intent.release()
            raise
        intent.finish()


@dataclass
class Intent(_Fields):
    """One intent, its file locked by this process until ``finish`` or ``release``."""

    path: Path
    fd: int
    body: dict[str, Any] = field(default_factory=dict)

    def finish(self) -> None:
        """Done: the file removed (durably), then its lock let go."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
            fsync_dir(self.path.parent)
        self.release()

    def release(self) -> None:
        """Not done (an error, not a crash): the file stays for whoever comes next."""
        if self.fd >= 0:
            os.close(self.fd)  # the lock goes with the descriptor
            self.fd = -1


class Intents(_Holding):
    """``<data>/erasures-intent/``."""

    def __init__(self, data: str | os.PathLike[str]) -> None:
        self.dir = Path(data) / INTENT_DIR

    def any(self) -> bool:
        """Whether any intent file exists (one ``listdir``: cheap enough for every open)."""
        try:
            return any(n.endswith(".json") for n in os.listdir(self.dir))
        except FileNotFoundError:
            return False

    def begin(self, kind: str, position: int, **fields: Any) -> Intent:
        """A new intent, durable (file and directory fsynced) and locked before it is
        visible under its final name."""
        private_dir(self.dir)
        name = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp = self.dir / f".{name}.tmp"
        body = {"kind": kind, "position": position, "began": time.time(), **fields}
        fd = create_private(tmp, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, json.dumps(body).encode())
            os.fsync(fd)
            final = self.dir / f"{name}.json"
            os.replace(tmp, final)
            fsync_dir(self.dir)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        return Intent(final, fd, body)

    def abandoned(self) -> list[Intent]:
        """The intents no running process holds (their writer died), each locked now by
        this process; the caller finishes or releases each."""
        out = []
        for path in sorted(self.dir.glob("*.json")) if self.dir.is_dir() else []:
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                continue  # finished meanwhile
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)  # a live process holds it: its own to finish
                continue
            if not path.exists():  # finished (removed) between our open and our lock
                os.close(fd)
                continue
            out.append(Intent(path, fd, _body(fd)))
        return out

    def listing(self) -> list[dict[str, Any]]:
        """Every intent (``erase status``): kind, position, began, and whether a live process
        holds it (``running``); ids are not listed."""
        out = []
        for path in sorted(self.dir.glob("*.json")) if self.dir.is_dir() else []:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    running = False
                except BlockingIOError:
                    running = True
                body = _body(fd)
            finally:
                os.close(fd)
            out.append({"kind": body.get("kind", "?"), "position": body.get("position", 0),
                        "began": body.get("began", 0.0), "running": running,
                        "messages": len(body.get("messages", []))})
        return out


def _body(fd: int) -> dict[str, Any]:
    """An intent file's body (empty if it is not a JSON object: written by no letterlog)."""
    try:
        body = json.loads(os.pread(fd, 1 << 20, 0) or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
