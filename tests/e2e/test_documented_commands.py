"""Every command the README and docs/ show a user (`letterlog <command>` in code) exists:
it answers ``--help`` with status 0 (a command the docs name must not answer "No such
command", as ``export`` once did)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.cli.app import MODULE_OF

ROOT = Path(__file__).resolve().parents[2]
GLOBAL_WITH_VALUE = {"--data", "--as"}


def code_snippets(text: str) -> list[str]:
    """Inline code spans and the lines of fenced blocks."""
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    blocks = [line for block in re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S)
              for line in block.splitlines()]
    return spans + blocks


def documented_commands() -> set[str]:
    names = set()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for snippet in code_snippets(doc.read_text()):
            words = snippet.strip().lstrip("$ ").split()
            if not words or Path(words[0]).name != "letterlog":
                continue
            if len(words) > 1 and words[1] in ("unix", "inet", "fifo"):
                continue  # a Postfix master.cf service named letterlog, not the CLI
            rest = iter(words[1:])
            for word in rest:
                if word in GLOBAL_WITH_VALUE:
                    next(rest, None)
                elif not word.startswith("-"):
                    if re.fullmatch(r"[a-z][a-z-]*", word):
                        names.add(word)
                    break
    return names


def test_the_docs_name_commands_at_all():
    assert {"deliver", "lda", "export", "rebuild"} <= documented_commands()


@pytest.mark.parametrize("command", sorted(documented_commands()))
def test_every_documented_command_answers_help(command):
    from adapters.cli.app import app

    assert command in MODULE_OF, f"the docs show `letterlog {command}`: no such command"
    result = CliRunner().invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_every_command_a_module_registers_is_in_the_command_table():
    """The root finds a command through its table: one registered but not listed is lost."""
    import importlib

    from typer.main import get_command_name, solve_typer_info_defaults

    registered = set()
    for module in set(MODULE_OF.values()):
        app = importlib.import_module(f"adapters.cli.{module}").app
        registered |= {info.name or get_command_name(info.callback.__name__)
                       for info in app.registered_commands}
        registered |= {solve_typer_info_defaults(info).name for info in app.registered_groups}
    assert registered - set(MODULE_OF) == set()
