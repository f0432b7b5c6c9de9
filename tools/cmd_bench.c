/* zinc bench: throughput of a plan, reported like llama-bench (pp512, tg128):
 * prefill of -p tokens and decode of -n tokens, each repeated -r times; the
 * median and the spread of the repetitions are printed, all from one run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../runtime/zrt.h"
#include "cli.h"
#include "model.h"

static const char *const usage =
    "usage: zinc bench PLAN.zplan [-p 512] [-n 128] [-r 5] [--profile] [--device N] [--gguf MODEL.gguf]\n"
    "\n"
    "Measures prompt processing (pp: one prefill of -p tokens, in the plan's chunks)\n"
    "and text generation (tg: -n decode steps, the recorded step replayed), each\n"
    "repeated -r times after one warm-up, with random token ids. Prints the median\n"
    "tokens per second and the min..max of the repetitions.\n"
    "\n"
    "  --profile   also time every dispatch of one prefill step and one decode step on\n"
    "              the GPU (timestamps) and print each kernel's share of the phase\n";

typedef struct bench_opts {
    model_opts m;
    int64_t p, n, r;
    bool profile;
} bench_opts;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int parse(int argc, char **argv, bench_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        bool miss = false;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            exit(0);
        } else if (cli_opt(argc, argv, &i, "-p", &v, &miss)) {
            if (!miss && !cli_parse_i64(v, 0, 1 << 20, &o->p))
                return cli_usage_error("zinc bench", "-p expects 0..");
        } else if (cli_opt(argc, argv, &i, "-n", &v, &miss)) {
            if (!miss && !cli_parse_i64(v, 0, 1 << 20, &o->n))
                return cli_usage_error("zinc bench", "-n expects 0..");
        } else if (cli_opt(argc, argv, &i, "-r", &v, &miss)) {
            if (!miss && !cli_parse_i64(v, 1, 1000, &o->r))
                return cli_usage_error("zinc bench", "-r expects 1..1000");
        } else if (!strcmp(argv[i], "--profile")) {
            o->profile = true;
        } else {
            zdiag d = {0};
            int g = model_parse_arg(&o->m, argc, argv, &i, &d);
            if (g < 0) return cli_usage_error("zinc bench", "%s", d.msg);
            if (g == 0 && (argv[i][0] == '-' || o->m.path)) return cli_unexpected("zinc bench", argv[i]);
            if (g == 0) o->m.path = argv[i];
        }
        if (miss) return cli_usage_error("zinc bench", "%s needs a value", argv[i]);
    }
    return o->m.path ? 0 : cli_usage_error("zinc bench", "no model given (a MODEL.gguf or a PLAN.zplan)");
}

/* One repetition: seconds for a prefill of p tokens, or for n decode steps
 * following a 1-token prompt. */
static zstatus rep(zrt *r, const int32_t *tok, int64_t count, bool decode, double *secs, zdiag *d) {
    zrt_reset(r);
    zstatus s = ZOK;
    double t0;
    if (!decode) {
        t0 = now_s();
        s = zrt_eval(r, tok, (int)count, NULL, d);
    } else {
        s = zrt_run(r, ZPLAN_DECODE, tok, 1, NULL, d);
        t0 = now_s();
        for (int64_t i = 1; i <= count && !s; i++)
            s = zrt_run(r, ZPLAN_DECODE, &tok[i], 1, NULL, d);
    }
    *secs = now_s() - t0;
    return s;
}

static zstatus measure(zrt *r, const bench_opts *o, const int32_t *tok, bool decode, zdiag *d) {
    int64_t count = decode ? o->n : o->p;
    if (count == 0) return ZOK;
    double *t = calloc((size_t)o->r, sizeof *t), warm;
    if (!t) return zdiag_set(d, ZE_NOMEM, "out of memory");
    zstatus s = rep(r, tok, count, decode, &warm, d);
    for (int64_t i = 0; i < o->r && !s; i++)
        s = rep(r, tok, count, decode, &t[i], d);
    if (!s) {
        qsort(t, (size_t)o->r, sizeof *t, cmp_double);
        double med = o->r % 2 ? t[o->r / 2] : 0.5 * (t[o->r / 2 - 1] + t[o->r / 2]);
        printf("| %-28s | %-6s%-6lld | %10.2f | %10.2f .. %-10.2f |\n", zrt_device(r)->name,
               decode ? "tg" : "pp", (long long)count, count / med, count / t[o->r - 1], count / t[0]);
    }
    free(t);
    return s;
}

typedef struct kernel_time {
    uint32_t kernel;
    double ns;
    int count;
} kernel_time;

static int by_time(const void *a, const void *b) {
    double x = ((const kernel_time *)a)->ns, y = ((const kernel_time *)b)->ns;
    return x > y ? -1 : x < y;
}

/* Each kernel's share of one step's GPU time, largest first. */
static void print_profile(const zplan *p, zplan_phase ph, int T, const double *ns) {
    const zplan_schedule *sc = &p->sched[ph];
    kernel_time *k = calloc(p->n_kernels, sizeof *k);
    double total = 0;
    if (!k) return;
    for (uint32_t i = 0; i < p->n_kernels; i++)
        k[i].kernel = i;
    for (uint32_t i = 0; i < sc->count; i++) {
        const zplan_dispatch *dp = &p->dispatches[sc->first + i];
        k[dp->kernel].ns += ns[i];
        k[dp->kernel].count++;
        total += ns[i];
    }
    qsort(k, p->n_kernels, sizeof *k, by_time);
    printf("\n%s step of %d token%s: %u dispatches, %.1f us on the GPU (%.2f us per token)\n",
           ph == ZPLAN_DECODE ? "decode" : "prefill", T, T == 1 ? "" : "s", sc->count, total / 1e3,
           total / 1e3 / T);
    printf("  %6s %6s %9s  %s\n", "share", "calls", "us", "kernel");
    for (uint32_t i = 0; i < p->n_kernels && k[i].count; i++)
        printf("  %5.1f%% %6d %9.1f  %s\n", 100 * k[i].ns / total, k[i].count, k[i].ns / 1e3,
               zplan_str(p, p->kernels[k[i].kernel].name));
    free(k);
}

static zstatus profile(zrt *r, const bench_opts *o, const int32_t *tok, zdiag *d) {
    const zplan *p = zrt_plan(r);
    int T = (int)(o->p < p->sched[ZPLAN_PREFILL].max_tokens ? o->p : p->sched[ZPLAN_PREFILL].max_tokens);
    uint32_t most = p->sched[ZPLAN_PREFILL].count > p->sched[ZPLAN_DECODE].count
                        ? p->sched[ZPLAN_PREFILL].count
                        : p->sched[ZPLAN_DECODE].count;
    double *ns = calloc(most + 1, sizeof *ns);
    if (!ns) return zdiag_set(d, ZE_NOMEM, "out of memory");
    zrt_reset(r);
    zstatus s = T > 0 ? zrt_profile(r, ZPLAN_PREFILL, tok, T, ns, d) : ZOK;
    if (!s && T > 0) print_profile(p, ZPLAN_PREFILL, T, ns);
    if (!s) s = zrt_eval(r, tok, T > 0 ? T : 1, NULL, d); /* decode after a prompt */
    if (!s) s = zrt_profile(r, ZPLAN_DECODE, tok, 1, ns, d);
    if (!s) print_profile(p, ZPLAN_DECODE, 1, ns);
    free(ns);
    return s;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = {.p = 512, .n = 128, .r = 5};
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    zdiag d = {0};
    zrt *r = NULL;
    zstatus s = model_open("zinc bench", &o.m, &r, &d);
    const zplan *p = s ? NULL : zrt_plan(r);
    if (p && o.p + o.n + 1 > p->ctx)
        s = zdiag_set(&d, ZE_INVALID,
                      "-p %lld plus -n %lld exceed the plan's context of %u: recompile with --ctx",
                      (long long)o.p, (long long)o.n, p->ctx);
    int32_t *tok = NULL;
    int64_t m = (o.p > o.n ? o.p : o.n) + 1;
    if (!s && !(tok = malloc(sizeof *tok * (size_t)m))) s = zdiag_set(&d, ZE_NOMEM, "out of memory");
    for (int64_t i = 0; !s && i < m; i++)
        tok[i] = (int32_t)((i * 2654435761u) % p->n_vocab);
    if (!s) {
        printf("| %-28s | %-12s | %10s | %-24s |\n", "device", "test", "t/s", "min .. max t/s");
        printf("|%.30s|%.14s|%.12s|%.26s|\n", "------------------------------", "--------------",
               "------------", "--------------------------");
        s = measure(r, &o, tok, false, &d);
        if (!s) s = measure(r, &o, tok, true, &d);
        if (!s && o.profile) s = profile(r, &o, tok, &d);
    }
    free(tok);
    zrt_close(r);
    return s ? cli_fail("zinc bench", &d) : 0;
}
