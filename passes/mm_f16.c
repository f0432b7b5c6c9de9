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
 * kernels in prefill, and the expert matmuls (matmul_id) of fuse-moe's
 * grouped GEMMs (a kernel with a token tile: tiles of one expert's pairs). Decode (GEMVs, bound by bytes) and the whole-MLP
 * kernel keep fp32 operands. The default is f16 on targets with matrix
 * units; zincc --matmul f32|f16 overrides it.
 *
 * Decode: where the target's packed integer dot products are accelerated
 * and its GEMVs bound by their arithmetic (ztarget.gemv_int8, measured), or
 * as --gemv-x says, the GEMVs whose weights are all q4_K (or all q6_K) mark
 * their matmuls attr.gemv_q8: x quantized to int8 per 32 elements (q8_1),
 * each four weights one integer dot product, as llama.cpp rounds its
 * activations for quantized weights. On the H200 that made the 2-layer
 * 8B-wide decode step 18 % faster (run 23, docs/performance.md).
 *
 * A batch step whose matmuls are multi-row GEMVs (zpass_opts.batch_rows,
 * zcost_batch_gemv) decides as decode does: int8 x where the target wants
 * it, fp32 operands otherwise. Where the target's batch GEMVs run on its
 * matrix units (plans of ztarget.batch_gemv_cm_rows rows or more, or
 * ZINC_BATCH_CM=1/0;
 * matmul_gemvn_cm.glsl), those whose rows are a multiple of 64 long take
 * fp16 operands (attr.mm_f16) first, and int8 x goes to the rest.
 *
 * Prefill's matmuls of few output rows: a 512-token step of N 32 is 8
 * tensor-core tiles on the H200's 132 SMs, and its time the latency of
 * their K walk (run 51: Qwen3.5-9B's beta and alpha projections, ~64 us a
 * call, 3.1 ms of a 98.8 ms step). Where the cost model prices the
 * batch schedule's multi-row GEMV cheaper (zcost_prefill_gemv, from the
 * target's measurements), the matmul is marked attr.mm_gemv instead of
 * mm_f16: the GEMV sums fp32 operands, and the interpreter then computes
 * them too. Only a plain matmul or a matmul kernel ([norm] matmul, then
 * its add, epilogue or KV store) is priced: gate+up, the whole MLP, the
 * experts and the rows GEMVs have no such form; nor the step's logits,
 * whose GEMM computes only the rows the step reads. One report line per
 * priced matmul. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "match.h"

/* The report's line for a node this pass marked. */
static void record(const zpass_opts *o, const zir_node *n, const char *reason) {
    zpass_decision *x = zpass_report_add(o->report);
    if (!x) return;
    *x = (zpass_decision){.layer = n->layer,
                          .group = n->group,
                          .phase = o->phase,
                          .what = n->out->name,
                          .width = n->out->width,
                          .fused = false,
                          .chosen = n->op == ZOP_KERNEL ? n->kp.tmpl : ZKT_NONE};
    snprintf(x->reason, sizeof x->reason, "%s", reason);
}

/* The GEMV templates (cg_matmul.c's gen_gemv, gen_gemvn) whose matmuls are
 * all q4_K or all q6_K (one group layout), with a row of x fitting the
 * target's shared memory as int8 (the decode GEMV stages it there; the
 * multi-row GEMV's quantizing pass writes a batch step's rows to a scratch
 * buffer instead). */
static bool idot_gemv(const zir_node *n, const ztarget *t) {
    if (!zpass_gemv_node(n)) return false;
    bool kernel = n->op == ZOP_KERNEL;
    int k = 0;
    ztype ty = ZT_F32;
    for (int i = 0; i < (kernel ? n->n_body : 1); i++) {
        const zir_node *m = kernel ? n->body[i] : n;
        if (m->op != ZOP_MATMUL) continue;
        const zir_value *w = m->in[1];
        if (k == 0) ty = w->dtype;
        if (w->dtype != ty || (ty != ZT_Q4_K && ty != ZT_Q6_K) || w->rank != 2 ||
            ZPASS_IDOT_SMEM(w->shape[1], 1024) > (int64_t)t->smem_bytes)
            return false;
        k++;
    }
    return k > 0;
}

/* A GEMV node's matmuls (the node itself or its kernel's) marked: int8 x
 * (attr.gemv_q8) or fp16 operands (attr.mm_f16, cm_gemv). */
static int mark_gemv(zir_node *n, bool f16) {
    for (int i = 0; i < (n->op == ZOP_MATMUL ? 1 : n->n_body); i++) {
        zir_node *m = n->op == ZOP_MATMUL ? n : n->body[i];
        if (m->op != ZOP_MATMUL) continue;
        if (f16) m->attr.mm_f16 = true;
        else m->attr.gemv_q8 = true;
    }
    return 1;
}


/* A batch GEMV node the tensor-core multi-row GEMV can run: every
 * matmul's weights a matrix whose rows are a multiple of 64 long (its K
 * step). */
static bool cm_gemv(const zir_node *n) {
    if (!zpass_gemv_node(n)) return false;
    bool kernel = n->op == ZOP_KERNEL;
    int k = 0;
    for (int i = 0; i < (kernel ? n->n_body : 1); i++) {
        const zir_node *m = kernel ? n->body[i] : n;
        if (m->op != ZOP_MATMUL) continue;
        if (m->in[1]->rank != 2 || m->in[1]->shape[1] % 64) return false;
        k++;
    }
    return k > 0;
}

static bool batch_cm_wanted(const zpass_opts *o) {
    if (!o->target->coopmat || o->target->subgroup != 32) return false;
    const char *e = getenv("ZINC_BATCH_CM");
    if (e && *e) return atoi(e) != 0;
    return o->target->batch_gemv_cm_rows > 0 && o->batch_rows >= o->target->batch_gemv_cm_rows;
}

static bool idot_wanted(const zpass_opts *o) {
    if (!o->target->int_dot) return false;
    bool target = o->phase == ZPH_DECODE ? o->target->gemv_int8 : o->target->batch_gemv_int8;
    return o->gemv_idot == ZIDOT_TARGET ? target : o->gemv_idot == ZIDOT_ON;
}

static int mark(zir_node *n) {
    int k = 0;
    if (n->op == ZOP_MATMUL) {
        n->attr.mm_f16 = true;
        return 1;
    }
    if (n->op != ZOP_KERNEL) return 0;
    bool grouped = (n->kp.tmpl == ZKT_MOE_GATE_UP || n->kp.tmpl == ZKT_MOE_DOWN) && n->kp.token_tile > 1;
    if (n->kp.tmpl != ZKT_MATMUL && n->kp.tmpl != ZKT_GATE_UP_SWIGLU && !grouped) return 0;
    for (int i = 0; i < n->n_body; i++)
        if (n->body[i]->op == (grouped ? ZOP_MATMUL_ID : ZOP_MATMUL)) {
            n->body[i]->attr.mm_f16 = true;
            k++;
        }
    return k;
}

/* The matmul of a prefill node the multi-row GEMV could compute (see the
 * file comment), or NULL. */
static zir_node *gemv_candidate(const zir_graph *g, zir_node *n) {
    if (n->out == g->logits) return NULL;
    if (n->op == ZOP_MATMUL) return n;
    if (n->op != ZOP_KERNEL || n->kp.tmpl != ZKT_MATMUL) return NULL;
    for (int i = 0; i < n->n_body; i++)
        if (n->body[i]->op == ZOP_MATMUL) return n->body[i];
    return NULL;
}

/* Marks prefill's matmuls: the multi-row GEMV where the cost model prices
 * it cheaper, else fp16 operands when f16 says so. */
static void mark_prefill(zir_graph *g, const zpass_opts *o, bool f16) {
    const char *f16_why = o->mm_type != ZMM_TARGET
                              ? "matmul operands in fp16, sums in fp32 (--matmul)"
                              : "matmul operands in fp16, sums in fp32 (the target's matrix units)";
    int64_t T = zcost_prefill_tokens(o);
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *n = g->nodes[i], *m = gemv_candidate(g, n);
        char why[240] = "";
        const zir_value *w = m ? m->in[1] : NULL;
        if (w && w->rank == 2 &&
            zcost_prefill_gemv(o->target, w->shape[0], w->shape[1], T, why, sizeof why)) {
            m->attr.mm_gemv = true;
            record(o, n, why);
            continue;
        }
        /* the GEMMs' side of a priced decision goes on the fp16 line */
        bool priced =
            w && ((o->target->cm_step_us > 0 && o->target->gemvn_tflops > 0) || getenv("ZINC_PREFILL_GEMV"));
        char line[320];
        snprintf(line, sizeof line, "%s%s%s", f16_why, priced ? "; " : "", priced ? why : "");
        if (f16 && mark(n)) record(o, n, line);
    }
}

/* A node whose x and output go through matmul_io.glsl: a plain matmul, or
 * a matmul or gate+up kernel. */
static bool gemm_node(const zir_node *n) {
    return n->op == ZOP_MATMUL ||
           (n->op == ZOP_KERNEL && (n->kp.tmpl == ZKT_MATMUL || n->kp.tmpl == ZKT_GATE_UP_SWIGLU));
}

/* How top-level node n reads v: 0 not at all, 1 only as the x of matmuls
 * with fp16 operands, 2 otherwise (a norm prologue, a residual, ...). */
static int read_kind(const zir_node *n, const zir_value *v) {
    bool kernel = n->op == ZOP_KERNEL;
    int kind = 0;
    for (int i = 0; i < (kernel ? n->n_body : 1); i++) {
        const zir_node *b = kernel ? n->body[i] : n;
        for (int j = 0; j < b->n_in; j++)
            if (b->in[j] == v) {
                if (b->op != ZOP_MATMUL || j != 0 || !b->attr.mm_f16) return 2;
                kind = 1;
            }
    }
    return kind;
}

/* Whether n's output can be written in fp16: a plain rms_norm
 * (rms_norm.glsl), an attention kernel (attention.glsl, attn_cm.glsl), or
 * a matmul or gate+up kernel with fp16 operands whose output is an
 * activation (matmul_io.glsl's store_y; not a KV store). */
static bool writes_f16(const zir_node *n) {
    if (n->op == ZOP_RMS_NORM) return n->out->rank == 2;
    if (n->op == ZOP_KERNEL && n->kp.tmpl == ZKT_ATTENTION) return n->out->role == ZR_ACTIVATION;
    if (!gemm_node(n)) return false;
    const zir_node *last = n->op == ZOP_KERNEL ? n->body[n->n_body - 1] : n;
    return zpass_gemv_f16(n) && last->op != ZOP_KV_STORE && n->out->role == ZR_ACTIVATION;
}

/* Whether v has readers (from node `from` on) and every one reads it as
 * fp16 matmuls' x, through views (a reshape of attention's heads) at most
 * 4 deep: those go into views. */
static bool f16_readers(const zir_graph *g, uint32_t from, const zir_value *v, zir_value **views, int *n_views) {
    int readers = 0;
    for (uint32_t j = from; j < g->n_nodes; j++) {
        const zir_node *c = g->nodes[j];
        int kind = read_kind(c, v);
        if (!kind) continue;
        readers++;
        if (c->op != ZOP_KERNEL && (zir_ops[c->op].flags & ZF_VIEW) && c->in[0] == v && *n_views < 4) {
            views[(*n_views)++] = c->out;
            if (!f16_readers(g, j + 1, c->out, views, n_views)) return false;
        } else if (kind != 1 || !gemm_node(c))
            return false;
    }
    return readers > 0;
}

/* Activations that only fp16 matmuls read are kept in fp16: each reader
 * rounds x to fp16 (attr.mm_f16) before its products, so rounding once
 * where it is written changes no value (the interpreter rounds there too)
 * and halves the bytes its GEMMs stage: the prefill GEMMs' x is read once
 * per tile of weight rows. The norms before q, k, v and gate+up, the
 * attention output before o and the SwiGLU product before down, in a
 * Qwen3 layer. Run 72 (H100): the 8B's pp512 8287 -> 9227 tok/s (+11 %),
 * the kernel tests of the tensor-core GEMMs reading fp16 x 10/10 and the
 * end-to-end plans 26/26 on the driver. ZINC_X16=0 turns it off, to
 * measure against. */
static void keep_f16(zir_graph *g, const zpass_opts *o) {
    if (getenv("ZINC_X16") && !strcmp(getenv("ZINC_X16"), "0")) return;
    int kept = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        zir_node *p = g->nodes[i];
        zir_value *v = p->out;
        if (!v || v->role != ZR_ACTIVATION || v == g->logits || !writes_f16(p)) continue;
        zir_value *views[4];
        int n_views = 0;
        if (!f16_readers(g, i + 1, v, views, &n_views)) continue;
        v->store_f16 = true;
        for (int k = 0; k < n_views; k++) /* a view aliases v's buffer */
            views[k]->store_f16 = true;
        kept++;
    }
    zpass_decision *x = kept ? zpass_report_add(o->report) : NULL;
    if (x) {
        *x = (zpass_decision){.layer = -1, .group = ZG_OUTPUT, .phase = o->phase, .what = "fp16 x", .width = 1};
        snprintf(x->reason, sizeof x->reason,
                 "%d activation%s kept in fp16: only fp16 matmuls read %s, so their GEMMs read half the bytes",
                 kept, kept == 1 ? "" : "s", kept == 1 ? "it" : "them");
    }
}

zstatus zpass_mm_f16(zir_graph *g, const zpass_opts *o, zdiag *d) {
    if (o->mm_type != ZMM_TARGET && o->mm_type != ZMM_F32 && o->mm_type != ZMM_F16)
        return zdiag_set(d, ZE_INVALID, "mm-f16: matmul type %d: expected f32 or f16", (int)o->mm_type);
    if ((unsigned)o->gemv_idot > ZIDOT_ON)
        return zdiag_set(d, ZE_INVALID, "mm-f16: GEMV int-dot choice %d: expected target, off or on",
                         (int)o->gemv_idot);
    bool gemvs = o->phase == ZPH_DECODE || zcost_gemv_batch(o);
    if (gemvs && o->phase != ZPH_DECODE && batch_cm_wanted(o)) {
        int marked = 0, all = 0;
        for (uint32_t i = 0; i < g->n_nodes; i++) {
            zir_node *n = g->nodes[i];
            all += zpass_gemv_node(n);
            if (cm_gemv(n)) marked += mark_gemv(n, true);
        }
        zpass_decision *x = marked ? zpass_report_add(o->report) : NULL;
        if (x) {
            *x = (zpass_decision){.layer = -1, .group = ZG_OUTPUT, .phase = o->phase, .what = "batch gemv", .width = 1};
            snprintf(x->reason, sizeof x->reason,
                     "%d of %d multi-row GEMVs on the matrix units: fp16 operands, fp32 sums (%s)", marked, all,
                     getenv("ZINC_BATCH_CM") ? "ZINC_BATCH_CM"
                                             : "the target's, from its measured crossover in rows");
        }
    }
    if (gemvs && idot_wanted(o)) {
        int marked = 0, gemvs = 0;
        for (uint32_t i = 0; i < g->n_nodes; i++) {
            zir_node *n = g->nodes[i];
            gemvs += zpass_gemv_node(n);
            if (idot_gemv(n, o->target) && !zpass_gemv_f16(n)) marked += mark_gemv(n, false);
        }
        /* one line for the model, under the output group: the rows of the
         * layers stay the fusions' */
        zpass_decision *x = marked ? zpass_report_add(o->report) : NULL;
        if (x) {
            *x = (zpass_decision){.layer = -1, .group = ZG_OUTPUT, .phase = o->phase, .what = "gemv x", .width = 1};
            snprintf(x->reason, sizeof x->reason,
                     "%d of %d GEMVs take x quantized to int8 per 32 (q8_1), k-quant products as packed integer "
                     "dot products (%s)%s",
                     marked, gemvs, o->gemv_idot == ZIDOT_ON ? "--gemv-x int8" : "the target's, faster there",
                     marked < gemvs ? "; the others (weights of mixed or other types) keep fp32 x" : "");
        }
    }
    bool f16 = o->mm_type == ZMM_TARGET ? o->target->coopmat : o->mm_type == ZMM_F16;
    if (o->phase == ZPH_PREFILL && !gemvs) mark_prefill(g, o, f16);
    if (o->phase == ZPH_PREFILL && !gemvs && f16) keep_f16(g, o);
    return ZOK;
}
