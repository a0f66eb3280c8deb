"""Commands of any state (CAPABILITY, NOOP, CHECK, LOGOUT, ID), of logging in (STARTTLS,
LOGIN, AUTHENTICATE PLAIN) and of a logged-in session's settings (NAMESPACE, ENABLE)."""

from __future__ import annotations

import base64

from adapters.imap.session.core import SessionCore
from adapters.imap.session.words import ANSWERED, _text
from adapters.imap.wire import Atom, BadCommand, No, Token


class LoginCommands(SessionCore):
    async def cmd_capability(self, tag: str, args: list[Token]) -> str:
        await self.untagged(f"CAPABILITY {self.capabilities()}")
        return "CAPABILITY completed"

    async def cmd_noop(self, tag: str, args: list[Token]) -> str:
        await self.report()
        return "NOOP completed"

    async def cmd_check(self, tag: str, args: list[Token]) -> str:
        await self.report()
        return "CHECK completed"

    async def cmd_logout(self, tag: str, args: list[Token]) -> bool:
        await self.untagged("BYE logging out")
        await self.send(f"{tag} OK LOGOUT completed\r\n".encode())
        return False

    async def cmd_id(self, tag: str, args: list[Token]) -> str:
        await self.untagged('ID ("name" "letterlog")')
        return "ID completed"

    async def cmd_starttls(self, tag: str, args: list[Token]) -> str:
        if self.tls or self.server.tls_context is None:
            raise BadCommand("STARTTLS is not available")
        # what the client sent after STARTTLS in the clear is dropped, never read as
        # commands of the protected session (the STARTTLS command injection)
        self.reader._buffer.clear()  # type: ignore[attr-defined]  # noqa: SLF001
        await self.send(f"{tag} OK begin TLS negotiation now\r\n".encode())
        await self.writer.start_tls(self.server.tls_context)
        self.tls = True
        return ANSWERED

    async def cmd_login(self, tag: str, args: list[Token]) -> str:
        if len(args) != 2:
            raise BadCommand("LOGIN takes a user name and a password")
        return await self.login(_text(args[0]), _text(args[1]))

    async def cmd_authenticate(self, tag: str, args: list[Token]) -> str:
        if not args or not isinstance(args[0], Atom):
            raise BadCommand("AUTHENTICATE needs a mechanism")
        if args[0].upper() != "PLAIN":
            raise No("unsupported authentication mechanism", "CANNOT")
        if len(args) > 1:
            answer = _text(args[1]).encode()
        else:
            await self.send(b"+ \r\n")
            answer = (await self.reader.readline()).strip()
        if answer == b"*":
            raise BadCommand("authentication cancelled")
        try:
            decoded = base64.b64decode(answer, validate=True) if answer != b"=" else b""
            _authz, user, password = decoded.split(b"\0")
        except ValueError:
            raise BadCommand("invalid SASL PLAIN response") from None
        return await self.login(user.decode("utf-8", "replace"),
                                password.decode("utf-8", "replace"))

    async def login(self, user: str, password: str) -> str:
        if not (self.tls or self.server.plaintext_auth):
            raise No("plaintext authentication is disabled until STARTTLS", "PRIVACYREQUIRED")
        caller = await self.server.authenticate(user, password, self.peer)
        if caller is None:
            raise No("authentication failed", "AUTHENTICATIONFAILED")
        self.caller, self.user = caller, caller.user
        return f"[CAPABILITY {self.capabilities()}] logged in"

    async def cmd_namespace(self, tag: str, args: list[Token]) -> str:
        await self.untagged('NAMESPACE (("" "/")) NIL (("shared/" "/"))')
        return "NAMESPACE completed"

    async def cmd_enable(self, tag: str, args: list[Token]) -> str:
        enabled = [a.upper() for a in args if isinstance(a, Atom)
                   and a.upper() in ("CONDSTORE", "QRESYNC")]
        if enabled:
            self.condstore = True
        if "QRESYNC" in enabled:
            self.qresync = True
        await self.untagged("ENABLED" + "".join(" " + e for e in enabled))
        return "ENABLE completed"
