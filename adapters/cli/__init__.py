"""The letterlog command line (typer), the importer and the demo."""

from adapters.cli.app import app, main

__all__ = ["app", "main"]
