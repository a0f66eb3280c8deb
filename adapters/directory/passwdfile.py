"""Users and groups from a passwd-file in Dovecot's format.

One user per line: ``user:password:uid:gid:gecos:home:shell:extra_fields``. Only ``user`` is
required; the fields after it may be left out or empty. ``extra_fields`` (everything after
the seventh ``:``) is a space-separated list of ``key=value`` (or bare ``key``) fields, as
Dovecot reads them. Empty lines and lines starting with ``#`` are skipped.

Groups are Dovecot's ACL groups: ``userdb_acl_groups=sales,support`` among the extra
fields (``acl_groups=`` is read too), a comma-separated list of group names, as Dovecot's
ACL plugin takes them from its userdb. A user without that field belongs to no group.

A line that cannot be read (a malformed field, bytes that are not UTF-8, a user or group
name the identity rule of ``domain.identity`` refuses) is **skipped**, as Dovecot skips
it, with a warning naming the file, the line number and (when there is one) the user, never
the line itself (it holds a password hash); ``skipped()`` lists them. A user named on two
lines (after the rule: ``Ada`` and ``ada`` are one user) is ambiguous: both lines are
skipped. Asking for a user whose line was skipped is ``DirectoryInvalid`` naming the line,
so that a user whose groups are unknown never acts with fewer groups (a negative entry on a
group must still hold); every other user is answered. The file is read again on every
question, so an edit counts at once.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from adapters.directory.passwords import verify
from domain.directory import DirectoryInvalid, DirectoryUnavailable, DirectoryUser, SkippedEntry
from domain.identity import NameRefused, canonical_name

log = logging.getLogger("letterlog.directory")

GROUP_FIELDS = ("userdb_acl_groups", "acl_groups")
_BAD_NAME = re.compile(r"[\s\x00-\x1f\x7f,]")
_KEY = re.compile(r"^[A-Za-z0-9_.-]+$")


def parse_line(text: str, where: str) -> DirectoryUser | None:
    """The user a line names (None for a blank or comment line); ``where`` (``file:line``)
    goes into the error."""
    if not text.strip() or text.lstrip().startswith("#"):
        return None
    fields = text.split(":", 7)
    name = fields[0]
    if len(fields) < 2:
        raise DirectoryInvalid(f"{where}: not user:password:uid:gid:gecos:home:shell:"
                               "extra_fields (no ':' in the line)")
    if not name or name != name.strip() or _BAD_NAME.search(name):
        raise DirectoryInvalid(f"{where}: the user name is empty or holds a space, comma "
                               "or control character")
    try:
        name = canonical_name(name, "user")
    except NameRefused as refused:
        raise DirectoryInvalid(f"{where}: the user name is refused: {refused.problem}"
                               ) from None
    for index, label in ((2, "uid"), (3, "gid")):
        if len(fields) > index and fields[index] and not fields[index].isdigit():
            raise DirectoryInvalid(f"{where}: user {name!r}: {label} {fields[index]!r} is "
                                   "not a number")
    groups: set[str] = set()
    extra = fields[7] if len(fields) == 8 else ""
    for field in extra.split():
        key, _, value = field.partition("=")
        if not _KEY.match(key):
            raise DirectoryInvalid(f"{where}: user {name!r}: extra field {field!r} is not "
                                   "key=value")
        if key in GROUP_FIELDS:
            names = value.split(",")
            if any(not g or _BAD_NAME.search(g) for g in names):
                raise DirectoryInvalid(f"{where}: user {name!r}: {key}={value!r} is not a "
                                       "comma-separated list of group names")
            try:
                groups.update(canonical_name(g, "group") for g in names)
            except NameRefused as refused:
                raise DirectoryInvalid(f"{where}: user {name!r}: {refused}") from None
    return DirectoryUser(name, frozenset(groups))


def _name_of(text: str) -> str | None:
    """The user a line names, as the rule has it, when at least that can be read."""
    try:
        return canonical_name(text.split(":", 1)[0], "user")
    except NameRefused:
        return None


def read(text: str | bytes, source: str = "<passwd-file>"
         ) -> tuple[list[DirectoryUser], list[SkippedEntry]]:
    """The users of a passwd-file's text, in name order, and the lines skipped (each
    named by ``source:number`` and why)."""
    lines = text.splitlines() if isinstance(text, str) else text.split(b"\n")
    found: dict[str, list[tuple[int, DirectoryUser]]] = {}
    skipped: list[SkippedEntry] = []
    for number, raw in enumerate(lines, start=1):
        where = f"{source}:{number}"
        if isinstance(raw, bytes):
            try:
                line = raw.decode("utf-8").removesuffix("\r")
            except UnicodeDecodeError:
                skipped.append(SkippedEntry(where, f"{where}: not UTF-8"))
                continue
        else:
            line = str(raw)  # a line of a str's splitlines()
        try:
            user = parse_line(line, where)
        except DirectoryInvalid as error:
            skipped.append(SkippedEntry(where, str(error), _name_of(line)))
            continue
        if user is not None:
            found.setdefault(user.name, []).append((number, user))
    users: list[DirectoryUser] = []
    for name, entries in found.items():
        if len(entries) == 1:
            users.append(entries[0][1])
            continue
        numbers = ", ".join(str(n) for n, _ in entries)
        skipped += [SkippedEntry(f"{source}:{n}", f"{source}:{n}: user {name!r} is named on "
                                 f"lines {numbers} (after the identity rule): ambiguous, "
                                 "every one skipped", name) for n, _ in entries]
    # a user whose other line was skipped is as ambiguous as one named twice
    broken = {e.name for e in skipped if e.name is not None}
    return sorted(u for u in users if u.name not in broken), sorted(skipped)


def parse(text: str, source: str = "<passwd-file>") -> list[DirectoryUser]:
    """Every readable user of a passwd-file's text, in name order (``read`` also gives the
    lines skipped)."""
    return read(text, source)[0]


class PasswdFileDirectory:
    """The users of a passwd-file. ``missing_is_empty``: a file that does not exist is a
    directory of no users (the default file of a store nobody has given users yet);
    otherwise it is ``DirectoryUnavailable``."""

    def __init__(self, path: str | Path, *, missing_is_empty: bool = False) -> None:
        self.path = Path(path)
        self.missing_is_empty = missing_is_empty
        self._skipped: list[SkippedEntry] = []

    @property
    def absent(self) -> bool:
        """The store's default file, not made yet: a store that does not use users."""
        return self.missing_is_empty and not self.path.exists()

    @property
    def source(self) -> str:
        return f"passwd-file {self.path}"

    def _read(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            if self.missing_is_empty:
                return b""
            raise DirectoryUnavailable(self.source, "no such file") from None
        except OSError as error:
            raise DirectoryUnavailable(self.source, error.strerror or str(error)) from None

    def _answer(self) -> list[DirectoryUser]:
        users, skipped = read(self._read(), str(self.path))
        if skipped != self._skipped:
            for entry in skipped:
                log.warning("user directory: skipped %s", entry.reason)
        self._skipped = skipped
        return users

    def skipped(self) -> list[SkippedEntry]:
        return list(self._skipped)

    def users(self) -> list[DirectoryUser]:
        return self._answer()

    def user(self, name: str) -> DirectoryUser | None:
        try:
            wanted = canonical_name(name, "user")
        except NameRefused:
            return None
        users = self._answer()
        for entry in self._skipped:
            if entry.name == wanted:
                raise DirectoryInvalid(f"{entry.reason} (the user's groups are unknown "
                                       "until the line is mended)")
        return next((u for u in users if u.name == wanted), None)

    def authenticate(self, name: str, password: str) -> DirectoryUser | None:
        """The user ``name`` if ``password`` matches its line's password field (Dovecot's
        ``{SCHEME}value``: ``adapters.directory.passwords``), else None."""
        found = self.user(name)
        if found is None:
            return None
        for number, line in enumerate(self._read().decode("utf-8", "replace").splitlines(), 1):
            if _name_of(line) is None:
                continue
            try:
                parsed = parse_line(line, f"{self.path}:{number}")
            except DirectoryInvalid:
                continue
            if parsed is not None and parsed.name == found.name:
                fields = line.split(":", 2)
                return found if len(fields) > 1 and verify(fields[1], password) else None
        return None

