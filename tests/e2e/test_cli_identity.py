"""Names and identifiers as a user types them, with the store's passwd-file: a refused name
or identifier is one line on stderr, exit 2, nothing written; a malformed line of the file
stops no other user."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.mta_support import letterlog

ADA, BOB = "ada@example.org", "bob@example.org"


def test_names_identifiers_and_a_bad_directory_line_on_the_command_line(env, data: Path,
                                                                        mail_file):
    (data / "users.passwd").write_text(f"{ADA}:x\n{BOB}:x\nbroken:x:1:staff\n")

    def run(*args: str, code: int = 0) -> tuple[str, str]:
        p = letterlog(env, data, *args)
        assert p.returncode == code, (args, p.stdout, p.stderr)
        assert b"Traceback" not in p.stderr
        return p.stdout.decode(), p.stderr.decode()

    run("deliver", "--account", ADA, str(mail_file))
    run("acl", "set", ADA, "INBOX", "anyone", "lr")
    _, err = run("--as", "\u017fam@example.org", "list", ADA, code=2)
    assert err.splitlines()[-1].startswith("letterlog: error: user: '\u017fam@example.org' is "
                                           "refused: U+017F")
    _, err = run("acl", "set", ADA, "INBOX", "user=zed", "lr", code=2)
    assert err.splitlines()[-1] == (
        "letterlog: error: identifier: 'zed': the directory knows no user 'zed' (an entry "
        "for it would grant nobody; letterlog users list shows the directory)")
    run("acl", "set", "--", ADA, "INBOX", "-user=BOB@Example.org", "r")
    out, _ = run("acl", "get", ADA, "INBOX")
    assert out.split() == ["-bob@example.org", "r", "anyone", "lr"]
    # the malformed line of another user: bob still acts (and is still denied 'r')
    _, err = run("--as", "BOB@example.org", "list", ADA, code=2)
    assert "lacks 'r' (read)" in err.splitlines()[-1]
    assert "users.passwd:3" in err  # the warning names the skipped line


def test_subscribe_as_a_user_is_the_owners_and_never_a_traceback(env, data: Path, mail_file):
    assert letterlog(env, data, "deliver", "--account", ADA, str(mail_file)).returncode == 0
    other = letterlog(env, data, "--as", BOB, "subscribe", ADA, "INBOX")
    assert other.returncode == 2 and b"Traceback" not in other.stderr
    assert other.stderr.decode().splitlines() == [
        f"letterlog: error: permission denied: subscribe of {ADA} is for its owner; {BOB} is "
        "not"]
    own = letterlog(env, data, "--as", ADA.upper(), "subscribe", ADA, "INBOX")
    assert own.returncode == 0, own.stderr
