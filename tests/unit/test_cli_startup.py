"""Start-up of the command line: the root's help lists every command without building it
(no timing here; ``letterlog bench startup`` measures; tests/e2e/test_cli_fast_reads.py
checks what a simple command imports)."""

from __future__ import annotations

import pytest
from typer.main import get_command

from adapters.cli.app import MODULE_OF, app

ROOT = get_command(app)


@pytest.mark.parametrize("limit", [30, 45, 80])
def test_root_help_summaries_are_the_built_commands_short_help(limit):
    for name in MODULE_OF:
        built = ROOT.get_command(None, name)
        assert ROOT.summary(name, limit) == built.get_short_help_str(limit), name


def test_every_projection_is_named_for_the_fast_read_path():
    from projections import names as n
    from projections.registry import ALL

    assert tuple(p.name for p in ALL) == n.PROJECTIONS
