"""No test module imports another test module or a conftest.py: what several need lives in
tests/factories.py or a helper module (a name that does not start with ``test_``); fixtures
stay in conftest.py files, where pytest finds them. And the parallel suite's groups reach
pytest-xdist."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def imported_modules(source: str) -> list[str]:
    """The dotted names a module imports, ``from a.b import c`` counting as ``a.b`` and
    ``a.b.c`` (``c`` may be a module)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


def is_test_or_conftest(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return module.startswith("tests.") and (last.startswith("test_") or last == "conftest")


def forbidden_imports(source: str) -> list[str]:
    return sorted({m for m in imported_modules(source) if is_test_or_conftest(m)})


def test_no_test_module_imports_another_test_module_or_a_conftest():
    offenders = {
        str(path.relative_to(TESTS.parent)): bad
        for path in sorted(TESTS.rglob("test_*.py"))
        if (bad := forbidden_imports(path.read_text()))
    }
    assert offenders == {}, "\n".join(f"{m} imports {', '.join(b)}" for m, b in offenders.items())


def test_the_check_sees_imports_of_test_modules_and_conftests_at_any_depth():
    source = (
        "import tests.unit.test_domain\n"
        "from tests.conftest import clock\n"
        "from tests.e2e import test_cli\n"
        "def f():\n    from tests.spark.conftest import make_store\n"
        "from tests.factories import make_mail\n"
        "from tests.erasure_support import ACCOUNT\n"
    )
    assert forbidden_imports(source) == [
        "tests.conftest", "tests.e2e.test_cli", "tests.spark.conftest", "tests.unit.test_domain"]


@pytest.mark.slow
def test_a_module_with_module_scoped_fixtures_runs_on_one_parallel_worker() -> None:
    """The parallel suite's grouping (tests/conftest.py, docs/testing.md) reaches xdist: each
    node id carries its group, so that a module's module-scoped fixture (or a server) is built
    on one worker only. (Once, xdist read the groups before the suite set them.)"""
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
                        "--dist", "loadgroup", "-v", "tests/unit/test_stream_worker.py"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stdout[-3000:]
    ran = [line for line in p.stdout.splitlines() if " PASSED " in line]
    assert len(ran) >= 5
    assert all("@tests/unit/test_stream_worker.py" in line for line in ran), ran
    assert len({line.split("]", 1)[0] for line in ran}) == 1, ran  # one worker: [gwN]
