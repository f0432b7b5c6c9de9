/* The top-k selection kernel appended to every schedule (backend/glsl/topk.glsl). */
#include "codegen.h"

#include <stdio.h>

#include "plan.h"

zstatus zcg_topk(const zir_graph *g, const zcg_opts *o, zarena *a, zcg_kernel *out, zdiag *d) {
    (void)o;
    const char *defs[] = {"N_VOCAB",  zcg_i64(a, g->hp.n_vocab),  "TOPK_K", zcg_i64(a, ZPLAN_TOPK_K),
                          "TOPK_CAP", zcg_i64(a, ZPLAN_TOPK_CAP), "WG",     "256",
                          NULL};
    const char *files[] = {"topk", NULL};
    *out = (zcg_kernel){.n_bind = 2, .groups = {{0, 1, 1}, {0, 1, 1}, {0, 1, 1}}};
    snprintf(out->name, sizeof out->name, "topk%d_v%d", ZPLAN_TOPK_K, g->hp.n_vocab);
    out->bind[0] = (zcg_binding){.value = g->logits};
    out->bind[1] = (zcg_binding){.special = ZCG_BIND_TOPK, .written = true};
    if (!(out->glsl = zcg_compose(a, defs, files, o))) return zdiag_set(d, ZE_NOMEM, "out of memory");
    return ZOK;
}
