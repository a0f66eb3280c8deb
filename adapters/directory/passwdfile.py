"""Users and groups from a passwd-file in Dovecot's format.

One user per line: ``user:password:uid:gid:gecos:home:shell:extra_fields``. Only ``user`` is
required; the fields after it may be left out or empty. ``extra_fields`` (everything after
the seventh ``:``) is a space-separated list of ``key=value`` (or bare ``key``) fields, as
Dovecot reads them. Empty lines and lines starting with ``#`` are skipped.

Groups are Dovecot's ACL groups: ``userdb_acl_groups=sales,support`` among the extra
fields (``acl_groups=`` is read too), a comma-separated list of group names, as Dovecot's
ACL plugin takes them from its userdb. A user without that field belongs to no group.

A line that cannot be read raises ``DirectoryInvalid`` naming the file, the line number and
(when there is one) the user, never the line itself (it holds a password hash); so does a
user named twice. The file is read again on every question, so an edit counts at once.
"""

from __future__ import annotations

import re
from pathlib import Path

from domain.directory import DirectoryInvalid, DirectoryUnavailable, DirectoryUser

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
            groups.update(names)
    return DirectoryUser(name, frozenset(groups))


def parse(text: str, source: str = "<passwd-file>") -> list[DirectoryUser]:
    """Every user of a passwd-file's text, in name order."""
    seen: dict[str, int] = {}
    users: list[DirectoryUser] = []
    for number, line in enumerate(text.splitlines(), start=1):
        user = parse_line(line, f"{source}:{number}")
        if user is None:
            continue
        if user.name in seen:
            raise DirectoryInvalid(f"{source}:{number}: user {user.name!r} is named again "
                                   f"(first on line {seen[user.name]})")
        seen[user.name] = number
        users.append(user)
    return sorted(users)


class PasswdFileDirectory:
    """The users of a passwd-file. ``missing_is_empty``: a file that does not exist is a
    directory of no users (the default file of a store nobody has given users yet);
    otherwise it is ``DirectoryUnavailable``."""

    def __init__(self, path: str | Path, *, missing_is_empty: bool = False) -> None:
        self.path = Path(path)
        self.missing_is_empty = missing_is_empty

    @property
    def source(self) -> str:
        return f"passwd-file {self.path}"

    def _read(self) -> str:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            if self.missing_is_empty:
                return ""
            raise DirectoryUnavailable(self.source, "no such file") from None
        except OSError as error:
            raise DirectoryUnavailable(self.source, error.strerror or str(error)) from None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as error:
            number = raw[:error.start].count(b"\n") + 1
            raise DirectoryInvalid(f"{self.path}:{number}: not UTF-8") from None

    def users(self) -> list[DirectoryUser]:
        return parse(self._read(), str(self.path))

    def user(self, name: str) -> DirectoryUser | None:
        return next((u for u in self.users() if u.name == name), None)
