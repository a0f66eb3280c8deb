"""Erase tells the truth: with another process holding a read transaction on a file that held
the erased message, the erasure commits, waits ``LETTERLOG_ERASE_WAIT_SECONDS`` at most,
exits 3 naming the file and the process, and leaves a pending record; once the reader has
gone, ``purge run`` (or ``erase complete``) finishes it and no byte of the message is left.
And ``erase-message`` says when copies of the same content remain (``--with-copies``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from adapters.embedded import Letterlog
from tests.erasure_support import (
    ACCOUNT,
    deliver_marked,
    files_holding,
    files_holding_any_form,
    marked_mail,
)
from tests.factories import run

WAIT = 2.0

READER = """
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN")
con.execute("SELECT count(*) FROM sqlite_master").fetchall()
for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
    con.execute(f'SELECT * FROM "{name}"').fetchall()
print("reading", flush=True)
sys.stdin.read()  # holds the read transaction until its standard input closes
con.execute("COMMIT")
"""


class Reader:
    """A second process (python's sqlite3) holding a read transaction on ``path``."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", READER, str(path)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # readiness: the transaction is open
        assert line == b"reading\n", line
        self.pid = self.proc.pid

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LETTERLOG_ERASE_WAIT_SECONDS", str(WAIT))
    return tmp_path / "data"


def jline(p: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    [line] = [x for x in p.stdout.decode().splitlines() if x.strip()]
    return dict(json.loads(line))


@pytest.mark.wallclock  # bounds a wait in wall-clock time: make test, not test-fast
@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_a_reader_holding_the_tables_makes_erase_exit_3_naming_it_and_purge_run_finishes(data):
    with Letterlog.open(data) as store:
        ids, markers = deliver_marked(store)
    reader = Reader(data / "tables.sqlite")
    try:
        began = time.monotonic()
        p = run(data, "--json", "erase-message", str(ids[1]), ok=False)
        took = time.monotonic() - began
        err = p.stderr.decode()
        assert p.returncode == 3, err
        result = jline(p)
        assert result["purged"] == [str(ids[1])] and result["keys_destroyed"] == 1  # committed
        assert result["complete"] is False and WAIT <= result["waited_seconds"] < WAIT + 5
        assert took < WAIT + 20  # the bound, plus a loaded machine's start-up (it was 30 s)
        [held] = result["pending"]
        assert held["file"] == str(data / "tables.sqlite") and held["pids"] == [reader.pid]
        [line] = err.splitlines()
        assert f"pid {reader.pid}" in line and "tables.sqlite" in line and "Traceback" not in err
        # still there while the reader holds: the message's bytes and the pending record
        assert any(n.startswith("tables.sqlite") for n in files_holding(data, markers))
        status = run(data, "--json", "erase", "status", ok=False)
        assert status.returncode == 3
        [pending] = jline(status)["pending"]
        assert pending["messages"] == 1 and pending["holders"][0]["pids"] == [reader.pid]
        again = run(data, "erase", "complete", ok=False)  # still held: still not complete
        assert again.returncode == 3 and f"pid {reader.pid}" in again.stderr.decode()
    finally:
        reader.close()
    p = run(data, "--json", "purge", "run")
    erasure = jline(p)["erasure"]
    assert erasure["complete"] is True and erasure["pending_cleared"] == 1
    assert run(data, "erase", "status").stdout == b"no erasure pending\n"
    with Letterlog.open(data) as store:
        store.erase_message(ids[0])
    assert files_holding_any_form(data, markers) == {}


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_erase_complete_finishes_what_a_reader_held(data):
    with Letterlog.open(data) as store:
        ids, markers = deliver_marked(store)
    reader = Reader(data / "tables.sqlite")
    try:
        p = run(data, "erase-account", ACCOUNT, ok=False)
        assert p.returncode == 3 and f"pid {reader.pid}" in p.stderr.decode()
        assert files_holding(data, markers)
    finally:
        reader.close()
    done = run(data, "--json", "erase", "complete")
    assert jline(done)["complete"] is True and jline(done)["pending_cleared"] == 1
    assert files_holding_any_form(data, markers) == {}
    assert run(data, "erase", "status").returncode == 0


@pytest.mark.wallclock  # bounds a wait in wall-clock time: make test, not test-fast
@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
@pytest.mark.parametrize("held", ["keys.sqlite", "vault.sqlite"])
def test_a_reader_of_the_key_store_delays_erase_only_by_the_bound(data, held):
    """The key table's and the vault's own checkpoints do not wait for a reader (the key
    table waited 30 s; the vault raised KeyVaultBusy after the commit, a traceback and
    exit 1): the completion step waits the bound, names the file, exits 3."""
    with Letterlog.open(data) as store:
        ids, markers = deliver_marked(store)
    reader = Reader(data / held)
    try:
        began = time.monotonic()
        p = run(data, "--json", "erase-message", str(ids[1]), ok=False)
        took = time.monotonic() - began
        err = p.stderr.decode()
        assert p.returncode == 3 and "Traceback" not in err, err
        result = jline(p)
        assert result["keys_destroyed"] == 1 and WAIT <= result["waited_seconds"] < WAIT + 5
        assert [h["file"] for h in result["pending"]] == [str(data / held)]
        assert f"pid {reader.pid}" in err and took < WAIT + 20
    finally:
        reader.close()
    assert jline(run(data, "--json", "erase", "complete"))["pending_cleared"] == 1


def test_without_a_reader_an_erasure_exits_0_and_leaves_nothing(data):
    with Letterlog.open(data) as store:
        ids, markers = deliver_marked(store)
    for message_id in ids:
        p = run(data, "--json", "erase-message", str(message_id))
        result = jline(p)
        assert result["complete"] is True and result["pending"] == [] and p.stderr == b""
    assert files_holding_any_form(data, markers) == {}
    assert list(data.glob("erasures-pending/*")) == []


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_a_purge_run_held_up_by_a_reader_exits_3_and_the_next_run_finishes(data, monkeypatch):
    with Letterlog.open(data) as store:
        ids, markers = deliver_marked(store)
        for message_id in ids:
            store.delete(message_id)
    monkeypatch.setenv("LETTERLOG_DELETED_RETENTION_DAYS", "0")
    monkeypatch.setenv("LETTERLOG_PAYLOAD_GRACE_HOURS", "0")  # the payload goes in the run
    reader = Reader(data / "tables.sqlite")
    try:
        p = run(data, "--json", "purge", "run", ok=False)
        assert p.returncode == 3, p.stderr.decode()
        report = jline(p)
        assert report["purged"] == 2 and report["erasure"]["complete"] is False
        assert f"pid {reader.pid}" in p.stderr.decode()
        assert files_holding(data, markers)
    finally:
        reader.close()
    assert jline(run(data, "--json", "purge", "run"))["erasure"]["pending_cleared"] == 1
    assert files_holding_any_form(data, markers) == {}


@pytest.mark.wallclock  # bounds a wait in wall-clock time: make test, not test-fast
def test_a_reader_with_nothing_erased_delays_no_purge_run(data):
    """A run that purges nothing owes nothing: one try, no wait, exit 0."""
    with Letterlog.open(data) as store:
        deliver_marked(store)
    reader = Reader(data / "tables.sqlite")
    try:
        p = run(data, "--json", "purge", "run")
        erasure = jline(p)["erasure"]
        assert erasure["complete"] is True and erasure["waited_seconds"] < 1
    finally:
        reader.close()


@pytest.mark.parametrize("attachment", [False, True], ids=["inline", "payload"])
def test_erase_message_names_copies_and_with_copies_erases_them(data, attachment):
    raw, markers = marked_mail("c", attachment=attachment)
    with Letterlog.open(data) as store:
        original = store.deliver(account=ACCOUNT, raw=raw).message_id
        store.create_mailbox(ACCOUNT, "Archive")
        copy = store.copy(original, "Archive").message_id
        twin = store.deliver(account=ACCOUNT, raw=raw).message_id  # the same bytes again
        elsewhere = store.deliver(account="other@example.org", raw=raw).message_id
    p = run(data, "--json", "erase-message", str(original))
    result = jline(p)
    assert sorted(result["copies_remaining"]) == sorted([str(copy), str(twin)])
    assert result["copies_in_other_accounts"] is True
    [warning] = p.stderr.decode().splitlines()
    assert str(copy) in warning and "--with-copies" in warning and "other accounts" in warning
    assert "other@example.org" not in warning  # other accounts are never named
    assert files_holding(data, markers)  # the copies keep the content

    p = run(data, "--json", "erase-message", str(copy), "--with-copies")
    result = jline(p)
    assert sorted(result["purged"]) == sorted([str(copy), str(twin)])
    assert result["copies_remaining"] == [] and result["copies_in_other_accounts"] is True

    p = run(data, "--json", "erase-message", str(elsewhere))
    result = jline(p)
    assert result["copies_remaining"] == [] and result["copies_in_other_accounts"] is False
    assert p.stderr == b""
    assert files_holding_any_form(data, markers) == {}


def test_the_connections_that_delete_erased_rows_zero_them(data):
    """``secure_delete`` on every connection that writes a file holding erased data."""
    with Letterlog.open(data) as store:
        deliver_marked(store)
        tables = store.projections.tables
        keys = store.log.keys
        for conn in (tables._conn(), keys.table._conn, keys.vault._conn):
            assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1


def test_a_holder_no_process_list_shows_is_named_unknown():
    from adapters.lifecycle.completed import Completion, Holder

    line = Completion(False, [Holder("/d/tables.sqlite")], seconds=10).line()
    assert "/d/tables.sqlite: held open by an unknown process" in line and "\n" not in line
    named = Holder("/d/keys.sqlite", (12, 34), ("sqlite3", "")).describe()
    assert named == "/d/keys.sqlite: held open by pid 12 (sqlite3), pid 34"


def test_a_data_directory_with_uri_characters_in_its_path_is_completed(tmp_path):
    """The checkpoint opens each file by URI (so that it never creates one): a path with a
    space, '?', '#' or '%' is still that file."""
    data = tmp_path / "mail 100% #1?"
    with Letterlog.open(data) as store:
        ids, markers = deliver_marked(store)
        for message_id in ids:
            assert store.erase_message(message_id)["complete"] is True
    assert files_holding_any_form(data, markers) == {}
