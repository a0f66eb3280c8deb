"""ADR 0115: an import forks its projecting process before it opens the store, so the
follower starts with the modules already imported. Each case runs in a process of its own
(this one has threads and open databases: the fork would be refused here)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from adapters.readside.follower import Forked
from tests.process_support import alive

ROOT = Path(__file__).resolve().parents[2]


def _script(body: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-P", "-c", textwrap.dedent(body), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _ended(pid: int, within: float = 60.0) -> bool:
    deadline = time.monotonic() + within
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


def test_an_import_takes_the_follower_forked_ahead_and_returns_with_the_tables_current(
        tmp_path: Path) -> None:
    found = _script("""
        import json, os, sys
        from pathlib import Path
        from adapters.cli import follower as entry
        import adapters.readside.follower as handle
        from adapters.cli.import_source import SourceMessage
        from adapters.cli.importer import run_import
        from adapters.embedded import Letterlog
        from tests.factories import make_mail

        assert entry.prestart()
        spare = handle._spare[0]
        items = [SourceMessage(f"m{i}", make_mail(f"forked {i}", message_id=f"<{i}@f>"),
                               key=f"k{i}") for i in range(120)]
        taken = []
        real = handle.Follower.__init__
        def init(self, *a, **k):
            real(self, *a, **k)
            taken.append(self.proc)
        handle.Follower.__init__ = init
        with Letterlog.open(Path(sys.argv[1]), durability="normal") as store:
            report = run_import(store, len(items), items, "ada@example.org", "INBOX", batch=10)
            listed = store.messages("ada@example.org", limit=200)
            print(json.dumps({
                "imported": report["imported"], "listed": len(listed),
                "newest": listed[0].subject, "taken": [p.pid for p in taken],
                "spare": spare.pid, "spare_code": spare.returncode,
                "left": handle._spare is not None,
                "current": store.projections.runner.position() == store.max_position(),
                "identical": all(r.identical for r in store.verify())}))
        """, str(tmp_path / "d"))
    assert found["taken"] == [found["spare"]], found  # the import's follower was the fork
    assert found["spare_code"] == 0 and not found["left"]
    assert (found["imported"], found["listed"]) == (120, 120)
    assert found["newest"] == "forked 119"
    assert found["current"] and found["identical"]


def test_no_fork_while_a_database_is_open_or_another_thread_runs(tmp_path: Path) -> None:
    found = _script("""
        import json, sqlite3, sys, threading
        from adapters.cli import follower as entry
        import adapters.readside.follower as handle

        db = sqlite3.connect(sys.argv[1])
        db.execute("create table t (x)")
        with_db = entry.prestart()
        db.close()
        stop = threading.Event()
        t = threading.Thread(target=stop.wait)
        t.start()
        with_thread = entry.prestart()
        stop.set()
        t.join()
        alone = entry.prestart()
        print(json.dumps({"with_db": with_db, "with_thread": with_thread, "alone": alone,
                          "pid": handle._spare[0].pid if handle._spare else None}))
        """, str(tmp_path / "open.sqlite"))
    assert (found["with_db"], found["with_thread"], found["alone"]) == (False, False, True)
    assert _ended(found["pid"]), "the spare lives on after its parent ended"


def test_a_spare_never_taken_ends_with_its_parent_even_beside_a_later_fork(
        tmp_path: Path) -> None:
    """A process forked after the spare (the mbox reader) does not keep the spare's input
    open: the spare sees it end when its parent ends, while the later child still runs."""
    found = _script("""
        import json, os, signal
        from adapters.cli import follower as entry
        import adapters.readside.follower as handle

        assert entry.prestart()
        later = os.fork()
        if later == 0:  # off the test's pipes, so that its parent's end is seen
            quiet = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(quiet, fd)
            signal.pause()  # until the test kills it
            os._exit(0)
        print(json.dumps({"spare": handle._spare[0].pid, "later": later}))
        """)
    try:
        assert _ended(found["spare"]), "the spare waits on a descriptor a later fork holds"
        assert alive(found["later"])
    finally:
        os.kill(found["later"], 9)


@pytest.mark.parametrize("pidfds", [True, False], ids=["pidfd", "no-pidfd"])
def test_waiting_for_a_forked_follower_times_out_then_reaps_it(
        pidfds: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Follower.stop``'s wait on a fork: ``TimeoutExpired`` while it runs, its exit code
    once its input ends; on a kernel without pidfds too."""
    if not pidfds:
        def no_pidfd(pid: int) -> int:
            raise OSError(38, "Function not implemented")
        monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:  # waits for its input to end, as a follower does
        os.close(writing)
        while os.read(reading, 1):
            pass
        os._exit(7)
    os.close(reading)
    child = Forked(pid)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(0.2)
        assert child.poll() is None
    finally:
        os.close(writing)
    assert child.wait(60) == 7
    assert child.poll() == 7 and not alive(pid)


def test_a_forked_follower_reaped_by_the_kernel_is_ended_not_an_error() -> None:
    """With SIGCHLD ignored the kernel reaps children itself: waiting for one is then
    ``ChildProcessError``, which ``Follower.stop`` must not raise (as ``subprocess``)."""
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(3)
        child = Forked(pid)
        assert child.wait(60) == 0 and child.poll() == 0
    finally:
        signal.signal(signal.SIGCHLD, previous)
