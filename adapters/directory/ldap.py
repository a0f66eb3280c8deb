"""Users and groups from an LDAP server (OpenLDAP, or any LDAPv3 server), read with ldap3.

Users are the entries under ``base_dn`` (the whole subtree) that have a ``uid`` attribute;
each ``uid`` value is a user name. Groups are the entries under ``group_base_dn`` (default
``base_dn``) of object class ``groupOfNames`` (members by DN in ``member``, matched against
the users' DNs) or ``posixGroup`` (members by name in ``memberUid``); a group is named by
its ``cn``. Both kinds may live side by side.

Every question opens a connection, binds (as ``bind_dn``, or anonymously when it is empty),
searches with paged results (no server size limit cuts an answer short) and unbinds. A
refused connection, a failed bind, a missing base DN, a size or time limit, or no answer
within ``timeout`` seconds raise ``DirectoryUnavailable``: never a partial list of users.

Names (``uid``, a group's ``cn``) are answered as the identity rule of ``domain.identity``
has them. An entry whose name the rule refuses is skipped (``skipped()``, a warning naming
its DN); two entries whose uids the rule makes one name are ambiguous: neither is answered,
and asking for that user is ``DirectoryInvalid``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from typing import Any

from ldap3 import NONE, SUBTREE, Connection, Server
from ldap3.core.exceptions import LDAPBindError, LDAPException, LDAPInvalidCredentialsResult
from ldap3.utils.conv import escape_filter_chars

from domain.directory import (
    DirectoryInvalid,
    DirectoryUnavailable,
    DirectoryUser,
    SkippedEntry,
)
from domain.identity import NameRefused, canonical_name

log = logging.getLogger("letterlog.directory")

USER_FILTER = "(uid=*)"
GROUP_FILTER = "(|(objectClass=groupOfNames)(objectClass=posixGroup))"
PAGE = 500


def normal_dn(dn: str) -> str:
    """A DN compared as LDAP compares the usual ones: case and spaces around , = + ignored."""
    return re.sub(r"\s*([,=+])\s*", r"\1", dn.strip()).lower()


class LdapDirectory:
    """The users under ``base_dn`` of the server at ``url`` (``ldap://host:port``)."""

    def __init__(self, url: str, base_dn: str, *, group_base_dn: str | None = None,
                 bind_dn: str | None = None, password: str | None = None,
                 timeout: float = 10.0) -> None:
        self.url = url
        self.base_dn = base_dn
        self.group_base_dn = group_base_dn or base_dn
        self.bind_dn = bind_dn or None
        self.password = password or None
        self.timeout = timeout
        self._skipped: list[SkippedEntry] = []

    @property
    def source(self) -> str:
        return f"{self.url} ({self.base_dn})"

    # -- the port ---------------------------------------------------------------------------
    def users(self) -> list[DirectoryUser]:
        def ask(conn: Any) -> list[DirectoryUser]:
            skipped: list[SkippedEntry] = []
            people = self._search(conn, self.base_dn, USER_FILTER, ["uid"])
            names = {normal_dn(e["dn"]): self._names(e, skipped) for e in people}
            owners: dict[str, set[str]] = {}  # canonical name -> the DNs naming it
            for dn, uids in names.items():
                for name in uids:
                    owners.setdefault(name, set()).add(dn)
            ambiguous = {name for name, dns in owners.items() if len(dns) > 1}
            skipped += [SkippedEntry(dn, f"{dn}: uid {name!r} is also another entry's "
                                     f"({len(owners[name])} entries, after the identity "
                                     "rule): ambiguous, every one skipped", name)
                        for name in sorted(ambiguous) for dn in sorted(owners[name])]
            groups: dict[str, set[str]] = {}
            for group in self._search(conn, self.group_base_dn, GROUP_FILTER,
                                      ["cn", "member", "memberUid"]):
                for cn in self._group_names(group, skipped)[:1]:
                    for member in _values(group, "member"):
                        for name in names.get(normal_dn(member), []):
                            groups.setdefault(name, set()).add(cn)
                    for name in _values(group, "memberUid"):
                        with contextlib.suppress(NameRefused):
                            groups.setdefault(canonical_name(name), set()).add(cn)
            self._note(skipped)
            return sorted({DirectoryUser(name, frozenset(groups.get(name, ())))
                           for uids in names.values() for name in uids
                           if name not in ambiguous})

        users: list[DirectoryUser] = self._asking(ask)
        return users

    def user(self, name: str) -> DirectoryUser | None:
        try:
            wanted = canonical_name(name, "user")
        except NameRefused:
            return None

        def ask(conn: Any) -> DirectoryUser | None:
            uid = escape_filter_chars(wanted)
            skipped: list[SkippedEntry] = []
            # uid matches without regard to case on the server; the rule decides here
            found = [e for e in self._search(conn, self.base_dn, f"(uid={uid})", ["uid"])
                     if wanted in self._names(e, skipped)]
            if len({normal_dn(e["dn"]) for e in found}) > 1:
                raise DirectoryInvalid(
                    f"{self.source}: uid {wanted!r} names {len(found)} entries (after the "
                    "identity rule): ambiguous, the user's groups are unknown")
            if not found:
                return None
            members = "".join(f"(member={escape_filter_chars(e['dn'])})" for e in found)
            wanted_groups = (f"(|(&(objectClass=groupOfNames)(|{members}))"
                             f"(&(objectClass=posixGroup)(memberUid={uid})))")
            groups = {cn for group in self._search(conn, self.group_base_dn, wanted_groups,
                                                   ["cn"])
                      for cn in self._group_names(group, skipped)[:1]}
            return DirectoryUser(wanted, frozenset(groups))

        user: DirectoryUser | None = self._asking(ask)
        return user

    def authenticate(self, name: str, password: str) -> DirectoryUser | None:
        """The user ``name`` if the server accepts a bind as its entry's DN with
        ``password`` (a simple bind: the server checks the password), else None."""
        found = self.user(name)
        if found is None or not password:
            return None
        uid = escape_filter_chars(found.name)
        entries = self._asking(lambda conn: self._search(conn, self.base_dn, f"(uid={uid})",
                                                         ["uid"]))
        dns = [e["dn"] for e in entries if found.name in self._names(e, [])]
        if len(dns) != 1:
            return None
        seconds = max(1, math.ceil(self.timeout))
        conn = Connection(Server(self.url, connect_timeout=seconds, get_info=NONE),
                          user=dns[0], password=password, receive_timeout=seconds,
                          raise_exceptions=True, read_only=True)
        try:
            conn.open()
            conn.bind()
            return found
        except (LDAPBindError, LDAPInvalidCredentialsResult):
            return None
        except LDAPException as error:
            raise self._unavailable(error) from None
        except OSError as error:
            raise DirectoryUnavailable(self.source, str(error),
                                       timed_out=isinstance(error, TimeoutError)) from None
        finally:
            with contextlib.suppress(Exception):
                conn.unbind()

    def skipped(self) -> list[SkippedEntry]:
        return list(self._skipped)

    def _note(self, skipped: list[SkippedEntry]) -> None:
        if sorted(skipped) != self._skipped:
            for entry in skipped:
                log.warning("user directory: skipped %s", entry.reason)
        self._skipped = sorted(skipped)

    @staticmethod
    def _names(entry: dict[str, Any], skipped: list[SkippedEntry]) -> list[str]:
        """An entry's uids as the identity rule has them; one it refuses is skipped."""
        out = []
        for value in _values(entry, "uid"):
            try:
                out.append(canonical_name(value, "user"))
            except NameRefused as refused:
                skipped.append(SkippedEntry(entry["dn"], f"{entry['dn']}: {refused}"))
        return sorted(set(out))

    @staticmethod
    def _group_names(entry: dict[str, Any], skipped: list[SkippedEntry]) -> list[str]:
        out = []
        for value in _values(entry, "cn"):
            try:
                out.append(canonical_name(value, "group"))
            except NameRefused as refused:
                skipped.append(SkippedEntry(entry["dn"], f"{entry['dn']}: {refused}"))
        return out

    # -- talking to the server --------------------------------------------------------------
    def _asking(self, question: Any) -> Any:
        seconds = max(1, math.ceil(self.timeout))  # ldap3 sets the socket's in whole seconds
        server = Server(self.url, connect_timeout=seconds, get_info=NONE)
        conn = Connection(server, user=self.bind_dn, password=self.password,
                          receive_timeout=seconds, raise_exceptions=True, read_only=True)
        try:
            conn.open()
            conn.bind()
            return question(conn)
        except LDAPException as error:
            raise self._unavailable(error) from None
        except OSError as error:  # a socket error ldap3 did not wrap
            raise DirectoryUnavailable(self.source, str(error),
                                       timed_out=isinstance(error, TimeoutError)) from None
        finally:
            with contextlib.suppress(Exception):  # closing a broken connection
                conn.unbind()

    def _search(self, conn: Any, base: str, query: str,
                attributes: list[str]) -> list[dict[str, Any]]:
        found = conn.extend.standard.paged_search(
            base, query, search_scope=SUBTREE, attributes=attributes, paged_size=PAGE,
            time_limit=max(1, int(self.timeout)), generator=False)
        return [e for e in found if e.get("type") == "searchResEntry"]

    def _unavailable(self, error: Exception) -> DirectoryUnavailable:
        text = str(error) or type(error).__name__
        timed_out = "timed out" in text.lower() or "timeout" in type(error).__name__.lower()
        return DirectoryUnavailable(self.source, f"{type(error).__name__}: {text}",
                                    timed_out=timed_out)


def _values(entry: dict[str, Any], attribute: str) -> list[str]:
    """An attribute's values as strings (ldap3 gives a list, or one value)."""
    raw = entry.get("attributes", {}).get(attribute, [])
    values = raw if isinstance(raw, list) else [raw]
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values if v not in ("", b"")]
