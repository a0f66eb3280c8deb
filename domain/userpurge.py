"""The user purge decision (IBM Sterling's UserPurgeJob): which virtual roots and permission
records belong to users the directory no longer knows, and whether the directory's answer
can be trusted at all.

A pure function of the directory's answer, the count remembered from the last accepted
answer, and the records; the job that asks the directory and removes the records lives in
``adapters/lifecycle/userpurge.py``.

Never purged: group identifiers (``$name``), ``anyone``, ``authenticated``, or a record of
a user the directory knows. A negative-rights identifier (``-name``, RFC 4314) belongs to
the user ``name``. User names are compared as the identity rule has them
(``domain.identity``): a record whose user differs from a directory user only in case or
width is that user's, and kept; one whose name the rule refuses is kept too (the safe side).

Negative entries of gone users are kept (``kept_negative``): removing one would give the
name back what it took away, should a user of that name come back.

The answer is refused, and nothing is purged, when ``directory_answers`` does not trust it
(no user at all, too few, or too few shared with the last accepted answer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from domain.directory_answers import canonical_user, overlap_refusal, refusal

#: identifiers that name no user (RFC 4314 ``anyone``; ``authenticated``: any known user)
SPECIAL_IDENTIFIERS = frozenset({"anyone", "authenticated"})
GROUP_PREFIX = "$"
NEGATIVE_PREFIX = "-"

AclEntry = tuple[str, str, str, str]  # account, mailbox, identifier, rights


def user_of(identifier: str) -> str | None:
    """The user an ACL identifier names, or None for a group, ``anyone`` or
    ``authenticated`` (also when negative: ``-$sales``, ``-anyone``)."""
    name = identifier.removeprefix(NEGATIVE_PREFIX)
    if not name or name.startswith(GROUP_PREFIX) or name.lower() in SPECIAL_IDENTIFIERS:
        return None
    return name


@dataclass(frozen=True)
class UserPurgePlan:
    """What a run would remove, or why it removes nothing (``refused``)."""

    directory_users: int
    previous_users: int | None
    refused: str | None = None
    roots: tuple[tuple[str, str], ...] = ()  # (user, "account/path")
    acl: tuple[AclEntry, ...] = field(default=())
    kept_negative: tuple[AclEntry, ...] = ()  # negative entries of gone users: never removed

    @property
    def accepted(self) -> bool:
        return self.refused is None


def plan_user_purge(known: Iterable[str], previous_users: int | None, min_ratio: float,
                    roots: Mapping[str, str], acl: Sequence[AclEntry], *,
                    accept_shrink: bool = False,
                    previous_names: Iterable[str] | None = None) -> UserPurgePlan:
    """The records of users not in ``known``, unless the answer is refused.
    ``previous_names``: the users of the last accepted answer, which the answer must
    overlap. ``accept_shrink``: an administrator confirmed that the directory really
    changed (the ratio and overlap checks are skipped; an answer of no user is still
    refused). Negative entries (``-name``) are never removed: removing one would give its
    user back what it took away, should the name come back."""
    names = {c for name in known if (c := canonical_user(name)) is not None}
    count = len(names)
    why = refusal(count, None if accept_shrink else previous_users, min_ratio)
    if why is None and not accept_shrink:
        why = overlap_refusal(names, previous_names, min_ratio)
    if why is not None:
        return UserPurgePlan(count, previous_users, refused=why)

    def gone(user: str | None) -> bool:
        # a name the identity rule refuses is nobody's now, but keeping is the safe side
        return user is not None and (canonical := canonical_user(user)) is not None and (
            canonical not in names)

    return UserPurgePlan(
        count, previous_users,
        roots=tuple(sorted((u, r) for u, r in roots.items() if gone(u))),
        acl=tuple(sorted(e for e in acl if not e[2].startswith(NEGATIVE_PREFIX)
                         and gone(user_of(e[2])))),
        kept_negative=tuple(sorted(e for e in acl if e[2].startswith(NEGATIVE_PREFIX)
                                   and gone(user_of(e[2])))),
    )
