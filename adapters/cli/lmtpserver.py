"""``letterlog lmtp``: an LMTP server (Postfix's lmtp(8)) in the foreground, with the lda's
options (``adapters.cli.mta``); aiosmtpd and the writer process's handle load with this command
alone, not with the lda's."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters.cli.common import group, state
from adapters.cli.mta import (
    DetailMailbox,
    EnvelopeHeaders,
    Mailbox,
    MustExist,
    RecipientDelimiter,
    Timeout,
    lda_options,
)
from adapters.mta.lmtp import serve

app = group("Mail from an MTA.")
SECTION = (131, 'Mail from an MTA')  # the root help's section (adapters.cli.table)


@app.command()
def lmtp(
    listen: Annotated[str, typer.Option(
        metavar="HOST:PORT|unix:PATH", help="where to listen (e.g. 127.0.0.1:24, "
        "unix:/run/letterlog/lmtp)")],
    mailbox: Mailbox = None,
    detail_mailbox: DetailMailbox = False,
    accounts_must_exist: MustExist = False,
    recipient_delimiter: RecipientDelimiter = "+",
    envelope_headers: EnvelopeHeaders = False,
    timeout: Timeout = 300.0,
    socket_mode: Annotated[str | None, typer.Option(
        metavar="MODE", help="the unix socket's permission bits, octal (e.g. 0660: Postfix's "
        "lmtp(8) in the socket's group may connect)")] = None,
    socket_group: Annotated[str | None, typer.Option(
        metavar="GROUP", help="the unix socket's group (this user must be in it; a setgid "
        "directory gives its group by itself)")] = None,
) -> None:
    """Serve LMTP (RFC 2033) in the foreground until SIGTERM or Ctrl-C.

    One reply per recipient after DATA: 250 2.0.0 stored, 4.x.x try again later, 5.x.x
    refused (5.6.0 no bytes but blanks, 5.3.4 too large, 5.1.1 unknown account with
    --accounts-must-exist). A second process keeps the read models current. On SIGTERM it
    stops listening, finishes the transactions in flight and exits 0."""
    serve(state.data, listen, lda_options(**locals()), socket_mode=socket_mode,
          socket_group=socket_group)
