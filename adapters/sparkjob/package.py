"""``letterlog spark package DIR``: what a Spark cluster's nodes need to run letterlog's job.

Three files, built from this environment (nothing is downloaded):

* ``letterlog.zip``: letterlog's own packages (pure Python) for ``--py-files``;
* ``letterlog-deps.tar.gz``: every distribution letterlog's executors need (and those of
  the ``extras`` asked for: ``postgres``, ``hbase``; ``include`` adds others, e.g.
  ``pyarrow`` for the export's Arrow tasks), as installed here, C extensions included, for
  ``--archives letterlog-deps.tar.gz#letterlog-deps`` with
  ``spark.executorEnv.PYTHONPATH=letterlog-deps``. Built for this Python (``python``:
  e.g. ``cp311``) and platform; the nodes' Python must be the same minor version. Spark's
  own packages (pyspark, py4j) are left out: the nodes' Spark provides them; so are the
  requirements executors never import (``distributions``) and the files nothing there loads
  (``archives``);
* ``letterlog_spark.py``: the driver program for ``spark-submit`` (it runs
  ``spark_replay.submit.main``, as the ``letterlog-spark`` console script and
  ``python -m spark_replay`` do).
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adapters.sparkjob.archives import tar_distributions, zip_packages
from adapters.sparkjob.distributions import closure, normal_name, source_requirements
from domain.errors import SettingsError

ZIP_NAME = "letterlog.zip"
ARCHIVE_NAME = "letterlog-deps.tar.gz"
ARCHIVE_ALIAS = "letterlog-deps"
DRIVER_NAME = "letterlog_spark.py"
DRIVER = '''"""letterlog's Spark driver: spark-submit [options] letterlog_spark.py COMMAND ..."""

import sys

from spark_replay.submit import main

sys.exit(main())
'''
def package(directory: Path, extras: Sequence[str] = (),
            include: Sequence[str] = ()) -> dict[str, Any]:
    """Writes the three files into ``directory``; what they are and how to submit them."""
    known = {normal_name(e.split(";")[1].split('"')[1]) for e in (source_requirements() or [])
             if ";" in e} or {normal_name(e) for e in (
                 metadata.metadata("letterlog").get_all("Provides-Extra") or [])}
    for extra in extras:
        if normal_name(extra) not in known:
            raise SettingsError(f"--extra: {extra!r} is not one of letterlog's extras "
                                f"({', '.join(sorted(known))})")
    directory.mkdir(parents=True, exist_ok=True)
    dists = closure(extras, include)
    files = zip_packages(directory / ZIP_NAME)
    archived = tar_distributions(directory / ARCHIVE_NAME, dists)
    (directory / DRIVER_NAME).write_text(DRIVER)
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    submit = (f"spark-submit --py-files {directory / ZIP_NAME} "
              f"--archives {directory / ARCHIVE_NAME}#{ARCHIVE_ALIAS} "
              f"--conf spark.executorEnv.PYTHONPATH={ARCHIVE_ALIAS} "
              f"{directory / DRIVER_NAME} rebuild --all")
    return {"py_files": str(directory / ZIP_NAME), "archive": str(directory / ARCHIVE_NAME),
            "driver": str(directory / DRIVER_NAME), "python": python,
            "distributions": [f"{d.metadata['Name']}=={d.version}" for d in dists],
            "files": {"py_files": files, "archive": archived}, "submit": submit}
