#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../ir/dtype.h"
#include "../ir/json.h"

enum { BENCH_WARM_MAX = 64 };
#define BENCH_WARM_S 0.3

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds of one repetition: the context is emptied, depth tokens are
 * prefilled, then the prefill of count tokens or count decode steps is timed. */
static zstatus rep(zrt *r, const int32_t *tok, int64_t depth, int64_t count, bool decode, double *secs,
                   zdiag *d) {
    zrt_reset(r);
    zstatus s = depth ? zrt_eval(r, tok, (int)depth, NULL, d) : ZOK;
    double t0 = now_s();
    if (!s && !decode) s = zrt_eval(r, tok + depth, (int)count, NULL, d);
    for (int64_t i = 0; !s && decode && i < count; i++)
        s = zrt_run(r, ZPLAN_DECODE, &tok[depth + i], 1, NULL, d);
    *secs = now_s() - t0;
    return s;
}

/* The work one test repeats: a single sequence's, or a batch's. */
typedef struct bench_work {
    zrt_seq *const *seqs; /* NULL: one sequence (zrt_run) */
    int rows;
    float *logits; /* [n_vocab]: a row read back where a plan has no top-k of it */
} bench_work;

/* A batch's repetition: each sequence emptied and given depth tokens, then
 * count batch steps timed, each row's sampling input read as zinc serve
 * reads it: the row's top-k candidates (plans 1.4 on), else its logits. */
static zstatus rep_batch(zrt *r, const bench_work *w, const int32_t *tok, int64_t depth, int64_t count,
                         double *secs, zdiag *d) {
    zstatus s = ZOK;
    for (int b = 0; b < w->rows && !s; b++) {
        zrt_seq_use(r, w->seqs[b]);
        zrt_reset(r);
        s = depth ? zrt_eval(r, tok, (int)depth, NULL, d) : ZOK;
    }
    zrt_seq_use(r, NULL);
    int32_t row_tok[ZPLAN_MAX_SEQS];
    double t0 = now_s();
    for (int64_t i = 0; !s && i < count; i++) {
        for (int b = 0; b < w->rows; b++)
            row_tok[b] = tok[(depth + i + (int64_t)b) % (depth + count)];
        s = zrt_run_batch(r, w->seqs, row_tok, w->rows, NULL, d);
        for (int b = 0; b < w->rows && !s; b++) {
            zrt_sample_cand top[ZPLAN_TOPK_CAP];
            size_t n = 0;
            zdiag ignore = {0};
            zrt_seq_use(r, w->seqs[b]);
            if (zrt_top(r, top, &n, &ignore)) s = zrt_last_logits(r, w->logits, d);
        }
        zrt_seq_use(r, NULL);
    }
    *secs = now_s() - t0;
    return s;
}

static zstatus measure(zrt *r, const bench_work *w, const int32_t *tok, int64_t depth, int64_t count,
                       bool decode, int reps, bench_result *res, zdiag *d);

zstatus bench_measure_batch(zrt *r, zrt_seq *const *seqs, int rows, const int32_t *tok, int64_t depth,
                            int64_t count, int reps, bench_result *res, zdiag *d) {
    bench_work w = {seqs, rows, malloc(sizeof(float) * zrt_plan(r)->n_vocab)};
    zstatus s = w.logits ? measure(r, &w, tok, depth, count, true, reps, res, d)
                         : zdiag_set(d, ZE_NOMEM, "out of memory");
    if (!s) {
        size_t at = strlen(res->test);
        snprintf(res->test + at, sizeof res->test - at, " x%d", rows);
    }
    free(w.logits);
    return s;
}

zstatus bench_measure(zrt *r, const int32_t *tok, int64_t depth, int64_t count, bool decode, int reps,
                      bench_result *res, zdiag *d) {
    bench_work w = {NULL, 1, NULL};
    return measure(r, &w, tok, depth, count, decode, reps, res, d);
}

static zstatus measure(zrt *r, const bench_work *w, const int32_t *tok, int64_t depth, int64_t count,
                       bool decode, int reps, bench_result *res, zdiag *d) {
    memset(res, 0, sizeof *res);
    int at = snprintf(res->test, sizeof res->test, "%s%lld", decode ? "tg" : "pp", (long long)count);
    if (depth) snprintf(res->test + at, sizeof res->test - (size_t)at, " @ d%lld", (long long)depth);
    res->p = decode ? 0 : count, res->n = decode ? count : 0, res->depth = depth, res->reps = reps;
    if (!(res->samples = calloc((size_t)reps, sizeof *res->samples)))
        return zdiag_set(d, ZE_NOMEM, "out of memory");
    double secs, sum = 0, ss = 0;
    /* Warm-up: the same work until BENCH_WARM_S have passed (at most
     * BENCH_WARM_MAX repetitions). A GPU idles at a low clock while the plan
     * loads; a short step (the 0.6B's 512-token prefill is 15 ms on an H200)
     * repeated a few times never woke it, and pp512 measured 4.4x its GPU
     * time (docs/performance.md, run 18). */
    double warm = 0;
    zstatus s = ZOK;
    for (int i = 0; !s && i < BENCH_WARM_MAX && warm < BENCH_WARM_S; i++) {
        s = w->seqs ? rep_batch(r, w, tok, depth, count, &secs, d) : rep(r, tok, depth, count, decode, &secs, d);
        warm += secs;
    }
    for (int i = 0; i < reps && !s; i++) {
        s = w->seqs ? rep_batch(r, w, tok, depth, count, &secs, d) : rep(r, tok, depth, count, decode, &secs, d);
        res->samples[i] = (double)count * w->rows / secs;
        sum += res->samples[i];
    }
    res->mean = sum / reps;
    for (int i = 0; i < reps && !s; i++)
        ss += (res->samples[i] - res->mean) * (res->samples[i] - res->mean);
    res->sd = reps > 1 ? sqrt(ss / (reps - 1)) : 0; /* the sample deviation, as llama-bench */
    return s;
}

/* "1.39 M", "8.19 B"; sep between the number and the unit */
static void human(double v, const char *const *units, double step, const char *sep, char *buf, size_t n) {
    int u = 0;
    while (v >= step && units[u + 1])
        v /= step, u++;
    snprintf(buf, n, "%.2f%s%s", v, sep, units[u]);
}

void bench_model_info(const zrt *r, bench_model *m) {
    const gguf_file *f = zrt_gguf(r);
    uint64_t by_type[64] = {0};
    memset(m, 0, sizeof *m);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        m->params += f->tensors[i].n_elems;
        m->size += f->tensors[i].nbytes;
        if ((unsigned)f->tensors[i].type < 64) by_type[f->tensors[i].type] += f->tensors[i].nbytes;
    }
    int main_type = 0;
    for (int t = 1; t < 64; t++)
        if (by_type[t] > by_type[main_type]) main_type = t;
    const char *arch = "?";
    zdiag ignore = {0};
    gguf_opt_str(f, "general.architecture", &arch, &ignore);
    static const char *const COUNT[] = {"", "K", "M", "B", "T", NULL};
    char params[32];
    human((double)m->params, COUNT, 1000, "", params, sizeof params);
    snprintf(m->name, sizeof m->name, "%s %s %s", arch, params, ztype_name((ztype)main_type));
    m->device = zrt_device(r)->name;
}

/* ---- output ------------------------------------------------------------- */

static void dashes(int n, const char *end, FILE *to) {
    for (int i = 0; i < n; i++)
        fputc('-', to);
    fputs(end, to);
}

static void print_md(const bench_model *m, const bench_result *res, size_t n, FILE *to) {
    static const char *const BYTES[] = {"B", "KiB", "MiB", "GiB", "TiB", NULL};
    static const char *const COUNT[] = {"", "K", "M", "B", "T", NULL};
    char size[32], params[32], ts[64];
    human((double)m->size, BYTES, 1024, " ", size, sizeof size);
    human((double)m->params, COUNT, 1000, " ", params, sizeof params);
    int wm = (int)strlen(m->name), wd = (int)strlen(m->device), wt = 4, wv = 3;
    for (size_t i = 0; i < n; i++) {
        int l =
            snprintf(ts, sizeof ts, "%.2f ± %.2f", res[i].mean, res[i].sd) - 1; /* ± is 2 bytes, 1 column */
        wt = (int)strlen(res[i].test) > wt ? (int)strlen(res[i].test) : wt;
        wv = l > wv ? l : wv;
    }
    wm = wm < 5 ? 5 : wm, wd = wd < 6 ? 6 : wd;
    fprintf(to, "| %-*s | %10s | %10s | %-7s | %-*s | %*s | %*s |\n", wm, "model", "size", "params",
            "backend", wd, "device", wt, "test", wv, "t/s");
    fprintf(to, "| "), dashes(wm, "", to), fprintf(to, " | ---------: | ---------: | ------- | ");
    dashes(wd, "", to), fprintf(to, " | "), dashes(wt - 1, ":", to), fprintf(to, " | "),
        dashes(wv - 1, ":", to);
    fprintf(to, " |\n");
    for (size_t i = 0; i < n; i++) {
        int l = snprintf(ts, sizeof ts, "%.2f ± %.2f", res[i].mean, res[i].sd) - 1;
        fprintf(to, "| %-*s | %10s | %10s | %-7s | %-*s | %*s | %*s%s |\n", wm, m->name, size, params,
                "Vulkan", wd, m->device, wt, res[i].test, wv - l, "", ts);
    }
}

/* llama-bench prints t/s with 6 decimals: rounded to them, a value prints
 * the same with 15 significant digits (tok/s stays below 1e9). */
static json_t *ts_num(double v) {
    return zjson_num(round(v * 1e6) / 1e6);
}

/* An array of one object per test, with llama-bench's keys (ir/json.h: a
 * t/s that is not finite, as after a repetition timed at 0 s, is null). */
static zstatus print_json(const bench_model *m, const bench_result *res, size_t n, FILE *to, zdiag *d) {
    json_t *all = json_array();
    bool ok = all != NULL;
    for (size_t i = 0; i < n && ok; i++) {
        json_t *samples = json_array();
        for (int k = 0; k < res[i].reps; k++)
            ok &= !json_array_append_new(samples, ts_num(res[i].samples[k]));
        json_t *o = json_pack("{s:o, s:I, s:I, s:s, s:o, s:o, s:I, s:I, s:I, s:o, s:o, s:o}", "model",
                              zjson_str(m->name), "size", (json_int_t)m->size, "params",
                              (json_int_t)m->params, "backend", "Vulkan", "device", zjson_str(m->device),
                              "test", zjson_str(res[i].test), "n_prompt", (json_int_t)res[i].p, "n_gen",
                              (json_int_t)res[i].n, "n_depth", (json_int_t)res[i].depth, "avg_ts",
                              ts_num(res[i].mean), "stddev_ts", ts_num(res[i].sd), "samples_ts", samples);
        ok &= !json_array_append_new(all, o);
    }
    if (!ok) json_decref(all), all = NULL;
    return zjson_write(all, to, JSON_INDENT(2) | JSON_REAL_PRECISION(15), d);
}

/* A CSV field: quoted, inner quotes doubled (RFC 4180). */
static void csv_str(const char *s, FILE *to) {
    fputc('"', to);
    for (; *s; s++) {
        if (*s == '"') fputc('"', to);
        fputc(*s, to);
    }
    fputc('"', to);
}

static void print_csv(const bench_model *m, const bench_result *res, size_t n, FILE *to) {
    fputs("model,size,params,backend,device,test,n_prompt,n_gen,n_depth,avg_ts,stddev_ts\n", to);
    for (size_t i = 0; i < n; i++) {
        csv_str(m->name, to);
        fprintf(to, ",%llu,%llu,\"Vulkan\",", (unsigned long long)m->size, (unsigned long long)m->params);
        csv_str(m->device, to);
        fputc(',', to);
        csv_str(res[i].test, to);
        fprintf(to, ",%lld,%lld,%lld,%.6f,%.6f\n", (long long)res[i].p, (long long)res[i].n,
                (long long)res[i].depth, res[i].mean, res[i].sd);
    }
}

zstatus bench_print(const char *format, const bench_model *m, const bench_result *res, size_t n, FILE *to,
                    zdiag *d) {
    zstatus s = ZOK;
    if (!strcmp(format, "json"))
        s = print_json(m, res, n, to, d);
    else if (!strcmp(format, "csv"))
        print_csv(m, res, n, to);
    else
        print_md(m, res, n, to);
    fflush(to);
    return s;
}
