"""The typer patch, pinned: plain parameters are converted without pydantic
(``adapters.startup.typer_plain``) only on the typer release the patch was checked against.

The patch replaces ``typer.core.build_runtime_param`` and subclasses typer's private
``RuntimeParam``: names a typer release may change without notice. On any other release
``install`` does nothing and typer coerces every parameter itself (correct, ~100–150 ms
slower a command: adapters/startup/README.md), and ``tests/unit/test_cli_coercion.py``
fails naming the release, so that an upgrade is checked, not trusted.
"""

from __future__ import annotations

import typer
import typer.core

TESTED = ("0", "29")
"""typer's major and minor release whose private coercion API the patch was checked against
(``tests/unit/test_cli_coercion.py`` compares both coercions on every parameter)."""


def supported(version: str) -> bool:
    """Whether the patch applies to typer ``version``."""
    return tuple(version.split(".")[:2]) == TESTED


def install(version: str | None = None) -> bool:
    """Every typer parameter created from now on coerces through the plain conversion, if
    the installed typer (or ``version``) is the one it was checked against; whether it
    did."""
    if not supported(version or typer.__version__):
        return False
    from adapters.startup.typer_plain import runtime_param  # local: a checked typer alone

    typer.core.build_runtime_param = runtime_param  # type: ignore[attr-defined]
    return True
