"""Erasure intents shared by every host of a scale-out store (ADR 0084, issues 39 and 40).

Two hosts, each a data directory of its own, one PostgreSQL log and one key cluster. Host A
runs ``erase-message`` or ``purge run`` and is killed (SIGKILL, the test fault point) after
``Message.Purged`` is in the log and before or after the keys are destroyed; then its data
directory is deleted (the host is gone, its disk with it). Host B, whose data directory is
empty, finds the unfinished intent (``erase status`` says it finished it), ``erase
complete`` (or the next ``purge run``) leaves nothing: the attacker, with every key the
deployment holds and every file of both PostgreSQL clusters, opens no data key of the
erased messages, and a message beside them still opens on host B. Before ADR 0084 the intent
was a file on host A's disk: host B said "no erasure pending" and the keys stayed live.

And a live holder's intent is its own: host A stopped (SIGSTOP) with its intent held, host
B's ``erase status`` lists it as running (exit 3) and ``erase complete`` leaves it; killed,
its session's advisory lock goes with its connection, and host B finishes it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

from adapters.embedded import Letterlog
from adapters.lifecycle.sharedintents import LOCK_CLASS
from tests.erasure_crash_support import NOTHING_LEFT, a_store, letterlog
from tests.erasure_support import killed, opened_by_a_fresh_reader
from tests.factories import BIN, until
from tests.services.erasure_attacker import intents_left, state_of

pytestmark = [pytest.mark.services, pytest.mark.slow]


@pytest.fixture
def hosts(tmp_path: Path, pg_dsn: str, postgres_server: Any, key_dsn: str,
          key_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Host A's and host B's data directories, and what the attacker reads (``dep``: the
    deployment as host B sees it)."""
    env = {"LETTERLOG_EVENT_STORE": "postgres", "LETTERLOG_POSTGRES_DSN": pg_dsn,
           "LETTERLOG_KEY_STORE_DSN": key_dsn,
           "LETTERLOG_KEY_VAULT": str(tmp_path / "never" / "vault.sqlite"),
           "LETTERLOG_TABLE_STORE": "embedded"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)  # every process of the test, on either host
    a, b = tmp_path / "host-a", tmp_path / "host-b"
    return {"a": a, "b": b, "dsn": pg_dsn,
            "dep": {"data": b, "dsn": pg_dsn, "pg_root": Path(postgres_server.workdir) / "data",
                    "admin_dsn": postgres_server.admin_dsn, "key_dsn": key_dsn,
                    "key_root": Path(key_cluster.workdir) / "data", "retiring_only": True}}


def host_lost(data: Path) -> None:
    """The host and its disk gone: nothing of its data directory is left to anyone."""
    shutil.rmtree(data)
    assert not data.exists()


def nothing_left_on_b(hosts: dict[str, Any], tmp_path: Path, ids: list[Any],
                      key_ids: list[Any], markers: list[bytes], kept: list[bytes]) -> None:
    left = state_of(hosts["dep"], tmp_path / "after", ids, key_ids, markers)
    assert left == {**NOTHING_LEFT, "purged": len(ids)}, left
    assert opened_by_a_fresh_reader(hosts["b"], markers) == []
    assert kept[0] in opened_by_a_fresh_reader(hosts["b"], kept)  # the bystander's opens
    status = letterlog(hosts["b"], "erase", "status")
    assert status.returncode == 0 and status.stdout == b"no erasure pending\n", status


@pytest.mark.parametrize("step", ["erase:appended", "erase:keys"])
def test_an_erasure_whose_host_was_lost_is_finished_by_another_host(
        tmp_path: Path, hosts: dict[str, Any], step: str) -> None:
    ids, key_ids, markers, kept = a_store(hosts["a"])
    ids, key_ids = ids[1:], key_ids[1:]  # the large one (its payload, its attachment)
    markers = [m for m in markers if m.startswith((b"subjl", b"froml", b"bodyl", b"namel",
                                                   b"blobl"))]
    killed(letterlog(hosts["a"], "erase-message", "--with-copies", str(ids[0]),
                     crash_at=step))
    host_lost(hosts["a"])
    hosts["b"].mkdir(mode=0o700)  # an empty data directory, private
    left = state_of(hosts["dep"], tmp_path / "left", ids, key_ids, markers)
    assert left["intents"] == 1 and left["purged"] == 1, left  # in the log's database
    if step == "erase:appended":
        assert left["keys_open"] == 1, left  # purged, and the key opens: the attack works
    # host B, its data directory empty: its first command finds and finishes the intent
    status = letterlog(hosts["b"], "erase", "status")
    assert status.returncode == 0, status
    assert b"finished 1 erasure(s) or purge run(s) a killed process had left" in status.stderr
    assert intents_left(hosts["dsn"], hosts["b"]) == 0
    done = letterlog(hosts["b"], "erase", "complete")
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode()
    nothing_left_on_b(hosts, tmp_path, ids, key_ids, markers, kept)


def test_a_purge_run_whose_host_was_lost_is_finished_by_the_next_run_on_another_host(
        tmp_path: Path, hosts: dict[str, Any]) -> None:
    ids, key_ids, markers, kept = a_store(hosts["a"])
    with Letterlog.open(hosts["a"]) as store:
        for i in ids:
            store.delete(i)
    due = {"LETTERLOG_DELETED_RETENTION_DAYS": "0"}
    killed(letterlog(hosts["a"], "purge", "run", crash_at="purge:appended", **due))
    host_lost(hosts["a"])
    hosts["b"].mkdir(mode=0o700)  # an empty data directory, private
    left = state_of(hosts["dep"], tmp_path / "left", ids, key_ids, markers)
    assert left["intents"] == 1 and left["keys_open"] == len(ids), left
    assert left["purged"] >= 1, left  # the first batch is in the log, its key live
    run = letterlog(hosts["b"], "purge", "run", **due)
    assert run.returncode == 0 and b"Traceback" not in run.stderr, run.stderr.decode()
    nothing_left_on_b(hosts, tmp_path, ids, key_ids, markers, kept)


def stopped(proc: subprocess.Popen[bytes]) -> bool:
    """The process stopped itself (SIGSTOP at the pause point), or died."""
    if proc.poll() is not None:
        return True
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[0] == "T"


def held(dsn: str) -> list[int]:
    """The intents whose advisory lock a live session holds (``pg_locks``)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [r[0] for r in conn.execute(
            "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
            "AND objsubid = 2 AND granted", (LOCK_CLASS,)).fetchall()]


def test_a_live_holders_intent_is_not_taken_over_by_another_host(
        tmp_path: Path, hosts: dict[str, Any]) -> None:
    ids, *_ = a_store(hosts["a"])
    hosts["b"].mkdir(mode=0o700)  # an empty data directory, private
    env = {**os.environ, "LETTERLOG_TEST_PAUSE_AT": "erase:intent"}
    holder = subprocess.Popen([*BIN, "--data", str(hosts["a"]), "erase-message", str(ids[1])],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        until(lambda: stopped(holder), timeout=120, what="the holder's pause point")
        assert holder.poll() is None, holder.communicate()
        assert len(held(hosts["dsn"])) == 1  # its intent, durable and held
        # host B: the intent is another host's, running: listed, exit 3, left alone
        status = letterlog(hosts["b"], "erase", "status")
        assert status.returncode == 3, status
        assert b"erase running now" in status.stdout, status.stdout
        complete = letterlog(hosts["b"], "erase", "complete")
        assert b"Traceback" not in complete.stderr, complete.stderr.decode()
        assert intents_left(hosts["dsn"], hosts["b"]) == 1
        assert not purged_in_log(hosts["dsn"], ids[1])  # nobody made the erasure for it
        # the holder goes on and finishes its own erasure
        holder.send_signal(signal.SIGCONT)
        out, err = holder.communicate(timeout=120)
        assert holder.returncode == 0, err.decode()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert purged_in_log(hosts["dsn"], ids[1])
    assert intents_left(hosts["dsn"], hosts["b"]) == 0 and held(hosts["dsn"]) == []


def test_a_killed_holders_intent_is_released_with_its_connection_and_finished_by_another_host(
        tmp_path: Path, hosts: dict[str, Any]) -> None:
    ids, *_ = a_store(hosts["a"])
    hosts["b"].mkdir(mode=0o700)  # an empty data directory, private
    env = {**os.environ, "LETTERLOG_TEST_PAUSE_AT": "erase:intent"}
    holder = subprocess.Popen([*BIN, "--data", str(hosts["a"]), "erase-message", str(ids[1])],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    until(lambda: stopped(holder), timeout=120, what="the holder's pause point")
    assert len(held(hosts["dsn"])) == 1
    holder.kill()
    holder.wait()
    # the server ends the session, and its lock, as the dead process's socket closes
    until(lambda: not held(hosts["dsn"]), timeout=30, what="the killed holder's lock")
    host_lost(hosts["a"])
    status = letterlog(hosts["b"], "erase", "status")
    assert status.returncode == 0 and b"finished 1 erasure" in status.stderr, status
    assert purged_in_log(hosts["dsn"], ids[1])
    assert intents_left(hosts["dsn"], hosts["b"]) == 0


def purged_in_log(dsn: str, message_id: Any) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        [(table,)] = conn.execute(
            "SELECT table_name FROM information_schema.columns WHERE column_name = 'topic' "
            "AND table_name LIKE '%%events'").fetchall()
        return bool(conn.execute(
            f'SELECT 1 FROM "{table}" WHERE topic = %s AND originator_id = %s',  # noqa: S608
            ("domain.message:Message.Purged", message_id)).fetchone())


def test_an_intent_file_a_scale_out_host_left_before_is_still_finished_there(
        hosts: dict[str, Any]) -> None:
    """An intent file written on a scale-out host by the version before ADR 0084 (an
    erasure killed once its intent was durable) is read and finished by that host's next
    command, like a row."""
    from adapters.lifecycle.intentfiles import Intents

    ids, *_ = a_store(hosts["a"])
    with Letterlog.open(hosts["a"]) as store:
        position = store.max_position()
    Intents(hosts["a"]).begin("erase", position, messages=[str(ids[1])]).release()  # killed
    assert intents_left(hosts["dsn"], hosts["a"]) == 1
    status = letterlog(hosts["a"], "erase", "status")
    assert status.returncode == 0 and b"finished 1 erasure" in status.stderr, status
    assert purged_in_log(hosts["dsn"], ids[1])
    assert intents_left(hosts["dsn"], hosts["a"]) == 0
