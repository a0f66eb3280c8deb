"""The LMTP server (RFC 2033) on aiosmtpd: LHLO with PIPELINING, ENHANCEDSTATUSCODES,
8BITMIME and SIZE; after DATA one reply per accepted recipient.

Deliveries are made by one writer thread (``adapters.mta.writer``: group commit, the
store opened on first use, the read models kept by a second process). Every failure a
retry may fix is a 4.x.x reply (``adapters.mta.replies``).

SIGTERM or SIGINT: stop listening, let the transactions in flight finish, close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiosmtpd.lmtp import LMTP
from aiosmtpd.smtp import syntax

from adapters.mta.delivery import MtaOptions, Spool
from adapters.mta.replies import Outcome, classify, temporary, without_queue_id
from adapters.mta.writer import Writer

log = logging.getLogger("letterlog.lmtp")

LISTEN_AGAIN = 2.0
"""Seconds between tries to make the lda's fast-path socket again (``Handoff.keep``)."""

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


class Handler:
    """aiosmtpd's hooks: MAIL, RCPT and DATA with enhanced status codes; LHLO's keywords."""

    def __init__(self, writer: Writer, max_size: int, options: MtaOptions) -> None:
        self.writer = writer
        self.max_size = max_size
        self.options = options
        self.spool_dir: str | None = None  # where a large message waits (Spool)
        self.open: set[int] = set()  # sessions inside a transaction (MAIL .. end of DATA)
        self.idle = asyncio.Event()
        self.idle.set()
        self.stopping = False

    def begin(self, session: Any) -> None:
        self.open.add(id(session))
        self.idle.clear()

    def end(self, session: Any) -> None:
        self.open.discard(id(session))
        if not self.open:
            self.idle.set()

    async def handle_EHLO(self, server: Any, session: Any, envelope: Any, hostname: str,
                          responses: list[str]) -> list[str]:
        session.host_name = hostname
        head, *keywords = responses
        kept = [r for r in keywords if not r[4:].upper().startswith(("SIZE", "HELP", "AUTH"))]
        extra = ["250-PIPELINING", "250-ENHANCEDSTATUSCODES", f"250-SIZE {self.max_size}",
                 "250-DSN", f"250-XFORWARD {' '.join(XFORWARD_ATTRIBUTES)}"]
        lines = [head, *extra, *kept]
        return [*lines[:-1], "250 " + lines[-1][4:]]

    async def handle_MAIL(self, server: Any, session: Any, envelope: Any, address: str,
                          options: list[str]) -> str:
        for option in options:
            name, _, value = option.partition("=")
            if name.upper() == "SIZE" and value.isdigit() and int(value) > self.max_size:
                return f"552 5.3.4 message too large: {value} bytes (at most {self.max_size})"
        if self.stopping:
            return "421 4.3.2 letterlog lmtp is shutting down, try again later"
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        self.begin(session)
        return "250 2.1.0 OK"

    async def handle_RSET(self, server: Any, session: Any, envelope: Any) -> str:
        self.end(session)
        return "250 2.0.0 OK"

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,
                          options: list[str]) -> str:
        if self.options.accounts_must_exist:  # a read of the store: bounded like a delivery
            loop = asyncio.get_running_loop()
            try:
                refusal = await asyncio.wait_for(loop.run_in_executor(
                    self.writer.thread, self.writer.check_recipient, address),
                    self.options.timeout)
            except TimeoutError:
                refusal = temporary(f"looking up the account timed out after "
                                    f"{self.options.timeout:g} s; try again later")
        else:
            refusal = self.writer.check_address(address)
        if refusal is not None:
            return refusal.reply
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        orcpts = envelope.__dict__.setdefault("orcpts", {})
        orcpts.setdefault(address, getattr(envelope, "pending_orcpt", ""))
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        try:
            return "\r\n".join(r.reply for r in await self._deliver(session, envelope))
        finally:
            self.end(session)

    async def _deliver(self, session: Any, envelope: Any) -> list[Outcome]:
        raw = bytes(envelope.original_content or b"")
        recipients = list(envelope.rcpt_tos)
        if len(raw) > self.max_size:
            too_large = classify_size(len(raw), self.max_size)
            return [too_large for _ in recipients]
        peer = session.peer
        client = ":".join(str(p) for p in peer[:2]) if isinstance(peer, tuple) else "local"
        orcpts = getattr(envelope, "orcpts", {})
        items = [{"raw": raw, "recipient": r, "key_prefix": "lmtp",
                  "sender": envelope.mail_from or "", "session": session_id(session),
                  "original_recipient": orcpts.get(r, ""),
                  "queue_id": getattr(envelope, "queue_id", ""),
                  "client": client, "via": "lmtp"} for r in recipients]
        futures = self.writer.submit(items)
        try:
            return list(await asyncio.wait_for(
                asyncio.gather(*(asyncio.wrap_future(f) for f in futures)),
                self.options.timeout))
        except TimeoutError:
            # still queued or appending: if it commits, the retry is answered as a duplicate
            return [temporary(f"delivery timed out after {self.options.timeout:g} s "
                              "(store busy or slow); try again later")] * len(recipients)


class Handoff:
    """The lda's fast path, server half (ADR 0060): ``letterlog lda`` hands its message over
    ``DATA/lda.sock`` (``adapters.startup.handoff``, the client) and this server's writer
    delivers it with the store already open, with the lda's own options and envelope, the
    same idempotency key as an lda delivering itself and the same checks, and answers with
    lda's exit status and line. A request it cannot serve exactly as ``lda`` would (another
    data directory or other settings, the server stopping) is refused before the message is
    sent: the lda then delivers itself."""

    def __init__(self, data: Path, writer: Writer, handler: Handler, max_size: int) -> None:
        from adapters.startup import handoff

        self.protocol = handoff
        self.data = os.path.realpath(data)
        self.writer = writer
        self.handler = handler
        self.max_size = max_size
        self.settings = handoff.settings_environment(os.environ)
        self.inode: int | None = None
        self.missing = False  # the socket could not be made (said once)

    def path(self) -> str:
        return os.path.join(self.data, self.protocol.SOCKET_NAME)

    def listen(self) -> socket.socket | None:
        """The listening socket, bound in place of any stale one (0600, in the private data
        directory), or None if it cannot be (the lda then delivers itself; ``keep`` tries
        again)."""
        path = self.path()
        spare = f"{path}.{os.getpid()}.tmp"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(spare)
            sock.bind(spare)
            os.chmod(spare, 0o600)
            sock.listen(128)
            os.replace(spare, path)
            self.inode = os.stat(path).st_ino
        except OSError as e:
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(spare)
            if not self.missing:
                log.warning("no lda fast path: cannot listen on %s: %s; trying again every "
                            "%g s", path, e, LISTEN_AGAIN)
            self.missing = True
            return None
        if self.missing:
            log.warning("lda fast path: listening on %s again", path)
        self.missing = False
        return sock

    def listening(self) -> bool:
        """Whether the socket at ``path`` is still the one this server bound (not removed,
        not replaced)."""
        try:
            return os.stat(self.path()).st_ino == self.inode
        except OSError:
            return False

    async def keep(self, stop: asyncio.Event, sock: socket.socket | None) -> None:
        """Serves the fast path until ``stop``; a socket that could not be made (a
        read-only or full volume when the server started) or that went away is made again
        within ``LISTEN_AGAIN`` seconds of the cause's end, without a restart. ``sock``:
        the socket ``listen`` made at the start, if it could."""
        server: asyncio.AbstractServer | None = None
        if sock is not None:
            server = await asyncio.start_unix_server(self.serve, sock=sock)
        try:
            while not stop.is_set():
                if server is None or not self.listening():
                    sock = self.listen()
                    if sock is not None:
                        if server is not None:
                            server.close()
                        server = await asyncio.start_unix_server(self.serve, sock=sock)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), LISTEN_AGAIN)
        finally:
            if server is not None:
                server.close()
                self.unlink()

    def unlink(self) -> None:
        with contextlib.suppress(OSError):
            if self.listening():
                os.unlink(self.path())

    def refusal(self, request: dict[str, str]) -> str | None:
        if request.get("version") != self.protocol.VERSION:
            return "another version"
        if request.get("data") != self.data:
            return "another data directory"
        if request.get("settings") != self.settings:
            return "other LETTERLOG_* settings"
        if self.handler.stopping:
            return "stopping"
        return None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn: socket.socket = writer.get_extra_info("socket")
        watch: socket.socket | None = None
        token = object()
        try:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            if int.from_bytes(creds[4:8], sys.byteorder) != os.getuid():
                return
            request = self.protocol.decode(await asyncio.wait_for(
                self._frame(reader, self.protocol.HEADER_LIMIT), 10.0))
            refusal = self.refusal(request)
            if refusal is not None:
                writer.write(self.protocol.frame(f"no\0{refusal}".encode()))
                await writer.drain()
                return
            self.handler.begin(token)
            writer.write(self.protocol.frame(f"ok\0{self.max_size}".encode()))
            timeout = float(request["timeout"])
            raw = await asyncio.wait_for(self._message(reader, self.max_size, self.data),
                                         timeout)
            watch = socket.socket(fileno=os.dup(conn.fileno()))
            outcome = await self._deliver(request, raw, timeout, watch)
            writer.write(self.protocol.frame(f"{outcome.exit_status}\0{outcome.line}".encode()))
            await writer.drain()
        except (OSError, EOFError, asyncio.IncompleteReadError, TimeoutError, ValueError,
                KeyError):
            pass  # a client gone or confused: it delivered nothing, or answers 75 itself
        finally:
            self.handler.end(token)
            if watch is not None:
                watch.close()
            writer.close()

    @classmethod
    async def _message(cls, reader: asyncio.StreamReader, limit: int,
                       directory: str | None = None) -> bytes:
        """The message's frames up to the empty one, joined (at most ``limit`` bytes)."""
        spool = Spool(directory)
        try:
            while part := await cls._frame(reader, limit - spool.size):
                spool.write(part)
            return spool.read()
        finally:
            spool.discard()

    @staticmethod
    async def _frame(reader: asyncio.StreamReader, limit: int) -> bytes:
        size = int.from_bytes(await reader.readexactly(4), "big")
        if size > limit:
            raise ValueError(f"a frame of {size} bytes")
        return await reader.readexactly(size)

    async def _deliver(self, request: dict[str, str], raw: bytes, timeout: float,
                       watch: socket.socket) -> Outcome:
        from adapters.mta.delivery import without_from_line

        options = MtaOptions(
            mailbox=request.get("mailbox") or None,
            detail_mailbox=request.get("detail_mailbox") == "1",
            accounts_must_exist=request.get("accounts_must_exist") == "1",
            recipient_delimiter=request.get("recipient_delimiter", "+"),
            envelope_headers=request.get("envelope_headers") == "1", timeout=timeout)
        queue_id = request.get("queue_id", "")

        def alive() -> bool:
            try:
                return watch.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
            except BlockingIOError:
                return True
            except OSError:
                return False

        item = {"raw": without_from_line(raw), "recipient": request["recipient"],
                "key_prefix": f"lda:{queue_id}" if queue_id else None,
                "sender": request.get("sender"),
                "original_recipient": request.get("original_recipient", ""),
                "queue_id": queue_id, "via": "lda", "options": options, "alive": alive,
                "deadline": time.monotonic() + timeout}
        [future] = self.writer.submit([item])
        try:
            return without_queue_id(await asyncio.wait_for(
                asyncio.wrap_future(future), timeout + self.protocol.GRACE), queue_id)
        except TimeoutError:
            return temporary(f"delivery timed out after {timeout:g} s (store busy or slow); "
                             "try again later")


def classify_size(size: int, limit: int) -> Outcome:
    from domain.errors import MessageRejected

    return classify(MessageRejected(
        f"message too large: {size} bytes exceeds max_message_size={limit}"))


def session_id(session: Any) -> str:
    sid = getattr(session, "letterlog_id", None)
    if sid is None:
        sid = f"{os.getpid()}-{id(session):x}-{datetime.now(UTC):%Y%m%dT%H%M%S}"
        session.letterlog_id = sid
    return str(sid)


def parse_listen(listen: str) -> tuple[str, Any]:
    """``HOST:PORT`` or ``unix:PATH``."""
    if listen.startswith("unix:"):
        path = listen[5:]
        if not path:
            raise ValueError("--listen unix:PATH needs a path")
        return "unix", path
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--listen {listen!r}: expected HOST:PORT or unix:PATH")
    return "tcp", (host.strip("[]") or "127.0.0.1", int(port))


def parse_socket_mode(mode: str | None) -> int | None:
    """``--socket-mode``: octal permission bits (``0660``, ``660``), or None."""
    if mode is None:
        return None
    try:
        bits = int(mode, 8)
    except ValueError:
        bits = -1
    if not 0 <= bits <= 0o777:
        raise ValueError(f"--socket-mode {mode!r}: expected octal permission bits, e.g. 0660")
    return bits


def parse_socket_group(group: str | None) -> int | None:
    """``--socket-group``: a group's name or number, as its gid, or None."""
    if group is None:
        return None
    import grp

    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        if group.isdigit():
            return int(group)
        raise ValueError(f"--socket-group {group!r}: no such group") from None


def unix_listener(path: str, mode: int | None, gid: int | None) -> socket.socket:
    """The LMTP server's unix socket at ``path`` (a stale one replaced), with ``mode`` and
    group ``gid`` when given: bound 0600 first (umask), then opened up as asked, so it is
    never open to more than asked. In a setgid directory the socket takes the directory's
    group (Postfix's chrooted lmtp(8): docs/mta.md)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        previous = os.umask(0o177) if mode is not None else None
        try:
            sock.bind(path)
        finally:
            if previous is not None:
                os.umask(previous)
        if gid is not None:
            os.chown(path, -1, gid)
        if mode is not None:
            os.chmod(path, mode)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


async def _serve(data: Path, listen: str, options: MtaOptions,
                 socket_mode: int | None = None, socket_gid: int | None = None) -> None:
    from adapters.config.settings import load_settings

    max_size = load_settings(data=data).max_message_size
    kind, where = parse_listen(listen)
    writer = Writer(data, options)
    handler = Handler(writer, max_size, options)
    handler.spool_dir = os.fspath(data)
    sessions: set[LMTP] = set()  # the connections, told when it stops
    hostname = socket.gethostname()

    def protocol() -> LMTP:
        smtp = _Lmtp(handler, hostname=hostname, data_size_limit=max_size + (1 << 20),
                     enable_SMTPUTF8=True, decode_data=False, ident="letterlog LMTP")
        sessions.add(smtp)
        return smtp

    loop = asyncio.get_running_loop()
    if kind == "unix":
        server = await loop.create_unix_server(
            protocol, sock=unix_listener(where, socket_mode, socket_gid))
    else:
        server = await loop.create_server(protocol, where[0], where[1], reuse_address=True)
    stop = asyncio.Event()
    handoff = Handoff(data, writer, handler, max_size)
    fast_path = asyncio.create_task(handoff.keep(stop, handoff.listen()))
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    log.warning("letterlog lmtp: serving %s on %s", data, listen)
    print(f"letterlog lmtp: listening on {listen}", flush=True)
    try:
        await stop.wait()
    finally:
        server.close()
        stop.set()
        await fast_path
        handler.stopping = True  # no new transaction; the open ones finish
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(handler.idle.wait(), options.timeout)
        for smtp in list(sessions):
            transport = getattr(smtp, "transport", None)
            if transport is not None:
                with contextlib.suppress(Exception):
                    await smtp.push("421 4.3.2 letterlog lmtp shutting down")
                transport.close()
        await loop.run_in_executor(None, writer.close)
        if kind == "unix":
            with contextlib.suppress(OSError):
                os.unlink(where)


def serve(data: Path, listen: str, options: MtaOptions, *, socket_mode: str | None = None,
          socket_group: str | None = None) -> None:
    """Runs the server in the foreground until SIGTERM or SIGINT. ``socket_mode`` and
    ``socket_group``: the unix socket's permission bits and group (``--listen unix:``)."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("mail.log").setLevel(logging.ERROR)  # aiosmtpd's per-connection lines
    try:
        kind, _ = parse_listen(listen)
        mode, gid = parse_socket_mode(socket_mode), parse_socket_group(socket_group)
        if kind != "unix" and (mode is not None or gid is not None):
            raise ValueError("--socket-mode and --socket-group need --listen unix:PATH")
    except ValueError as e:
        from domain.errors import InvalidCommand

        raise InvalidCommand(str(e)) from None
    asyncio.run(_serve(data, listen, options, mode, gid))


