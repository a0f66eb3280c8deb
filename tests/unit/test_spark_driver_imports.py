"""The Spark driver (``spark_replay/submit.py``, the ``letterlog-spark`` script) starts from an
installed wheel, which holds neither ``devtools`` nor the Spark benchmark
(``spark_replay/bench.py``): only its ``bench`` command reaches them."""

from __future__ import annotations

import subprocess
import sys

HIDE_DEV_TOOLS = """
import importlib.abc, sys
class Hidden(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "devtools" or name.startswith("devtools.") or name == "spark_replay.bench":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Hidden())
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", HIDE_DEV_TOOLS + code],
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_driver_imports_without_the_development_tools():
    done = _run("import spark_replay.submit, spark_replay.job, spark_replay.frames\n"
                "assert 'spark_replay.bench' not in sys.modules\n"
                "assert not any(m.startswith('devtools') for m in sys.modules)\n")
    assert done.returncode == 0, done.stderr


def test_the_hidden_tools_are_hidden():
    """The check above could not pass by accident: the benchmark cannot be imported so."""
    done = _run("import spark_replay.bench\n")
    assert done.returncode != 0 and "No module named" in done.stderr
