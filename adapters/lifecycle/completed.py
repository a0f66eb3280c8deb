"""What one attempt to finish an erasure on the files found (``Completion``): complete, or
which files still hold erased data and which processes hold them open (``Holder``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EXIT_INCOMPLETE = 3
"""The exit status of an erasure (or purge run) that committed but could not finish within
the bound: the keys are destroyed and ``Purged`` recorded; a file still holds the data."""


@dataclass(frozen=True)
class Holder:
    """A file a checkpoint could not finish, and the processes that have it open."""

    path: str
    pids: tuple[int, ...] = ()
    names: tuple[str, ...] = ()
    reason: str = ""  # a server's file (the key cluster's): what still holds it

    def describe(self) -> str:
        if self.reason:
            return self.reason
        if not self.pids:
            return f"{self.path}: held open by an unknown process"
        who = ", ".join(f"pid {p} ({n})" if n else f"pid {p}"
                        for p, n in zip(self.pids, self.names, strict=True))
        return f"{self.path}: held open by {who}"

    def as_dict(self) -> dict[str, Any]:
        out = {"file": self.path, "pids": list(self.pids), "processes": list(self.names)}
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class Completion:
    """The outcome of one completion attempt."""

    complete: bool = True
    holders: list[Holder] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # every file checkpointed
    seconds: float = 0.0
    cleared: int = 0  # pending records removed

    def line(self) -> str:
        """One line naming what still holds erased data (empty when complete)."""
        if self.complete:
            return ""
        return ("erasure not yet complete, erased data is still in "
                + "; ".join(h.describe() for h in self.holders)
                + f" (waited {self.seconds:.1f} s); the erasure is committed; "
                "`letterlog erase complete` or the next purge run finishes it once it closes")

    def as_dict(self) -> dict[str, Any]:
        return {"complete": self.complete, "pending": [h.as_dict() for h in self.holders],
                "waited_seconds": round(self.seconds, 3), "pending_cleared": self.cleared}
