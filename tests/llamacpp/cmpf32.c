/* cmpf32: compares two logits files (little-endian float32, row-major
 * [n_rows][n_vocab], as written by `zinc ref --logits-out` and the llama.cpp
 * harness). The second file is the reference.
 *
 * Per row: relative RMS error rms(a - b) / rms(b), max |a - b|, and whether
 * the arg-max (top-1 token) agrees. A top-1 disagreement is excused only when
 * the reference itself calls it a near tie: its logit for the candidate's
 * choice is within --tie of its own maximum.
 *
 * Prints one line; exits 0 when every row is within --rms-tol (and --abs-tol
 * when given) and every top-1 disagreement is a near tie, 1 otherwise, 2 on
 * bad input (different sizes, non-finite values, unreadable files). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct stats {
    double worst_rel, sum_rel, worst_abs;
    long rows, top1_agree, near_ties, bad_ties;
} stats;

static float *read_f32(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return fprintf(stderr, "cmpf32: cannot open %s\n", path), NULL;
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = bytes > 0 && bytes % 4 == 0 ? malloc((size_t)bytes) : NULL;
    if (!v || fread(v, 1, (size_t)bytes, f) != (size_t)bytes) {
        fprintf(stderr, "cmpf32: %s: expected a non-empty multiple of 4 bytes, found %ld\n", path, bytes);
        free(v);
        v = NULL;
    }
    fclose(f);
    *n = bytes / 4;
    return v;
}

static long argmax(const float *x, long n) {
    long best = 0;
    for (long i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void compare_row(const float *a, const float *b, long n, double tie, stats *s, int verbose) {
    double d2 = 0, b2 = 0, mx = 0;
    for (long i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        d2 += d * d;
        b2 += (double)b[i] * b[i];
        if (fabs(d) > mx) mx = fabs(d);
    }
    double rel = b2 > 0 ? sqrt(d2 / b2) : sqrt(d2);
    long ta = argmax(a, n), tb = argmax(b, n);
    if (ta == tb)
        s->top1_agree++;
    else if (b[tb] - b[ta] <= tie)
        s->near_ties++;
    else
        s->bad_ties++;
    if (rel > s->worst_rel) s->worst_rel = rel;
    if (mx > s->worst_abs) s->worst_abs = mx;
    s->sum_rel += rel;
    if (verbose)
        printf("  row %ld: rel_rms %.3e max_abs %.3e top1 %ld/%ld (ref margin %.3g)\n", s->rows, rel, mx, ta,
               tb, (double)(b[tb] - b[ta]));
    s->rows++;
}

static int usage(void) {
    fprintf(stderr, "usage: cmpf32 CANDIDATE.f32 REFERENCE.f32 --vocab V [--rms-tol X] [--abs-tol Y] "
                    "[--tie Z] [--label TEXT] [-v]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *label = "";
    long vocab = 0;
    double rms_tol = 1e-4, abs_tol = -1, tie = 0;
    int verbose = 0;
    if (argc < 3) return usage();
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else if (i + 1 >= argc)
            return usage();
        else if (!strcmp(argv[i], "--vocab"))
            vocab = atol(argv[++i]);
        else if (!strcmp(argv[i], "--rms-tol"))
            rms_tol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--abs-tol"))
            abs_tol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--tie"))
            tie = atof(argv[++i]);
        else if (!strcmp(argv[i], "--label"))
            label = argv[++i];
        else
            return usage();
    }
    long na, nb;
    float *a = read_f32(argv[1], &na), *b = a ? read_f32(argv[2], &nb) : NULL;
    if (!a || !b || vocab <= 0 || na != nb || na % vocab) {
        if (a && b)
            fprintf(stderr, "cmpf32: %s: sizes %ld and %ld floats are not equal multiples of vocab %ld\n",
                    label, na, nb, vocab);
        free(a), free(b);
        return 2;
    }
    for (long i = 0; i < na; i++)
        if (!isfinite(a[i]) || !isfinite(b[i])) {
            fprintf(stderr, "cmpf32: %s: non-finite value at row %ld column %ld\n", label, i / vocab,
                    i % vocab);
            free(a), free(b);
            return 2;
        }
    stats s = {0};
    for (long r = 0; r < na / vocab; r++)
        compare_row(a + r * vocab, b + r * vocab, vocab, tie, &s, verbose);
    int ok = s.worst_rel <= rms_tol && (abs_tol < 0 || s.worst_abs <= abs_tol) && s.bad_ties == 0;
    printf("%s %s: rows %ld rel_rms max %.3e mean %.3e (tol %.1e) max_abs %.3e", ok ? "PASS" : "FAIL", label,
           s.rows, s.worst_rel, s.sum_rel / s.rows, rms_tol, s.worst_abs);
    if (abs_tol >= 0) printf(" (tol %.1e)", abs_tol);
    printf(" top1 %ld/%ld", s.top1_agree, s.rows);
    if (s.near_ties) printf(" +%ld near-tie", s.near_ties);
    printf("\n");
    free(a), free(b);
    return ok ? 0 : 1;
}
