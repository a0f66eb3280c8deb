"""A stream worker's entry point: ``letterlog worker`` and ``python -m
adapters.cli.worker`` run the worker of ``adapters.streaming.worker`` (an aiokafka consumer
group member, ADR 0059), built here from ``LETTERLOG_*`` settings with the parts the
composition root builds (``adapters.bootstrap``: key store, log, table store), until SIGINT or
SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

from adapters.bootstrap import scaleout as bootstrap
from adapters.config.settings import Settings, StreamOptions, load_settings
from adapters.streaming.telemetry import configure_logging, logger, serve_metrics
from adapters.streaming.worker import create_worker
from domain.errors import SettingsError

__all__ = ["main"]


def main(settings: Settings | None = None, options: StreamOptions | None = None,
         loglevel: str = "info") -> int:
    """Runs one worker until SIGINT/SIGTERM (the ``letterlog worker`` entry point):
    the batch being written is finished and committed, then the worker leaves the group."""
    settings = settings or load_settings()
    if not settings.kafka_bootstrap:
        raise SettingsError("LETTERLOG_KAFKA_BOOTSTRAP: the stream worker needs Kafka (host:port)")
    options = options or settings.stream

    level = logging.getLevelName(loglevel.upper())
    configure_logging(level if isinstance(level, int) else logging.INFO)
    port = serve_metrics("worker", Path(settings.data), settings.metrics_port, options.instance)
    logger("letterlog.stream").info("worker starting", group=options.group,
                                    instance=options.instance or None, metrics_port=port)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        worker = create_worker(settings, options, parts=bootstrap)
        await worker.run(stop)

    asyncio.run(run())
    logger("letterlog.stream").info("worker stopped", group=options.group)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
