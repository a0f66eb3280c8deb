"""The relay of an SQLite log runs where the postgres extra is not installed: its positions
module tries psycopg once, at its top, and waits out no PostgreSQL error then."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import sys
sys.modules["psycopg"] = None  # as if not installed: importing it raises ImportError
sys.modules["psycopg_pool"] = None
from adapters.streaming.positions import POSTGRES_TRANSIENT, FilePosition
import adapters.streaming.relay
print(len(POSTGRES_TRANSIENT), FilePosition.__name__)
"""


@pytest.mark.slow  # a second process: a fresh interpreter, without psycopg
def test_positions_and_relay_import_without_psycopg() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "FilePosition"]


def test_with_psycopg_the_relay_waits_out_its_connection_errors() -> None:
    import psycopg

    from adapters.streaming.positions import POSTGRES_TRANSIENT

    assert psycopg.OperationalError in POSTGRES_TRANSIENT
    assert psycopg.InterfaceError in POSTGRES_TRANSIENT
