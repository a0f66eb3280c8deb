"""The user purge job (IBM Sterling's UserPurgeJob): removes the virtual roots and
permission (ACL) records of users the user directory no longer knows.

``purge_users`` asks the directory once, decides with ``domain.userpurge.plan_user_purge``
and removes each record through the store's administrator commands (``delete_root``,
``acl_delete``: events in the log, so every removal is auditable and an administrator can
set the record again; the report lists each removed record with its rights).

It never decides from an answer it cannot trust: a directory that fails or times out
(``DirectoryUnavailable``), a malformed one (``DirectoryInvalid``), one that answers no
user, or fewer than ``user_purge_min_ratio`` of the users of the last accepted answer. Then
it removes nothing and the report says why (``userpurgereport``). The last accepted
answer is remembered (``purgememory``); ``letterlog purger`` runs the job on a schedule
(``scheduleduserpurge``). A dry run reads and decides only: it writes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from adapters.lifecycle.purgememory import PurgeMemory
from adapters.lifecycle.userpurgereport import UserPurgeReport, plural
from domain.directory import Directory, DirectoryError
from domain.errors import NotFound
from domain.userpurge import AclEntry, plan_user_purge


@runtime_checkable
class PermissionRecords(Protocol):
    """The records the job removes: the store's administrator commands."""

    def roots(self) -> dict[str, str]: ...  # user -> "account/path"

    def delete_root(self, user: str) -> Any: ...

    def acl_entries(self) -> list[AclEntry]: ...  # (account, mailbox, identifier, rights)

    def acl_delete(self, account: str, mailbox: str, identifier: str) -> Any: ...


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
            f"the directory's answer skipped {plural(len(skipped), 'entry', 'entries')} it "
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
