"""Saved views from the command line, as a user runs it: ``rebuild --until-position P --view
NAME``, ``list --view NAME``, then ``erase-account``: the view no longer shows the account's
mail and no file under the data directory holds a byte of it; ``view list`` and
``view drop``, with the error a wrong name gets."""

from __future__ import annotations

from projections.registry import TABLE_SPECS
from tests.erasure_support import ACCOUNT, files_holding_any_form, marked_mail
from tests.factories import jrun, run


def test_erase_account_reaches_a_saved_view_and_views_are_listed_and_dropped(tmp_path):
    data = tmp_path / "d"
    raw, markers = marked_mail("c", attachment=True)
    (tmp_path / "m.eml").write_bytes(raw)
    (tmp_path / "k.eml").write_bytes(marked_mail("k", attachment=False)[0])
    jrun(data, "deliver", "--account", ACCOUNT, "--label", "work", str(tmp_path / "m.eml"))
    [kept] = jrun(data, "deliver", "--account", "keep@example.org", str(tmp_path / "k.eml"))
    [built] = jrun(data, "rebuild", "--all", "--until-position", str(kept["position"]),
                   "--view", "snap")
    assert built["view"] == "snap" and built["position"] == kept["position"]
    shown = run(data, "list", ACCOUNT, "--view", "snap").stdout
    assert markers[0] in shown  # the subject: the view holds the message
    [erased] = jrun(data, "erase-account", ACCOUNT)
    assert len(erased["purged"]) == 1

    assert files_holding_any_form(data, markers) == {}
    assert jrun(data, "list", ACCOUNT, "--view", "snap") == []  # the view still opens
    listed = run(data, "list", ACCOUNT, "--view", "snap").stdout
    assert markers[0] not in listed and b"SUBJECT" in listed
    assert len(jrun(data, "list", "keep@example.org", "--view", "snap")) == 1
    [counters] = jrun(data, "counters", ACCOUNT, "--view", "snap")
    assert counters["mailboxes"]["INBOX"]["messages"] == 0

    [view] = jrun(data, "view", "list")
    assert (view["view"], view["position"]) == ("snap", kept["position"])
    assert "messages__v_snap" in view["tables"] and view["bytes"] > 0
    assert view["erased_to"] == erased["position"]
    text = run(data, "view", "list").stdout.decode()
    assert text.startswith("snap") and f"{len(TABLE_SPECS)} tables" in text  # one a table

    wrong = run(data, "view", "drop", "snapp", ok=False)
    assert wrong.returncode == 2 and wrong.stdout == b""
    assert wrong.stderr.decode() == (
        "letterlog: error: view: there is no view named 'snapp' (views: snap)\n")
    assert [v["view"] for v in jrun(data, "view", "list")] == ["snap"]  # nothing dropped

    [dropped] = jrun(data, "view", "drop", "snap")
    assert dropped["dropped"] and dropped["view"] == "snap"
    assert jrun(data, "view", "list") == []
    assert run(data, "view", "list").stdout == b"no saved views\n"
    gone = run(data, "list", ACCOUNT, "--view", "snap", ok=False)
    assert gone.returncode == 2 and b"no view named 'snap'" in gone.stderr
    assert b"Traceback" not in gone.stderr + wrong.stderr


def test_view_commands_answer_help_and_are_in_the_root_help(tmp_path):
    root = run(tmp_path / "d", "--help").stdout.decode()
    assert "\n  view " in root
    assert "list" in run(tmp_path / "d", "view", "--help").stdout.decode()
