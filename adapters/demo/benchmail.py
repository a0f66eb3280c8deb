"""Benchmark mail (``bench_messages``): the same people and words as the demo's
(``mailgen``), ~4 KiB median, every 20th message with a 30–60 KiB attachment, no threads.
Same seed, same bytes."""

from __future__ import annotations

import random
from email.message import EmailMessage
from email.policy import SMTP

from adapters.demo.mailgen import DOMAIN, PEOPLE, body, sentence


def bench_messages(count: int, seed: int = 1) -> list[bytes]:
    """Benchmark mail: ~4 KiB median, every 20th with a 30–60 KiB attachment."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        msg = EmailMessage(policy=SMTP)
        msg["From"] = f"{rng.choice(PEOPLE)}@{DOMAIN}"
        msg["To"] = f"{rng.choice(PEOPLE)}@{DOMAIN}"
        msg["Subject"] = sentence(rng, 6)
        msg["Message-ID"] = f"<bench.{i}.{seed}@{DOMAIN}>"
        msg["Date"] = "Mon, 05 Jan 2026 08:00:00 +0000"
        msg.set_content(body(rng, 8))
        if i % 20 == 0:
            blob = bytes(rng.getrandbits(8) for _ in range(rng.randint(30_000, 60_000)))
            msg.add_attachment(blob, maintype="application", subtype="octet-stream",
                               filename="data.bin")
        out.append(msg.as_bytes())
    return out
