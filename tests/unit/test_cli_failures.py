"""A failed command's exit status: the machine's failures (a busy store, a table store or a
user directory that does not answer) are 1, bad input 2; ``failures.temporary`` tells them
apart without importing the modules of the kinds it knows (``--help`` and the fast reads
load neither the table store's port nor the user directory)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from adapters.cli.failures import temporary
from domain.directory import DirectoryUnavailable
from domain.errors import AccountNotFound, InvalidCommand, StoreBusy
from projections.tablestore import TableStoreUnavailable


@pytest.mark.parametrize("error", [
    StoreBusy("the store is busy"), TableStoreUnavailable("HBase did not answer"),
    DirectoryUnavailable("ldap://directory", "no answer", timed_out=True)],
    ids=lambda e: type(e).__name__)
def test_the_machines_failures_are_temporary(error):
    assert temporary(error)


@pytest.mark.parametrize("error", [InvalidCommand("no such flag"), AccountNotFound("nobody")],
                         ids=lambda e: type(e).__name__)
def test_bad_input_is_not_temporary(error):
    assert not temporary(error)


def test_telling_them_apart_imports_neither_the_table_store_nor_the_directory():
    probe = ("import sys; from adapters.cli.failures import temporary; "
             "from domain.errors import InvalidCommand; "
             "assert not temporary(InvalidCommand('x')); "
             "print(sorted({'projections.tablemodel', 'domain.directory'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"
