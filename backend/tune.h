/* zincc --tune: kernel layouts chosen by timing them on the device.
 *
 * The cost model decides what to fuse; how a kernel lays its work over the
 * device (rows per subgroup, groups in flight, workgroup size) is a fact of
 * the hardware that is cheaper to measure than to model. For every distinct
 * decode GEMV of a graph (by kernel key: same shapes, types and fusions share
 * one), the tuner compiles each candidate layout, runs it on the device on
 * the real weights, with the L2 flushed before every run (decode streams
 * weights far larger than any cache), and keeps the fastest. The result is a
 * zcg_tuning that lowering passes to codegen; every candidate is a layout
 * that the kernel tests check against the interpreter. */
#ifndef ZINC_TUNE_H
#define ZINC_TUNE_H

#include "codegen.h"
#include "vk.h"

/* One candidate's measurement, for the caller's report. */
typedef struct zvk_tune_row {
    const char *key;  /* the kernel key */
    const char *name; /* the candidate's kernel name */
    zcg_gemv layout;    /* all zero: codegen's default layout */
    double us;       /* median time of one dispatch */
    double gbs;      /* weight bytes bound / us */
    int64_t regs;    /* registers per invocation (-1: not reported) */
    bool is_default; /* codegen's layout without tuning */
    bool best;       /* set on the last row of a key: the winner (repeated) */
} zvk_tune_row;

typedef struct zvk_tune_opts {
    const ztarget *target;
    int64_t ctx;
    bool act_f16;
    const zcg_gemv *candidates; /* NULL: the built-in set */
    int n_candidates;
    int reps;             /* timed dispatches per candidate; 0: 15 */
    uint64_t flush_bytes; /* a buffer written between runs to evict the L2; 0: none */
    void (*report)(void *ctx, const zvk_tune_row *r); /* each candidate, then the winner; may be NULL */
    void *report_ctx;
} zvk_tune_opts;

/* The built-in candidate layouts (every one is checked by the kernel tests). */
const zcg_gemv *zvk_tune_candidates(int *n);

/* Times the candidates of each decode GEMV of g (the decode-phase graph)
 * on dev and fills out (arena-owned) with the fastest layout per key. */
zstatus zvk_tune_gemv(zvk_device *dev, const zir_graph *g, const zvk_tune_opts *o, zarena *a, zcg_tuning *out,
                      zdiag *d);

#endif
