/* zincc's last step: lowering the compiled graphs to a plan file. */
#ifndef ZINC_ZINCC_PLAN_H
#define ZINC_ZINCC_PLAN_H

#include "../backend/lower.h"
#include "../backend/vk.h"
#include "../frontend/gguf.h"

typedef struct zincc_plan_opts {
    const ztarget *target;
    const zvk_profile *device; /* the live device compiled for, or NULL for a named profile */
    int64_t ctx, chunk;        /* KV capacity and prefill chunk */
    const char *out;
    bool progress;
} zincc_plan_opts;

/* Lowers g[prefill], g[decode] and writes the plan; prints one summary line
 * to stderr. */
zstatus zincc_write_plan(const gguf_file *f, zir_graph *const g[ZPLAN_PHASES], const zincc_plan_opts *o,
                         zdiag *d);

#endif
