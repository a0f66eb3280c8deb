"""The CLI's plain coercion (adapters/startup/typer_plain.py) gives every parameter of the command
tree the value, or the error message, typer's own pydantic coercion gives."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer._click import Context
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param
from typer.main import get_command

from adapters.cli.app import app
from adapters.startup.typer_plain import PlainParam, runtime_param

SAMPLES = ["", "x", "ada@example.org", "0", "1", "-3", "50", "10000", "10001", "007", " 5",
           "1_000", "2.5", "1e3", "abc", "99999999999999999999", "/tmp", "-", "a\u00e9b",
           0, 1, 50, 20_000, True, False, Path("d"), Path("/tmp"), ["a", "b"], ("1", "2"),
           ["", "x"], [], None]


def _params():
    root = get_command(app)

    def walk(cmd, path):
        yield from ((path, cmd, p) for p in cmd.params)
        names = cmd.list_commands(None) if hasattr(cmd, "list_commands") else []
        for n in names:
            yield from walk(cmd.get_command(None, n), f"{path} {n}")

    return list(walk(root, "letterlog"))


def _outcome(runtime, value, param, ctx):
    try:
        return ("value", runtime.coerce(value, param=param, ctx=ctx))
    except BadParameter as e:
        return ("error", e.format_message())
    except (TypeError, ValueError) as e:  # both raise alike on a value argv never holds
        return ("raised", type(e).__name__)


def test_plain_coercion_agrees_with_typers_on_every_parameter():
    params = _params()
    plain = [p for _, _, p in params if isinstance(runtime_param(p.type_descriptor), PlainParam)]
    assert len(params) >= 150 and len(plain) >= 0.9 * len(params)  # nearly all are plain
    for path, cmd, param in params:
        ctx = Context(cmd, info_name=path)
        ours = runtime_param(param.type_descriptor)
        theirs = build_runtime_param(param.type_descriptor)
        for value in SAMPLES:
            if (param.multiple or param.nargs == -1) != isinstance(value, (list, tuple)):
                continue  # click hands a list parameter a list, any other a single value
            assert _outcome(ours, value, param, ctx) == _outcome(theirs, value, param, ctx), (
                f"{path} {param.name} {value!r}")


def test_an_out_of_range_number_is_worded_by_typer():
    [(_, cmd, limit)] = [(pa, c, p) for pa, c, p in _params()
                         if pa == "letterlog list" and p.name == "limit"]
    with pytest.raises(BadParameter, match="greater than or equal to 1"):
        runtime_param(limit.type_descriptor).coerce("0", param=limit, ctx=Context(cmd))


def test_the_patch_is_pinned_to_the_typer_it_was_checked_against():
    import typer
    import typer.core

    from adapters.startup import coercion

    assert coercion.supported(typer.__version__), (
        f"typer {typer.__version__}: check adapters/startup/typer_plain.py against its "
        "private coercion API (this module's other tests), then update coercion.TESTED")
    assert coercion.supported("0.29.0") and coercion.supported("0.29.7")
    assert not any(coercion.supported(v) for v in ("0.30.0", "0.28.1", "1.0.0", "0.2"))
    before = typer.core.build_runtime_param  # type: ignore[attr-defined]
    try:
        typer.core.build_runtime_param = build_runtime_param  # type: ignore[attr-defined]
        assert coercion.install("0.30.1") is False  # another release: typer's own coercion
        assert typer.core.build_runtime_param is build_runtime_param  # type: ignore[attr-defined]
        assert coercion.install() is True
        assert typer.core.build_runtime_param is runtime_param  # type: ignore[attr-defined]
    finally:
        typer.core.build_runtime_param = before  # type: ignore[attr-defined]
