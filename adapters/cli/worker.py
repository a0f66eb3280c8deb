"""A stream worker's entry point: ``letterlog worker``, ``python -m adapters.cli.worker`` and
``faust -A adapters.cli.worker worker -l info`` (faust's own command line) all run the faust app
of ``adapters.streaming.worker``, built here from ``LETTERLOG_*`` settings with the parts the
composition root builds (``adapters.bootstrap``: key store, log, table store).

Nothing connects or reads settings at import time: ``faust -A`` gets ``app`` through the module
``__getattr__``, which builds it from ``load_settings()`` then.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters import bootstrap
from adapters.settings import Settings, StreamOptions, load_settings
from adapters.streaming.worker import create_app
from domain.errors import SettingsError

__all__ = ["main"]


def main(settings: Settings | None = None, options: StreamOptions | None = None,
         loglevel: str = "info") -> int:
    """Runs one worker until SIGINT/SIGTERM (the ``letterlog worker`` entry point)."""
    settings = settings or load_settings()
    if not settings.kafka_bootstrap:
        raise SettingsError("LETTERLOG_KAFKA_BOOTSTRAP: the stream worker needs Kafka (host:port)")
    options = options or settings.stream
    from adapters.streaming.telemetry import configure_logging, logger, serve_metrics

    app = create_app(settings, options, parts=bootstrap)
    import faust

    worker = faust.Worker(app, loglevel=loglevel)
    configure_logging()
    port = serve_metrics("worker", Path(settings.data), settings.metrics_port, options.instance)
    logger("letterlog.stream").info("worker starting", group=options.group,
                                    instance=options.instance or None, metrics_port=port)
    try:
        worker.execute_from_commandline()
    except SystemExit as done:
        return int(done.code or 0)
    return 0


def __getattr__(name: str) -> Any:
    """``faust -A adapters.cli.worker``: the app, built on first access."""
    if name == "app":
        app = create_app(load_settings(), parts=bootstrap)
        globals()["app"] = app
        return app
    raise AttributeError(name)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

