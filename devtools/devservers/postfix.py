"""Postfix 3.7 as the real MTA in front of letterlog's two delivery paths.

A private instance, nothing of the system's own (``/etc/postfix`` is neither read nor
written): ``main.cf`` and ``master.cf`` in ``WORKDIR/conf``, the queue in ``WORKDIR/queue``,
``data_directory`` in ``WORKDIR/data``, the log in ``WORKDIR/maillog`` (``maillog_file`` and the
``postlog`` service: no syslog), smtpd on ``127.0.0.1:PORT`` only. Mail for the test domains
(``example.org``, ``example.net``) goes to one of two transports, chosen with
``use_pipe(data_dir)`` or ``use_lmtp(target)`` (both rewrite the configuration and
``postfix reload``):

- pipe(8) -> ``letterlog --data DIR lda ...`` as the system user ``letterlog-mta``, one
  recipient per command (``letterlog_destination_recipient_limit = 1``), ``flags=q``: no
  ``From `` line (F), no ``Return-Path`` (R), ``Delivered-To`` (D) or ``X-Original-To`` (O),
  so both paths hand letterlog the same bytes (``lda --envelope-headers`` and
  ``lmtp --envelope-headers`` add Return-Path and Delivered-To themselves, alike);
- LMTP -> ``lmtp:inet:127.0.0.1:PORT`` or ``lmtp:unix:PATH`` (a ``letterlog lmtp`` the caller
  runs).

Postfix changes nothing else in a message: no header rewriting for SMTP clients
(``local_header_rewrite_clients =``), no headers dropped (``message_drop_headers =``), no
MIME conversion or line folding on LMTP output. What it adds is one ``Received:`` header in
front, on both paths (``ADDED_HEADERS``); the pipe hands the message over with LF line ends,
LMTP with CRLF.

The long-running program is Postfix's ``master`` itself (``master -c DIR -s``, what
``postfix -c DIR start-fg`` runs after its checks, which ``prepare()`` runs as
``postfix -c DIR check``). ``start-fg`` keeps a shell as the parent and the master in a
session of its own, so a SIGTERM to the launched process group (our ``terminate``,
supervisord's ``stopasgroup``) would leave the master running; started directly, the master
is the launched process and passes SIGTERM on to its children.

As root, ``postqueue -c DIR`` / ``postsuper -c DIR`` accept a config directory that no default
``main.cf`` lists in ``alternate_config_directories``: no ``/etc/postfix/main.cf`` is needed.

The configuration's templates are ``postfix_conf``'s; letting the pipe user run letterlog is
``pipeuser``'s (their names importable from here).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import smtplib
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ._common import (
    LOCALHOST,
    Handle,
    Launch,
    Program,
    Service,
    ServiceFailed,
    free_port,
    run_checked,
    terminate,
    wait_for,
)
from .dovecot import ensure_system_user
from .pipeuser import grant_letterlog_to, letterlog_program
from .postfix_conf import (
    ADDED_HEADERS,
    DEBCONF,
    DOMAINS,
    LDA_MACROS,
    MAIN_CF,
    MASTER_CF,
    PACKAGES,
    PIPE_ENTRY,
    PIPE_MAIN,
    PIPE_TRANSPORT,
    SYSTEM_USER,
    _pipe_quote,
    _postfix,
    daemon_directory,
    main_cf_with,
)
from .smtp import submit
from .toolchain import apt_install

__all__ = ["ADDED_HEADERS", "DOMAINS", "LDA_MACROS", "PostfixServer", "SYSTEM_USER",
           "grant_letterlog_to", "letterlog_program"]

_QUEUED_RE = re.compile(rb"queued as ([0-9A-Za-z]+)")


class PostfixServer(Service):
    """A private Postfix: smtpd on ``127.0.0.1:port``, test domains delivered to letterlog.

    Until ``use_pipe`` or ``use_lmtp`` is called, mail for the test domains is deferred
    (``local_transport = retry:...``).
    """

    private = False  # its own accounts walk through the work dir (modes set below)

    name = "postfix"

    def __init__(self, *, domains: Sequence[str] = DOMAINS, long_queue_ids: bool = True,
                 host: str = LOCALHOST, port: int | None = None, netns: str | None = None,
                 **kwargs: Any) -> None:
        """``netns``: the master (so smtpd and every delivery agent, the lda among them)
        runs in that network namespace, smtpd on ``host:port`` there (a host of its own)."""
        super().__init__(**kwargs)
        self.domains = tuple(domains)
        self.long_queue_ids = long_queue_ids
        self.host = host
        self.netns = netns
        self._fixed_port = port
        self.port: int | None = None
        self.proc: Handle | None = None
        self.transport = "none"
        self._local_transport = "retry:4.3.0 no letterlog delivery configured yet"
        self._pipe_argv: list[str] | None = None
        self._lmtp_chroot = False
        self._extra_main = ""  # main.cf lines after the rest (use_virtual)

    @property
    def _inside(self) -> tuple[str, ...]:
        """The prefix that runs a Postfix command in its network namespace (its checks read
        ``inet_interfaces``, an address only that namespace has)."""
        return ("ip", "netns", "exec", self.netns) if self.netns else ()

    # -- Service --------------------------------------------------------------------------
    def install(self) -> None:
        """``apt-get install postfix`` (debconf: "No configuration") unless it is there."""
        if _postfix() is None or shutil.which("postqueue") is None:
            if shutil.which("debconf-set-selections"):
                subprocess.run(["debconf-set-selections"], input=DEBCONF.encode(),
                               check=True, capture_output=True, timeout=60)
            apt_install(list(PACKAGES))
        if _postfix() is None:
            raise self.fail("postfix not found after apt-get install")

    @property
    def config_dir(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "conf"

    @property
    def queue_dir(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "queue"

    @property
    def maillog(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "maillog"

    @property
    def store_root(self) -> Path:
        """Where stores the pipe user can reach go (``new_store``)."""
        assert self.workdir is not None
        return self.workdir / "stores"

    @property
    def log_paths(self) -> list[Path]:
        if self.workdir is None:
            return []
        return [self.workdir / "maillog", self.workdir / "master.out",
                self.workdir / "commands.out"]

    def prepare(self) -> None:
        assert self.workdir is not None
        w = self.workdir
        os.chmod(w, 0o755)  # postfix and the pipe user walk through it
        mta = ensure_system_user(SYSTEM_USER)
        postfix_user = pwd.getpwnam("postfix")
        for d in ("conf", "queue", "data", "stores"):
            (w / d).mkdir(exist_ok=True)
        os.chown(w / "data", postfix_user.pw_uid, postfix_user.pw_gid)
        os.chown(w / "stores", mta.pw_uid, mta.pw_gid)
        grant_letterlog_to(SYSTEM_USER)
        # a namespace of its own is empty: its port is free (no probe from out here)
        self.port = self._fixed_port or (2525 if self.netns else free_port(self.host))
        self._write_config()
        # what `postfix start-fg` checks first; creates the queue directories
        self._postfix("check")

    def programs(self) -> list[Program]:
        assert self.workdir is not None
        master = daemon_directory() / "master"
        return [Program("postfix", (*self._inside, str(master), "-c", str(self.config_dir), "-s"),
                        cwd=self.workdir, log=self.workdir / "master.out", priority=50)]

    def bring_up(self, launch: Launch) -> None:
        [program] = self.programs()
        self.proc = launch(program)
        wait_for(self._probe, what="postfix", timeout=self.startup_timeout,
                 log_paths=self.log_paths, procs=[self.proc], interval=0.1)

    def _probe(self) -> bool:
        """Ready when smtpd answers EHLO with 250."""
        assert self.port is not None
        with smtplib.SMTP(self.host, self.port, timeout=10) as smtp:
            code, _ = smtp.ehlo("probe.letterlog.test")
            return code == 250

    def _stop(self) -> None:
        terminate(self.proc)  # type: ignore[arg-type]
        self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- configuration --------------------------------------------------------------------
    def _write_config(self) -> None:
        assert self.workdir is not None and self.port is not None
        w = self.workdir
        main = MAIN_CF.format(
            queue=w / "queue", data=w / "data", maillog=self.maillog, workdir=w,
            host=self.host, domains=", ".join(self.domains),
            long_ids="yes" if self.long_queue_ids else "no",
            local_transport=self._local_transport)
        master = MASTER_CF.format(host=self.host, port=self.port,
                                  lmtp_chroot="y" if self._lmtp_chroot else "n")
        if self._pipe_argv is not None:
            main += PIPE_MAIN.format(transport=PIPE_TRANSPORT)
            master += PIPE_ENTRY.format(transport=PIPE_TRANSPORT, user=SYSTEM_USER,
                                        argv=" ".join(_pipe_quote(a) for a in self._pipe_argv))
        if self._extra_main:  # set as ``postconf -e`` does: one entry per name
            main = main_cf_with(main, self._extra_main)
        (self.config_dir / "main.cf").write_text(main)
        (self.config_dir / "master.cf").write_text(master)

    def lda_argv(self, data_dir: Path, *, timeout: float | None = None,
                 extra: Sequence[str] = ()) -> list[str]:
        """The pipe command: ``letterlog --data DIR lda --recipient=${recipient} ...``."""
        argv = [str(letterlog_program()), f"--data={data_dir}", "lda", *LDA_MACROS]
        if timeout is not None:
            argv.append(f"--timeout={timeout:g}")
        return argv + list(extra)

    def use_pipe(self, data_dir: Path, *, timeout: float | None = None,
                 extra: Sequence[str] = (), argv: Sequence[str] | None = None) -> None:
        """Deliver the test domains through pipe(8) to ``letterlog --data DATA_DIR lda``
        (or ``argv``) as ``letterlog-mta``; ``postfix reload``."""
        self._pipe_argv = list(argv) if argv is not None else self.lda_argv(
            data_dir, timeout=timeout, extra=extra)
        self._lmtp_chroot = False
        self._extra_main = ""
        self._local_transport = f"{PIPE_TRANSPORT}:"
        self.transport = "pipe"
        self.reload()

    def use_lmtp(self, target: str, *, chroot: bool = False) -> None:
        """Deliver the test domains over LMTP to ``target`` (``inet:127.0.0.1:PORT`` or
        ``unix:/path``; with ``chroot``, lmtp(8) runs chrooted in the queue directory, as
        Debian's default master.cf has it, and ``unix:letterlog/lmtp.sock`` is
        ``queue_dir/letterlog/lmtp.sock``); ``postfix reload``."""
        self._pipe_argv = None
        self._lmtp_chroot = chroot
        self._extra_main = ""
        self._local_transport = f"lmtp:{target}"
        self.transport = "lmtp"
        self.reload()

    def use_virtual(self, main_lines: str, mailboxes: str) -> Path:
        """The test domains as *virtual mailbox domains* (no longer in ``mydestination``):
        ``main_lines`` (main.cf settings naming ``virtual_transport``; the transport the
        last ``use_pipe`` or ``use_lmtp`` set up stays in master.cf) after the rest, and
        ``mailboxes`` (a ``virtual_mailbox_maps`` table's text) written to a file in the
        config directory, whose path replaces ``/etc/postfix/letterlog-mailboxes`` in the
        lines; ``postfix reload``. Returns the table's path."""
        table = self.config_dir / "letterlog-mailboxes"
        table.write_text(mailboxes)
        lines = main_lines.replace("/etc/postfix/letterlog-mailboxes", str(table))
        self._extra_main = f"mydestination = $myhostname, localhost\n{lines.strip()}\n"
        self.reload()
        return table

    def reload(self) -> None:
        """Rewrite main.cf/master.cf, ``postfix reload``, and wait until the master logged
        it and smtpd answers again."""
        before = self._count_in_log("daemon started") + self._count_in_log("reload --")
        self._write_config()
        for attempt in range(3):  # a reload the master did not log in 10 s is asked again
            self._postfix("reload")
            try:
                wait_for(lambda: self._count_in_log("daemon started")
                         + self._count_in_log("reload --") > before,
                         what="postfix reload", timeout=10, log_paths=self.log_paths,
                         interval=0.05)
                break
            except ServiceFailed:
                if attempt == 2:
                    raise
        wait_for(self._probe, what="postfix after reload", timeout=30,
                 log_paths=self.log_paths, interval=0.05)

    def _count_in_log(self, needle: str) -> int:
        try:
            return self.maillog.read_text(errors="replace").count(needle)
        except OSError:
            return 0

    # -- commands -------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        return dict(os.environ, MAIL_CONFIG=str(self.config_dir))

    def _postfix(self, *args: str) -> None:
        assert self.workdir is not None
        run_checked([*self._inside, str(_postfix()), "-c", str(self.config_dir), *args],
                    what=f"postfix {' '.join(args)}", log=self.workdir / "commands.out",
                    env=self._env(), timeout=120)

    def postqueue(self, *args: str) -> str:
        result = subprocess.run([*self._inside, "postqueue", "-c", str(self.config_dir), *args],
                                capture_output=True, text=True, timeout=60, check=False,
                                env=self._env())
        if result.returncode != 0:
            raise self.fail(f"postqueue {' '.join(args)} exited with {result.returncode}: "
                            f"{result.stderr.strip()}")
        return result.stdout

    def queue(self) -> list[dict[str, Any]]:
        """Every queued message (``postqueue -j``): queue_name, queue_id, sender,
        recipients (address, delay_reason), ..."""
        return [json.loads(line) for line in self.postqueue("-j").splitlines() if line.strip()]

    def flush(self) -> None:
        """``postqueue -f``: retry every queued message now (back-off timers ignored)."""
        self.postqueue("-f")

    def delete_all(self) -> None:
        """``postsuper -d ALL``: empty the queue."""
        subprocess.run([*self._inside, "postsuper", "-c", str(self.config_dir), "-d", "ALL"],
                       capture_output=True, timeout=60, check=False, env=self._env())

    # -- sending --------------------------------------------------------------------------
    def send(self, sender: str, recipients: Sequence[str], raw: bytes) -> str:
        """One SMTP transaction to smtpd (``smtp.submit``); returns the queue id Postfix
        answered with."""
        assert self.port is not None
        resp = submit(self.host, self.port, sender, recipients, raw)
        m = _QUEUED_RE.search(resp)
        if not m:
            raise self.fail(f"no queue id in smtpd's answer {resp!r}")
        return m.group(1).decode()

    # -- waiting --------------------------------------------------------------------------
    def log_mark(self) -> int:
        """The maillog's current size: hand it to ``log_since`` to read what came after."""
        try:
            return self.maillog.stat().st_size
        except OSError:
            return 0

    def log_since(self, mark: int = 0) -> str:
        try:
            with open(self.maillog, "rb") as fh:
                fh.seek(mark)
                return fh.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def wait_log(self, pattern: str | re.Pattern[str], *, since: int = 0,
                 timeout: float = 60.0) -> re.Match[str]:
        """The first match of ``pattern`` in the maillog after ``since``, waited for."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        found: re.Match[str] = wait_for(
            lambda: rx.search(self.log_since(since)), what=f"maillog {rx.pattern}",
            timeout=timeout, log_paths=self.log_paths, interval=0.05)
        return found

    def wait_queue_empty(self, *, timeout: float = 60.0) -> None:
        wait_for(lambda: not self.queue(), what="postfix queue empty", timeout=timeout,
                 log_paths=self.log_paths, interval=0.1)

    def wait_deferred(self, queue_ids: Iterable[str], *,
                      timeout: float = 60.0) -> dict[str, dict[str, Any]]:
        """Wait until each of ``queue_ids`` sits in the deferred queue with a delay reason
        for every recipient; returns their ``postqueue -j`` entries by queue id."""
        wanted = set(queue_ids)

        def probe() -> dict[str, dict[str, Any]] | None:
            found = {e["queue_id"]: e for e in self.queue()
                     if e["queue_id"] in wanted and e["queue_name"] == "deferred"
                     and all(r.get("delay_reason") for r in e["recipients"])}
            return found if set(found) == wanted else None

        deferred: dict[str, dict[str, Any]] = wait_for(
            probe, what=f"deferred {sorted(wanted)}", timeout=timeout,
            log_paths=self.log_paths, interval=0.05)
        return deferred

    def statuses(self, queue_id: str, *, since: int = 0) -> list[dict[str, str]]:
        """The delivery status lines of ``queue_id`` in the maillog after ``since``:
        to, relay, dsn, status, text."""
        rx = re.compile(rf"\b{re.escape(queue_id)}: to=<(?P<to>[^>]*)>,.*?relay=(?P<relay>[^,]*),"
                        r".*?dsn=(?P<dsn>[0-9.]+), status=(?P<status>\w+) \((?P<text>.*)\)$",
                        re.MULTILINE)
        return [m.groupdict() for m in rx.finditer(self.log_since(since))]

