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
  requirements executors never import (``NOT_ON_EXECUTORS``, ``UNUSED_FILES``);
* ``letterlog_spark.py``: the driver program for ``spark-submit`` (it runs
  ``spark_replay.submit.main``, as the ``letterlog-spark`` console script and
  ``python -m spark_replay`` do).
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from domain.errors import SettingsError

PACKAGES = ("domain", "projections", "adapters", "spark_replay")
ZIP_NAME = "letterlog.zip"
ARCHIVE_NAME = "letterlog-deps.tar.gz"
ARCHIVE_ALIAS = "letterlog-deps"
DRIVER_NAME = "letterlog_spark.py"
SPARK_OWN = frozenset({"pyspark", "py4j", "letterlog"})
NOT_ON_EXECUTORS = frozenset({"typer", "rich", "aiosmtpd", "python-daemon", "httpx", "regex"})
"""letterlog's requirements its executors never import (measured: the modules a range
task, a counters merge, the by-account fold and the export's decoding load): the CLI's
(typer, rich), the MTA's (aiosmtpd), the command server's (python-daemon), the event
rules' (httpx, regex). Their own requirements go too unless something shipped needs them."""
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
DRIVER = '''"""letterlog's Spark driver: spark-submit [options] letterlog_spark.py COMMAND ..."""

import sys

from spark_replay.submit import main

sys.exit(main())
'''
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?([^;]*)(?:;(.*))?")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _source_requirements() -> list[str] | None:
    """letterlog's requirements from the ``pyproject.toml`` beside its packages (a checkout
    installed in editable mode: its installed metadata is as old as the last install), in
    the metadata's form (``name; extra == "x"``); ``None`` for an installed wheel."""
    path = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if not path.is_file():
        return None
    project = tomllib.loads(path.read_text()).get("project", {})
    if project.get("name") != "letterlog":
        return None
    found = [text.split("#")[0].strip() for text in project.get("dependencies", [])]
    for extra, texts in project.get("optional-dependencies", {}).items():
        found += [f'{text.split("#")[0].strip()}; extra == "{extra}"' for text in texts]
    return found


def requirements(dist: str, extras: Iterable[str] = ()) -> list[tuple[str, list[str]]]:
    """``dist``'s run-time requirements (with ``extras``) as (name, their extras)."""
    wanted = {_normal(e) for e in extras}
    found = []
    texts = (_source_requirements() if dist == "letterlog" else None) or metadata.requires(dist)
    for text in texts or []:
        match = _REQUIREMENT.match(text)
        if match is None:
            continue
        name, inner, _, marker = match.groups()
        extra = _EXTRA.search(marker or "")
        if extra is not None and _normal(extra.group(1)) not in wanted:
            continue
        found.append((name, [e.strip() for e in (inner or "").split(",") if e.strip()]))
    return found


def closure(extras: Sequence[str], include: Sequence[str] = ()) -> list[metadata.Distribution]:
    """The installed distributions letterlog (with ``extras``) needs, and ``include``'s."""
    todo: list[tuple[str, list[str]]] = [
        *((name, inner) for name, inner in requirements("letterlog", extras)
          if _normal(name) not in NOT_ON_EXECUTORS),
        *((name, []) for name in include)]
    seen: dict[str, metadata.Distribution] = {}
    while todo:
        name, inner = todo.pop()
        key = _normal(name)
        if key in SPARK_OWN or key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if name in include:
                raise SettingsError(f"--include: {name!r} is not installed here") from None
            continue  # a requirement of a platform or Python this one is not
        seen[key] = dist
        todo.extend(requirements(name, inner))
    return sorted(seen.values(), key=lambda d: _normal(d.metadata["Name"]))


def _zip_packages(path: Path) -> int:
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


def _tar_distributions(path: Path, dists: Sequence[metadata.Distribution]) -> int:
    count = 0
    with tarfile.open(path, "w:gz") as out:
        for dist in dists:
            unused = UNUSED_FILES.get(_normal(dist.metadata["Name"]))
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


def package(directory: Path, extras: Sequence[str] = (),
            include: Sequence[str] = ()) -> dict[str, Any]:
    """Writes the three files into ``directory``; what they are and how to submit them."""
    known = {_normal(e.split(";")[1].split('"')[1]) for e in (_source_requirements() or [])
             if ";" in e} or {_normal(e) for e in (
                 metadata.metadata("letterlog").get_all("Provides-Extra") or [])}
    for extra in extras:
        if _normal(extra) not in known:
            raise SettingsError(f"--extra: {extra!r} is not one of letterlog's extras "
                                f"({', '.join(sorted(known))})")
    directory.mkdir(parents=True, exist_ok=True)
    dists = closure(extras, include)
    files = _zip_packages(directory / ZIP_NAME)
    archived = _tar_distributions(directory / ARCHIVE_NAME, dists)
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
