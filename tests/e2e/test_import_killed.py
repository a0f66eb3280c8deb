"""``import mbox`` killed (SIGKILL) mid-import, then run again: every message exactly once.
The import runs in three processes (ADR 0027, ADR 0098): this one appending, a forked one
reading and checking the mbox, a follower projecting; killing the appending one alone
leaves no process of it running."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from adapters.embedded import Letterlog
from tests.factories import BIN, jrun, make_mail, run
from tests.process_support import alive, descendants

ADA = "ada@example.org"
COUNT = 3000


LARGE = 25  # every 25th message is large: its payload is written by the reading process


def _raw(i: int) -> bytes:
    body = f"line {i} " * 2000 + "\n" if i % LARGE == 0 else None
    return make_mail(f"killed {i}", message_id=f"<{i}.killed@x>",
                     **({"body": body} if body else {})).replace(b"\r\n", b"\n")


def _mbox(path: Path) -> Path:
    with open(path, "wb") as fh:
        for i in range(COUNT):
            fh.write(b"From a@b Thu Nov 26 10:00:00 2026\n" + _raw(i) + b"\n")
    return path


def _payload_files(data: Path) -> int:
    return sum(1 for p in (data / "payloads").glob("??/*") if len(p.name) == 64)


def _landed(data: Path) -> int:
    """The readiness probe: events in the log."""
    try:
        con = sqlite3.connect(f"file:{data / 'events.sqlite'}?mode=ro", uri=True)
        try:
            return int(con.execute("SELECT count(*) FROM stored_events").fetchone()[0])
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0


@pytest.mark.parametrize("whole_group", [True, False], ids=["group", "importer-alone"])
def test_an_import_killed_mid_way_and_run_again_has_every_message_once(
        tmp_path: Path, whole_group: bool) -> None:
    if not Path("/proc/self/task").is_dir():
        pytest.skip("needs /proc to find the import's processes")
    data, box = tmp_path / "d", _mbox(tmp_path / "big.mbox")
    run(data, "init")
    env = {**os.environ, "LETTERLOG_DURABILITY": "normal"}
    p = subprocess.Popen([*BIN, "--data", str(data), "import", "mbox", str(box), "--account",
                          ADA, "--batch", "20"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    start = _landed(data)
    deadline = time.monotonic() + 240  # a loaded machine starts an import slowly
    while _landed(data) < start + 200 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    helpers = descendants(p.pid)
    assert p.poll() is None, "the import ended before it could be killed"
    assert _landed(data) >= start + 200, "nothing landed yet: the kill would test nothing"
    if whole_group:
        os.killpg(p.pid, signal.SIGKILL)
    else:
        os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=60)
    # the reading process and the follower end on their own once their pipes close
    deadline = time.monotonic() + 60
    while any(alive(h) for h in helpers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [h for h in helpers if alive(h)], "a helper of the killed import lives on"
    landed_before = _landed(data)
    assert landed_before < 2 * COUNT + 10, "the whole import landed before the kill"
    [again] = jrun(data, "import", "mbox", str(box), "--account", ADA, "--batch", "500")
    assert again["imported"] + again["already_imported"] == COUNT
    assert again["already_imported"] > 0 and again["rejected"] == 0
    [c] = jrun(data, "counters", ADA)
    assert c["mailboxes"]["INBOX"]["messages"] == COUNT
    listed = jrun(data, "--json", "list", ADA, "--limit", str(COUNT + 10))
    subjects = [m["subject"] for m in listed]
    assert sorted(subjects) == sorted(f"killed {i}" for i in range(COUNT))
    [third] = jrun(data, "import", "mbox", str(box), "--account", ADA)
    assert (third["imported"], third["already_imported"]) == (0, COUNT)
    # payloads the killed reader wrote ahead of appends that never came are orphans: the
    # payload sweep collects them, and keeps every referenced one (ADR 0104)
    env = {**os.environ, "LETTERLOG_DURABILITY": "normal", "LETTERLOG_PAYLOAD_GRACE_HOURS": "0"}
    swept = subprocess.run([*BIN, "--data", str(data), "purge", "run", "--queue", "payloads"],
                           capture_output=True, env=env, timeout=120)
    assert swept.returncode == 0, swept.stderr.decode()
    large = {f"killed {i}": _raw(i) for i in range(0, COUNT, LARGE)}
    assert _payload_files(data) == len(large)
    with Letterlog.open(data) as store:
        kept = {m.subject: store.body(ADA, "INBOX", m.uid)
                for m in store.messages(ADA, limit=COUNT + 10) if m.subject in large}
        assert {s: b"".join(body) for s, body in kept.items()} == large
