"""A throw-away standalone HBase 2.6 (master + region server + ZooKeeper in one JVM) with a
Thrift1 and a Thrift2 gateway.

Jars come from Maven Central through `maven/hbase/pom.xml` (resolved once into the cache).
The master runs `org.apache.hadoop.hbase.master.HMaster start` on a generated
`hbase-site.xml` (file:// root dir, free ZooKeeper port, web UIs off); once its log says
initialization completed, two gateway JVMs start side by side, both with the thread-pool
server, buffered transport and binary protocol (happybase's defaults):
`org.apache.hadoop.hbase.thrift.ThriftServer` (Thrift1, happybase) and
`org.apache.hadoop.hbase.thrift2.ThriftServer` (Thrift2: per-cell timestamps in
`putMultiple`). One ThriftServer process serves exactly one of the two protocols (the Thrift1
port answers a Thrift2 call with "Invalid method name"), hence two processes.

Thrift2's IDL is not on PyPI: `thrift2_idl()` extracts HBase's own
`org/apache/hadoop/hbase/thrift2/hbase.thrift` from the cached hbase-thrift jar into the cache
dir (`adapters.tables.hbase_thrift2`, where the table store loads it with thriftpy2; nothing of
HBase is kept in this repo).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapters.operations.probing import run_in_thread
from adapters.tables.hbase_thrift2 import load_thrift2, thrift2_client

from ._common import (
    LOCALHOST,
    PRIVATE_UMASK,
    Handle,
    Launch,
    Program,
    Service,
    ServiceFailed,
    free_ports,
    log_contains,
    port_open,
    run_checked,
    terminate,
    wait_for,
)
from .hbase_files import (
    COMPACTOR_CLASS,
    HBASE_POM,
    LOG4J2_PROPERTIES,
    MASTER_CLASS,
    MASTER_READY,
    THRIFT2_CLASS,
    THRIFT_CLASS,
    _site_xml,
    install_hbase,
    thrift2_idl,
)
from .toolchain import find_java, java_major, jdk_module_flags

__all__ = ["HBASE_POM", "HBaseServer", "install_hbase", "load_thrift2", "thrift2_client",
           "thrift2_idl"]

ZK_PORT_TAKEN = "Could not start ZK at requested port"
"""The master's log line when another process held the ZooKeeper port it was given."""


class HBaseServer(Service):
    """Standalone HBase with a Thrift1 and a Thrift2 gateway on 127.0.0.1.

    Attributes after `start()`: `thrift_host`, `thrift_port` (Thrift1), `thrift2_port`
    (Thrift2, same host), `zookeeper_port`, `log_paths`. `connection()` returns a happybase
    connection, `thrift2_client()` a thriftpy2 Thrift2 client (both buffered transport,
    binary protocol).
    """

    name = "hbase"

    def __init__(
        self,
        *,
        startup_timeout: float = 180.0,
        master_heap: str = "1g",
        thrift_heap: str = "512m",
        thrift_port: int | None = None,
        thrift_host: str = LOCALHOST,
        thrift2_heap: str = "384m",
        thrift2_port: int | None = None,
        zookeeper_port: int | None = None,
        extra_site: dict[str, str] | None = None,
        stop_timeout: float = 5.0,
        workdir: str | os.PathLike[str] | None = None,
        keep_workdir: bool | None = None,
    ) -> None:
        super().__init__(
            workdir=workdir, startup_timeout=startup_timeout, keep_workdir=keep_workdir
        )
        self.master_heap = master_heap
        self.thrift_heap = thrift_heap
        self.thrift_host = thrift_host  # the gateways' address (a bridge's, for namespaces)
        self.thrift_port: int = thrift_port or 0
        self._fixed_thrift_port = thrift_port
        self.thrift2_heap = thrift2_heap
        self.thrift2_port: int = thrift2_port or 0
        self._fixed_thrift2_port = thrift2_port
        self.zookeeper_port: int = zookeeper_port or 0
        self._fixed_zookeeper_port = zookeeper_port
        self.extra_site = dict(extra_site or {})
        self.stop_timeout = stop_timeout
        self.lib: Path | None = None
        self.java: Path | None = None
        self._master: Handle | None = None
        self._thrift: Handle | None = None
        self._thrift2: Handle | None = None
        self._env: dict[str, str] = {}

    # ------------------------------------------------------------------ info
    @property
    def log_paths(self) -> list[Path]:
        if self.workdir is None:
            return []
        logs = self.workdir / "logs"
        return [
            logs / "master.log",
            logs / "master.out",
            logs / "thrift.log",
            logs / "thrift.out",
            logs / "thrift2.log",
            logs / "thrift2.out",
        ]

    @property
    def running(self) -> bool:
        procs = (self._master, self._thrift, self._thrift2)
        return all(p is not None and p.poll() is None for p in procs)

    def connection(self, **kwargs: Any) -> Any:
        """A happybase.Connection to the Thrift server (happybase is an optional import)."""
        import happybase

        kwargs.setdefault("timeout", 60_000)
        return happybase.Connection(self.thrift_host, self.thrift_port, **kwargs)

    def thrift2_client(self, *, timeout_ms: int = 60_000) -> Any:
        """A thriftpy2 client of the Thrift2 gateway (`THBaseService`); `close()` it."""
        return thrift2_client(self.thrift_host, self.thrift2_port, timeout_ms=timeout_ms)

    def compactor_command(self) -> str:
        """How to run HBase's ``MajorCompactor`` tool against this server
        (``LETTERLOG_HBASE_COMPACTOR``, in ``services.env`` too): ``<workdir>/bin/
        hbase-major-compactor``, a script running a JVM on this installation's jars and
        configuration (what ``hbase org.apache.hadoop.hbase.util.compaction.MajorCompactor``
        runs on an HBase host)."""
        assert self.workdir is not None
        return str(self.workdir / "bin" / "hbase-major-compactor")

    def _write_compactor(self) -> None:
        import shlex

        assert self.workdir is not None
        script = Path(self.compactor_command())
        script.parent.mkdir(parents=True, exist_ok=True)
        java = shlex.join(self._java_cmd("256m", self.workdir / "logs" / "compactor.log",
                                         COMPACTOR_CLASS))
        script.write_text(f"#!/bin/sh\n# written by devtools/devservers/hbase.py\n"
                          f'exec {java} "$@"\n')
        script.chmod(0o700)

    # ------------------------------------------------------------------ lifecycle
    def install(self) -> None:
        self.java = find_java()
        self.lib = install_hbase()

    def _java_cmd(self, heap: str, log_file: Path, main: str, *args: str) -> list[str]:
        assert self.java is not None and self.lib is not None and self.workdir is not None
        major = java_major(self.java) or 17
        return [
            str(self.java),
            f"-Xmx{heap}",
            "-XX:+UseG1GC",
            "-Djava.net.preferIPv4Stack=true",
            "-Djava.awt.headless=true",
            f"-Djava.io.tmpdir={self.workdir / 'data' / 'tmp'}",
            *jdk_module_flags(major),
            f"-Dlog4j2.configurationFile={self.workdir / 'conf' / 'log4j2.properties'}",
            f"-Dletterlog.log.file={log_file}",
            "-Dhbase.log.dir=" + str(self.workdir / "logs"),
            "-cp",
            f"{self.workdir / 'conf'}:{self.lib}/*",
            main,
            *args,
        ]

    def _write_conf(self) -> None:
        assert self.workdir is not None
        wd = self.workdir
        for sub in ("conf", "logs", "data/tmp", "data/zk"):
            (wd / sub).mkdir(parents=True, exist_ok=True)
        site = {
            "hbase.cluster.distributed": "false",
            "hbase.rootdir": (wd / "data" / "hbase").as_uri(),
            "hbase.tmp.dir": str(wd / "data" / "tmp"),
            "hbase.zookeeper.property.dataDir": str(wd / "data" / "zk"),
            "hbase.zookeeper.quorum": LOCALHOST,
            "hbase.zookeeper.property.clientPort": str(self.zookeeper_port),
            "hbase.unsafe.stream.capability.enforce": "false",
            # bind and advertise 127.0.0.1 only; RPC ports chosen by the OS
            "hbase.master.hostname": LOCALHOST,
            "hbase.regionserver.hostname": LOCALHOST,
            "hbase.master.ipc.address": LOCALHOST,
            "hbase.regionserver.ipc.address": LOCALHOST,
            "hbase.master.port": "0",
            "hbase.regionserver.port": "0",
            # no web UIs
            "hbase.master.info.port": "-1",
            "hbase.regionserver.info.port": "-1",
            "hbase.thrift.info.port": "-1",
            # Thrift1 and Thrift2 (both gateways read this file): thread-pool server, buffered
            # transport, binary protocol (happybase's defaults); idle client sockets are not
            # cut after the default 60 s
            "hbase.regionserver.thrift.framed": "false",
            "hbase.regionserver.thrift.compact": "false",
            "hbase.thrift.server.socket.read.timeout": "3600000",
            # small machine: fewer handler threads, no periodic balancer/normalizer noise
            "hbase.regionserver.handler.count": "10",
            "hbase.master.handler.count": "10",
            "hbase.balancer.period": "3600000",
            # Hadoop's local file system sets each file's mode itself, from this umask (not
            # the process's): the WALs and store files 0600 in 0700 directories
            "fs.permissions.umask-mode": "077",
        }
        site.update(self.extra_site)
        (wd / "conf" / "hbase-site.xml").write_text(_site_xml(site))
        (wd / "conf" / "log4j2.properties").write_text(LOG4J2_PROPERTIES)

    def prepare(self) -> None:
        """Ports and the generated configuration."""
        try:
            import happybase  # noqa: F401
        except ImportError as exc:
            raise ServiceFailed(
                "hbase: the readiness probe needs happybase (pip install happybase thriftpy2)"
            ) from exc
        assert self.workdir is not None and self.lib is not None and self.java is not None
        # fail early (before any JVM starts) if the jar has no Thrift2 IDL
        thrift2_idl(self.lib)
        fixed = (self._fixed_zookeeper_port, self._fixed_thrift_port, self._fixed_thrift2_port)
        free = iter(free_ports(sum(1 for port in fixed if not port)))
        self.zookeeper_port = self._fixed_zookeeper_port or next(free)
        self.thrift_port = self._fixed_thrift_port or next(free)
        self.thrift2_port = self._fixed_thrift2_port or next(free)
        self._write_conf()
        self._write_compactor()
        self._env = dict(os.environ, JAVA_HOME=str(self.java.parent.parent))
        self._env.pop("CLASSPATH", None)
        self._env.pop("JAVA_TOOL_OPTIONS", None)

    def lost_a_port_race(self) -> bool:
        """ZooKeeper found its port taken (HBase then starts it on the next port and the
        master exits: the clients could not find it), or a Thrift gateway could not bind."""
        if self.workdir is None:
            return False
        logs = self.workdir / "logs"
        return (log_contains(logs / "master.log", ZK_PORT_TAKEN)
                or any(log_contains(logs / f"{name}.log", "Address already in use")
                       for name in ("thrift", "thrift2")))

    def programs(self) -> list[Program]:
        """The master (with region server and ZooKeeper), then the Thrift1 and Thrift2
        gateways (`thrift`, `thrift2`)."""
        assert self.workdir is not None
        workdir = self.workdir
        logs = workdir / "logs"

        def program(name: str, heap: str, main: str, *args: str) -> Program:
            command = self._java_cmd(heap, logs / f"{name}.log", main, *args)
            return Program(name, tuple(command), cwd=workdir, log=logs / f"{name}.out",
                           env=self._env, stop_wait=15, start_seconds=5, priority=30)

        def gateway(name: str, heap: str, main: str, port: int) -> Program:
            return program(name, heap, main, "-threadpool", "-b", self.thrift_host, "-p",
                           str(port), "--infoport", "-1", "start")

        keep = self.keep_workdir or self._given_workdir is not None
        # an exit 0 is the end of `stop_command()`'s cluster shutdown: not restarted
        return [
            replace(program("master", self.master_heap, MASTER_CLASS, "start"),
                    stop_wait=90 if keep else self.stop_timeout, priority=20,
                    clean_exit_stops=True),
            gateway("thrift", self.thrift_heap, THRIFT_CLASS, self.thrift_port),
            gateway("thrift2", self.thrift2_heap, THRIFT2_CLASS, self.thrift2_port),
        ]

    def stop_command(self) -> list[str]:
        """HBase's own orderly stop (``hbase master stop --shutDownCluster``, what
        ``stop-hbase.sh`` runs): the master tells the region server to close every region,
        which flushes its memstore to a store file and archives the write-ahead log; then
        the master JVM exits 0. Measured here: the command 5 s, the master gone 15 s after
        it started."""
        assert self.workdir is not None
        return self._java_cmd("256m", self.workdir / "logs" / "stop.log", MASTER_CLASS, "stop",
                              "--shutDownCluster")

    def bring_up(self, launch: Launch) -> None:
        assert self.workdir is not None
        logs = self.workdir / "logs"
        master, thrift, thrift2 = self.programs()
        self._master = launch(master)
        wait_for(
            lambda: log_contains(logs / "master.log", MASTER_READY),
            what="hbase master initialization",
            timeout=self.startup_timeout,
            log_paths=self.log_paths,
            procs=[self._master],
        )
        # both gateways start at once (each is a ~4 s JVM start)
        self._thrift = launch(thrift)
        self._thrift2 = launch(thrift2)
        self.await_gateways()

    def await_gateways(self, timeout: float | None = None) -> None:
        """Waits for both Thrift ports, then for a real round trip through each."""
        procs = [p for p in (self._master, self._thrift, self._thrift2) if p is not None]
        remaining = timeout or max(30.0, self.startup_timeout)
        ports = (self.thrift_port, self.thrift2_port)
        wait_for(
            lambda: all(port_open(self.thrift_host, port) for port in ports),
            what=f"hbase thrift ports {self.thrift_host}:{ports[0]} (Thrift1) and {ports[1]} "
            "(Thrift2)",
            timeout=remaining,
            log_paths=self.log_paths,
            procs=procs,
            interval=0.25,
        )
        wait_for(
            lambda: run_in_thread(self.probe, timeout=120),
            what="hbase thrift probe (create table, Thrift1 put/get, Thrift2 put/get/exists, "
            "delete table)",
            timeout=remaining,
            log_paths=self.log_paths,
            procs=procs,
            interval=1.0,
        )

    def probe(self) -> bool:
        """Create a table (Thrift1), put a cell with a timestamp and read it back through
        Thrift1, put two cells with their own timestamps through Thrift2 and read them back
        through both (`get`, `exists`), drop the table."""
        import happybase

        table = f"letterlog_probe_{secrets.token_hex(4)}".encode()
        conn = happybase.Connection(self.thrift_host, self.thrift_port, timeout=60_000)
        try:
            conn.create_table(table, {"f": {"max_versions": 1}})
            try:
                t = conn.table(table)
                t.put(b"row", {b"f:q": b"ok"}, timestamp=42)
                got = t.row(b"row", include_timestamp=True)
                if got != {b"f:q": (b"ok", 42)}:
                    raise RuntimeError(f"probe read back {got!r}")
                self._probe_thrift2(table)
                got = t.row(b"row2", include_timestamp=True)
                if got != {b"f:a": (b"a", 7), b"f:b": (b"b", 8)}:
                    raise RuntimeError(f"probe read back {got!r} (Thrift2 put, Thrift1 get)")
            finally:
                conn.delete_table(table, disable=True)
            return True
        finally:
            conn.close()

    def _probe_thrift2(self, table: bytes) -> None:
        t2 = load_thrift2()
        client = self.thrift2_client()
        try:
            cells = [
                t2.TColumnValue(family=b"f", qualifier=b"a", value=b"a", timestamp=7),
                t2.TColumnValue(family=b"f", qualifier=b"b", value=b"b", timestamp=8),
            ]
            client.putMultiple(table, [t2.TPut(row=b"row2", columnValues=cells)])
            result = client.get(table, t2.TGet(row=b"row2"))
            got = {(c.qualifier, c.value, c.timestamp) for c in result.columnValues}
            if got != {(b"a", b"a", 7), (b"b", b"b", 8)}:
                raise RuntimeError(f"Thrift2 probe read back {got!r}")
            if not client.exists(table, t2.TGet(row=b"row")):
                raise RuntimeError("Thrift2 probe: exists() misses the Thrift1 row")
        finally:
            client.close()

    def _stop(self) -> None:
        terminate(self._thrift2, timeout=15)  # type: ignore[arg-type]
        self._thrift2 = None
        terminate(self._thrift, timeout=15)  # type: ignore[arg-type]
        self._thrift = None
        # Throw-away data needs no orderly shutdown: SIGTERM, a short grace, then SIGKILL.
        # Kept data (keep_workdir / a given workdir) gets HBase's own orderly stop first.
        keep = self.keep_workdir or self._given_workdir is not None
        master = self._master
        wd = self.workdir
        if keep and self.started and wd and master is not None and master.poll() is None:
            with contextlib.suppress(ServiceFailed):
                run_checked(self.stop_command(), what="hbase: master stop", cwd=wd,
                            log=wd / "logs" / "stop.out", env=self._env, timeout=60,
                            umask=PRIVATE_UMASK)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    master.wait(timeout=90)  # type: ignore[attr-defined]
        terminate(master, timeout=90 if keep else self.stop_timeout)  # type: ignore[arg-type]
        self._master = None
