/* Helpers shared by the libFuzzer harnesses (fuzz/fuzz_*.c).
 *
 * A harness turns a broken promise into a crash, because a crash is what
 * libFuzzer records: every failure must come back as a zstatus with one
 * non-empty line in the zdiag, and what a parser accepts must be safe to use. */
#ifndef ZINC_FUZZ_COMMON_H
#define ZINC_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../ir/zstatus.h"

/* Aborts (a finding) unless s is a known status and, when it is not ZOK, d
 * holds one non-empty line. what names the call, for the report. */
void fz_check(zstatus s, const zdiag *d, const char *what);

/* Aborts with a message: a broken invariant of an accepted input. */
void fz_fail(const char *fmt, ...) ZPRINTF(1, 2);

/* Whether ZINC_FUZZ_DEBUG is set: harnesses then print why an input was
 * refused (one line each), to check that seeds reach the code under test. */
int fz_debug(void);

/* /dev/null, opened once, for the printers. */
FILE *fz_null(void);

/* A private directory for files a harness makes at start-up (removed at exit). */
const char *fz_tmpdir(void);

/* FNV-1a 64 over n bytes, as the plan format's checksums. */
uint64_t fz_fnv1a(const void *p, size_t n);

#endif
