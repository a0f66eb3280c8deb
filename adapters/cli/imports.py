"""``letterlog import mbox|maildir``: bulk import, batched, with progress on a terminal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from adapters.cli.common import group, out, progress_enabled, state
from adapters.cli.follower import prestart
from adapters.cli.import_source import maildir_messages
from adapters.cli.importer import ImportInterrupted, run_import
from adapters.cli.mbox_ahead import MboxAhead

if TYPE_CHECKING:
    from adapters.face import Store

app = group("Import mail.")
SECTION = (40, 'Import')  # the root help's section (adapters.cli.table)
import_app = group("Import mbox files or Maildir folders (exit 1 if any message was "
                   "rejected).")
app.add_typer(import_app, name="import")

PathArg = Annotated[Path, typer.Argument(metavar="PATH", help="the mbox file or Maildir")]
AccountOption = Annotated[str, typer.Option(metavar="ADDR", help="the account to import into")]
MailboxOption = Annotated[str, typer.Option(metavar="NAME", help="target mailbox")]
BatchOption = Annotated[int, typer.Option(metavar="N", min=1, help="messages per append")]


def _reject(name: str, problem: str) -> None:
    typer.echo(f"letterlog: error: {name}: {problem}", err=True)


def _warn(problem: str) -> None:
    typer.echo(f"letterlog: warning: {problem}", err=True)


def _run(source: Callable[[Path], tuple[int, Any]], path: Path, account: str,
         mailbox: str, batch: int) -> None:

    try:
        total, items = source(path)  # the path is checked here, before any progress shows
        if total > batch:  # it will project in a second process: forked before the store
            prestart()  # is opened (ADR 0115), which the first append wakes
        store = state.admin()
        store.check_delivery(account=account, mailbox=mailbox)
    except KeyboardInterrupt:
        typer.echo("letterlog: interrupted before the first message was imported; run the "
                   "same command again to import", err=True)
        raise typer.Exit(130) from None
    try:
        report = _imported(store, total, items, account, mailbox, batch)
    except ImportInterrupted as e:
        _let_go(items)
        done = e.report
        typer.echo(f"letterlog: interrupted: {done['imported']} of {total} messages imported "
                   f"so far ({done['already_imported']} were there already, {done['rejected']}"
                   f" rejected); run the same command again to resume (what landed is "
                   f"skipped, nothing is imported twice)", err=True)
        raise typer.Exit(130) from None
    _let_go(items)
    text = f"imported {report['imported']} messages, rejected {report['rejected']}"
    if report["already_imported"]:
        text += (f"; {report['already_imported']} already imported into {account} {mailbox} "
                 f"(from this source before: not imported again)")
    out(report, text)
    if report["rejected"]:
        raise typer.Exit(1)


def _let_go(items: Any) -> None:
    """A source holding a file (``MboxAhead``: the mbox mapped) lets go of it."""
    close = getattr(items, "close", None)
    if close is not None and not hasattr(items, "__next__"):  # not a generator's close
        close()


def _imported(store: Store, total: int, items: Any, account: str, mailbox: str,
              batch: int) -> dict[str, Any]:

    if not progress_enabled():  # nobody watches: no progress bar, and rich is not imported
        report = run_import(store, total, items, account, mailbox, batch=batch,
                            on_reject=_reject)
    else:
        # rich loads only where a progress bar is drawn (a terminal)
        from adapters.cli.progress import counting_bar  # local: rich, for a terminal alone

        with counting_bar("importing", remaining=True) as bar:
            task = bar.add_task("import", total=total)
            report = run_import(store, total, items, account, mailbox, batch=batch,
                                progress=lambda n: bar.advance(task, n), on_reject=_reject)
    return report


@import_app.command("mbox")
def import_mbox(path: PathArg, account: AccountOption, mailbox: MailboxOption = "INBOX",
                batch: BatchOption = 100) -> None:
    """Import every message of an mbox file, with its From-line date and Status flags.
    Importing it again into the same mailbox adds nothing; into another mailbox, a copy."""

    def source(path: Path) -> tuple[int, Any]:
        ahead = MboxAhead(path, warn=_warn)  # read and checked in a second process
        return ahead.total, ahead

    _run(source, path, account, mailbox, batch)


@import_app.command("maildir")
def import_maildir(path: PathArg, account: AccountOption, mailbox: MailboxOption = "INBOX",
                   batch: BatchOption = 100) -> None:
    """Import a Maildir (cur/ and new/, and Maildir++ sub-folders as mailboxes), keeping its
    flags (:2,SRFTD) and file times."""

    _run(maildir_messages, path, account, mailbox, batch)
