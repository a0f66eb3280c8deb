"""The command server's client half (ADR 0032): what every ``letterlog`` process runs first
to hand its command line to the user's command server (``adapters.cli.commandserver``, the
server half), with the standard library alone, so a command run there costs this process
little more than the interpreter's start. ``forward`` returns None, having run nothing,
when there is no server to run the command; the caller then runs it itself.

The paths (``runtime_dir``, ``socket_path``, ...) and the protocol's constants are the
server's too: it imports them from here.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

PROTOCOL = 1
ROOT = str(Path(__file__).resolve().parents[2])  # the directory holding ``adapters``
PREFIX = os.path.realpath(sys.prefix)  # the environment (virtualenv) it runs in
_LENGTH = struct.Struct(">I")
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


class ServerError(Exception):
    """The command server cannot start, or the runtime directory is not private."""


def runtime_dir() -> Path:
    """Where the user's servers keep their sockets: ``$XDG_RUNTIME_DIR/letterlog``, else
    ``/tmp/letterlog-UID``. Both must be owned by the user and closed to everyone else."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    return Path(base) / "letterlog" if base else Path(f"/tmp/letterlog-{os.getuid()}")


def _name() -> str:
    """One server per installation: this environment with this code."""
    installation = f"{PREFIX}\0{ROOT}".encode()
    return f"{zlib.crc32(installation):08x}"


def socket_path() -> Path:
    return runtime_dir() / f"{_name()}.sock"


def info_path() -> Path:
    return runtime_dir() / f"{_name()}.json"


def log_path() -> Path:
    return runtime_dir() / f"{_name()}.log"


def _private(directory: Path) -> bool:
    try:
        st = os.stat(directory)
    except OSError:
        return False
    return st.st_uid == os.getuid() and st.st_mode & 0o077 == 0


def private_runtime_dir() -> Path:
    """The runtime directory, made if missing; ServerError unless it is the user's alone."""
    directory = runtime_dir()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _private(directory):
        raise ServerError(f"{directory} must be owned by you and closed to others (chmod 700)")
    return directory


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def _command_word(argv: list[str]) -> str | None:
    """The command's name: the first word that is neither an option nor ``--data``'s value
    (the only root option that takes one)."""
    words = iter(argv)
    for word in words:
        if word == "--data":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _names_own_descriptor(argv: list[str], cwd: str) -> bool:
    """Whether the command line names a file through this process's own descriptors: bash's
    ``<(...)`` gives ``/dev/fd/63``, which in the server names nothing (or another file).
    Such a command runs here instead of being forwarded: simpler than passing the
    descriptors and renaming the paths, and rare. ``/dev/stdin``, ``/dev/stdout``,
    ``/dev/stderr`` and ``-`` need nothing: the command has the client's 0, 1 and 2."""
    own = ("/dev/fd/", "/proc/self/", "/proc/thread-self/", f"/proc/{os.getpid()}/")
    if cwd in ("/dev", "/proc") or cwd.startswith(own):  # ``fd/63``, ``self/fd/63``
        return True
    return any(prefix in arg for arg in argv for prefix in own)


def _wanted(argv: list[str], cwd: str) -> bool:
    """Every command but ``server`` itself goes to the server, unless it names a file by one
    of this process's descriptors."""
    return _command_word(argv) != "server" and not _names_own_descriptor(argv, cwd)



def forward(argv: list[str]) -> int | None:
    """Runs ``argv`` in the user's command server and returns its exit status, or None when
    there is no server to run it (none running, another user's socket, code changed): the
    caller then runs the command itself. Nothing of the command has run when this returns
    None."""
    try:
        cwd = os.getcwd()
    except OSError:  # a deleted working directory: the command meets it here
        return None
    if not _wanted(argv, cwd) or not _private(runtime_dir()):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(socket_path()))
        if _peer_uid(sock) != os.getuid():
            sock.close()
            return None
    except OSError:
        sock.close()
        return None
    pending: list[int] = []
    child: list[int] = []

    def relay(signum: int, _frame: Any) -> None:
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child[0], signum)
        else:
            pending.append(signum)

    umask = os.umask(0o022)
    os.umask(umask)
    request = json.dumps({"protocol": PROTOCOL, "root": ROOT, "prefix": PREFIX,
                          "argv": argv, "env": dict(os.environ), "cwd": cwd,
                          "umask": umask}).encode()
    message = _LENGTH.pack(len(request)) + request
    previous = {s: signal.signal(s, relay) for s in _FORWARDED}
    try:
        with sock:
            try:
                sent = socket.send_fds(sock, [message], [0, 1, 2])
                sock.sendall(message[sent:])  # a large environment may not go in one send
            except OSError:  # e.g. a closed standard stream: run here, as without a server
                return None
            replies = sock.makefile("rb")
            try:
                first = replies.readline()
            except OSError:
                first = b""
            started = json.loads(first) if first else {}
            if "pid" not in started:
                return None  # refused (changed code, another installation): nothing ran
            child.append(started["pid"])
            for signum in pending:
                relay(signum, None)
            try:
                return int(json.loads(replies.readline())["status"])
            except (OSError, ValueError, KeyError, TypeError):  # EOF is b"": a ValueError
                pass
            # the handler died (the command dies with it, see ``_run_command``)
            if _command_word(argv) == "lda":  # a temporary failure: the MTA tries again
                sys.stderr.write(f"4.3.0 letterlog: the command server stopped while "
                                 f"delivering (pid {child[0]}); try again later\n")
                return 75  # EX_TEMPFAIL; 1 would make the MTA bounce the message
            sys.stderr.write("letterlog: error: the command server stopped while running "
                             f"the command (pid {child[0]}); its outcome is unknown\n")
            return 1
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if pending and not child:  # a Ctrl-C before anything ran: it applies here
            os.kill(os.getpid(), pending[0])
