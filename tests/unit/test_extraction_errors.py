"""A failed extraction to a file is named as the user knows it: the output file and the
message, never the temporary file it is written to first (``.out.eml.x1y2.part``); it does
not count, and nothing is left behind. The failure is made at the step that puts the file in
place (a full or failing disk), in-process, through the command line's own error handling."""

from __future__ import annotations

import errno
from pathlib import Path
from uuid import UUID

from adapters.cli.app import run
from adapters.embedded import Letterlog
from adapters.facade.extraction import Extractor
from tests.factories import make_mail


def _message(data: Path) -> str:
    with Letterlog.open(data, durability="normal") as store:
        return str(store.deliver(account="ada@example.org", raw=make_mail("x")).message_id)


def test_a_failed_write_names_the_output_and_the_message_not_a_temporary_file(
        tmp_path, monkeypatch, capsys):
    data, out = tmp_path / "d", tmp_path / "out.eml"
    mid = _message(data)
    seen: list[Path] = []

    def failing(tmp: Path, path: Path, force: bool) -> None:
        seen.append(tmp)
        raise OSError(errno.EIO, "Input/output error", str(tmp), str(path))

    monkeypatch.setattr(Extractor, "_place", staticmethod(failing))
    code = run(["--data", str(data), "extract", mid, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith(f"letterlog: error: {out}: Input/output error (writing message {mid}")
    assert seen and seen[0].name not in err and ".part" not in err
    assert not out.exists() and list(tmp_path.glob(".out.eml.*")) == []
    monkeypatch.undo()
    with Letterlog.open(data, durability="normal") as store:
        assert store.show(UUID(mid))["extractions_to_date"] == 0


def test_an_unreadable_payload_is_named_as_the_message_s_payload(tmp_path, monkeypatch, capsys):
    data, out = tmp_path / "d", tmp_path / "out.eml"
    mid = _message(data)
    payload = data / "payloads" / "ab" / "cdef"

    def unreadable(self, message_id):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(payload))
        yield b""

    store_open = Letterlog.open

    def opened(*a, **k):
        store = store_open(*a, **k)
        monkeypatch.setattr(type(store.mail), "content", unreadable)
        return store

    monkeypatch.setattr(Letterlog, "open", staticmethod(opened))
    code = run(["--data", str(data), "extract", mid, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and err == (f"letterlog: error: {payload}: No such file or directory (the "
                                 f"payload of message {mid}; nothing written to {out}, not "
                                 f"counted)\n")
    assert not out.exists()
