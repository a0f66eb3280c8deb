"""``bench imap --peer dovecot``: imaptest's benchmark mode against letterlog imap and
Dovecot's IMAP in the same run (its JSON and plot, not its speed: benchmarks are not
tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.bench.imap import bench_imap

pytestmark = [pytest.mark.services, pytest.mark.bench, pytest.mark.slow]


def test_bench_imap_measures_both_servers_on_the_same_mail(tmp_path: Path) -> None:
    result = bench_imap(seconds=3, clients=2, messages=20, idle=5, peer="dovecot",
                        plot=tmp_path / "imap.png")
    ours, theirs = result["letterlog"], result["dovecot"]
    assert ours["errors"] == 0 and theirs["errors"] == 0, (ours, theirs)
    assert ours["commands"]["Logi"] > 0 and theirs["commands"]["Logi"] > 0
    assert ours["commands_per_s"] == round(sum(ours["commands"].values()) / 3, 1)
    assert result["ratio"] == round(ours["commands_per_s"] / theirs["commands_per_s"], 3)
    assert result["target_met"] == (result["ratio"] >= 0.5)
    assert ours["idle_connection_kib"] is not None
    assert (tmp_path / "imap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
