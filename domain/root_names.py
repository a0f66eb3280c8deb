"""The names of virtual roots: a user's name, a root ``account[/path]`` parsed and formatted,
the id of a user's ``VirtualRoot`` (``roots``), and the prefix of other accounts'
mailboxes in a user's listing."""

from __future__ import annotations

from uuid import UUID

from domain.errors import InvalidCommand
from domain.identity import SPECIAL, canonical_name
from domain.values import DELIMITER, name_uuid, normalise_address

SHARED = "shared"
"""The prefix of other accounts' mailboxes in a user's listing: ``shared/<account>/<name>``."""


def root_id_for(user: str) -> UUID:
    return name_uuid("root:" + validate_user(user))


def validate_user(user: str) -> str:
    """A user's name as the identity rule has it (``domain.identity``): ``NameRefused``
    when the rule cannot make it unambiguous; a name that starts like a negative or group
    identifier (``-``, ``$``) is no user's."""
    name = canonical_name(user, "user")
    if name[0] in "-$" or name in SPECIAL:
        raise InvalidCommand(f"user: {user!r} is not a user name")
    return name


def parse_root(root: str) -> tuple[str, str]:
    """``account[/path]`` -> (normalised account, path or "")."""
    account, _, path = (root or "").strip().partition(DELIMITER)
    path = path.strip(DELIMITER)
    return normalise_address(account), path


def format_root(account: str, path: str) -> str:
    return f"{account}{DELIMITER}{path}" if path else account
