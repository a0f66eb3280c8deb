"""What a copied log holds, read from its stored events' topics alone (nothing decoded):
its head, how many messages it has, how many of them were purged."""

from __future__ import annotations

import sqlite3

from eventsourcing.utils import get_topic

from domain.message import Message


def _log_facts(con: sqlite3.Connection) -> dict[str, int]:
    """The log's head and how many messages it has (ever, and purged), from the stored
    events' topics alone (nothing decoded)."""
    head = con.execute("SELECT COALESCE(MAX(rowid), 0) FROM stored_events").fetchone()[0]
    messages = con.execute("SELECT count(DISTINCT originator_id) FROM stored_events "
                           "WHERE topic LIKE 'domain.message:Message.%'").fetchone()[0]
    purged = con.execute("SELECT count(DISTINCT originator_id) FROM stored_events "
                         "WHERE topic = ?", (_purged_topic(),)).fetchone()[0]
    return {"position": int(head), "messages": int(messages), "purged_messages": int(purged)}


def _purged_topic() -> str:
    return str(get_topic(Message.Purged))
