"""The ``bench`` group and what every benchmark takes: ``--plot FILE``, ``--json``, and its
one JSON object on standard output."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from adapters.cli.common import group, state

bench_app = group("Benchmarks (JSON, baseline in the same run).")

BenchJson = Annotated[bool, typer.Option("--json", help="one JSON line (always JSON)")]
PlotOption = Annotated[Path | None, typer.Option(metavar="FILE", help="write a PNG plot")]


def emit(result: dict[str, Any], as_json: bool = False) -> None:
    """The benchmark's result: indented for a person, one line with ``--json``."""
    compact = as_json or state.json
    sys.stdout.write(json.dumps(result, indent=None if compact else 2) + "\n")
