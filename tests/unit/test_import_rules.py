"""domain/ and projections/ import no client library; import direction is respected."""

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


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_respect_the_layering(package):
    offenders = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = imported_modules(path) & FORBIDDEN[package]
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert offenders == {}


def test_the_checker_notices_a_forbidden_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import happybase\nfrom msgpack import packb\n")
    assert imported_modules(f) >= {"happybase", "msgpack"}
