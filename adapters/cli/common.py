"""What every command module shares: the global options, output, argument parsing and the
way a value is shown to a person (names, flags, sizes, cells of a listing).

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
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast
from uuid import UUID

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
            # local: the store, for the commands that open it alone (not --help, not fast reads)
            from adapters.embedded import Letterlog

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

    def read_models(self) -> Face | CurrentTables:
        """The read models for a read command: the tables alone when they are current with
        the log (the fast read path), else the store (``reader``), caught up on opening."""
        if self.user is not None:  # a user's reads are checked by the store (CallerView)
            return self.reader()
        if self._store is None and self._current is None:
            # local: the fast read path, for reads alone (ADR 0024)
            from adapters.startup.current import open_current

            self._current = open_current(self.data)
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


def parse_uuid(value: str, what: str = "MESSAGE_ID") -> UUID:
    try:
        return UUID(value)
    except ValueError:
        fail(f"{what}: {value!r} is not a message id (a UUID)")


def parse_time(value: str | None, what: str) -> datetime | None:
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        fail(f"{what}: {value!r} is not an ISO 8601 date-time")
    if t.tzinfo is None:
        fail(f"{what}: {value!r} needs a timezone (e.g. +00:00)")
    return t


def parse_future(value: str | None, what: str) -> datetime | None:
    """An ISO 8601 date-time that has not passed yet (an extraction deadline)."""
    t = parse_time(value, what)
    if t is not None and t <= datetime.now(UTC):
        fail(f"{what}: {value!r} is in the past (a message would be expired at once)")
    return t


def parse_day(value: str | None, what: str) -> datetime | None:
    """A date (``2026-03-01``, midnight UTC) or a date-time with a timezone."""
    if value is None:
        return None
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        try:
            return datetime.fromisoformat(value).replace(tzinfo=UTC)
        except ValueError:
            fail(f"{what}: {value!r} is not a date")
    return parse_time(value, what)


AS_OF_HELP = ("as it was at log position P (a whole number: 5000) or at DATE (2026-03-01: "
              "midnight UTC, or an ISO 8601 date-time with a timezone: the last event "
              "recorded then)")


def parse_as_of(value: str | None, what: str = "--as-of") -> int | datetime | None:
    """``--as-of``, the same on every command: a whole number is a log position, anything
    else must be a date (``2026-03-01``, midnight UTC) or an ISO 8601 date-time with a
    timezone, which the command turns into the position of the last event recorded then
    (``position_at``)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return int(text)
    if re.fullmatch(r"[+-]?\d+", text):
        fail(f"{what}: {value!r} is not a log position (a whole number, 0 or more)")
    if not re.match(r"\d{4}-\d{2}-\d{2}", text):
        fail(f"{what}: {value!r} is neither a log position (a whole number: 5000) nor a date "
             f"(2026-03-01, or 2026-03-01T12:00:00+00:00)")
    return parse_day(text, what)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(value: str | None, what: str) -> int | None:
    """``1500``, ``10k``, ``2.5M``, ``1GiB`` (powers of 1024) as bytes."""
    if value is None:
        return None
    m = _SIZE.match(value)
    if not m:
        fail(f"{what}: {value!r} is not a size (e.g. 1500, 10k, 2.5M)")
    power = " KMGT".index((m.group(2) or " ").upper())
    return int(float(m.group(1)) * 1024**power)


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


def flags_text(flags: list[str] | tuple[str, ...] | frozenset[str]) -> str:
    """Flags as IMAP shows them: ``\\Seen \\Flagged $Forwarded`` (or ``-`` for none)."""
    return " ".join(sorted(flags)) or "-"


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def cell(text: str | None, width: int) -> str:
    """``text`` in exactly ``width`` terminal columns (wide characters count twice), cut
    with ``…`` when longer, its control characters shown as U+FFFD: a sender or subject is
    whatever the message's author wrote, terminal escape sequences included."""
    # local: rich's cell widths, for text tables alone (not --help, not --json)
    from rich.cells import cell_len, set_cell_size

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
