"""The user directory ``Settings`` name, built for the composition root: the passwd-file or
LDAP (``directory``), a user's groups (``group_resolver``), and the two uses a store makes of
it (a caller's groups, an ACL identifier's check)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.config.settings import Settings

if TYPE_CHECKING:
    from domain.directory import Directory


def _groups(settings: Settings) -> Callable[[str], frozenset[str]]:
    """A caller's groups, from the user directory built on first use."""
    return lambda user: group_resolver(settings)(user)


def _check_identifier(settings: Settings, identifier: str) -> None:
    """An ACL identifier must name someone in the user directory (``UnknownIdentifier``);
    a store without one (its default passwd-file absent) has nobody to check against."""
    # local: start-up: 1 more module(s) for commands that never use it
    from domain.acl_identifiers import check_identifier

    found = directory(settings)
    if getattr(found, "absent", False):
        return
    check_identifier(found, identifier)


def directory(settings: Settings) -> Directory:
    """The user directory of ``settings.directory``: the passwd-file (``passwd_file``,
    default ``<data>/users.passwd``, where a missing file is a directory of no users yet) or
    LDAP (``ldap_url``, users under ``ldap_base_dn``, groups under ``ldap_group_base_dn``)."""
    if settings.directory == "ldap":
        # local: start-up: 3 more module(s) for commands that never use it
        from adapters.directory.ldap import LdapDirectory

        return LdapDirectory(settings.ldap_url, settings.ldap_base_dn,
                             group_base_dn=settings.ldap_group_base_dn or None,
                             bind_dn=settings.ldap_bind_dn, password=settings.ldap_password,
                             timeout=settings.ldap_timeout)
    # local: start-up: 3 more module(s) for commands that never use it
    from adapters.directory.passwdfile import PasswdFileDirectory

    if settings.passwd_file is not None:
        return PasswdFileDirectory(settings.passwd_file)
    return PasswdFileDirectory(Path(settings.data) / "users.passwd", missing_is_empty=True)


def group_resolver(settings: Settings) -> Callable[[str], frozenset[str]]:
    """User name -> the names of the user's groups, asked of the directory each time (none
    for a user it does not know; ``DirectoryUnavailable`` if it does not answer)."""
    # local: start-up: 1 more module(s) for commands that never use it
    from domain.directory import groups_of

    return partial(groups_of, directory(settings))
