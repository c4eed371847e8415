/* The native `runjob` client: the warm path without starting Python (~13 ms of every command).
 *
 * runjob_core/warm/__init__.py explains the warm path; this program is its client, the same
 * protocol byte for byte: a marshal-encoded request (argv, working folder, environment, umask,
 * import path, stream encodings) with the caller's stdin/stdout/stderr passed as SCM_RIGHTS,
 * then the child's pid ("P"), signals passed on to it, and its exit code ("X").
 *
 * Built by `python -m runjob_core.warm.native install` (runjob_core/warm/native.py), which
 * writes the interpreter's own values into native_config.h: the warm socket's key, the import
 * path the warm process must have, the Python interpreter and the script to run instead.
 *
 * Whenever anything is not plainly the case this client knows (not a warm command, no warm
 * process, a stale one, an environment that changes what Python would do: PYTHONPATH, a
 * non-UTF-8 locale, bytes that are not UTF-8), it runs the Python client in its place
 * (execv), which then does exactly what it always did. So the native client is only ever a
 * shortcut, as the warm path itself is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "native_config.h" /* RJ_KEY, RJ_PYTHON, RJ_SCRIPT; RJ_PATH, RJ_PYTHON_VARIABLES (NULL-terminated) */

extern char **environ;

#define FOLDER_MAX 80 /* runjob_core.warm._FOLDER_MAX */

static char **saved_argv;

/* Run the Python client instead: it does everything this one does not. */
static void run_python(void) {
    int argc = 0;
    while (saved_argv[argc]) argc++;
    char **args = calloc((size_t)argc + 2, sizeof(char *));
    if (!args) { perror("runjob"); exit(1); }
    args[0] = (char *)RJ_PYTHON;
    args[1] = (char *)RJ_SCRIPT;
    for (int i = 1; i < argc; i++) args[i + 1] = saved_argv[i];
    execv(RJ_PYTHON, args);
    fprintf(stderr, "runjob: cannot run %s: %s\n", RJ_PYTHON, strerror(errno));
    exit(1);
}

/* The rules of runjob_core.warm._ELIGIBLE; the warm process checks them again. */
static int eligible(int argc, char **argv) {
    if (argc < 2) return 0;
    if (strcmp(argv[1], "status") == 0) return 1;
    if (strcmp(argv[1], "health") == 0) return argc > 2 && strcmp(argv[2], "scan") == 0;
    if (strcmp(argv[1], "submit") == 0) {
        for (int i = 2; i < argc; i++)
            if (strcmp(argv[i], "--yes") == 0 || strcmp(argv[i], "-y") == 0) return 1;
        return !isatty(0);
    }
    return 0;
}

static int valid_utf8(const unsigned char *s) {
    while (*s) {
        unsigned c = *s, n;
        uint32_t cp;
        if (c < 0x80) { s++; continue; }
        if (c >= 0xC2 && c <= 0xDF) { n = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { n = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { n = 3; cp = c & 0x07; }
        else return 0;
        for (unsigned i = 1; i <= n; i++) {
            if ((s[i] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i] & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        s += n + 1;
    }
    return 1;
}

/* ---- the request, in marshal's format (what marshal.loads reads back) ---- */

typedef struct { char *data; size_t size, cap; } buffer;

static void put(buffer *b, const void *data, size_t size) {
    if (b->size + size > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->size + size) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) { perror("runjob"); exit(1); }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->size, data, size);
    b->size += size;
}

static void put_int32(buffer *b, int32_t value) {
    unsigned char le[4] = {(unsigned char)value, (unsigned char)(value >> 8), (unsigned char)(value >> 16),
                           (unsigned char)(value >> 24)};
    put(b, le, 4);
}

static void put_str_n(buffer *b, const char *s, size_t n) {
    put(b, "u", 1);
    put_int32(b, (int32_t)n);
    put(b, s, n);
}

static void put_str(buffer *b, const char *s) { put_str_n(b, s, strlen(s)); }

/* Python's own C-locale coercion (PEP 538), for a caller whose LC_CTYPE is the C locale: the
   LC_CTYPE value a Python client would have set in its environment (and passed on), or NULL. */
static const char *coerced_ctype(void) {
    const char *all = getenv("LC_ALL");
    if (all && *all) return NULL;
    static const char *targets[] = {"C.UTF-8", "C.utf8", "UTF-8", NULL};
    for (int i = 0; targets[i]; i++)
        if (setlocale(LC_CTYPE, targets[i])) return targets[i];
    return NULL;
}

static int build_request(buffer *b, int argc, char **argv) {
    const char *coerced;
    for (int i = 0; RJ_PYTHON_VARIABLES[i]; i++) { /* they change Python's import path or encoding */
        const char *value = getenv(RJ_PYTHON_VARIABLES[i]);
        if (value && *value) return 0;
    }
    /* Python's streams are UTF-8 in the C locale (UTF-8 mode, PEP 540; an unknown locale is the C
       one too) and in a UTF-8 locale; any other encoding is the Python client's to handle. */
    setlocale(LC_CTYPE, "");
    const char *now = setlocale(LC_CTYPE, NULL);
    int c_locale = now && (strcmp(now, "C") == 0 || strcmp(now, "POSIX") == 0);
    coerced = c_locale ? coerced_ctype() : NULL;
    if (!c_locale && strcmp(nl_langinfo(CODESET), "UTF-8") != 0) return 0;
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd) || !valid_utf8((unsigned char *)cwd)) return 0;
    mode_t mask = umask(022);
    umask(mask);

    put(b, "{", 1);
    put_str(b, "argv");
    put(b, "[", 1);
    put_int32(b, argc);
    for (int i = 0; i < argc; i++) {
        if (!valid_utf8((unsigned char *)argv[i])) return 0;
        put_str(b, argv[i]);
    }
    put_str(b, "cwd");
    put_str(b, cwd);
    put_str(b, "env");
    put(b, "{", 1);
    /* os.environ: entries without '=' are left out, and the first of two same names wins
       (a later duplicate is skipped: checked by a linear scan, environments are small). */
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e) continue;
        if (!valid_utf8((unsigned char *)*e)) return 0;
        size_t name = (size_t)(eq - *e);
        int seen = 0;
        for (char **f = environ; f < e && !seen; f++)
            seen = strncmp(*f, *e, name + 1) == 0;
        if (seen) continue;
        if (coerced && name == 8 && strncmp(*e, "LC_CTYPE", 8) == 0) continue;
        put_str_n(b, *e, name);
        put_str(b, eq + 1);
    }
    if (coerced) {
        put_str(b, "LC_CTYPE");
        put_str(b, coerced);
    }
    put(b, "0", 1);
    put_str(b, "umask");
    put(b, "i", 1);
    put_int32(b, (int32_t)mask);
    put_str(b, "path");
    int paths = 0;
    while (RJ_PATH[paths]) paths++;
    put(b, "[", 1);
    put_int32(b, paths);
    for (int i = 0; i < paths; i++) put_str(b, RJ_PATH[i]);
    put_str(b, "encoding");
    put(b, "[", 1);
    put_int32(b, 3);
    for (int i = 0; i < 3; i++) put_str(b, "utf-8");
    put(b, "0", 1);
    return 1;
}

/* ---- the socket ---- */

static int socket_path(char *out, size_t size) {
    const char *base = getenv("XDG_RUNTIME_DIR");
    char folder[4096];
    if (base && *base) {
        snprintf(folder, sizeof folder, "%s/runjob/warm", base);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home) return 0; /* Python would ask the password database: let it */
        snprintf(folder, sizeof folder, "%s/.cache/runjob/warm", home);
    }
    if (strlen(folder) > FOLDER_MAX) snprintf(folder, sizeof folder, "/tmp/runjob-warm-%u", (unsigned)getuid());
    struct stat info;
    if (stat(folder, &info) != 0 || info.st_uid != getuid() || (info.st_mode & 077)) return 0;
    return snprintf(out, size, "%s/%s.sock", folder, RJ_KEY) < (int)size;
}

static int read_full(int fd, unsigned char *out, size_t size) {
    size_t got = 0;
    while (got < size) {
        ssize_t n = recv(fd, out + got, size - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return 0;
        got += (size_t)n;
    }
    return 1;
}

static volatile pid_t child;

static void forward(int signum) {
    int saved = errno;
    if (child > 0) kill(child, signum); /* a child that has just ended: its exit code is on its way */
    errno = saved;
}

int main(int argc, char **argv) {
    saved_argv = argv;
    const char *warm = getenv("RUNJOB_WARM");
    if ((warm && (!*warm || strcmp(warm, "0") == 0)) || !eligible(argc, argv)) run_python();
    /* A closed stdin/stdout/stderr (cron's `<&-`) would be the socket itself once it is made, and
       the warm child would take the connection for its stdin: such a caller runs the command itself. */
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0) run_python();
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    if (!socket_path(path, sizeof path)) run_python();
    buffer request = {0};
    if (!build_request(&request, argc, argv)) run_python();

    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strcpy(address.sun_path, path);
    if (sock < 0 || connect(sock, (struct sockaddr *)&address, sizeof address) != 0) run_python();

    unsigned char header[4] = {(unsigned char)(request.size >> 24), (unsigned char)(request.size >> 16),
                               (unsigned char)(request.size >> 8), (unsigned char)request.size};
    struct iovec parts[2] = {{header, 4}, {request.data, request.size}};
    int fds[3] = {0, 1, 2};
    union { char space[CMSG_SPACE(sizeof fds)]; struct cmsghdr align; } control;
    struct msghdr message = {.msg_iov = parts, .msg_iovlen = 2, .msg_control = control.space,
                             .msg_controllen = sizeof control.space};
    struct cmsghdr *rights = CMSG_FIRSTHDR(&message);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(rights), fds, sizeof fds);
    size_t total = 4 + request.size;
    ssize_t sent = sendmsg(sock, &message, MSG_NOSIGNAL);
    if (sent < 0) run_python(); /* a closed stdin/stdout (EBADF) or a warm process gone */
    /* The rest of a request too long for one message (a large environment): no descriptors with it. */
    while ((size_t)sent < total) {
        size_t at = (size_t)sent - 4;
        ssize_t more = send(sock, request.data + at, request.size - at, MSG_NOSIGNAL);
        if (more < 0 && errno == EINTR) continue;
        if (more <= 0) run_python();
        sent += more;
    }

    unsigned char reply[5];
    if (!read_full(sock, reply, 5) || reply[0] != 'P') run_python(); /* stale or refused: nothing ran there */
    child = (pid_t)(((uint32_t)reply[1] << 24) | ((uint32_t)reply[2] << 16) | ((uint32_t)reply[3] << 8) | reply[4]);
    struct sigaction pass = {.sa_handler = forward};
    sigemptyset(&pass.sa_mask);
    int passed[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof passed / sizeof passed[0]; i++) sigaction(passed[i], &pass, NULL);
    if (!read_full(sock, reply, 5) || reply[0] != 'X') {
        static const char said[] = "runjob: the command ended without an exit status (its process was killed)\n";
        if (write(2, said, sizeof said - 1) < 0) return 1;
        return 1;
    }
    int32_t code = (int32_t)(((uint32_t)reply[1] << 24) | ((uint32_t)reply[2] << 16) | ((uint32_t)reply[3] << 8) | reply[4]);
    return code & 0xFF;
}
