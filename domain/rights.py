"""Rights on mailboxes (RFC 4314) and the one table of what each command needs.

A mailbox's ACL maps an identifier to a rights string. Identifiers: a user name, a group
(``$sales``), ``anyone``, ``authenticated``, each also negative (``-bob``, ``-$sales``,
``-anyone``). A caller's rights on a mailbox are the union of the rights of every positive
identifier that names it (the user, each of its groups, ``anyone``, ``authenticated``)
minus the union of the rights of every negative one (RFC 4314 section 2). The owner of an
account (the user whose name is the account's address) has every right on its mailboxes
less what the negative entries naming her take away, except ``a`` (she cannot lock herself
out).

``COMMAND_RIGHTS`` is the single table mapping each letterlog command (and query) to the
rights it needs, on which mailbox; ``docs/permissions.md`` shows it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from domain.errors import InvalidCommand
from domain.identity import ANYONE, AUTHENTICATED, canonical_identifier, canonical_name

RIGHTS = "lrswipkxtea"
"""RFC 4314's rights, in its order: lookup, read, seen, write, insert, post, create
(``k``), delete mailbox (``x``), delete messages (``t``), expunge (``e``), administer."""
RIGHT_NAMES = {
    "l": "lookup", "r": "read", "s": "seen", "w": "write", "i": "insert", "p": "post",
    "k": "create mailboxes", "x": "delete mailbox", "t": "delete messages",
    "e": "expunge", "a": "administer",
}
# RFC 2086's obsolete rights, still sent by old clients: c = k x, d = t e (RFC 4314 2.1.1)
_OBSOLETE = {"c": "kx", "d": "te"}


def parse_rights(text: str) -> frozenset[str]:
    """A rights string (``"lrs"``; ``c`` and ``d`` as RFC 4314 maps them) as a set; an
    unknown letter is ``InvalidCommand`` naming it."""
    out: set[str] = set()
    for ch in text:
        if ch in RIGHTS:
            out.add(ch)
        elif ch in _OBSOLETE:
            out.update(_OBSOLETE[ch])
        else:
            raise InvalidCommand(f"rights: {ch!r} is not a right (RFC 4314: {RIGHTS})")
    return frozenset(out)


def rights_string(rights: Iterable[str]) -> str:
    """Rights in RFC 4314's order: ``{'r', 'l'}`` -> ``"lr"``."""
    have = set(rights)
    return "".join(ch for ch in RIGHTS if ch in have)


def validate_identifier(identifier: str) -> str:
    """A user, ``$group``, ``anyone`` or ``authenticated``, optionally negative (``-``), as
    the identity rule has it (``domain.identity.canonical_identifier``: Dovecot's
    ``user=``/``group=`` mapped, any other syntax refused)."""
    ident = canonical_identifier(identifier)
    if len(ident) > 320:
        raise InvalidCommand(f"identifier: {identifier!r} is longer than 320 characters")
    return ident


def apply_change(current: str, change: str) -> str:
    """``doveadm acl``'s rights argument against the current rights: ``+lr`` adds, ``-w``
    removes, anything else replaces."""
    if change.startswith("+"):
        return rights_string(parse_rights(current) | parse_rights(change[1:]))
    if change.startswith("-"):
        return rights_string(parse_rights(current) - parse_rights(change[1:]))
    return rights_string(parse_rights(change))


@dataclass(frozen=True)
class Caller:
    """Who runs a command: the administrator (``user`` None: every right everywhere) or a
    user, with the groups the directory gave it; both named as the identity rule has them
    (``domain.identity``), so that every comparison below is exact."""

    user: str | None = None
    groups: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.user is not None:
            object.__setattr__(self, "user", canonical_name(self.user, "user"))
        object.__setattr__(self, "groups", frozenset(canonical_name(g, "group")
                                                     for g in self.groups))

    @property
    def admin(self) -> bool:
        return self.user is None

    def identifiers(self) -> tuple[str, ...]:
        """The positive identifiers naming this caller; its negatives are these with '-'."""
        if self.user is None:
            return ()
        return (self.user, *(f"${g}" for g in sorted(self.groups)), ANYONE, AUTHENTICATED)


ADMIN = Caller()


def rights_of(caller: Caller, owner: str, acl: Mapping[str, str]) -> frozenset[str]:
    """The rights ``caller`` has on a mailbox of the account ``owner`` with this ACL."""
    if caller.user is None:
        return frozenset(RIGHTS)
    owns = caller.user == owner
    if not acl:
        return frozenset(RIGHTS) if owns else frozenset()
    positive: set[str] = set(RIGHTS) if owns else set()
    negative: set[str] = set()
    for ident in caller.identifiers():
        positive.update(acl.get(ident, ""))
        negative.update(acl.get("-" + ident, ""))
    if owns:  # her negative entries count, but she keeps 'a': she can always undo them
        negative.discard("a")
    return frozenset(positive - negative)


# -- the table: command -> the rights it needs, on which mailbox ------------------------------
# "mailbox": the mailbox named, or the message's; "source" / "target": a move's or copy's;
# "parent": the mailbox above a new one (a top-level one: the account's owner only).
COMMAND_RIGHTS: dict[str, dict[str, str]] = {
    "deliver": {"mailbox": "i"},
    "begin_upload": {"mailbox": "i"},
    "append_chunk": {"mailbox": "i"},
    "complete_upload": {"mailbox": "i"},
    "extract": {"mailbox": "r"},
    "body": {"mailbox": "r"},
    "show": {"mailbox": "r"},
    "messages": {"mailbox": "r"},
    "search": {"mailbox": "r"},
    "mailbox_status": {"mailbox": "r"},
    "flag": {"mailbox": "w"},  # and "s" for \Seen, "t" for \Deleted (flag_rights)
    "label": {"mailbox": "w"},
    "set_policy": {"mailbox": "w"},
    "move": {"source": "rte", "target": "i"},  # RFC 6851: the source is selected ('r')
    "copy": {"source": "r", "target": "i"},
    "delete": {"mailbox": "t"},
    "restore": {"mailbox": "t"},
    "expunge": {"mailbox": "e"},  # and only messages marked \\Deleted (RFC 3501 EXPUNGE)
    "create_mailbox": {"parent": "k"},
    "rename_mailbox": {"mailbox": "x", "parent": "k"},
    "delete_mailbox": {"mailbox": "x"},
    "mailbox_list": {"mailbox": "l"},
    "acl_get": {"mailbox": "a"},
    "acl_set": {"mailbox": "a"},
    "acl_delete": {"mailbox": "a"},
    "my_rights": {"mailbox": "l"},
}
"""Each command a user may run and the rights it needs. Anything not here (purge, erase,
rebuild, verify, roots, the whole account's counters, ...) is the administrator's only."""


def flag_rights(flags: Iterable[str]) -> str:
    """What changing these flags needs (RFC 4314 STORE): ``s`` for \\Seen, ``t`` for
    \\Deleted, ``w`` for every other flag or keyword."""
    need = set()
    for flag in flags:
        need.add({"\\seen": "s", "\\deleted": "t"}.get(flag.lower(), "w"))
    return rights_string(need)


def kept_on_arrival(flags: Iterable[str], labels: Iterable[str], rights: Iterable[str]
                    ) -> tuple[list[str], list[str]]:
    """The flags and labels a message put into a mailbox (a delivery, an upload, a copy)
    keeps with these rights on it (RFC 4314 section 4, APPEND and COPY): ``\\Seen`` with
    ``s``, ``\\Deleted`` with ``t``, any other flag or keyword, and labels, with ``w``; the
    rest are dropped, as Dovecot drops them."""
    have = set(rights)
    kept = [f for f in flags if flag_rights([f]) in have]
    return kept, (list(labels) if "w" in have else [])


def missing(needed: str, have: frozenset[str]) -> str:
    """The rights of ``needed`` not in ``have``, as a string ("" when none is missing)."""
    return "".join(ch for ch in needed if ch not in have)
