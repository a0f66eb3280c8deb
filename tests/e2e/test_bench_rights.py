"""``letterlog bench ingest --rights`` and ``bench query --rights``: what the rights check
costs a delivery and a listing (the harness; the figures are in docs/benchmarks.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.mta_support import letterlog

pytestmark = pytest.mark.bench


def test_bench_ingest_with_rights_delivers_the_same_mail_both_ways(env: dict[str, str],
                                                                    tmp_path: Path) -> None:
    plot = tmp_path / "rights.png"
    p = letterlog(env, Path("/nonexistent"), "bench", "ingest", "--rights", "--messages",
                  "40", "--plot", str(plot), "--json", timeout=300)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["stored"] == {"administrator": 40, "user": 40}
    assert set(result["us_per_delivery"]) == {"administrator", "user"}
    assert plot.stat().st_size > 0


def test_bench_query_with_rights_lists_the_same_newest_50_both_ways(env: dict[str, str]
                                                                   ) -> None:
    p = letterlog(env, Path("/nonexistent"), "bench", "query", "--rights", "--messages", "80",
                  "--samples", "20", "--json", timeout=300)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["listed"] == {"administrator": 50, "user": 50}
    assert result["newest_50"]["user"]["p50_us"] > 0
