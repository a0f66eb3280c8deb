"""Dovecot 2.3 as the peer users compare letterlog with (``bench ingest --peer dovecot``).

Debian's ``dovecot-core`` and ``dovecot-lmtpd``, configured in a work directory of its own:
a static userdb (every user name maps to one local system user, home under the work
directory), ``mdbox`` with ``mail_fsync = always`` (a delivery acknowledged after a power
loss survives, like letterlog's default), LMTP on a unix socket, and the master process
running (``doveadm`` asks its auth service for user lookups). Nothing listens on TCP.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import smtplib
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

from adapters.files.datadir import disk_bytes

from ._common import Handle, Launch, Program, Service, run_checked, terminate, wait_for
from .toolchain import apt_install

PACKAGES = ("dovecot-core", "dovecot-lmtpd", "dovecot-imapd")  # imapd: the side-by-side tests
CLIENTS = ("isync", "mutt", "tmux")  # the IMAP tests' real clients (mbsync, mutt under tmux)
SYSTEM_USER = "letterlog-mail"

CONFIG = """\
base_dir = {run}
state_dir = {state}
log_path = {log}
protocols = lmtp
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
default_internal_user = {user}
default_internal_group = {group}
default_login_user = {user}
first_valid_uid = {uid}
last_valid_uid = {uid}
first_valid_gid = {gid}
last_valid_gid = {gid}
mail_location = mdbox:{mail}/%n
mail_fsync = always
lmtp_save_to_detail_mailbox = no
passdb {{
  driver = static
  args = nopassword=y
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={home}/%n
}}
service lmtp {{
  unix_listener {lmtp} {{
    mode = 0666
  }}
}}
service anvil {{
  chroot =
}}
service stats {{
  unix_listener stats-reader {{
    mode = 0666
  }}
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
"""


IMAP_CONFIG = """\
protocols = lmtp imap
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
"""


def _dovecot() -> str | None:
    return shutil.which("dovecot") or (
        "/usr/sbin/dovecot" if Path("/usr/sbin/dovecot").exists() else None)


def _dovecot_lda() -> str | None:
    """Dovecot's local delivery agent (``dovecot-core`` ships it)."""
    for d in ("/usr/lib/dovecot", "/usr/libexec/dovecot"):
        if Path(d, "dovecot-lda").exists():
            return str(Path(d, "dovecot-lda"))
    return shutil.which("dovecot-lda")


def _lmtp_installed() -> bool:
    return any(Path(d, "lmtp").exists() for d in ("/usr/lib/dovecot", "/usr/libexec/dovecot"))


def ensure_system_user(name: str = SYSTEM_USER) -> pwd.struct_passwd:
    """The local system user Dovecot stores mail as (created with ``useradd`` if missing)."""
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(name)
    if os.geteuid() != 0:
        raise RuntimeError(f"dovecot: system user {name!r} is missing and only root can add it")
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    "--user-group", name], check=True, capture_output=True)
    return pwd.getpwnam(name)


class DovecotServer(Service):
    """Dovecot's master process with LMTP on a unix socket; ``doveadm`` runs against it."""

    private = False  # its own accounts walk through the work dir (modes set below)

    name = "dovecot"

    def __init__(self, *, imap_port: int | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.proc: Handle | None = None
        self.imap_port = imap_port  # IMAP on 127.0.0.1 too (the IMAP benchmark), any password

    # -- Service --------------------------------------------------------------------------
    def install(self) -> None:
        """``apt-get install dovecot-core dovecot-lmtpd dovecot-imapd`` unless all are there,
        and the IMAP tests' clients (``isync``, ``mutt``, ``tmux``) unless they are."""
        if (_dovecot() is None or shutil.which("doveadm") is None or not _lmtp_installed()
                or _dovecot_lda() is None or not Path("/usr/lib/dovecot/imap").exists()):
            apt_install(list(PACKAGES))
        if any(shutil.which(c) is None for c in ("mbsync", "mutt", "tmux")):
            apt_install(list(CLIENTS))
        if _dovecot() is None:
            raise self.fail("dovecot not found after apt-get install")

    @property
    def config(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "dovecot.conf"

    @property
    def lmtp_socket(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "run" / "lmtp"

    @property
    def mail_root(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "mail"

    @property
    def log_paths(self) -> list[Path]:
        if self.workdir is None:
            return []
        return [self.workdir / "dovecot.log", self.workdir / "master.out"]

    def prepare(self) -> None:
        assert self.workdir is not None
        user = ensure_system_user()
        group = grp.getgrgid(user.pw_gid).gr_name
        w = self.workdir
        os.chmod(w, 0o755)  # the mail user walks through it to its home and mail
        for d in ("run", "state", "mail", "home"):
            (w / d).mkdir(exist_ok=True)
        for d in ("mail", "home"):
            os.chown(w / d, user.pw_uid, user.pw_gid)
        self.config.write_text(CONFIG.format(
            run=w / "run", state=w / "state", log=w / "dovecot.log", user=user.pw_name,
            group=group, uid=user.pw_uid, gid=user.pw_gid, mail=w / "mail", home=w / "home",
            lmtp="lmtp") + (IMAP_CONFIG.format(port=self.imap_port) if self.imap_port else ""))

    def programs(self) -> list[Program]:
        assert self.workdir is not None
        return [Program("dovecot", (str(_dovecot()), "-F", "-c", str(self.config)),
                        cwd=self.workdir, log=self.workdir / "master.out", priority=50)]

    def bring_up(self, launch: Launch) -> None:
        [program] = self.programs()
        self.proc = launch(program)
        wait_for(self._probe, what="dovecot", timeout=self.startup_timeout,
                 log_paths=self.log_paths, procs=[self.proc], interval=0.1)

    def _probe(self) -> bool:
        """Ready when LMTP answers LHLO and the auth service resolves a user."""
        if not self.lmtp_socket.exists():
            return False
        with smtplib.LMTP(str(self.lmtp_socket)) as lmtp:
            code, _ = lmtp.ehlo("probe")
            if code != 250:
                return False
        result = subprocess.run(self.doveadm("user", "probe"), capture_output=True, timeout=30,
                                check=False)
        return result.returncode == 0

    def _stop(self) -> None:
        terminate(self.proc)  # type: ignore[arg-type]
        self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- what the benchmark does ----------------------------------------------------------
    def doveadm(self, *args: str) -> list[str]:
        return ["doveadm", "-c", str(self.config), *args]

    def import_mbox(self, mbox: Path, user: str) -> float:
        """Seconds of one ``doveadm import`` process copying every message of ``mbox`` into
        ``user``'s INBOX (start-up included)."""
        assert self.workdir is not None
        src = self.workdir / "import-src"
        src.mkdir(exist_ok=True)
        shutil.copyfile(mbox, src / "INBOX")
        mail_user = pwd.getpwnam(SYSTEM_USER)
        for p in (src, src / "INBOX"):
            os.chown(p, mail_user.pw_uid, mail_user.pw_gid)
        cmd = self.doveadm("import", "-u", user, f"mbox:{src}:INBOX={src / 'INBOX'}", "", "all")
        t0 = time.perf_counter()
        run_checked(cmd, what="doveadm import", log=self.workdir / "doveadm.out")
        return time.perf_counter() - t0

    def message_count(self, user: str, mailbox: str = "INBOX") -> int:
        out = subprocess.run(self.doveadm("mailbox", "status", "-u", user, "messages", mailbox),
                             capture_output=True, text=True, check=True, timeout=60).stdout
        return int(out.split("=", 1)[1])

    def deliver_lmtp(self, messages: Iterable[tuple[str, bytes]]) -> int:
        """LMTP deliveries over one connection, one message per transaction; each
        acknowledged only once stored (``mail_fsync = always``)."""
        n = 0
        with smtplib.LMTP(str(self.lmtp_socket)) as lmtp:
            lmtp.ehlo("letterlog-bench")
            for rcpt, raw in messages:
                lmtp.sendmail("bench@example.org", [rcpt], raw)
                n += 1
        return n

    def lda_command(self, recipient: str, sender: str) -> list[str]:
        """``dovecot-lda`` delivering standard input to ``recipient`` with this server's
        configuration: ``-d`` looks the user up in the running auth service's static userdb
        and drops to the mail user (run as root or as that user), ``-f`` the envelope
        sender. Exit 0: stored (``mail_fsync = always``)."""
        lda = _dovecot_lda()
        if lda is None:
            raise self.fail("dovecot-lda not found (Debian's dovecot-core ships it)")
        return [lda, "-c", str(self.config), "-d", recipient, "-f", sender]

    def user_bytes_on_disk(self, user: str) -> int:
        """Blocks allocated under ``user``'s mail directory (what ``du`` counts)."""
        return disk_bytes(self.mail_root / user)
