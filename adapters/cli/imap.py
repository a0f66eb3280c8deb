"""``letterlog imap``: the IMAP server (docs/imap.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters.bootstrap.directories import directory
from adapters.cli.common import group, state
from adapters.config.settings import load_settings
from adapters.embedded import Letterlog
from adapters.imap.processes import run, run_processes, tls_context
from adapters.imap.server import Options
from adapters.mta.listeners import parse_listen
from domain.errors import InvalidCommand

app = group("The IMAP server.")
SECTION = (135, 'Mail clients')  # the root help's section (adapters.cli.table)


@app.command()
def imap(
    listen: Annotated[str | None, typer.Option(
        metavar="HOST:PORT", help="where to serve IMAP with STARTTLS (e.g. 0.0.0.0:143)")] = None,
    listen_tls: Annotated[str | None, typer.Option(
        metavar="HOST:PORT", help="where to serve IMAP over TLS from the first byte (port 993 "
        "style); needs --tls-cert")] = None,
    tls_cert: Annotated[str | None, typer.Option(
        metavar="FILE", help="the server's certificate chain (PEM)")] = None,
    tls_key: Annotated[str | None, typer.Option(
        metavar="FILE", help="its private key (PEM; default: in --tls-cert)")] = None,
    plaintext_auth: Annotated[bool, typer.Option(
        help="allow LOGIN and AUTHENTICATE PLAIN without TLS (else LOGINDISABLED until "
        "STARTTLS)")] = False,
    login_failure_delay: Annotated[float, typer.Option(
        metavar="SECONDS", help="how long a failed login waits before its answer")] = 2.0,
    processes: Annotated[int, typer.Option(
        metavar="N", min=1, help="server processes on the same ports (one core each)")] = 1,
) -> None:
    """Serve IMAP4rev1 in the foreground until SIGTERM or Ctrl-C.

    Users log in against the user directory (LETTERLOG_DIRECTORY: the passwd-file's password
    field, or a bind to LDAP); each session acts as its user, with the user's rights and
    virtual root, as `letterlog --as USER` does."""
    def address(value: str | None, option: str) -> tuple[str, int] | None:
        if value is None:
            return None
        try:
            kind, where = parse_listen(value)
        except ValueError as e:
            raise InvalidCommand(str(e).replace("--listen", option)) from None
        if kind != "tcp":
            raise InvalidCommand(f"{option} {value!r}: expected HOST:PORT")
        return where  # type: ignore[no-any-return]

    where, where_tls = address(listen, "--listen"), address(listen_tls, "--listen-tls")
    if where is None and where_tls is None:
        raise InvalidCommand("imap needs --listen HOST:PORT or --listen-tls HOST:PORT")
    if where_tls is not None and tls_cert is None:
        raise InvalidCommand("--listen-tls needs --tls-cert FILE (and --tls-key FILE)")
    if login_failure_delay < 0:
        raise InvalidCommand("--login-failure-delay must not be negative")
    context = None
    if tls_cert is not None:
        try:
            context = tls_context(tls_cert, tls_key)
        except (OSError, ValueError) as e:
            raise InvalidCommand(f"--tls-cert {tls_cert}: {e}") from None
    options = Options(where, where_tls, context, plaintext_auth, login_failure_delay)
    users = directory(load_settings(data=state.data))
    if processes == 1:
        run(state.admin_reader(), users, options)
        return
    Letterlog.open(state.data, create=False).close()  # refused here if there is no store
    raise typer.Exit(run_processes(lambda: Letterlog.open(state.data, create=False), users,
                                   options, processes))
