"""``letterlog payloads migrate`` answers plainly where there is nothing to migrate into, or
HBase does not answer: one line, no traceback (ADR 0072)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from adapters.payloads.files import FilePayloadStore
from devtools.devservers._common import free_port
from tests.factories import BIN, run


def test_migrate_on_a_store_that_keeps_its_payloads_in_files_is_refused(tmp_path: Path):
    run(tmp_path / "d", "init")
    p = run(tmp_path / "d", "payloads", "migrate", ok=False)
    assert p.returncode == 2, p.stderr
    assert b"LETTERLOG_PAYLOAD_STORE=hbase" in p.stderr and b"Traceback" not in p.stderr


def test_migrate_while_hbase_does_not_answer_is_one_line_and_exit_1(tmp_path: Path):
    data = tmp_path / "d"
    run(data, "init")
    FilePayloadStore(data / "payloads").put(b"a payload written before the move" * 400)
    env = {**os.environ, "LETTERLOG_TABLE_STORE": "hbase", "LETTERLOG_HBASE_TIMEOUT": "1",
           "LETTERLOG_HBASE_PORT": str(free_port())}
    p = subprocess.run([*BIN, "--data", str(data), "payloads", "migrate"], env=env,
                       capture_output=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert p.stderr.count(b"\n") == 1 and b"HBase Thrift server" in p.stderr, p.stderr
