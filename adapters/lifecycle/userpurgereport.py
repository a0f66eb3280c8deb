"""What a run of the user purge did, or why it did nothing (``UserPurgeReport``): its JSON
form and its one line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class UserPurgeReport:
    """What a run did, or why it did nothing."""

    status: str  # "purged", "dry-run", "refused" (and why), "nothing" (no record to check)
    directory: str
    directory_users: int | None
    previous_users: int | None
    memory: str
    reason: str | None = None
    roots_removed: list[dict[str, str]] = field(default_factory=list)
    acl_removed: list[dict[str, str]] = field(default_factory=list)
    # negative entries of unknown users: kept (removing one would widen access)
    negative_kept: list[dict[str, str]] = field(default_factory=list)
    position: int | None = None  # the log position of the last removal
    dry_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "dry_run": self.dry_run, "reason": self.reason,
                "directory": self.directory, "directory_users": self.directory_users,
                "previous_users": self.previous_users, "memory": self.memory,
                "roots_removed": self.roots_removed, "acl_removed": self.acl_removed,
                "negative_kept": self.negative_kept, "position": self.position}

    def line(self) -> str:
        if self.status == "refused":
            return (f"user purge{' (dry run)' if self.dry_run else ''} refused, nothing "
                    f"removed: {self.reason}")
        if self.status == "nothing":
            return f"user purge: {self.reason}"
        verb = "would remove" if self.dry_run else "removed"
        return (f"user purge{' (dry run)' if self.dry_run else ''}: the directory answered "
                f"{plural(self.directory_users or 0, 'user')} (last accepted: "
                f"{self.previous_users if self.previous_users is not None else 'none'}); "
                f"{verb} {plural(len(self.roots_removed), 'virtual root')} and "
                f"{plural(len(self.acl_removed), 'ACL entry', 'ACL entries')} of unknown users"
                + self._kept())

    def _kept(self) -> str:
        if not self.negative_kept:
            return ""
        kept = plural(len(self.negative_kept), "negative entry", "negative entries")
        return f"; kept {kept} (removing one would widen access)"


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"
