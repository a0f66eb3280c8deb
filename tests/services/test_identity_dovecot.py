"""Names side by side with Dovecot 2.3 (Debian's, the dev server's configuration: default
``auth_username_chars`` and ``auth_username_format = %Lu``): whenever Dovecot takes a name
as a user, letterlog's identity rule takes it as the same user; a name Dovecot refuses is
never another existing user in letterlog either (it is refused, or the one user it spells)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.devservers import DovecotServer
from domain.identity import NameRefused, canonical_name

pytestmark = pytest.mark.services

NAMES = {  # as typed -> what letterlog makes of it (None: refused)
    "bob@example.org": "bob@example.org",
    "BOB@Example.org": "bob@example.org",
    "Bob.Smith-2@Example.ORG": "bob.smith-2@example.org",
    "\u017fam@example.org": None,  # long s: would be sam
    "\u0430da@example.org": None,  # Cyrillic a: would read as ada
    "bob\u200b@example.org": None,  # zero-width space
    "\ufb01nance@example.org": None,  # the fi ligature
    "\uff42ob@example.org": "bob@example.org",  # full-width b: the same user (RFC 8265)
    "stra\u00dfe@example.org": "stra\u00dfe@example.org",  # a user of its own, not strasse
    "e\u0301ve@example.org": "\u00e9ve@example.org",
}


@pytest.fixture(scope="module")
def dovecot(tmp_path_factory) -> Iterator[DovecotServer]:
    server = DovecotServer(workdir=tmp_path_factory.mktemp("dovecot"), keep_workdir=True)
    server.install()
    server.start()
    yield server
    server.stop()


def dovecot_user(server: DovecotServer, name: str) -> str | None:
    """The user Dovecot's auth service takes ``name`` as (``doveadm user``: its userdb
    lookup, after ``auth_username_chars`` and ``auth_username_format``), or None when it
    refuses it."""
    p = subprocess.run(server.doveadm("user", name), capture_output=True, text=True,
                       timeout=60, check=False)
    if p.returncode != 0:
        return None
    fields = dict(line.split("\t", 1) for line in p.stdout.splitlines() if "\t" in line)
    return fields.get("user", name)  # shown when the lookup changed the name


@pytest.fixture(scope="module")
def answers(dovecot) -> dict[str, str | None]:
    return {name: dovecot_user(dovecot, name) for name in NAMES}


def letterlog_user(name: str) -> str | None:
    try:
        return canonical_name(name)
    except NameRefused:
        return None


@pytest.mark.parametrize("name", sorted(NAMES))
def test_a_name_means_the_same_user_here_as_in_dovecot_or_no_other(answers, name):
    ours, theirs = letterlog_user(name), answers[name]
    assert ours == NAMES[name]
    if theirs is not None:  # Dovecot takes it as a user: so do we, as the same one
        assert ours == theirs
    else:  # Dovecot refuses it: we refuse it, or it spells exactly one user, never another
        existing = {v for v in NAMES.values() if v is not None} - {ours}
        assert ours is None or ours not in existing


def test_dovecot_refuses_every_name_outside_ascii_as_the_docs_say(answers):
    text = (Path(__file__).resolve().parents[2] / "docs" / "permissions.md").read_text()
    assert "Dovecot refuses every name outside ASCII by default" in text
    refused_by_dovecot = [n for n, user in answers.items() if user is None]
    assert set(refused_by_dovecot) == {n for n in NAMES if not n.isascii()}
