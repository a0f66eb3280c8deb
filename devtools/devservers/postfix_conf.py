"""The private Postfix instance's configuration (``postfix``): its packages, the test
domains, ``main.cf`` and ``master.cf`` as templates, the pipe(8) transport to ``letterlog
lda`` and the macros it hands over, and where Postfix's programs are.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

PACKAGES = ("postfix",)
#: debconf answer that installs the package without configuring a system instance
DEBCONF = "postfix postfix/main_mailer_type select No configuration\n"
SYSTEM_USER = "letterlog-mta"  # the pipe(8) command runs as this user (never root)
DOMAINS = ("example.org", "example.net")
PIPE_TRANSPORT = "letterlog"

#: the headers Postfix puts in front of a message, per delivery path, in order
ADDED_HEADERS = {"pipe": ("Received",), "lmtp": ("Received",)}

MAIN_CF = """\
# written by devtools/devservers/postfix.py -- a private test instance
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
# written by devtools/devservers/postfix.py -- a private test instance, nothing chrooted
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


def main_cf_with(main: str, lines: str) -> str:
    """``main`` (main.cf's text) with each ``name = value`` of ``lines`` set as ``postconf
    -e`` sets it: an entry of that name replaced where it stands (with its continuation
    lines), a new name appended. Appending a second entry instead makes every Postfix
    program warn "overriding earlier entry" as it starts; with ``maillog_file`` those
    warnings flood ``postlogd``'s socket, which then blocks on its own warning, and
    ``postfix reload`` hung behind it (120 s, after ``use_virtual``)."""
    out = main.splitlines()
    for line in lines.splitlines():
        name, eq, _ = line.partition("=")
        name = name.strip()
        if not eq or not name or line[:1].isspace() or name.startswith("#"):
            continue
        at = next((i for i, old in enumerate(out)
                   if not old[:1].isspace() and old.partition("=")[0].strip() == name), None)
        if at is None:
            out.append(line.strip())
            continue
        end = at + 1
        while end < len(out) and out[end][:1].isspace() and out[end].strip():
            end += 1
        out[at:end] = [line.strip()]
    return "\n".join(out) + "\n"


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
