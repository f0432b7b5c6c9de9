/* zincc's compile path, shared by zincc and by zinc (which compiles a GGUF
 * it is given directly, into its plan cache: tools/plan_cache.c). */
#ifndef ZINC_ZINCC_PLAN_H
#define ZINC_ZINCC_PLAN_H

#include "../backend/lower.h"
#include "../backend/vk.h"
#include "../frontend/gguf.h"

typedef struct zincc_plan_opts {
    const ztarget *target;
    const zvk_profile *device; /* the live device compiled for, or NULL for a named profile */
    int64_t ctx, chunk;        /* KV capacity (a sequence's) and prefill chunk */
    int64_t parallel;          /* --parallel N: N KV slots and a batch decode schedule; 0: none */
    const char *out;           /* zincc_write_plan: where the plan goes */
    bool progress;
    const char *prog;                /* who says what was written: "zincc" when NULL */
    const struct zcg_tuning *tuning; /* zincc --tune's measured layouts, or NULL */
    const zir_graph *batch;          /* the batch schedule's graph (zincc_batch_graph), or NULL */
} zincc_plan_opts;

/* The context when none is asked for: 4096, or the model's training context
 * if smaller. */
int64_t zincc_default_ctx(const gguf_file *f);
/* Warns on stderr when ctx is more than the model's training context. */
void zincc_check_ctx(const char *prog, const gguf_file *f, int64_t ctx);
/* The prefill chunk when none is asked for: 512, at most the context. */
int64_t zincc_default_chunk(int64_t ctx);

/* The batch schedule's graph (--parallel N): built from f and compiled
 * with the prefill phase's options and batch_rows = parallel (no report,
 * no --print-after), with the pipeline and disabled passes given (NULL: the
 * default pipeline, none disabled). */
zstatus zincc_batch_graph(const gguf_file *f, const zpass_opts *prefill, int64_t parallel, const char *passes,
                          const char *disabled, zir_graph **out, zdiag *d);
/* Lowers g[prefill], g[decode] (and o->batch) into a plan (*out, the caller frees it). */
zstatus zincc_lower_plan(const gguf_file *f, zir_graph *const g[ZPLAN_PHASES], const zincc_plan_opts *o,
                         zplan **out, zdiag *d);
/* Lowers and writes the plan to o->out; prints one summary line to stderr. */
zstatus zincc_write_plan(const gguf_file *f, zir_graph *const g[ZPLAN_PHASES], const zincc_plan_opts *o,
                         zdiag *d);
/* The whole compile with the default pipeline: builds both phases from f,
 * runs the passes for o->target and lowers them (*out, the caller frees it). */
zstatus zincc_compile(const gguf_file *f, const zincc_plan_opts *o, zplan **out, zdiag *d);
/* "wrote PATH: 24 kernels, 29 + 29 dispatches (prefill + decode), ctx 96"
 * (+ ", batch of 4: 29 dispatches" with --parallel) */
void zincc_print_summary(const char *prog, const char *verb, const char *path, const zplan *p);

#endif
