"""``letterlog export``: an export holding message content is a copy that erasure cannot
reach; the command says so in one warning line on stderr before it writes (the Spark job
itself is replaced here: what is tested is what the user is told, and when)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from adapters.cli import admin
from adapters.cli.app import app


@pytest.fixture
def submitted(monkeypatch):
    jobs: list[list[str]] = []

    def job(args, master, conf=None):
        jobs.append(args)
        return {"rows": 3, "directory": args[2]}

    monkeypatch.setattr(admin, "spark_job", job)
    monkeypatch.setattr(admin, "_ready_for_spark", lambda **_: None)
    return jobs


WARNING = "erasing a message does not reach this copy"


@pytest.mark.parametrize("args", [["events", "--personal"], ["messages"]])
def test_an_export_holding_personal_data_warns_once_on_stderr(tmp_path, submitted, args):
    what, *rest = args
    result = CliRunner().invoke(app, ["export", what, str(tmp_path / "out"), *rest])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith(
        "letterlog: warning:")]
    assert len(warnings) == 1 and WARNING in warnings[0] and "plain text" in warnings[0]
    assert WARNING not in result.stdout
    assert submitted and submitted[0][:2] == ["export", what]


@pytest.mark.parametrize("what", ["events", "counters"])
def test_an_export_without_personal_data_says_nothing_on_stderr(tmp_path, submitted, what):
    result = CliRunner().invoke(app, ["export", what, str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
