"""An ACL identifier checked against the user directory before it is stored: it must name
a user or a group the directory knows (or ``anyone``, ``authenticated``)."""

from __future__ import annotations

from domain.directory import Directory, DirectoryInvalid
from domain.errors import InvalidCommand
from domain.identity import GROUP, NEGATIVE, is_special


class UnknownIdentifier(InvalidCommand):
    """An ACL identifier that names no user or group of the directory: stored, it would
    grant or deny nobody (a denial that denies nobody is worse than none: it looks like
    one)."""


def check_identifier(directory: Directory, identifier: str) -> None:
    """``UnknownIdentifier`` unless ``identifier`` (as the identity rule has it) names a user
    the directory knows, a group one of its users belongs to, ``anyone`` or
    ``authenticated``, each also negative. ``DirectoryUnavailable`` when it does not
    answer (nothing is stored then either)."""
    if is_special(identifier):
        return
    name = identifier.removeprefix(NEGATIVE)
    if name.startswith(GROUP):
        group = name[len(GROUP):]
        if any(group in user.groups for user in directory.users()):
            return
        raise UnknownIdentifier(f"identifier: {identifier!r}: no user of the directory is in "
                                f"the group {group!r} (an entry for it would "
                                f"{'deny' if identifier.startswith(NEGATIVE) else 'grant'}"
                                " nobody; letterlog users list shows the directory)")
    try:
        known = directory.user(name) is not None
    except DirectoryInvalid:
        known = True  # a user whose line is malformed is still a user
    if not known:
        raise UnknownIdentifier(f"identifier: {identifier!r}: the directory knows no user "
                                f"{name!r} (an entry for it would "
                                f"{'deny' if identifier.startswith(NEGATIVE) else 'grant'}"
                                " nobody; letterlog users list shows the directory)")
