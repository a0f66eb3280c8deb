"""The dev servers' file modes without a server (docs/services.md, "File modes"): a work dir
given or kept is made 0700 and what ``prepare`` wrote, or an earlier start left open, loses
its group and other bits; the processes they start create 0600 files and 0600 logs. The
real servers are attacked as `nobody` in tests/services/test_server_file_modes.py."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from devtools.devservers._common import (
    PRIVATE_UMASK,
    Program,
    Service,
    make_private,
    run_checked,
    spawn,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


class Fake(Service):
    """A server whose ``prepare`` writes its configuration as the servers do (``write_text``
    under the test's umask) and whose program writes a data file."""

    name = "fake"

    def install(self) -> None:
        return None

    def prepare(self) -> None:
        assert self.workdir is not None
        (self.workdir / "conf").mkdir(exist_ok=True)
        (self.workdir / "conf" / "server.properties").write_text("password=secret\n")

    def bring_up(self, launch: object) -> None:
        assert self.workdir is not None and callable(launch)
        write = ("import os; os.makedirs('data', exist_ok=True); "
                 "open('data/segment.log', 'w').write('envelope')")
        self.proc = launch(Program("fake", (sys.executable, "-c", write), cwd=self.workdir,
                                   log=self.workdir / "logs" / "fake.out"))
        assert self.proc.wait(timeout=60) == 0

    def _stop(self) -> None:
        return None

    @property
    def log_paths(self) -> list[Path]:
        return []


def test_a_kept_work_dir_and_what_prepare_wrote_are_made_private(tmp_path):
    old = os.umask(0o022)  # as a shell leaves it: files 0644, directories 0755
    try:
        kept = tmp_path / "root" / "fake"
        (kept / "data").mkdir(parents=True)
        (kept / "data" / "old-segment.log").write_text("an envelope from an earlier start")
        os.symlink("/etc/passwd", kept / "link")
        assert mode(kept) == 0o755 and mode(kept / "data" / "old-segment.log") == 0o644
        server = Fake(workdir=kept)
        server.start()
        server.stop()
    finally:
        os.umask(old)
    assert mode(kept) == 0o700
    entries = [p for p in kept.rglob("*") if not p.is_symlink()]
    assert {str(p.relative_to(kept)) for p in entries} >= {
        "conf/server.properties", "data/old-segment.log", "data/segment.log", "logs/fake.out"}
    assert {str(p.relative_to(kept)): mode(p) for p in entries if mode(p) & 0o077} == {}
    assert mode(Path("/etc/passwd")) & 0o004  # a symbolic link's target is left alone


def test_a_server_that_opts_out_is_left_as_it_makes_itself(tmp_path):
    class Shared(Fake):
        private = False

    old = os.umask(0o022)
    try:
        server = Shared(workdir=tmp_path / "shared")
        server.start()
        server.stop()
    finally:
        os.umask(old)
    assert mode(tmp_path / "shared" / "data" / "segment.log") == 0o644


def test_spawned_and_run_processes_create_private_files_and_logs(tmp_path):
    write = "import sys; open(sys.argv[1], 'w').write('x'); import os; os.mkdir(sys.argv[2])"
    old = os.umask(0o022)
    try:
        proc = spawn([sys.executable, "-c", write, "a", "da"], log=tmp_path / "l" / "a.out",
                     cwd=tmp_path, umask=PRIVATE_UMASK)
        assert proc.wait(timeout=60) == 0
        run_checked([sys.executable, "-c", write, "b", "db"], what="write", cwd=tmp_path,
                    log=tmp_path / "l" / "b.out", umask=PRIVATE_UMASK)
        run_checked([sys.executable, "-c", write, "c", "dc"], what="write", cwd=tmp_path,
                    log=tmp_path / "l" / "c.out")  # no umask asked: the caller's
    finally:
        os.umask(old)
    assert [mode(tmp_path / n) for n in ("a", "b", "l/a.out", "l/b.out")] == [0o600] * 4
    assert [mode(tmp_path / n) for n in ("da", "db")] == [0o700] * 2
    assert mode(tmp_path / "c") == 0o644


def test_make_private_says_how_many_it_changed(tmp_path):
    (tmp_path / "d").mkdir(mode=0o755)
    (tmp_path / "d" / "f").write_text("x")
    os.chmod(tmp_path / "d" / "f", 0o640)
    (tmp_path / "d" / "g").write_text("y")
    os.chmod(tmp_path / "d" / "g", 0o600)
    os.chmod(tmp_path, 0o700)
    assert make_private(tmp_path) == 2
    assert make_private(tmp_path) == 0
