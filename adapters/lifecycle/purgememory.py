"""The user purge's memory, ``<data>/user-purge.json`` (private, replaced atomically): the
users of the last accepted directory answer (a run that sees fewer than
``user_purge_min_ratio`` of them refuses to decide), when that run was (``letterlog
purger`` runs the job when ``user_purge_interval_days`` have passed since: ``due``), and
the last refusal. A dry run writes nothing here."""

from __future__ import annotations

import json
import os
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from adapters.files.filemodes import create_private
from domain.directory import DirectoryError

MEMORY_FILE = "user-purge.json"


class PurgeMemory:
    """``<data>/user-purge.json``: the user count of the last accepted answer, when that
    run was, and the last refusal."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def read(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.path.read_text()))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            raise DirectoryError(f"{self.path}: the user purge's memory cannot be read "
                                 f"({error}); nothing was purged") from None

    def previous_users(self) -> int | None:
        users = self.read().get("users")
        return int(users) if users is not None else None

    def previous_names(self) -> list[str] | None:
        """The users of the last accepted answer (None: a file of an older letterlog,
        which kept only their count)."""
        names = self.read().get("names")
        return [str(n) for n in names] if names is not None else None

    def last_run(self) -> datetime | None:
        at = self.read().get("accepted_at")
        return datetime.fromisoformat(at) if at else None

    def _write(self, body: dict[str, Any]) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex[:8]}.tmp")
        fd = create_private(tmp)
        try:
            os.write(fd, (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)

    def accepted(self, users: int, at: datetime, source: str,
                 names: list[str] | None = None) -> None:
        body = self.read()
        body.update(users=users, accepted_at=at.isoformat(), source=source)
        if names is not None:
            body["names"] = sorted(names)
        self._write(body)

    def refused(self, reason: str, at: datetime) -> None:
        body = self.read()
        body["last_refusal"] = {"at": at.isoformat(), "reason": reason}
        self._write(body)


def due(memory: PurgeMemory, interval: timedelta, now: datetime) -> bool:
    """Whether ``interval`` has passed since the last accepted run (always, before one)."""
    last = memory.last_run()
    return last is None or now - last >= interval
