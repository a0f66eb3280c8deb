"""``letterlog lda`` run as root (issue 42, item 4): it becomes the data directory's owner
before it reads or writes anything, as ``dovecot-lda`` switches to the user's uid, so every
file of the delivery is the owner's and the owner can read the message back. Runs as root
(the test machine's user); the store belongs to the system user ``letterlog-mta`` (made,
and let run this environment's letterlog, as the Postfix tests do)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.mta_support import BOB, Server, letterlog
from tests.factories import make_mail

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (lda run as root)")



@pytest.fixture(scope="module")
def owner() -> pwd.struct_passwd:
    from devtools.devservers.dovecot import ensure_system_user
    from devtools.devservers.postfix import SYSTEM_USER, grant_letterlog_to

    account = ensure_system_user(SYSTEM_USER)
    grant_letterlog_to(SYSTEM_USER)
    return account

LARGE = make_mail("large", body="x" * 40_000 + "\r\n")  # a payload file of its own too


def as_owner(owner: pwd.struct_passwd) -> dict[str, object]:
    return {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}


@pytest.fixture
def owned(env: dict[str, str], owner: pwd.struct_passwd
          ) -> Iterator[tuple[dict[str, str], Path]]:
    """A store of ``owner``'s, in a directory it can reach (not pytest's 0700 tmp)."""
    top = Path(tempfile.mkdtemp(prefix="ll-root-", dir="/tmp"))
    top.chmod(0o755)
    data = top / "data"
    assert letterlog(env, data, "init").returncode == 0
    for where, dirs, files in os.walk(data):
        for name in [where, *(os.path.join(where, n) for n in dirs + files)]:
            os.chown(name, owner.pw_uid, owner.pw_gid)
    run = top / "run"  # the owner's XDG_RUNTIME_DIR: no command server of root's
    run.mkdir(mode=0o700)
    os.chown(run, owner.pw_uid, owner.pw_gid)
    yield {**env, "XDG_RUNTIME_DIR": str(run)}, data
    shutil.rmtree(top, ignore_errors=True)


def foreign_files(data: Path, owner: pwd.struct_passwd) -> list[str]:
    return [os.path.join(w, n) for w, dirs, files in os.walk(data) for n in dirs + files
            if os.lstat(os.path.join(w, n)).st_uid != owner.pw_uid]


def owner_reads_back(env: dict[str, str], data: Path, owner: pwd.struct_passwd) -> list[bytes]:
    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "adapters.cli", "--data", str(data),
                               *args], capture_output=True, env=env, timeout=120,
                              check=False, cwd="/", **as_owner(owner))  # type: ignore[arg-type]

    p = run("--json", "list", BOB)
    assert p.returncode == 0, p.stderr
    import json

    ids = [json.loads(line)["message_id"] for line in p.stdout.splitlines()]
    found = []
    for message_id in reversed(ids):
        p = run("extract", message_id)
        assert p.returncode == 0, p.stderr
        found.append(p.stdout)
    return found


def test_an_lda_run_as_root_delivers_as_the_store_s_owner(owned, owner):
    env, data = owned
    p = letterlog(env, data, "lda", "--recipient", BOB, "--queue-id", "R1", stdin=LARGE)
    assert (p.returncode, p.stderr) == (0, b""), p.stderr
    assert foreign_files(data, owner) == []
    assert owner_reads_back(env, data, owner) == [LARGE]


def test_an_lda_run_as_root_takes_the_fast_path_as_the_owner(owned, owner):
    """The LMTP server runs as the owner and takes only its own user's lda (SO_PEERCRED):
    root's lda, become the owner, hands its message over."""
    env, data = owned
    sock = Path(env["XDG_RUNTIME_DIR"]) / "lmtp.sock"  # a directory the owner may write
    server = Server.__new__(Server)
    server.sock = sock
    server.proc = subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", "--data", str(data), "lmtp", "--listen",
         f"unix:{sock}"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/",
        **as_owner(owner))  # type: ignore[call-overload]
    try:
        from devtools.devservers._common import wait_for

        wait_for(lambda: (data / "lda.sock").exists(), what="the lmtp server's lda.sock",
                 timeout=60, procs=[server.proc], interval=0.05)
        handoff_only = ("import sys; sys.modules['adapters.cli.app'] = None; "
                        "from adapters.cli import main; main()")
        p = subprocess.run([sys.executable, "-c", handoff_only, "--data", str(data), "lda",
                            "--recipient", BOB, "--queue-id", "R2"], input=LARGE,
                           capture_output=True, env=env, timeout=120, check=False)
        assert (p.returncode, p.stderr) == (0, b""), p.stderr
    finally:
        assert server.stop() == 0
        server.proc.communicate()
    assert foreign_files(data, owner) == []
    assert owner_reads_back(env, data, owner) == [LARGE]
