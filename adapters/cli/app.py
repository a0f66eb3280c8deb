"""The ``letterlog`` command line: the root command, its global options and error handling.

Commands live in one module per group (``messages``, ``mailboxes``, ``reads``, ``imports``,
``admin``, ``lifecycle``, ``stream``, ``bench``, ...); a module is imported only when one of
its commands runs (or for ``--help``): a simple command pays for typer and what it uses.
Which module holds which command is read from ``adapters/startup/commands.py``, generated from
the modules themselves (their ``SECTION`` and what their typer app registers) by
``python -m adapters.cli.table --write``; ``tests/unit/test_cli_table.py`` fails when it is
out of date. A new command module declares ``SECTION = (order, "Title")``.

Exit status: 0 done; 1 done in part (a file or message was rejected, ``verify`` found a
difference) or the machine failed (disk full, I/O error, HBase not answering within
``LETTERLOG_HBASE_TIMEOUT``); 2 bad input (a usage error, an
unknown account, mailbox or message, a refused command; nothing was written); 3 done, not yet
complete (an erasure committed, but a reader kept a file holding the erased data from being
cleaned in time: ``adapters/lifecycle/completion.py``).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from adapters.cli.common import DEFAULT_DATA, group, state
from adapters.startup import coercion
from adapters.startup.commands import SECTIONS  # generated from the commands (cli/table.py)

coercion.install()  # plain parameters are converted without pydantic (see coercion.py)

MODULE_OF = {name: module for _, module, names in SECTIONS for name in names}


class LazyGroup(TyperGroup):
    """The root command: a sub-command's module is imported, and only that command built
    (typer reads every parameter's annotations to build one), when it is asked for.

    The root's ``--help`` lists every command by its short help, taken from the command's
    registration (its docstring) without building it (``summary``)."""

    _built: dict[str, Any] = {}

    @staticmethod
    def _registration(cmd_name: str) -> tuple[typer.Typer, Any]:
        """The typer app of ``cmd_name``'s module and the command's (or group's) info."""
        from typer.main import get_command_name, solve_typer_info_defaults

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
        """The short help ``cmd_name`` would show, from its registration alone."""
        import inspect

        from typer.main import solve_typer_info_defaults

        _, info = self._registration(cmd_name)
        if isinstance(info, typer.models.CommandInfo):
            text = (inspect.getdoc(info.callback) if info.help is None
                    else inspect.cleandoc(info.help))
        else:
            info = solve_typer_info_defaults(info)
            text = info.help
        light = TyperCommand(cmd_name, help=text, short_help=info.short_help,
                             deprecated=info.deprecated)
        return str(light.get_short_help_str(limit))

    def list_commands(self, ctx: Any) -> list[str]:
        return [*MODULE_OF, *[n for n in super().list_commands(ctx) if n not in MODULE_OF]]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """The command, and which one it is (``group sub`` for a group's) in
        ``state.command``: the caller's rule (``callers.RULES``) is decided on it."""
        name, command, rest = super().resolve_command(ctx, args)
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
        """Commands in sections (Messages, Mailboxes, Reading, ...)."""
        sections = [(title, list(names)) for title, _, names in SECTIONS]
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


app = group("letterlog: an event-sourced mailbox store.", cls=LazyGroup)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"letterlog {version('letterlog')}")
        except PackageNotFoundError:
            typer.echo("letterlog (not installed as a package)")
        raise typer.Exit(0)


@app.callback()
def main_options(
    data: Annotated[Path | None, typer.Option(
        "--data", metavar="DIR", envvar="LETTERLOG_DATA", readable=False,
        help="data directory (default $LETTERLOG_DATA, else ./letterlog-data)")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="JSON on stdout, one object per line (also after the command)")] = False,
    exact_bytes: Annotated[bool, typer.Option(
        "--bytes", help="sizes in exact bytes instead of KiB/MiB/GiB")] = False,
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version, help="print the version and exit")
    ] = False,
    as_user: Annotated[str | None, typer.Option(
        "--as", metavar="USER", help="act as USER: every command is checked against USER's "
        "rights (docs/permissions.md); default: the administrator")] = None,
) -> None:
    state.data = data or DEFAULT_DATA
    state.user = as_user
    if as_user is not None:  # a user runs only what its rule lets it (callers.RULES)
        from adapters.cli.callers import refusal
        from domain.errors import PermissionDenied

        why = refusal(state.command, as_user)
        if why is not None:
            raise PermissionDenied(why, missing="administrator", command=state.command or "")
    state.json = state.json or as_json
    state.exact_bytes = exact_bytes
    os.environ["LETTERLOG_DATA"] = str(state.data)


def _global_json(args: list[str]) -> list[str]:
    """``--json`` anywhere before ``--`` is the global option (``letterlog list A --json``)."""
    end = args.index("--") if "--" in args else len(args)
    if "--json" in args[:end]:
        state.json = True
        return [*[a for a in args[:end] if a != "--json"], *args[end:]]
    return args


def _error(message: str, code: int) -> int:
    sys.stderr.write(f"letterlog: error: {message}\n")
    return code


def _machine_error(e: BaseException) -> int | None:
    """A full disk, an I/O error, a dead pipe: one line (or silence), never a traceback."""
    if isinstance(e, BrokenPipeError) or getattr(e, "errno", None) == errno.EPIPE:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # as if killed by SIGPIPE, like other tools in a pipe
    text = str(e)
    down = _postgres_down(e)
    if down is not None:
        return _error(down, 1)
    if isinstance(e, OSError):
        where = f"{e.filename}: " if e.filename else ""
        if e.errno == errno.ENOSPC:
            return _error(f"{where}no space left on device (nothing more was written)", 1)
        return _error(f"{where}{e.strerror or e}", 1)
    if "disk is full" in text or "disk I/O error" in text:
        return _error(f"{state.data}: {text} (the command was not recorded)", 1)
    return None


def _postgres_down(e: BaseException) -> str | None:
    """One line for a command the log's PostgreSQL did not answer (down, frozen, refusing),
    naming the server, or None (docs/operations.md: exit 1, the machine)."""
    if "psycopg" not in sys.modules:
        return None
    from adapters.eventlog.postgreslog import postgres_unreachable

    why = postgres_unreachable(e)
    if why is None:
        return None
    where = "the event store's server"
    try:
        from urllib.parse import urlparse

        from adapters.config.settings import load_settings

        dsn = urlparse(load_settings(data=state.data).postgres_dsn or "")
        where = f"{dsn.hostname}:{dsn.port or 5432}"
    except Exception:  # noqa: BLE001, S110 - the line without the address
        pass
    return (f"PostgreSQL at {where} is not answering ({why}); nothing was done "
            "(LETTERLOG_POSTGRES_TIMEOUT bounds the wait)")


def command_word(args: list[str]) -> str | None:
    """The command's name in a command line (the first word that is no option's)."""
    takes_value = {"--data", "--as"}
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in takes_value:
            skip = True
        elif not a.startswith("-"):
            return a
    return None


def run(args: list[str]) -> int:
    """Runs one command line; returns the exit status (no traceback for a user's error).
    ``lda`` answers an MTA: a wrong command line is 64, anything unforeseen 75 (the MTA
    keeps the message), never 1 or 2, which would make Postfix bounce it."""
    if command_word(args) == "lda":
        return _run_lda(args)
    return _run(args)


def _run_lda(args: list[str]) -> int:
    from typer._click.exceptions import ClickException

    from adapters.mta import replies

    state.json = False
    try:
        rv = app(args=_global_json(args), prog_name="letterlog", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except ClickException as e:
        sys.stderr.write(replies.usage(e.format_message()).line + "\n")
        return replies.EX_USAGE
    except BaseException as e:  # noqa: BLE001 - the MTA must keep the message
        sys.stderr.write(replies.classify(e).line + "\n")
        return replies.EX_TEMPFAIL
    finally:
        with contextlib.suppress(Exception):
            state.close()


def _run(args: list[str]) -> int:
    from typer import Abort
    from typer._click.exceptions import ClickException, NoArgsIsHelpError

    from domain.errors import LetterlogError, StoreBusy

    state.json = False
    try:
        rv = app(args=_global_json(args), prog_name="letterlog", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except NoArgsIsHelpError as e:
        sys.stderr.write(e.format_message() + "\n")
        return 2
    except ClickException as e:
        ctx = getattr(e, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        return _error(" ".join(e.format_message().split()) + hint, e.exit_code)
    except LetterlogError as e:
        from domain.directory import DirectoryUnavailable
        from projections.tablestore import TableStoreUnavailable

        # a busy store, or a table store or user directory that does not answer: the
        # machine, not the input
        temporary = StoreBusy | TableStoreUnavailable | DirectoryUnavailable
        hint = getattr(e, "hint", "")
        return _error(f"{e}{f' ({hint})' if hint else ''}",
                      1 if isinstance(e, temporary) else 2)
    except (KeyboardInterrupt, Abort):
        return _error("interrupted", 130)
    except Exception as e:
        code = _machine_error(e)
        if code is None:
            raise
        return code
    finally:
        with contextlib.suppress(Exception):  # closing must not hide the command's outcome
            state.close()


def main() -> None:
    code = run(sys.argv[1:])
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = _machine_error(BrokenPipeError()) or 141
    sys.exit(code)


if __name__ == "__main__":
    main()
