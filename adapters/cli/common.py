"""What every command module shares: the global options, output and the way a value is
shown to a person (names, flags, sizes, cells of a listing); ``arguments`` reads what a
person types (message ids, dates, sizes, ``--as-of``).

Nothing here imports the store: a command opens it (``state.store()``, or ``state.reader()``
when it needs an existing store) only when it runs, so that ``--help`` and a mistyped
argument cost no more than typer itself. A read command asks for ``state.read_models()``:
the read models as they are when they are current with the log (no log, no command side,
no pydantic: ``adapters.startup.current``), else the store, caught up on opening.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

import typer

from domain.errors import PermissionDenied

if TYPE_CHECKING:
    from adapters.face import Face, Store
    from adapters.startup.current import CurrentTables

DEFAULT_DATA = Path("letterlog-data")


def group(help_text: str, **options: Any) -> typer.Typer:
    """A typer app for one group of commands: plain help (no rich boxes), ``-h``."""
    return typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                       pretty_exceptions_enable=False, help=help_text,
                       context_settings={"help_option_names": ["-h", "--help"]}, **options)


SYSTEM_FLAG_NAMES = {"seen", "answered", "flagged", "deleted", "draft"}
FLAGS_HELP = ("a system flag (\\Seen \\Answered \\Flagged \\Deleted \\Draft: quote it, the shell "
              "drops an unquoted backslash) or a keyword ($Forwarded, work). A bare 'Seen' is "
              "refused: it is almost always \\Seen with its backslash lost")
MessageId = Annotated[str, typer.Argument(metavar="MESSAGE_ID",
                                           help="the message's id (a UUID)")]


class State:
    """The global options of one invocation and the store it opened (at most once)."""

    def __init__(self) -> None:
        self.data: Path = DEFAULT_DATA
        self.json = False
        self.exact_bytes = False
        self.user: str | None = None  # --as USER: every command checked against its rights
        self.command: str | None = None  # the command line's command ("group sub" for one)
        self._store: Face | None = None
        self._current: CurrentTables | None = None

    def store(self, *, create: bool = False, read_models: bool = True) -> Face:
        """The store, opened once. Only ``init`` passes ``create`` (it makes the data
        directory and the store); every other command, writes included (deliver, import,
        mailbox create, demo), finds a directory holding no store an error naming it and
        ``letterlog init``, and creates nothing: a mistyped ``--data`` starts no store.
        ``read_models=False``: a command that reads only the log (``show``) neither opens
        nor catches up the read models."""
        if self._store is None:
            # the store, for the commands that open it alone (not --help, not the fast reads)
            from adapters.embedded import Letterlog  # local: not for --help nor the fast reads

            if self.user is None:
                self._store = Letterlog.open(self.data, create=create,
                                             read_models=read_models)
            else:
                self._store = Letterlog.open(self.data, create=create,
                                             read_models=read_models, user=self.user)
        return self._store

    def admin(self, *, create: bool = False, read_models: bool = True) -> Store:
        """The administrator's store (``adapters.face.Store``) for an administrator's
        command (``adapters.cli.callers``); with ``--as`` it is refused
        (``PermissionDenied``), whatever ran before."""
        if self.user is not None:
            raise PermissionDenied(
                f"permission denied: {self.command} is the administrator's; {self.user} may"
                " not run it", missing="administrator", command=self.command or "")
        store = self.store(create=create, read_models=read_models)
        return cast("Store", store)  # opened without a user: the administrator's

    def admin_reader(self) -> Store:
        """``admin`` for a command that needs the store to exist already."""
        return self.admin(create=False)

    def reader(self) -> Face:
        """The store for a command that needs one to exist already (reads, and commands on
        an existing message or account): nothing is created."""
        return self.store(create=False)

    def read_models(self, fast: Callable[[Path], CurrentTables | None]
                    ) -> Face | CurrentTables:
        """The read models for a read command: the tables alone when they are current with
        the log (the fast read path, ADR 0024: ``fast`` opens them, or finds them behind:
        ``adapters.startup.current.open_current``, which only the read commands import),
        else the store (``reader``), caught up on opening."""
        if self.user is not None:  # a user's reads are checked by the store (CallerView)
            return self.reader()
        if self._store is None and self._current is None:
            self._current = fast(self.data)
        return self._current if self._current is not None else self.reader()

    def close(self) -> None:
        if self._current is not None:
            self._current.close()
            self._current = None
        if self._store is not None:
            self._store.close()
            self._store = None


state = State()


def fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"letterlog: error: {message}", err=True)
    raise typer.Exit(code)


def out(obj: dict[str, Any], text: str | None = None) -> None:
    if state.json:
        sys.stdout.write(json.dumps(obj, default=str, sort_keys=True) + "\n")
    else:
        typer.echo(text if text is not None else "  ".join(f"{k}={v}" for k, v in obj.items()))


def human_size(n: int) -> str:
    """Bytes for a person (``1.5 MiB``), or exact with ``--bytes``."""
    if state.exact_bytes:
        return str(n)
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def limit_text(limit: int, own: int, *, size: bool) -> str:
    shown = "unlimited" if limit == 0 else (human_size(limit) if size else str(limit))
    return f"{shown} (default)" if own == -1 else shown


def quota_text(q: dict[str, Any]) -> str:
    """An account's quota in one line: its usage beside each limit (``counters``, ``du``,
    ``quota``)."""
    b, m = q["bytes"], q["messages"]
    used_b = "?" if b["used"] is None else human_size(b["used"])
    return (f"quota    bytes {used_b} of {limit_text(b['limit'], b['own'], size=True)}  "
            f"messages {m['used']} of {limit_text(m['limit'], m['own'], size=False)}")


def flags_text(flags: list[str] | tuple[str, ...] | frozenset[str]) -> str:
    """Flags as IMAP shows them: ``\\Seen \\Flagged $Forwarded`` (or ``-`` for none)."""
    return " ".join(sorted(flags)) or "-"


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def cell(text: str | None, width: int) -> str:
    """``text`` in exactly ``width`` terminal columns (wide characters count twice), cut
    with ``…`` when longer, its control characters shown as U+FFFD: a sender or subject is
    whatever the message's author wrote, terminal escape sequences included."""
    from rich.cells import cell_len, set_cell_size  # local: rich, for text tables (not --json)

    clean = _CONTROL.sub("\ufffd", text or "")
    if cell_len(clean) > width:
        return set_cell_size(clean, width - 1) + "…"
    return set_cell_size(clean, width)


def progress_enabled() -> bool:
    """Progress bars are for a person watching: stderr must be a terminal, and not --json."""
    return not state.json and sys.stderr.isatty()


def checked_flags(flags: list[str]) -> list[str]:
    """Flags as typed, but a system flag's name without its backslash is refused with a hint
    (the shell turns an unquoted ``\\Seen`` into ``Seen``)."""
    for f in flags:
        if f.lower() in SYSTEM_FLAG_NAMES:
            fail(f"flag: {f!r} has no backslash: write '\\{f.capitalize()}' in quotes for the "
                 f"system flag (a keyword may not be named like one here)")
    return flags


def stop_on_signals() -> Any:
    """An event set by SIGINT or SIGTERM: a long-running command's signal to stop."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop
