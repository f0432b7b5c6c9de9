/* kv-type: the storage type of the KV cache. Decode reads the whole cache
 * of every layer for every token: at a context of 4096, Qwen3-8B's K and V
 * are 32 MiB a layer in f32, a quarter of the layer's weights. f16 halves
 * that (ggml's default, -ctk/-ctv f16). The values keep fp32 arithmetic:
 * only what is stored is rounded, and the interpreter rounds the same way,
 * so the kernels are still checked element by element. The default is f16
 * on targets that keep 2-byte activations (the GPUs), f32 elsewhere;
 * zincc --kv-type overrides it. */
#include <stdio.h>

#include "match.h"

static void record(const zpass_opts *o, const zir_value *c, ztype from, ztype to) {
    zpass_decision *x = zpass_report_add(o->report);
    if (!x) return;
    double per_token = zpass_elems_per_token(c, o->ctx);
    *x = (zpass_decision){.layer = c->layer,
                          .group = ZG_ATTN,
                          .phase = o->phase,
                          .what = c->name,
                          .width = c->width,
                          .bytes_before = per_token * (from == ZT_F16 ? 2 : 4),
                          .bytes_after = per_token * (to == ZT_F16 ? 2 : 4),
                          .fused = false,
                          .chosen = ZKT_NONE};
    snprintf(x->reason, sizeof x->reason, "KV cache stored as %s (%s)", ztype_name(to),
             o->kv_type ? "--kv-type" : "the target's default");
}

zstatus zpass_kv_type(zir_graph *g, const zpass_opts *o, zdiag *d) {
    if (o->kv_type != ZKV_TARGET && o->kv_type != ZKV_F32 && o->kv_type != ZKV_F16)
        return zdiag_set(d, ZE_INVALID, "kv-type: storage %d: expected f32 or f16", (int)o->kv_type);
    bool f16 = o->kv_type == ZKV_TARGET ? o->target->act_bytes == 2 : o->kv_type == ZKV_F16;
    ztype want = f16 ? ZT_F16 : ZT_F32;
    for (uint32_t i = 0; i < g->n_values; i++) {
        zir_value *v = g->values[i];
        /* recurrent states stay f32: their error would compound from step to step */
        if (v->role != ZR_KV || zir_value_is_state(v) || v->dtype == want) continue;
        record(o, v, v->dtype, want);
        v->dtype = want;
    }
    return ZOK;
}
