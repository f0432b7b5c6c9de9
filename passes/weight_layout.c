/* weight-layout: how the device holds each weight. The GGUF stays the only
 * file; the plan may keep a weight in another arrangement of the same bytes
 * on the device, and its load schedule rewrites it there after the upload
 * (docs/architecture.md, "Weight layouts").
 *
 * q6_K rows as planes (ZWL_Q6_PLANES). ggml's q6_K block is 210 bytes, so
 * its fields are only 2-byte aligned: a decode GEMV lane assembles each 8
 * bytes of a group from three 4-byte loads and funnel shifts (13 loads a
 * 32-element group, where q4_K's 144-byte blocks take 2 of 16 bytes), and
 * the tensor-core GEMM's staging runs its Q6_K tiles at ~75 TFLOP/s where
 * Q4_K's reach ~110 (run 53). In planes, each row holds the low nibbles of
 * all its blocks (128 bytes a block), then their high bits (64), their
 * scales (16) and their d's (2): the same bytes in the same row, every
 * field 8-byte aligned where the row is, 5 loads a group. Rows of K
 * elements are 210 K / 256 bytes, 8-byte aligned when K % 1024 == 0; the
 * repack kernel holds one row in shared memory. Nothing else changes: the
 * bytes per token, the kernels' arithmetic and so their results are those
 * of ggml's layout (the kernel tests check them against the interpreter).
 *
 * The decision is the same in every phase's graph (it depends on the
 * weight and the target only), as it must be: the phases share the weight
 * buffers. --disable-pass=weight-layout keeps ggml's blocks. */
#include <stdio.h>

#include "match.h"

/* Bytes of one q6_K row of k elements. */
static uint64_t q6_row_bytes(int64_t k) {
    return (uint64_t)k / 256u * 210u;
}

/* Whether w may be held as q6_K planes on target t, and why not. */
static const char *q6_planes_refusal(const zir_value *w, const ztarget *t) {
    if (w->dtype != ZT_Q6_K) return "not q6_K";
    int64_t k = w->shape[w->rank - 1];
    if (k % 1024) return "rows not a multiple of 1024 elements (8-byte aligned)";
    if (q6_row_bytes(k) > (t->smem_bytes ? t->smem_bytes : 16384u))
        return "a row larger than the repack kernel's shared memory";
    return NULL;
}

static void record(const zpass_opts *o, const zir_value *w) {
    zpass_decision *x = zpass_report_add(o->report);
    if (!x) return;
    int64_t k = w->shape[w->rank - 1];
    *x = (zpass_decision){.layer = w->layer,
                          .group = ZG_NONE,
                          .phase = o->phase,
                          .what = w->name,
                          .width = w->width,
                          .fused = false,
                          .chosen = ZKT_NONE};
    snprintf(x->reason, sizeof x->reason,
             "weight '%s' held as q6_K planes on the device (rows of %lld elements, %llu bytes: the quant, "
             "high-bit, scale and d planes 8-byte aligned; 5 loads a GEMV group instead of 13)",
             w->name, (long long)k, (unsigned long long)q6_row_bytes(k));
}

zstatus zpass_weight_layout(zir_graph *g, const zpass_opts *o, zdiag *d) {
    (void)d;
    for (uint32_t i = 0; i < g->n_values; i++) {
        zir_value *v = g->values[i];
        if (v->role != ZR_WEIGHT || v->rank < 2 || !v->data || v->layout != ZWL_GGUF) continue;
        if (q6_planes_refusal(v, o->target)) continue;
        v->layout = ZWL_Q6_PLANES;
        record(o, v);
    }
    return ZOK;
}
