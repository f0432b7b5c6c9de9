/* zinc compare: two logits files (zinc run / zinc ref --logits-out), row by
 * row: relative RMS error, largest absolute error, top-1 agreement. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *const usage =
    "usage: zinc compare CANDIDATE.f32 REFERENCE.f32 --vocab V [--tol X]\n"
    "\n"
    "Compares two logits files (float32, row-major [rows][V], as zinc run and zinc ref\n"
    "write them). Prints the worst relative RMS error over rows, the largest absolute\n"
    "error and how many rows agree on the most likely token; exits 1 when a row's\n"
    "relative RMS error exceeds --tol (default 1e-3).\n";

static float *load(const char *path, size_t *n, zdiag *d) {
    char *b;
    size_t bytes;
    if (cli_read_all(path, &b, &bytes, d)) return NULL; /* "cannot open X: the reason" */
    if (!bytes || bytes % 4) {
        zdiag_set(d, ZE_FORMAT, "%s: expected a non-empty multiple of 4 bytes, found %zu", path, bytes);
        free(b);
        return NULL;
    }
    *n = bytes / 4;
    return (float *)(void *)b; /* malloc'd: aligned for any type */
}

static size_t argmax(const float *x, size_t n) {
    size_t b = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

int cmd_compare(int argc, char **argv) {
    const char *files[2] = {0};
    int nf = 0;
    int64_t V = 0;
    float tol = 1e-3f;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        bool miss = false;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (cli_opt(argc, argv, &i, "--vocab", &v, &miss)) {
            if (miss || !cli_parse_i64(v, 1, 1 << 24, &V))
                return cli_usage_error("zinc compare", "--vocab expects V");
        } else if (cli_opt(argc, argv, &i, "--tol", &v, &miss)) {
            if (miss || !cli_parse_f32(v, &tol))
                return cli_usage_error("zinc compare", "--tol expects a number");
        } else if (argv[i][0] == '-' || nf == 2)
            return cli_usage_error("zinc compare", "unexpected argument '%s'", argv[i]);
        else
            files[nf++] = argv[i];
    }
    if (nf != 2 || !V) return cli_usage_error("zinc compare", "give two files and --vocab");
    zdiag d = {0};
    size_t na = 0, nb = 0;
    float *a = load(files[0], &na, &d), *b = a ? load(files[1], &nb, &d) : NULL;
    if (a && b && (na != nb || na % (size_t)V))
        zdiag_set(&d, ZE_INVALID, "sizes differ or are not rows of %lld: %zu and %zu floats", (long long)V,
                  na, nb);
    if (d.code) {
        free(a), free(b);
        return cli_fail("zinc compare", &d);
    }
    size_t rows = na / (size_t)V, agree = 0;
    double worst = 0, worst_abs = 0;
    for (size_t r = 0; r < rows; r++) {
        const float *x = a + r * (size_t)V, *y = b + r * (size_t)V;
        double se = 0, sr = 0;
        for (int64_t i = 0; i < V; i++) {
            se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
            sr += (double)y[i] * y[i];
            worst_abs = fmax(worst_abs, fabs((double)x[i] - y[i]));
        }
        worst = fmax(worst, sqrt(se / (sr > 0 ? sr : 1)));
        agree += argmax(x, (size_t)V) == argmax(y, (size_t)V);
    }
    bool ok = worst <= tol;
    printf("%s: %zu rows, relative RMS error max %.3g (tolerance %.1g), max |diff| %.3g, top-1 %zu/%zu\n",
           ok ? "match" : "MISMATCH", rows, worst, tol, worst_abs, agree, rows);
    free(a), free(b);
    return ok ? 0 : 1;
}
