"""``letterlog spark package DIR``: letterlog packed for a Spark cluster's nodes
(``adapters/sparkjob/package.py``; docs/spark.md, "Shipping letterlog to a cluster")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from adapters.cli.common import fail, group, out
from adapters.sparkjob.package import package as build
from domain.errors import SettingsError

app = group("Spark.")
SECTION = (70, 'Spark')  # the root help's section (adapters.cli.table)
spark_app = group("Spark: package letterlog for a cluster.")
app.add_typer(spark_app, name="spark")


@spark_app.command("package")
def package(directory: Annotated[Path, typer.Argument(
                metavar="DIR", help="where the files go (made if missing)")],
            extra: Annotated[list[str] | None, typer.Option(
                "--extra", metavar="EXTRA",
                help="also the dependencies of letterlog's extra (postgres, hbase); "
                     "repeatable")] = None,
            include: Annotated[list[str] | None, typer.Option(
                "--include", metavar="DIST",
                help="also an installed distribution and its dependencies (e.g. pyarrow "
                     "for export); repeatable")] = None) -> None:
    """Write letterlog.zip (--py-files), letterlog-deps.tar.gz (--archives, C extensions
    included, for this Python) and letterlog_spark.py (the driver) into DIR."""
    try:
        result = build(directory.resolve(), extra or [], include or [])
    except SettingsError as e:
        fail(str(e))
    out(result, f"{result['py_files']}\n{result['archive']} ({len(result['distributions'])} "
                f"distributions, {result['python']})\n{result['driver']}\n"
                f"submit with: {result['submit']}")
