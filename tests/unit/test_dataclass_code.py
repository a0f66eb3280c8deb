"""``adapters.startup.dataclass_code``: the dataclasses' generated methods compiled once and
kept between processes (ADR 0116). Each test runs in processes of its own, with the cache in
a directory of its own (``PYTHONPYCACHEPREFIX``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SAMPLES = """
import dataclasses, enum, typing
from dataclasses import dataclass, field

class Colour(enum.Enum):
    RED = 1

@dataclass(frozen=True)
class Frozen:
    a: int
    b: str = "x"
    c: tuple = field(default_factory=tuple)

@dataclass(order=True, unsafe_hash=True)
class Ordered:
    a: int
    b: "typing.Optional[Colour]" = None

@dataclass(kw_only=True, slots=True)
class KeywordsOnly:
    a: int
    b: tuple = ()

@dataclass(frozen=True)
class Child(Frozen):
    d: float = 1.5
    e: dataclasses.InitVar[int] = 0

    def __post_init__(self, e):
        object.__setattr__(self, "d", self.d + e)

CLASSES = [Frozen, Ordered, KeywordsOnly, Child]
"""

# What a class's generated methods are: each method's code (bytecode, constants, names) and
# its annotations, and what the class does with instances.
DESCRIBE = """
import inspect
def code_of(f):
    c = f.__code__
    return [c.co_code.hex(), repr(c.co_consts), list(c.co_names), list(c.co_varnames),
            c.co_flags, c.co_filename]
def describe():
    out = {}
    for cls in CLASSES:
        methods = {}
        for name in ("__init__", "__repr__", "__eq__", "__lt__", "__hash__", "__setattr__",
                     "__delattr__"):
            f = cls.__dict__.get(name)
            if f is not None and hasattr(f, "__code__"):
                methods[name] = code_of(f) + [
                    {k: repr(v) for k, v in f.__annotations__.items()}, f.__qualname__]
        out[cls.__name__] = methods
    out["behaviour"] = [repr(Frozen(1)), Frozen(1) == Frozen(1), hash(Frozen(1)) == hash(Frozen(1)),
                        Ordered(1) < Ordered(2), repr(KeywordsOnly(a=3)), repr(Child(1, e=2)),
                        str(inspect.signature(Frozen.__init__))]
    try:
        Frozen(1).a = 2
    except dataclasses.FrozenInstanceError as e:
        out["frozen"] = str(e)
    return out
"""


def _run(cache: Path, body: str, *, write: bool = True) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    code = textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _classes(cache: Path, *, installed: bool, write: bool = True) -> dict:
    install = "from adapters.startup import dataclass_code\ndataclass_code.install()\n"
    report = ("from adapters.startup import dataclass_code as dc\n"
              "print(json.dumps({'classes': describe(), 'new': dc._state['new'], "
              "'file': str(dc.cache_file())}))\n")
    return _run(cache, "import json\n" + (install if installed else "") + SAMPLES + DESCRIBE
                + report, write=write)


def test_a_class_defined_through_the_cache_is_the_class_defined_without_it(tmp_path: Path) -> None:
    plain = _classes(tmp_path, installed=False)
    first = _classes(tmp_path, installed=True)  # compiled here, written at exit
    second = _classes(tmp_path, installed=True)  # from the file
    assert first["new"] > 10 and second["new"] == 0
    assert plain["classes"] == first["classes"] == second["classes"]
    # no ``from __future__ import annotations`` leaked in: annotations stay objects
    assert plain["classes"]["Frozen"]["__init__"][6]["a"] == "<class 'int'>"
    assert "cannot assign to field 'a'" in plain["classes"]["frozen"]


def test_the_domain_s_event_classes_come_from_the_file_in_the_next_process(tmp_path: Path) -> None:
    body = """
        import json
        from adapters.startup import dataclass_code as dc
        dc.install()
        import domain.message, domain.account, domain.mailbox, domain.rules
        print(json.dumps({"new": dc._state["new"], "used": len(dc._compiled),
                          "file": str(dc.cache_file())}))
    """
    first = _run(tmp_path, body)
    second = _run(tmp_path, body)
    assert first["new"] == first["used"] > 200  # every text compiled: no file yet
    assert second["new"] == 0 and second["used"] == first["used"]
    assert Path(second["file"]).is_relative_to(tmp_path)


def test_no_file_is_written_when_bytecode_writing_is_off(tmp_path: Path) -> None:
    out = _classes(tmp_path, installed=True, write=False)
    assert out["new"] > 10
    assert not Path(out["file"]).exists()
    assert _classes(tmp_path, installed=True)["new"] == out["new"]  # nothing was kept


@pytest.mark.parametrize("damage", [b"", b"garbage", "magic+truncated", "magic+not-a-dict"])
def test_a_damaged_cache_file_is_compiled_over(tmp_path: Path, damage: object) -> None:
    good = _classes(tmp_path, installed=True)
    path = Path(good["file"])
    data = path.read_bytes()
    if damage == "magic+truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "magic+not-a-dict":
        import marshal
        path.write_bytes(data[:4] + marshal.dumps(["not", "a", "dict"]))
    else:
        assert isinstance(damage, bytes)
        path.write_bytes(damage)
    again = _classes(tmp_path, installed=True)
    assert again["new"] == good["new"]  # compiled as without a file, and the file rewritten
    assert again["classes"] == good["classes"]
    assert _classes(tmp_path, installed=True)["new"] == 0


def test_a_cache_that_cannot_be_written_costs_nothing_but_the_compilation(tmp_path: Path) -> None:
    """A directory where the file would be (root writes anywhere): read and rename fail."""
    where = Path(_classes(tmp_path, installed=False)["file"])
    where.mkdir(parents=True)
    out = _classes(tmp_path, installed=True)
    assert out["new"] > 10 and where.is_dir() and not any(where.parent.glob("*.tmp"))


def test_a_command_line_the_command_server_runs_does_not_load_it() -> None:
    """The client of the command server (``adapters.cli``'s module, up to ``forward``)
    imports neither the cache nor ``dataclasses`` (~10 ms of the client's ~40)."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, adapters.cli; print(sorted(m for m in sys.modules "
         "if m in ('dataclasses', 'adapters.startup.dataclass_code')))"],
        capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_a_forked_child_leaves_the_file_to_its_parent(tmp_path: Path) -> None:
    """A command server's command is a fork that runs the exit handlers: it must not rewrite
    the file its parent will write (each command's end would cost a rewrite)."""
    out = _run(tmp_path, """
        import json, os, sys
        from adapters.startup import dataclass_code as dc
        dc.install()
        import domain.account  # something new to write
        pid = os.fork()
        if pid == 0:
            import atexit
            atexit._run_exitfuncs()  # as adapters.cli.leaving does
            os._exit(0 if not dc.cache_file().exists() else 3)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"child": os.waitstatus_to_exitcode(status), "new": dc._state["new"],
                          "file": str(dc.cache_file())}))
    """)
    assert out["child"] == 0 and out["new"] > 10
    assert Path(out["file"]).exists()  # the parent's own exit wrote it


def test_an_interpreter_without_bytecode_files_compiles_as_without_it(tmp_path: Path) -> None:
    out = _run(tmp_path, """
        import json, sys
        sys.implementation.cache_tag = None  # as an implementation that writes no .pyc
        from adapters.startup import dataclass_code as dc
        dc.install()
        import domain.account
        dc._save()
        print(json.dumps({"new": dc._state["new"], "file": dc.cache_file()}))
    """)
    assert out == {"new": out["new"], "file": None} and out["new"] > 10
    assert not list(tmp_path.rglob("dataclass-code.*"))
