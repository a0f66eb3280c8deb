"""The user directory ``Settings`` name, built for the composition root: the passwd-file or
LDAP (``directory``), a user's groups (``group_resolver``), and the check of an ACL
identifier against it (``check_identifier``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from adapters.config.settings import Settings
from adapters.directory.passwdfile import PasswdFileDirectory
from domain.acl_identifiers import check_identifier as check_in
from domain.directory import Directory, groups_of


def check_identifier(settings: Settings, identifier: str) -> None:
    """An ACL identifier must name someone in the user directory (``UnknownIdentifier``);
    a store without one (its default passwd-file absent) has nobody to check against."""
    found = directory(settings)
    if getattr(found, "absent", False):
        return
    check_in(found, identifier)


def directory(settings: Settings) -> Directory:
    """The user directory of ``settings.directory``: the passwd-file (``passwd_file``,
    default ``<data>/users.passwd``, where a missing file is a directory of no users yet) or
    LDAP (``ldap_url``, users under ``ldap_base_dn``, groups under ``ldap_group_base_dn``)."""
    if settings.directory == "ldap":
        from adapters.directory.ldap import LdapDirectory  # local: ldap3, LDAP's client only

        return LdapDirectory(settings.ldap_url, settings.ldap_base_dn,
                             group_base_dn=settings.ldap_group_base_dn or None,
                             bind_dn=settings.ldap_bind_dn, password=settings.ldap_password,
                             timeout=settings.ldap_timeout)
    if settings.passwd_file is not None:
        return PasswdFileDirectory(settings.passwd_file)
    return PasswdFileDirectory(Path(settings.data) / "users.passwd", missing_is_empty=True)


def group_resolver(settings: Settings) -> Callable[[str], frozenset[str]]:
    """User name -> the names of the user's groups, asked of the directory each time (none
    for a user it does not know; ``DirectoryUnavailable`` if it does not answer)."""
    return partial(groups_of, directory(settings))
