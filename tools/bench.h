/* zinc bench's measurements and its report in llama-bench's forms: a
 * markdown table (model, size, params, backend, device, test, t/s as
 * mean ± sd), JSON (llama-bench's field names: n_prompt, n_gen, n_depth,
 * avg_ts, stddev_ts, samples_ts) or CSV. */
#ifndef ZINC_BENCH_H
#define ZINC_BENCH_H

#include <stdio.h>

#include "../runtime/zrt.h"

typedef struct bench_result {
    char test[64];       /* "pp512", "tg128", "pp512 @ d1024" */
    int64_t p, n, depth; /* n_prompt, n_gen, n_depth */
    double mean, sd;     /* tokens per second over the repetitions */
    double *samples;     /* [reps], malloc'd */
    int reps;
} bench_result;

typedef struct bench_model {
    char name[160];        /* "qwen3 1.39M q4_K": architecture, parameters, main weight type */
    uint64_t size, params; /* bytes and count of the weights */
    const char *device;
} bench_model;

/* One test: reps timed repetitions (after one warm-up) of a prefill of count
 * tokens (decode false) or of count decode steps, each after depth tokens of
 * context were prefilled (not timed). tok holds depth + count ids. */
zstatus bench_measure(zrt *r, const int32_t *tok, int64_t depth, int64_t count, bool decode, int reps,
                      bench_result *res, zdiag *d);

/* The same for decode in the plan's batch schedule: count steps of rows
 * sequences (seqs[0..rows), NULL the zrt's own) at once, one token each and
 * every row's logits read back (as zinc serve samples them), each sequence
 * after depth tokens of context. mean and sd are aggregate tokens per
 * second, all rows; the test is "tg128 x8". */
zstatus bench_measure_batch(zrt *r, zrt_seq *const *seqs, int rows, const int32_t *tok, int64_t depth,
                            int64_t count, int reps, bench_result *res, zdiag *d);

void bench_model_info(const zrt *r, bench_model *m);

/* format: "md", "json" or "csv"; fails only when JSON cannot be built or written. */
zstatus bench_print(const char *format, const bench_model *m, const bench_result *res, size_t n, FILE *to,
                    zdiag *d);

#endif
