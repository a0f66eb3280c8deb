/* letterlog-lda: `letterlog` for an lda command line, at the cost of a C program's start.

   Run with letterlog's own arguments (`letterlog-lda --data DIR lda --recipient ADDR ...`),
   it does what adapters/startup/handoff.py does before Python imports anything else: it
   hands the message on standard input to the data directory's running `letterlog lmtp`
   over DATA/lda.sock (ADR 0060), and exits with the server's answer as lda's exit status
   and line. Whenever it is not sure the server delivers exactly as `letterlog lda` would
   (a command line it does not take, --json, run as root, no server, a refusal), it has
   read nothing from standard input and becomes `letterlog` with the same arguments (execv
   of the `letterlog` beside it): the full lda, with every option and answer of its own.
   ADR 0087 says why a compiled client; the protocol is documented in handoff.py, and the
   two are kept in step by tests/e2e/test_mta_lda_client.py (the same cases through both).

   Build: cc -O2 -o .venv/bin/letterlog-lda adapters/startup/lda_client.c (`make venv`). */

#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define VERSION "2"             /* handoff.VERSION */
#define GRACE 10.0              /* handoff.GRACE */
#define HEADER_LIMIT (1 << 16)  /* handoff.HEADER_LIMIT */
#define CHUNK (1 << 16)         /* handoff.CHUNK */
#define REQUEST_MAX (1 << 16)

extern char **environ;

static char **given_argv;

/* Becomes `letterlog` with this process's arguments: nothing was read from standard input,
   nothing was sent. Only if that cannot start: the broken installation's 75. */
static int fall_back(void) {
    char self[PATH_MAX], target[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL) {
            *slash = '\0';
            snprintf(target, sizeof target, "%s/letterlog", self);
            given_argv[0] = target;
            execv(target, given_argv);
        }
    }
    dprintf(2, "4.3.5 letterlog cannot start: letterlog-lda found no letterlog beside it "
               "(%s); try again later\n", strerror(errno));
    return 75;
}

/* lda's answer: a failure's line on stderr (Postfix's DSN), a success's on stdout. */
static int answer(int status, const char *line) {
    dprintf(status ? 2 : 1, "%s\n", line);
    return status;
}

static const char *const values[][2] = {
    {"--recipient", "recipient"}, {"--sender", "sender"},
    {"--original-recipient", "original_recipient"}, {"--queue-id", "queue_id"},
    {"--mailbox", "mailbox"}, {"--recipient-delimiter", "recipient_delimiter"},
    {"--timeout", "timeout"}};
static const char *const flags[][2] = {
    {"--detail-mailbox", "detail_mailbox"}, {"--accounts-must-exist", "accounts_must_exist"},
    {"--envelope-headers", "envelope_headers"}};
#define NVALUES (sizeof values / sizeof values[0])
#define NFLAGS (sizeof flags / sizeof flags[0])
static const char *const ignored[] = {  /* handoff.IGNORED_SETTINGS */
    "LETTERLOG_DATA", "LETTERLOG_ACCOUNTS_MUST_EXIST", "LETTERLOG_LOCK_TIMEOUT",
    "LETTERLOG_METRICS_PORT", "LETTERLOG_STREAM_INSTANCE", "LETTERLOG_SYSLOG_SOCKET"};

struct request {
    const char *value[NVALUES];
    int flag[NFLAGS];
    const char *data;
};

static int one_of(const char *word, const char *const *set, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(word, set[i]) == 0)
            return 1;
    return 0;
}

/* The request of an lda command line, as handoff.parse reads it; 0 for a line to leave to
   letterlog (and for --json: its JSON answer is letterlog's to write). */
static int parse(int argc, char **argv, struct request *r) {
    int command = 0;
    memset(r, 0, sizeof *r);
    for (int i = 1; i < argc; i++) {
        const char *word = argv[i];
        const char *eq = strchr(word, '=');
        size_t name_len = eq ? (size_t)(eq - word) : strlen(word);
        if (strcmp(word, "--json") == 0)
            return 0;
        if (strcmp(word, "--bytes") == 0)
            continue;
        if (!command) {
            if (strcmp(word, "lda") == 0) {
                command = 1;
            } else if (name_len == 6 && strncmp(word, "--data", 6) == 0) {
                if (eq) r->data = eq + 1;
                else if (++i < argc) r->data = argv[i];
                else return 0;
            } else {
                return 0;
            }
            continue;
        }
        int known = 0;
        for (size_t f = 0; f < NFLAGS && !known; f++)
            if (strcmp(word, flags[f][0]) == 0)
                r->flag[f] = known = 1;
        for (size_t v = 0; v < NVALUES && !known; v++) {
            if (strlen(values[v][0]) == name_len && strncmp(word, values[v][0], name_len) == 0) {
                if (eq) r->value[v] = eq + 1;
                else if (++i < argc) r->value[v] = argv[i];
                else return 0;
                known = 1;
            }
        }
        if (!known)
            return 0;
    }
    if (!command || r->value[0] == NULL)
        return 0;
    const char *timeout = r->value[6];
    if (timeout != NULL) {  /* plain decimals only; anything else is letterlog's to judge */
        char *end;
        if (!*timeout || strspn(timeout, "0123456789.") != strlen(timeout))
            return 0;
        double t = strtod(timeout, &end);
        if (*end || !(t >= 1.0))
            return 0;
    }
    return 1;
}

static int append(char *buf, size_t *at, const char *key, const char *value) {
    if (strchr(value, '\x01') != NULL)  /* the separator below: letterlog sends that one */
        return 0;
    int n = snprintf(buf + *at, REQUEST_MAX - *at, "%s%s=%s", *at ? "\x01" : "", key, value);
    if (n < 0 || (size_t)n >= REQUEST_MAX - *at)
        return 0;
    *at += (size_t)n;
    return 1;
}

static int by_string(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The LETTERLOG_* variables that shape a delivery, sorted, one per line (as
   handoff.settings_environment); 0 if one is not plain ASCII (letterlog compares it). */
static int settings(char *out, size_t size) {
    const char *found[512];
    size_t n = 0, at = 0;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "LETTERLOG_", 10) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (eq == NULL)
            continue;
        char name[256];
        size_t len = (size_t)(eq - *e);
        if (len >= sizeof name)
            return 0;
        memcpy(name, *e, len);
        name[len] = '\0';
        if (one_of(name, ignored, sizeof ignored / sizeof ignored[0]))
            continue;
        for (const unsigned char *c = (const unsigned char *)*e; *c; c++)
            if (*c >= 0x80)
                return 0;
        if (n == sizeof found / sizeof found[0])
            return 0;
        found[n++] = *e;
    }
    qsort(found, n, sizeof found[0], by_string);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(out + at, size - at, "%s%s", i ? "\n" : "", found[i]);
        if (w < 0 || (size_t)w >= size - at)
            return 0;
        at += (size_t)w;
    }
    return 1;
}

static int truthy(const char *given, int *out) {
    char word[8];
    size_t len;
    while (*given == ' ' || *given == '\t' || *given == '\n' || *given == '\r'
           || *given == '\f' || *given == '\v')
        given++;
    len = strlen(given);
    while (len && strchr(" \t\n\r\f\v", given[len - 1]))
        len--;
    if (len >= sizeof word)
        return 0;
    for (size_t i = 0; i < len; i++)
        word[i] = (char)((given[i] >= 'A' && given[i] <= 'Z') ? given[i] + 32 : given[i]);
    word[len] = '\0';
    static const char *const yes[] = {"1", "true", "t", "yes", "y", "on"};
    static const char *const no[] = {"0", "false", "f", "no", "n", "off", ""};
    if (one_of(word, yes, 6)) *out = 1;
    else if (one_of(word, no, 7)) *out = 0;
    else return 0;
    return 1;
}

static void set_timeout(int sock, double seconds) {
    struct timeval tv = {(time_t)seconds, (suseconds_t)((seconds - (time_t)seconds) * 1e6)};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int send_all(int sock, const void *buf, size_t len) {
    const char *p = buf;
    while (len) {
        ssize_t n = send(sock, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int send_frame(int sock, const void *payload, size_t len) {
    unsigned char head[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16),
                             (unsigned char)(len >> 8), (unsigned char)len};
    if (send_all(sock, head, 4) < 0)
        return -1;
    return len ? send_all(sock, payload, len) : 0;
}

/* 1 read, 0 the connection's end, -1 an error (errno) */
static int exactly(int sock, unsigned char *buf, size_t len) {
    while (len) {
        ssize_t n = recv(sock, buf, len, 0);
        if (n == 0) return 0;
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 1;
}

/* One frame into buf (NUL-terminated); 1, 0 (end, or larger than limit) or -1 (errno) */
static int receive(int sock, unsigned char *buf, size_t limit, size_t *len) {
    unsigned char head[4];
    int got = exactly(sock, head, 4);
    if (got <= 0) return got;
    size_t size = ((size_t)head[0] << 24) | ((size_t)head[1] << 16) | ((size_t)head[2] << 8)
                  | head[3];
    if (size > limit) return 0;
    got = exactly(sock, buf, size);
    if (got <= 0) return got;
    buf[size] = '\0';
    *len = size;
    return 1;
}

/* handoff.nothing_to_deliver */
static int nothing_to_deliver(const unsigned char *raw, size_t len) {
    if (len >= 5 && memcmp(raw, "From ", 5) == 0) {
        const unsigned char *end = memchr(raw, '\n', len);
        if (end == NULL) return 1;
        len -= (size_t)(end + 1 - raw);
        raw = end + 1;
    }
    for (size_t i = 0; i < len; i++) {  /* bytes.isspace: ASCII's six */
        switch (raw[i]) {
        case ' ': case '\t': case '\n': case '\r': case '\v': case '\f': continue;
        default: return 0;
        }
    }
    return 1;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static ssize_t read_in(unsigned char *buf, size_t len) {
    ssize_t n;
    do n = read(0, buf, len); while (n < 0 && errno == EINTR);
    return n;
}

/* The server's line as Python writes it (decoded as UTF-8 with replacement, encoded as ASCII
   with replacement): one '?' for each character outside ASCII. */
static void as_ascii(char *line) {
    unsigned char *in = (unsigned char *)line, *out = in;
    while (*in) {
        unsigned char c = *in++;
        if (c < 0x80) { *out++ = c; continue; }
        int more = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2
                 : c >= 0xF0 && c <= 0xF4 ? 3 : 0;
        while (more-- > 0 && (*in & 0xC0) == 0x80) in++;
        *out++ = '?';
    }
    *out = '\0';
}

int main(int argc, char **argv) {
    static unsigned char head[CHUNK * 17], reply[HEADER_LIMIT + 1];
    static char request[REQUEST_MAX], env[REQUEST_MAX / 2], data[PATH_MAX];
    struct request r;
    double started = now();
    given_argv = argv;

    if (!parse(argc, argv, &r))
        return fall_back();
    int must_exist = r.flag[1];
    const char *given = getenv("LETTERLOG_ACCOUNTS_MUST_EXIST");
    if (!must_exist && given != NULL && !truthy(given, &must_exist))
        return fall_back();
    const char *dir = r.data && *r.data ? r.data : getenv("LETTERLOG_DATA");
    if (dir == NULL || !*dir) dir = "letterlog-data";
    if (realpath(dir, data) == NULL || !settings(env, sizeof env))
        return fall_back();
    struct stat st;  /* as root, letterlog first becomes the owner of another's store */
    if (geteuid() == 0 && stat(data, &st) == 0 && st.st_uid != 0)
        return fall_back();  /* (handoff.as_store_owner, ADR 0068): its path, not this one */

    const char *timeout_text = r.value[6] ? r.value[6] : "300";
    double timeout = strtod(timeout_text, NULL);
    size_t at = 0;
    int ok = append(request, &at, "detail_mailbox", r.flag[0] ? "1" : "0")
             && append(request, &at, "envelope_headers", r.flag[2] ? "1" : "0")
             && append(request, &at, "timeout", timeout_text)
             && append(request, &at, "recipient_delimiter", r.value[5] ? r.value[5] : "+");
    for (size_t v = 0; v < NVALUES && ok; v++)
        if (r.value[v] != NULL && v != 5 && v != 6)
            ok = append(request, &at, values[v][1], r.value[v]);
    ok = ok && append(request, &at, "accounts_must_exist", must_exist ? "1" : "0")
         && append(request, &at, "data", data) && append(request, &at, "settings", env)
         && append(request, &at, "version", VERSION);
    if (!ok)
        return fall_back();
    for (size_t i = 0; i < at; i++)  /* the fields' separator: NUL (none inside a field) */
        if (request[i] == '\x01') request[i] = '\0';

    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(addr.sun_path, sizeof addr.sun_path, "%s/lda.sock", data)
        >= sizeof addr.sun_path)
        return fall_back();
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return fall_back();
    set_timeout(sock, timeout < 5.0 ? timeout : 5.0);
    size_t got;
    if (connect(sock, (struct sockaddr *)&addr, sizeof addr) < 0
        || send_frame(sock, request, at) < 0 || receive(sock, reply, HEADER_LIMIT, &got) != 1
        || strncmp((char *)reply, "ok", 3) != 0 || got <= 3
        || strspn((char *)reply + 3, "0123456789") != got - 3 || got - 3 > 18) {
        close(sock);  /* no server, another user's, a stale socket, a refusal */
        return fall_back();
    }
    unsigned long long limit = strtoull((char *)reply + 3, NULL, 10);

    /* the start of the message: until it holds more than blanks, or its end */
    size_t have = 0;
    int ended = 0;
    for (;;) {
        ssize_t n = read_in(head + have, CHUNK);
        if (n <= 0) { ended = 1; break; }  /* (a read error: as its end, as the server sees) */
        have += (size_t)n;
        if (!nothing_to_deliver(head, have) || have > (size_t)CHUNK * 16) break;
    }
    if (ended && nothing_to_deliver(head, have)) {
        close(sock);
        return answer(75, "4.3.0 letterlog: no message on standard input (empty or blank); "
                          "try again later");
    }
    double left = timeout - (now() - started);
    set_timeout(sock, (left > 0 ? left : 0) + GRACE + 2.0);

    char line[512];
    unsigned long long size = 0;
    const char *why = "the connection closed";
    int failed = 0;
    unsigned char *pending = head;
    size_t pending_len = have;
    static unsigned char chunk[CHUNK];
    for (;;) {
        for (size_t off = 0; off < pending_len && !failed; off += CHUNK) {
            size_t part = pending_len - off < CHUNK ? pending_len - off : CHUNK;
            size += part;
            if (size > limit) {
                close(sock);
                snprintf(line, sizeof line, "5.3.4 message too large: more than %llu bytes "
                         "(max_message_size=%llu)", limit, limit);
                return answer(65, line);
            }
            if (send_frame(sock, pending + off, part) < 0) failed = errno;
        }
        if (failed || ended) break;
        ssize_t n = read_in(chunk, CHUNK);
        if (n < 0) { failed = errno; break; }
        pending = chunk;
        pending_len = (size_t)n;
        ended = n == 0;
    }
    int received = -1;
    if (!failed && send_frame(sock, "", 0) < 0) failed = errno;
    if (!failed) {
        received = receive(sock, reply, HEADER_LIMIT, &got);
        if (received < 0) failed = errno;
    }
    close(sock);
    if (failed == EAGAIN || failed == EWOULDBLOCK) {
        snprintf(line, sizeof line, "4.3.0 delivery timed out after %g s (store busy or "
                 "slow); try again later", timeout);
        return answer(75, line);
    }
    if (failed) why = strerror(failed);
    if (received == 1) {
        size_t digits = strspn((char *)reply, "0123456789");
        if (digits > 0 && digits < 4 && (digits == got || reply[digits] == '\0')) {
            int status = atoi((char *)reply);
            if (status == 0 || status == 64 || status == 65 || status == 67 || status == 75
                || status == 77) {
                char *text = digits < got ? (char *)reply + digits + 1 : (char *)"";
                as_ascii(text);
                return answer(status, text);
            }
        }
    }
    snprintf(line, sizeof line, "4.3.0 letterlog: the lmtp server stopped while delivering "
             "(%s); try again later", why);
    return answer(75, line);
}
