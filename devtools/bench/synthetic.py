"""Synthetic mail and a simulated mail history for the read-side benchmarks.

``MailFactory`` makes realistic messages (what ``inspect_message`` would record about
them); ``LogSimulator`` plays out an activity model through the real aggregates.
The activity model is a simulated clock: every tick delivers a
group of 1-3 messages (MTAs deliver one at a time; each group allocates its UIDs) to one of
several accounts (some much busier than others), and each message gets a fate drawn when it
arrives, played out over the following ticks:

======================  =========================================================
delivered to            INBOX 85 %, Sent 10 % (already ``\\Seen``), a filed folder 5 %
read (``\\Seen``)        80 % of INBOX mail, 40 % of filed mail
answered / flagged      10 % of read mail / 5 % (half unflagged later)
extracted (downloaded)  2 % of read mail
labelled                15 % (a fifth of those get a second label, a tenth lose one)
moved                   12 % (mostly to Archive)
soft-deleted            15 % of INBOX, 30 % of filed mail; 60 % of those expunged later,
                        3 % restored
======================  =========================================================

Bodies are small and inline (plain text, 0.3-3 KB, unique: their own headers), with
envelopes and facts exactly as ``inspect_message`` describes such a message; 8 % carry an
attachment and live in the payload store (not inline; a third share one payload). That gives
about three events per message, a mailbox-like mix (see ``meta.json`` next to the log).
"""

from __future__ import annotations

import hashlib
import random
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from types import SimpleNamespace
from typing import Any
from uuid import UUID

from domain.account import Account
from domain.mailbox import Mailbox
from domain.message import Arrival, Message
from domain.service import new_message_id, thread_id_for
from domain.values import Role

DOMAIN = "example.org"


_FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Margaret", "Ken", "Frances",
          "John", "Radia", "Leslie", "Hedy", "Dennis", "Karen", "Tim", "Sophie", "Linus")
_LAST = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Hamilton", "Thompson",
         "Allen", "Backus", "Perlman", "Lamport", "Lamarr", "Ritchie", "Jones", "Berners-Lee",
         "Wilson", "Torvalds")
_TEXT = (
    "mailbox quarterly report review merge release schedule budget design meeting draft "
    "storage event replay projection cluster region shard purge invoice contract lunch "
    "friday deadline proposal customer feedback roadmap hiring offsite travel expense "
    "benchmark latency throughput index label thread archive backup restore the a of to "
    "and we please thanks attached see below next week update status plan team"
)
_WORDS = _TEXT.split()
LABELS = ("work", "travel", "finance", "family", "receipts", "important", "later")
_POLICY = {"kind": "indefinite", "limit": None, "until": None}
_PLAIN_FACTS = {"content_type": "text/plain", "part_count": 1, "depth": 0,
                "has_attachments": False, "defects": [], "line_ending": "CRLF"}


def _wrap(words: list[str]) -> str:
    lines, line = [], ""
    for w in words:
        if len(line) + len(w) + 1 > 72:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    lines.append(line)
    return "\r\n".join(lines)


@dataclass
class Mail:
    """What ``domain.delivery.delivery_fields`` would record for one message (minus placement)."""

    size: int
    sha256: str
    inline: bool
    thread_id: UUID
    facts: dict[str, Any]
    personal: dict[str, Any]
    raw: bytes | None


class MailFactory:
    """Synthesises messages whose envelope and facts equal ``inspect_message``'s (tested), fast
    enough for a million events (the email parser would take minutes)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.paragraphs = [
            _wrap([rng.choice(_WORDS) for _ in range(rng.randint(20, 120))]).capitalize() + "."
            for _ in range(400)
        ]
        self.people = [f"{f} {s} <{f.lower()}.{s.lower()}@{d}>"
                       for f in _FIRST for s in _LAST[:6]
                       for d in ("example.com", "example.net")]
        self.shared_payload = hashlib.sha256(b"letterlog bench shared attachment").hexdigest()
        self.seq = 0

    def subject(self) -> str:
        rng = self.rng
        return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 7))).capitalize()

    def make(self, account_id: UUID, to: str, when: datetime, *, sender: str | None = None,
             reply_to: tuple[str, list[str]] | None = None, subject: str | None = None,
             attachment: bool = False) -> Mail:
        rng = self.rng
        self.seq += 1
        mid = f"<{self.seq}.{rng.getrandbits(40):010x}@{DOMAIN}>"
        sender = sender or rng.choice(self.people)
        cc = [p.split("<")[1].rstrip(">")
              for p in rng.sample(self.people, rng.choice((0, 0, 0, 1, 2)))]
        subject = subject or self.subject()
        sent_at = (when - timedelta(seconds=rng.randint(1, 600))).replace(microsecond=0)
        date = format_datetime(sent_at)
        references: list[str] = []
        in_reply_to = None
        if reply_to is not None:
            subject = "Re: " + reply_to[0]
            references = reply_to[1][-10:]
            in_reply_to = references[-1]
        head = [f"From: {sender}", f"To: {to}"]
        if cc:
            head.append(f"Cc: {', '.join(cc)}")
        head += [f"Subject: {subject}", f"Date: {date}", f"Message-ID: {mid}"]
        if in_reply_to:
            head += [f"In-Reply-To: {in_reply_to}", f"References: {' '.join(references)}"]
        head += ["MIME-Version: 1.0", "Content-Type: text/plain; charset=utf-8",
                 "Content-Transfer-Encoding: 7bit"]
        header = ("\r\n".join(head) + "\r\n\r\n").encode()
        body = ("\r\n\r\n".join(rng.sample(self.paragraphs, rng.randint(1, 4))) + "\r\n").encode()
        envelope = {
            "subject": subject, "from": sender, "to": [to], "cc": cc, "date": date,
            "sent_at": sent_at,
            "message_id": mid, "in_reply_to": in_reply_to, "references": references,
        }
        facts_env = SimpleNamespace(references=references, in_reply_to=in_reply_to,
                                    message_id=mid)
        message_id_for_thread = UUID(int=self.seq)  # only used when there is no Message-ID
        thread_id = thread_id_for(account_id, SimpleNamespace(envelope=facts_env),  # type: ignore[arg-type]
                                  message_id_for_thread)
        if attachment:
            size = rng.randint(40_000, 2_000_000)
            sha = (self.shared_payload if rng.random() < 1 / 3
                   else hashlib.sha256(mid.encode()).hexdigest())
            facts = {"content_type": "multipart/mixed", "part_count": 3, "depth": 1,
                     "has_attachments": True, "defects": [], "line_ending": "CRLF",
                     "header_bytes": len(header)}
            name = rng.choice(("report.pdf", "slides.pptx", "photo.jpg", "invoice.pdf"))
            personal: dict[str, Any] = {"envelope": envelope, "attachment_names": [name],
                                        "body": None}
            return Mail(size, sha, False, thread_id, facts, personal, None)
        raw = header + body
        facts = dict(_PLAIN_FACTS, defects=[], header_bytes=len(header))
        personal = {"envelope": envelope, "attachment_names": [], "body": raw}
        return Mail(len(raw), hashlib.sha256(raw).hexdigest(), True, thread_id, facts,
                    personal, raw)


def deliver(mailbox: Any, mails: list[tuple[Mail, UUID, list[str], list[str]]],
            when: datetime) -> list[Any]:
    """Allocates UIDs in ``mailbox`` and delivers ``(mail, message id, flags, labels)``."""
    first = mailbox.allocate_uids([mid for _, mid, _, _ in mails])
    out = []
    for n, (mail, message_id, flags, labels) in enumerate(mails):
        out.append(Message.deliver(message_id, Arrival(
            account_id=mailbox.account_id, mailbox_id=mailbox.id, uid=first + n,
            uidvalidity=mailbox.uidvalidity, size=mail.size, sha256=mail.sha256,
            inline=mail.inline, internal_date=when, flags=sorted(flags), labels=sorted(labels),
            policy=dict(_POLICY), thread_id=mail.thread_id, facts=mail.facts,
            personal=mail.personal,
        )))
    return out


FOLDERS = (("INBOX", "inbox"), ("Sent", "sent"), ("Drafts", "drafts"), ("Trash", "trash"),
            ("Archive", "archive"), ("Lists", ""), ("Receipts", ""))


@dataclass
class _Account:
    agg: Any
    address: str
    boxes: dict[str, Any]
    threads: deque[tuple[str, list[str]]] = field(default_factory=lambda: deque(maxlen=64))


@dataclass
class _Live:
    msg: Any
    account: _Account
    actions: list[tuple[str, str | None, int]]
    next: int = 0


class LogSimulator:
    """Produces a realistic event history, in the order it happened (see the module doc)."""

    def __init__(self, accounts: int, seed: int = 1,
                 start: datetime = datetime(2024, 1, 8, 7, 0, tzinfo=UTC)) -> None:
        self.rng = random.Random(seed)
        self.mail = MailFactory(self.rng)
        self.now = start
        self.tick = 0
        self.out: list[Any] = []
        self.due: dict[int, list[_Live]] = {}
        self.accounts = [self._open(i) for i in range(accounts)]
        # a few busy accounts, a long tail of quiet ones
        self.weights = [1.0 / (1 + i) ** 0.8 for i in range(accounts)]
        self.delivered = 0

    def _open(self, i: int) -> _Account:
        f, s = _FIRST[i % len(_FIRST)], _LAST[(i // len(_FIRST)) % len(_LAST)]
        address = f"{f.lower()}.{s.lower()}{i}@{DOMAIN}"
        agg = Account.open(address)
        boxes = {}
        for name, role in FOLDERS:
            mailbox_id, uidvalidity = agg.register_mailbox(name, Role(role))
            boxes[name] = Mailbox.create(mailbox_id, agg.id, name, role, uidvalidity)
            agg.subscribe(name)
        self.out.extend(agg.collect_events())
        for box in boxes.values():
            self.out.extend(box.collect_events())
        return _Account(agg, address, boxes)

    def _emit(self, *aggregates: Any) -> None:
        for agg in aggregates:
            self.out.extend(agg.collect_events())

    def step(self) -> None:
        """One tick: a delivery group, then the actions due now."""
        rng = self.rng
        self.tick += 1
        self.now += timedelta(seconds=rng.randint(20, 160))
        acct = rng.choices(self.accounts, self.weights)[0]
        r = rng.random()
        folder = "INBOX" if r < 0.85 else "Sent" if r < 0.95 else rng.choice(("Lists", "Receipts"))
        group = []
        count = rng.choice((1, 1, 1, 1, 2, 2, 3))
        for _ in range(count):
            reply = rng.choice(acct.threads) if acct.threads and rng.random() < 0.35 else None
            if folder == "Sent":
                mail = self.mail.make(acct.agg.id, rng.choice(self.mail.people), self.now,
                                      sender=acct.address, reply_to=reply)
            else:
                mail = self.mail.make(acct.agg.id, acct.address, self.now, reply_to=reply,
                                      attachment=rng.random() < 0.08)
            env = mail.personal["envelope"]
            if reply is not None:
                reply[1].append(env["message_id"])
            else:
                acct.threads.append((env["subject"], [env["message_id"]]))
            flags = ["\\Seen"] if folder == "Sent" else []
            labels = ["receipts"] if folder == "Receipts" else []
            if labels:
                acct.agg.define_labels(frozenset(labels))
            group.append((mail, new_message_id(), flags, labels))
        msgs = deliver(acct.boxes[folder], group, self.now)
        self._emit(acct.agg, acct.boxes[folder], *msgs)
        self.delivered += len(msgs)
        for msg in msgs:
            actions = self._fate(folder)
            if actions:
                self._schedule(_Live(msg, acct, actions))
        for live in self.due.pop(self.tick, ()):
            self._act(live)
            live.next += 1
            if live.next < len(live.actions):
                self._schedule(live)

    def _schedule(self, live: _Live) -> None:
        at = self.tick + live.actions[live.next][2]
        self.due.setdefault(at, []).append(live)

    def _fate(self, folder: str) -> list[tuple[str, str | None, int]]:
        rng = self.rng
        r = rng.random
        acts: list[tuple[str, str | None, int]] = []

        def later(lo: int, hi: int) -> int:
            return rng.randint(lo, hi)

        if folder == "Sent":
            if r() < 0.02:
                acts.append(("delete", None, later(50, 3000)))
            return acts
        filed = folder != "INBOX"
        if r() < (0.40 if filed else 0.80):
            acts.append(("flag", "\\Seen", later(1, 400)))
            if r() < 0.10:
                acts.append(("flag", "\\Answered", later(1, 200)))
            if r() < 0.02:
                acts.append(("extract", None, later(1, 200)))
        if r() < 0.05:
            acts.append(("flag", "\\Flagged", later(1, 300)))
            if r() < 0.5:
                acts.append(("unflag", "\\Flagged", later(100, 3000)))
        if r() < 0.15:
            acts.append(("label", rng.choice(LABELS), later(1, 500)))
            if r() < 0.2:
                acts.append(("label", rng.choice(LABELS), later(1, 800)))
            if r() < 0.1:
                acts.append(("unlabel", None, later(100, 2000)))
        if r() < 0.12 and not filed:
            acts.append(("move", rng.choice(("Archive", "Archive", "Archive", "Lists")),
                         later(50, 2000)))
        if r() < (0.30 if filed else 0.15):
            acts.append(("delete", None, later(20, 3000)))
            x = r()
            if x < 0.03:
                acts.append(("restore", None, later(10, 500)))
            elif x < 0.63:
                acts.append(("expunge", None, later(10, 4000)))
        return acts

    def _act(self, live: _Live) -> None:
        kind, arg, _ = live.actions[live.next]
        msg, acct = live.msg, live.account
        listed = msg.is_listed
        if kind == "flag" and listed:
            msg.change_flags(msg.flags | {arg})
        elif kind == "unflag" and listed:
            msg.change_flags(msg.flags - {arg})
        elif kind == "label" and listed:
            new = msg.labels | {arg}
            acct.agg.define_labels(new)
            msg.change_labels(new)
            self._emit(acct.agg)
        elif kind == "unlabel" and listed and msg.labels:
            msg.change_labels(msg.labels - {sorted(msg.labels)[0]})
        elif kind == "move" and listed and arg is not None:
            target = acct.boxes[arg]
            if target.id != msg.mailbox_id:
                uid = target.allocate_uids([msg.id])
                msg.move(target.id, uid, target.uidvalidity)
                self._emit(target)
        elif kind == "extract" and msg.state == "active":
            msg.extract(self.now)
        elif kind == "delete" and listed:
            msg.soft_delete(self.now + timedelta(days=30))
        elif kind == "restore" and msg.state == "deleted":
            msg.restore(self.now)
        elif kind == "expunge" and msg.state != "expunged":
            msg.expunge(self.now)
        self._emit(msg)

    def take(self) -> list[Any]:
        out, self.out = self.out, []
        return out
