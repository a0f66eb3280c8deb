"""APPEND, MULTIAPPEND (RFC 3502, all or none) and CATENATE (RFC 4469)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import unquote

from adapters.imap import mime
from adapters.imap.session.core import SessionCore
from adapters.imap.session.words import (
    _compact,
    _flag_name,
    _mailbox_name,
    _pattern_name,
    _quoted_code,
    _text,
    log,
)
from adapters.imap.wire import MONTHS, Atom, BadCommand, No, String, Token
from domain.errors import PermissionDenied, QuotaExceeded

_DATE_TIME = re.compile(r"^\s?(\d{1,2})-([A-Za-z]{3})-(\d{4}) (\d\d):(\d\d):(\d\d) "
                        r"([+-])(\d\d)(\d\d)$")


def parse_date_time(text: str) -> datetime:
    m = _DATE_TIME.match(text)
    if not m or m.group(2).title() not in MONTHS:
        raise BadCommand(f"invalid date-time {text!r}")
    off = (int(m.group(8)) * 60 + int(m.group(9))) * (-1 if m.group(7) == "-" else 1)
    return datetime(int(m.group(3)), MONTHS.index(m.group(2).title()) + 1, int(m.group(1)),
                    int(m.group(4)), int(m.group(5)), int(m.group(6)),
                    tzinfo=timezone(timedelta(minutes=off)))


class AppendCommands(SessionCore):
    async def cmd_append(self, tag: str, args: list[Token]) -> str:
        """APPEND, and MULTIAPPEND (RFC 3502: several messages, each with its flags and
        date; all of them or none: ``_append_all``)."""
        if len(args) < 2:
            raise BadCommand("APPEND takes a mailbox and a message")
        path = _mailbox_name(args[0])
        rest = args[1:]
        messages: list[dict[str, Any]] = []
        while rest:
            flags: list[str] = []
            fields: dict[str, Any] = {}
            if isinstance(rest[0], list):
                flags = [_text(f) for f in rest[0]]
                rest = rest[1:]
            if len(rest) > 1 and isinstance(rest[0], String) and not rest[0].literal:
                fields["internal_date"] = parse_date_time(rest[0].text())
                rest = rest[1:]
            if any(f.lower() == "\\recent" for f in flags):
                raise BadCommand("\\Recent cannot be set")
            if len(rest) > 1 and isinstance(rest[0], Atom) and rest[0].upper() == "CATENATE" \
                    and isinstance(rest[1], list):
                pieces: Any = rest[1]  # CATENATE (RFC 4469): read once the command is whole
                rest = rest[2:]
            elif rest and isinstance(rest[0], String):
                pieces = rest[0]
                rest = rest[1:]
            else:
                raise BadCommand("APPEND needs each message as a literal")
            messages.append({**fields, "raw": pieces, "flags": [_flag_name(f) for f in flags]})
        account, name = self.resolve(path)
        try:  # a missing target is TRYCREATE before any CATENATE part is read
            await self.call(self.face.my_rights, account, name)
        except No as no:
            if no.code == "NONEXISTENT":
                no.code = "TRYCREATE"
            raise
        for fields in messages:
            fields["raw"] = await self._catenated(fields["raw"])
        delivered = await self._append_all(account, name, messages)
        await self.report()
        uids = {d.uid for d in delivered}
        sel = self.selected
        if sel is not None and (sel.account, sel.name) == (account, name):
            await self.settle(lambda s: uids <= set(s.entries))
        return (f"[APPENDUID {delivered[0].uidvalidity} "
                f"{_compact(sorted(uids))}] APPEND completed")

    async def _append_all(self, account: str, name: str, messages: list[dict[str, Any]]
                          ) -> list[Any]:
        """Delivers ``messages`` into the mailbox, all or none (RFC 3502): every message's
        fields are checked and the account's quota is checked for all of them together
        before the first is delivered; a delivery that still fails (a quota another
        session used up meanwhile, an outage) takes the ones before it out again (\\Deleted
        and expunged, as the user: it needs 't' and 'e' where the target is shared, and
        without them the answer says what was left)."""
        def check() -> None:
            for fields in messages:
                self.face.check_delivery(account=account, mailbox=name,
                                         **{k: v for k, v in fields.items() if k != "raw"})
            if len(messages) < 2:
                return
            try:
                quota = self.face.quota(account)
            except PermissionDenied:
                return  # another account's quota: each delivery checks it
            size = sum(len(f["raw"]) for f in messages)
            for resource, adding in (("bytes", size), ("messages", len(messages))):
                limit, used = quota[resource]["limit"], quota[resource]["used"]
                if limit > 0 and used + adding > limit:
                    raise QuotaExceeded(account, resource, limit, used, adding)

        try:
            await self.call(check)
        except No as no:
            if no.code == "NONEXISTENT":
                no.code = "TRYCREATE"
            raise
        delivered: list[Any] = []
        for fields in messages:
            try:
                delivered.append(await self.call(self.face.deliver, account=account,
                                                 mailbox=name, **fields))
            except No as no:
                if no.code == "NONEXISTENT":
                    no.code = "TRYCREATE"
                if delivered:
                    await self._take_back(delivered, no)
                raise
        return delivered

    async def _take_back(self, delivered: list[Any], failure: No) -> None:
        """A MULTIAPPEND that failed part way: the messages it delivered are expunged."""
        ids = [d.message_id for d in delivered]
        try:
            for message_id in ids:
                await self.call(self.face.flag, message_id, ["\\Deleted"], "add")
            await self.call(self.face.expunge, ids)
        except No as no:
            log.error("imap: MULTIAPPEND of %s failed after %d messages and they could not "
                      "be taken back: %s", self.user, len(ids), no)
            failure.args = (f"{failure}; the first {len(ids)} messages were delivered and "
                            f"could not be taken back ({no})",)

    async def _catenated(self, pieces: String | list[Token]) -> bytes:
        """A message given as a literal, or as CATENATE's TEXT literals and URLs of parts
        of messages the user may read (RFC 4469 with RFC 5092 URLs of this server)."""
        if isinstance(pieces, String):
            raw = pieces.value
            # literal8: binary parts are kept as base64 (RFC 3516 4.2)
            return mime.binary_parts_as_base64(raw) if pieces.binary else raw
        out = b""
        i = 0
        while i < len(pieces):
            kind = _text(pieces[i]).upper() if isinstance(pieces[i], Atom) else ""
            value = pieces[i + 1] if i + 1 < len(pieces) else None
            if kind not in ("TEXT", "URL") or not isinstance(value, String):
                raise BadCommand("CATENATE takes TEXT literal and URL \"url\" parts")
            if kind == "TEXT":
                if not value.literal:
                    raise BadCommand("CATENATE's TEXT is a literal")
                out += value.value
            else:
                out += await self._url_part(value.text())
            i += 2
        return out

    async def _url_part(self, url: str) -> bytes:
        """``/mailbox[;UIDVALIDITY=n]/;UID=n[/;SECTION=s][/;PARTIAL=o[.l]]``, read as the
        user reads it (rights and policy as FETCH)."""
        m = re.match(r"^/([^;/][^;]*?|[^;]*?)(?:;UIDVALIDITY=(\d+))?/;UID=(\d+)"
                     r"(?:/;SECTION=([^/]*))?(?:/;PARTIAL=(\d+)(?:\.(\d+))?)?$", url, re.I)
        if not m:
            raise No(f"cannot use the URL {url!r}", "BADURL " + _quoted_code(url))
        account, name = self.resolve(_pattern_name(Atom(unquote(m.group(1)))))
        try:
            status, _ = await self.call(self._open, account, name)
            if m.group(2) and int(m.group(2)) != status["uidvalidity"]:
                raise No("UIDVALIDITY differs", "")
            raw = b"".join(await self.call(
                lambda: list(self.face.body(account, name, int(m.group(3))))))
        except No:
            raise No(f"cannot use the URL {url!r}", "BADURL " + _quoted_code(url)) from None
        part = mime.parse(raw)
        data = mime.section(part, m.group(4) or "") if m.group(4) else raw
        if data is None:
            raise No(f"no such section in {url!r}", "BADURL " + _quoted_code(url))
        if m.group(5) is not None:
            start = int(m.group(5))
            data = data[start:start + int(m.group(6))] if m.group(6) else data[start:]
        return data
