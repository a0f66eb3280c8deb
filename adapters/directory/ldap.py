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
"""

from __future__ import annotations

import contextlib
import math
import re
from typing import Any

from domain.directory import DirectoryUnavailable, DirectoryUser

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

    @property
    def source(self) -> str:
        return f"{self.url} ({self.base_dn})"

    # -- the port ---------------------------------------------------------------------------
    def users(self) -> list[DirectoryUser]:
        def ask(conn: Any) -> list[DirectoryUser]:
            people = self._search(conn, self.base_dn, USER_FILTER, ["uid"])
            names = {normal_dn(e["dn"]): _values(e, "uid") for e in people}
            groups: dict[str, set[str]] = {}
            for group in self._search(conn, self.group_base_dn, GROUP_FILTER,
                                      ["cn", "member", "memberUid"]):
                for cn in _values(group, "cn")[:1]:
                    for member in _values(group, "member"):
                        for name in names.get(normal_dn(member), []):
                            groups.setdefault(name, set()).add(cn)
                    for name in _values(group, "memberUid"):
                        groups.setdefault(name, set()).add(cn)
            return sorted({DirectoryUser(name, frozenset(groups.get(name, ())))
                           for uids in names.values() for name in uids})

        return self._asking(ask)

    def user(self, name: str) -> DirectoryUser | None:
        from ldap3.utils.conv import escape_filter_chars

        def ask(conn: Any) -> DirectoryUser | None:
            uid = escape_filter_chars(name)
            found = self._search(conn, self.base_dn, f"(uid={uid})", ["uid"])
            if not found:
                return None
            members = "".join(f"(member={escape_filter_chars(e['dn'])})" for e in found)
            wanted = (f"(|(&(objectClass=groupOfNames)(|{members}))"
                      f"(&(objectClass=posixGroup)(memberUid={uid})))")
            groups = {cn for group in self._search(conn, self.group_base_dn, wanted, ["cn"])
                      for cn in _values(group, "cn")[:1]}
            # the name as the directory spells it (uid matches without regard to case)
            stored = next((v for e in found for v in _values(e, "uid")
                           if v.casefold() == name.casefold()), name)
            return DirectoryUser(stored, frozenset(groups))

        return self._asking(ask)

    # -- talking to the server --------------------------------------------------------------
    def _asking(self, question: Any) -> Any:
        from ldap3 import NONE, Connection, Server
        from ldap3.core.exceptions import LDAPException

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
        from ldap3 import SUBTREE

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
