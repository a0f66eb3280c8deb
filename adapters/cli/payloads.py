"""``letterlog payloads migrate``: a host's payload files copied into HBase (ADR 0072).

A store on the scale-out path keeps its payloads over the inline limit in HBase; payload
files a host wrote before (``<data>/payloads``) are still read where they are, and this
command copies them over, idempotently, with progress (docs/operations.md)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer

from adapters.bootstrap.payloads import layered_payloads
from adapters.cli.common import fail, group, out, state
from adapters.cli.progress import counting_bar
from adapters.config.settings import load_settings

app = group("Payloads: the message bodies over the inline limit.")
SECTION = (82, 'Payloads')  # the root help's section (adapters.cli.table)
payloads_app = group("Where payloads live: `migrate` copies this host's payload files into "
                     "HBase (see docs/operations.md).")
app.add_typer(payloads_app, name="payloads")


@payloads_app.command()
def migrate(remove_local: Annotated[bool, typer.Option(
        "--remove-local", help="delete each payload file once HBase holds it")] = False) -> None:
    """Copy every payload file of --data into HBase's payload table (one already there is
    only refreshed; run it again at any time); then this host's disk holds no payload."""
    settings = load_settings(data=state.data)
    if not settings.payloads_in_hbase():
        fail("payloads are kept in files here: migrate copies them into HBase, which needs "
             "LETTERLOG_PAYLOAD_STORE=hbase (the default with LETTERLOG_TABLE_STORE=hbase)")
    store = layered_payloads(settings)
    bar = counting_bar("payloads", transient=True)
    task = bar.add_task("migrate", total=None)
    try:
        with bar:
            done = store.migrate(remove=remove_local, progress=lambda n, total: bar.update(
                task, completed=n, total=total))
    finally:
        store.close()
    out(asdict(done), f"{done.files} payload files: {done.copied} copied into HBase "
                      f"({done.bytes_copied} bytes), {done.present} there already, "
                      f"{done.removed} removed here")
