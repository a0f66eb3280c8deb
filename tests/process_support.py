"""A process's family as Linux's /proc shows it, for tests that kill processes or check
that none is left behind."""

from __future__ import annotations

import glob
from pathlib import Path


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (children, theirs, ...); none once it has ended."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        for path in glob.glob(f"/proc/{todo.pop()}/task/*/children"):
            try:
                kids = {int(p) for p in Path(path).read_text().split()}
            except OSError:
                continue
            todo.extend(kids - found)
            found |= kids
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def cmdline(pid: int) -> bytes:
    """``pid``'s command line (NUL-separated), empty once it has ended."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
