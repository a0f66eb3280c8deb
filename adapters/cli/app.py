"""The ``letterlog`` command line: the root command, its global options and error handling.

Commands live in one module per group (``messages``, ``mailboxes``, ``reads``, ``imports``,
``admin``, ``lifecycle``, ``stream``, ``bench``, ...); a module is imported only when one of
its commands runs (``--help`` reads each command's short help from the command table): a
simple command pays for typer and what it uses.
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
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from typer import Abort
from typer._click.exceptions import ClickException, NoArgsIsHelpError

from adapters.cli.callers import refusal
from adapters.cli.common import DEFAULT_DATA, group, state
from adapters.cli.failures import _error, _machine_error, temporary
from adapters.cli.lazygroup import MODULE_OF, LazyGroup
from adapters.cli.leaving import leave
from adapters.startup import coercion
from domain.errors import LetterlogError, PermissionDenied

coercion.install()  # plain parameters are converted without pydantic (see coercion.py)

__all__ = ["MODULE_OF", "app", "command_word", "main", "run"]

app = group("letterlog: an event-sourced mailbox store.", cls=LazyGroup)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version  # local: --version alone

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
    from adapters.mta import replies  # local: the MTA's replies, for lda's command lines alone

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
        hint = getattr(e, "hint", "")
        return _error(f"{e}{f' ({hint})' if hint else ''}", 1 if temporary(e) else 2)
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
    leave(code)


if __name__ == "__main__":
    main()
