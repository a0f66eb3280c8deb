"""The lda's fast path, client half (ADR 0060): which command lines it takes as an lda of
its own (anything else is left to the full command line parser), and what it sends."""

from __future__ import annotations

import os

import pytest

from adapters.startup import handoff
from adapters.startup.ldaoptions import LDA_OPTIONS


@pytest.fixture(autouse=True)
def no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("LETTERLOG_")]:
        monkeypatch.delenv(key)


def test_postfix_s_command_line_is_taken_with_every_option(tmp_path):
    fields = handoff.parse([
        f"--data={tmp_path}", "lda", "--recipient=bob+x@example.org", "--sender=",
        "--original-recipient=bob@example.org", "--queue-id=4XyZ1", "--timeout", "30",
        "--mailbox", "Lists", "--detail-mailbox", "--envelope-headers",
        "--recipient-delimiter=-", "--json"])
    assert fields is not None
    assert {k: fields[k] for k in ("data", "recipient", "sender", "original_recipient",
                                   "queue_id", "timeout", "mailbox", "detail_mailbox",
                                   "envelope_headers", "recipient_delimiter", "json",
                                   "accounts_must_exist")} == {
        "data": os.path.realpath(tmp_path), "recipient": "bob+x@example.org", "sender": "",
        "original_recipient": "bob@example.org", "queue_id": "4XyZ1", "timeout": "30",
        "mailbox": "Lists", "detail_mailbox": "1", "envelope_headers": "1",
        "recipient_delimiter": "-", "json": "1", "accounts_must_exist": "0"}
    assert handoff.decode(handoff.encode(fields)) == fields


@pytest.mark.parametrize("argv", [
    ["lda"],                                            # no recipient: usage, 64
    ["lda", "--recipient"],                             # no value
    ["lda", "--recipient", "b@example.org", "--help"],
    ["--as", "bob@example.org", "lda", "--recipient", "b@example.org"],
    ["lda", "--recipient", "b@example.org", "--timeout", "0.5"],
    ["lda", "--recipient", "b@example.org", "--timeout", "soon"],
    ["lda", "--recipient", "b@example.org", "--unknown"],
    ["deliver", "--account", "b@example.org"],
    ["lda", "--recipient", "b@example.org", "extra"],
])
def test_anything_but_an_ordinary_lda_is_left_to_the_command_line(argv):
    assert handoff.parse(argv) is None


def test_the_environment_names_the_data_and_whether_accounts_must_exist(
        monkeypatch, tmp_path):
    monkeypatch.setenv("LETTERLOG_DATA", str(tmp_path))
    monkeypatch.setenv("LETTERLOG_ACCOUNTS_MUST_EXIST", "yes")
    fields = handoff.parse(["lda", "--recipient", "b@example.org"])
    assert fields is not None
    assert (fields["data"], fields["accounts_must_exist"]) == (os.path.realpath(tmp_path), "1")
    monkeypatch.setenv("LETTERLOG_ACCOUNTS_MUST_EXIST", "perhaps")
    assert handoff.parse(["lda", "--recipient", "b@example.org"]) is None


def test_the_settings_compared_are_those_that_shape_a_delivery():
    env = {"LETTERLOG_DATA": "/a", "LETTERLOG_MAX_PARTS": "7", "LETTERLOG_METRICS_PORT": "0",
           "LETTERLOG_QUOTA_BYTES": "1G", "HOME": "/root"}
    assert handoff.settings_environment(env) == (
        "LETTERLOG_MAX_PARTS=7\nLETTERLOG_QUOTA_BYTES=1G")


def test_without_a_server_nothing_is_read_and_lda_runs_itself(tmp_path):
    read, write = os.pipe()
    os.write(write, b"Subject: x\r\n\r\nx\r\n")
    os.close(write)
    try:
        assert handoff.handoff(["--data", str(tmp_path), "lda", "--recipient",
                                "b@example.org"], fd=read) is None
        assert os.read(read, 100) == b"Subject: x\r\n\r\nx\r\n"
    finally:
        os.close(read)


def test_one_option_table_for_the_lda_command_its_parser_and_the_compiled_client():
    """The typer command declares exactly the table's options (the flags as flags), and
    the compiled client (adapters/startup/lda_client.c) lists the same."""
    import re
    from pathlib import Path

    from typer.main import get_command

    from adapters.cli.app import app

    command = get_command(app).get_command(None, "lda")  # type: ignore[attr-defined]
    declared = {p.name: (p.opts[0], not p.is_flag) for p in command.params
                if p.name != "help"}
    assert declared == LDA_OPTIONS
    source = (Path(handoff.__file__).with_name("lda_client.c")).read_text()
    values = dict(re.findall(r'\{"(--[a-z-]+)", "([a-z_]+)"\}',
                             source.split("static const char *const values")[1]
                             .split(";")[0]))
    flags = dict(re.findall(r'\{"(--[a-z-]+)", "([a-z_]+)"\}',
                            source.split("static const char *const flags")[1].split(";")[0]))
    assert values == handoff._VALUES and flags == handoff._FLAGS
