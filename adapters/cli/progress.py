"""Progress bars on standard error (rich), for a person watching: drawn on a terminal alone,
never with ``--json`` (``common.progress_enabled``). A command module that draws one imports
this at its top; the import, whose runs are mostly nobody's to watch, imports it only when
it draws one."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)

from adapters.cli.common import progress_enabled


def progress_bar(*columns: str | ProgressColumn, transient: bool = False) -> Progress:
    """A bar of ``columns`` (rich's default ones without), disabled unless a person
    watches; ``transient``: gone from the terminal when done."""
    return Progress(*columns, console=Console(stderr=True), disable=not progress_enabled(),
                    transient=transient)


def counting_bar(label: str, *, remaining: bool = False, transient: bool = False) -> Progress:
    """``label``, a bar and ``N/M`` done (``remaining``: and the time left)."""
    columns = [TextColumn(label), BarColumn(), MofNCompleteColumn()]
    return progress_bar(*columns, *([TimeRemainingColumn()] if remaining else []),
                        transient=transient)


def bytes_bar() -> Progress:
    """One line per task, its description, a bar and bytes done of its total (transient)."""
    return progress_bar(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                        transient=True)
