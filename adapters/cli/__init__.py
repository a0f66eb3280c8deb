"""The letterlog command line (typer): one module per group of commands, the importer and
the demo."""

from adapters.cli import lifecycle as _lifecycle  # noqa: F401  (registers its commands)
from adapters.cli.app import app, main

__all__ = ["app", "main"]
