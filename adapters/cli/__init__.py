"""The letterlog command line (typer): one module per group of commands, the importer and
the demo."""

from adapters.cli.app import app, main

__all__ = ["app", "main"]
