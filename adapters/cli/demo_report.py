"""The read-model half of ``letterlog demo``: listings, a label, a thread, counters, verify."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from domain.values import account_id_for
from projections import queries as q


def _listing(title: str, rows: list[q.MessageSummary]) -> Table:
    t = Table(title=title)
    for col in ("uid", "date", "from", "subject", "flags", "labels"):
        t.add_column(col)
    for m in rows:
        t.add_row(str(m.uid), m.internal_date[:16], (m.sender or "")[:24], (m.subject or "")[:40],
                  " ".join(m.flags), " ".join(m.labels))
    return t


def report(host: Any, console: Any, accounts: list[str], *, as_json: bool) -> dict[str, Any]:
    tables, phys = host.tables, host.physical
    who = accounts[0]
    acc = account_id_for(who)
    names = q.mailbox_names(tables, acc, phys)
    inbox = q.mailbox_messages(tables, names["INBOX"], limit=8, physical=phys)
    reports = q.label_messages(tables, acc, "reports", limit=5, physical=phys)
    longest: list[q.MessageSummary] = []
    for m in q.mailbox_messages(tables, names["INBOX"], limit=200, physical=phys):
        if m.thread_id is not None:
            thread = q.thread_messages(tables, m.thread_id, physical=phys)
            if len(thread) > len(longest):
                longest = thread
    boxes, labels = q.counters(tables, acc, phys)
    by_id = {v: k for k, v in names.items()}
    status = q.mailbox_status(tables, names["INBOX"], phys) or {}
    verify = host.verify()
    identical = all(r.identical for r in verify)
    if not as_json:
        console.print(_listing(f"{who} INBOX, newest first", inbox))
        console.print(_listing(f"{who} label 'reports', newest first", reports))
        console.print(_listing(f"longest thread ({len(longest)} messages)", longest[:8]))
        t = Table(title=f"{who} counters")
        for col in ("mailbox / label", "messages", "unread", "bytes"):
            t.add_column(col)
        for k, c in sorted(boxes.items(), key=lambda kv: by_id.get(kv[0], "")):
            t.add_row(by_id.get(k, str(k)), str(c.messages), str(c.unread), f"{c.bytes:,}")
        for label, c in sorted(labels.items()):
            t.add_row(f"label {label}", str(c.messages), str(c.unread), f"{c.bytes:,}")
        console.print(t)
        console.print(f"INBOX status: uidvalidity={status.get('uidvalidity')} "
                      f"uidnext={status.get('uidnext')} "
                      f"highestmodseq={status.get('highestmodseq')}")
        v = Table(title="verify --all: live tables vs a rebuild from the log")
        for col in ("table", "rows", "digest", "identical"):
            v.add_column(col)
        for r in verify:
            v.add_row(r.table, str(r.live_rows), r.live_digest[:16], "yes" if r.identical else "NO")
        console.print(v)
    return {
        "inbox_newest_first": [m.uid for m in inbox],
        "label_reports": len(reports),
        "longest_thread": len(longest),
        "inbox_status": status,
        "verify_identical": identical,
    }
