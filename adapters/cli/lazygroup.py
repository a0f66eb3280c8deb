"""The root command's group: a sub-command's module is imported only when that command runs;
which module holds which command, and each command's short help, are read from the
generated command table (``adapters/startup/commands.py``, ``adapters/cli/table.py``)."""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_name, solve_typer_info_defaults

from adapters.cli.common import state
from adapters.startup import collector
from adapters.startup.commands import SECTIONS, SUMMARIES

MODULE_OF = {name: module for _, module, names in SECTIONS for name in names}


class LazyGroup(TyperGroup):
    """The root command: a sub-command's module is imported, and only that command built
    (typer reads every parameter's annotations to build one), when it is asked for.

    The root's ``--help`` lists every command by its short help, taken from the command
    table (``summary``), without importing its module."""

    _built: dict[str, Any] = {}

    @staticmethod
    def _registration(cmd_name: str) -> tuple[typer.Typer, Any]:
        """The typer app of ``cmd_name``'s module and the command's (or group's) info."""
        app = importlib.import_module(f"adapters.cli.{MODULE_OF[cmd_name]}").app
        for info in app.registered_commands:
            if (info.name or get_command_name(info.callback.__name__)) == cmd_name:
                return app, info
        for info in app.registered_groups:
            if solve_typer_info_defaults(info).name == cmd_name:
                return app, info
        raise LookupError(cmd_name)

    def _build(self, cmd_name: str) -> Any:
        if cmd_name not in self._built:
            app, info = self._registration(cmd_name)
            short, markup = app.pretty_exceptions_short, app.rich_markup_mode
            if isinstance(info, typer.models.CommandInfo):
                command = typer.main.get_command_from_info(
                    info, pretty_exceptions_short=short, rich_markup_mode=markup)
            else:
                command = typer.main.get_group_from_info(
                    info, pretty_exceptions_short=short, rich_markup_mode=markup,
                    suggest_commands=app.suggest_commands)
            self._built[cmd_name] = _without_type_names(command)
        return self._built[cmd_name]

    def summary(self, cmd_name: str, limit: int) -> str:
        """The short help ``cmd_name`` would show, from the command table's ``SUMMARIES``
        (its help's first paragraph): the root's ``--help`` imports no command module."""
        return str(TyperCommand(cmd_name, help=SUMMARIES[cmd_name]).get_short_help_str(limit))

    def list_commands(self, ctx: Any) -> list[str]:
        return [*MODULE_OF, *[n for n in super().list_commands(ctx) if n not in MODULE_OF]]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """The command, and which one it is (``group sub`` for a group's) in
        ``state.command``: the caller's rule (``callers.RULES``) is decided on it."""
        name, command, rest = super().resolve_command(ctx, args)
        collector.started()  # the command's modules are in: the collector runs (ADR 0110)
        sub = None
        if command is not None and hasattr(command, "commands"):
            sub = next((a for a in rest if not a.startswith("-")), None)
        state.command = f"{name} {sub}" if name and sub else name
        return name, command, rest

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in MODULE_OF:
            return super().get_command(ctx, cmd_name)
        return self._build(cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Commands in sections (Messages, Mailboxes, Reading, ...); the modules of one section
        (the same title, orders next to each other) share its heading."""
        sections: list[tuple[str, list[str]]] = []
        for title, _, listed in SECTIONS:  # a section's commands may come from several modules
            if sections and sections[-1][0] == title:
                sections[-1][1].extend(listed)
            else:
                sections.append((title, list(listed)))
        extra = [n for n in super().list_commands(ctx) if n not in MODULE_OF]
        if extra:
            sections.append(("More", extra))
        width = max(len(n) for _, names in sections for n in names)
        limit = formatter.width - 6 - width
        for title, names in sections:
            rows = []
            for n in names:
                if n in MODULE_OF:
                    rows.append((n, self.summary(n, limit)))
                elif (cmd := super().get_command(ctx, n)) is not None:
                    rows.append((n, cmd.get_short_help_str(limit)))
            with formatter.section(title):
                formatter.write_dl(rows)


def _without_type_names(command: Any) -> Any:
    """Help shows an argument by its metavar and help text, not by a Python type name
    (typer prints ``ACCOUNT <str>``)."""
    for sub in getattr(command, "commands", {}).values():
        _without_type_names(sub)
    for param in command.params:
        if param.param_type_name == "argument":
            param.display_type_rich = lambda ctx: ""
    return command
