"""Long-running processes under supervisord (the `supervisor` package): the dev servers
(`python -m devtools.devservers up`) and letterlog's own relay, workers and purger
(`letterlog processes start`). See docs/adr/0013-supervisord-for-long-running-processes.md.

``Program`` says what to run; ``write_config`` renders a supervisord configuration for a list
of them (one ``[program:x]`` each, restarted when they crash: ``startretries`` tries with
supervisord's growing back-off, then ``FATAL``; output appended to the program's log file,
never rotated away); ``Supervisor`` starts supervisord on that file and talks to it over its
unix socket (supervisord's XML-RPC interface, the one ``supervisorctl`` uses).

A program may set its own ``start_retries`` (letterlog's processes retry their servers
themselves and are never given up on) and have its log rotated (``log_max_bytes``,
``log_backups``: supervisord's ``stdout_logfile_maxbytes`` and ``stdout_logfile_backups``).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import xmlrpc.client
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from adapters.files.filemodes import private_dir, private_file
from adapters.operations.probing import alive

__all__ = [
    "Handle",
    "Launch",
    "Program",
    "Supervised",
    "Supervisor",
    "SupervisorError",
    "write_config",
]

#: how often a program that dies while starting is tried again before it is FATAL
START_RETRIES = 5


class SupervisorError(RuntimeError):
    """supervisord is not running, not reachable, or refused a request."""


@dataclass(frozen=True)
class Program:
    """One long-running process, as any launcher runs it: a child of this process
    (``devtools.devservers._common.popen_launch``, the test fixtures) or supervisord
    (restarted when it crashes). Output (stdout + stderr) is appended to ``log``."""

    name: str
    command: tuple[str, ...]
    cwd: Path
    log: Path
    env: Mapping[str, str] = field(default_factory=dict)  # on top of supervisord's own
    user: str | None = None  # an OS account to run as (PostgreSQL refuses root)
    stop_signal: str = "TERM"
    stop_wait: float = 30.0
    start_seconds: float = 3.0  # alive this long = started (dying sooner = a failed start)
    priority: int = 100  # started in ascending, stopped in descending order
    #: an exit with status 0 is not restarted (a server its own stop tool asked to shut down
    #: exits 0: HBase's ``HMaster stop``); a crash or a signal still is
    clean_exit_stops: bool = False
    start_retries: int = START_RETRIES  # failed starts in a row before supervisord gives up
    log_max_bytes: int = 0  # rotate the log at this size (0: never)
    log_backups: int = 0  # rotated logs kept (``<log>.1`` ... ``<log>.N``)


class Handle(Protocol):
    """A launched program: ``poll()`` is None while it runs (or is being restarted), else
    its exit code."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...


class Launch(Protocol):
    def __call__(self, program: Program) -> Handle: ...


def _quote(text: str) -> str:
    return text.replace("%", "%%")  # supervisord expands %(name)s in values


def _environment(env: Mapping[str, str]) -> str:
    return ",".join(f'{k}="{_quote(v)}"' for k, v in sorted(env.items()))


def socket_path(root: Path) -> Path:
    """``<root>/supervisor.sock``, or a short path in the temp directory when that one is too
    long for a unix socket (about 100 bytes)."""
    path = Path(root) / "supervisor.sock"
    if len(str(path).encode()) < 100:
        return path
    digest = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"letterlog-supervisor-{digest}.sock"


def write_config(root: Path, programs: Sequence[Program], *, autostart: bool) -> Path:
    """``<root>/supervisord.conf`` for ``programs``; its socket, pid file and own log in
    ``root``. ``autostart=False``: supervisord starts nothing until asked (``start``)."""
    private_dir(root)
    lines = [
        "; written by adapters/operations/supervision.py",
        "[unix_http_server]",
        f"file={_quote(str(socket_path(root)))}",
        "chmod=0700",
        "[supervisord]",
        f"logfile={_quote(str(root / 'supervisord.log'))}",
        "logfile_maxbytes=0",
        f"pidfile={_quote(str(root / 'supervisord.pid'))}",
        f"childlogdir={_quote(str(root))}",
        "nodaemon=true",
        "umask=077",  # its logs, and what its programs create, private (adapters.files.filemodes)
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "[supervisorctl]",
        f"serverurl=unix://{_quote(str(socket_path(root)))}",
    ]
    for p in programs:
        if any("\n" in part for part in (*p.command, *p.env.values())):
            raise ValueError(f"program {p.name}: a line break in its command or environment "
                             "cannot be written into supervisord's configuration")
        lines += [
            f"[program:{p.name}]",
            f"command={_quote(shlex.join(p.command))}",
            f"directory={_quote(str(p.cwd))}",
            f"stdout_logfile={_quote(str(p.log))}",
            f"stdout_logfile_maxbytes={int(p.log_max_bytes)}",  # 0: never rotated
            f"stdout_logfile_backups={int(p.log_backups)}",
            "redirect_stderr=true",
            f"autostart={'true' if autostart else 'false'}",
            f"autorestart={'unexpected' if p.clean_exit_stops else 'true'}",
            *(["exitcodes=0"] if p.clean_exit_stops else []),
            f"startsecs={int(p.start_seconds)}",
            f"startretries={int(p.start_retries)}",
            f"stopsignal={p.stop_signal}",
            f"stopwaitsecs={int(p.stop_wait)}",
            "stopasgroup=true",
            "killasgroup=true",
            f"priority={p.priority}",
        ]
        if p.env:
            lines.append(f"environment={_environment(p.env)}")
        if p.user:
            lines.append(f"user={p.user}")
    conf = private_file(root / "supervisord.conf")
    conf.write_text("\n".join(lines) + "\n")
    return conf


class _UnixTransport(xmlrpc.client.Transport):
    """XML-RPC over supervisord's unix socket (what ``supervisor.xmlrpc`` does, without its
    deprecated http client)."""

    def __init__(self, socket_path: Path) -> None:
        super().__init__()
        self.socket_path = str(socket_path)

    def make_connection(self, host: Any) -> Any:
        path = self.socket_path

        class Connection(http.client.HTTPConnection):
            def connect(self) -> None:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.settimeout(30)
                self.sock.connect(path)

        return Connection("localhost")


class Supervisor:
    """supervisord on ``<root>/supervisord.conf``: start it, ask it, stop it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.conf = self.root / "supervisord.conf"
        self.socket = socket_path(self.root)
        self.log = self.root / "supervisord.log"

    # -- the daemon -----------------------------------------------------------------------
    def rpc(self) -> Any:
        proxy = xmlrpc.client.ServerProxy("http://localhost",
                                          transport=_UnixTransport(self.socket))
        return proxy.supervisor

    def alive(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            return bool(self.rpc().getState()["statename"] == "RUNNING")
        except (OSError, xmlrpc.client.Error):
            return False

    def launch(self, env: Mapping[str, str] | None = None,
               timeout: float = 30.0) -> subprocess.Popen[bytes]:
        """Starts supervisord (its own session: it outlives this process) and waits until it
        answers."""
        if self.alive():
            raise SupervisorError(f"a supervisord already runs on {self.socket}")
        self.socket.unlink(missing_ok=True)
        out = open(private_file(self.root / "supervisord.out"), "ab")  # noqa: SIM115 - the child's
        try:
            proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "supervisor.supervisord", "-n", "-c", str(self.conf)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.root, env=dict(env) if env is not None else None,
                start_new_session=True)
        finally:
            out.close()
        deadline = time.monotonic() + timeout
        while not self.alive():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SupervisorError(f"supervisord did not start (see {self.log} and "
                                      f"{self.root / 'supervisord.out'})")
            time.sleep(0.1)
        return proc

    def shutdown(self, timeout: float = 180.0) -> None:
        """Stops every program (descending priority), then supervisord itself."""
        pid = self.pid()
        with contextlib.suppress(OSError, xmlrpc.client.Error):
            self.rpc().shutdown()
        deadline = time.monotonic() + timeout
        while pid and alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)

    def pid(self) -> int | None:
        try:
            return int((self.root / "supervisord.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    # -- programs -------------------------------------------------------------------------
    def start(self, name: str, *, wait: bool = False) -> Supervised:
        try:
            self.rpc().startProcess(name, wait)
        except xmlrpc.client.Fault as fault:
            if "ALREADY_STARTED" not in fault.faultString:
                raise SupervisorError(f"{name}: {fault.faultString}") from None
        return Supervised(self, name)

    def stop(self, name: str) -> None:
        try:
            self.rpc().stopProcess(name, True)
        except xmlrpc.client.Fault as fault:
            if "NOT_RUNNING" not in fault.faultString:
                raise SupervisorError(f"{name}: {fault.faultString}") from None

    def restart(self, name: str) -> Supervised:
        """Stops (if running) and starts one program; returns once it counts as started."""
        self.info(name)  # an unknown name fails here, clearly
        self.stop(name)
        return self.start(name, wait=True)

    def info(self, name: str) -> dict[str, Any]:
        try:
            return dict(self.rpc().getProcessInfo(name))
        except xmlrpc.client.Fault as fault:
            names = ", ".join(p["name"] for p in self.status())
            raise SupervisorError(f"{name}: {fault.faultString} (programs: {names})") from None
        except OSError as error:
            raise SupervisorError(f"supervisord on {self.socket} does not answer: "
                                  f"{error}") from None

    def status(self) -> list[dict[str, Any]]:
        """Each program: ``name``, ``state``, ``pid``, ``uptime`` (seconds, while running),
        ``log``, ``description`` (supervisord's own line)."""
        try:
            infos = self.rpc().getAllProcessInfo()
        except (OSError, xmlrpc.client.Error) as error:
            raise SupervisorError(f"supervisord on {self.socket} does not answer: "
                                  f"{error}") from None
        return [{"name": i["name"], "state": i["statename"], "pid": i["pid"] or None,
                 "uptime": (i["now"] - i["start"]) if i["statename"] == "RUNNING" else None,
                 "log": i["stdout_logfile"], "description": i["description"]}
                for i in infos]


    def await_running(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Waits until every program counts as started (``RUNNING``: alive ``startsecs``);
        a restarted program answers its port before supervisord says so. ``SupervisorError``
        names the programs still not running at the deadline, or one it gave up on."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.status()
            waiting = [r for r in rows if r["state"] != "RUNNING"]
            failed = [r["name"] for r in waiting if r["state"] in ("FATAL", "EXITED")]
            if not waiting:
                return rows
            if failed or time.monotonic() > deadline:
                states = ", ".join(f"{r['name']} {r['state']}" for r in waiting)
                raise SupervisorError(f"not running after {timeout:.0f} s: {states}")
            time.sleep(0.25)


class Supervised:
    """A ``Handle`` on a program supervisord runs: ``poll()`` answers an exit code only once
    supervisord gave up on it (``FATAL``) or it was stopped; a crash it is restarting from is
    still "running"."""

    def __init__(self, supervisor: Supervisor, name: str) -> None:
        self.supervisor = supervisor
        self.name = name
        self.args = [f"supervisord program {name}"]

    @property
    def pid(self) -> int:
        return int(self.supervisor.info(self.name)["pid"])

    def poll(self) -> int | None:
        info = self.supervisor.info(self.name)
        if info["statename"] in ("FATAL", "STOPPED"):
            return int(info["exitstatus"] or 1)
        return None

    def __repr__(self) -> str:
        return f"<Supervised {self.name}>"
