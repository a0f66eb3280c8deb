"""``letterlog bench purge``: its JSON and plot (not its speed: benchmarks are not tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.cli.app import app
from devtools.bench.purge import bench_purge

pytestmark = pytest.mark.bench  # the benchmark harness: `make test-fast` leaves it out


def test_bench_purge_purges_every_due_message_and_reports_its_references(tmp_path: Path) -> None:
    result = bench_purge(messages=60, single=10, plot=tmp_path / "purge.png")
    assert result["purged"] == 60 and result["shared_payload_messages"] == 6
    assert result["payloads_freed"] == result["payloads_stored"] >= 6
    assert result["ratio_purge_over_delivery"] == round(
        result["purge_msgs_per_s"] / result["single_delivery_msgs_per_s"], 3)
    assert result["raw_sqlite_row_deletes_per_s"] > 0
    assert result["meets_target"] == (result["ratio_purge_over_delivery"] >= 1.0)
    assert (tmp_path / "purge.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_purge_cli_prints_one_json_object() -> None:
    out = CliRunner().invoke(app, ["bench", "purge", "--messages", "12", "--single", "4",
                                   "--json"])
    assert out.exit_code == 0, out.output
    [line] = [x for x in out.stdout.splitlines() if x.strip()]
    assert json.loads(line)["benchmark"] == "purge"
