"""The IMAP server's test tools: Dovecot's imaptest (the IMAP conformance and stress
tester), built once and cached, and real clients: ``mbsync`` (Debian's ``isync``), and
``mutt`` driven under ``tmux``.

The source and its build script come with the project's shared files
(``shared/imaptest/build.sh`` beside the checkout, or ``LETTERLOG_IMAPTEST_SOURCE``): the build
installs ``dovecot-dev`` and the C tool chain with apt when missing and takes about half a
minute; the result is kept in ``<cache>/imaptest-<hash of the build script and archive>``,
so later runs start at once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ._common import ServiceFailed, cache_dir
from .toolchain import apt_install

LIBRARY_PATH = "/usr/lib/dovecot"


def source_dir() -> Path:
    given = os.environ.get("LETTERLOG_IMAPTEST_SOURCE")
    if given:
        return Path(given)
    return Path(__file__).resolve().parents[3] / "shared" / "imaptest"


def install_imaptest() -> Path:
    """The imaptest binary's directory (``src/``: ``imaptest`` and the scripted ``tests``)."""
    source = source_dir()
    script = source / "build.sh"
    if not script.exists():
        raise ServiceFailed(f"imaptest: no build script at {script}")
    digest = hashlib.sha256()
    for path in sorted(source.iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    target = cache_dir() / f"imaptest-{digest.hexdigest()[:12]}"
    binary = target / "imaptest" / "src" / "imaptest"
    if binary.exists():
        return binary.parent
    work = Path(tempfile.mkdtemp(prefix="imaptest-", dir=cache_dir()))
    try:
        done = subprocess.run(["bash", str(script), str(work)], capture_output=True,
                              text=True, timeout=900)
        if done.returncode != 0 or not (work / "imaptest" / "src" / "imaptest").exists():
            raise ServiceFailed(f"imaptest: the build failed ({done.returncode}): "
                                f"{(done.stderr or done.stdout)[-2000:]}")
        shutil.rmtree(target, ignore_errors=True)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary.parent


def install_mbsync() -> str:
    """The ``mbsync`` command, installed with apt (Debian's ``isync``) when missing."""
    found = shutil.which("mbsync")
    if found is None:
        apt_install(["isync"])
        found = shutil.which("mbsync")
    if found is None:
        raise ServiceFailed("mbsync not found after apt-get install isync")
    return found


def install_mutt() -> tuple[str, str]:
    """The ``mutt`` and ``tmux`` commands, installed with apt when missing (``make
    install-servers`` installs them with Dovecot's IMAP server)."""
    missing = [p for p in ("mutt", "tmux") if shutil.which(p) is None]
    if missing:
        apt_install(missing)
    mutt, tmux = shutil.which("mutt"), shutil.which("tmux")
    if mutt is None or tmux is None:
        raise ServiceFailed("mutt or tmux not found after apt-get install mutt tmux")
    return mutt, tmux
