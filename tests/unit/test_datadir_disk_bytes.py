"""``datadir.disk_bytes`` counts what ``du`` counts: a file with two names under the
directory (a payload and its content link, ADR 0099) once, not twice."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from adapters.files.datadir import disk_bytes


def _du(root: Path) -> int:
    out = subprocess.run(["du", "-s", "--block-size=1", str(root)], capture_output=True,
                         text=True, check=True).stdout
    return int(out.split()[0])


def test_a_file_with_a_second_name_is_counted_once_as_du_counts_it(tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "payloads" / ".digests" / "ab").mkdir(parents=True)
    payload = root / "payloads" / "ab" / "payload"
    payload.parent.mkdir()
    payload.write_bytes(os.urandom(256 * 1024))
    alone = disk_bytes(root)
    os.link(payload, root / "payloads" / ".digests" / "ab" / "digest")
    (root / "other").write_bytes(os.urandom(64 * 1024))
    counted = disk_bytes(root)
    assert counted == _du(root)
    assert counted < alone + 2 * 64 * 1024 + 256 * 1024  # the second name added no payload
    assert counted >= alone + 64 * 1024


def test_a_missing_directory_has_no_bytes(tmp_path: Path) -> None:
    assert disk_bytes(tmp_path / "absent") == 0
