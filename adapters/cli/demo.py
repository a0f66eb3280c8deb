"""``letterlog demo``: generated mail through the embedded API, every command, a summary."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import track
from rich.table import Table

from adapters.cli.demo_report import report
from adapters.demo.mailgen import generate
from domain.errors import ExtractionRefused

if TYPE_CHECKING:
    from adapters.face import Store


def run_demo(store: Store, *, messages: int = 400, as_json: bool = False) -> dict[str, Any]:
    console = Console(stderr=as_json)
    progress = Console(stderr=True)  # a bar on a terminal only, never in the output
    deliveries = []
    delivered_bytes = 0
    mails = list(generate(messages))
    for g in track(mails, description="delivering", console=progress,
                   disable=as_json or not progress.is_terminal):
        for rcpt in g.recipients:
            d = store.deliver(account=rcpt, raw=g.raw, labels=list(g.labels))
            deliveries.append((rcpt, g, d))
            delivered_bytes += d.size

    accounts = sorted({r for r, _, _ in deliveries})
    for acc in accounts:
        store.create_mailbox(acc, "Archive", "archive")
        store.create_mailbox(acc, "Trash", "trash")
        store.subscribe(acc, "INBOX")
        store.subscribe(acc, "Archive")

    # Read most mail, flag some, label some, archive the old, delete a few.
    flagged = labelled = moved = deleted = copied = 0
    for n, (_acc, _g, d) in enumerate(deliveries):
        if n % 10 < 7:
            store.flag(d.message_id, ["\\Seen"])
        if n % 13 == 0:
            store.flag(d.message_id, ["\\Flagged", "$Important"])
            flagged += 1
        if n % 9 == 0:
            store.label(d.message_id, add=["follow-up"])
            labelled += 1
        if n % 17 == 0:
            store.move(d.message_id, "Archive")
            moved += 1
        elif n % 23 == 0:
            store.delete(d.message_id)
            deleted += 1
        elif n % 29 == 0:
            store.copy(d.message_id, "Archive")
            copied += 1
    first = deliveries[1][2]
    store.delete(first.message_id)
    store.restore(first.message_id)

    # Extraction policy: a message that may be extracted twice.
    acc, g, d = deliveries[2]
    store.set_policy(d.message_id, extract_limit=2)
    extracted_ok = sum(1 for _ in range(2) if store.extract(d.message_id) == g.raw)
    refused = False
    try:
        store.extract(d.message_id)
    except ExtractionRefused:
        refused = True
    store.set_policy(d.message_id, extract_limit=1)  # extractable again
    again = store.extract(d.message_id) == g.raw

    stored = sum(size for _, size, _ in store.payloads.list())
    inline = sum(d.size for _, _, d in deliveries if d.size <= store.settings.inline_limit)
    summary = {
        "accounts": len(accounts),
        "messages_delivered": len(deliveries),
        "distinct_messages": len(mails),
        "mailboxes": sum(len(store.mailbox_list(a)) for a in accounts),
        "bytes_delivered": delivered_bytes,
        "bytes_stored": stored + inline,
        "payloads_stored": sum(1 for _ in store.payloads.list()),
        "events_in_log": store.max_position(),
        "flagged": flagged, "labelled": labelled, "moved": moved, "deleted": deleted,
        "copied": copied,
        "extractions_ok": extracted_ok, "third_extraction_refused": refused,
        "extractable_after_policy_change": again,
    }
    if store.projections is not None:
        summary.update(report(store.projections, console, accounts, as_json=as_json))
    if as_json:
        print(json.dumps(summary, sort_keys=True))
        return summary
    t = Table(title="letterlog demo", show_header=False)
    t.add_row("accounts", str(summary["accounts"]))
    t.add_row("messages delivered", f"{summary['messages_delivered']} "
              f"({summary['distinct_messages']} distinct)")
    t.add_row("mailboxes", str(summary["mailboxes"]))
    t.add_row("bytes delivered", f"{delivered_bytes:,}")
    t.add_row("bytes stored", f"{summary['bytes_stored']:,} "
              f"({summary['bytes_stored'] / max(1, delivered_bytes):.0%}: payload dedup)")
    t.add_row("events in the log", f"{summary['events_in_log']:,}")
    t.add_row("flag / label / move / delete / copy",
              f"{flagged} / {labelled} / {moved} / {deleted} / {copied}")
    t.add_row("extraction limit 2", f"{extracted_ok} ok, third refused: {refused}, "
              f"after policy change: {'ok' if again else 'refused'}")
    console.print(t)
    return summary
