/* mm-f16: prefill matmuls take fp16 operands, as the matrix units
 * (cooperative matrix) multiply them. A prefill step of 512 tokens is
 * bound by arithmetic, not bytes: on the H200 the tensor cores do fp16
 * products with fp32 sums many times faster than the scalar units do fp32.
 * The precision is a plan decision, not a kernel's: the pass marks each
 * matmul (attr.mm_f16), the interpreter rounds both operands the same way,
 * and every kernel that computes a marked matmul rounds them too (the
 * tensor-core GEMM by construction, the scalar GEMM where a device lacks
 * matrix units), so kernels are still checked element by element.
 *
 * Marked: top-level matmuls and those of [norm] matmul [add] and gate+up
 * kernels in prefill. Decode (GEMVs, bound by bytes) and the whole-MLP
 * kernel keep fp32 operands. The default is f16 on targets with matrix
 * units; zincc --matmul f32|f16 overrides it. */
#include <stdio.h>

#include "match.h"

static void record(const zpass_opts *o, const zir_node *n) {
    zpass_decision *x = zpass_report_add(o->report);
    if (!x) return;
    *x = (zpass_decision){.layer = n->layer,
                          .group = n->group,
                          .phase = o->phase,
                          .what = n->out->name,
                          .width = n->out->width,
                          .fused = false,
                          .chosen = n->op == ZOP_KERNEL ? n->kp.tmpl : ZKT_NONE};
    snprintf(x->reason, sizeof x->reason, "matmul operands in fp16, sums in fp32 (%s)",
             o->mm_type != ZMM_TARGET ? "--matmul"
                                      : "the target's matrix units");
}

static int mark(zir_node *n) {
    int k = 0;
    if (n->op == ZOP_MATMUL) {
        n->attr.mm_f16 = true;
        return 1;
    }
    if (n->op != ZOP_KERNEL || (n->kp.tmpl != ZKT_MATMUL && n->kp.tmpl != ZKT_GATE_UP_SWIGLU)) return 0;
    for (int i = 0; i < n->n_body; i++)
        if (n->body[i]->op == ZOP_MATMUL) {
            n->body[i]->attr.mm_f16 = true;
            k++;
        }
    return k;
}

zstatus zpass_mm_f16(zir_graph *g, const zpass_opts *o, zdiag *d) {
    if (o->mm_type != ZMM_TARGET && o->mm_type != ZMM_F32 && o->mm_type != ZMM_F16)
        return zdiag_set(d, ZE_INVALID, "mm-f16: matmul type %d: expected f32 or f16", (int)o->mm_type);
    bool f16 = o->mm_type == ZMM_TARGET ? o->target->coopmat : o->mm_type == ZMM_F16;
    if (!f16 || o->phase != ZPH_PREFILL) return ZOK;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (mark(g->nodes[i])) record(o, g->nodes[i]);
    return ZOK;
}
