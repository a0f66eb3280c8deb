"""The root command's table of commands (``adapters/startup/commands.py``) is generated from the
commands themselves: it is what ``python -m adapters.cli.table`` writes now, every command a
module registers is in it, and every name in it is a command its module registers."""

from __future__ import annotations

import importlib

from adapters.cli import table
from adapters.startup.commands import SECTIONS


def test_the_table_is_what_the_commands_say() -> None:
    assert table.main([]) == 0, "run: python -m adapters.cli.table --write"
    assert (table.TARGET.read_text() == table.render())


def test_every_command_of_every_module_is_in_the_table_once() -> None:
    listed = [name for _, _, names in SECTIONS for name in names]
    assert len(listed) == len(set(listed))
    for _, module, names in SECTIONS:
        registered = table.command_names(importlib.import_module(f"adapters.cli.{module}"))
        assert registered == names, module


def test_a_command_left_out_is_noticed(monkeypatch) -> None:
    """The check fails when the file lacks a command (as ``export`` once went missing)."""
    written = table.TARGET.read_text()
    monkeypatch.setattr(table, "render", lambda: written.replace("'export', ", ""))
    assert table.main([]) == 1
