"""The LMTP protocol's floor for ``bench ingest --peer dovecot``: letterlog's LMTP session
class (aiosmtpd, as ``letterlog lmtp`` configures it, on the same uvloop event loop) with a
handler that stores nothing and answers 250 at once. Its rate, with the bench's client and
connections, is the most any store behind that protocol layer could reach on this machine.

``python -m devtools.bench.lmtp_floor PATH``: serves LMTP on the unix socket PATH until
SIGTERM, then prints how many messages it answered and exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from typing import Any

import uvloop  # the loop ``letterlog lmtp`` runs on (ADR 0112)


class Discard:
    """aiosmtpd's DATA hook: one 250 per recipient, nothing stored."""

    def __init__(self) -> None:
        self.answered = 0
        self.spool_dir: str | None = None  # the server's DATA reads through a Spool: in memory

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.answered += 1
        return "\r\n".join("250 2.0.0 OK" for _ in envelope.rcpt_tos)

    def end(self, session: Any) -> None:
        """A connection closed (``_Lmtp.connection_lost``): nothing is held for it."""


async def serve(path: str) -> int:
    from adapters.mta.lmtpprotocol import _Lmtp

    handler = Discard()
    hostname = socket.gethostname()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server = await loop.create_unix_server(
        lambda: _Lmtp(handler, hostname=hostname, enable_SMTPUTF8=True, decode_data=False,
                      ident="letterlog LMTP floor"), path)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()
    return handler.answered


def main() -> None:
    logging.getLogger("mail.log").setLevel(logging.ERROR)
    answered = uvloop.run(serve(sys.argv[1]))
    print(answered, flush=True)


if __name__ == "__main__":
    main()
