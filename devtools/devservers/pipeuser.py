"""Letting the pipe(8) user (a system user, never root) run this environment's
``letterlog``: passage granted, with one POSIX ACL entry each, through the directories it
may not enter.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from ._common import ServiceFailed
from .toolchain import apt_install


def letterlog_program() -> Path:
    """The ``letterlog`` console script of the running interpreter's environment."""
    return Path(sys.prefix) / "bin" / "letterlog"


def _can_run_as(user: str, argv: Sequence[str]) -> bool:
    account = pwd.getpwnam(user)
    try:
        return subprocess.run(list(argv), user=account.pw_uid, group=account.pw_gid,
                              extra_groups=[], capture_output=True, timeout=120,
                              check=False, cwd="/").returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _blocked_dirs(user: str, paths: Iterable[Path]) -> list[Path]:
    """Directories above ``paths`` that ``user`` may not enter (mode bits only)."""
    account = pwd.getpwnam(user)
    blocked: list[Path] = []
    for path in paths:
        for d in [*reversed(Path(path).parents), Path(path)]:
            try:
                st = d.stat()
            except OSError:
                break
            if not stat.S_ISDIR(st.st_mode):
                continue
            if st.st_uid == account.pw_uid:
                ok = st.st_mode & stat.S_IXUSR
            elif st.st_gid == account.pw_gid:
                ok = st.st_mode & stat.S_IXGRP
            else:
                ok = st.st_mode & stat.S_IXOTH
            if not ok and d not in blocked:
                blocked.append(d)
    return blocked


def grant_letterlog_to(user: str) -> None:
    """Make sure ``user`` can run this environment's ``letterlog``.

    On our machines the interpreter lives under ``/root`` (mode 0700), which the pipe user may
    not enter. Then each such directory gets one POSIX ACL entry, ``u:USER:--x``: that user
    (and no one else) may pass through it, not list it; the checkout itself, which Python's
    import system lists, ``u:USER:r-x`` when that user may not read it. ``acl`` (setfacl) is
    installed with apt if missing. Nothing is changed when the user can run the program already.
    """
    program = letterlog_program()
    probe = [str(program), "--help"]
    if _can_run_as(user, probe):
        return
    import adapters

    needed = [Path(os.path.realpath(sys.executable)), program,
              Path(adapters.__file__).resolve().parent]
    blocked = _blocked_dirs(user, needed)
    # the checkout (on sys.path through the editable install) is listed by Python's import
    # system: in a private directory (a mktemp -d clone, 0700) passage alone finds nothing
    checkout = Path(adapters.__file__).resolve().parent.parent
    listable = _can_run_as(user, ["test", "-r", str(checkout)])
    if blocked or not listable:
        if shutil.which("setfacl") is None:
            apt_install(["acl"])
        for d in blocked:
            subprocess.run(["setfacl", "-m", f"u:{user}:x", str(d)], check=True,
                           capture_output=True, timeout=30)
        if not listable:
            subprocess.run(["setfacl", "-m", f"u:{user}:rx", str(checkout)], check=True,
                           capture_output=True, timeout=30)
    if not _can_run_as(user, probe):
        raise ServiceFailed(
            f"postfix: the pipe user {user!r} cannot run {program} "
            f"(granted passage through {[str(d) for d in blocked]}; still failing)")
