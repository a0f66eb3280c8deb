"""The dev servers under supervisord: what `python -m adapters.devservers up` (and
`make services`) runs.

Each server is prepared as for the test fixtures (ports, configuration, initdb / storage
format), then its long-running programs (``postgres``, ``hbase-master``, ``hbase-thrift``,
``hbase-thrift2``, ``kafka``, ``dovecot``) go into one supervisord configuration in
``<root>`` (default ``<tmp>/letterlog-services-<uid>``) and are started through supervisord
in the servers' own order, each waited on by the same real probes. From then on supervisord
restarts a program that crashes (``adapters.supervision.START_RETRIES`` tries with growing
back-off if it keeps dying while starting, then ``FATAL``), leaves the others alone, and
appends to the same log files.
Nothing is deleted when a server crashes or when the servers stop: the next ``up`` clears
``<root>``. ``<root>/services.json`` holds what ``status`` shows (ports, logs).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapters.supervision import Program, Supervised, Supervisor, SupervisorError, write_config

from ._common import Service, ServiceFailed, port_open
from .dovecot import DovecotServer
from .hbase import HBaseServer
from .kafka import KafkaServer
from .postgres import PostgresServer
from .spark import SparkCluster

__all__ = ["SupervisedServices", "default_root"]

_DROPPED = ("CLASSPATH", "JAVA_TOOL_OPTIONS")  # never handed to the JVMs
STOP_WAIT = 15.0  # seconds a program gets after its stop signal, then SIGKILL


def default_root() -> Path:
    """``$LETTERLOG_SERVICES_DIR``, else ``<tmp>/letterlog-services-<uid>`` (not under the
    cache: when we are root, PostgreSQL runs as another account, which cannot enter
    ``/root``)."""
    raw = os.environ.get("LETTERLOG_SERVICES_DIR")
    if raw:
        return Path(raw).expanduser().resolve()
    return Path(tempfile.gettempdir()) / f"letterlog-services-{os.getuid()}"


def make(name: str, root: Path) -> Service:
    kinds: dict[str, type[Service]] = {"pg": PostgresServer, "hbase": HBaseServer,
                                       "kafka": KafkaServer, "dovecot": DovecotServer,
                                       "spark": SparkCluster}
    return kinds[name](workdir=root / name, keep_workdir=True)


def program_name(service: Service, program: Program) -> str:
    return service.name if program.name == service.name else f"{service.name}-{program.name}"


def ports(service: Service) -> dict[str, int]:
    """Each supervised program's port (what ``status`` shows and ``restart`` waits on)."""
    if isinstance(service, PostgresServer):
        return {"postgres": service.port}
    if isinstance(service, HBaseServer):
        return {"hbase-master": service.zookeeper_port, "hbase-thrift": service.thrift_port,
                "hbase-thrift2": service.thrift2_port}
    if isinstance(service, KafkaServer):
        return {"kafka": service.port}
    if isinstance(service, SparkCluster):
        return {"spark-master": service.port}
    return {}


class SupervisedServices:
    """Servers ``names`` (of pg, hbase, kafka) under one supervisord in ``root``."""

    def __init__(self, names: Sequence[str], root: Path | None = None) -> None:
        self.names = list(names)
        self.root = Path(root) if root is not None else default_root()
        self.supervisor = Supervisor(self.root)
        self.servers: dict[str, Service] = {}
        self.startup_seconds: dict[str, float] = {}

    def start(self) -> None:
        """Prepares every server, starts supervisord, brings the servers up one after the
        other (each through its probes) and writes ``services.json``."""
        if self.supervisor.alive():
            raise ServiceFailed(f"servers already run under {self.root} (`python -m "
                                "adapters.devservers status`; `... down` stops them)")
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        base = {k: v for k, v in os.environ.items() if k not in _DROPPED}
        programs: list[Program] = []
        for name in self.names:
            t0 = time.monotonic()
            server = make(name, self.root)
            server.install()
            server.workdir = server._make_workdir()
            server.prepare()
            self.servers[name] = server
            self.startup_seconds[name] = time.monotonic() - t0
            for p in server.programs():
                extra = {k: v for k, v in p.env.items() if base.get(k) != v}
                # the next `up` starts afresh: no orderly shutdown worth waiting a minute for
                programs.append(replace(p, name=program_name(server, p), env=extra,
                                        stop_wait=min(p.stop_wait, STOP_WAIT)))
        write_config(self.root, programs, autostart=False)
        self.supervisor.launch(base)
        try:
            for name, server in self.servers.items():
                t0 = time.monotonic()

                def launch(program: Program, server: Service = server) -> Supervised:
                    return self.supervisor.start(program_name(server, program))

                server.bring_up(launch)
                server.started = True
                self.startup_seconds[name] += time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        self._write_state()

    def _write_state(self) -> None:
        state: dict[str, Any] = {"ports": {}, "logs": {}}
        for server in self.servers.values():
            state["ports"].update(ports(server))
            state["logs"][server.name] = [str(p) for p in server.log_paths]
        (self.root / "services.json").write_text(json.dumps(state, indent=2) + "\n")

    def stop(self) -> None:
        """Stops every program and supervisord; the files (logs, data) stay."""
        self.supervisor.shutdown()


def read_state(root: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((root / "services.json").read_text()))
    except (OSError, ValueError):
        return {"ports": {}, "logs": {}}


def status(root: Path) -> list[dict[str, Any]]:
    """Each program's state, pid, uptime, port and log (``SupervisorError`` if nothing runs)."""
    supervisor = Supervisor(root)
    if not supervisor.alive():
        raise SupervisorError(f"no servers run under {root} (start them with `python -m "
                              "adapters.devservers up`)")
    known = read_state(root)["ports"]
    return [{**row, "port": known.get(row["name"])} for row in supervisor.status()]


def restart(root: Path, name: str, timeout: float = 180.0) -> dict[str, Any]:
    """Restarts one program and waits until it counts as started and its port answers."""
    supervisor = Supervisor(root)
    if not supervisor.alive():
        raise SupervisorError(f"no servers run under {root}")
    t0 = time.monotonic()
    supervisor.restart(name)
    port = read_state(root)["ports"].get(name)
    deadline = time.monotonic() + timeout
    while port and not port_open("127.0.0.1", port):
        if time.monotonic() > deadline:
            raise SupervisorError(f"{name} restarted but port {port} does not answer after "
                                  f"{timeout:.0f} s")
        time.sleep(0.25)
    return {"name": name, "pid": supervisor.info(name)["pid"], "port": port,
            "seconds": round(time.monotonic() - t0, 1)}
