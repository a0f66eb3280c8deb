"""Mail from an MTA: ``lda`` (a local delivery agent: Postfix's pipe(8)) and the options it
shares with ``lmtp`` (an LMTP server: Postfix's lmtp(8), ``lmtpserver``); ``init``
(``storeinit``) makes the store they deliver into.

Their exit statuses and replies are the MTA's contract (``adapters.mta.replies``), not the
other commands' 0/1/2: a failure a retry may fix is 75 / 4.x.x, so the MTA keeps the mail.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated, Any

import typer

from adapters.cli.common import group, out, state
from adapters.mta.delivery import Envelope, MtaOptions
from adapters.mta.lda import deliver
from adapters.startup.handoff import as_store_owner
from adapters.startup.ldaoptions import LDA_OPTIONS

# each option by the name in the lda's one option table (its fast parser reads the same)
OPT = {field: option for field, (option, _) in LDA_OPTIONS.items()}

app = group("Mail from an MTA.")
SECTION = (130, 'Mail from an MTA')  # the root help's section (adapters.cli.table)

RecipientDelimiter = Annotated[str, typer.Option(
    OPT["recipient_delimiter"], metavar="C",
    help="separates user and detail in user+detail@domain ('' for none)")]
DetailMailbox = Annotated[bool, typer.Option(
    OPT["detail_mailbox"], help="deliver user+detail@domain to mailbox 'detail' if the "
    "account has one (else INBOX)")]
MustExist = Annotated[bool, typer.Option(
    OPT["accounts_must_exist"], envvar="LETTERLOG_ACCOUNTS_MUST_EXIST",
    help="refuse mail for an account the store does not have (5.1.1) instead of opening it")]
EnvelopeHeaders = Annotated[bool, typer.Option(
    OPT["envelope_headers"], help="add Return-Path and Delivered-To in front of the message "
    "(otherwise it is stored exactly as the MTA handed it over)")]
Mailbox = Annotated[str | None, typer.Option(
    OPT["mailbox"], metavar="NAME",
    help="deliver to this mailbox (INBOX if the account has none of the name)")]
Timeout = Annotated[float, typer.Option(
    OPT["timeout"], metavar="SECONDS", min=1.0,
    help="give up (temporary failure) after this long in all")]


def lda_options(**given: Any) -> Any:
    """The placement options both commands share, from their parameters."""
    return MtaOptions(**{f.name: given[f.name] for f in fields(MtaOptions)})


@app.command()
def lda(
    recipient: Annotated[str, typer.Option(
        OPT["recipient"], metavar="ADDR",
        help="the final recipient (user+detail@domain goes to user@domain)")],
    sender: Annotated[str | None, typer.Option(
        OPT["sender"], metavar="ADDR",
        help="the envelope sender ('' or '<>': the null sender of a bounce)")
    ] = None,
    original_recipient: Annotated[str, typer.Option(
        OPT["original_recipient"], metavar="ADDR",
        help="the recipient before aliases and forwarding")] = "",
    queue_id: Annotated[str, typer.Option(
        OPT["queue_id"], metavar="ID",
        help="the MTA's queue id: a retry of the same message is a duplicate")
    ] = "",
    mailbox: Mailbox = None,
    detail_mailbox: DetailMailbox = False,
    accounts_must_exist: MustExist = False,
    recipient_delimiter: RecipientDelimiter = "+",
    envelope_headers: EnvelopeHeaders = False,
    timeout: Timeout = 300.0,
) -> None:
    """Deliver one message from standard input, as an MTA's local delivery agent.

    Exit status (sysexits.h): 0 stored (or already stored); 75 try again later (busy,
    locked, full, unavailable store, nothing on standard input, any unexpected error); 65
    too large (a message is never refused for its structure);
    67 unknown account (--accounts-must-exist); 64 usage. One line on stderr starts with
    an RFC 3463 code. Never creates a data directory: make the store with 'letterlog init'."""
    refused = as_store_owner(str(state.data))  # as root: the store owner's uid (ADR 0068)
    if refused is not None:
        typer.echo(refused, err=True)
        raise typer.Exit(75)
    outcome = deliver(state.data, Envelope(recipient=recipient, sender=sender,
                                           original_recipient=original_recipient,
                                           queue_id=queue_id),
                      lda_options(**locals()))
    if outcome.exit_status:
        typer.echo(outcome.line, err=True)
    elif state.json:
        out({"status": outcome.status, "text": outcome.text})
    else:  # Postfix's log records it: the message's letterlog id
        typer.echo(outcome.line)
    raise typer.Exit(outcome.exit_status)
