"""What could not be finished, recorded in ``<data>/erasures-pending/`` (one small JSON file
per unfinished erasure: when, which files, which processes held them; no message id, no
content); the next erasure, purge run or ``letterlog erase complete`` tries again and
removes the records made before its checkpoints began once every file is done."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.files.datadir import json_records
from adapters.files.filemodes import create_private, private_dir
from adapters.lifecycle.completed import Completion

PENDING_DIR = "erasures-pending"


class PendingErasures:
    """``<data>/erasures-pending/``: one JSON record per erasure not yet finished."""

    def __init__(self, data: str | os.PathLike[str]) -> None:
        self.dir = Path(data) / PENDING_DIR

    def records(self) -> list[tuple[Path, dict[str, Any]]]:
        return json_records(self.dir)

    def record(self, completion: Completion, *, position: int, messages: int) -> None:
        private_dir(self.dir)
        now = datetime.now(UTC)
        name = f"{now.strftime('%Y%m%dT%H%M%S%f')}-{uuid.uuid4().hex[:8]}"
        body = json.dumps({"since": now.isoformat(), "position": position,
                           "messages": messages,
                           "files": [h.path for h in completion.holders],
                           "holders": [h.as_dict() for h in completion.holders]}).encode()
        tmp = self.dir / f".{name}.tmp"
        fd = create_private(tmp)
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.dir / f"{name}.json")

    def clear(self, paths: list[Path]) -> int:
        cleared = 0
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                cleared += 1
        return cleared
