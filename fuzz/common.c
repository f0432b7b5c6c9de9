#include "common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz: invariant broken: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void fz_check(zstatus s, const zdiag *d, const char *what) {
    if ((int)s < 0 || s >= ZE_COUNT) fz_fail("%s returned status %d, not a zstatus", what, (int)s);
    if (s == ZOK) return;
    if (fz_debug()) fprintf(stderr, "fuzz: %s: %s\n", what, d->msg);
    if (d->code != s)
        fz_fail("%s returned %s but the diagnostic says %s: %s", what, zstatus_name(s), zstatus_name(d->code),
                d->msg);
    size_t n = strnlen(d->msg, sizeof d->msg);
    if (n == 0 || n == sizeof d->msg)
        fz_fail("%s failed (%s) with an empty or unterminated message", what, zstatus_name(s));
    if (strchr(d->msg, '\n') || strchr(d->msg, '\r'))
        fz_fail("%s failed with a message of more than one line: %s", what, d->msg);
}

int fz_debug(void) {
    static int on = -1;
    if (on < 0) on = getenv("ZINC_FUZZ_DEBUG") != NULL;
    return on;
}

FILE *fz_null(void) {
    static FILE *f;
    if (!f && !(f = fopen("/dev/null", "w"))) fz_fail("cannot open /dev/null");
    return f;
}

static char tmpdir[64];

static void remove_tmpdir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", tmpdir);
}

const char *fz_tmpdir(void) {
    if (!tmpdir[0]) {
        /* The plan harness writes a file per accepted input: prefer memory. */
        const char *base = getenv("TMPDIR");
        if (!base) base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(tmpdir, sizeof tmpdir, "%.40s/zinc-fuzz-XXXXXX", base);
        if (!mkdtemp(tmpdir)) fz_fail("cannot make a temporary directory");
        atexit(remove_tmpdir);
    }
    return tmpdir;
}

uint64_t fz_fnv1a(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
