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
alone; every ``letterlog`` process imports it first); this module is the server half.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import socketserver
import sys
from typing import Any

from adapters.cli.preload import PRELOAD, preload
from adapters.startup.commandclient import (
    _LENGTH,
    PREFIX,
    PROTOCOL,
    ROOT,
    ServerError,
    _peer_uid,
    info_path,
    log_path,
    private_runtime_dir,
    socket_path,
)

__all__ = ["PRELOAD", "ServerError", "info_path", "log_path", "preload",
           "private_runtime_dir", "running", "serve", "socket_path"]

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


def _reopen(fd: int, like: Any) -> Any:
    """A fresh text stream on ``fd``, buffered as a new interpreter would buffer it."""
    import io

    writing = fd != 0
    raw = io.FileIO(fd, "w" if writing else "r", closefd=False)
    buffered = io.BufferedWriter(raw) if writing else io.BufferedReader(raw)
    return io.TextIOWrapper(buffered, encoding=like.encoding, errors=like.errors,
                            line_buffering=fd == 2 or (writing and raw.isatty()))


def _die_with_parent(handler: int) -> None:
    """SIGKILL for this process when its handler dies (``PR_SET_PDEATHSIG``): the client
    then reports the outcome unknown (a temporary failure for ``lda``), and a command that
    went on could store a message afterwards. Linux only; elsewhere nothing."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        if ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:
            return  # 1: PR_SET_PDEATHSIG
    if os.getppid() != handler:  # it died before that
        os.kill(os.getpid(), signal.SIGKILL)


def _run_command(request: dict[str, Any], fds: list[int], handler: int) -> None:
    """In the command's process: take over the client's streams and surroundings, run the
    command line, report nothing (the handler reports the exit status)."""
    code = 1
    try:
        _die_with_parent(handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])
        import time

        time.tzset()
        sys.argv = ["letterlog", *request["argv"]]
        sys.stdin = _reopen(0, sys.__stdin__)
        sys.stdout = _reopen(1, sys.__stdout__)
        sys.stderr = _reopen(2, sys.__stderr__)
        from adapters.cli.app import main

        main()
        code = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            sys.stderr.write(f"{e.code}\n")
    except BaseException:  # a bug: shown as a fresh interpreter would show it
        import traceback

        traceback.print_exc()
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


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
    import time

    sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} letterlog server[{os.getpid()}]: "
                     f"{text}\n")
    sys.stderr.flush()


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
    import threading
    import time

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
