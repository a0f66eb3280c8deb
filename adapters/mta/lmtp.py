"""The LMTP server (RFC 2033) on aiosmtpd: LHLO with PIPELINING, ENHANCEDSTATUSCODES,
8BITMIME and SIZE; after DATA one reply per accepted recipient.

Deliveries are made by one writer thread (the store has one writer per process), which
takes every delivery waiting when it starts an append and appends them together: with
several connections at once, one fsync stores the messages of all of them (group commit).
Each message is checked on its own first, so a bad one is refused alone. The server opens
the log only; a second process (``adapters.readside.follower``), woken after each append,
keeps the read models current, so a locked ``tables.sqlite`` delays no mail.

The store is opened on the first transaction and again after a failure that may have
broken it; a data directory that went away (an unmounted volume, a directory moved aside)
is noticed before each append, so nothing is written to files no longer in place.
Every failure a retry may fix is a 4.x.x reply (``adapters.mta.replies``).

SIGTERM or SIGINT: stop listening, let the transactions in flight finish, close.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiosmtpd.lmtp import LMTP
from aiosmtpd.smtp import syntax

from adapters import datadir
from adapters.mta.delivery import MtaOptions, delivery_fields, lock_timeout, split_recipient
from adapters.mta.replies import Outcome, classify, delivered, temporary
from domain.errors import LetterlogError, StoreUnavailable

log = logging.getLogger("letterlog.lmtp")

FOLLOWER_LINGER = 0.05
"""Seconds the projecting process waits after each catch-up: woken once per message, it
would otherwise project one message at a time and take as much CPU as the deliveries
(measured: 1.2-1.5 ms a message against 0.4-0.6 with 50 ms). The read models lag the log
by up to that much more; a reader that needs them current catches up itself."""


_NOT_FIELDS = frozenset({"options", "alive", "deadline"})
"""What a handed-off lda's item carries besides ``delivery_fields``' arguments."""


def _refusal(item: dict[str, Any]) -> Outcome | None:
    """Why a handed-off lda's message must not be appended (checked right before the
    append): its client is gone (Postfix killed it at its time limit, and bounces the
    message: storing it would be bounce-then-deliver), or its deadline passed (its answer
    is a temporary failure by now). None for LMTP's items and for an lda still waiting."""
    alive = item.get("alive")
    if alive is not None and not alive():
        return temporary("the delivery agent went away before the append; nothing stored")
    deadline = item.get("deadline")
    if deadline is not None and time.monotonic() > deadline:
        return temporary("delivery timed out (store busy or slow); nothing stored")
    return None


class _Refused(Exception):
    """An append not started, and why (``_refusal``)."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.text)
        self.outcome = outcome


class Writer:
    """The store and its one writer thread: deliveries wait in ``pending`` and each append
    takes all of them (group commit)."""

    def __init__(self, data: Path, options: MtaOptions) -> None:
        self.data = data
        self.options = options
        self.thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lmtp-writer")
        self._lock = threading.Lock()
        self._pending: list[tuple[dict[str, Any], concurrent.futures.Future[Outcome]]] = []
        self._stack: ExitStack | None = None
        self._store: Any = None
        self._follower: Any = None  # keeps the read models current (embedded tables)
        self._identity: tuple[int, int] | None = None

    # -- the store ------------------------------------------------------------------------
    def _open(self) -> Any:
        """The store, opened if needed; StoreUnavailable if its directory is not the one
        opened (moved away, unmounted)."""
        identity = self._where()
        if self._store is not None and identity != self._identity:
            self.close_store()
            raise StoreUnavailable(f"{self.data}: the data directory went away")
        if self._store is None:
            from adapters.embedded import Letterlog
            from adapters.readside.follower import Follower

            stack = ExitStack()
            try:
                store = stack.enter_context(Letterlog.open(
                    self.data, create=False, read_models=False,
                    lock_timeout=lock_timeout(self.options.timeout)))
                if store.settings.table_store == "embedded":
                    follower = Follower(store.settings.model_dump_json(), FOLLOWER_LINGER)
                    self._follower = follower
                    stack.callback(follower.stop, 30.0)
            except BaseException:
                stack.close()
                raise
            self._stack, self._store, self._identity = stack, store, identity
        return self._store

    def _wake(self) -> None:
        """The follower projects what was just appended (a new one if it is gone)."""
        follower = self._follower
        if follower is not None and not follower.wake():
            from adapters.readside.follower import Follower

            log.warning("the projecting process is gone (exit %s); starting another",
                        follower.proc.poll())
            self._follower = Follower(self._store.settings.model_dump_json(), FOLLOWER_LINGER)
            assert self._stack is not None
            self._stack.callback(self._follower.stop, 30.0)
            self._follower.wake()

    def _where(self) -> tuple[int, int]:
        try:
            st = os.stat(self.data / datadir.LOG)
        except OSError as e:
            raise StoreUnavailable(f"{self.data}: no letterlog store here "
                                   f"({e.strerror or e})") from None
        return st.st_dev, st.st_ino

    def close_store(self) -> None:
        stack, self._stack, self._store, self._follower = self._stack, None, None, None
        if stack is not None:
            try:
                stack.close()
            except Exception:  # noqa: BLE001 - closing a broken store: reopened next time
                log.warning("closing the store failed", exc_info=True)

    # -- deliveries ----------------------------------------------------------------------
    def check_address(self, recipient: str) -> Outcome | None:
        """A refusal of a ``recipient`` that names no account, or None (no store read)."""
        try:
            split_recipient(recipient, self.options.recipient_delimiter)
        except BaseException as e:  # noqa: BLE001 - every failure is a reply
            return classify(e)
        return None

    def check_recipient(self, recipient: str) -> Outcome | None:
        """In the writer thread: a refusal of ``recipient`` at RCPT (one that names no
        account, or an account the store does not have), or None."""
        try:
            account, _ = split_recipient(recipient, self.options.recipient_delimiter)
            if self.options.accounts_must_exist:
                self._open().mail.account(account)
        except BaseException as e:  # noqa: BLE001 - every failure is a reply
            return self._failed(e)
        return None

    def submit(self, items: Sequence[dict[str, Any]]) -> list[concurrent.futures.Future[Outcome]]:
        """Queues one delivery per item (``delivery_fields``' arguments; a handed-off lda's
        also its ``options``, ``alive`` and ``deadline``: ``_NOT_FIELDS``) and a flush."""
        futures: list[concurrent.futures.Future[Outcome]] = [
            concurrent.futures.Future() for _ in items]
        with self._lock:
            self._pending.extend(zip(items, futures, strict=True))
        self.thread.submit(self._flush)
        return futures

    def _flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            store = self._open()
        except BaseException as e:  # noqa: BLE001
            outcome = self._failed(e)
            for _, future in batch:
                future.set_result(outcome)
            return
        at = time.monotonic() + self.options.timeout
        from domain.commands import Deliver, build

        checked, waiting = [], []
        for item, future in batch:
            try:
                args = {k: v for k, v in item.items() if k not in _NOT_FIELDS}
                fields = delivery_fields(store, options=item.get("options", self.options),
                                         **args)
                c = store.mail.check(build(Deliver, **fields))
                refusal = _refusal(item)  # a handed-off lda's client gone, or its time up
                if refusal is not None:
                    future.set_result(refusal)
                    continue
                checked.append(c)
                waiting.append((fields, future, item))
            except BaseException as e:  # noqa: BLE001 - this message alone is refused
                future.set_result(self._failed(e))
        if not checked:
            return
        store.mail.uow.append_guard = self._guard(at, [item for _, _, item in waiting])
        try:
            results = store.deliver_checked(checked)
        except BaseException:  # noqa: BLE001 - one at a time, so each gets its own answer
            results = None
        if results is None or len(waiting) == 1:
            for c, (fields, future, item) in zip(checked, waiting, strict=True):
                store.mail.uow.append_guard = self._guard(at, [item])
                try:
                    [d] = results if results is not None else store.deliver_checked([c])
                except _Refused as e:
                    future.set_result(e.outcome)
                except BaseException as e:  # noqa: BLE001
                    future.set_result(self._failed(e))
                else:
                    self._wake()
                    future.set_result(self._stored(d, fields))
            return
        self._wake()
        for d, (fields, future, _) in zip(results, waiting, strict=True):
            future.set_result(self._stored(d, fields))

    @staticmethod
    def _guard(at: float, items: Sequence[dict[str, Any]]) -> Any:
        """Checked before every attempt to append (``append_guard``): no append starts after
        ``at`` (the batch's replies have timed out by then: a later commit would only be
        found as a duplicate by the MTA's retry), nor for a handed-off lda whose client is
        gone or whose own deadline passed (``_refusal``)."""

        @contextlib.contextmanager
        def guard() -> Any:
            if time.monotonic() > at:
                raise TimeoutError("delivery timed out (store busy or slow)")
            for item in items:
                refusal = _refusal(item)
                if refusal is not None:
                    raise _Refused(refusal)
            yield

        return guard

    def _stored(self, d: Any, fields: dict[str, Any]) -> Outcome:
        what = "already delivered" if d.duplicate else "delivered"
        return delivered(f"{what} to {fields['account']} {fields['mailbox']} uid {d.uid} "
                         f"as {d.message_id}")

    def _failed(self, error: BaseException) -> Outcome:
        store = self._store
        permanent = store is not None and store.settings.quota_exceeded == "permanent"
        outcome = classify(error, self.data, quota_permanent=permanent)
        if outcome.temporary and not isinstance(error, LetterlogError):
            self.close_store()  # an I/O error, a full disk...: open afresh next time
        if outcome.temporary:
            log.warning("temporary failure: %s", outcome.text)
        return outcome

    def close(self) -> None:
        self.thread.submit(self.close_store).result()
        self.thread.shutdown(wait=True)


def _kept(parts: list[bytes], run: bytes, size: int, limit: int | None,
          too_much: bool) -> tuple[int, bool]:
    """Adds ``run`` to the message's ``parts`` unless the message has grown past ``limit``
    (then nothing more is kept: it is read to its end and refused); the new size and
    whether it is too large."""
    size += len(run)
    if too_much or (limit and size > limit):
        parts.clear()
        return size, True
    parts.append(run)
    return size, False


class _Lmtp(LMTP):
    line_length_limit = 1 << 20  # RFC 5321's 1,000 is too few for real mail (SMTP's 998)

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
        parts: list[bytes] = []
        size = 0
        too_much = False
        at_line_start = True  # the virtual CRLF before the first line
        while True:
            try:
                run = await self._reader.readuntil(b".\r\n")
            except asyncio.LimitOverrunError as e:  # a long run without ".<CRLF>"
                run = await self._reader.readexactly(e.consumed)
                size, too_much = _kept(parts, run, size, limit, too_much)
                at_line_start = run.endswith(b"\r\n")
                continue
            except asyncio.IncompleteReadError:
                return  # the connection closed within DATA
            ends = run == b".\r\n" and at_line_start or run.endswith(b"\r\n.\r\n")
            size, too_much = _kept(parts, run[:-3] if ends else run, size, limit, too_much)
            if ends:
                break
            at_line_start = True  # the run ended a line ("...X.<CRLF>")
        if too_much:
            self._set_post_data_state()
            await self.push("552 5.3.4 Error: too much mail data")
            return
        content = b"".join(parts)
        if content.startswith(b".."):
            content = content[1:]
        content = content.replace(b"\r\n..", b"\r\n.")
        self.envelope.content = self.envelope.original_content = content
        status = await self._call_handler_hook("DATA")
        self._set_post_data_state()
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
        extra = ["250-PIPELINING", "250-ENHANCEDSTATUSCODES", f"250-SIZE {self.max_size}"]
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
        items = [{"raw": raw, "recipient": r, "key_prefix": "lmtp",
                  "sender": envelope.mail_from or "", "session": session_id(session),
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
    ``DATA/lda.sock`` (``adapters.mta.handoff``, the client) and this server's writer
    delivers it with the store already open, with the lda's own options and envelope, the
    same idempotency key as an lda delivering itself and the same checks, and answers with
    lda's exit status and line. A request it cannot serve exactly as ``lda`` would (another
    data directory or other settings, the server stopping) is refused before the message is
    sent: the lda then delivers itself."""

    def __init__(self, data: Path, writer: Writer, handler: Handler, max_size: int) -> None:
        from adapters.mta import handoff

        self.protocol = handoff
        self.data = os.path.realpath(data)
        self.writer = writer
        self.handler = handler
        self.max_size = max_size
        self.settings = handoff.settings_environment(os.environ)

    def path(self) -> str:
        return os.path.join(self.data, self.protocol.SOCKET_NAME)

    def listen(self) -> socket.socket | None:
        """The listening socket, bound in place of any stale one (0600, in the private data
        directory), or None if it cannot be (the lda then delivers itself)."""
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
        except OSError as e:
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(spare)
            log.warning("no lda fast path: cannot listen on %s: %s", path, e)
            return None
        self.inode = os.stat(path).st_ino
        return sock

    def unlink(self) -> None:
        with contextlib.suppress(OSError):
            if os.stat(self.path()).st_ino == self.inode:
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
            raw = await asyncio.wait_for(self._frame(reader, self.max_size), timeout)
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
                "sender": request.get("sender", ""),
                "original_recipient": request.get("original_recipient", ""),
                "queue_id": queue_id, "via": "lda", "options": options, "alive": alive,
                "deadline": time.monotonic() + timeout}
        [future] = self.writer.submit([item])
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future),
                                          timeout + self.protocol.GRACE)
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


async def _serve(data: Path, listen: str, options: MtaOptions) -> None:
    from adapters.settings import load_settings

    max_size = load_settings(data=data).max_message_size
    kind, where = parse_listen(listen)
    writer = Writer(data, options)
    handler = Handler(writer, max_size, options)
    sessions: set[LMTP] = set()  # the connections, told when it stops
    hostname = socket.gethostname()

    def protocol() -> LMTP:
        smtp = _Lmtp(handler, hostname=hostname, data_size_limit=max_size + (1 << 20),
                     enable_SMTPUTF8=True, decode_data=False, ident="letterlog LMTP")
        sessions.add(smtp)
        return smtp

    loop = asyncio.get_running_loop()
    if kind == "unix":
        with contextlib.suppress(FileNotFoundError):
            os.unlink(where)
        server = await loop.create_unix_server(protocol, where)
    else:
        server = await loop.create_server(protocol, where[0], where[1], reuse_address=True)
    handoff = Handoff(data, writer, handler, max_size)
    lda_sock = handoff.listen()
    lda_server = None if lda_sock is None else await asyncio.start_unix_server(
        handoff.serve, sock=lda_sock)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    log.warning("letterlog lmtp: serving %s on %s", data, listen)
    print(f"letterlog lmtp: listening on {listen}", flush=True)
    try:
        await stop.wait()
    finally:
        server.close()
        if lda_server is not None:
            lda_server.close()
            handoff.unlink()
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


def serve(data: Path, listen: str, options: MtaOptions) -> None:
    """Runs the server in the foreground until SIGTERM or SIGINT."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("mail.log").setLevel(logging.ERROR)  # aiosmtpd's per-connection lines
    try:
        parse_listen(listen)
    except ValueError as e:
        from domain.errors import InvalidCommand

        raise InvalidCommand(str(e)) from None
    asyncio.run(_serve(data, listen, options))


