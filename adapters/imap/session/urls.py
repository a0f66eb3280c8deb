"""URLAUTH (RFC 4467, RFC 5524): GENURLAUTH, RESETKEY and URLFETCH, the URLs signed and
checked by ``adapters/imap/urlauth.py``."""

from __future__ import annotations

from adapters.imap import mime, urlauth
from adapters.imap.session.core import SessionCore
from adapters.imap.session.words import _mailbox_name, _quoted_code, _text
from adapters.imap.wire import BadCommand, No, Token, astring_out, literal
from domain.errors import LetterlogError


class UrlCommands(SessionCore):
    async def cmd_genurlauth(self, tag: str, args: list[Token]) -> str:
        """GENURLAUTH url INTERNAL ...: each URL (of the user's, naming a message it may
        read) signed with its mailbox's key (adapters/imap/urlauth.py)."""
        if not args or len(args) % 2:
            raise BadCommand("GENURLAUTH takes pairs of a URL and a mechanism")
        signed: list[bytes] = []
        for i in range(0, len(args), 2):
            text, mechanism = _text(args[i]), _text(args[i + 1]).upper()
            if mechanism != urlauth.MECHANISM:
                raise No(f"unknown URLAUTH mechanism {mechanism}", "CANNOT")
            try:
                url = urlauth.parse(text)
            except urlauth.BadUrl as e:
                raise No(str(e), "BADURL " + _quoted_code(text)) from None
            if url.token is not None or not url.owned_by(self.face.user):
                raise No(f"cannot authorize the URL {text!r}", "BADURL " + _quoted_code(text))
            account, name = self.resolve(url.mailbox_name)
            status, rights = await self.call(self._open, account, name)
            if "r" not in rights or url.uidvalidity not in (None, status["uidvalidity"]):
                raise No(f"cannot authorize the URL {text!r}", "BADURL " + _quoted_code(text))
            key = (self.face.user, account, name, int(status["uidvalidity"]))
            signed.append(astring_out(await self.call(self.server.url_keys.sign, key, url)))
        await self.untagged(b"GENURLAUTH " + b" ".join(signed))
        return "GENURLAUTH completed"

    async def cmd_resetkey(self, tag: str, args: list[Token]) -> str:
        """RESETKEY [mailbox [mechanism ...]]: the user's URLs of the mailbox (of every
        mailbox without one) stop working."""
        if any(_text(a).upper() != urlauth.MECHANISM for a in args[1:]):
            raise No("unknown URLAUTH mechanism", "CANNOT")
        mailbox = None
        if args:
            account, name = self.resolve(_mailbox_name(args[0]))
            await self.call(self._open, account, name)  # NONEXISTENT unless it is there
            mailbox = (account, name)
        await self.call(self.server.url_keys.reset, self.face.user, mailbox)
        return "RESETKEY completed"

    async def cmd_urlfetch(self, tag: str, args: list[Token]) -> str:
        """URLFETCH url ... (RFC 4467), or (url [BODY] [BINARY] [BODYPARTSTRUCTURE]) ...
        (RFC 5524): each URL's data read as its owner, NIL where the URL is not valid,
        not the user's to fetch, or its message gone."""
        if not args:
            raise BadCommand("URLFETCH needs a URL")
        out = b"URLFETCH"
        for arg in args:
            modifiers: list[str] = []
            if isinstance(arg, list):
                if not arg or isinstance(arg[0], list):
                    raise BadCommand("URLFETCH: expected (url modifiers...)")
                text = _text(arg[0])
                modifiers = [_text(m).upper() for m in arg[1:]]
                if set(modifiers) - {"BODY", "BINARY", "BODYPARTSTRUCTURE"} or \
                        {"BODY", "BINARY"} <= set(modifiers):
                    raise BadCommand(f"unknown URLFETCH modifiers {modifiers}")
            else:
                text = _text(arg)
            found = await self.call(self._url_fetch, text, modifiers)
            out += b" " + astring_out(text) + b" "
            if found is None:
                out += b"NIL"
            elif not isinstance(arg, list):
                out += literal(found[0])
            else:
                data, structure = found
                items = []
                if "BODYPARTSTRUCTURE" in modifiers:
                    items.append(b"BODYPARTSTRUCTURE " + structure)
                for kind in ("BODY", "BINARY"):
                    if kind in modifiers:
                        eight = b"~" if kind == "BINARY" and b"\0" in data else b""
                        items.append(kind.encode() + b" " + eight + literal(data))
                out += b"(" + b" ".join(items) + b")"
        await self.send(b"* " + out + b"\r\n")
        return "URLFETCH completed"

    def _url_fetch(self, text: str, modifiers: list[str]) -> tuple[bytes, bytes] | None:
        """On the store's thread: the URL's data (its section, decoded for BINARY) and its
        part's BODYSTRUCTURE, read by the URL's owner; None when it may not be fetched."""
        try:
            url = urlauth.parse(text)
        except urlauth.BadUrl:
            return None
        if url.token is None or not url.may_fetch(self.face.user):
            return None
        self.server.catch_up()
        raw = None
        for user in url.owners():
            try:
                owner = self.server.face_of(user)
                account, name = owner.resolve(url.mailbox_name)
                status = owner.mailbox_status(account, name)
                uidvalidity = int(status["uidvalidity"])
                if url.uidvalidity in (None, uidvalidity) and self.server.url_keys.verify(
                        (owner.user, account, name, uidvalidity), url):
                    raw = b"".join(owner.body(account, name, url.uid))
                    break
            except LetterlogError:
                continue
        if raw is None:
            return None
        message = mime.parse(raw)
        part = mime.part_at(message, url.section) if url.section else message
        if part is None:
            return None
        binary = "BINARY" in modifiers
        data: bytes | None
        try:
            if binary:  # leaves decoded, as Dovecot gives a message/rfc822 part
                if not url.section:
                    data = mime.binary_form(part)
                elif not part.children and part.message is None:
                    data = mime.decode_body(part)
                else:
                    data = mime.binary_body(part)
            else:
                data = mime.section(message, url.section) if url.section else raw
        except (mime.SectionError, mime.UnknownEncoding):
            return None
        if data is None:
            return None
        if url.partial is not None:
            start, length = url.partial
            data = data[start:start + length] if length is not None else data[start:]
        # with BINARY, the structure of the data sent (sizes and lines decoded)
        return data, mime.bodystructure(part, measure=mime.binary_measure if binary else None)
