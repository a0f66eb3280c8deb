"""``letterlog server start|stop|status``: the command server (``commandserver``, ADR 0032)."""

from __future__ import annotations

import os
import signal
import time
from typing import Annotated

import daemon
import typer

from adapters.cli import commandserver as cs
from adapters.cli.common import fail, group, out
from adapters.operations.probing import alive

app = group("The command server.")
SECTION = (120, 'Command server')  # the root help's section (adapters.cli.table)
server_app = group("Start, stop or describe the command server: a warm process that runs "
                   "every letterlog command in a fork of itself, so commands start fast.")
app.add_typer(server_app, name="server")


def _describe(info: dict[str, object], text: str) -> None:
    out({"running": True, **info}, f"{text}: pid {info['pid']}, socket {info['socket']}, "
        f"log {info['log']}")


def _daemonize(keep: int) -> None:
    """Become a daemon with python-daemon (PEP 3143): detached into a session of its own,
    working directory ``/``, every descriptor but ``keep`` closed, standard input from
    ``/dev/null``, output to the server's log (created private). The process that called
    this exits inside it once the daemon is on its own. The umask and the signal handlers
    stay as they were: files are created private explicitly and ``serve`` installs its
    own handlers."""
    log = os.open(cs.log_path(), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    umask = os.umask(0o077)
    os.umask(umask)
    with os.fdopen(log, "ab", buffering=0) as stream:
        context = daemon.DaemonContext(working_directory="/", umask=umask, prevent_core=False,
                                       detach_process=True, files_preserve=[keep],
                                       stdout=stream, stderr=stream, signal_map={})
        context.open()  # the caller's process exits in here; the daemon carries on


@server_app.command("start")
def start(foreground: Annotated[bool, typer.Option(
        "--foreground", help="serve in this process until SIGTERM or Ctrl-C (for a "
        "supervisor such as systemd), logging to stderr")] = False) -> None:
    """Start the command server (if none is running) and wait until it serves."""
    if (info := cs.running()) is not None:
        _describe(info, "already running")
        return
    if foreground:
        try:
            cs.serve()
        except cs.ServerError as e:
            fail(str(e))
        return
    try:
        cs.private_runtime_dir()  # before anything is written into it
    except (cs.ServerError, OSError) as e:
        fail(f"the command server did not start: {e}")
    read, write = os.pipe()
    first = os.fork()
    if first == 0:  # becomes the daemon (python-daemon: two more forks, a new session)
        code = 1
        try:
            os.close(read)
            _daemonize(keep=write)
            cs.serve(ready=write, log=str(cs.log_path()))
            code = 0
        except BaseException:  # reported to the starter through the pipe (serve writes it)
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    os.waitpid(first, 0)  # it exits once the daemon is on its own
    with os.fdopen(read, "rb") as pipe:
        said = pipe.readline().decode().strip()
    if said != "ready":
        fail(f"the command server did not start: {said or 'it exited'} (log: {cs.log_path()})")
    info = cs.running()
    if info is None:
        fail(f"the command server started and stopped (log: {cs.log_path()})")
    _describe(info, "started")


@server_app.command("stop")
def stop(timeout: Annotated[float, typer.Option(
        metavar="SECONDS", help="how long to wait for it to exit")] = 10.0) -> None:
    """Stop the command server; commands already running finish."""
    info = cs.running()
    if info is None:
        out({"running": False, "stopped": False}, "no command server is running")
        return
    pid = int(str(info["pid"]))
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while cs.running() is not None or alive(pid):  # not our child: its exit is observed
        if time.monotonic() > deadline:
            fail(f"the command server (pid {pid}) did not stop within {timeout} s")
        time.sleep(0.01)
    out({"running": False, "stopped": True, "pid": pid}, f"stopped (pid {pid})")


@server_app.command("status")
def status() -> None:
    """Whether the command server runs, and where (exits 1 if it does not)."""
    info = cs.running()
    if info is None:
        out({"running": False, "socket": str(cs.socket_path())}, "no command server is running")
        raise typer.Exit(1)
    _describe(info, "running")
