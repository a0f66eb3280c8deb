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

The answer is refused, and nothing is purged, when it names no user at all, fewer than
``min_ratio`` times the users of the last accepted answer, or shares fewer than
``min_ratio`` of that answer's users (another directory answering as many users).
Sterling's users lost the roots of every user when the directory answered with part of its
users.
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
    kept_negative: tuple[AclEntry, ...] = ()  # negative entries of gone users: never removed

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


def overlap_refusal(names: set[str], previous_names: Iterable[str] | None,
                    min_ratio: float) -> str | None:
    """Why an answer that shares too few users with the last accepted one is not trusted
    (a base DN mistyped onto another branch answers as many users, but other ones), or
    None: at least ``min_ratio`` of the last accepted users must be in the answer."""
    if not previous_names:
        return None
    before = {c for n in previous_names if (c := _canonical(n)) is not None}
    floor = math.ceil(len(before) * min_ratio)
    shared = len(names & before)
    if shared < floor:
        return (f"the directory's answer shares {shared} of the {len(before)} users of the "
                f"last accepted answer, fewer than {min_ratio:.0%} (at least {floor} "
                "needed: LETTERLOG_USER_PURGE_MIN_RATIO); it looks like another directory "
                "(a base DN on another branch, another file)")
    return None


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
    names = {c for name in known if (c := _canonical(name)) is not None}
    count = len(names)
    why = refusal(count, None if accept_shrink else previous_users, min_ratio)
    if why is None and not accept_shrink:
        why = overlap_refusal(names, previous_names, min_ratio)
    if why is not None:
        return UserPurgePlan(count, previous_users, refused=why)

    def gone(user: str | None) -> bool:
        # a name the identity rule refuses is nobody's now, but keeping is the safe side
        return user is not None and (canonical := _canonical(user)) is not None and (
            canonical not in names)

    return UserPurgePlan(
        count, previous_users,
        roots=tuple(sorted((u, r) for u, r in roots.items() if gone(u))),
        acl=tuple(sorted(e for e in acl if not e[2].startswith(NEGATIVE_PREFIX)
                         and gone(user_of(e[2])))),
        kept_negative=tuple(sorted(e for e in acl if e[2].startswith(NEGATIVE_PREFIX)
                                   and gone(user_of(e[2])))),
    )
