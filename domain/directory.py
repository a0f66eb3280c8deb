"""The user directory: who the users are and which groups each belongs to.

A port (``Directory``) with two adapters in ``adapters/directory/``: a passwd-file in
Dovecot's format (the embedded default) and LDAP. The domain knows users by name only; how a
directory stores them (a file's lines, LDAP entries under a base DN) stays in the adapter.

A directory that fails or does not answer in time raises ``DirectoryUnavailable`` (a
failure a retry may fix); a directory whose content is malformed (a passwd-file line that
is not ``user:password:uid:gid:gecos:home:shell:extra_fields``) raises ``DirectoryInvalid``
naming the file and the line. Nothing that decides from a directory's answer (the user
purge job, an ACL identifier's check: ``acl_identifiers``) may go on after either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from domain.errors import LetterlogError


@dataclass(frozen=True, order=True)
class DirectoryUser:
    """A user the directory knows, and the names of the groups the user belongs to."""

    name: str
    groups: frozenset[str] = frozenset()


@dataclass(frozen=True, order=True)
class SkippedEntry:
    """A directory entry that was left out of an answer: ``where`` (``file:line``, an LDAP
    DN), ``reason`` (never the entry's text: a passwd-file line holds a password hash) and
    the user it would have named, when that much could be read (its name as the identity
    rule has it)."""

    where: str
    reason: str
    name: str | None = None


class Directory(Protocol):
    """Where users and their groups come from. Names (users and groups) are answered as
    the identity rule has them (``domain.identity``); an entry the rule refuses, or that
    cannot be read, is skipped (``skipped()``), and a user named by a skipped entry cannot
    be asked about (``DirectoryInvalid``): its groups are not known."""

    def users(self) -> list[DirectoryUser]:
        """Every user, each with its groups, in name order."""
        ...

    def user(self, name: str) -> DirectoryUser | None:
        """The user called ``name`` (as the identity rule has it), or None if the directory
        does not know it."""
        ...

    def skipped(self) -> list[SkippedEntry]:
        """The entries the last answer left out (none before the first)."""
        ...

    def authenticate(self, name: str, password: str) -> DirectoryUser | None:
        """The user ``name`` when ``password`` is its password, else None (an unknown
        user and a wrong password alike)."""
        ...


class DirectoryError(LetterlogError):
    """The directory gave no answer that can be trusted."""


class DirectoryUnavailable(DirectoryError):
    """The directory failed or did not answer in time; a retry may succeed.

    ``source`` names the directory (a file, an LDAP URL), ``timed_out`` tells a timeout from
    another failure (refused connection, failed bind, a missing base DN, an unreadable
    file)."""

    def __init__(self, source: str, reason: str, *, timed_out: bool = False) -> None:
        self.source = source
        self.reason = reason
        self.timed_out = timed_out
        what = "did not answer in time" if timed_out else "failed"
        super().__init__(f"the user directory {source} {what}: {reason} (temporary: "
                         "nothing was decided from it; try again once it answers)")


class DirectoryInvalid(DirectoryError):
    """The directory's content is malformed: a passwd-file line that cannot be read, named
    by file and line number (never by its content, which holds a password hash)."""


def groups_of(directory: Directory, name: str) -> frozenset[str]:
    """The groups of user ``name`` (none for a user the directory does not know).
    ``DirectoryUnavailable`` if the directory does not answer."""
    user = directory.user(name)
    return user.groups if user is not None else frozenset()
