"""What a user installs: the wheel holds the product, not the benchmarks or the dev servers
(they stay in the repository, ADR 0057), and ``letterlog bench`` from such an install says
where the benchmarks are instead of failing with an import error."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                           str(out), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (found,) = out.glob("letterlog-*.whl")
    return found


def test_the_wheel_holds_the_product_and_not_the_tools(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tools = [n for n in names if n.startswith(("adapters/bench/", "adapters/devservers/"))
             or n == "spark_replay/bench.py"]
    assert tools == []
    for product in ("domain/message.py", "projections/registry.py", "adapters/embedded.py",
                    "adapters/facade/deliveries.py",
                    "adapters/cli/app.py", "adapters/cli/bench.py", "adapters/mailgen.py",
                    "spark_replay/job.py"):
        assert product in names, product


def test_bench_from_an_installed_wheel_says_where_the_benchmarks_are(wheel: Path,
                                                                      tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site), "LETTERLOG_DATA": str(tmp_path / "d")}
    where = "import adapters.cli; print(adapters.cli.__file__)"
    probe = subprocess.run([sys.executable, "-c", where], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip().startswith(str(site)), probe.stdout + probe.stderr
    done = subprocess.run([sys.executable, "-m", "adapters.cli", "bench", "ingest",
                           "--messages", "10"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "not part of the installed package" in done.stderr
    assert "Traceback" not in done.stderr
    demo = subprocess.run([sys.executable, "-m", "adapters.cli", "--help"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert demo.returncode == 0 and "bench" in demo.stdout, demo.stderr
