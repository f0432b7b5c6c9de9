#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_fail(const char *prog, const zdiag *d) {
    fprintf(stderr, "%s: error: %s\n", prog, d->msg[0] ? d->msg : zstatus_name(d->code));
    return zstatus_exit_code(d->code ? d->code : ZE_INTERNAL);
}

int cli_usage_error(const char *prog, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (try --help)\n");
    va_end(ap);
    return CLI_EXIT_USAGE;
}

bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val, bool *missing) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return false;
    if (a[n] == '=') {
        *val = a + n + 1;
        return true;
    }
    if (a[n] != 0) return false;
    if (*i + 1 >= argc) {
        *missing = true;
        return true;
    }
    *val = argv[++*i];
    return true;
}

bool cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_parse_f32(const char *s, float *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || *end) return false;
    *out = v;
    return true;
}

bool cli_parse_int_list(const char *s, int32_t **out, int *n) {
    int cap = 16, len = 0;
    int32_t *v = malloc(sizeof *v * cap);
    if (!v) return false;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX || (*end && *end != ',')) {
            free(v);
            return false;
        }
        if (len == cap) {
            int32_t *nv = realloc(v, sizeof *v * (cap *= 2));
            if (!nv) {
                free(v);
                return false;
            }
            v = nv;
        }
        v[len++] = (int32_t)x;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p) { /* trailing comma */
            free(v);
            return false;
        }
    }
    if (len == 0) {
        free(v);
        return false;
    }
    *out = v;
    *n = len;
    return true;
}

bool cli_stderr_tty(void) {
    return isatty(2) != 0;
}

zstatus cli_read_all(const char *path, char **buf, size_t *len, zdiag *d) {
    bool in = !strcmp(path, "-");
    FILE *f = in ? stdin : fopen(path, "rb");
    if (!f) return zdiag_set(d, ZE_IO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    zstatus s = b ? ZOK : zdiag_set(d, ZE_NOMEM, "out of memory reading %s", path);
    for (size_t got = 1; !s && got;) {
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb)
                s = zdiag_set(d, ZE_NOMEM, "out of memory reading %s", in ? "standard input" : path);
            else
                b = nb;
        }
        if (!s) n += got = fread(b + n, 1, cap - 1 - n, f);
    }
    if (!s && ferror(f))
        s = zdiag_set(d, ZE_IO, "cannot read %s: %s", in ? "standard input" : path, strerror(errno));
    if (!in) fclose(f);
    if (s) {
        free(b);
        return s;
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return ZOK;
}

/* llama.cpp's flags that mean nothing here, with what to say instead. */
static const struct {
    const char *names[4], *why;
} FOREIGN[] = {
    {{"-ngl", "--n-gpu-layers", "--gpu-layers"}, "every layer runs on the GPU in zinc"},
    {{"-t", "--threads", "-tb", "--threads-batch"}, "zinc computes on the GPU: CPU threads do not apply"},
    {{"-fa", "--flash-attn"},
     "zincc fuses attention itself where its cost model says it pays (zincc --report)"},
};

int cli_foreign_flag(const char *prog, const char *arg) {
    size_t n = strcspn(arg, "=");
    for (size_t i = 0; i < sizeof FOREIGN / sizeof FOREIGN[0]; i++)
        for (int k = 0; k < 4 && FOREIGN[i].names[k]; k++)
            if (strlen(FOREIGN[i].names[k]) == n && !strncmp(arg, FOREIGN[i].names[k], n)) {
                fprintf(stderr, "%s: %.*s is llama.cpp's: %s; drop it\n", prog, (int)n, arg, FOREIGN[i].why);
                return CLI_EXIT_USAGE;
            }
    return 0;
}

int cli_unexpected(const char *prog, const char *arg) {
    int rc = cli_foreign_flag(prog, arg);
    return rc ? rc : cli_usage_error(prog, "unexpected argument '%s'", arg);
}
