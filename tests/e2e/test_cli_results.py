"""The command line's results: positions, idempotent delivery, COPYUID, safe extraction."""

from __future__ import annotations

from pathlib import Path

from tests.factories import jrun, make_mail, run

ADA = "ada@example.org"


def _deliver(tmp_path: Path, *args: str) -> dict:
    f = tmp_path / "m.eml"
    f.write_bytes(make_mail("CLI"))
    [d] = jrun(tmp_path / "d", "deliver", "--account", ADA, *args, str(f))
    return d


def test_every_command_result_carries_its_log_position(tmp_path: Path) -> None:
    d = _deliver(tmp_path)
    data = tmp_path / "d"
    [flagged] = jrun(data, "flag", d["message_id"], "\\Seen")
    [again] = jrun(data, "flag", d["message_id"], "\\Seen")  # no change: the head it saw
    [created] = jrun(data, "mailbox", "create", ADA, "Archive")
    [moved] = jrun(data, "move", d["message_id"], "Archive")
    assert d["position"] < flagged["position"] == again["position"] < created["position"]
    assert created["position"] < moved["position"]
    assert (moved["source_uid"], moved["uid"]) == (1, 1)


def test_a_retried_delivery_with_a_key_prints_the_first_result(tmp_path: Path) -> None:
    first = _deliver(tmp_path, "--idempotency-key", "q42")
    again = _deliver(tmp_path, "--idempotency-key", "q42")
    assert (again["message_id"], again["uid"]) == (first["message_id"], first["uid"])
    assert again["duplicate"] and not first["duplicate"]


def test_extracting_to_a_missing_directory_fails_cleanly_and_counts_nothing(
        tmp_path: Path) -> None:
    d = _deliver(tmp_path, "--extract-limit", "1")
    data = tmp_path / "d"
    p = run(data, "extract", d["message_id"], "-o", "/nonexistent/x.eml", ok=False)
    assert p.returncode != 0 and b"Traceback" not in p.stderr
    assert b"/nonexistent does not exist" in p.stderr
    target = tmp_path / "x.eml"
    [report] = jrun(data, "extract", d["message_id"], "-o", str(target))
    assert target.read_bytes() == make_mail("CLI") and report["extractions_to_date"] == 1
    p = run(data, "extract", d["message_id"], "-o", str(target), "--force", ok=False)
    assert b"extraction limit of 1 reached" in p.stderr
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []
