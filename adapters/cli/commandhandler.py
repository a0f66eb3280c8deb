"""The command server's handler process, one per connection: it checks the request (the
client's user, version, installation, and that the server's code has not changed), forks
the command (``commandrun``), tells the client its pid, waits for it or for the client to
hang up, and reports its exit status (``commandserver``)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import time
from typing import Any

from adapters.cli.commandrun import _run_command
from adapters.startup.commandclient import _LENGTH, PREFIX, PROTOCOL, ROOT, ServerError, _peer_uid


def _code_files() -> dict[str, int]:
    """Every loaded module's file and its modification time."""
    files: dict[str, int] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path:
            with contextlib.suppress(OSError):
                files[path] = os.stat(path).st_mtime_ns
    return files


def _changed(files: dict[str, int]) -> str | None:
    for path, mtime in files.items():
        try:
            if os.stat(path).st_mtime_ns != mtime:
                return path
        except OSError:
            return path
    return None


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """The request and the three descriptors; None for a connection that sends nothing
    (``running`` probes so)."""
    head, fds, _, _ = socket.recv_fds(conn, _LENGTH.size, 3)
    if not head:
        return None
    if len(head) != _LENGTH.size:
        raise ServerError("a client closed the connection within its request")
    (size,) = _LENGTH.unpack(head)
    body = bytearray()
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ServerError("a client closed the connection within its request")
        body += chunk
    return json.loads(body), list(fds)


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _handle(conn: socket.socket, files: dict[str, int], server_pid: int) -> None:
    """In a handler process: check the request, fork the command, report its exit status."""
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_DFL)
    if _peer_uid(conn) != os.getuid():
        return
    received = _receive(conn)
    if received is None:
        return
    request, fds = received
    refusal = None
    if request.get("protocol") != PROTOCOL or len(fds) != 3:
        refusal = "a client of another version"
    elif (request.get("root"), request.get("prefix")) != (ROOT, PREFIX):
        refusal = "a client of another installation"
    elif (path := _changed(files)) is not None:
        refusal = f"code changed since the server started ({path}); stopping"
        os.kill(server_pid, signal.SIGTERM)
    if refusal is not None:
        _log(f"refused a command: {refusal}")
        _send(conn, {"refused": refusal})
        return
    handler = os.getpid()
    pid = os.fork()
    if pid == 0:
        conn.close()
        _run_command(request, fds, handler)
    for fd in fds:
        os.close(fd)
    status, why = None, "this handler failed"
    try:
        _send(conn, {"pid": pid})
        status, why = _wait(conn, pid), "its client is gone"
    finally:
        if status is None:  # no one waits for the command: it must not go on
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            _log(f"killed command {pid}: {why}")
    if status is None:
        return
    code = os.waitstatus_to_exitcode(status)
    with contextlib.suppress(OSError):  # a client gone just now: it has nothing to be told
        _send(conn, {"status": code if code >= 0 else 128 - code})


def _hung_up(conn: socket.socket) -> bool:
    """Whether a readable connection is closed (a client sends nothing after its request)."""
    try:
        return conn.recv(4096) == b""
    except OSError:
        return True


def _wait(conn: socket.socket, pid: int) -> int | None:
    """The command's wait status, or None as soon as its client hangs up (killed, even with
    SIGKILL, which it cannot forward): then the command must not run on, so the caller kills
    it. Waits on a pidfd and the connection together; where there is no pidfd, polls."""
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    poller = select.poll()
    poller.register(conn, select.POLLIN | getattr(select, "POLLRDHUP", 0))
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    try:
        while True:
            ready = {fd for fd, _ in poller.poll(None if pidfd is not None else 50)}
            if pidfd is None or pidfd in ready:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    return status
            if conn.fileno() in ready and _hung_up(conn):
                return None
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _log(text: str) -> None:
    sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} letterlog server[{os.getpid()}]: "
                     f"{text}\n")
    sys.stderr.flush()
