"""The import rules of the layout (ADR 0016), checked on the source:

- ``domain`` and ``projections`` import no client library; ``domain`` imports nothing of
  ours outside it, ``projections`` only ``domain``; ``adapters`` never imports
  ``spark_replay``;
- inside ``adapters``: ``tables`` and ``payloads`` never import ``streaming``, ``cli``,
  ``bench`` or ``devservers``; ``eventlog`` and ``readside`` never import ``streaming``,
  ``cli`` or ``bench``; only ``cli`` imports ``cli``, only ``bench`` and ``cli`` import
  ``bench``;
- nothing imports ``devservers`` but the tests, ``bench`` and ``devservers`` itself (its
  command is ``python -m adapters.devservers``);
- the embedded facade does not import the faust worker;
- ``settings`` imports nothing of ``adapters`` but ``envsettings``, which imports none.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT_LIBRARIES = {
    "happybase", "thriftpy2", "thrift", "pyspark", "faust", "aiokafka", "kafka", "msgpack",
    "sqlite3", "psycopg", "psycopg2", "typer", "rich", "matplotlib", "pyarrow",
}
FORBIDDEN = {
    "domain": CLIENT_LIBRARIES | {"projections", "adapters", "spark_replay"},
    "projections": CLIENT_LIBRARIES | {"adapters", "spark_replay"},
    "adapters": {"spark_replay"},
}
A = "adapters."
# sub-package (or module) of adapters -> the adapters sub-packages it must not import
FORBIDDEN_INSIDE = {
    "adapters/tables": {A + "streaming", A + "cli", A + "bench", A + "devservers"},
    "adapters/payloads": {A + "streaming", A + "cli", A + "bench", A + "devservers"},
    "adapters/eventlog": {A + "streaming", A + "cli", A + "bench", A + "devservers"},
    "adapters/readside": {A + "streaming", A + "cli", A + "bench", A + "devservers"},
    "adapters/streaming": {A + "cli", A + "bench", A + "devservers"},
    "adapters/lifecycle": {A + "streaming", A + "cli", A + "bench", A + "devservers"},
    "adapters/cli": {A + "devservers"},
    "adapters/embedded.py": {A + "streaming.worker", A + "cli", A + "bench", A + "devservers"},
    "adapters/bootstrap.py": {A + "cli", A + "bench", A + "devservers"},
    "adapters/settings.py": {"adapters"},
    "adapters/envsettings.py": {"adapters"},
}
# ... except these (settings takes the defaults its stdlib half, envsettings, reads too)
ALLOWED_INSIDE = {"adapters/settings.py": {A + "envsettings", A + "envsettings.DEFAULTS",
                                          A + "envsettings.PREFIX"}}


def imported_modules(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_names(path)}


def imported_names(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports, in full (``adapters.tables.hbase``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _offenders(paths: list[Path], forbidden: set[str],
               root: Path = ROOT) -> dict[str, list[str]]:
    found = {}
    for path in paths:
        bad = {name for name in imported_names(path)
               if any(name == f or name.startswith(f + ".") for f in forbidden)}
        if bad:
            found[str(path.relative_to(root))] = sorted(bad)
    return found


def _sources(where: str) -> list[Path]:
    target = ROOT / where
    return [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_respect_the_layering(package):
    offenders = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = imported_modules(path) & FORBIDDEN[package]
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert offenders == {}


@pytest.mark.parametrize("where", sorted(FORBIDDEN_INSIDE))
def test_adapters_subpackages_import_only_downwards(where):
    found = _offenders(_sources(where), FORBIDDEN_INSIDE[where])
    allowed = ALLOWED_INSIDE.get(where, set())
    assert {k: v for k, v in found.items() if set(v) - allowed} == {}


def test_only_tests_bench_and_devservers_import_devservers():
    allowed = ("adapters/devservers/", "adapters/bench/")
    paths = [p for p in sorted((ROOT / "adapters").rglob("*.py"))
             if not str(p.relative_to(ROOT)).startswith(allowed)]
    paths += sorted((ROOT / "spark_replay").rglob("*.py"))
    assert _offenders(paths, {A + "devservers"}) == {}


def test_every_package_says_what_it_holds_and_may_import():
    packages = [p for top in ("domain", "projections", "adapters", "spark_replay")
                for p in sorted((ROOT / top).rglob("__init__.py"))]
    undocumented = [str(p.relative_to(ROOT)) for p in packages
                    if "import" not in (ast.get_docstring(ast.parse(p.read_text())) or "")]
    assert undocumented == []


def test_the_checker_notices_a_forbidden_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import happybase\nfrom msgpack import packb\n"
                 "from adapters.streaming.worker import main\n")
    assert imported_modules(f) >= {"happybase", "msgpack"}
    assert _offenders([f], {A + "streaming"}, tmp_path) == {"m.py": ["adapters.streaming.worker",
                                                          "adapters.streaming.worker.main"]}
