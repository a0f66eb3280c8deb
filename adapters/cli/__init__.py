"""The letterlog command line (typer): one module per group of commands, the importer and
the demo.

May import: ``adapters.embedded``, ``adapters.bootstrap``, ``settings`` and the other
sub-packages (``bench`` lazily, for ``letterlog bench``); never ``devservers``.
"""

from adapters.cli.app import app, main

__all__ = ["app", "main"]
