"""The LMTP server (RFC 2033) on aiosmtpd: LHLO with PIPELINING, ENHANCEDSTATUSCODES,
8BITMIME and SIZE; after DATA one reply per accepted recipient.

Deliveries are made by the writer process (``adapters.mta.writerprocess``, ADR 0114: group
commit, the store opened on first use, the read models kept by a process of its own), so
the protocol and the append run on two cores. Every failure a
retry may fix is a 4.x.x reply (``adapters.mta.replies``).

SIGTERM or SIGINT: stop listening, let the transactions in flight finish, close.

The protocol is ``lmtpprotocol``'s, a transaction's hooks ``lmtphandler``'s, the lda's fast
path ``handoffserver``'s and the listening socket ``listeners``'. The event loop is uvloop's
(ADR 0112): the same asyncio, its loop and transports in C.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from pathlib import Path

import uvloop
from aiosmtpd.lmtp import LMTP

from adapters.config.settings import load_settings
from adapters.mta.delivery import MtaOptions
from adapters.mta.handoffserver import Handoff
from adapters.mta.listeners import (
    parse_listen,
    parse_socket_group,
    parse_socket_mode,
    unix_listener,
)
from adapters.mta.lmtphandler import Handler
from adapters.mta.lmtpprotocol import _Lmtp
from adapters.mta.writerprocess import WriterProcess
from domain.errors import InvalidCommand

log = logging.getLogger("letterlog.lmtp")


async def _serve(data: Path, listen: str, options: MtaOptions,
                 socket_mode: int | None = None, socket_gid: int | None = None) -> None:
    max_size = load_settings(data=data).max_message_size
    kind, where = parse_listen(listen)
    writer = WriterProcess(data, options)
    await writer.start()
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
        await writer.close(max(30.0, options.timeout))
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
        raise InvalidCommand(str(e)) from None
    uvloop.run(_serve(data, listen, options, mode, gid))


