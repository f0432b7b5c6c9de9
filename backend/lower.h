/* Lowering: from the fused graphs of both phases to a plan. It generates a
 * kernel per top-level node (deduplicating identical sources), compiles them
 * to SPIR-V with shaderc, plans memory (weights and KV caches in buffers of
 * their own, activations aliased by liveness in one arena), and schedules the
 * dispatches with a barrier only before a dispatch that touches what an
 * earlier dispatch of the open interval wrote (or writes what it read). */
#ifndef ZINC_LOWER_H
#define ZINC_LOWER_H

#include "../ir/ir.h"
#include "../passes/pass.h"
#include "plan.h"

typedef struct zlower_opts {
    const ztarget *target;
    int64_t max_tokens; /* prefill chunk: most tokens in one prefill step */
    int64_t ctx;        /* KV-cache capacity */
    bool act_f16;       /* activations stored as float16 */
    int64_t parallel;   /* zincc --parallel N: N KV slots and a batch schedule of up to N rows; 0: neither */
    /* The batch schedule's own fused graph (zpass_opts.batch_rows =
     * parallel), or NULL: the prefill graph's kernels. */
    const zir_graph *batch;
    const struct zcg_tuning *tuning; /* measured kernel layouts (zincc --tune), or NULL */
    const char *gguf_path;
    const void *gguf_base; /* the mapped GGUF: weight offsets are data - base */
    uint64_t gguf_size, gguf_hash;
    const char *device_name; /* "" when compiling for a named profile */
    uint32_t vendor_id, device_id;
    /* Called after each kernel is compiled (may be NULL). */
    void (*progress)(void *ctx, int done, int total);
    void *progress_ctx;
} zlower_opts;

/* g[ZPLAN_PREFILL] and g[ZPLAN_DECODE]: the two phases' fused graphs. With
 * o->parallel, the batch schedule is lowered from o->batch (else the
 * prefill graph): its matmuls multi-row GEMVs or GEMMs over the rows
 * (zcost_batch_gemv), its position-dependent kernels reading each row's
 * position and slot from the step buffer. */
zstatus zlower(zir_graph *const g[ZPLAN_PHASES], const zlower_opts *o, zplan **out, zdiag *d);

#endif
