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
  parts, and still opens the bystanders';
- no marker of an erased message, in any encoding (zstd frames opened), in the data
  directory (payloads, intents, records, vault), in PostgreSQL's files or Kafka's segments
  (they hold sealed parts only), or in a live HBase store file once ``erase complete`` has
  compacted; and, once HBase's cleaner chores have run (short schedules: ``SITE``), in no
  file under HBase's root, its write-ahead logs and archive included.

One deployment, one campaign for the module (ADR 0082: a major compaction of HBase's tables
takes minutes, so there is one): every boundary is killed on messages of an account of its
own, and is examined at once ("left", what an attacker finds before the repair). Then one
repair pass, as the docs say, and the attacker's examination of every boundary, each test
below asserting one boundary's results (its id names it). Two things keep the boundaries
apart:

- **A killed erasure's intent is held** by this process until the repair pass, as its
  process held it (a session advisory lock on its row in the log's database: ADR 0084):
  the next command that opens the store would finish it otherwise (any command does), and
  this campaign wants every killed erasure left for the documented repair. Released, they
  are what a power cut leaves under erasures running at once: N intents, nobody holding
  them. First a purge run after the payloads' grace (0 here, the workers caught up)
  deletes the purge runs' payloads from HBase's payload table; then ``erase complete``
  finishes every intent, deletes the erasures' payloads and compacts HBase once.
- **A killed purge run is repaired by the next purge run at once**, before the next boundary
  (that is the documented repair; the next killed run would otherwise purge what the last
  one left due). The purge runs come first, so that no purge run acts on an erasure's
  ``Purged``; the two erasures killed at ``keys:rotated`` come last, so that the KEK they
  leave in the vault is removed by the repair pass, not by a later erasure's sweep.

``KILLED`` is the killed-step table, ``PHASES`` where the time went (``pytest -s`` prints
both; docs/lifecycle.md has the table). A server of its own: the short WAL and cleaner
schedules must not change the others'.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from adapters.embedded import Letterlog
from adapters.lifecycle.sharedintents import LOCK_CLASS, TABLE
from devtools.devservers import HBaseServer
from tests.erasure_crash_support import (
    ERASE_STEPS,
    PURGE_STEPS,
    Table,
    deliver_case,
    describe,
    erase_target,
    left_by_a_killed_erasure,
    left_by_a_killed_purge_run,
    letterlog,
    print_table,
)
from tests.erasure_support import (
    files_holding,
    files_holding_any_form,
    killed,
    opened_by_a_fresh_reader,
)
from tests.factories import database, scale_out_env, until
from tests.services.erasure_attacker import (
    copy_vault,
    evidence,
    intents_left,
    sql,
    stale_keks,
)
from tests.services.servers import _fixture
from tests.services.support import ERASURE_SITE, ROOT, Worker

# the first test's setup is the whole campaign (HBase's start, every kill, a compaction):
# pytest-timeout counts it against that test (a bound above the campaign's own waits)
pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(1800)]

SITE = {**ERASURE_SITE, "hbase.hfile.compaction.discharger.interval": "1000"}
HBASE_LOGS = ("WALs/", "oldWALs/", "archive/")  # HBase's own retention (docs/lifecycle.md)
CLEAN_DEADLINE_S = 300.0
REPAIR_S = 900.0  # `erase complete` bound (LETTERLOG_ERASE_COMPLETE_WAIT_SECONDS) and more
#: every purge run: deleted messages due at once, payloads' grace over (as if it had passed)
DUE = {"LETTERLOG_DELETED_RETENTION_DAYS": "0", "LETTERLOG_PAYLOAD_GRACE_HOURS": "0"}
KILLED: Table = []
PHASES: dict[str, float] = {}  # seconds per phase of the campaign


@dataclass
class Case:
    """One boundary: the command killed at ``step``, on ``account``'s messages."""

    command: str
    step: str
    ids: list[UUID] = field(default_factory=list)  # what it erases, their keys, markers
    key_ids: list[UUID] = field(default_factory=list)
    markers: list[bytes] = field(default_factory=list)
    kept: list[bytes] = field(default_factory=list)  # its bystander's markers
    left: dict[str, Any] = field(default_factory=dict)  # found before the repair
    failed: str = ""  # what went wrong before the repair
    after: list[str] = field(default_factory=list)  # found after the repair pass

    @property
    def name(self) -> str:
        return f"{self.command} killed at {self.step}"

    @property
    def account(self) -> str:
        return f"crash-{self.command.replace(' ', '-')}-{self.step.replace(':', '-')}@example.org"


LAST = "keys:rotated"  # the erasures killed here: last (module docstring)
ORDER = ([("purge run", s) for s in PURGE_STEPS]
         + [(c, s) for c in ("erase-message", "erase-account") for s in ERASE_STEPS if s != LAST]
         + [(c, LAST) for c in ("erase-message", "erase-account")])
ERASE_REPAIR = "`letterlog erase complete` (one for the twelve erasures killed)"
PURGE_REPAIR = ("`letterlog purge run` (the next run, at once); a purge run after the "
                "payloads' grace; then `letterlog erase complete`")


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
    """One deployment for the module: its data directory, the environment of every process,
    a relay and a worker running."""
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
            mp.setenv(name, value)  # the commands and fresh readers: this deployment
        with Letterlog.open(data):
            pass  # the store: keys, the log's tables
        relay = Relay(env, root / "relay.log")
        worker = Worker(env, root / "worker.log").start()
        try:
            yield {"data": data, "dsn": dsn, "env": env, "worker": worker, "relay": relay,
                   "root": root, "pg_root": Path(postgres_server.workdir) / "data",
                   "admin_dsn": postgres_server.admin_dsn,
                   "hbase_root": Path(hbase.workdir) / "data" / "hbase",
                   "kafka": Path(kafka_server.workdir),
                   "retiring_only": True}  # processes came and went: see stale_keks
        finally:
            worker.stop()
            relay.stop()


def caught_up(dep: dict[str, Any]) -> None:
    """The relay has published the log's head and the worker has applied it
    (``letterlog lag`` exits 0): the rows are in HBase before the crash."""
    worker: Worker = dep["worker"]

    def done() -> bool:
        assert worker.alive(), worker.tail()
        return letterlog(dep["data"], "lag").returncode == 0

    until(done, timeout=240, what="the relay and the worker to catch up",
          explain=lambda: worker.tail() + "\nrelay:\n" + dep["relay"].log.read_text()[-2000:])


def stale_now(dep: dict[str, Any], scratch: Path) -> int:
    """The rotated-away KEKs in the vault now (counted before a kill: the kill's own)."""
    try:
        return stale_keks(copy_vault(dep["data"], scratch), dep["dsn"], retiring_only=True)
    finally:
        shutil.rmtree(scratch)


def intents(dsn: str) -> set[int]:
    """The ids of the erasure intents in the log's database (ADR 0084): not finished."""
    import psycopg

    try:
        return {int(r[0]) for r in sql(dsn, f"SELECT id FROM {TABLE}")}  # noqa: S608
    except psycopg.errors.UndefinedTable:
        return set()


def hold(dsn: str, intent: int) -> Any:
    """The intent held as its process held it: its session advisory lock, taken on a
    session of this process (the killed one's went with its connection)."""
    import psycopg

    conn = psycopg.connect(dsn, autocommit=True)
    (got,) = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, intent)).fetchone()
    assert got, f"intent {intent} is held by another session"
    return conn


def kill(dep: dict[str, Any], case: Case, args: list[str], scratch: Path, **env: str) -> None:
    """``args`` killed at the case's step; what it left (``case.left``, as the per-case
    version found it: its own intent and rotated-away KEK, not earlier boundaries')."""
    data = dep["data"]
    before, stale = intents_left(dep["dsn"], data), stale_now(dep, scratch / "before")
    killed(letterlog(data, *args, crash_at=case.step, **env))
    found = evidence(dep, scratch / "left", case.key_ids, case.markers)
    case.left = {"intents": found["intents"] - before,
                 "purged": sum(str(i) in found["purged"] for i in case.ids),
                 "keys_open": len(found["keys_open"]),
                 "stale_keks": found["stale_keks"] - stale,
                 "files_with_markers": sorted(found["files"])}


def repaired(data: Path, line: str, **env: str) -> None:
    """``letterlog <line>``, a repair the docs name: it exits 0, no traceback."""
    p = letterlog(data, *line.split(), timeout=REPAIR_S, **env)
    assert p.returncode == 0 and b"Traceback" not in p.stderr, (line, p.stderr.decode())


@pytest.fixture(scope="module")
def campaign(deployment: dict[str, Any], tmp_path_factory: pytest.TempPathFactory,
             ) -> dict[str, Any]:
    """Every boundary killed, the repair pass, the attacker's examination (module
    docstring): the cases by name, each with what was left and what is found after."""
    dep, data = deployment, deployment["data"]
    scratch = tmp_path_factory.mktemp("crash-hbase-scratch")
    cases = {f"{c}-{s}": Case(c, s) for c, s in ORDER}
    clock = time.monotonic()

    def phase(name: str) -> None:
        nonlocal clock
        PHASES[name] = round(time.monotonic() - clock, 1)
        clock = time.monotonic()

    # every case's messages and a bystander's, the store opened for each: its data keys a
    # batch of their own (a destroy re-wraps the batch's other keys: one batch for all would
    # multiply every key's row versions in PostgreSQL, and the attacker's work, by 17)
    for case in cases.values():
        with Letterlog.open(data) as store:
            case.ids, case.key_ids, case.markers, case.kept = deliver_case(store, case.account)
    caught_up(dep)  # every row in HBase before any kill
    phase("deliveries")

    for n, case in enumerate(c for c in cases.values() if c.command == "purge run"):
        with Letterlog.open(data) as store:
            for i in case.ids:
                store.delete(i)
        caught_up(dep)  # the deletes in HBase: what the purge run finds due
        try:
            kill(dep, case, ["purge", "run"], scratch / f"p{n}", **DUE)
        except AssertionError as error:
            case.failed = f"{case.name}: {error}"
        try:
            repaired(data, "purge run", **DUE)  # the next run, at once: before the next kill
        except AssertionError as error:
            raise AssertionError(f"{case.name}: the next purge run failed: {error}") from None
    phase("purge runs killed, each repaired by the next run")

    held: list[Any] = []  # the killed erasures' intents, held until the repair pass
    try:
        for n, case in enumerate(c for c in cases.values() if c.command != "purge run"):
            args, case.ids, case.key_ids, case.markers = erase_target(
                case.command, case.account, case.ids, case.key_ids, case.markers)
            before = intents(dep["dsn"])
            try:
                kill(dep, case, args, scratch / f"e{n}")
            except AssertionError as error:
                case.failed = f"{case.name}: {error}"
            held += [hold(dep["dsn"], i) for i in sorted(intents(dep["dsn"]) - before)]
        phase("erasures killed")
        # the purge runs' payloads: deleted from HBase's payload table by the first purge
        # run after their grace (here 0, the workers caught up: as if it had passed)
        caught_up(dep)
        repaired(data, "purge run", **DUE)
    finally:
        for conn in held:
            conn.close()  # the lock with the session: N intents, nobody holding them
    # every intent finished, the workers waited for, the erasures' payloads deleted, and HBase
    # compacted once: the tables the purges and erasures deleted from, the payload table
    repaired(data, "erase complete")
    phase("repair pass: a purge run after the grace, erase complete")

    erased = [m for c in cases.values() for m in c.markers]
    found = evidence(dep, scratch / "after", [k for c in cases.values() for k in c.key_ids],
                     erased)
    phase("the attacker: keys and the data directory")
    opened = set(opened_by_a_fresh_reader(data, erased + [c.kept[0] for c in cases.values()]))
    servers = {**{f"kafka:{f}": m for f, m in files_holding_any_form(dep["kafka"], erased).items()},
               **{f"pg:{f}": m for f, m in files_holding_any_form(dep["pg_root"], erased).items()},
               **{f"hbase:{f}": m for f, m in files_holding(dep["hbase_root"], erased).items()
                  if not f.startswith(HBASE_LOGS)}}
    phase("the attacker: a fresh reader, the servers' files")
    for case in cases.values():
        mine = set(case.markers)
        purged = sum(str(i) in found["purged"] for i in case.ids)
        if purged != len(case.ids):
            case.after.append(f"{purged}/{len(case.ids)} purged in the log")
        if keys := set(case.key_ids) & set(found["keys_open"]):
            case.after.append(f"{len(keys)} data key(s) recoverable")
        for where, hits in [*found["files"].items(), *servers.items()]:
            if mine & set(hits):
                case.after.append(f"a marker in {where}")
        if opened & mine:
            case.after.append("a fresh reader opens its sealed parts")
        if case.kept[0] not in opened:
            case.after.append("its bystander's message does not open")
        KILLED.append((case.command, case.step, describe(case.left, len(case.ids)),
                       PURGE_REPAIR if case.command == "purge run" else ERASE_REPAIR))
    status = letterlog(data, "erase", "status")
    return {"cases": cases, "found": found, "status": status, "erased": erased}


@pytest.mark.parametrize("name", [f"{c}-{s}" for c, s in ORDER])
def test_a_command_killed_at_any_step_on_scale_out_leaves_nothing_after_the_repair(
        campaign: dict[str, Any], name: str) -> None:
    """One boundary: what the kill left (as the per-case version asserted), and nothing of
    its messages anywhere once the repair pass has run."""
    case: Case = campaign["cases"][name]
    assert not case.failed, case.failed
    check = (left_by_a_killed_purge_run if case.command == "purge run"
             else left_by_a_killed_erasure)
    try:
        check(case.step, case.left, len(case.ids))
    except AssertionError as error:
        raise AssertionError(f"{case.name}, before the repair: {error}") from None
    assert case.after == [], f"{case.name}, after the repair pass: {case.after}"


def test_the_repair_pass_leaves_no_intent_no_retiring_kek_and_nothing_pending(
        campaign: dict[str, Any]) -> None:
    found, status = campaign["found"], campaign["status"]
    assert found["intents"] == 0 and found["stale_keks"] == 0, found
    assert status.returncode == 0 and status.stdout == b"no erasure pending\n", status


def test_after_the_cleaners_no_file_of_hbase_holds_an_erased_marker(
        deployment: dict[str, Any], campaign: dict[str, Any]) -> None:
    """Last in the module: HBase's write-ahead logs and archive, kept for its cleaners'
    schedules (here seconds), lose every marker the boundaries erased."""
    erased, root = campaign["erased"], deployment["hbase_root"]
    owner = {m: c.name for c in campaign["cases"].values() for m in c.markers}
    deadline = time.monotonic() + CLEAN_DEADLINE_S
    left = files_holding(root, erased)
    while left and time.monotonic() < deadline:
        time.sleep(1.0)  # polling files for HBase's cleaner chores; no event to wait on
        left = files_holding(root, erased)
    PHASES["HBase's cleaners"] = round(CLEAN_DEADLINE_S - (deadline - time.monotonic()), 1)
    named = {f: sorted({owner[m] for m in hits}) for f, hits in left.items()}
    assert named == {}, f"HBase still holds erased bytes {CLEAN_DEADLINE_S} s after: {named}"
    left = files_holding_any_form(root, erased)
    assert left == {}, {f: sorted({owner[m] for m in hits}) for f, hits in left.items()}


@pytest.fixture(autouse=True, scope="module")
def _killed_step_table() -> Any:
    """Prints the killed-step table and the campaign's phases (``pytest -s``)."""
    yield
    print_table(KILLED)
    for name, seconds in PHASES.items():
        print(f"{seconds:8.1f} s  {name}")
