"""A selected mailbox as one IMAP session sees it: its messages in UID order (message
sequence numbers are positions in that order), each one's flags and MODSEQ, and what
changed since the session last looked (EXISTS, EXPUNGE, FETCH FLAGS updates)."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID


@dataclass
class Entry:
    uid: int
    message_id: UUID
    flags: frozenset[str]
    modseq: int
    size: int
    internal_date: datetime


@dataclass
class Selected:
    account: str
    name: str          # the store's mailbox name
    path: str          # the client's name for it
    readonly: bool
    uidvalidity: int
    uidnext: int = 1
    highestmodseq: int = 0
    rights: str = ""
    uids: list[int] = field(default_factory=list)
    entries: dict[int, Entry] = field(default_factory=dict)
    head: int = -1     # the log position the listing was read at
    read_at: float = 0.0  # when (time.monotonic) it was read
    recent: set[int] = field(default_factory=set)  # the UIDs recent to this session
    keywords: set[str] = field(default_factory=set)  # announced in FLAGS
    pending: tuple[list[int], int, list[int]] | None = None  # read, not yet reported
    vanished: list[int] = field(default_factory=list)  # the UIDs of ``pending``'s expunges

    def flags_of(self, e: Entry) -> list[str]:
        return sorted(e.flags | ({"\\Recent"} if e.uid in self.recent else set()))

    def new_keywords(self) -> bool:
        """Whether the messages' keywords include some not announced yet (then they are)."""
        used = {f for e in self.entries.values() for f in e.flags if not f.startswith("\\")}
        if used <= self.keywords:
            return False
        self.keywords |= used
        return True

    def seq_of(self, uid: int) -> int:
        i = bisect_left(self.uids, uid)
        return i + 1 if i < len(self.uids) and self.uids[i] == uid else 0

    def exists(self) -> int:
        return len(self.uids)

    def update(self, listing: list[Any]) -> tuple[list[int], int, list[int]]:
        """Takes a new listing: the sequence numbers to report expunged (in the order to
        send them), the new EXISTS count (0: unchanged) and the UIDs whose flags changed."""
        now = {m.uid: m for m in listing}
        expunged: list[int] = []
        kept: list[int] = []
        for uid in self.uids:
            if uid in now:
                kept.append(uid)
            else:
                expunged.append(len(kept) + 1)  # its sequence number once those before went
                self.vanished.append(uid)
                self.entries.pop(uid, None)
        changed: list[int] = []
        for uid in kept:
            m, e = now[uid], self.entries[uid]
            if m.modseq < e.modseq:  # a read side behind this session's own STORE
                continue
            flags = frozenset(m.flags)
            if flags != e.flags or m.modseq != e.modseq:
                if flags != e.flags:
                    changed.append(uid)
                e.flags, e.modseq = flags, m.modseq
        last = kept[-1] if kept else 0
        new = sorted(uid for uid in now if uid > last and uid not in self.entries)
        for uid in new:
            self.entries[uid] = entry(now[uid])
        self.uids = kept + new
        return expunged, (len(self.uids) if new else 0), changed


def entry(m: Any) -> Entry:
    when = datetime.fromisoformat(m.internal_date) if isinstance(m.internal_date, str) \
        else m.internal_date
    return Entry(m.uid, m.message_id, frozenset(m.flags), m.modseq, m.size, when)
