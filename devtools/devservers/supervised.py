"""The dev servers under supervisord: what `python -m devtools.devservers up` (and
`make services`) runs, on data kept from one start to the next.

Each server is prepared as for the test fixtures (configuration; initdb and the Kafka storage
format only the first time), then its long-running programs (``postgres``, ``hbase-master``,
``hbase-thrift``, ``hbase-thrift2``, ``kafka``, ``dovecot``, ``spark-master``,
``spark-worker``, ``slapd``) go into one supervisord configuration in ``<root>`` and are
started through supervisord in the servers' own order, each waited on by the same real
probes. From then on supervisord restarts a program that crashes
(``adapters.operations.supervision.START_RETRIES`` tries with growing back-off if it keeps dying
while
starting, then ``FATAL``), leaves the others alone, and appends to the same log files.

``<root>`` is one per installation (``default_root``, see
docs/adr/0041-dev-servers-keep-their-data.md). ``<root>/servers.json`` (private) holds what
the next start needs to find the same servers: their ports and passwords, and the
installation that made the root. Nothing is ever deleted by ``up``, ``down`` or a crash:
only ``reset`` wipes the root. ``stop_all`` stops the programs one by one in reverse start
order, HBase's master through HBase's own orderly stop; ``<root>/services.json`` holds what
``status`` and ``down`` need (ports, logs, start order, stop commands).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import random
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapters.files.filemodes import private_file
from adapters.operations.supervision import Program, Supervised, Supervisor, write_config

from ._common import LOCALHOST, Service, ServiceFailed
from .dovecot import DovecotServer
from .hbase import HBaseServer
from .kafka import KafkaServer
from .keycluster import KeyClusterServer
from .ldap import LdapServer
from .postgres import PostgresServer
from .spark import SparkCluster
from .supervised_root import (
    STOP_COMMAND_SECONDS,
    STOP_EXIT_SECONDS,
    read_state,
    restart,
    status,
    stop_all,
)

__all__ = ["STOP_COMMAND_SECONDS", "STOP_EXIT_SECONDS", "SupervisedServices", "default_root",
           "installation", "read_state", "restart", "status", "stop_all"]

_DROPPED = ("CLASSPATH", "JAVA_TOOL_OPTIONS")  # never handed to the JVMs
#: a program's orderly stop (``hbase master stop``) may take this long, its exit this long
#: after that; then it gets its stop signal and its ``stop_wait`` like the others
#: ports kept from one start to the next are chosen below the ephemeral range (32768-60999
#: on Linux), so an outgoing connection never holds one when the servers start again
PORT_RANGE = (20000, 32000)


class RootBusy(ServiceFailed):
    """Servers (of this installation or another one) already run in the root, or another
    ``up``/``down``/``reset`` is working on it."""


class PortTaken(ServiceFailed):
    """A port the kept servers listen on is taken by another process."""


def installation() -> Path:
    """The directory this copy of letterlog is installed in (the checkout)."""
    return Path(__file__).resolve().parents[2]


def default_root() -> Path:
    """``$LETTERLOG_SERVICES_DIR``; else ``<checkout>/.letterlog-services`` (git-ignored),
    when letterlog runs from a checkout (``pyproject.toml`` beside ``adapters/``); else
    ``$XDG_STATE_HOME/letterlog/services-<hash of the installation path>``. Never under the
    temporary directory, which a machine may clear when it boots."""
    raw = os.environ.get("LETTERLOG_SERVICES_DIR")
    if raw:
        return Path(raw).expanduser().resolve()
    home = installation()
    if (home / "pyproject.toml").is_file():
        return home / ".letterlog-services"
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    digest = hashlib.sha256(str(home).encode()).hexdigest()[:12]
    return state / "letterlog" / f"services-{digest}"


@contextlib.contextmanager
def root_lock(root: Path) -> Iterator[None]:
    """An exclusive lock on ``<root>/.lock`` for ``up``, ``down`` and ``reset`` (RootBusy at
    once if another holds it)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RootBusy(f"another `python -m devtools.devservers up`, `down` or `reset` "
                           f"is working on {root} right now") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_kept(root: Path) -> dict[str, Any]:
    """``<root>/servers.json``: what the last start chose ({} before the first)."""
    try:
        return dict(json.loads((root / "servers.json").read_text()))
    except (OSError, ValueError):
        return {}


def _write_kept(root: Path, kept: dict[str, Any]) -> None:
    path = private_file(root / "servers.json")  # passwords: for this account alone
    path.write_text(json.dumps(kept, indent=2, sort_keys=True) + "\n")


def port_free(port: int) -> bool:
    """Whether a server could listen on 127.0.0.1:``port`` now (SO_REUSEADDR, as the
    servers bind: a closed connection lingering in TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOCALHOST, port))
        except OSError:
            return False
    return True


def pick_ports(count: int, taken: set[int]) -> list[int]:
    """``count`` distinct free ports in ``PORT_RANGE`` (none of ``taken``)."""
    rng = random.SystemRandom()
    chosen: list[int] = []
    if count == 0:
        return chosen
    for _ in range(2000):
        port = rng.randrange(*PORT_RANGE)
        if port not in taken and port not in chosen and port_free(port):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise ServiceFailed(f"no {count} free ports found in {PORT_RANGE[0]}-{PORT_RANGE[1]}")


#: each server's kept ports: the constructor argument and what it is
PORTS: dict[str, dict[str, str]] = {
    "pg": {"port": "postgres"},
    "keys": {"port": "keys-postgres"},
    "hbase": {"zookeeper_port": "hbase-master (ZooKeeper)", "thrift_port": "hbase-thrift",
              "thrift2_port": "hbase-thrift2"},
    "kafka": {"port": "kafka (broker)", "controller_port": "kafka (controller)"},
    "spark": {"spark_master": "spark-master", "spark_master_ui": "spark-master (web UI)",
              "spark_worker_ui": "spark-worker (web UI)", "spark_worker": "spark-worker"},
    "ldap": {"port": "slapd"},
}


def make(name: str, root: Path, kept: dict[str, Any]) -> Service:
    """Server ``name`` in ``<root>/<name>`` with the ports (and passwords) of ``kept``."""
    args: dict[str, Any] = {k: v for k, v in kept.items() if k in PORTS.get(name, {})}
    if name in ("pg", "keys"):
        kind = KeyClusterServer if name == "keys" else PostgresServer
        return kind(workdir=root / name, keep_workdir=True, **args,
                    password=kept.get("password"), admin_password=kept.get("admin_password"))
    if name == "hbase":
        return HBaseServer(workdir=root / name, keep_workdir=True, **args)
    if name == "kafka":
        return KafkaServer(workdir=root / name, keep_workdir=True, **args)
    if name == "spark":
        ports = tuple(kept[k] for k in PORTS["spark"]) if all(
            k in kept for k in PORTS["spark"]) else None
        return SparkCluster(workdir=root / name, keep_workdir=True,
                            ports=ports)
    if name == "ldap":
        return LdapServer(workdir=root / name, keep_workdir=True, **args,
                          password=kept.get("password"))
    return DovecotServer(workdir=root / name, keep_workdir=True)


def _kept_of(name: str, server: Service) -> dict[str, Any]:
    if isinstance(server, PostgresServer):
        return {"port": server.port, "password": server.password,
                "admin_password": server.admin_password}
    if isinstance(server, HBaseServer):
        return {"zookeeper_port": server.zookeeper_port, "thrift_port": server.thrift_port,
                "thrift2_port": server.thrift2_port}
    if isinstance(server, KafkaServer):
        return {"port": server.port, "controller_port": server.controller_port}
    if isinstance(server, SparkCluster):
        return dict(zip(PORTS["spark"], server.ports, strict=True))
    if isinstance(server, LdapServer):
        return {"port": server.port, "password": server.password}
    return {}


def program_name(service: Service, program: Program) -> str:
    return service.name if program.name == service.name else f"{service.name}-{program.name}"


def ports(service: Service) -> dict[str, int]:
    """Each supervised program's port (what ``status`` shows and ``restart`` waits on)."""
    if isinstance(service, KeyClusterServer):
        return {"keys-postgres": service.port}
    if isinstance(service, PostgresServer):
        return {"postgres": service.port}
    if isinstance(service, HBaseServer):
        return {"hbase-master": service.zookeeper_port, "hbase-thrift": service.thrift_port,
                "hbase-thrift2": service.thrift2_port}
    if isinstance(service, KafkaServer):
        return {"kafka": service.port}
    if isinstance(service, SparkCluster):
        return {"spark-master": service.port}
    if isinstance(service, LdapServer):
        return {"slapd": service.port}
    return {}


def _first_start(name: str, server: Service) -> bool:
    if isinstance(server, PostgresServer):
        return not server.initialized
    if isinstance(server, KafkaServer):
        return server.formatted_cluster_id() is None
    if isinstance(server, HBaseServer):
        return server.workdir is None or not (server.workdir / "data" / "hbase").exists()
    return server.workdir is None or not any(server.workdir.iterdir())


class SupervisedServices:
    """Servers ``names`` (of pg, hbase, kafka, dovecot, spark, ldap) under one supervisord in
    ``root``, on the data an earlier start left there."""

    def __init__(self, names: Sequence[str], root: Path | None = None,
                 report: Callable[[str], None] = lambda line: None) -> None:
        self.names = list(names)
        self.root = Path(root) if root is not None else default_root()
        self.supervisor = Supervisor(self.root)
        self.servers: dict[str, Service] = {}
        self.startup_seconds: dict[str, float] = {}
        self.kept_data: dict[str, bool] = {}  # name: started on data an earlier start made
        self.report = report

    def refuse_if_running(self) -> None:
        """RootBusy if a supervisord answers in the root (never touches its servers)."""
        if not self.supervisor.alive():
            return
        owner = read_kept(self.root).get("installation") or "unknown"
        whose = ("this installation's" if owner == str(installation())
                 else f"another installation's ({owner})")
        raise RootBusy(f"{whose} servers already run under {self.root}; not touching them "
                       f"(`python -m devtools.devservers status --root {self.root}` shows "
                       "them" + ("; `... down` stops them)" if whose.startswith("this")
                                 else "; give this installation its own --root)"))

    def start(self) -> None:
        """Prepares every server, starts supervisord, brings the servers up one after the
        other (each through its probes) and writes ``services.json``."""
        self.refuse_if_running()
        with root_lock(self.root):
            self.refuse_if_running()
            self._start()

    def _start(self) -> None:
        os.chmod(self.root, 0o711)  # PostgreSQL runs as its own account when we are root
        kept = read_kept(self.root)
        clash = [(port, what) for name in self.names
                 for key, what in PORTS.get(name, {}).items()
                 if (port := kept.get(name, {}).get(key)) and not port_free(port)]
        if clash:
            raise PortTaken("; ".join(
                f"port {port} ({what}) is in use by another process" for port, what in clash)
                + f". The servers in {self.root} listen on the ports of their first start "
                "(services.env names them); free them (`ss -ltnp` shows who holds one) and "
                "run `up` again.")
        base = {k: v for k, v in os.environ.items() if k not in _DROPPED}
        programs: list[Program] = []
        taken = {port for entry in kept.values() if isinstance(entry, dict)
                 for key, port in entry.items() if key.endswith("port") or
                 key.startswith("spark_")}
        for name in self.names:
            t0 = time.monotonic()
            entry = dict(kept.get(name, {}))
            missing = [key for key in PORTS.get(name, {}) if key not in entry]
            entry.update(zip(missing, pick_ports(len(missing), taken), strict=True))
            taken.update(entry[key] for key in missing)
            server = make(name, self.root, entry)
            server.install()
            server.workdir = server._make_workdir()
            self.kept_data[name] = not _first_start(name, server)
            server.prepare()
            server.make_private()  # supervisord's umask=077 covers what its programs write
            self.servers[name] = server
            kept[name] = _kept_of(name, server)  # the passwords initdb just used, too
            kept["installation"] = str(installation())
            _write_kept(self.root, kept)
            self.startup_seconds[name] = time.monotonic() - t0
            for p in server.programs():  # type: ignore[attr-defined]
                extra = {k: v for k, v in p.env.items() if base.get(k) != v}
                programs.append(replace(p, name=program_name(server, p), env=extra))
        write_config(self.root, programs, autostart=False)
        self._write_state(programs)
        self.supervisor.launch(base)
        try:
            for name, server in self.servers.items():
                t0 = time.monotonic()
                self.report(f"  {name}: starting on "
                            + ("the data kept from the last start" if self.kept_data[name]
                               else "new data"))

                def launch(program: Program, server: Service = server) -> Supervised:
                    return self.supervisor.start(program_name(server, program))

                server.bring_up(launch)
                server.started = True
                self.startup_seconds[name] += time.monotonic() - t0
        except BaseException:
            self.stop()
            raise

    def _write_state(self, programs: Sequence[Program]) -> None:
        state: dict[str, Any] = {"ports": {}, "logs": {}, "order": [], "stop_commands": {},
                                 "stop_waits": {}}
        for server in self.servers.values():
            state["ports"].update(ports(server))
            state["logs"][server.name] = [str(p) for p in server.log_paths]
            if isinstance(server, HBaseServer):
                state["stop_commands"]["hbase-master"] = server.stop_command()
        for p in sorted(programs, key=lambda p: p.priority):
            state["order"].append(p.name)
            state["stop_waits"][p.name] = p.stop_wait
        (self.root / "services.json").write_text(json.dumps(state, indent=2) + "\n")

    def stop(self) -> dict[str, float]:
        """Stops every program cleanly and supervisord (``stop_all``); the files stay."""
        return stop_all(self.root, report=self.report)
