"""``letterlog users list|purge``: what the user directory answers, and the user purge job.

The directory is the settings' (``LETTERLOG_DIRECTORY``: ``passwd-file``, the default, or
``ldap``; docs/permissions.md "Users and the directory"). A directory that fails or does not
answer in time is a temporary failure: one line, exit status 1. A passwd-file line that
cannot be read is a mistake in the file: one line naming it, exit status 2. A user purge
that refuses to decide (see ``adapters/lifecycle/userpurge.py``) removes nothing, prints
why, and exits 1.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from adapters.bootstrap import directory
from adapters.cli.common import fail, group, out, state
from adapters.config.settings import load_settings
from adapters.lifecycle.purgememory import MEMORY_FILE, PurgeMemory
from adapters.lifecycle.userpurge import purge_users
from domain.directory import DirectoryUnavailable

app = group("Users and groups of the user directory.")
SECTION = (140, 'Users')  # the root help's section (adapters.cli.table)
users_app = group("Users and groups from the user directory (LETTERLOG_DIRECTORY), and the "
                  "user purge job (see docs/permissions.md).")
app.add_typer(users_app, name="users")


def _directory() -> Any:
    return directory(load_settings(data=state.data))


@users_app.command("list")
def users_list() -> None:
    """Every user the directory answers, with the user's groups (--json: one object per
    user)."""
    where = _directory()
    try:
        users = where.users()
    except DirectoryUnavailable as error:
        fail(str(error), 1)
    source = getattr(where, "source", "")
    skipped = where.skipped()
    if state.json:
        for user in users:
            out({"name": user.name, "groups": sorted(user.groups)})
    else:
        width = max([4, *(len(u.name) for u in users)])
        typer.echo(f"{'USER':{width}}  GROUPS")
        for user in users:
            typer.echo(f"{user.name:{width}}  {', '.join(sorted(user.groups)) or '-'}")
    # each skipped line was logged as a warning naming it (the directory's logger)
    more = f" ({len(skipped)} skipped)" if skipped else ""
    typer.echo(f"{len(users)} user{'' if len(users) == 1 else 's'}{more} from {source}",
               err=True)
    if skipped:
        raise typer.Exit(1)  # done in part: the file needs mending


@users_app.command("purge")
def users_purge(
    dry_run: Annotated[bool, typer.Option(
        help="ask the directory and decide; remove nothing, write nothing")] = False,
    accept_shrink: Annotated[bool, typer.Option(
        help="the directory really has far fewer users than last time: purge anyway (an "
             "answer of no user is still refused)")] = False,
) -> None:
    """Remove the virtual roots and ACL entries of users the directory does not know (as
    events: auditable, and an administrator can set them again). Refuses, removing nothing,
    when the directory fails, times out, answers no user, or far fewer users than at the
    last accepted run (LETTERLOG_USER_PURGE_MIN_RATIO)."""
    store = state.admin_reader()
    settings = store.settings
    report = purge_users(directory(settings), store, PurgeMemory(Path(settings.data)
                                                                 / MEMORY_FILE),
                         min_ratio=settings.user_purge_min_ratio, dry_run=dry_run,
                         accept_shrink=accept_shrink)
    result = report.as_dict()
    if state.json:
        out(result)
    else:  # each line ends with the command that sets the record again

        verb = "would remove" if report.dry_run else "removed"
        for r in report.roots_removed:
            again = shlex.join(["letterlog", "root", "set", r["user"], r["root"]])
            typer.echo(f"{verb} root {r['user']} -> {r['root']}  (again: {again})")
        for e in report.acl_removed:
            again = shlex.join(["letterlog", "acl", "set", e["account"], e["mailbox"],
                                e["identifier"], e["rights"]])
            typer.echo(f"{verb} acl {e['account']} {e['mailbox']} {e['identifier']} "
                       f"{e['rights']}  (again: {again})")
    if report.status == "refused":
        fail(report.line(), 1)
    if not state.json:
        typer.echo(report.line())
