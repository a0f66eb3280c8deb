"""Where the LMTP server listens: ``--listen`` read, and its unix socket made with the
permission bits and group asked for (``--socket-mode``, ``--socket-group``)."""

from __future__ import annotations

import contextlib
import grp
import os
import socket
from typing import Any


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

