"""Whether a user directory's answer can be trusted for a user purge (``userpurge``).

The answer is refused, and nothing is purged, when it names no user at all, fewer than
``min_ratio`` times the users of the last accepted answer, or shares fewer than
``min_ratio`` of that answer's users (another directory answering as many users).
Sterling's users lost the roots of every user when the directory answered with part of its
users.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from domain.identity import NameRefused, canonical_name


def canonical_user(name: str) -> str | None:
    """A user's name as the identity rule has it, or None if the rule refuses it."""
    try:
        return canonical_name(name, "user")
    except NameRefused:
        return None


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
    before = {c for n in previous_names if (c := canonical_user(n)) is not None}
    floor = math.ceil(len(before) * min_ratio)
    shared = len(names & before)
    if shared < floor:
        return (f"the directory's answer shares {shared} of the {len(before)} users of the "
                f"last accepted answer, fewer than {min_ratio:.0%} (at least {floor} "
                "needed: LETTERLOG_USER_PURGE_MIN_RATIO); it looks like another directory "
                "(a base DN on another branch, another file)")
    return None
