"""Start-up of the command line: what a simple command imports and builds (no timing here;
``letterlog bench startup`` measures it)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.main import get_command

from adapters.cli import app
from adapters.cli.app import MODULE_OF

ROOT = get_command(app)


@pytest.mark.parametrize("limit", [30, 45, 80])
def test_root_help_summaries_are_the_built_commands_short_help(limit):
    for name in MODULE_OF:
        built = ROOT.get_command(None, name)
        assert ROOT.summary(name, limit) == built.get_short_help_str(limit), name


PROBE = """
import json, sys
from adapters.cli.app import run
code = run(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def modules_of(*args: str) -> set[str]:
    """The modules a fresh ``letterlog ARGS`` process has imported by its end."""
    p = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                       timeout=120)
    report = json.loads(p.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, p.stderr
    return set(report["modules"])


def test_help_builds_no_command_and_imports_no_pydantic_nor_store():
    loaded = modules_of("--help")
    assert not {"pydantic", "typer._adapters", "adapters.embedded", "eventsourcing"} & loaded
