#include "zstatus.h"

#include <stdio.h>
#include <string.h>

/* A message is one line by contract, and names in it may come from hostile
 * files (an architecture, a key, a pre-tokenizer): control bytes (a newline,
 * a terminal escape) become '?' here, whoever formatted the message. */
static void one_line(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

zstatus zdiag_vset(zdiag *d, zstatus code, const char *fmt, va_list ap) {
    if (d) {
        d->code = code;
        vsnprintf(d->msg, sizeof d->msg, fmt, ap);
        one_line(d->msg);
    }
    return code;
}

zstatus zdiag_set(zdiag *d, zstatus code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    zdiag_vset(d, code, fmt, ap);
    va_end(ap);
    return code;
}

void zdiag_prefix(zdiag *d, const char *fmt, ...) {
    if (!d) return;
    char pre[512], joined[sizeof pre + sizeof d->msg + 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    snprintf(joined, sizeof joined, "%s: %s", pre, d->msg);
    size_t n = strlen(joined);
    if (n >= sizeof d->msg) n = sizeof d->msg - 1;
    memcpy(d->msg, joined, n);
    d->msg[n] = 0;
    one_line(d->msg);
}

static const char *const status_names[ZE_COUNT] = {
    [ZOK] = "ok",
    [ZE_IO] = "i/o error",
    [ZE_FORMAT] = "format error",
    [ZE_UNSUPPORTED] = "unsupported",
    [ZE_INVALID] = "invalid",
    [ZE_NOMEM] = "out of memory",
    [ZE_VK] = "vulkan error",
    [ZE_INTERNAL] = "internal error",
};

const char *zstatus_name(zstatus s) {
    return (unsigned)s < ZE_COUNT ? status_names[s] : "unknown status";
}

int zstatus_exit_code(zstatus s) {
    return s == ZOK ? 0 : (int)s + 1;
}
