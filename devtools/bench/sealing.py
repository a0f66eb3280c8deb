"""What sealing a delivery's personal data costs, beside the delivery itself (``bench ingest``).

The personal part of each benchmark message is built as a delivery builds it, then sealed
(``seal_personal``: a data key from the pool of a real ``keys.sqlite``, AES-256-GCM over the
msgpack) and opened again (a key lookup and the decryption, as every reader does).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def seal_cost(blobs: Sequence[bytes], directory: Path, inline_limit: int = 10 * 1024,
              durability: str = "full") -> dict[str, float]:
    from adapters.eventlog.keysqlite import SqliteKeyStore
    from adapters.eventlog.transcoder import open_personal, seal_personal
    from domain.delivery import envelope_for_event
    from domain.personal import Personal
    from domain.rfc5322 import MessageLimits, inspect_message

    limits = MessageLimits()
    personal = []
    for blob in blobs:
        facts = inspect_message(blob, limits)
        personal.append(Personal({"envelope": envelope_for_event(facts),
                                  "attachment_names": list(facts.attachment_names),
                                  "body": blob if len(blob) <= inline_limit else None}))
    keys = SqliteKeyStore(directory / "seal-keys.sqlite",
                          synchronous={"full": "FULL", "normal": "NORMAL"}[durability])
    try:
        t0 = time.perf_counter()
        sealed = [seal_personal(p, keys) for p in personal]
        seal_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for ext in sealed:
            open_personal(ext.data)
        open_s = time.perf_counter() - t0
    finally:
        keys.close()
    n = len(blobs)
    return {"seal_us_per_delivery": round(seal_s / n * 1e6, 1),
            "open_us_per_event": round(open_s / n * 1e6, 1)}


def with_share(cost: dict[str, float], single_msgs_per_s: float) -> dict[str, Any]:
    delivery_us = 1e6 / single_msgs_per_s if single_msgs_per_s else float("inf")
    share = cost["seal_us_per_delivery"] / delivery_us
    return {**cost, "single_delivery_us": round(delivery_us, 1),
            "seal_share_of_single_delivery": round(share, 4), "target_share": 0.10,
            "meets_target": share <= 0.10}
