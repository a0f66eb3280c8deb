"""Deterministic, realistic mail for the demo (the benchmarks': ``benchmail``).

Plain text, multipart/alternative, attachments (one large report sent to many people, so
payload dedup shows), and replies that form threads. Same seed, same bytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime

PEOPLE = ["ada", "grace", "alan", "edsger", "barbara", "donald", "margaret", "ken"]
DOMAIN = "example.org"
WORDS = [
    "mailbox", "quarterly", "report", "review", "merge", "release", "schedule", "budget",
    "design", "meeting", "draft", "storage", "event", "replay", "projection", "cluster",
    "region", "shard", "purge", "invoice", "contract", "lunch", "friday", "deadline",
    "proposal", "customer", "feedback", "roadmap", "hiring", "offsite", "travel", "expense",
    "benchmark", "latency", "throughput", "index", "label", "thread", "archive", "backup",
    "restore",
]


@dataclass(frozen=True)
class Generated:
    sender: str
    recipients: tuple[str, ...]
    raw: bytes
    labels: tuple[str, ...]
    message_id: str


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def body(rng: random.Random, paragraphs: int) -> str:
    return "\n\n".join(
        " ".join(sentence(rng, rng.randint(6, 16)) for _ in range(rng.randint(3, 7)))
        for _ in range(paragraphs)
    ) + "\n"


def shared_attachment(seed: int = 7, size: int = 200_000) -> bytes:
    rng = random.Random(seed)
    return bytes(rng.getrandbits(8) for _ in range(size))


def generate(count: int, seed: int = 42, *, accounts: int = 5,
             attachment_every: int = 12) -> Iterator[Generated]:
    """Yields ``count`` messages; about a third are replies in existing threads."""
    rng = random.Random(seed)
    people = [f"{p}@{DOMAIN}" for p in PEOPLE[: max(2, accounts)]]
    report = shared_attachment()
    start = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
    threads: list[tuple[str, str, list[str]]] = []  # subject, root id, references
    for i in range(count):
        sender = rng.choice(people)
        recipients = tuple(sorted(rng.sample([p for p in people if p != sender],
                                             k=rng.choice((1, 1, 1, 2, 3)))))
        msg = EmailMessage(policy=SMTP)
        msg["From"] = sender
        msg["To"] = ", ".join(recipients)
        msg["Date"] = format_datetime(start + timedelta(minutes=17 * i))
        mid = f"<{i:06d}.{seed}@{DOMAIN}>"
        msg["Message-ID"] = mid
        if threads and rng.random() < 0.35:
            subject, _root, refs = rng.choice(threads)
            msg["Subject"] = "Re: " + subject
            msg["In-Reply-To"] = refs[-1]
            msg["References"] = " ".join(refs[-10:])
            refs.append(mid)
        else:
            subject = sentence(rng, rng.randint(3, 7)).rstrip(".")
            msg["Subject"] = subject
            threads.append((subject, mid, [mid]))
        text = body(rng, rng.randint(1, 4))
        msg.set_content(text)
        if rng.random() < 0.4:
            msg.add_alternative(f"<html><body><p>{text.replace(chr(10), '<br>')}</p></body></html>",
                                subtype="html")
        labels: tuple[str, ...] = ()
        if i % attachment_every == 0:
            msg.add_attachment(report, maintype="application", subtype="pdf",
                               filename="q3-report.pdf")
            labels = ("reports",)
        elif rng.random() < 0.2:
            small = bytes(rng.getrandbits(8) for _ in range(rng.randint(2_000, 30_000)))
            msg.add_attachment(small, maintype="image", subtype="png", filename=f"img{i}.png")
        if rng.random() < 0.3:
            labels += (rng.choice(("work", "travel", "finance", "family")),)
        yield Generated(sender, recipients, msg.as_bytes(), labels, mid)
