"""``letterlog dispatcher [--once]``: hands the events that event rules raise to their
applications (webhook, Kafka); the rules are ``rulebook``'s, their events ``ruleevents``'
(docs/event-rules.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from adapters.cli.common import group, out, state, stop_on_signals
from adapters.embedded import Letterlog
from adapters.rules.dispatcher import Dispatcher, run_dispatcher

if TYPE_CHECKING:
    from adapters.face import Store

app = group("Event rules, the events they raise, and the dispatcher.")
SECTION = (150, 'Event rules')  # the root help's section (adapters.cli.table)


@app.command()
def dispatcher(once: Annotated[bool, typer.Option(
        help="hand over what is pending, then exit")] = False) -> None:
    """Hand pending rule events to their applications (webhook, Kafka), recording each
    outcome in the log; one dispatcher per store."""
    if once:
        d = Dispatcher(state.admin_reader())
        try:
            counts = d.run_once()
        finally:
            d.close()
        out(counts, f"{counts['dispatched']} events handed over: {counts['complete']} "
                    f"complete, {counts['failed']} failed")
        return

    def metrics(store: Store) -> Any:
        try:  # the metrics are the kafka extra's (structlog, prometheus-client)
            from adapters.streaming import telemetry  # local: the kafka extra's, this command's
        except ImportError:
            return None
        port = telemetry.serve_metrics("dispatcher", store.settings.data,
                                       store.settings.metrics_port)
        return telemetry.RuleEventMetrics() if port is not None else None

    # waits out an outage of HBase or PostgreSQL, on a store opened afresh (ADR 0070)
    run_dispatcher(lambda: Letterlog.open(state.data, create=False),
                   stop_on_signals(), opened=metrics)
