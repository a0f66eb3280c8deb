"""``letterlog backup`` and ``restore-backup`` on the embedded store: an online copy while
another process delivers (and erases), the refusals, and erasures made after the backup
staying in force after a restore (ADR 0046, docs/operations.md "Backup and restore")."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from adapters.embedded import Letterlog
from tests.erasure_support import (
    deliver_marked,
    files_holding,
    files_holding_any_form,
    opened_by_a_fresh_reader,
)
from tests.factories import BIN


def cli(data: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([*BIN, "--data", str(data), *args], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "LETTERLOG_DURABILITY": "normal"})
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    return p


def jline(p: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    [line] = [x for x in p.stdout.splitlines() if x.strip()]
    return dict(json.loads(line))


def digests(data: Path) -> list[str]:
    """``verify --all``'s lines (table, rows, cells, digest, verdict)."""
    return cli(data, "verify", "--all").stdout.splitlines()


DELIVERING = """
import sys, uuid
from pathlib import Path
from adapters.embedded import Letterlog
from tests.erasure_support import marked_mail
data, acks, stop = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
with Letterlog.open(data) as store, open(acks, "a") as out:
    n = 0
    while not stop.exists():
        raw, _ = marked_mail("c", attachment=n % 3 == 0)
        d = store.deliver(account="online@example.org", raw=raw)
        out.write(f"{d.message_id} {d.position}\\n")
        out.flush()
        n += 1
        if n % 5 == 0:  # an erasure now and then: the key store rotates KEKs meanwhile
            store.erase_message(d.message_id)
            out.write(f"erased {d.message_id}\\n")
            out.flush()
"""


def acked(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.endswith(tuple("0123456789"))
            and not line.startswith("erased")] if path.exists() else []


def wait_for(condition: Any, what: str, timeout: float = 120.0) -> None:
    """Polls a readiness condition (a file the other process writes), bounded."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_an_online_backup_while_another_process_delivers_restores_identical(tmp_path):
    data, copy, restored = tmp_path / "data", tmp_path / "backup", tmp_path / "restored"
    acks, stop = tmp_path / "acks", tmp_path / "stop"
    with Letterlog.open(data) as store:
        first = str(store.deliver(account="online@example.org",
                                  raw=b"Subject: first\r\n\r\nx\r\n").message_id)
    writer = subprocess.Popen([sys.executable, "-c", DELIVERING, str(data), str(acks),
                               str(stop)], env={**os.environ, "LETTERLOG_DURABILITY": "normal"})
    try:
        wait_for(lambda: len(acked(acks)) >= 20, "20 deliveries")
        manifest = jline(cli(data, "--json", "backup", str(copy)))
        during = len(acked(acks))
        assert writer.poll() is None  # still delivering when the backup was done
        wait_for(lambda: len(acked(acks)) >= during + 10, "10 more deliveries")
    finally:
        stop.touch()
        assert writer.wait(timeout=120) == 0
    position = manifest["log"]["position"]
    delivered = [line.split() for line in acked(acks)]
    before = {m for m, p in delivered if int(p) <= position}
    after = {m for m, p in delivered if int(p) > position}
    assert before and after  # deliveries went on during and after the copy
    # the backup is private
    assert stat.S_IMODE(copy.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == (0o700 if p.is_dir() else 0o600)
               for p in copy.rglob("*"))
    # the read models were copied before the log: never ahead of it
    assert manifest["order"][:2] == ["tables.sqlite", "events.sqlite"]

    killed = tmp_path / ".restored.restoring-999999999"  # a killed restore's staging
    killed.mkdir()
    (killed / "tables.sqlite").write_bytes(b"plain text")
    # the live store's later erasures are not applied here: the copy is compared as it is
    result = jline(cli(restored, "--json", "restore-backup", str(copy), "--no-erasure-record"))
    assert not killed.exists()
    assert result["position"] == position and result["replaced"] is False
    # an erasure that fell between the copy of the log and that of the keys is made again
    # (how often depends on the machine's pace: the restored log then has its events too)
    during = set(result["erased_while_copied"])
    copied, restored_log = manifest["log"], result["log"]
    assert restored_log["messages"] == copied["messages"]  # every message the manifest counts
    assert restored_log["purged_messages"] == copied["purged_messages"] + len(during)
    assert (restored_log["position"] == copied["position"]) == (not during)
    assert restored_log["position"] >= copied["position"]
    assert digests(restored)[-1].endswith("identical")
    assert all(line.endswith("identical") for line in digests(restored))
    with Letterlog.open(restored, create=False) as store:
        assert (store.max_position() == position) == (not during)
        listed = {str(r.message_id) for r in store.messages("online@example.org", "INBOX",
                                                            limit=100_000)}
        erased = {line.split()[1] for line in acks.read_text().splitlines()
                  if line.startswith("erased")}
        assert during <= erased and not during & listed
        assert len(listed) == (manifest["log"]["messages"] - manifest["log"]["purged_messages"]
                               - len(during))
        assert listed <= before | {first} and not listed & after
        for message_id in listed:  # every sealed part opens: the keys cover the copied log
            assert store.show(UUID(message_id))["envelope"]["subject"]
        assert (before - erased) <= listed
    # a new process reads every event of the restored log with the key files beside it
    opened_by_a_fresh_reader(restored, [])


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_a_quiet_store_restores_with_the_same_verify_digests(tmp_path):
    data, copy, restored = tmp_path / "data", tmp_path / "backup", tmp_path / "restored"
    with Letterlog.open(data) as store:
        deliver_marked(store)
    restored.mkdir()  # an empty directory is a fine target
    cli(data, "backup", str(copy))
    cli(restored, "restore-backup", str(copy), "--reapply-erasures", str(data))
    assert digests(restored) == digests(data)
    assert stat.S_IMODE(restored.stat().st_mode) == 0o700


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_restore_refuses_what_it_must_not_replace_and_changes_nothing(tmp_path):
    data, copy = tmp_path / "data", tmp_path / "backup"
    with Letterlog.open(data) as store:
        deliver_marked(store)
    cli(data, "backup", str(copy))
    # the backup goes into a new or empty directory only, never inside the store
    assert "not an empty directory" in cli(data, "backup", str(copy), code=2).stderr
    assert "inside the data directory" in cli(data, "backup", str(data / "b"), code=2).stderr
    # a store is replaced only with --force; it is left as it was
    before = digests(data)
    err = cli(data, "restore-backup", str(copy), code=2).stderr
    assert err.startswith("letterlog: error: ") and "--force" in err and "Traceback" not in err
    assert digests(data) == before
    # a directory holding anything else is never replaced, not even with --force
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert "holds no letterlog store" in cli(other, "restore-backup", str(copy), "--force",
                                             code=2).stderr
    assert (other / "notes.txt").read_text() == "mine"
    # not a backup, an interrupted one, a damaged one: refused, nothing created
    target = tmp_path / "new"
    assert "no such directory" in cli(target, "restore-backup", str(tmp_path / "nope"),
                                      code=2).stderr
    assert "no manifest.json" in cli(target, "restore-backup", str(other), code=2).stderr
    tables = copy / "tables.sqlite"
    blob = bytearray(tables.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    tables.write_bytes(bytes(blob))
    assert "damaged" in cli(target, "restore-backup", str(copy), "--reapply-erasures",
                            str(data), code=2).stderr
    assert not target.exists()
    assert not list(tmp_path.glob(".new.restoring-*"))
    # a bad record to reapply is refused before anything changes
    assert "not an erasure record" in cli(target, "restore-backup", str(copy),
                                          "--reapply-erasures", str(other / "notes.txt"),
                                          code=2).stderr
    assert "contradict" in cli(target, "restore-backup", str(copy), "--no-erasure-record",
                               "--reapply-erasures", str(data), code=2).stderr
    assert not target.exists()


@pytest.mark.parametrize("target_exists", [False, True], ids=["absent", "empty"])
def test_a_restore_that_exits_2_leaves_nothing_in_the_target(tmp_path, target_exists):
    """Issue 42, item 14: exit 2 says nothing changed, so a restore whose copy cannot be
    opened (here: a setting the restored store refuses) takes its files away again."""
    data, copy, target = tmp_path / "data", tmp_path / "backup", tmp_path / "new"
    with Letterlog.open(data) as store:
        deliver_marked(store)
    cli(data, "backup", str(copy))
    if target_exists:
        target.mkdir(mode=0o750)
    # (--no-erasure-record: past the refusal to restore without a record, ADR 0069)
    p = subprocess.run([*BIN, "--data", str(target), "restore-backup", str(copy),
                        "--no-erasure-record"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "LETTERLOG_DURABILITY": "bogus"})
    assert p.returncode == 2 and "LETTERLOG_DURABILITY" in p.stderr, (p.stdout, p.stderr)
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert (list(target.iterdir()) == []) if target_exists else not target.exists()
    assert not target_exists or target.stat().st_mode & 0o777 == 0o750
    assert [x.name for x in tmp_path.iterdir() if x.name.startswith(".new.")] == []
    cli(target, "restore-backup", str(copy), "--no-erasure-record")  # the same restore works
    assert (target / "events.sqlite").is_file()


def test_restore_refuses_a_store_another_process_has_open(tmp_path):
    data, copy = tmp_path / "data", tmp_path / "backup"
    with Letterlog.open(data) as store:
        deliver_marked(store)
    cli(data, "backup", str(copy))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
         "c.execute('select 1').fetchone(); print('open', flush=True); sys.stdin.read()",
         str(data / "events.sqlite")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        err = cli(data, "restore-backup", str(copy), "--force", code=1).stderr
        assert f"pid {holder.pid}" in err and "stop those processes" in err
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def erased_after_backup(tmp_path: Path) -> tuple[Path, Path, list[bytes], list[bytes]]:
    """A store with two marked messages backed up, then one erased (message) and the other
    kept; its markers: (data, backup, erased markers, kept markers)."""
    data, copy = tmp_path / "data", tmp_path / "backup"
    with Letterlog.open(data) as store:
        ids, markers = deliver_marked(store)
    cli(data, "backup", str(copy))
    assert files_holding(copy, markers)  # the backup holds them (it predates the erasure)
    small, large = markers[:3], markers[3:]
    cli(data, "erase-message", str(ids[1]))  # the large one: payload, attachment name
    return data, copy, large, small


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_an_erasure_after_the_backup_stays_erased_when_restoring_over_the_store(tmp_path):
    data, copy, erased, kept = erased_after_backup(tmp_path)
    result = jline(cli(data, "--json", "restore-backup", str(copy), "--force"))
    assert result["replaced"] and len(result["messages_erased_again"]) == 1
    assert result["erasure_complete"]
    assert files_holding(data, erased) == {}  # no byte of it in any file of the store
    assert opened_by_a_fresh_reader(data, erased) == []  # and its sealed part does not open
    assert opened_by_a_fresh_reader(data, kept) == kept  # the other message is all there
    assert all(line.endswith("identical") for line in digests(data))
    assert not list(tmp_path.glob(".data.*"))  # neither the staging nor the replaced store


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_an_exported_erasure_record_keeps_it_erased_in_a_new_place(tmp_path):
    data, copy, erased, kept = erased_after_backup(tmp_path)
    record = tmp_path / "erasures.json"
    cli(data, "erase", "export", str(record))
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert all(m not in record.read_bytes() for m in erased + kept)  # ids only, no content
    new = tmp_path / "new"
    cli(new, "restore-backup", str(copy), "--reapply-erasures", str(record))
    assert files_holding(new, erased) == {}
    assert opened_by_a_fresh_reader(new, erased) == []
    assert opened_by_a_fresh_reader(new, kept) == kept
    # a live data directory is a record too
    again = tmp_path / "again"
    cli(again, "restore-backup", str(copy), "--reapply-erasures", str(data))
    assert files_holding(again, erased) == {}


def tree(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every path under ``root`` (and ``root``) with its mode, size and bytes."""
    paths = [root, *sorted(root.rglob("*"))] if root.exists() else []
    return {str(p.relative_to(root.parent)): (p.stat().st_mode, p.stat().st_size,
                                             p.read_bytes() if p.is_file() else b"")
            for p in paths}


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_a_restore_into_a_new_place_without_an_erasure_record_is_refused(tmp_path):
    """Issue 40, item 3: a pre-erasure backup restored where no record of the erasure
    survives is refused (exit 2) before anything is written; a record older than the backup
    is no record of what came after it."""
    data, copy, erased, _ = erased_after_backup(tmp_path)
    before = {p.name for p in tmp_path.iterdir()}
    for target in (tmp_path / "new", tmp_path / "empty"):
        if target.name == "empty":
            target.mkdir(mode=0o750)
        found = tree(target)
        err = cli(target, "restore-backup", str(copy), code=2).stderr
        assert err.startswith("letterlog: error: ") and "Traceback" not in err
        assert "no record of the erasures made after" in err
        assert "--no-erasure-record" in err and "--reapply-erasures" in err
        assert "come back" in err and "Nothing was changed" in err
        assert tree(target) == found  # left as found: absent, or the same empty 0750 dir
    assert {p.name for p in tmp_path.iterdir()} == before | {"empty"}  # no staging left
    # a record exported before the backup was taken ends before it: refused as well
    cli(data, "erase", "export", str(tmp_path / "old.json"))
    with Letterlog.open(data) as store:
        store.deliver(account="later@example.org", raw=b"Subject: later\r\n\r\nx\r\n")
    newer, old = tmp_path / "newer", tmp_path / "old"
    cli(data, "backup", str(newer))
    err = cli(old, "restore-backup", str(newer), "--reapply-erasures",
              str(tmp_path / "old.json"), code=2).stderr
    assert "before the backup" in err and "hold no erasure made after it" in err
    assert not old.exists()


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_a_record_kept_beside_the_backups_keeps_the_erasure_in_a_new_place(tmp_path):
    """Issue 40, item 3: with the record (``erase export`` beside the backup, found without
    being named), nothing erased after the backup comes back, in any form."""
    data, copy, erased, kept = erased_after_backup(tmp_path)
    record = tmp_path / "mail.erasures.json"  # beside the backup directory
    cli(data, "erase", "export", str(record))
    new = tmp_path / "new"
    p = cli(new, "--json", "restore-backup", str(copy))
    result = jline(p)
    assert result["erasures_from"] == [str(record)] and result["no_erasure_record"] is None
    assert len(result["messages_erased_again"]) == 1 and result["erasure_complete"]
    assert "warning" not in p.stderr
    assert files_holding_any_form(new, erased) == {}  # plain, base64, in a zstd frame
    assert opened_by_a_fresh_reader(new, erased) == []
    assert opened_by_a_fresh_reader(new, kept) == kept
    # a damaged record beside the backup is refused, not skipped
    record.write_text("{}")
    err = cli(tmp_path / "other", "restore-backup", str(copy), code=2).stderr
    assert "not an erasure record" in err and not (tmp_path / "other").exists()


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_without_the_erasure_record_a_restore_brings_the_erased_message_back(tmp_path):
    """The residual risk the docs state, shown: the backup alone predates the erasure; only
    --no-erasure-record restores it so, and says so."""
    data, copy, erased, _ = erased_after_backup(tmp_path)
    lost = tmp_path / "lost"
    p = cli(lost, "--json", "restore-backup", str(copy), "--no-erasure-record")
    assert "warning: restored with --no-erasure-record" in p.stderr
    assert "no record of the erasures" in p.stderr and "erase reapply" in p.stderr
    assert jline(p)["no_erasure_record"]
    assert opened_by_a_fresh_reader(lost, erased)  # its subject, sender, attachment name
    assert set(files_holding(lost, erased)) >= {"tables.sqlite"}
    # ... until the record is applied to it: `erase reapply` (here the live store is the record)
    assert len(jline(cli(lost, "--json", "erase", "reapply", str(data)))
               ["messages_erased_again"]) == 1
    assert files_holding(lost, erased) == {}
    assert opened_by_a_fresh_reader(lost, erased) == []


@pytest.mark.parametrize("args", [["backup", "-h"], ["restore-backup", "-h"],
                                  ["erase", "export", "-h"], ["erase", "reapply", "-h"]])
def test_the_commands_answer_help(tmp_path, args):
    assert "Usage" in cli(tmp_path, *args).stdout


def test_the_key_files_are_copied_together_while_writers_wait(tmp_path):
    """While a key file is copied no writer can change either key file: a rotation (new KEK
    in the vault, the key table re-wrapped, the old KEK removed) cannot fall between the two
    copies. Checked from inside the copy: another connection tries to write each one."""
    import sqlite3

    from adapters.backup import backup

    data = tmp_path / "data"
    with Letterlog.open(data) as store:
        deliver_marked(store)
    tried: dict[str, list[str]] = {}

    def progress(what: str, done: int, total: int) -> None:
        if what in ("keys.sqlite", "vault.sqlite") and what not in tried:
            tried[what] = []
            for name in ("keys.sqlite", "vault.sqlite"):
                con = sqlite3.connect(data / name, timeout=0.1, isolation_level=None)
                try:
                    con.execute("BEGIN IMMEDIATE")
                    con.execute("ROLLBACK")
                    tried[what].append(f"{name} writable")
                except sqlite3.OperationalError as e:
                    tried[what].append(f"{name} {e}")
                finally:
                    con.close()

    manifest = backup(data, tmp_path / "backup", progress=progress)
    assert manifest["order"][-2:] == ["keys.sqlite", "vault.sqlite"]
    assert tried == {f: ["keys.sqlite database is locked", "vault.sqlite database is locked"]
                     for f in ("keys.sqlite", "vault.sqlite")}
    with sqlite3.connect(data / "vault.sqlite", timeout=0.1) as con:  # let go afterwards
        con.execute("BEGIN IMMEDIATE")
        con.execute("ROLLBACK")


def test_payloads_that_cannot_reach_hbase_after_a_restore_stay_readable_here(tmp_path):
    """``restore-backup`` on the scale-out path copies the payloads into HBase last; if HBase
    does not answer then, the restore stands and says so: the payloads are read from the
    data directory until ``payloads migrate`` (ADR 0072)."""
    from adapters.backup import backup, restore
    from projections.tablestore import TableStoreUnavailable

    data, copy, restored = tmp_path / "data", tmp_path / "backup", tmp_path / "restored"
    with Letterlog.open(data, durability="normal") as store:
        ids, _ = deliver_marked(store)
        raws = {i: store.extract(i) for i in ids}
    backup(data, copy)

    def hbase_down(root: Path) -> dict[str, Any]:
        raise TableStoreUnavailable("HBase Thrift server at 127.0.0.1:1 is unreachable")

    result = restore(copy, restored, open_store=Letterlog.open, reapply_from=[data],
                     move_payloads=hbase_down)
    assert "payloads migrate --remove-local" in result["payloads_moved"]["problem"]
    with Letterlog.open(restored, durability="normal") as store:
        assert {i: store.extract(i) for i in ids} == raws
