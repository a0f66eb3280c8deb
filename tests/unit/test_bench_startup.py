"""``letterlog bench startup``: its JSON and plot (not its speed: benchmarks are not tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.bench.startup import TARGET_MS, bench_startup

pytestmark = pytest.mark.bench  # the benchmark harness: `make test-fast` leaves it out


def test_bench_startup_times_each_command_beside_its_floors(tmp_path: Path) -> None:
    result = bench_startup(runs=3, plot=tmp_path / "startup.png")
    assert result["benchmark"] == "startup" and result["target_ms"] == TARGET_MS
    assert set(result["commands"]) == {"help", "list", "show", "flag"}
    assert set(result["floors"]) == {"python", "python + import typer",
                                     "python + a write's imports"}
    for timing in [*result["commands"].values(), *result["floors"].values()]:
        assert timing["wall_ms"] > 0 and timing["cpu_ms"] > 0
    assert all(c["meets_target"] == (c["wall_ms"] <= TARGET_MS)
               for c in result["commands"].values())
    assert result["meets_target"] == all(c["meets_target"] for c in result["commands"].values())
    # the same commands through the command server (the bench checks the server ran them)
    served = result["with_server"]
    assert set(served) == set(result["commands"])
    assert all(t["wall_ms"] > 0 and t["client_cpu_ms"] > 0 for t in served.values())
    assert result["meets_target_with_server"] == all(t["meets_target"] for t in served.values())
    # a command cannot start faster than the interpreter importing typer, which it runs
    floor = result["floors"]["python + import typer"]["cpu_ms"]
    assert all(c["cpu_ms"] >= floor * 0.5 for c in result["commands"].values())
    assert (tmp_path / "startup.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
