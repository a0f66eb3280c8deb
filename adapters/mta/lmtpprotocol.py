"""The LMTP protocol (RFC 2033) on aiosmtpd's ``LMTP``: MAIL's and RCPT's paths read
directly where plain, DSN's parameters (RFC 3461) and Postfix's XFORWARD accepted, DATA read
in runs into a spool. What a transaction does is ``lmtphandler.Handler``'s."""

from __future__ import annotations

import asyncio
import re

from aiosmtpd.lmtp import LMTP
from aiosmtpd.smtp import syntax

from adapters.mta.delivery import Spool


def _kept(spool: Spool, run: bytes, limit: int | None, too_much: bool) -> bool:
    """Adds ``run`` to the message's ``spool`` unless the message has grown past ``limit``
    (then nothing more is kept: it is read to its end and refused); whether it is too
    large."""
    if too_much or (limit and spool.size + len(run) > limit):
        spool.discard()
        spool.size += len(run)
        return True
    spool.write(run)
    return False


def _unstuffed(run: bytes, at_line_start: bool, after_cr: bool) -> bytes:
    """``run`` without the dot that starts each of its lines that starts with two
    (RFC 5321 4.5.2); ``at_line_start``: the run begins a line; ``after_cr``: the run
    before it ended in a CR (its LF is this run's first byte)."""
    if at_line_start and run.startswith(b".."):
        run = run[1:]
    elif after_cr and run.startswith(b"\n.."):
        run = b"\n" + run[2:]
    return run.replace(b"\r\n..", b"\r\n.")


_DSN_PARAM = re.compile(r"\s+(RET|ENVID|ORCPT|NOTIFY)=(\S+)", re.IGNORECASE)
"""The DSN extension's parameters (RFC 3461) of MAIL (RET, ENVID) and RCPT (ORCPT, NOTIFY):
taken out before aiosmtpd reads the rest (it knows none of them, and upper-cases values)."""

XFORWARD_ATTRIBUTES = ("NAME", "ADDR", "PROTO", "HELO", "IDENT", "SOURCE", "PORT")
"""What XFORWARD may say (Postfix's ``lmtp_send_xforward_command = yes``); IDENT, the
queue id of the message on the MTA, is kept with the delivery's envelope."""


def xtext(value: str) -> str:
    """RFC 3461's xtext decoded: ``+XX`` is the byte of hex XX."""
    return re.sub(r"\+([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), value)


def original_recipient(orcpt: str) -> str:
    """ORCPT's address (``rfc822;bob+2Blists@example.org`` -> ``bob+lists@example.org``);
    ``utf-8;`` addresses (RFC 6533) with their ``\\x{HH}`` escapes; "" for another type."""
    kind, _, value = orcpt.partition(";")
    if kind.lower() == "rfc822":
        return xtext(value)
    if kind.lower() == "utf-8":
        return re.sub(r"\\x\{([0-9A-Fa-f]{1,6})\}", lambda m: chr(int(m.group(1), 16)), value)
    return ""


def _dsn_params(arg: str | None) -> tuple[str | None, dict[str, str]]:
    """``arg`` without its DSN parameters, and those parameters (names upper case)."""
    if arg is None:
        return None, {}
    found = {m.group(1).upper(): m.group(2) for m in _DSN_PARAM.finditer(arg)}
    return _DSN_PARAM.sub("", arg), found


_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_PLAIN_PATH = re.compile(rf"<({_ATOM}(?:\.{_ATOM})*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)>")
"""``<local@domain>`` with a dot-atom local part and a domain of letters, digits and
hyphens: the form nearly every MTA sends, which aiosmtpd's parser reads as it is."""


class _Lmtp(LMTP):
    line_length_limit = 1 << 20  # RFC 5321's 1,000 is too few for real mail (SMTP's 998)

    def _getaddr(self, arg: str) -> tuple[str | None, str | None]:
        """aiosmtpd's reading of MAIL's and RCPT's path, read directly when it is a plain
        ``<local@domain>`` (the library's parser, which also defines a class on every call,
        was a fifth of the protocol's CPU per message); anything else (quoted or
        non-ASCII local parts, address literals, source routes, comments, the null path)
        goes to the library. Both give the same answer (a property test compares them)."""
        m = _PLAIN_PATH.match(arg)
        if m is None:
            return super()._getaddr(arg)
        rest = arg[m.end():].lstrip()
        if rest.startswith("("):  # a comment after the path: the library's CFWS rules
            return super()._getaddr(arg)
        addr = m.group(1)
        if self.local_part_limit and addr.rindex("@") > self.local_part_limit:
            return None, None
        return addr, rest

    @syntax("MAIL FROM: <address>", extended=" [SP <mail-parameters>]")
    async def smtp_MAIL(self, arg: str | None) -> None:
        """aiosmtpd's MAIL, with DSN's RET and ENVID accepted (the MTA sends its DSNs)."""
        arg, _ = _dsn_params(arg)
        await super().smtp_MAIL(arg)

    @syntax("RCPT TO: <address>", extended=" [SP <mail-parameters>]")
    async def smtp_RCPT(self, arg: str | None) -> None:
        """aiosmtpd's RCPT, with DSN's ORCPT (the original recipient, kept in the
        envelope) and NOTIFY accepted."""
        arg, params = _dsn_params(arg)
        if self.envelope is not None:
            # aiosmtpd's Envelope takes attributes of the handler's own (read with getattr)
            self.envelope.pending_orcpt = original_recipient(  # type: ignore[attr-defined]
                params.get("ORCPT", ""))
        await super().smtp_RCPT(arg)

    @syntax("XFORWARD attribute=value ...")
    async def smtp_XFORWARD(self, arg: str | None) -> None:
        """Postfix's XFORWARD (``lmtp_send_xforward_command = yes``): between transactions,
        what the MTA knows of the message; IDENT (its queue id) goes into the envelope of
        the next transaction's deliveries."""
        if self.envelope is None or self.envelope.mail_from:
            await self.push("503 5.5.1 Error: XFORWARD within a transaction")
            return
        pairs = [word.partition("=") for word in (arg or "").split()]
        if not pairs or any(not eq or name.upper() not in XFORWARD_ATTRIBUTES
                            for name, eq, _ in pairs):
            await self.push("501 5.5.4 Syntax: XFORWARD attribute=value ...")
            return
        for name, _, value in pairs:
            if name.upper() == "IDENT" and value.upper() != "[UNAVAILABLE]":
                self.envelope.queue_id = xtext(value)[:64]  # type: ignore[attr-defined]
        await self.push("250 2.0.0 Ok")

    @syntax("DATA")
    async def smtp_DATA(self, arg: str) -> None:
        """aiosmtpd's DATA, reading the message in runs up to each ``.<CRLF>`` rather than
        line by line (a line a time was half of the protocol's CPU per message). The
        message ends at the first line that is a lone dot; a line that starts with a dot
        loses that dot (RFC 5321 4.5.2)."""
        if await self.check_helo_needed() or await self.check_auth_needed("DATA"):
            return
        assert self.envelope is not None
        if not self.envelope.rcpt_tos:
            await self.push("503 5.5.1 Error: need RCPT command")
            return
        if arg:
            await self.push("501 5.5.4 Syntax: DATA")
            return
        await self.push("354 End data with <CR><LF>.<CR><LF>")
        limit = self.data_size_limit
        spool = Spool(self.event_handler.spool_dir)  # one copy of a large message, not two
        too_much = False
        at_line_start, after_cr = True, False  # the virtual CRLF before the first line
        while True:
            try:
                run = await self._reader.readuntil(b".\r\n")
            except asyncio.LimitOverrunError as e:  # a long run without ".<CRLF>"
                run = await self._reader.readexactly(e.consumed)
                too_much = _kept(spool, _unstuffed(run, at_line_start, after_cr), limit,
                                 too_much)
                at_line_start, after_cr = run.endswith(b"\r\n"), run.endswith(b"\r")
                continue
            except asyncio.IncompleteReadError:
                spool.discard()
                return  # the connection closed within DATA
            ends = run == b".\r\n" and at_line_start or run.endswith(b"\r\n.\r\n")
            too_much = _kept(spool, _unstuffed(run[:-3] if ends else run, at_line_start,
                                               after_cr), limit, too_much)
            if ends:
                break
            at_line_start, after_cr = True, False  # the run ended a line ("...X.<CRLF>")
        if too_much:
            self._set_post_data_state()  # type: ignore[no-untyped-call]  # aiosmtpd's
            await self.push("552 5.3.4 Error: too much mail data")
            return
        content = spool.read()
        self.envelope.content = self.envelope.original_content = content
        status = await self._call_handler_hook("DATA")
        self._set_post_data_state()  # type: ignore[no-untyped-call]  # aiosmtpd's
        await self.push(status)

    def connection_lost(self, error: Exception | None) -> None:
        if self.session is not None:
            self.event_handler.end(self.session)  # a transaction the client abandoned
        super().connection_lost(error)

