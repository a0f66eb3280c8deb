"""The command server: a warm process that runs each command line in a fork of itself, so a
command starts in milliseconds instead of first importing typer, pydantic, the eventsourcing
library and the domain (ADR 0032; Mercurial's ``chg`` works the same way).

``letterlog server start`` imports the code of every command once and listens on a unix
socket private to the user. ``letterlog`` (``adapters.cli.main``) connects to it and hands
the command line over: its arguments, environment, working directory and umask, and its
standard input, output and error themselves (passed as file descriptors), so the command
reads and writes exactly where it would have. The server forks a handler per connection;
the handler forks the command, tells the client its pid, waits for it and reports its exit
status. The client forwards the signals it gets (Ctrl-C, a kill) to the command. A client
that dies (even by SIGKILL, which it cannot forward) takes its command along: the handler
sees the connection close and kills it; a handler that dies takes it along too. A command
line that names one of the client's other descriptors (``/dev/fd/63``) is not forwarded.

Nothing runs in the server itself: it imports modules and builds the commands' parsers and
schemas, and opens no store, no connection, no random generator, so every command starts
as clean as in a new process. A server whose code changed on disk since it started (an
upgrade, an edit) refuses the next command and stops; the client then runs that command
itself, as it does when no server is running. Either way the output is the same.

The client half is ``adapters.startup.commandclient`` (``forward``: the standard library
alone; every ``letterlog`` process imports it first); this module is the server half: it
listens and forks a handler per connection (``commandhandler``), which forks the command
(``commandrun``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import socketserver
import sys
import threading
import time
from typing import Any

from adapters.cli.commandhandler import _code_files, _handle, _log
from adapters.cli.preload import PRELOAD, preload
from adapters.startup.commandclient import (
    PREFIX,
    ROOT,
    ServerError,
    info_path,
    log_path,
    private_runtime_dir,
    socket_path,
)

__all__ = ["PRELOAD", "ServerError", "info_path", "log_path", "preload",
           "private_runtime_dir", "running", "serve", "socket_path"]

def _note_signal(_signum: int, _frame: Any) -> None:
    """SIGTERM and SIGINT only wake the accept loop (through the wake-up pipe): raising from
    a handler could land in a fork's at-fork callbacks, where an exception is ignored."""


class _Forking(socketserver.ForkingMixIn, socketserver.UnixStreamServer):
    """The standard library's forking server on the socket ``serve`` bound: it accepts a
    connection and forks a handler process for it (``process_request``), which ends with
    ``os._exit``. The kernel reaps the handlers (SIGCHLD ignored); ``service_actions`` only
    forgets them. No bound on the handlers running at once (``max_children``): a burst of
    commands or forwarded ``lda``s must not wait for others to end."""

    max_children = 1 << 30
    block_on_close = False

    def __init__(self, listener: socket.socket, files: dict[str, int],
                 closing: tuple[int, ...]) -> None:
        super().__init__(listener.getsockname(), _Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = listener
        self.files = files
        self.server_pid = os.getpid()
        self.closing = closing  # the server's own descriptors, closed in each handler

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A handler's own failure (never the command's), in the server's log."""
        _log(f"a handler failed: {sys.exc_info()[1]!r}")


class _Handler(socketserver.BaseRequestHandler):
    """In a handler process: the connection's command (``_handle``)."""

    server: _Forking

    def setup(self) -> None:
        signal.set_wakeup_fd(-1)
        for fd in self.server.closing:
            os.close(fd)
        self.server.socket.close()

    def handle(self) -> None:
        _handle(self.request, self.server.files, self.server.server_pid)


def running() -> dict[str, Any] | None:
    """The running server's description (pid, socket, log, started), or None."""
    try:
        info = json.loads(info_path().read_text())
        os.kill(int(info["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(socket_path()))  # a connection that sends nothing is dropped
    except OSError:
        return None
    finally:
        probe.close()
    return dict(info)


def serve(ready: int | None = None, log: str = "stderr") -> None:
    """Preloads, listens and serves until SIGTERM or SIGINT. ``ready``: a pipe's write end
    that gets one line (``ready`` or the error) once commands can be sent; ``log``: where
    its stderr goes (for ``status``)."""
    # what the starting process left open is no command's business (commands are forked)
    if ready is None:
        os.closerange(3, 1 << 16)
    else:
        os.closerange(3, ready)
        os.closerange(ready + 1, 1 << 16)
    try:
        private_runtime_dir()
        if running() is not None:
            raise ServerError(f"a server is already running ({socket_path()})")
        started = time.time()
        built = preload()
        if threading.active_count() != 1:
            raise ServerError("preloading started a thread; a server must fork from one")
        files = _code_files()
        path = socket_path()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        spare = path.with_suffix(f".{os.getpid()}.tmp")
        spare.unlink(missing_ok=True)
        listener.bind(str(spare))
        listener.listen(128)
        os.replace(spare, path)
        ino = os.stat(path).st_ino
        info = {"pid": os.getpid(), "socket": str(path), "log": log,
                "root": ROOT, "prefix": PREFIX, "commands": built,
                "modules": len(files), "started": round(started, 3),
                "preload_seconds": round(time.time() - started, 3)}
        spare_info = info_path().with_suffix(".tmp")
        spare_info.write_text(json.dumps(info))
        os.replace(spare_info, info_path())
    except (ServerError, OSError) as e:
        if ready is not None:
            os.write(ready, f"{e}\n".encode())
        raise
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped by the kernel
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)  # every signal caught writes its number here
    signal.signal(signal.SIGTERM, _note_signal)
    signal.signal(signal.SIGINT, _note_signal)
    _log(f"serving {built} commands, {len(files)} modules preloaded in "
         f"{info['preload_seconds']} s, on {path}")
    if ready is not None:
        os.write(ready, b"ready\n")
        os.close(ready)
    stop = {signal.SIGTERM, signal.SIGINT}
    server = _Forking(listener, files, closing=(wake_read, wake_write))
    try:
        while True:
            readable, _, _ = select.select([server, wake_read], [], [])
            if wake_read in readable and stop & set(os.read(wake_read, 256)):
                break
            if server in readable:
                server.handle_request()  # accept, fork a handler (process_request)
                server.service_actions()  # forget the handlers the kernel has reaped
        _log("stopping")
    finally:
        listener.close()  # (the server's socket: server_close would wait for no handler)
        for p in (path, info_path()):
            try:
                if p != path or os.stat(p).st_ino == ino:
                    p.unlink()
            except OSError:
                pass
