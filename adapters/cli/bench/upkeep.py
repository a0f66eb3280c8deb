"""``letterlog bench purge``, the store's upkeep: due messages purged per second, against
the rate they arrive (single-command deliveries) and raw SQLite deletes."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters.cli.bench.options import BenchJson, PlotOption, bench_app, emit
from devtools.bench.purge import bench_purge as run


@bench_app.command("purge")
def bench_purge(messages: Annotated[int, typer.Option(
                    metavar="N", help="due messages to purge")] = 50_000,
                single: Annotated[int, typer.Option(
                    metavar="N", help="single-command deliveries timed for the intake rate")
                ] = 2000,
                plot: PlotOption = None, as_json: BenchJson = False) -> None:
    """Due messages purged/s vs single-command deliveries/s and raw SQLite deletes."""
    emit(run(messages=messages, single=single, plot=plot), as_json)
