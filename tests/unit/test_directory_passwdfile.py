"""The passwd-file directory (Dovecot's format): users, their ACL groups, and bad lines
named by file and line number (never by their content, which holds a password hash)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adapters.directory.passwdfile import PasswdFileDirectory, parse, read
from domain.directory import DirectoryInvalid, DirectoryUnavailable, DirectoryUser, groups_of
from tests.contracts.directory_contract import DirectoryContract

USERS = """\
# letterlog users
ada@example.org:{SHA512-CRYPT}$6$s:1000:1000:Ada:/home/ada::userdb_acl_groups=sales,support
grace@example.org:{PLAIN}pw:1001:1001::/home/grace::userdb_quota_rule=*:storage=1G nologin

bob:{PLAIN}x
carol:{PLAIN}y::::::acl_groups=sales
"""


def test_reads_users_and_their_groups_in_name_order():
    assert parse(USERS) == [
        DirectoryUser("ada@example.org", frozenset({"sales", "support"})),
        DirectoryUser("bob"),
        DirectoryUser("carol", frozenset({"sales"})),
        DirectoryUser("grace@example.org"),
    ]


def test_an_extra_field_may_hold_colons_and_bare_keys():
    [user] = parse("u:p:::::: userdb_mail=maildir:~/Maildir nopassword userdb_acl_groups=ops\n")
    assert user == DirectoryUser("u", frozenset({"ops"}))


@pytest.mark.parametrize(("line", "says"), [
    ("no-colon-here", "no ':'"),
    (":{PLAIN}pw", "user name is empty"),
    ("a b:{PLAIN}pw", "user name"),
    ("ada:{PLAIN}pw:x1000:1000", "uid 'x1000' is not a number"),
    ("ada:{PLAIN}pw:1000:staff", "gid 'staff' is not a number"),
    ("ada:{PLAIN}pw::::::userdb_acl_groups=sales,,ops", "comma-separated list"),
    ("ada:{PLAIN}pw::::::=value", "not key=value"),
    ("\u017fam:{PLAIN}pw", "compatibility form"),
    ("\u0430da:{PLAIN}pw", "mixes the scripts Cyrillic, Latin"),
    ("ada:{PLAIN}pw::::::userdb_acl_groups=\ufb01nance", "group"),
])
def test_a_bad_line_is_skipped_named_by_file_and_number_never_by_its_content(line, says):
    text = "good:{PLAIN}pw\n# comment\n" + line + "\nzed:{PLAIN}pw\n"
    users, skipped = read(text, "users.passwd")
    assert [u.name for u in users] == ["good", "zed"]  # everyone else is still answered
    [entry] = skipped
    assert entry.where == "users.passwd:3"
    assert re.search(rf"^users\.passwd:3: .*{re.escape(says)}", entry.reason), entry.reason
    assert "{PLAIN}pw" not in entry.reason


def test_a_user_named_twice_after_the_rule_is_ambiguous_and_never_answered(tmp_path: Path):
    path = tmp_path / "users.passwd"
    path.write_text("Ada:x::::::userdb_acl_groups=interns\nbob:y\nada:z\n")
    directory = PasswdFileDirectory(path)
    assert directory.users() == [DirectoryUser("bob")]
    assert [(e.where, e.name) for e in directory.skipped()] == [
        (f"{path}:1", "ada"), (f"{path}:3", "ada")]
    assert "named on lines 1, 3" in directory.skipped()[0].reason
    with pytest.raises(DirectoryInvalid, match="groups are unknown"):
        directory.user("ADA")  # never answered without its groups (-$interns must hold)
    assert directory.user("bob") == DirectoryUser("bob")


def test_a_user_whose_line_is_malformed_is_not_answered_but_everyone_else_is(tmp_path: Path,
                                                                              caplog):
    path = tmp_path / "users.passwd"
    path.write_text("ada:x:1000:staff::::userdb_acl_groups=interns\nbob:y\n")
    directory = PasswdFileDirectory(path)
    with caplog.at_level("WARNING", logger="letterlog.directory"):
        assert directory.users() == [DirectoryUser("bob")]
    assert f"{path}:1: user 'ada': gid 'staff' is not a number" in caplog.text
    assert "{PLAIN}" not in caplog.text and ":x:" not in caplog.text
    with pytest.raises(DirectoryInvalid, match=r":1: user 'ada'"):
        directory.user("Ada")
    assert groups_of(directory, "bob") == frozenset()


def test_names_and_groups_are_answered_as_the_identity_rule_has_them(tmp_path: Path):
    path = tmp_path / "users.passwd"
    path.write_text("\uff22\uff2f\uff22@Example.org:x::::::userdb_acl_groups=Sales\n"
                    "stra\u00dfe@example.org:x\nstrasse@example.org:y\n")
    directory = PasswdFileDirectory(path)
    assert [u.name for u in directory.users()] == [
        "bob@example.org", "strasse@example.org", "stra\u00dfe@example.org"]
    assert directory.user("BOB@example.ORG") == DirectoryUser("bob@example.org",
                                                              frozenset({"sales"}))
    assert directory.user("\u017fam@example.org") is None  # refused: nobody


def test_the_file_is_read_again_on_every_question(tmp_path: Path):
    path = tmp_path / "users.passwd"
    path.write_text("ada:x::::::userdb_acl_groups=sales\n")
    directory = PasswdFileDirectory(path)
    assert groups_of(directory, "ada") == {"sales"}
    assert directory.user("bob") is None and groups_of(directory, "bob") == frozenset()
    path.write_text("ada:x\nbob:y::::::userdb_acl_groups=ops\n")
    assert [u.name for u in directory.users()] == ["ada", "bob"]
    assert directory.user("bob") == DirectoryUser("bob", frozenset({"ops"}))


def test_a_missing_file_is_unavailable_unless_it_is_the_stores_default(tmp_path: Path):
    missing = tmp_path / "nope.passwd"
    with pytest.raises(DirectoryUnavailable, match="nope.passwd failed: no such file"):
        PasswdFileDirectory(missing).users()
    assert PasswdFileDirectory(missing, missing_is_empty=True).users() == []


def test_bytes_that_are_not_utf8_are_a_skipped_line(tmp_path: Path):
    path = tmp_path / "users.passwd"
    path.write_bytes(b"ada:x\nb\xffb:y\ncarol:z\n")
    directory = PasswdFileDirectory(path)
    assert [u.name for u in directory.users()] == ["ada", "carol"]
    assert [e.reason for e in directory.skipped()] == [f"{path}:2: not UTF-8"]


class TestPasswdFileDirectory(DirectoryContract):
    @pytest.fixture(autouse=True)
    def _file(self, tmp_path: Path) -> None:
        self.path = tmp_path / "users.passwd"

    def make_directory(self, users):
        self.path.write_text("".join(
            f"{name}:{{PLAIN}}pw:::::" + (f":userdb_acl_groups={','.join(sorted(groups))}"
                                         if groups else "") + "\n"
            for name, groups in users.items()))
        return PasswdFileDirectory(self.path)
