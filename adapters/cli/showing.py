"""``letterlog show``: a message's state, envelope and structure, read from the log (the
read models are neither opened nor caught up)."""

from __future__ import annotations

from typing import Any

import typer

from adapters.cli.arguments import parse_uuid
from adapters.cli.common import MessageId, flags_text, group, human_size, out, state

app = group("Messages.")
SECTION = (11, 'Messages')  # the root help's section (adapters.cli.table)

SHOWN = ("message_id", "account", "mailbox", "uid", "uidvalidity", "state", "flags", "labels",
         "size", "internal_date", "policy", "extract_count", "extractions_to_date",
         "last_extracted_at", "thread_id", "sha256", "inline")


def shown(key: str, value: Any) -> str:
    """A value of ``show`` for a person: flags, labels, sizes and the policy in words."""
    if value is None:
        return "-"
    if key == "flags":
        return flags_text(value)
    if key == "labels":
        return ", ".join(value) or "-"
    if key == "size":
        return human_size(value)
    if key == "policy":
        return {"indefinite": "indefinite", "count": f"at most {value.get('limit')} extractions",
                "until": f"until {value.get('until')}"}.get(value.get("kind"), str(value))
    return str(value)


@app.command()
def show(message_id: MessageId) -> None:
    """Show a message's state, envelope and structure."""
    info = state.store(create=False, read_models=False).show(parse_uuid(message_id))
    if state.json:
        out(info)
        return
    for k in SHOWN:
        typer.echo(f"{k:14} {shown(k, info[k])}")
    envelope = info.get("envelope") or {}
    for k in ("from", "to", "cc", "subject", "date", "message_id"):
        v = envelope.get(k)
        if v:
            typer.echo(f"{k if k != 'message_id' else 'message-id':14} "
                       f"{', '.join(v) if isinstance(v, list) else v}")
    if info.get("attachments"):
        typer.echo(f"{'attachments':14} {', '.join(info['attachments'])}")
    smtp = info.get("smtp_envelope") or {}
    if smtp:  # what the MTA said (lda, lmtp)
        typer.echo(f"{'smtp envelope':14} " + "  ".join(
            f"{k}={'<>' if k == 'sender' and not v else v}" for k, v in sorted(smtp.items())))
    facts = info.get("facts") or {}
    typer.echo(f"{'structure':14} {facts.get('content_type')}, {facts.get('part_count')} parts, "
               f"depth {facts.get('depth')}, {facts.get('line_ending')} line endings"
               + (f", defects: {', '.join(facts['defects'])}" if facts.get("defects") else ""))
