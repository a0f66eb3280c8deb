"""What the end-to-end tests share: a mail file on disk, as a user would pass it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.mta_support import Syslog, environment, letterlog
from tests.factories import make_mail


@pytest.fixture
def mail_file(tmp_path: Path) -> Path:
    path = tmp_path / "m.eml"
    path.write_bytes(make_mail("CLI test"))
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment without the caller's settings and command server."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    return environment(runtime)


@pytest.fixture
def data(tmp_path: Path, env: dict[str, str]) -> Path:
    """A store made by ``letterlog init`` (lda and lmtp never make one)."""
    path = tmp_path / "data"
    assert letterlog(env, path, "init").returncode == 0
    return path


@pytest.fixture
def syslog(tmp_path: Path) -> Iterator[Syslog]:
    """lda's local log; pass ``{"LETTERLOG_SYSLOG_SOCKET": str(syslog.path)}`` to lda."""
    log = Syslog(tmp_path / "log.sock")
    yield log
    log.close()
