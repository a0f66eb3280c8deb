"""What the end-to-end tests share: a mail file on disk, as a user would pass it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import make_mail


@pytest.fixture
def mail_file(tmp_path: Path) -> Path:
    path = tmp_path / "m.eml"
    path.write_bytes(make_mail("CLI test"))
    return path
