/* zstatus: result codes and diagnostics shared by every zincc subsystem.
 *
 * Library code never prints and never exits. It returns a zstatus and, on
 * failure, fills a zdiag with one line that says what went wrong, where, and
 * what was expected. Only main() prints the line and picks an exit code. */
#ifndef ZINC_ZSTATUS_H
#define ZINC_ZSTATUS_H

#include <stdarg.h>

typedef enum zstatus {
    ZOK = 0,
    ZE_IO,          /* a file could not be opened, read or written */
    ZE_FORMAT,      /* the bytes of an input file are malformed */
    ZE_UNSUPPORTED, /* well-formed, but something we do not handle (arch, dtype, feature) */
    ZE_INVALID,     /* a bad argument or an inconsistent model (missing tensor, wrong shape) */
    ZE_NOMEM,       /* host or device memory exhausted */
    ZE_VK,          /* a Vulkan call failed */
    ZE_INTERNAL,    /* a broken invariant inside zincc: a bug */
    ZE_COUNT
} zstatus;

typedef struct zdiag {
    zstatus code;
    char msg[1024];
} zdiag;

#if defined(__GNUC__)
#define ZPRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define ZPRINTF(f, a)
#endif

/* Records code and the formatted message in d (which may be NULL) and
 * returns code, so that callers can write `return zdiag_set(d, ZE_IO, ...)`. */
zstatus zdiag_set(zdiag *d, zstatus code, const char *fmt, ...) ZPRINTF(3, 4);
zstatus zdiag_vset(zdiag *d, zstatus code, const char *fmt, va_list ap);

/* Prepends "prefix: " to an existing message, for context added by callers. */
void zdiag_prefix(zdiag *d, const char *fmt, ...) ZPRINTF(2, 3);

const char *zstatus_name(zstatus s);

/* Process exit code for a status: 0 for ZOK, distinct small codes otherwise. */
int zstatus_exit_code(zstatus s);

#endif
