"""The lda's fast path, server half (ADR 0060): the LMTP server's socket in the data
directory over which ``letterlog lda`` hands its message to the running writer."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import time
from pathlib import Path

from adapters.mta.delivery import MtaOptions, Spool, without_from_line
from adapters.mta.lmtphandler import Handler
from adapters.mta.replies import Outcome, temporary, without_queue_id
from adapters.mta.writerprocess import WriterProcess
from adapters.startup import handoff

log = logging.getLogger("letterlog.lmtp")

LISTEN_AGAIN = 2.0
"""Seconds between tries to make the lda's fast-path socket again (``Handoff.keep``)."""


class Handoff:
    """The lda's fast path, server half (ADR 0060): ``letterlog lda`` hands its message over
    ``DATA/lda.sock`` (``adapters.startup.handoff``, the client) and this server's writer
    delivers it with the store already open, with the lda's own options and envelope, the
    same idempotency key as an lda delivering itself and the same checks, and answers with
    lda's exit status and line. A request it cannot serve exactly as ``lda`` would (another
    data directory or other settings, the server stopping) is refused before the message is
    sent: the lda then delivers itself."""

    def __init__(self, data: Path, writer: WriterProcess, handler: Handler, max_size: int) -> None:
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
        options = MtaOptions(
            mailbox=request.get("mailbox") or None,
            detail_mailbox=request.get("detail_mailbox") == "1",
            accounts_must_exist=request.get("accounts_must_exist") == "1",
            recipient_delimiter=request.get("recipient_delimiter", "+"),
            envelope_headers=request.get("envelope_headers") == "1", timeout=timeout)
        queue_id = request.get("queue_id", "")

        item = {"raw": without_from_line(raw), "recipient": request["recipient"],
                "key_prefix": f"lda:{queue_id}" if queue_id else None,
                "sender": request.get("sender"),
                "original_recipient": request.get("original_recipient", ""),
                "queue_id": queue_id, "via": "lda", "options": options, "watch": watch,
                "deadline": time.monotonic() + timeout}
        try:
            [outcome] = await asyncio.wait_for(self.writer.deliver([item]),
                                               timeout + self.protocol.GRACE)
            return without_queue_id(outcome, queue_id)
        except TimeoutError:
            return temporary(f"delivery timed out after {timeout:g} s (store busy or slow); "
                             "try again later")

