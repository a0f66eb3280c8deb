"""The user purge job end to end: a letterlog store with virtual roots and ACL entries, its
users in a real slapd (supervised, as the dev servers run it), `letterlog users purge`.

A user deleted from slapd loses its root and rights, as events in the log (a dry run first
writes nothing); a stopped slapd and an emptied subtree are refused, nothing removed, and the
command says why."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from adapters.embedded import Letterlog
from devtools.devservers import LdapServer
from tests.services.support import letterlog, store_env

pytestmark = pytest.mark.services

SHARED = "shared@example.org"
RAW = b"From: a@example.net\r\nTo: shared@example.org\r\nSubject: s\r\n\r\nhello\r\n"


def make_store(data: Path, ldap: LdapServer) -> None:
    """Roots of ada and gone; rights of ada, gone (also negative), a group, anyone."""
    settings = {k.removeprefix("LETTERLOG_").lower(): v for k, v in ldap.settings_env().items()}
    with Letterlog.open(data, **settings) as store:
        store.deliver(account=SHARED, raw=RAW)
        store.create_mailbox(SHARED, "Projects")
        store.set_root("ada", SHARED)
        store.set_root("gone", f"{SHARED}/Projects")
        for identifier, rights in (("ada", "lr"), ("gone", "lrswi"), ("-gone", "w"),
                                   ("$sales", "lr"), ("anyone", "l")):
            store.acl_set(SHARED, "Projects", identifier, rights)


def state(data: Path) -> dict[str, Any]:
    with Letterlog.open(data, create=False) as store:
        return {"roots": store.roots(), "acl": store.acl_entries(),
                "position": store.max_position()}


def purge(ldap: LdapServer, data: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    done = letterlog(store_env(ldap, data), "--json", "users", "purge", *args)
    return done.returncode, json.loads(done.stdout), done.stderr


def delete_users(ldap: LdapServer, *uids: str) -> None:
    conn = ldap.connection()
    for uid in uids:
        conn.delete(f"uid={uid},{ldap.people_dn}")
    conn.unbind()


def test_a_user_deleted_from_slapd_loses_its_root_and_rights_as_events(people, tmp_path):
    data = tmp_path / "data"
    make_store(data, people)
    code, first, _ = purge(people, data)
    assert code == 0 and first["status"] == "purged" and first["directory_users"] == 3
    assert first["roots_removed"] == [] and first["acl_removed"] == []
    before = state(data)
    delete_users(people, "gone")
    memory = (data / "user-purge.json").read_bytes()

    code, dry, _ = purge(people, data, "--dry-run")
    assert code == 0 and dry["dry_run"] and dry["status"] == "dry-run"
    assert [r["user"] for r in dry["roots_removed"]] == ["gone"]
    assert state(data) == before and (data / "user-purge.json").read_bytes() == memory

    code, done, _ = purge(people, data)
    assert code == 0 and done["status"] == "purged" and done["directory_users"] == 2
    assert done["roots_removed"] == [{"user": "gone", "root": f"{SHARED}/Projects"}]
    assert [(e["identifier"], e["rights"]) for e in done["acl_removed"]] == [
        ("gone", "lrswi")]
    # the negative entry stays: removing it would give "gone" back 'w' should he return
    assert [(e["identifier"], e["rights"]) for e in done["negative_kept"]] == [("-gone", "w")]
    after = state(data)
    assert after["roots"] == {"ada": SHARED}
    assert sorted(e[2] for e in after["acl"]) == ["$sales", "-gone", "ada", "anyone"]
    assert after["position"] == done["position"] == before["position"] + 2  # two events


def test_a_stopped_slapd_is_refused_and_nothing_is_removed(slapd, people, tmp_path):
    data = tmp_path / "data"
    make_store(data, people)
    assert purge(people, data)[0] == 0
    delete_users(people, "gone")
    before = state(data)
    slapd.supervisor.stop("slapd")
    try:
        code, report, stderr = purge(people, data)
    finally:
        slapd.supervisor.start("slapd")
        people.await_ready()
    assert code == 1 and report["status"] == "refused" and report["roots_removed"] == []
    assert stderr.startswith("letterlog: error: user purge refused, nothing removed: the user "
                             f"directory {people.url}") and "Traceback" not in stderr
    assert state(data) == before


def test_an_emptied_subtree_is_refused_and_nothing_is_removed(people, tmp_path):
    data = tmp_path / "data"
    make_store(data, people)
    assert purge(people, data)[0] == 0
    before = state(data)
    delete_users(people, "ada", "grace", "gone")
    code, report, stderr = purge(people, data)
    assert code == 1 and report["status"] == "refused"
    assert "answered no user at all" in stderr and state(data) == before
    assert json.loads((data / "user-purge.json").read_text())["users"] == 3
    assert os.stat(data / "user-purge.json").st_mode & 0o777 == 0o600
