"""Running the IMAP server: in this process (``run``), or as several processes sharing the
listening sockets, each with its own store (``run_processes``); its TLS context."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import ssl
from collections.abc import Callable
from typing import Any

from adapters.face import Store
from adapters.imap.server import Options, Server

log = logging.getLogger("letterlog.imap")


def tls_context(cert: str, key: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def run(store: Store, directory: Any, options: Options) -> None:
    asyncio.run(Server(store, directory, options).serve(_announce))


def _announce(ports: list[int]) -> None:
    print(f"letterlog imap: listening on port(s) {', '.join(map(str, ports))}", flush=True)


def _listening(where: tuple[str, int] | None) -> socket.socket | None:
    if where is None:
        return None
    sock = socket.create_server(where, reuse_port=False, backlog=256)
    sock.setblocking(False)
    return sock


def run_processes(open_store: Callable[[], Store], directory: Any, options: Options,
                  processes: int) -> int:
    """``processes`` servers on the same listening sockets, each a process of its own with
    its own store (one core each: a server's store calls run on one thread). The parent
    binds, forks, forwards SIGTERM and SIGINT, and waits; when one server exits, it stops
    the others (a supervisor starts them all again)."""
    plain, tls = _listening(options.listen), _listening(options.listen_tls)
    ports = [s.getsockname()[1] for s in (plain, tls) if s is not None]
    children: list[int] = []
    for _ in range(processes):
        pid = os.fork()
        if pid == 0:  # a server
            code = 0
            try:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                store = open_store()
                asyncio.run(Server(store, directory, options).serve(
                    None, (plain, tls)))
            except BaseException:  # noqa: BLE001 - logged; the parent sees the status
                log.exception("imap: a server process failed")
                code = 1
            finally:
                os._exit(code)
        children.append(pid)
    _announce(ports)

    def forward(signum: int, _frame: Any) -> None:
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    status = 0
    remaining = set(children)
    while remaining:
        try:
            pid, code = os.wait()
        except ChildProcessError:
            break
        remaining.discard(pid)
        status = status or os.waitstatus_to_exitcode(code)
        forward(signal.SIGTERM, None)
    return status
