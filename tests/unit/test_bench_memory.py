"""The memory leg of ``bench ingest --peer dovecot`` measures each delivery agent's own peak
(issue 42, item 7), not the benchmark process it was started from."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from devtools.bench.memory import large_message, memory_plot, peak_rss_mb

pytestmark = pytest.mark.bench


def test_a_small_command_reads_small_however_large_the_benchmark(tmp_path: Path) -> None:
    ballast = bytearray(150 * 1024 * 1024)  # this process: more than 150 MiB resident
    ballast[::4096] = b"x" * len(ballast[::4096])
    message = tmp_path / "m.eml"
    message.write_bytes(b"Subject: x\n\nx\n")
    small = peak_rss_mb(["/bin/cat"], message, None, "cat")
    grown = peak_rss_mb([sys.executable, "-c", "b = bytearray(64 << 20); b[::4096] = "
                         "b'x' * len(b[::4096])"], message, None, "python")
    assert small < 20 < 64 < grown < 150, (small, grown)


def test_a_command_that_fails_is_an_error(tmp_path: Path) -> None:
    message = tmp_path / "m.eml"
    message.write_bytes(b"x")
    with pytest.raises(RuntimeError, match="exit 3"):
        peak_rss_mb([sys.executable, "-c", "raise SystemExit(3)"], message, None, "x")


def test_the_large_message_and_the_plot(tmp_path: Path) -> None:
    raw = large_message(1 << 20)
    assert (1 << 20) <= len(raw) < 1.05 * (1 << 20) and raw.endswith(b"--b1--\n")
    entry = {"message_bytes": len(raw), "lda_peak_mb": 60.0, "dovecot_lda_peak_mb": 5.0,
             "lda_with_server_peak_mb": 9.0,
             "lmtp_server_3_recipients": {"growth_mb": 41.0, "writer_growth_mb": 42.0}}
    memory_plot(tmp_path / "m.png", {"small": entry, "large": entry})
    assert (tmp_path / "m.png").stat().st_size > 1000
