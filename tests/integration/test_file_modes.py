"""Secure defaults: whatever the umask, the data directory and every directory letterlog makes
in it are 0700 and every file 0600; a store whose data directory or key store others may
read or write is refused (naming the file, its mode and the chmod), or with
LETTERLOG_ALLOW_SHARED_KEYS=true opened with a warning; nothing is chmodded behind the
operator's back."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.embedded import Letterlog
from domain.errors import StoreNotPrivate, StoreUnavailable
from tests.factories import BIN, make_mail

ADA = "ada@example.org"
BOB = "bob@example.org"


def umask_022() -> None:
    os.umask(0o022)


def cli(data: Path, *args: str, ok: bool = True, **env: str) -> subprocess.CompletedProcess[bytes]:
    """``letterlog --data DATA ARGS`` in a child process whose umask is 022."""
    p = subprocess.run([*BIN, "--data", str(data), *args], capture_output=True, timeout=120,
                       env={**os.environ, "LETTERLOG_DURABILITY": "normal", **env},
                       preexec_fn=umask_022)
    if ok:
        assert p.returncode == 0, p.stderr.decode()
    return p


def open_to_others(root: Path) -> list[str]:
    """Every path under ``root`` (and ``root``) other than a 0700 directory or 0600 file."""
    offenders = []
    for path in [root, *sorted(root.rglob("*"))]:
        st = os.lstat(path)
        want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if stat.S_IMODE(st.st_mode) != want:
            offenders.append(f"{path.relative_to(root.parent)} {stat.S_IMODE(st.st_mode):04o}")
    return offenders


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_every_file_a_store_makes_is_private_under_umask_022(tmp_path):
    data = tmp_path / "new" / "data"
    big = tmp_path / "big.eml"
    big.write_bytes(make_mail("big", body="x" * 40_000))  # > inline limit: a payload file
    small = tmp_path / "small.eml"
    small.write_bytes(make_mail("small", message_id="<s@x>"))
    cli(data, "init")  # makes the data directory (parents included) and the store
    cli(data, "deliver", "--account", ADA, "--label", "l", str(big), str(small))
    cli(data, "deliver", "--account", BOB, str(big))
    cli(data, "--json", "list", ADA)
    cli(data, "list", ADA)  # the fast read path
    cli(data, "body", ADA, "INBOX", "1")
    cli(data, "mailbox", "create", ADA, "Archive")
    cli(data, "rebuild", "--all")
    cli(data, "rebuild", "--all", "--until-position", "3", "--view", "snap")
    cli(data, "verify", "--all")
    cli(data, "compact")
    cli(data, "du")
    listed = json.loads(cli(data, "--json", "list", ADA).stdout.splitlines()[0])
    cli(data, "delete", listed["message_id"])
    cli(data, "purge", "run", LETTERLOG_DELETED_RETENTION_DAYS="0",
        LETTERLOG_PAYLOAD_GRACE_HOURS="0")
    [other] = [json.loads(line) for line in cli(data, "--json", "list", ADA).stdout.splitlines()]
    cli(data, "erase-message", other["message_id"])
    cli(data, "erase-account", BOB)
    cli(data, "purge", "run", LETTERLOG_PAYLOAD_GRACE_HOURS="0")
    assert (data / "keys.sqlite").is_file() and (data / "payloads").is_dir()
    assert open_to_others(tmp_path / "new") == []


def test_the_parts_other_processes_write_are_private_under_umask_022(tmp_path):
    """The relay's position file, metrics records, the stream table store, supervisord's
    configuration and the payload store's directories, each made in a child whose umask is
    022; supervisord itself is told umask 077 for its logs."""
    data = tmp_path / "data"
    script = f"""
import os
from pathlib import Path
os.umask(0o022)
data = Path({str(data)!r})
from adapters.streaming.relay import FilePosition
from adapters.tables.sqlite import SqliteTableStore
from adapters.payloads.files import FilePayloadStore
from adapters.operations.supervision import Program, write_config
from adapters.streaming.telemetry import serve_metrics
position = FilePosition(data / "relay-t.position")
position.acquire()
position.save(7)
store = SqliteTableStore(data / "stream-tables.sqlite")
store.close()
FilePayloadStore(data / "payloads").put(os.urandom(50_000))
conf = write_config(data / "supervisor", [Program("p", ("true",), cwd=data,
                    log=data / "supervisor" / "p.log")], autostart=False)
assert "umask=077" in conf.read_text()
serve_metrics("relay", data, 0)
[record] = (data / "run").iterdir()
assert record.stat().st_mode & 0o777 == 0o600, oct(record.stat().st_mode)
"""
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert (data / "relay-t.position").is_file() and (data / "run").is_dir()
    assert open_to_others(data) == []


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
@pytest.mark.parametrize("name", ["keys.sqlite", "."])
def test_a_store_open_to_others_is_refused_naming_the_file_and_the_fix(tmp_path, name):
    data = tmp_path / "data"
    with Letterlog.open(data, durability="normal") as s:
        s.deliver(account=ADA, raw=make_mail())
    target = (data / name).resolve()
    mode = 0o755 if target.is_dir() else 0o644
    target.chmod(mode)
    before = {p: stat.S_IMODE(p.stat().st_mode) for p in [data, *data.rglob("*")]}
    for args in (["list", ADA], ["--json", "list", ADA], ["deliver", "--account", ADA, "-"],
                 ["init"]):
        p = cli(data, *args, ok=False)
        err = p.stderr.decode()
        assert p.returncode == 2 and p.stdout == b"", (args, err)
        assert err.count("\n") == 1 and "Traceback" not in err
        assert str(target) in err and f"mode {mode:04o}" in err, err
        assert f"chmod {'700' if target.is_dir() else '600'} {target}" in err, err
        assert "LETTERLOG_ALLOW_SHARED_KEYS" in err
    with pytest.raises(StoreNotPrivate, match=f"{name if name != '.' else 'data'}.*{mode:04o}"):
        Letterlog.open(data)
    assert issubclass(StoreNotPrivate, StoreUnavailable)
    after = {p: stat.S_IMODE(p.stat().st_mode) for p in [data, *data.rglob("*")]}
    assert {p: after[p] for p in before} == before  # nothing chmodded
    assert {m for p, m in after.items() if p not in before} <= {0o600}  # a reader's -wal, -shm
    # the operator's override: opened, with a warning, still nothing chmodded
    allowed = cli(data, "--json", "list", ADA, LETTERLOG_ALLOW_SHARED_KEYS="true")
    assert len(allowed.stdout.splitlines()) == 1
    assert str(target) in allowed.stderr.decode() and "open to other users" in \
        allowed.stderr.decode()
    with Letterlog.open(data, allow_shared_keys=True) as s:
        assert len(s.messages(ADA)) == 1
    assert stat.S_IMODE(target.stat().st_mode) == mode
    # the fix the message names
    target.chmod(0o700 if target.is_dir() else 0o600)
    assert len(cli(data, "--json", "list", ADA).stdout.splitlines()) == 1


def test_an_empty_directory_becomes_a_private_store_a_used_one_is_refused(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o755)
    empty.chmod(0o755)
    cli(empty, "init")
    assert stat.S_IMODE(empty.stat().st_mode) == 0o700  # nothing in it: the store's own
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    used.chmod(0o755)
    p = cli(used, "init", ok=False)
    assert p.returncode == 2 and f"chmod 700 {used}" in p.stderr.decode()
    assert stat.S_IMODE(used.stat().st_mode) == 0o755 and not (used / "events.sqlite").exists()
