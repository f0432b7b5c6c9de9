/* zincc --tune: kernel layouts chosen by timing them on the device.
 *
 * The cost model decides what to fuse; how a kernel lays its work over the
 * device (rows per subgroup, groups in flight, workgroup size; a prefill
 * GEMM's tokens and subgroups a workgroup) is a fact of the hardware that is
 * cheaper to measure than to model. For every distinct decode GEMV of a
 * graph, and every prefill GEMM on the matrix units (by kernel key: same
 * shapes, types and fusions share one), the tuner compiles each candidate
 * layout and runs it on the device on the real weights as a step runs it
 * (a prefill GEMM over the plan's chunk of tokens): warm clocks, each
 * dispatch behind a barrier, its weights not in the L2 (it goes round copies
 * of them larger than the L2 together, as a step streams weights far larger
 * than any cache), and keeps the fastest. The result is a zcg_tuning that
 * lowering passes to codegen; every candidate is a layout that the kernel
 * tests check against the interpreter. */
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
    int reps;            /* timed runs per candidate (the median is kept); 0: 15 */
    uint64_t ring_bytes; /* the weights' copies add up to this (2 to 64 copies); 0: one, the L2 may hold it */
    double warm_s;       /* each candidate runs this long before it is timed */
    void (*report)(void *ctx, const zvk_tune_row *r); /* each candidate, then the winner; may be NULL */
    void *report_ctx;
} zvk_tune_opts;

/* The built-in candidate layouts (every one is checked by the kernel tests). */
const zcg_gemv *zvk_tune_candidates(int *n);

/* Times the candidates of each decode GEMV of g (the decode-phase graph)
 * on dev and fills out (arena-owned) with the fastest layout per key. */
zstatus zvk_tune_gemv(zvk_device *dev, const zir_graph *g, const zvk_tune_opts *o, zarena *a, zcg_tuning *out,
                      zdiag *d);

/* The prefill GEMMs' candidate layouts (matmul_cmp.glsl: tokens and
 * subgroups a workgroup; the kernel tests check each on a device with
 * matrix units). */
const zcg_gemv *zvk_tune_gemm_candidates(int *n);

/* Times the candidates of each prefill GEMM on the matrix units of g (the
 * prefill-phase graph) at steps of `tokens` and adds the fastest layout
 * per key to out (which zvk_tune_gemv may have filled). */
zstatus zvk_tune_gemm(zvk_device *dev, const zir_graph *g, int64_t tokens, const zvk_tune_opts *o, zarena *a,
                      zcg_tuning *out, zdiag *d);

#endif
