"""With the log's PostgreSQL down or frozen, ``deliver`` and ``list`` answer in a bounded
time with one line and exit status 1 (the machine, not the input: docs/operations.md), no
traceback, no raw library error (issue 42, item 8). A PostgreSQL of this test's own,
stopped, and frozen with SIGSTOP (a connection that never answers, the worst case)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.devservers import PostgresServer
from tests.factories import make_mail

pytestmark = [pytest.mark.services, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 4  # LETTERLOG_POSTGRES_TIMEOUT for the frozen case
BOB = "bob@example.org"


class Own:
    def __init__(self, root: Path) -> None:
        self.args: dict[str, Any] = {"workdir": root / "pg", "keep_workdir": True}
        self.pg = PostgresServer(**self.args).start()
        self.args.update(port=self.pg.port, password=self.pg.password,
                         admin_password=self.pg.admin_password)

    def start(self) -> None:
        self.pg = PostgresServer(**self.args).start()


@pytest.fixture
def own() -> Iterator[Own]:
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="ll-pgdown-", dir="/tmp"))
    root.chmod(0o755)  # PostgreSQL runs as an account of its own
    try:
        own = Own(root)
    except Exception as error:  # noqa: BLE001
        from tests.services.servers import _unavailable

        shutil.rmtree(root, ignore_errors=True)
        _unavailable(f"postgres did not start: {error}")
    yield own
    own.pg.stop()
    shutil.rmtree(root, ignore_errors=True)


def cli(env: dict[str, str], *args: str, stdin: bytes | None = None,
        ) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "adapters.cli", *args], cwd=ROOT, input=stdin,
                       env={**{k: v for k, v in os.environ.items()
                               if not k.startswith("LETTERLOG_")}, **env},
                       capture_output=True, timeout=180)
    return subprocess.CompletedProcess(p.args, p.returncode, p.stdout.decode(),
                                       p.stderr.decode()), time.monotonic() - t0


def assert_one_line_exit_1(p: subprocess.CompletedProcess[str], took: float,
                           bound: float) -> None:
    assert p.returncode == 1, (p.returncode, p.stderr[-3000:])
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.stderr.startswith("letterlog: error: PostgreSQL at 127.0.0.1:"), p.stderr
    assert "not answering" in p.stderr, p.stderr
    assert took < bound, took


def test_deliver_and_list_with_postgresql_down_or_frozen_answer_in_one_line(
        tmp_path: Path, own: Own) -> None:
    data = tmp_path / "data"
    env = {"LETTERLOG_DATA": str(data), "LETTERLOG_EVENT_STORE": "postgres",
           "LETTERLOG_POSTGRES_DSN": own.pg.dsn, "LETTERLOG_DURABILITY": "normal",
           "XDG_RUNTIME_DIR": str(tmp_path)}
    mail = tmp_path / "m.eml"
    mail.write_bytes(make_mail("before"))
    assert cli(env, "init")[0].returncode == 0
    p, _ = cli(env, "deliver", "--account", BOB, str(mail))
    assert p.returncode == 0, p.stderr
    p, _ = cli(env, "--json", "list", BOB)
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 1, p.stderr

    own.pg.stop()  # down: the port refuses
    for args in (("deliver", "--account", BOB, str(mail)), ("list", BOB)):
        p, took = cli(env, *args)
        assert_one_line_exit_1(p, took, 15)

    own.start()
    pid = own.pg._proc.pid  # type: ignore[union-attr]
    os.kill(pid, signal.SIGSTOP)  # frozen: connections are accepted, never answered
    try:
        frozen = {**env, "LETTERLOG_POSTGRES_TIMEOUT": str(TIMEOUT)}
        for args in (("deliver", "--account", BOB, str(mail)), ("list", BOB)):
            p, took = cli(frozen, *args)
            assert_one_line_exit_1(p, took, 3 * TIMEOUT + 10)
    finally:
        os.kill(pid, signal.SIGCONT)
    p, _ = cli(env, "deliver", "--account", BOB, str(mail))  # back: delivered once more
    assert p.returncode == 0, p.stderr
    p, _ = cli(env, "--json", "list", BOB)
    assert [json.loads(line)["subject"] for line in p.stdout.splitlines()] == ["before"] * 2
