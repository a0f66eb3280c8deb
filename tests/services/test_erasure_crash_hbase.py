"""Erasure as an intent that completes, on the whole scale-out deployment (ADR 0063, ADR 0082):
the log, its outbox and the wrapped data keys in PostgreSQL, the KEKs in the named vault,
``letterlog relay`` publishing to Kafka and a ``letterlog worker`` writing HBase, each a
real process. ``kill -9`` at every step boundary of ``erase-message``, ``erase-account``
and ``purge run`` (the test fault point ``LETTERLOG_TEST_CRASH_AT``), then what
docs/lifecycle.md says to run on scale-out; then the attacker:

- every key the deployment holds (every KEK in a copy of the vault and KEK-sized windows
  near KEK ids in its files) tried on every wrapped copy of the erased messages' data keys
  (the live row, windows near the key id in PostgreSQL's heap and ``pg_wal``): none opens;
  a fresh reader with the deployment's keys opens none of the erased messages' sealed
  parts, and still opens the bystander's;
- no marker of an erased message, in any encoding (zstd frames opened), in the data
  directory (payloads, intents, records, vault), in PostgreSQL's files or Kafka's segments
  (they hold sealed parts only), or in a live HBase store file once ``erase complete`` has
  compacted; and, once HBase's cleaner chores have run (short schedules: ``SITE``), in no
  file under HBase's root, its write-ahead logs and archive included.

``KILLED`` is the killed-step table (``pytest -s`` prints it; docs/lifecycle.md has it).
A server of its own: the short WAL and cleaner schedules must not change the others'.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from adapters.devservers import HBaseServer
from adapters.embedded import Letterlog
from tests.erasure_crash_support import (
    ERASE_STEPS,
    PURGE_STEPS,
    Table,
    erase_case,
    letterlog,
    print_table,
    purge_case,
)
from tests.erasure_support import files_holding, files_holding_any_form
from tests.factories import database, scale_out_env, until
from tests.services.erasure_attacker import state_of
from tests.services.servers import _fixture
from tests.services.support import ERASURE_SITE, ROOT, Worker

pytestmark = [pytest.mark.services, pytest.mark.slow]

SITE = {**ERASURE_SITE, "hbase.hfile.compaction.discharger.interval": "1000"}
HBASE_LOGS = ("WALs/", "oldWALs/", "archive/")  # HBase's own retention (docs/lifecycle.md)
CLEAN_DEADLINE_S = 300.0
REPAIR_S = 900.0  # `erase complete` bound (LETTERLOG_ERASE_COMPLETE_WAIT_SECONDS) and more
KILLED: Table = []
ERASED: list[bytes] = []  # every erased marker of the module, for the final scan


@pytest.fixture(scope="module")
def hbase() -> Any:
    yield from _fixture("hbase-erasure-crash", lambda: HBaseServer(extra_site=SITE))


class Relay:
    """``letterlog relay`` as a process of the deployment, its output in a log file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        out = open(log, "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen([sys.executable, "-m", "adapters.cli", "relay"], cwd=ROOT,
                                     env={**os.environ, **env}, stdout=out,
                                     stderr=subprocess.STDOUT)
        out.close()
        self.log = log

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, hbase: Any, postgres_server: Any,
               kafka_server: Any) -> Iterator[dict[str, Any]]:
    """One deployment for the module's cases (each erases messages of its own): its data
    directory, the environment of every process, a relay and a worker running."""
    root = tmp_path_factory.mktemp("crash-hbase")
    data, tag = root / "data", secrets.token_hex(4)
    with database(postgres_server) as dsn, pytest.MonkeyPatch.context() as mp:
        env = scale_out_env(
            data, dsn=dsn, hbase=hbase, kafka_bootstrap=kafka_server.bootstrap,
            prefix=f"ck{tag}", topic=f"ck-{tag}", stream_group=f"ck-{tag}",
            stream_batch="40", stream_within="0.2", stream_commit_interval="0.5",
            stream_session_timeout="6", hbase_thrift2_port=str(hbase.thrift2_port),
            hbase_compactor=hbase.compactor_command(), erase_complete_wait_seconds="500")
        for name, value in env.items():
            mp.setenv(name, value)  # the cases' commands and fresh readers: this deployment
        with Letterlog.open(data):
            pass  # the store: keys, the log's tables
        relay = Relay(env, root / "relay.log")
        worker = Worker(env, root / "worker.log").start()
        try:
            yield {"data": data, "dsn": dsn, "env": env, "worker": worker, "relay": relay,
                   "pg_root": Path(postgres_server.workdir) / "data",
                   "admin_dsn": postgres_server.admin_dsn,
                   "hbase_root": Path(hbase.workdir) / "data" / "hbase",
                   "kafka": Path(kafka_server.workdir),
                   "retiring_only": True}  # processes came and went: see stale_keks
        finally:
            worker.stop()
            relay.stop()


def caught_up(dep: dict[str, Any]) -> None:
    """The relay has published the log's head and the worker has applied it
    (``letterlog lag`` exits 0): the erased rows are in HBase before the crash."""
    worker: Worker = dep["worker"]

    def done() -> bool:
        assert worker.alive(), worker.tail()
        return letterlog(dep["data"], "lag").returncode == 0

    until(done, timeout=240, what="the relay and the worker to catch up",
          explain=lambda: worker.tail() + "\nrelay:\n" + dep["relay"].log.read_text()[-2000:])


def nothing_in_servers(dep: dict[str, Any], ids: list[UUID], markers: list[bytes]) -> None:
    """After the repair: Kafka's segments and PostgreSQL's files hold no erased marker (only
    sealed parts), no live HBase store file holds one (compacted); the rest of HBase's files
    are scanned at the module's end, after its cleaners."""
    ERASED.extend(markers)
    for server in (dep["kafka"], dep["pg_root"]):
        assert files_holding_any_form(server, markers) == {}, server
    left = files_holding(dep["hbase_root"], markers)
    assert {f for f in left if not f.startswith(HBASE_LOGS)} == set(), left


@pytest.mark.parametrize("step", ERASE_STEPS)
@pytest.mark.parametrize("command", ["erase-message", "erase-account"])
def test_an_erasure_killed_at_any_step_on_scale_out_is_finished_by_erase_complete(
        tmp_path: Path, deployment: dict[str, Any], command: str, step: str) -> None:
    erase_case(deployment["data"], partial(state_of, deployment), tmp_path, command, step,
               KILLED, repair=["erase complete"], settle=partial(caught_up, deployment),
               then=partial(nothing_in_servers, deployment), timeout=REPAIR_S)


@pytest.mark.parametrize("step", PURGE_STEPS)
def test_a_purge_run_killed_at_any_step_on_scale_out_is_finished_by_the_next_run(
        tmp_path: Path, deployment: dict[str, Any], step: str) -> None:
    """The next run finishes the keys; ``erase complete`` compacts HBase after the workers;
    the payloads, released on HBase with a grace period (ADR 0071), go with the run after it
    (the grace is 0 here: as if the period had passed)."""
    purge_case(deployment["data"], partial(state_of, deployment), tmp_path, step, KILLED,
               repair=["purge run", "erase complete", "purge run"],
               settle=partial(caught_up, deployment),
               then=partial(nothing_in_servers, deployment), timeout=REPAIR_S,
               LETTERLOG_PAYLOAD_GRACE_HOURS="0")


def test_after_the_cleaners_no_file_of_hbase_holds_an_erased_marker(
        deployment: dict[str, Any]) -> None:
    """Last in the module: HBase's write-ahead logs and archive, kept for its cleaners'
    schedules (here seconds), lose every marker the cases erased."""
    if not ERASED:
        pytest.skip("no case ran before this one")
    root = deployment["hbase_root"]
    deadline = time.monotonic() + CLEAN_DEADLINE_S
    left = files_holding(root, ERASED)
    while left and time.monotonic() < deadline:
        time.sleep(1.0)  # polling files for HBase's cleaner chores; no event to wait on
        left = files_holding(root, ERASED)
    assert left == {}, f"HBase still holds erased bytes {CLEAN_DEADLINE_S} s after: {left}"
    assert files_holding_any_form(root, ERASED) == {}


@pytest.fixture(autouse=True, scope="module")
def _killed_step_table() -> Any:
    """Prints the killed-step table once the module's tests have run (``pytest -s``)."""
    yield
    print_table(KILLED)
