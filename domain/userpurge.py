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

The answer is refused, and nothing is purged, when it names no user at all, or fewer than
``min_ratio`` times the users of the last accepted answer (Sterling's users lost the roots
of every user when the directory answered with part of its users).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from domain.identity import NameRefused, canonical_name

#: identifiers that name no user (RFC 4314 ``anyone``; ``authenticated``: any known user)
SPECIAL_IDENTIFIERS = frozenset({"anyone", "authenticated"})
GROUP_PREFIX = "$"
NEGATIVE_PREFIX = "-"

AclEntry = tuple[str, str, str, str]  # account, mailbox, identifier, rights


def _canonical(name: str) -> str | None:
    try:
        return canonical_name(name, "user")
    except NameRefused:
        return None


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

    @property
    def accepted(self) -> bool:
        return self.refused is None


def refusal(directory_users: int, previous_users: int | None, min_ratio: float) -> str | None:
    """Why an answer of ``directory_users`` users is not trusted, or None."""
    if directory_users == 0:
        return ("the directory answered no user at all (a wrong base DN, an emptied subtree "
                "or an empty file); every user's records would go")
    if previous_users:
        floor = math.ceil(previous_users * min_ratio)
        if directory_users < floor:
            said = f"{directory_users} user" + ("s" if directory_users != 1 else "")
            return (f"the directory answered {said}, fewer than "
                    f"{min_ratio:.0%} of the {previous_users} of the last accepted answer "
                    f"(at least {floor} needed: LETTERLOG_USER_PURGE_MIN_RATIO)")
    return None


def plan_user_purge(known: Iterable[str], previous_users: int | None, min_ratio: float,
                    roots: Mapping[str, str], acl: Sequence[AclEntry], *,
                    accept_shrink: bool = False) -> UserPurgePlan:
    """The records of users not in ``known``, unless the answer is refused.
    ``accept_shrink``: an administrator confirmed that the directory really shrank (the
    ratio check is skipped; an answer of no user is still refused)."""
    names = {_canonical(name) for name in known} - {None}
    count = len(names)
    why = refusal(count, None if accept_shrink else previous_users, min_ratio)
    if why is not None:
        return UserPurgePlan(count, previous_users, refused=why)

    def gone(user: str | None) -> bool:
        # a name the identity rule refuses is nobody's now, but keeping is the safe side
        return user is not None and (canonical := _canonical(user)) is not None and (
            canonical not in names)

    return UserPurgePlan(
        count, previous_users,
        roots=tuple(sorted((u, r) for u, r in roots.items() if gone(u))),
        acl=tuple(sorted(e for e in acl if gone(user_of(e[2])))),
    )
