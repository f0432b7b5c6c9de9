/* Small helpers shared by the zincc and zinc command-line programs. Only
 * these programs print diagnostics and exit; the libraries never do. */
#ifndef ZINC_CLI_H
#define ZINC_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../ir/zstatus.h"

/* Prints "<prog>: error: <msg>" to stderr and returns the exit code for d. */
int cli_fail(const char *prog, const zdiag *d);
/* Prints "<prog>: <fmt...>" to stderr and returns 2 (usage errors). */
int cli_usage_error(const char *prog, const char *fmt, ...) ZPRINTF(2, 3);

/* If argv[*i] is "--name" (value in the next argument) or "--name=value",
 * stores the value, advances *i and returns true. A missing value sets
 * *missing. */
bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val, bool *missing);

/* Strict number parsing: the whole string must be a number in range. */
bool cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool cli_parse_f32(const char *s, float *out);

/* Parses "1,2,3" into a malloc'd array of int32; false on a malformed list. */
bool cli_parse_int_list(const char *s, int32_t **out, int *n);

/* Reads a whole file ("-": standard input) into a malloc'd, NUL-terminated
 * buffer of *len bytes; ZE_IO names the file and the reason. */
zstatus cli_read_all(const char *path, char **buf, size_t *len, zdiag *d);

/* Exit status of a usage error (a bad flag or value): EX_USAGE of
 * sysexits.h, apart from every zstatus_exit_code (1 + the zstatus). */
#define CLI_EXIT_USAGE 64

/* For an argument no option matched: a llama.cpp flag that does not apply
 * here (-ngl, -t, -fa) gets a one-line hint, anything else "unexpected
 * argument". Returns CLI_EXIT_USAGE. */
int cli_unexpected(const char *prog, const char *arg);

/* Whether stderr is a terminal (progress bars are drawn only then). */
bool cli_stderr_tty(void);

#endif
