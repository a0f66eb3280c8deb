"""The LDAP user directory against a real slapd (Debian's package) run under supervisord by
the project's own dev-server code: users and groups (groupOfNames and posixGroup) through
ldap3, `letterlog users list`, and a directory that stops answering."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from ldap3.utils.dn import escape_rdn

from adapters.directory.ldap import LdapDirectory
from adapters.lifecycle.purgememory import PurgeMemory
from adapters.lifecycle.userpurge import purge_users
from devtools.devservers import LdapServer
from devtools.devservers.supervised import SupervisedServices
from domain.acl_identifiers import UnknownIdentifier, check_identifier
from domain.directory import DirectoryUnavailable, DirectoryUser
from tests.contracts.directory_contract import DirectoryContract
from tests.factories import FakeRecords, records
from tests.services.servers import ldap_of
from tests.services.support import letterlog, store_env

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]


class TestLdapDirectory(DirectoryContract):
    """The directory contract on slapd: each test's users and groups in units of their own
    (``ou=<random>`` under ou=people and ou=groups), groups alternately ``groupOfNames`` and
    ``posixGroup``."""

    @pytest.fixture(autouse=True)
    def _server(self, slapd: SupervisedServices) -> Iterator[None]:
        self.ldap = ldap_of(slapd)
        self.added: list[str] = []
        yield
        conn = self.ldap.connection()
        for dn in reversed(self.added):
            conn.delete(dn)
        conn.unbind()

    def make_directory(self, users: Mapping[str, set[str]]) -> LdapDirectory:
        unit = f"ou={uuid.uuid4().hex[:10]}"
        people, groups = f"{unit},{self.ldap.people_dn}", f"{unit},{self.ldap.groups_dn}"
        conn = self.ldap.connection()

        def add(dn: str, classes: list[str], attributes: dict[str, Any]) -> None:
            conn.add(dn, classes, attributes)
            self.added.append(dn)

        add(people, ["organizationalUnit"], {})
        add(groups, ["organizationalUnit"], {})
        dns = {}
        for name in users:
            dns[name] = f"uid={escape_rdn(name)},{people}"
            add(dns[name], ["inetOrgPerson"], {"uid": name, "cn": name, "sn": "x"})
        names = sorted({g for groups_of_one in users.values() for g in groups_of_one})
        for index, group in enumerate(names):
            members = sorted(n for n, gs in users.items() if group in gs)
            if index % 2:
                add(f"cn={group},{groups}", ["posixGroup"],
                    {"cn": group, "gidNumber": 6000 + index, "memberUid": members})
            else:
                add(f"cn={group},{groups}", ["groupOfNames"],
                    {"cn": group, "member": [dns[n] for n in members]})
        conn.unbind()
        return LdapDirectory(self.ldap.url, people, group_base_dn=groups,
                             bind_dn=self.ldap.admin_dn, password=self.ldap.password)

    def test_a_name_in_another_case_is_found_as_the_directory_spells_it(self) -> None:
        directory = self.make_directory({"ada@example.org": {"sales"}})
        assert directory.user("ADA@Example.org") == DirectoryUser("ada@example.org",
                                                                   frozenset({"sales"}))


    def test_names_and_groups_are_answered_as_the_identity_rule_has_them(self) -> None:
        directory = self.make_directory({"Sam@Example.org": {"Sales"}, "\uff42ob": set()})
        assert directory.users() == [DirectoryUser("bob"),
                                     DirectoryUser("sam@example.org", frozenset({"sales"}))]
        assert directory.user("SAM@example.org") == DirectoryUser("sam@example.org",
                                                                   frozenset({"sales"}))
        assert directory.skipped() == []

    def test_a_uid_the_rule_refuses_is_skipped_and_never_found_as_another(self) -> None:
        # slapd's own matching may fold the long s to 's': the rule decides, not the server
        directory = self.make_directory({"\u017fam@example.org": {"staff"}})
        assert directory.users() == []
        [entry] = directory.skipped()
        assert "compatibility form" in entry.reason and entry.where.startswith("uid=")
        assert directory.user("sam@example.org") is None
        assert directory.user("\u017fam@example.org") is None

    def test_an_identifier_must_name_someone_of_the_directory(self) -> None:
        directory = self.make_directory({"ada@example.org": {"sales"}})
        for known in ("ada@example.org", "-ada@example.org", "$sales", "-$sales", "anyone"):
            check_identifier(directory, known)
        for unknown in ("zed", "-zed", "$support", "-$support"):
            with pytest.raises(UnknownIdentifier, match="nobody"):
                check_identifier(directory, unknown)


def directory(ldap: LdapServer, **options: Any) -> LdapDirectory:
    return LdapDirectory(ldap.url, ldap.people_dn, group_base_dn=ldap.groups_dn,
                         bind_dn=ldap.admin_dn, password=ldap.password, **options)






def test_users_and_their_groups_of_both_kinds(people):
    assert directory(people).users() == [
        DirectoryUser("ada", frozenset({"sales"})),
        DirectoryUser("gone", frozenset({"sales"})),
        DirectoryUser("grace", frozenset({"ops"})),
    ]
    assert directory(people).user("grace") == DirectoryUser("grace", frozenset({"ops"}))
    assert directory(people).user("ada") == DirectoryUser("ada", frozenset({"sales"}))
    assert directory(people).user("nobody") is None
    assert directory(people).user("*") is None  # a filter character is a name, not a wildcard


def test_users_list_shows_what_the_directory_answers(people, tmp_path):
    listed = letterlog(store_env(people, tmp_path / "data"), "--json", "users", "list")
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line) for line in listed.stdout.splitlines()] == [
        {"name": "ada", "groups": ["sales"]}, {"name": "gone", "groups": ["sales"]},
        {"name": "grace", "groups": ["ops"]}]
    text = letterlog(store_env(people, tmp_path / "data"), "users", "list")
    assert text.stdout.splitlines()[1].split() == ["ada", "sales"]
    assert f"3 users from {people.url} ({people.people_dn})" in text.stderr


def test_a_wrong_password_or_base_dn_is_a_failure_never_an_empty_answer(people):
    wrong = LdapDirectory(people.url, people.people_dn, bind_dn=people.admin_dn,
                          password="not-it")
    with pytest.raises(DirectoryUnavailable, match="failed: .*[Ii]nvalid[ _]?[Cc]redentials"):
        wrong.users()
    missing = directory(people)
    missing.base_dn = f"ou=nobody,{people.suffix}"
    with pytest.raises(DirectoryUnavailable, match="failed: .*[Nn]o[ _]?[Ss]uch[ _]?[Oo]bject"):
        missing.users()


def test_a_stopped_slapd_is_unavailable_and_users_list_exits_1(slapd, people, tmp_path):
    slapd.supervisor.stop("slapd")
    try:
        t0 = time.monotonic()
        with pytest.raises(DirectoryUnavailable, match="failed: .*[Rr]efused") as caught:
            directory(people, timeout=2).users()
        assert time.monotonic() - t0 < 10 and not caught.value.timed_out
        listed = letterlog(store_env(people, tmp_path / "data"), "users", "list")
        assert listed.returncode == 1
        assert listed.stderr.startswith("letterlog: error: the user directory ldap://")
        assert "temporary" in listed.stderr and "Traceback" not in listed.stderr
    finally:
        slapd.supervisor.start("slapd")
        people.await_ready()
    assert len(directory(people).users()) == 3


def test_a_slapd_that_does_not_answer_times_out(slapd, people):
    pid = slapd.supervisor.info("slapd")["pid"]
    os.kill(pid, signal.SIGSTOP)  # connections are accepted by the kernel, never answered
    try:
        t0 = time.monotonic()
        with pytest.raises(DirectoryUnavailable, match="did not answer in time") as caught:
            directory(people, timeout=1).users()
        seconds = time.monotonic() - t0
    finally:
        os.kill(pid, signal.SIGCONT)
    assert caught.value.timed_out and seconds < 5, seconds
    assert len(directory(people).users()) == 3


# -- the user purge against slapd (the store's records: the unit tests' in-memory fake) ----------

def purge(ldap: LdapServer, recs: FakeRecords, tmp_path: Path, **options: Any) -> Any:
    return purge_users(directory(ldap, timeout=2), recs, PurgeMemory(tmp_path / "count.json"),
                       min_ratio=0.5, **options)


def test_the_purge_removes_the_records_of_a_user_deleted_from_slapd(people, tmp_path):
    recs = records()
    first = purge(people, recs, tmp_path)
    assert first.status == "purged" and first.directory_users == 3
    assert first.roots_removed == [] and first.acl_removed == []  # gone still exists
    conn = people.connection()
    conn.delete(f"uid=gone,{people.people_dn}")
    conn.unbind()
    dry = purge(people, recs, tmp_path, dry_run=True)
    assert [r["user"] for r in dry.roots_removed] == ["gone"] and recs.calls == []
    assert PurgeMemory(tmp_path / "count.json").previous_users() == 3
    done = purge(people, recs, tmp_path)
    assert done.status == "purged" and done.directory_users == 2
    assert done.roots_removed == [{"user": "gone", "root": "shared@example.org/Projects"}]
    assert {e["identifier"] for e in done.acl_removed} == {"gone"}
    # the negative entry stays: removing it would give 'w' back to a returning "gone"
    assert {e["identifier"] for e in done.negative_kept} == {"-gone"}
    assert "gone" not in recs.root and {e[2] for e in recs.acl} >= {"$sales", "anyone", "ada",
                                                                      "-gone"}
    assert PurgeMemory(tmp_path / "count.json").previous_users() == 2


def test_the_purge_refuses_a_base_dn_on_another_branch_of_as_many_users(people, tmp_path):
    """The base DN mistyped onto another branch that holds as many unrelated users: the
    count check passes, the overlap with the last accepted users refuses it."""
    assert purge(people, records(), tmp_path).status == "purged"  # ada, gone, grace
    branch = f"ou=contractors-{uuid.uuid4().hex[:8]},{people.suffix}"
    conn = people.connection()
    added = [branch]
    conn.add(branch, ["organizationalUnit"], {})
    for uid in ("carl", "dora", "emil", "fay"):
        added.append(f"uid={uid},{branch}")
        conn.add(added[-1], ["inetOrgPerson"], {"uid": uid, "cn": uid, "sn": uid})
    try:
        wrong = directory(people, timeout=2)
        wrong.base_dn = branch
        recs = records()
        report = purge_users(wrong, recs, PurgeMemory(tmp_path / "count.json"), min_ratio=0.5)
        assert report.status == "refused" and recs.calls == []
        assert "shares 0 of the 3 users of the last accepted answer" in report.reason
    finally:
        for dn in reversed(added):
            conn.delete(dn)
        conn.unbind()


def test_the_purge_refuses_a_stopped_slapd_and_keeps_everything(slapd, people, tmp_path):
    assert purge(people, records(), tmp_path).status == "purged"  # 3 users remembered
    recs = records()
    slapd.supervisor.stop("slapd")
    try:
        report = purge(people, recs, tmp_path)
    finally:
        slapd.supervisor.start("slapd")
        people.await_ready()
    assert report.status == "refused" and recs.calls == [] and recs.root == records().root
    assert "failed" in report.reason and "temporary" in report.reason
    assert report.line().startswith("user purge refused, nothing removed: the user directory")
    memory = PurgeMemory(tmp_path / "count.json").read()
    assert memory["users"] == 3 and memory["last_refusal"]["reason"] == report.reason


def test_the_purge_refuses_an_emptied_or_shrunken_subtree(people, tmp_path):
    assert purge(people, records(), tmp_path).status == "purged"  # 3 users remembered
    conn = people.connection()
    for uid in ("gone", "grace"):
        conn.delete(f"uid={uid},{people.people_dn}")
    recs = records()
    shrunk = purge(people, recs, tmp_path)
    assert shrunk.status == "refused" and recs.calls == []
    assert "answered 1 user, fewer than 50% of the 3" in shrunk.reason
    conn.delete(f"uid=ada,{people.people_dn}")
    conn.unbind()
    empty = purge(people, recs, tmp_path, accept_shrink=True)
    assert empty.status == "refused" and "no user at all" in empty.reason
    assert recs.calls == [] and PurgeMemory(tmp_path / "count.json").previous_users() == 3


def test_case_and_names_do_not_escape_rights_with_groups_from_slapd(people, tmp_path,
                                                                    monkeypatch):
    """The attacks of issue 41 with a real slapd as the directory: a negative entry on a
    group holds whatever the case the user or the group is spelled in; an identifier that
    names nobody in slapd is refused; a name the rule refuses acts as nobody."""
    from adapters.embedded import Letterlog
    from domain.errors import MailboxNotFound, PermissionDenied
    from domain.identity import NameRefused
    from tests.factories import make_mail

    for key, value in store_env(people, tmp_path / "data").items():
        if key.startswith("LETTERLOG_"):
            monkeypatch.setenv(key, value)
    owner = "owner@example.org"
    with Letterlog.open(tmp_path / "data", durability="normal") as store:
        store.deliver(account=owner, raw=make_mail("team"))
        store.acl_set(owner, "INBOX", "anyone", "lr")
        store.acl_set(owner, "INBOX", "-$SALES", "r")  # ada and gone are in sales
        assert store.acl_get(owner, "INBOX") == {"-$sales": "r", "anyone": "lr"}
        for spelled in ("ada", "ADA", "\uff41da"):
            ada = store.as_user(spelled)
            assert ada.caller.groups == {"sales"}
            with pytest.raises(PermissionDenied):
                ada.messages(owner, "INBOX")
        assert len(store.as_user("Grace").messages(owner, "INBOX")) == 1  # in ops only
        for nobody in ("user=zed", "-zed", "group=support", "-$support"):
            with pytest.raises(UnknownIdentifier):
                store.acl_set(owner, "INBOX", nobody, "lr")
        store.acl_set(owner, "INBOX", "-user=Grace", "lr")
        with pytest.raises(MailboxNotFound):
            store.as_user("GRACE").messages(owner, "INBOX")
        with pytest.raises(NameRefused):
            store.as_user("\u0430da")  # Cyrillic a: would read as ada


def _set_password(ldap: LdapServer, uid: str, password: str) -> None:
    from ldap3 import MODIFY_REPLACE

    from devtools.devservers.ldap import ssha

    conn = ldap.connection()
    try:
        assert conn.modify(f"uid={uid},{ldap.people_dn}",
                           {"userPassword": [(MODIFY_REPLACE, [ssha(password)])]})
    finally:
        conn.unbind()


def test_a_user_authenticates_by_a_bind_as_its_entry(people):
    _set_password(people, "ada", "ada-pw")
    found = directory(people).authenticate("ada", "ada-pw")
    assert found == DirectoryUser("ada", frozenset({"sales"}))
    assert directory(people).authenticate("ada", "wrong") is None
    assert directory(people).authenticate("ada", "") is None  # never an anonymous bind
    assert directory(people).authenticate("grace", "ada-pw") is None  # no password set
    assert directory(people).authenticate("nobody", "ada-pw") is None


def test_imap_logs_users_in_against_ldap(people, tmp_path):
    from tests.services.imap_support import imap_server

    _set_password(people, "ada", "ada-pw")
    env = {k: os.environ.get(k) for k in people.settings_env()}
    os.environ.update(people.settings_env())
    try:
        with imap_server(tmp_path / "data", "--plaintext-auth") as server:
            c = server.client()
            with pytest.raises(c.error, match="AUTHENTICATIONFAILED"):
                c.login("ada", "wrong")
            c.logout()
            c = server.client()
            c.login("ada", "ada-pw")
            assert c.list()[0] == "OK"  # ada is no address: no account of her own, no error
            c.logout()
    finally:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
