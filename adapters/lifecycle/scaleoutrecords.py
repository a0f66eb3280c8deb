"""What an erasure on scale-out still owes (``scaleout``: when, the log position of its last
event, the payloads' SHA-256, how many messages; no id, no content), one JSON file each in
``<data>/erasures-scaleout/``; in the log's database when the log is there (``sharedpending``)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.files.datadir import json_records
from adapters.files.filemodes import create_private, private_dir, private_file

PENDING_DIR = "erasures-scaleout"
PURGES = "purges.json"


class ScaleOutPending:
    """``<data>/erasures-scaleout/``: one JSON record per erasure not yet completed."""

    def __init__(self, data: str | os.PathLike[str]) -> None:
        self.dir = Path(data) / PENDING_DIR

    def records(self) -> list[tuple[Path, dict[str, Any]]]:
        return json_records(self.dir)

    def record(self, *, position: int, began: float, payloads: Iterable[str],
               messages: int) -> Path:
        """One erasure: a record of its own."""
        now = datetime.now(UTC)
        path = self.dir / f"{now.strftime('%Y%m%dT%H%M%S%f')}-{uuid.uuid4().hex[:8]}.json"
        with self._locked():
            self._write(path, {"since": now.isoformat(), "position": position, "began": began,
                               "messages": messages, "payloads": sorted(set(payloads))})
        return path

    def record_purge(self, *, position: int, messages: int) -> Path:
        """Purge runs (no payloads: those keep their grace period; the payloads a run
        deleted from HBase are compacted by the same completion) share one record,
        ``purges.json``, which grows until ``complete`` clears it (a purger's batches do not
        make a file each)."""
        path = self.dir / PURGES
        with self._locked():
            try:
                found = json.loads(path.read_text())
            except (OSError, ValueError):
                found = {"since": datetime.now(UTC).isoformat(), "position": 0, "began": 0.0,
                         "messages": 0, "payloads": []}
            found["position"] = max(int(found["position"]), position)
            found["messages"] = int(found["messages"]) + messages
            self._write(path, found)
        return path

    def clear(self, records: Iterable[tuple[Path, dict[str, Any]]]) -> int:
        """Removes the records ``complete`` finished, unless one changed since it was read
        (a purge added to ``purges.json`` meanwhile: then it stays for the next run)."""
        cleared = 0
        with self._locked():
            for path, seen in records:
                try:
                    if json.loads(path.read_text()) != seen:
                        continue
                    path.unlink()
                except (OSError, ValueError):
                    continue
                cleared += 1
        return cleared

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        private_dir(self.dir)
        fd = os.open(private_file(self.dir / ".lock"), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _write(self, path: Path, body: dict[str, Any]) -> None:
        tmp = self.dir / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"
        fd = create_private(tmp)
        try:
            os.write(fd, json.dumps(body).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
