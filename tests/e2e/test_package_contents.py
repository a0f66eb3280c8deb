"""What a user installs: the wheel holds the product, not the benchmarks or the dev servers
(the top-level ``devtools`` package stays in the repository, ADR 0057, ADR 0086), and
``letterlog bench`` from such an install says where the benchmarks are instead of failing
with an import error."""

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
    tools = [n for n in names if n.startswith(("devtools/", "adapters/bench/",
                                               "adapters/devservers/"))
             or n == "spark_replay/bench.py"]
    assert tools == []
    for product in ("domain/message.py", "projections/registry.py", "adapters/embedded.py",
                    "adapters/facade/deliveries.py",
                    "adapters/cli/app.py", "adapters/cli/bench/__init__.py",
                    "adapters/demo/mailgen.py",
                    "spark_replay/job.py"):
        assert product in names, product


def test_bench_from_an_installed_wheel_says_where_the_benchmarks_are(wheel: Path,
                                                                      tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # the checkout is on the path here too (this venv's editable install, and put last so
    # it is there in any case): the wheel's user has no checkout, so the runs drop it
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
           "LETTERLOG_DATA": str(tmp_path / "d")}
    installed = ("import runpy, sys; from pathlib import Path; sys.path[:] = "
                 "[p for p in sys.path if not Path(p, 'devtools', 'bench').is_dir()]; ")
    where = installed + "import adapters.cli; print(adapters.cli.__file__)"
    probe = subprocess.run([sys.executable, "-c", where], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip().startswith(str(site)), probe.stdout + probe.stderr

    def letterlog(*args: str) -> subprocess.CompletedProcess[str]:
        run = installed + f"sys.argv = ['letterlog', *{list(args)!r}]; " + \
            "runpy.run_module('adapters.cli', run_name='__main__', alter_sys=True)"
        return subprocess.run([sys.executable, "-c", run], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)

    done = letterlog("bench", "ingest", "--messages", "10")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "not part of the installed package" in done.stderr
    assert "needs the development tools" in done.stderr
    assert "Traceback" not in done.stderr
    demo = letterlog("--help")
    assert demo.returncode == 0 and "bench" in demo.stdout, demo.stderr
