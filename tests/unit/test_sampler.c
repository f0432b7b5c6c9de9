/* Tests for runtime/sampler: llama.cpp's samplers over a float logits row.
 * Expected values are worked out by hand from the definitions (softmax,
 * cumulative mass, p * p_max), and the statistical checks use bounds of many
 * standard deviations with fixed seeds, so they cannot flake. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sampler.h"
#include "testutil.h"

static zrt_sampler *make(const zrt_sample_params *p, uint32_t n_vocab, zarena *a) {
    zrt_sampler *s = NULL;
    zdiag d = {0};
    zstatus st = zrt_sample_new(p, n_vocab, 4096, a, &s, &d);
    cr_assert_eq(st, ZOK, "%s", d.msg);
    return s;
}

/* All filters off: plain temperature sampling. */
static zrt_sample_params plain(float temp, uint64_t seed) {
    zrt_sample_params p;
    zrt_sample_defaults(&p);
    p.temp = temp, p.top_k = 0, p.top_p = 1, p.min_p = 0, p.seed = seed;
    return p;
}

static void random_logits(tu_rng *r, float *l, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        l[i] = 3 * tu_normal(r);
}

Test(sampler, defaults_are_llamacpps) {
    zrt_sample_params p;
    zrt_sample_defaults(&p);
    cr_expect(p.temp == 0.8f && p.top_k == 40 && p.top_p == 0.95f && p.min_p == 0.05f);
    cr_expect(p.repeat_penalty == 1.0f && p.repeat_last_n == 64);
}

/* temp <= 0 is the argmax, the first one on ties, for any seed. */
Test(sampler, greedy_is_argmax) {
    zarena *a = zarena_new();
    tu_rng r = tu_rng_seed(1);
    float l[1000];
    for (int iter = 0; iter < 50; iter++) {
        random_logits(&r, l, 1000);
        uint32_t best = 0;
        for (uint32_t i = 1; i < 1000; i++)
            if (l[i] > l[best]) best = i;
        zrt_sample_params p;
        zrt_sample_defaults(&p);
        p.temp = iter % 2 ? 0.0f : -1.0f, p.seed = (uint64_t)iter;
        cr_expect_eq(zrt_sample(make(&p, 1000, a), l), (int32_t)best);
    }
    float tie[4] = {1, 5, 5, 2};
    zrt_sample_params p = plain(0, 0);
    cr_expect_eq(zrt_sample(make(&p, 4, a), tie), 1);
    zarena_free(a);
}

/* The same seed gives the same tokens; another seed, other tokens. */
Test(sampler, seed_determinism) {
    zarena *a = zarena_new();
    tu_rng r = tu_rng_seed(2);
    float l[500];
    random_logits(&r, l, 500);
    zrt_sample_params p;
    zrt_sample_defaults(&p);
    p.temp = 1.5f, p.top_k = 0, p.min_p = 0, p.seed = 1234;
    int32_t x[200], y[200], z[200];
    zrt_sampler *s1 = make(&p, 500, a), *s2 = make(&p, 500, a);
    p.seed = 1235;
    zrt_sampler *s3 = make(&p, 500, a);
    int differ = 0;
    for (int i = 0; i < 200; i++) {
        x[i] = zrt_sample(s1, l), y[i] = zrt_sample(s2, l), z[i] = zrt_sample(s3, l);
        differ += x[i] != z[i];
    }
    cr_expect(!memcmp(x, y, sizeof x), "same seed, same tokens");
    cr_expect_gt(differ, 20, "another seed draws other tokens");
    zrt_sample_reset(s1);
    for (int i = 0; i < 200; i++)
        cr_expect_eq(zrt_sample(s1, l), x[i], "reset restarts the stream");
    zarena_free(a);
}

/* Draw frequencies match softmax(logits / T) within 5 standard deviations. */
Test(sampler, temperature_frequencies) {
    zarena *a = zarena_new();
    float l[6] = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};
    float temps[] = {0.5f, 1.0f, 2.0f};
    const int draws = 100000;
    for (int t = 0; t < 3; t++) {
        zrt_sample_params p = plain(temps[t], 99 + (uint64_t)t);
        zrt_sampler *s = make(&p, 6, a);
        int count[6] = {0};
        for (int i = 0; i < draws; i++)
            count[zrt_sample(s, l)]++;
        double z = 0, q[6];
        for (int i = 0; i < 6; i++)
            z += q[i] = exp(l[i] / temps[t]);
        for (int i = 0; i < 6; i++) {
            double pi = q[i] / z, sd = sqrt(draws * pi * (1 - pi));
            cr_expect(fabs(count[i] - draws * pi) <= 5 * sd + 1,
                      "T=%g token %d: %d draws, expected %.0f +- %.0f", (double)temps[t], i, count[i],
                      draws * pi, 5 * sd);
        }
    }
    zarena_free(a);
}

/* top-k never picks outside the k largest logits, and picks all of them. */
Test(sampler, top_k_stays_inside) {
    zarena *a = zarena_new();
    tu_rng r = tu_rng_seed(3);
    float l[300];
    random_logits(&r, l, 300);
    float sorted[300];
    memcpy(sorted, l, sizeof l);
    for (int i = 0; i < 300; i++) /* selection of the 5th largest */
        for (int j = i + 1; j < 300; j++)
            if (sorted[j] > sorted[i]) {
                float t = sorted[i];
                sorted[i] = sorted[j], sorted[j] = t;
            }
    zrt_sample_params p = plain(5.0f, 7); /* hot: without top-k, the tail would show up */
    p.top_k = 5;
    zrt_sampler *s = make(&p, 300, a);
    bool seen[300] = {0};
    for (int i = 0; i < 5000; i++) {
        int32_t t = zrt_sample(s, l);
        cr_assert(l[t] >= sorted[4], "token %d (logit %g) is outside the top 5", t, (double)l[t]);
        seen[t] = true;
    }
    int distinct = 0;
    for (int i = 0; i < 300; i++)
        distinct += seen[i];
    cr_expect_eq(distinct, 5);
    zarena_free(a);
}

static size_t run_filter(size_t (*f)(zrt_sample_cand *, size_t, float), const float *l, size_t n, float arg,
                         zrt_sample_cand *c) {
    for (size_t i = 0; i < n; i++)
        c[i] = (zrt_sample_cand){(int32_t)i, l[i], 0};
    return f(c, n, arg);
}

/* top-p keeps the smallest most-likely set whose mass reaches p; min-p the
 * tokens with p_i >= min_p * p_max. Worked from probabilities ln-spaced so
 * that softmax gives exact fractions: logits ln(0.5), ln(0.25), ... */
Test(sampler, top_p_and_min_p) {
    float l[5] = {logf(0.1f), logf(0.4f), logf(0.05f), logf(0.3f), logf(0.15f)};
    zrt_sample_cand c[5];
    cr_expect_eq(run_filter(zrt_sample_top_p, l, 5, 0.39f, c), 1u, "0.4 alone reaches 0.39");
    cr_expect_eq(c[0].id, 1);
    cr_expect_eq(run_filter(zrt_sample_top_p, l, 5, 0.5f, c), 2u, "0.4 + 0.3");
    cr_expect(c[0].id == 1 && c[1].id == 3);
    cr_expect_eq(run_filter(zrt_sample_top_p, l, 5, 0.9f, c), 4u, "0.4 + 0.3 + 0.15 + 0.1 >= 0.9");
    cr_expect_eq(run_filter(zrt_sample_top_p, l, 5, 1.0f, c), 5u, "1 keeps all");
    cr_expect_eq(run_filter(zrt_sample_min_p, l, 5, 0.3f, c), 3u, ">= 0.12: 0.4 0.3 0.15");
    cr_expect(c[0].id == 1 && c[1].id == 3 && c[2].id == 4, "min-p keeps the given order");
    cr_expect_eq(run_filter(zrt_sample_min_p, l, 5, 0.9f, c), 1u);
    cr_expect_eq(run_filter(zrt_sample_min_p, l, 5, 0.0f, c), 5u, "0 keeps all");
    /* Through the sampler: with top-p 0.5 only tokens 1 and 3 are drawn, in
     * the ratio 0.4 : 0.3. */
    zarena *a = zarena_new();
    zrt_sample_params p = plain(1.0f, 5);
    p.top_p = 0.5f;
    zrt_sampler *s = make(&p, 5, a);
    int count[5] = {0};
    for (int i = 0; i < 70000; i++)
        count[zrt_sample(s, l)]++;
    cr_expect(count[0] == 0 && count[2] == 0 && count[4] == 0);
    cr_expect(fabs(count[1] - 40000.0) < 5 * sqrt(70000 * 4.0 / 7 * 3 / 7), "token 1: %d of 70000", count[1]);
    zarena_free(a);
}

/* llama.cpp's repeat penalty: positive logits divided, negative multiplied,
 * once per token in the last N accepted, however often it occurred. */
Test(sampler, repeat_penalty) {
    zarena *a = zarena_new();
    float l[4] = {2.0f, 1.9f, -1.0f, -1.1f};
    zrt_sample_params p = plain(0, 0);
    p.repeat_penalty = 1.2f, p.repeat_last_n = 3;
    zrt_sampler *s = make(&p, 4, a);
    cr_expect_eq(zrt_sample(s, l), 0);
    zrt_sample_accept(s, 0); /* 2.0 / 1.2 = 1.667 < 1.9 */
    cr_expect_eq(zrt_sample(s, l), 1);
    zrt_sample_accept(s, 1); /* 1.9 / 1.2 = 1.583 < 1.667 */
    cr_expect_eq(zrt_sample(s, l), 0);
    /* Negative logits: -1.0 * 1.2 = -1.2 < -1.1. */
    float neg[2] = {-1.0f, -1.1f};
    zrt_sampler *t = make(&p, 2, a);
    zrt_sample_accept(t, 0);
    zrt_sample_accept(t, 0);
    cr_expect_eq(zrt_sample(t, neg), 1);
    /* The window: after 3 more tokens, token 0 is forgotten. */
    for (int i = 0; i < 3; i++)
        zrt_sample_accept(t, 1);
    cr_expect_eq(zrt_sample(t, neg), 0);
    /* Penalty 1 or last_n 0: off. */
    p.repeat_penalty = 1.0f;
    zrt_sampler *u = make(&p, 2, a);
    zrt_sample_accept(u, 0);
    cr_expect_eq(zrt_sample(u, neg), 0);
    p.repeat_penalty = 5.0f, p.repeat_last_n = 0;
    u = make(&p, 2, a);
    zrt_sample_accept(u, 0);
    cr_expect_eq(zrt_sample(u, neg), 0);
    zarena_free(a);
}

/* The penalty shifts a sampled distribution the expected way: a penalised
 * token's frequency drops to its new softmax share. */
Test(sampler, repeat_penalty_frequencies) {
    zarena *a = zarena_new();
    float l[3] = {1.0f, 1.0f, 1.0f};
    zrt_sample_params p = plain(1.0f, 11);
    p.repeat_penalty = 2.0f, p.repeat_last_n = 8;
    zrt_sampler *s = make(&p, 3, a);
    zrt_sample_accept(s, 2); /* logit 1 -> 0.5 */
    int count[3] = {0};
    const int draws = 60000;
    for (int i = 0; i < draws; i++)
        count[zrt_sample(s, l)]++;
    double p2 = exp(0.5) / (2 * exp(1.0) + exp(0.5)), sd = sqrt(draws * p2 * (1 - p2));
    cr_expect(fabs(count[2] - draws * p2) < 5 * sd, "penalised token: %d draws, expected %.0f", count[2],
              draws * p2);
    zarena_free(a);
}

Test(sampler, flags) {
    zrt_sample_params p;
    zrt_sample_defaults(&p);
    char *argv[] = {"run",
                    "--temp",
                    "0.3",
                    "--top-k=7",
                    "--top-p",
                    "0.5",
                    "--min-p",
                    "0.1",
                    "--repeat-penalty",
                    "1.1",
                    "--repeat-last-n",
                    "-1",
                    "--seed",
                    "-1",
                    "--seed",
                    "42",
                    "model.gguf",
                    "--top-p"};
    int argc = (int)(sizeof argv / sizeof argv[0]), consumed = 0, other = 0;
    zdiag d = {0};
    for (int i = 1; i < argc - 1; i++) {
        int r = zrt_sample_parse_arg(&p, argc - 1, argv, &i, &d);
        cr_assert_geq(r, 0, "%s", d.msg);
        consumed += r, other += !r;
        if (r && !strcmp(argv[i - 1], "--seed") && !strcmp(argv[i], "-1"))
            cr_expect_eq(p.seed, ZRT_SAMPLE_SEED_RANDOM, "--seed -1 asks for a random seed");
    }
    cr_expect(consumed == 8 && other == 1);
    cr_expect(p.temp == 0.3f && p.top_k == 7 && p.top_p == 0.5f && p.min_p == 0.1f);
    cr_expect(p.repeat_penalty == 1.1f && p.repeat_last_n == -1 && p.seed == 42);
    int i = argc - 1;
    cr_expect_eq(zrt_sample_parse_arg(&p, argc, argv, &i, &d), -1, "a flag without its value");
    cr_expect(strstr(d.msg, "--top-p: expected a value"), "%s", d.msg);
    char *bad[][2] = {{"--temp", "hot"}, {"--top-k", "1.5"}, {"--repeat-penalty", "0"},
                      {"--seed", "-3"},  {"--min-p", "2"},   {"--repeat-last-n", "-2"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char *av[] = {"run", bad[k][0], bad[k][1]};
        i = 1;
        cr_expect_eq(zrt_sample_parse_arg(&p, 3, av, &i, &d), -1, "%s %s", bad[k][0], bad[k][1]);
        cr_expect(strstr(d.msg, bad[k][0]) && strstr(d.msg, bad[k][1]) && strstr(d.msg, "expected"), "%s",
                  d.msg);
    }
    cr_expect(p.temp == 0.3f && p.top_k == 7 && p.seed == 42 && p.repeat_last_n == -1,
              "a bad value leaves the parameters as they were");
    cr_expect(strstr(zrt_sample_flags_help, "--repeat-last-n"));
    /* The help states each range that an error names. */
    cr_expect(strstr(zrt_sample_flags_help, "0..9223372036854775807") &&
              strstr(zrt_sample_flags_help, "-1 or more") && strstr(zrt_sample_flags_help, "at most 1") &&
              strstr(zrt_sample_flags_help, "more than 0"));
}

Test(sampler, bad_params) {
    zarena *a = zarena_new();
    zrt_sample_params p = plain(1, 0);
    zrt_sampler *s = NULL;
    zdiag d = {0};
    cr_expect_eq(zrt_sample_new(&p, 0, 16, a, &s, &d), ZE_INVALID);
    p.repeat_penalty = -1;
    cr_expect_eq(zrt_sample_new(&p, 10, 16, a, &s, &d), ZE_INVALID);
    cr_expect(strstr(d.msg, "--repeat-penalty"), "%s", d.msg);
    cr_expect_null(s);
    zarena_free(a);
}

static int cmp_desc(const void *a, const void *b) {
    const zrt_sample_cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* zrt_sample_top on the 64 largest logits (in any order) draws exactly what
 * zrt_sample draws from the whole row, whenever the sampler says it may. */
Test(sampler, top_candidates_draw_like_the_full_row) {
    enum { V = 5000, K = 64 };
    static float logits[V];
    static zrt_sample_cand top[V];
    tu_rng r = tu_rng_seed(99);
    zrt_sample_params p;
    zrt_sample_defaults(&p);
    p.seed = 1234;
    zarena *a = zarena_new();
    zrt_sampler *full, *part;
    zdiag d = {0};
    cr_assert_eq(zrt_sample_new(&p, V, 512, a, &full, &d), ZOK);
    cr_assert_eq(zrt_sample_new(&p, V, 512, a, &part, &d), ZOK);
    cr_assert(zrt_sample_needs_only_top(part, K));
    for (int step = 0; step < 300; step++) {
        for (int i = 0; i < V; i++)
            logits[i] = 3.0f * tu_normal(&r);
        if (step % 7 == 0) logits[step % V] = logits[(step + 1) % V]; /* a tie now and then */
        for (int i = 0; i < V; i++)
            top[i] = (zrt_sample_cand){i, logits[i], 0};
        qsort(top, V, sizeof *top, cmp_desc); /* the K largest, then shuffled */
        for (int i = K - 1; i > 0; i--) {
            int j = (int)(tu_next(&r) % (uint64_t)(i + 1));
            zrt_sample_cand t = top[i];
            top[i] = top[j], top[j] = t;
        }
        int32_t x = zrt_sample(full, logits), y = zrt_sample_top(part, top, K);
        cr_assert_eq(x, y, "step %d: full row drew %d, top-%d drew %d", step, x, K, y);
    }
    p.repeat_penalty = 1.1f;
    zrt_sampler *pen;
    cr_assert_eq(zrt_sample_new(&p, V, 512, a, &pen, &d), ZOK);
    cr_expect_not(zrt_sample_needs_only_top(pen, K), "a repeat penalty needs the whole row");
    p.repeat_penalty = 1.0f, p.top_k = 100;
    cr_assert_eq(zrt_sample_new(&p, V, 512, a, &pen, &d), ZOK);
    cr_expect_not(zrt_sample_needs_only_top(pen, K), "top-k 100 needs more than 64 candidates");
    zarena_free(a);
}

/* A banned token (--ignore-eos bans the end-of-generation ones) is never
 * drawn: not when it is the argmax, not when it holds almost all the mass;
 * zrt_sample_top still draws what the full row does, and asks for more
 * candidates to stand in for those banned. */
Test(sampler, banned_tokens_are_never_drawn) {
    enum { V = 3000, K = 64 };
    static float logits[V];
    static zrt_sample_cand top[V];
    tu_rng r = tu_rng_seed(7);
    zarena *a = zarena_new();
    zrt_sample_params p = plain(0, 0);
    zrt_sampler *g = make(&p, V, a);
    for (int i = 0; i < V; i++)
        logits[i] = tu_normal(&r);
    logits[17] = 50, logits[18] = 40, logits[19] = 30;
    cr_expect_eq(zrt_sample(g, logits), 17);
    cr_assert(zrt_sample_ban(g, 17) && zrt_sample_ban(g, 18) && zrt_sample_ban(g, 18));
    cr_expect_eq(zrt_sample(g, logits), 19, "greedy takes the best token not banned");
    cr_expect_not(zrt_sample_ban(g, -1));
    cr_expect_not(zrt_sample_ban(g, V));
    zrt_sample_defaults(&p);
    p.seed = 5;
    zrt_sampler *full = make(&p, V, a), *part = make(&p, V, a);
    for (int t = 0; t < 40; t++)
        cr_assert(zrt_sample_ban(full, t * 70) && zrt_sample_ban(part, t * 70));
    cr_expect(zrt_sample_needs_only_top(part, K + 40));
    cr_expect_not(zrt_sample_needs_only_top(part, K), "top-k 40 of 64 candidates of which 40 may be banned");
    for (int step = 0; step < 300; step++) {
        for (int i = 0; i < V; i++)
            logits[i] = 3.0f * tu_normal(&r);
        for (int t = 0; t < 40; t++)
            logits[t * 70] = 20 + (float)t; /* the banned hold nearly all the mass */
        for (int i = 0; i < V; i++)
            top[i] = (zrt_sample_cand){i, logits[i], 0};
        qsort(top, V, sizeof *top, cmp_desc);
        int32_t x = zrt_sample(full, logits), y = zrt_sample_top(part, top, K + 40);
        cr_assert(x % 70 != 0 || x / 70 >= 40, "step %d: drew banned %d", step, x);
        cr_assert_eq(x, y, "step %d: full row drew %d, top candidates %d", step, x, y);
    }
    float two[2] = {1, 2};
    zrt_sampler *s2 = make(&p, 2, a);
    cr_expect(zrt_sample_ban(s2, 1));
    cr_expect_not(zrt_sample_ban(s2, 0), "the last token cannot be banned");
    cr_expect_eq(zrt_sample(s2, two), 0);
    zarena_free(a);
}
