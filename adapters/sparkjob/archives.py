"""letterlog packed for a Spark cluster's nodes: its own packages (pure Python) zipped for
``--py-files`` (``zip_packages``), and the distributions its executors need, as installed
here, C extensions included, in a ``tar.gz`` for ``--archives`` (``tar_distributions``),
less the files nothing on an executor loads (``UNUSED_FILES``)."""

from __future__ import annotations

import importlib.metadata as metadata
import re
import tarfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from adapters.sparkjob.distributions import normal_name

PACKAGES = ("domain", "projections", "adapters", "spark_replay")
UNUSED_FILES = {
    "zstandard": re.compile(r"zstandard/_cffi\."),
    "pyarrow": re.compile(r"pyarrow/(include/|tests/|src/|.*\.(pxd|pyx|pxi|h|hpp|cc)$"
                          r"|(lib)?_?arrow_flight|_flight|(lib)?arrow_python_flight"
                          r"|libarrow_s3|_s3fs|libgandiva|_gandiva)"),
}
"""Files of a shipped distribution nothing on an executor loads: zstandard's CFFI backend
(12 MB; it imports it only when its C backend is missing or told to); pyarrow's headers,
Cython sources and tests, and its Flight, S3 and Gandiva libraries (loaded only by
``pyarrow.flight``, ``pyarrow.fs``'s S3 and ``pyarrow.gandiva``; ``pyarrow.lib`` links
neither)."""
NOT_ZIPPED = ("adapters/cli/",)
"""letterlog's own modules the executors never import (the CLI; the dev tools are not in
``PACKAGES`` at all)."""


def zip_packages(path: Path) -> int:
    count = 0
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for package in PACKAGES:
            root = Path(__import__(package).__file__ or "").parent
            for file in sorted(root.rglob("*")):
                name = str(Path(package) / file.relative_to(root))
                if (file.is_file() and "__pycache__" not in file.parts
                        and file.suffix != ".pyc" and not name.startswith(NOT_ZIPPED)):
                    out.write(file, name)
                    count += 1
    return count


def tar_distributions(path: Path, dists: Sequence[metadata.Distribution]) -> int:
    count = 0
    with tarfile.open(path, "w:gz") as out:
        for dist in dists:
            unused = UNUSED_FILES.get(normal_name(dist.metadata["Name"]))
            for file in dist.files or []:
                parts = Path(str(file)).parts
                if parts[:1] == ("..",) or "__pycache__" in parts:
                    continue  # scripts outside site-packages, byte code
                if unused is not None and unused.match(str(file)):
                    continue
                source = Path(str(dist.locate_file(file)))
                if source.is_file():
                    out.add(source, arcname=str(file))
                    count += 1
    return count
