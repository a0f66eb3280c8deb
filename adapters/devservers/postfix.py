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
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import smtplib
import stat
import subprocess
import sys
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
from .toolchain import apt_install

PACKAGES = ("postfix",)
#: debconf answer that installs the package without configuring a system instance
DEBCONF = "postfix postfix/main_mailer_type select No configuration\n"
SYSTEM_USER = "letterlog-mta"  # the pipe(8) command runs as this user (never root)
DOMAINS = ("example.org", "example.net")
PIPE_TRANSPORT = "letterlog"

#: the headers Postfix puts in front of a message, per delivery path, in order
ADDED_HEADERS = {"pipe": ("Received",), "lmtp": ("Received",)}

MAIN_CF = """\
# written by adapters/devservers/postfix.py -- a private test instance
compatibility_level = 3.6
queue_directory = {queue}
data_directory = {data}
mail_owner = postfix
setgid_group = postdrop
maillog_file = {maillog}
maillog_file_prefixes = {workdir}
inet_interfaces = {host}
inet_protocols = ipv4
myhostname = mta.letterlog.test
mydomain = letterlog.test
myorigin = $myhostname
mydestination = {domains}
mynetworks = 127.0.0.0/8
relayhost =
smtp_dns_support_level = disabled
biff = no
enable_long_queue_ids = {long_ids}
recipient_delimiter = +
local_recipient_maps =
alias_maps =
alias_database =
# the message stays as the client sent it
local_header_rewrite_clients =
message_drop_headers =
always_add_missing_headers = no
disable_mime_output_conversion = yes
lmtp_line_length_limit = 0
# the LMTP server keeps the queue id with the message (XFORWARD IDENT: docs/mta.md)
lmtp_send_xforward_command = yes
header_size_limit = 1048576
message_size_limit = 52428800
# a deferred message waits for `postqueue -f` (which ignores back-off times): with back-off
# times of a second or two, qmgr picked a deferred message up again while the delivery agent
# still had its queue file locked, and parked it in the incoming queue for 60 s
queue_run_delay = 1s
minimal_backoff_time = 600s
maximal_backoff_time = 600s
delay_warning_time = 0
# where mail for the test domains goes
local_transport = {local_transport}
"""

MASTER_CF = """\
# written by adapters/devservers/postfix.py -- a private test instance, nothing chrooted
# but lmtp when asked (use_lmtp(..., chroot=True): Debian's default master.cf chroots it)
{host}:{port} inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
lmtp      unix  -       -       {lmtp_chroot}       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
"""

PIPE_MAIN = """\
{transport}_destination_recipient_limit = 1
{transport}_time_limit = 120s
"""

PIPE_ENTRY = """\
{transport} unix - n n - - pipe
  flags=q user={user} null_sender= argv={argv}
"""

#: the pipe(8) macros handed to ``letterlog lda`` (each one argument per recipient)
LDA_MACROS = (
    "--recipient=${recipient}",
    "--original-recipient=${original_recipient}",
    "--sender=${sender}",
    "--queue-id=${queue_id}",
)

_QUEUED_RE = re.compile(rb"queued as ([0-9A-Za-z]+)")
_EOL_RE = re.compile(rb"\r\n|\r|\n")


def _postfix() -> str | None:
    return shutil.which("postfix") or (
        "/usr/sbin/postfix" if Path("/usr/sbin/postfix").exists() else None)


def _pipe_quote(arg: str) -> str:
    """One pipe(8) argv element: ``{ ... }`` around one with white space (Postfix 3.0+)."""
    if arg and not any(c.isspace() for c in arg) and not arg.startswith("{"):
        return arg
    if "}" in arg or arg != arg.strip():
        raise ValueError(f"cannot quote {arg!r} for pipe(8)")
    return "{" + arg + "}"


def daemon_directory() -> Path:
    out = subprocess.run(["postconf", "-d", "-h", "daemon_directory"], capture_output=True,
                         text=True, timeout=30, check=True).stdout.strip()
    return Path(out or "/usr/lib/postfix/sbin")


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
        if self._extra_main:
            main += "# virtual users (use_virtual)\n" + self._extra_main
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
        """One SMTP transaction to smtpd; returns the queue id Postfix answered with.

        Line ends are made CRLF first, as SMTP wants (smtplib sends bytes as they are: a bare
        LF message would gain an empty last line from the CRLF smtplib ends it with)."""
        assert self.port is not None
        raw = _EOL_RE.sub(b"\r\n", raw)
        eight_bit = any(b > 0x7F for b in raw)
        with smtplib.SMTP(self.host, self.port, timeout=60) as smtp:
            smtp.ehlo("client.letterlog.test")
            code, resp = smtp.mail(sender, ["BODY=8BITMIME"] if eight_bit else [])
            if code != 250:
                raise smtplib.SMTPSenderRefused(code, resp, sender)
            for rcpt in recipients:
                code, resp = smtp.rcpt(rcpt)
                if code not in (250, 251):
                    raise smtplib.SMTPRecipientsRefused({rcpt: (code, resp)})
            code, resp = smtp.data(raw)
            if code != 250:
                raise smtplib.SMTPDataError(code, resp)
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

