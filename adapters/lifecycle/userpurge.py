"""The user purge job (IBM Sterling's UserPurgeJob): removes the virtual roots and
permission (ACL) records of users the user directory no longer knows.

``purge_users`` asks the directory once, decides with ``domain.userpurge.plan_user_purge``
and removes each record through the store's administrator commands (``delete_root``,
``acl_delete``: events in the log, so every removal is auditable and an administrator can
set the record again; the report lists each removed record with its rights).

It never decides from an answer it cannot trust: a directory that fails or times out
(``DirectoryUnavailable``), a malformed one (``DirectoryInvalid``), one that answers no
user, or fewer than ``user_purge_min_ratio`` of the users of the last accepted answer. Then
it removes nothing and the report says why. The last accepted count is remembered in
``<data>/user-purge.json`` (private, replaced atomically), with the time of the last
accepted run (``letterlog purger`` runs the job when ``user_purge_interval_days`` have
passed since) and the last refusal. A dry run reads and decides only: it writes nothing,
that file included.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from adapters.files.filemodes import create_private
from domain.directory import Directory, DirectoryError
from domain.errors import NotFound
from domain.userpurge import AclEntry, plan_user_purge

MEMORY_FILE = "user-purge.json"


@runtime_checkable
class PermissionRecords(Protocol):
    """The records the job removes: the store's administrator commands."""

    def roots(self) -> dict[str, str]: ...  # user -> "account/path"

    def delete_root(self, user: str) -> Any: ...

    def acl_entries(self) -> list[AclEntry]: ...  # (account, mailbox, identifier, rights)

    def acl_delete(self, account: str, mailbox: str, identifier: str) -> Any: ...


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
                f"{_count(self.directory_users or 0, 'user')} (last accepted: "
                f"{self.previous_users if self.previous_users is not None else 'none'}); "
                f"{verb} {_count(len(self.roots_removed), 'virtual root')} and "
                f"{_count(len(self.acl_removed), 'ACL entry', 'ACL entries')} of unknown users"
                + self._kept())

    def _kept(self) -> str:
        if not self.negative_kept:
            return ""
        kept = _count(len(self.negative_kept), "negative entry", "negative entries")
        return f"; kept {kept} (removing one would widen access)"


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _source(directory: Directory) -> str:
    return str(getattr(directory, "source", type(directory).__name__))


def purge_users(directory: Directory, records: PermissionRecords, memory: PurgeMemory, *,
                min_ratio: float, dry_run: bool = False, accept_shrink: bool = False,
                now: datetime | None = None) -> UserPurgeReport:
    """One run of the job (see the module docstring). Never raises for a directory that
    fails: the report says ``refused`` and why."""
    now = now or datetime.now(UTC)
    source = _source(directory)
    previous = memory.previous_users()
    report = UserPurgeReport("dry-run" if dry_run else "purged", source, None, previous,
                             str(memory.path), dry_run=dry_run)
    if not isinstance(records, PermissionRecords):
        report.status = "nothing"
        report.reason = ("this store keeps no virtual roots or ACL entries (the directory "
                         "was not asked)")
        return report
    roots, acl = records.roots(), records.acl_entries()
    if not roots and not acl:
        report.status = "nothing"
        report.reason = "no virtual root or ACL entry to check (the directory was not asked)"
        return report
    try:
        known = [user.name for user in directory.users()]
    except DirectoryError as error:
        return _refused(report, memory, str(error), now, dry_run)
    skipped = directory.skipped() if hasattr(directory, "skipped") else []
    if skipped:
        return _refused(report, memory, (
            f"the directory's answer skipped {_count(len(skipped), 'entry', 'entries')} it "
            f"could not read ({', '.join(e.where for e in skipped[:3])}"
            f"{', ...' if len(skipped) > 3 else ''}): a user behind one would lose its "
            "records; mend them first"), now, dry_run)
    plan = plan_user_purge(known, previous, min_ratio, roots, acl,
                           accept_shrink=accept_shrink, previous_names=memory.previous_names())
    report.negative_kept = [{"account": a, "mailbox": m, "identifier": i, "rights": r}
                            for a, m, i, r in plan.kept_negative]
    report.directory_users = plan.directory_users
    if plan.refused is not None:
        return _refused(report, memory, plan.refused, now, dry_run)
    for user, root in plan.roots:
        if not dry_run and not _removed(records.delete_root, user, report=report):
            continue
        report.roots_removed.append({"user": user, "root": root})
    for account, mailbox, identifier, rights in plan.acl:
        if not dry_run and not _removed(records.acl_delete, account, mailbox, identifier,
                                        report=report):
            continue
        report.acl_removed.append({"account": account, "mailbox": mailbox,
                                   "identifier": identifier, "rights": rights})
    if not dry_run:
        memory.accepted(plan.directory_users, now, source, known)
    return report


def _removed(command: Any, *args: str, report: UserPurgeReport) -> bool:
    """Runs one removal; False if the record is gone already (removed meanwhile)."""
    try:
        change = command(*args)
    except NotFound:
        return False
    position = getattr(change, "position", None)
    if position is not None:
        report.position = max(report.position or 0, int(position))
    return getattr(change, "changed", True) is not False


def _refused(report: UserPurgeReport, memory: PurgeMemory, reason: str, now: datetime,
             dry_run: bool) -> UserPurgeReport:
    report.status, report.reason = "refused", reason
    if not dry_run:
        memory.refused(reason, now)
    return report


def due(memory: PurgeMemory, interval: timedelta, now: datetime) -> bool:
    """Whether ``interval`` has passed since the last accepted run (always, before one)."""
    last = memory.last_run()
    return last is None or now - last >= interval


class ScheduledUserPurge:
    """The user purge as ``letterlog purger`` runs it (``run_purger(user_purge=...)``):
    called after each purge run with the open store, it runs the job when
    ``user_purge_interval_days`` have passed since the last accepted run, and returns the
    report (None when not due). ``make_directory`` builds the directory from the store's
    settings (the entry point hands over ``bootstrap.directory``)."""

    def __init__(self, make_directory: Callable[[Any], Directory]) -> None:
        self.make_directory = make_directory

    def __call__(self, store: Any, now: datetime) -> UserPurgeReport | None:
        settings = store.settings
        memory = PurgeMemory(Path(settings.data) / MEMORY_FILE)
        if not due(memory, timedelta(days=settings.user_purge_interval_days), now):
            return None
        return purge_users(self.make_directory(settings), store, memory,
                           min_ratio=settings.user_purge_min_ratio, now=now)
