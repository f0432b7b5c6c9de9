/* zinc bench: throughput of a model, reported like llama-bench (pp512,
 * tg128): prefill of -p tokens and decode of -n tokens, each repeated -r
 * times, optionally after -d tokens of context; mean ± sd of the repetitions
 * (tools/bench.c measures and prints). --profile times every dispatch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../backend/target_vk.h"
#include "../runtime/zrt.h"
#include "bench.h"
#include "cli.h"
#include "model.h"

static const char *const usage =
    "usage: zinc bench MODEL.gguf|PLAN.zplan [-p 512] [-n 128] [-d 0] [-r 5] [--parallel N,...]\n"
    "                  [-o md|json|csv] [--profile]\n"
    "\n"
    "Measures prompt processing (pp: one prefill of -p tokens, in the plan's chunks)\n"
    "and text generation (tg: -n decode steps, the recorded step replayed), each\n"
    "repeated -r times after a warm-up (the same work, repeated for at least 0.3 s so\n"
    "that the GPU's clocks are up), with random token ids, and prints the mean\n"
    "tokens per second ± the standard deviation of the repetitions, as llama-bench.\n"
    "\n"
    "  -p N,N,...   prompt lengths, one pp test each; 0 skips pp (default 512)\n"
    "  -n N,N,...   numbers of generated tokens, one tg test each; 0 skips tg (default 128)\n"
    "  -d N,N,...   depths: each test runs after N tokens of context were prefilled (not timed),\n"
    "               so tg at depth measures decode over a filled KV cache (default 0)\n"
    "  -r N         repetitions, 1..1000 (default 5)\n"
    "  --parallel N,N,...\n"
    "               each tg test instead advances N sequences at once in the plan's batch decode\n"
    "               schedule (tg128 x8: 128 steps of 8 tokens, each row's 64 candidates from the\n"
    "               GPU's top-k read back, as zinc serve samples them); t/s is the aggregate of\n"
    "               all N. A GGUF is compiled with zincc --parallel (the largest N); a plan\n"
    "               must have been compiled with one at least as large (docs/server.md)\n"
    "  -o FORMAT    md (a table), json (llama-bench's fields: n_prompt, n_gen, n_depth, avg_ts,\n"
    "               stddev_ts, samples_ts; t/s to 6 decimals, null when not finite) or csv\n"
    "               (default md)\n"
    "  --profile    also time every dispatch of one prefill step and one decode step (and a\n"
    "               batch step of each --parallel N) on the GPU (timestamps), at each depth,\n"
    "               and print each kernel's share of the step; with -o json or csv the\n"
    "               profile goes to stderr, so that stdout stays one document\n"
    "\n"
    "model:\n";

typedef struct bench_opts {
    model_opts m;
    int32_t *p, *n, *dep, *par; /* value lists */
    int np, nn, nd, npar;
    int64_t r;
    const char *format;
    bool profile;
} bench_opts;

static int max_of(const int32_t *v, int n) {
    int m = 0;
    for (int i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* A value list flag (-p 128,512); 1 when argv[*i] was one, -1 (message
 * printed) for a bad value. */
static int list_opt(int argc, char **argv, int *i, const char *name, int32_t **v, int *n) {
    const char *val = NULL;
    bool miss = false;
    if (!cli_opt(argc, argv, i, name, &val, &miss)) return 0;
    free(*v);
    *v = NULL;
    if (miss || !cli_parse_int_list(val, v, n) || max_of(*v, *n) > 1 << 20) {
        cli_usage_error("zinc bench", "%s expects numbers 0..1048576 separated by commas, like 128,512",
                        name);
        return -1;
    }
    return 1;
}

static int parse(int argc, char **argv, bench_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        bool miss = false;
        int l = list_opt(argc, argv, &i, "-p", &o->p, &o->np);
        if (!l) l = list_opt(argc, argv, &i, "-n", &o->n, &o->nn);
        if (!l) l = list_opt(argc, argv, &i, "-d", &o->dep, &o->nd);
        if (!l) l = list_opt(argc, argv, &i, "--parallel", &o->par, &o->npar);
        if (l < 0) return CLI_EXIT_USAGE;
        if (l > 0) continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            fputs(model_flags_help, stdout);
            exit(0);
        } else if (cli_opt(argc, argv, &i, "-r", &v, &miss)) {
            if (!miss && !cli_parse_i64(v, 1, 1000, &o->r))
                return cli_usage_error("zinc bench", "-r expects 1..1000");
        } else if (cli_opt(argc, argv, &i, "-o", &v, &miss)) {
            if (!miss && strcmp(v, "md") && strcmp(v, "json") && strcmp(v, "csv"))
                return cli_usage_error("zinc bench", "-o expects md, json or csv, not '%s'", v);
            o->format = v;
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
    for (int i = 0; i < o->npar; i++)
        if (o->par[i] < 1 || o->par[i] > ZPLAN_MAX_SEQS)
            return cli_usage_error("zinc bench", "--parallel expects sequences 1..%d, found %d", ZPLAN_MAX_SEQS,
                                   o->par[i]);
    o->m.parallel = max_of(o->par, o->npar);
    return o->m.path ? 0 : cli_usage_error("zinc bench", "no model given (a MODEL.gguf or a PLAN.zplan)");
}

typedef struct kernel_time {
    uint32_t kernel;
    double ns;
    double weight_bytes; /* weights bound, summed over calls */
    double kv_bytes;     /* the KV cache rows its calls read at the step's position */
    int count;
} kernel_time;

/* The share of an expert kernel's stacked weights that a step of T tokens
 * reads: its name says the experts (_e<E>) and the experts a token uses
 * (_u<U>), so at most T * U of E (1 for any other kernel). */
static double expert_share(const char *kernel, int T) {
    const char *e = strstr(kernel, "_e"), *u = strstr(kernel, "_u");
    int ne = 0, nu = 0;
    if (strncmp(kernel, "moe_", 4) || !e || !u || sscanf(e, "_e%d", &ne) != 1 || sscanf(u, "_u%d", &nu) != 1 ||
        ne <= 0 || nu <= 0)
        return 1;
    double f = (double)T * nu / ne;
    return f < 1 ? f : 1;
}

/* The weight bytes a dispatch streams in a step of T tokens: those of its
 * weight bindings, but none for the embedding gather, which binds the table
 * and reads one row, and only the used experts' share of an expert GEMV's. */
static double weight_bytes(const zplan *p, const zplan_dispatch *dp, int T) {
    const char *name = zplan_str(p, p->kernels[dp->kernel].name);
    if (!strncmp(name, "embed_", 6)) return 0;
    double b = 0;
    for (uint32_t j = 0; j < dp->n_bindings; j++) {
        const zplan_buffer *buf = &p->buffers[p->bindings[dp->first_binding + j].buffer];
        if (buf->kind == ZPB_WEIGHTS) b += (double)buf->size;
    }
    return b * expert_share(name, T);
}

/* The K and V rows a decode attention reads at position pos: keys 0 ..= pos
 * of each KV cache bound (a cache buffer holds n_seqs slots of ctx rows). */
static double kv_bytes(const zplan *p, const zplan_dispatch *dp, int64_t pos) {
    double b = 0;
    uint32_t slots = p->n_seqs ? p->n_seqs : 1;
    for (uint32_t j = 0; j < dp->n_bindings; j++) {
        const zplan_buffer *buf = &p->buffers[p->bindings[dp->first_binding + j].buffer];
        if (buf->kind == ZPB_KV && p->ctx) b += (double)buf->size / slots / p->ctx * (double)(pos + 1);
    }
    return b;
}

/* "regs 96", "regs 255 spill 40", or "" where the driver says nothing. */
static const char *regs_of(const zvk_pipeline_stats *st, char *buf, size_t n) {
    if (!st->valid || st->registers <= 0) return "";
    if (st->spills > 0)
        snprintf(buf, n, "%lld+%lld", (long long)st->registers, (long long)st->spills);
    else
        snprintf(buf, n, "%lld", (long long)st->registers);
    return buf;
}

static int by_time(const void *a, const void *b) {
    double x = ((const kernel_time *)a)->ns, y = ((const kernel_time *)b)->ns;
    return x > y ? -1 : x < y;
}

/* What a kernel would take if only its weights' bytes and its dispatch
 * mattered: the weights at the target's bandwidth, plus the dispatch cost
 * measured behind a barrier (print_calibration). The profile sets each
 * kernel's time beside it: a decode GEMV near 1x streams at the roofline,
 * far above it waits on something else; a kernel with no weights has only
 * the dispatch as its floor. In decode it also prints what the cost model
 * prices the kernel at (passes/cost.c): its weights at the fraction of the
 * bandwidth its family was measured to stream (the GEMVs' gemv_eff, the
 * split MLP's mlp_split_eff) plus the target's dispatch_us a call; where
 * that is more than 25 % off the measured time, the model needs fixing
 * (issue 9). Activations and caches are left out of both. */
typedef struct floor_model {
    double bw_gbs, dispatch_us;
    double gemv_eff, split_eff, model_dispatch_us; /* the cost model's, from the plan's target */
    double attn_chain_us, attn_q_us, attn_eff;     /* its decode attention (passes/pass.h) */
} floor_model;

/* The query heads one decode attention workgroup holds: its name says the
 * heads (_h<H>), the kv heads (_kv<KV>) and, when they are split over
 * workgroups, the parts (_q<Q>); 0 for any other kernel. */
static int attn_q_heads(const char *kernel) {
    int h = 0, kv = 0, q = 1;
    if (strncmp(kernel, "attn_decode_", 12) || sscanf(kernel, "attn_decode_h%d_kv%d", &h, &kv) != 2 || kv < 1)
        return 0;
    const char *qs = strstr(kernel, "_q");
    if (qs && (sscanf(qs, "_q%d", &q) != 1 || q < 1)) q = 1;
    return h / kv / q;
}

/* The cost model's price of one kernel's calls in microseconds (see
 * floor_model). Decode attention: its chain of dependent steps a call
 * (loads of q, the head preparation, the key trips, the merge), longer
 * with each query head a workgroup holds, plus the K and V rows at the
 * fraction of the bandwidth its loads were measured to reach. */
static double model_us(const floor_model *fm, const char *kernel, double weight_bytes, double kv, int count) {
    double e = !strncmp(kernel, "mlp_", 4) ? fm->split_eff : fm->gemv_eff;
    double us = (e > 0 && weight_bytes > 0 ? weight_bytes / (fm->bw_gbs * 1e3 * e) : 0) +
                count * fm->model_dispatch_us;
    int q = attn_q_heads(kernel);
    double ae = fm->attn_eff > 0 ? fm->attn_eff : 1;
    if (q) us += count * (fm->attn_chain_us + q * fm->attn_q_us) + kv / (fm->bw_gbs * 1e3 * ae);
    return us;
}

/* Each kernel's share of one step's GPU time, largest first. */
static void print_profile(const zrt *r, zplan_phase ph, int T, int64_t pos, const double *ns,
                          const floor_model *fm, FILE *to) {
    const zplan *p = zrt_plan(r);
    const zplan_schedule *sc = &p->sched[ph];
    kernel_time *k = calloc(p->n_kernels, sizeof *k);
    double total = 0;
    if (!k) return;
    for (uint32_t i = 0; i < p->n_kernels; i++)
        k[i].kernel = i;
    for (uint32_t i = 0; i < sc->count; i++) {
        const zplan_dispatch *dp = &p->dispatches[sc->first + i];
        k[dp->kernel].ns += ns[i];
        k[dp->kernel].weight_bytes += weight_bytes(p, dp, T);
        k[dp->kernel].kv_bytes += kv_bytes(p, dp, pos);
        k[dp->kernel].count++;
        total += ns[i];
    }
    qsort(k, p->n_kernels, sizeof *k, by_time);
    static const char *const names[ZPLAN_BATCH + 1] = {"prefill", "decode", "batch"};
    fprintf(to, "\n%s step of %d %s%s: %u dispatches, %.1f us on the GPU (%.2f us per token)\n", names[ph], T,
            ph == ZPLAN_BATCH ? "row" : "token", T == 1 ? "" : "s", sc->count, total / 1e3, total / 1e3 / T);
    /* weights GB/s: the bound weights over the time, what a decode kernel
     * streams; floor: see floor_model, and x the time over it; model: the
     * cost model's price (decode and batch steps: prefill GEMMs are priced
     * per token tile, not in time), and its x; regs: registers per
     * invocation (+ spilled), from the driver */
    bool priced = ph != ZPLAN_PREFILL;
    double model_total = 0;
    fprintf(to, "  %6s %6s %9s %8s %9s %6s %9s %6s %7s  %s\n", "share", "calls", "us", "wGB/s", "floor us", "x",
            "model us", "x", "regs", "kernel");
    for (uint32_t i = 0; i < p->n_kernels && k[i].count; i++) {
        char rb[32], mb[2][16] = {"-", "-"};
        const char *name = zplan_str(p, p->kernels[k[i].kernel].name);
        double fl = k[i].weight_bytes / (fm->bw_gbs * 1e3) + k[i].count * fm->dispatch_us;
        double us = k[i].ns / 1e3, mu = priced ? model_us(fm, name, k[i].weight_bytes, k[i].kv_bytes, k[i].count) : 0;
        model_total += mu;
        if (mu > 0) snprintf(mb[0], sizeof mb[0], "%.1f", mu), snprintf(mb[1], sizeof mb[1], "%.2f", us / mu);
        fprintf(to, "  %5.1f%% %6d %9.1f %8.0f %9.1f %6.1f %9s %6s %7s  %s\n", 100 * k[i].ns / total, k[i].count,
                us, k[i].weight_bytes / k[i].ns, fl, fl > 0 ? us / fl : 0, mb[0], mb[1],
                regs_of(zrt_kernel_stats(r, k[i].kernel), rb, sizeof rb), name);
    }
    if (priced && model_total > 0)
        fprintf(to,
                "  the cost model: %.1f us for the step's weights, attention and dispatches, the GPU: %.1f us "
                "(%+.0f %%)\n",
                model_total, total / 1e3, 100 * (total / 1e3 / model_total - 1));
    free(k);
}

/* The device's fixed costs beside what the plan's cost model assumed for
 * them (passes/target.c: dispatch_us prices a dispatch and its barrier). */
static zstatus print_calibration(zrt *r, FILE *to, floor_model *fm, zdiag *d) {
    const zplan *p = zrt_plan(r);
    ztarget dt;
    char name[300];
    zvk_target_from_profile(zrt_device(r), &dt, name, sizeof name);
    const ztarget *t = ztarget_find(zplan_str(p, p->target)); /* a named profile, else the device's */
    t = t ? t : &dt;
    zvk_calib c;
    zstatus s = zrt_calibrate(r, t->n_cu > 0 ? (uint32_t)t->n_cu * 8u : 0u, &c, d);
    if (s) return s;
    fprintf(to, "\ndispatch costs (median of %d runs of %d): %.2f us back to back, %.2f us behind a barrier, "
                "%.2f us behind a barrier across the device (%u workgroups)",
            c.reps, c.n, c.dispatch_us, c.barrier_us, c.wide_us, c.wide_groups);
    fprintf(to, "; the cost model (%s) assumes %.2f us a dispatch and its barrier", t->name, t->dispatch_us);
    fputc('\n', to);
    *fm = (floor_model){t->bandwidth_gbs > 0 ? t->bandwidth_gbs : 1,
                        c.wide_us,
                        t->gemv_eff,
                        t->mlp_split_eff,
                        t->dispatch_us,
                        t->attn_chain_us,
                        t->attn_q_us,
                        t->attn_eff};
    fprintf(to, "floor: a kernel's weights at %.0f GB/s (the cost model's bandwidth) plus %.2f us a dispatch\n",
            fm->bw_gbs, fm->dispatch_us);
    return ZOK;
}

/* A batch step of each --parallel N: the zrt's own sequence after depth
 * tokens, the others wherever the tests left them (the step does not move them). */
static zstatus profile_batches(zrt *r, const bench_opts *o, zrt_seq *const *seqs, const int32_t *tok,
                               int64_t depth, double *ns, const floor_model *fm, FILE *to, zdiag *d) {
    zstatus s = ZOK;
    for (int j = 0; j < o->npar && !s; j++) {
        s = zrt_profile_batch(r, seqs, tok, o->par[j], ns, d);
        if (!s) print_profile(r, ZPLAN_BATCH, o->par[j], depth, ns, fm, to);
    }
    return s;
}

/* One prefill step and one decode step after depth tokens of context, and
 * a batch step of each --parallel N. */
static zstatus profile(zrt *r, const bench_opts *o, zrt_seq *const *seqs, const int32_t *tok, int64_t depth,
                       const floor_model *fm, FILE *to, zdiag *d) {
    const zplan *p = zrt_plan(r);
    int64_t want = max_of(o->p, o->np), room = p->ctx - depth - 1;
    want = want < room ? want : room;
    int T = (int)(want < p->sched[ZPLAN_PREFILL].max_tokens ? want : p->sched[ZPLAN_PREFILL].max_tokens);
    uint32_t most = 0;
    for (int ph = 0; ph <= ZPLAN_BATCH; ph++)
        most = p->sched[ph].count > most ? p->sched[ph].count : most;
    double *ns = calloc(most + 1, sizeof *ns);
    if (!ns) return zdiag_set(d, ZE_NOMEM, "out of memory");
    zrt_reset(r);
    if (depth) fprintf(to, "\nat depth %lld:\n", (long long)depth);
    zstatus s = depth ? zrt_eval(r, tok, (int)depth, NULL, d) : ZOK;
    tok += depth;
    if (!s && T > 0) s = zrt_profile(r, ZPLAN_PREFILL, tok, T, ns, d);
    if (!s && T > 0) print_profile(r, ZPLAN_PREFILL, T, depth, ns, fm, to);
    if (!s) s = zrt_eval(r, tok, T > 0 ? T : 1, NULL, d); /* decode after a prompt */
    if (!s) s = zrt_profile(r, ZPLAN_DECODE, tok, 1, ns, d);
    if (!s) print_profile(r, ZPLAN_DECODE, 1, depth + (T > 0 ? T : 1), ns, fm, to);
    if (!s) s = profile_batches(r, o, seqs, tok, depth + (T > 0 ? T : 1), ns, fm, to, d);
    free(ns);
    return s;
}

/* The tg tests of --parallel: each -n at each N, over seqs[0..N). */
static zstatus run_batches(zrt *r, const bench_opts *o, zrt_seq *const *seqs, const int32_t *tok, int64_t depth,
                           int64_t count, bench_result *res, size_t *n, zdiag *d) {
    zstatus s = ZOK;
    for (int j = 0; j < o->npar && !s; j++)
        s = bench_measure_batch(r, seqs, o->par[j], tok, depth, count, (int)o->r, &res[(*n)++], d);
    return s;
}

/* Every test: for each depth, each -p then each -n (at each --parallel N);
 * zero lengths skip. */
static zstatus run_tests(zrt *r, const bench_opts *o, zrt_seq *const *seqs, const int32_t *tok,
                         bench_result *res, size_t *n, zdiag *d) {
    zstatus s = ZOK;
    *n = 0;
    for (int k = 0; k < o->nd && !s; k++)
        for (int i = 0; i < o->np + o->nn && !s; i++) {
            bool decode = i >= o->np;
            int64_t count = decode ? o->n[i - o->np] : o->p[i];
            if (count && decode && o->npar)
                s = run_batches(r, o, seqs, tok, o->dep[k], count, res, n, d);
            else if (count)
                s = bench_measure(r, tok, o->dep[k], count, decode, (int)o->r, &res[(*n)++], d);
        }
    return s;
}

/* The sequences of the largest --parallel N: the zrt's own and N - 1 more,
 * in a plan whose batch schedule takes N rows. */
static zstatus open_seqs(zrt *r, const bench_opts *o, zrt_seq **seqs, zdiag *d) {
    int most = max_of(o->par, o->npar), rows = zrt_batch_rows(r);
    if (!o->npar) return ZOK;
    if (rows < most)
        return zdiag_set(d, ZE_INVALID,
                         rows ? "--parallel %d: the plan's batch schedule takes at most %d sequences: recompile "
                                "it with zincc --parallel %d"
                              : "--parallel %d: the plan has no batch decode schedule (it takes %d): recompile "
                                "it with zincc --parallel %d",
                         most, rows, most);
    zstatus s = ZOK;
    for (int i = 1; i < most && !s; i++)
        s = zrt_seq_new(r, &seqs[i], d);
    return s;
}

/* The context the longest test needs: depth, length and one more. */
static int64_t tokens_needed(const bench_opts *o) {
    int p = max_of(o->p, o->np), n = max_of(o->n, o->nn);
    return (int64_t)max_of(o->dep, o->nd) + (p > n ? p : n) + 1;
}

static zstatus bench(zrt *r, const bench_opts *o, zdiag *d) {
    const zplan *p = zrt_plan(r);
    int64_t m = tokens_needed(o);
    size_t cap = (size_t)o->nd * (size_t)(o->np + o->nn * (o->npar ? o->npar : 1)), n = 0;
    int32_t *tok = malloc(sizeof *tok * (size_t)m);
    bench_result *res = calloc(cap ? cap : 1, sizeof *res);
    zrt_seq *seqs[ZPLAN_MAX_SEQS] = {0};
    zstatus s = tok && res ? ZOK : zdiag_set(d, ZE_NOMEM, "out of memory");
    if (!s) s = open_seqs(r, o, seqs, d);
    if (!s && m > p->ctx)
        s = zdiag_set(d, ZE_INVALID,
                      "a test needs %lld tokens of context (depth, length and one), more than the %u of the "
                      "plan: give a smaller -p, -n or -d, or a larger -c",
                      (long long)m, p->ctx);
    for (int64_t i = 0; !s && i < m; i++)
        tok[i] = (int32_t)((i * 2654435761u) % p->n_vocab);
    if (!s) s = run_tests(r, o, seqs, tok, res, &n, d);
    bench_model bm;
    bench_model_info(r, &bm);
    if (!s) s = bench_print(o->format, &bm, res, n, stdout, d);
    FILE *to = strcmp(o->format, "md") ? stderr : stdout; /* stdout stays one JSON or CSV document */
    floor_model fm = {1, 0, 0, 0, 0, 0, 0, 0};
    if (!s && o->profile) s = print_calibration(r, to, &fm, d);
    for (int k = 0; k < o->nd && !s && o->profile; k++)
        s = profile(r, o, seqs, tok, o->dep[k], &fm, to, d);
    for (int i = 1; i < ZPLAN_MAX_SEQS; i++)
        zrt_seq_free(r, seqs[i]);
    for (size_t i = 0; i < cap; i++)
        free(res[i].samples);
    free(res);
    free(tok);
    return s;
}

static void free_opts(bench_opts *o) {
    free(o->p), free(o->n), free(o->dep), free(o->par);
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = {.r = 5, .format = "md"};
    int rc = parse(argc, argv, &o);
    zdiag d = {0};
    if (!rc && ((!o.p && !cli_parse_int_list("512", &o.p, &o.np)) ||
                (!o.n && !cli_parse_int_list("128", &o.n, &o.nn)) ||
                (!o.dep && !cli_parse_int_list("0", &o.dep, &o.nd))))
        rc = cli_fail("zinc bench", (zdiag_set(&d, ZE_NOMEM, "out of memory"), &d));
    zrt *r = NULL;
    zstatus s = rc ? ZOK : model_open("zinc bench", &o.m, &r, &d);
    if (!rc && !s) s = bench(r, &o, &d);
    zrt_close(r);
    free_opts(&o);
    return rc ? rc : s ? cli_fail("zinc bench", &d) : 0;
}
