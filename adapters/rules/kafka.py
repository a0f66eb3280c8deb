"""The Kafka processing application (the scale-out path): the rule event's JSON document
published to the rule's topic, keyed by the event id (a repeat lands in the same partition
with the same key), with the HMAC signature and the idempotency key as record headers;
acknowledged by every in-sync replica (``acks=all``) before the event is recorded complete.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson

from adapters.rules.webhook import Outcome, signature


class KafkaTopic:
    def __init__(self, settings: Any) -> None:
        if not settings.kafka_bootstrap:
            raise ValueError("a Kafka rule needs LETTERLOG_KAFKA_BOOTSTRAP")
        self.bootstrap = settings.kafka_bootstrap
        self.timeout = settings.dispatch_timeout_seconds
        self.loop = asyncio.new_event_loop()
        self.producer: Any = None

    async def _producer(self) -> Any:
        from aiokafka import AIOKafkaProducer  # local: Kafka's client: Kafka applications only

        if self.producer is None:
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all",
                                        request_timeout_ms=int(self.timeout * 1000))
            await asyncio.wait_for(producer.start(), self.timeout)
            self.producer = producer
        return self.producer

    async def _send(self, topic: str, key: bytes, body: bytes,
                    headers: list[tuple[str, bytes]]) -> None:
        producer = await self._producer()
        await asyncio.wait_for(producer.send_and_wait(topic, body, key=key, headers=headers),
                               self.timeout)

    def deliver(self, application: dict[str, Any], document: dict[str, Any],
                secret: str) -> Outcome:
        body = orjson.dumps(document)
        key = str(document["id"]).encode()
        headers = [("Idempotency-Key", key),
                   ("X-Letterlog-Signature", signature(secret, body).encode())]
        try:
            self.loop.run_until_complete(self._send(str(application["topic"]), key, body,
                                                    headers))
        except Exception as e:
            return Outcome(False, 1, f"kafka {application['topic']}: {type(e).__name__}: {e}")
        return Outcome(True, 1)

    def close(self) -> None:
        if self.producer is not None:
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(self.producer.stop())
        self.loop.close()
