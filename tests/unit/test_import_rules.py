"""The import rules of the layout (ADR 0016, amended by ADR 0056) are import-linter contracts in
``pyproject.toml`` (one owner: ``make lint`` runs them too). This test runs them on the source,
so ``make test`` fails on a broken rule, and proves the checker notices a cycle and a
forbidden import in a project made for it.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(cwd)})


def test_every_import_contract_is_kept():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " BROKEN" not in done.stdout
    assert "no import cycles" in done.stdout and "KEPT" in done.stdout


def test_every_package_says_what_it_holds_and_may_import():
    packages = [p for top in ("domain", "projections", "adapters", "spark_replay", "devtools")
                for p in sorted((ROOT / top).rglob("__init__.py"))]
    undocumented = [str(p.relative_to(ROOT)) for p in packages
                    if "import" not in (ast.get_docstring(ast.parse(p.read_text())) or "")]
    assert undocumented == []


def test_the_checker_notices_a_cycle_and_a_forbidden_import(tmp_path):
    """The same kinds of contract on a two-package project that breaks both."""
    for name, body in {
        "core/__init__.py": "",
        "core/a.py": "from core import b\n",
        "core/b.py": "from core import a\nimport outer.io\n",
        "outer/__init__.py": "",
        "outer/io.py": "",
    }.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(body)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.importlinter]\nroot_packages = ["core", "outer"]\n\n'
        '[[tool.importlinter.contracts]]\nname = "no cycles"\ntype = "acyclic_siblings"\n'
        'ancestors = ["core"]\n\n'
        '[[tool.importlinter.contracts]]\nname = "core is pure"\ntype = "forbidden"\n'
        'source_modules = ["core"]\nforbidden_modules = ["outer"]\n')
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no cycles BROKEN" in done.stdout
    assert "core is pure BROKEN" in done.stdout
    assert "core.b -> outer.io" in done.stdout
