"""Helpers several server tests share: the stream pipeline (Kafka, workers, HBase) and its
worker processes, projecting into HBase, the erasure site, the CLI against slapd."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from adapters.bootstrap.scaleout import relay as make_relay
from adapters.embedded import Letterlog
from adapters.readside.host import ProjectionHost
from adapters.readside.verification import verify_tables
from adapters.streaming.relay import OutboxRelay
from adapters.streaming.worker import kafka_lag
from adapters.tables.hbase import HBaseTableStore
from devtools.devservers import LdapServer
from projections.registry import ALL
from projections.runner import identity
from tests.factories import scale_out_env, until


def drop_tables(hbase_server: Any, prefix: str) -> None:
    """Drops every HBase table under ``prefix`` (a test's own tables on the shared server)."""
    tables = HBaseTableStore(hbase_server.thrift_host, hbase_server.thrift_port,
                             table_prefix=prefix)
    try:
        for table in tables.list_tables():
            tables.drop_table(table)
    finally:
        tables.close()

ROOT = Path(__file__).resolve().parents[2]


PARTITIONS = 4


class Worker:
    """``python -m adapters.cli.worker`` as a subprocess, its output in a log file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, **extra: str) -> Worker:
        env = {**os.environ, **self.env, **extra}
        out = open(self.log, "ab")  # noqa: SIM115 - the child owns it
        out.write(f"\n===== worker start {extra} =====\n".encode())
        out.flush()
        self.proc = subprocess.Popen([sys.executable, "-m", "adapters.cli.worker"],
                                     cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.proc = None

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
        self.proc = None

    def tail(self, n: int = 40) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "worker log tail:\n" + "\n".join(lines[-n:])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Pipeline:
    """One test's world: its database, topic, consumer group and HBase table prefix."""

    def __init__(self, root: Path, dsn: str, bootstrap: str, hbase: Any,
                 write_path: str = "thrift1") -> None:
        tag = secrets.token_hex(4)
        self.topic = f"stream-e2e-{tag}"
        self.group = f"stream-e2e-{tag}"
        self.prefix = f"e2e{tag}"
        self.bootstrap = bootstrap
        self.letterlog = Letterlog.open(root / "data", event_store="postgres", postgres_dsn=dsn,
                                        durability="normal", kafka_bootstrap=bootstrap,
                                        kafka_topic=self.topic)
        from adapters.tables.hbase import HBaseTableStore

        self.tables = HBaseTableStore(hbase.thrift_host, hbase.thrift_port,
                                      table_prefix=self.prefix)
        # the worker reads the log's settings too: the data keys are beside the log, their
        # key-encryption keys in the store's vault (every process opens the same one)
        self.worker = Worker(scale_out_env(
            root / "worker", dsn=dsn, hbase=hbase, kafka_bootstrap=bootstrap,
            key_vault=str(root / "data" / "vault.sqlite"),
            prefix=self.prefix, topic=self.topic, stream_group=self.group, stream_batch="40",
            stream_within="0.2", stream_commit_interval="0.5", stream_session_timeout="6",
        ), root / "worker.log")
        if write_path == "thrift2":  # the worker writes a timestamp per cell (putMultiple)
            assert getattr(hbase, "thrift2_port", None), "the HBase server has no Thrift2"
            self.worker.env["LETTERLOG_HBASE_THRIFT2_PORT"] = str(hbase.thrift2_port)

    def relay(self, **options: Any) -> OutboxRelay:
        return make_relay(self.letterlog.settings, log=self.letterlog,
                                         partitions=PARTITIONS, batch=100, **options)

    def publish(self) -> int:
        with self.relay() as relay:
            return relay.run_once()

    def lag(self) -> dict[str, Any]:
        return kafka_lag(self.bootstrap, self.topic, self.group)

    def caught_up(self) -> bool:
        if not self.worker.alive():
            raise AssertionError(f"the worker exited. {self.worker.tail()}")
        lag = self.lag()
        return bool(lag["partitions"]) and lag["events"] == 0 and all(
            p["committed"] is not None for p in lag["partitions"].values() if p["end"])

    def wait_caught_up(self, timeout: float = 180) -> None:
        until(self.caught_up, timeout=timeout, what="the worker to commit every record",
              explain=lambda: f"lag {self.lag()}; {self.worker.tail()}")

    def assert_tables_equal_the_fold(self) -> None:
        head = self.letterlog.max_position()
        reports = verify_tables(self.tables, identity, self.letterlog.events, ALL, head)
        differing = {r.table: r.differences for r in reports if not r.identical}
        assert differing == {}, differing
        assert sum(r.live_cells for r in reports) > 0

    def close(self) -> None:
        self.worker.stop()
        try:
            for table in self.tables.list_tables():
                self.tables.drop_table(table)
        finally:
            self.tables.close()
            self.letterlog.close()


def letterlog(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "adapters.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def store_env(ldap: LdapServer, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERLOG_")}
    return {**env, **ldap.settings_env(), "LETTERLOG_DATA": str(data)}


def project_into(store: Letterlog, tables: HBaseTableStore) -> None:
    """The same projectors as the stream workers, run in the store's process into HBase:
    HBase is current before each command returns, so a purge job reads what it would read
    there."""
    assert store.projections is not None
    store.projections.close()
    store.projections = ProjectionHost(tables, store.events, None, store.max_position)
    store.catch_up()


ERASURE_SITE = {
    "hbase.regionserver.logroll.period": "5000",  # a new WAL every 5 s
    "hbase.regionserver.optionalcacheflushinterval": "5000",  # memstores flushed after 5 s
    "hbase.regionserver.periodicmemstoreflusher.rangeofdelayseconds": "1",
    "hbase.master.cleaner.interval": "1000",  # archived WALs and store files deleted
    "hbase.master.logcleaner.ttl": "1",
    "hbase.master.hfilecleaner.ttl": "1",
}
