"""The LMTP server's hooks (aiosmtpd's handler): LHLO's keywords, MAIL, RCPT and DATA with
enhanced status codes; the deliveries go to the writer process (``adapters.mta.writerprocess``)."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from typing import Any

from adapters.mta.delivery import MtaOptions
from adapters.mta.lmtpprotocol import XFORWARD_ATTRIBUTES
from adapters.mta.replies import Outcome, classify, temporary
from adapters.mta.writerprocess import WriterProcess
from domain.errors import MessageRejected


class Handler:
    """aiosmtpd's hooks: MAIL, RCPT and DATA with enhanced status codes; LHLO's keywords."""

    def __init__(self, writer: WriterProcess, max_size: int, options: MtaOptions) -> None:
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
            try:
                refusal = await asyncio.wait_for(self.writer.check_recipient(address),
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
        try:
            return await asyncio.wait_for(self.writer.deliver(items), self.options.timeout)
        except TimeoutError:
            # still queued or appending: if it commits, the retry is answered as a duplicate
            return [temporary(f"delivery timed out after {self.options.timeout:g} s "
                              "(store busy or slow); try again later")] * len(recipients)



def classify_size(size: int, limit: int) -> Outcome:
    return classify(MessageRejected(
        f"message too large: {size} bytes exceeds max_message_size={limit}"))


def session_id(session: Any) -> str:
    sid = getattr(session, "letterlog_id", None)
    if sid is None:
        sid = f"{os.getpid()}-{id(session):x}-{datetime.now(UTC):%Y%m%dT%H%M%S}"
        session.letterlog_id = sid
    return str(sid)

