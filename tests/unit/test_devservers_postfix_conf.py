"""The private Postfix's main.cf takes extra settings as ``postconf -e`` does: one entry per
name. A second entry made every Postfix program warn "overriding earlier entry" as it
started; with ``maillog_file`` the warnings filled ``postlogd``'s socket until it blocked on
its own warning, and ``postfix reload`` hung behind it (the virtual-users test, 120 s)."""

from __future__ import annotations

from collections import Counter

from devtools.devservers.postfix_conf import MAIN_CF, main_cf_with


def _names(main: str) -> Counter[str]:
    return Counter(line.partition("=")[0].strip() for line in main.splitlines()
                   if "=" in line and not line[:1].isspace() and not line.startswith("#"))


def test_a_setting_named_again_replaces_the_entry_where_it_stands() -> None:
    main = "a = 1\nmydestination = example.org,\n  example.net\nb = 2\n"
    merged = main_cf_with(main, "mydestination = $myhostname, localhost\nc = 3\n")
    assert merged == "a = 1\nmydestination = $myhostname, localhost\nb = 2\nc = 3\n"


def test_the_documented_virtual_lines_leave_one_entry_per_name() -> None:
    main = MAIN_CF.format(queue="/q", data="/d", maillog="/m", workdir="/w", host="127.0.0.1",
                          domains="example.org, example.net", long_ids="yes",
                          local_transport="letterlog:")
    lines = ("mydestination = $myhostname, localhost\n"
             "virtual_mailbox_domains = example.org, example.net\n"
             "recipient_delimiter = +\nenable_long_queue_ids = yes\n"
             "lmtp_send_xforward_command = yes\n")
    merged = main_cf_with(main, lines)
    assert max(_names(merged).values()) == 1
    assert "mydestination = $myhostname, localhost" in merged.splitlines()
    assert "virtual_mailbox_domains = example.org, example.net" in merged.splitlines()
    assert max(_names(main + lines).values()) == 2  # what appending them made
