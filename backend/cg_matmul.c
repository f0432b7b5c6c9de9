/* The matmul family of kernels: embedding lookups, plain matmuls and the
 * fused templates built around them (ZKT_MATMUL, ZKT_GATE_UP_SWIGLU,
 * ZKT_MLP). Each node becomes one GLSL kernel (backend/glsl/):
 *
 *   embed          ZOP_EMBED: dequantized rows of the table at token ids
 *   matmul_gemv    decode: a subgroup per output row, weights read once
 *   matmul_gemvn   a batch step's few rows: weights read once for them all
 *   matmul_gemm    prefill: token x row tiles staged in shared memory
 *   mlp            the whole MLP, intermediate on chip (split or tiled)
 *
 * with the RMSNorm prologue and the bias/residual epilogue of a kernel node
 * folded in. Weights are always dequantized inside the kernel (dequant.glsl):
 * a node whose dequant is ZDQ_STAGED still reads its quantized weight
 * directly, which is never slower than a staged copy would be.
 *
 * Shapes are #defines; only T comes from the step buffer. Every weight row
 * length must be a multiple of 8 (the dequantizers work on 8 elements). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../passes/cost.h"
#include "cg_build.h"

enum {
    MLP_MB_PREFILL = 32, /* intermediate rows per on-chip block (x the tile: shared memory) */
    MLP_MB_DECODE = 64,  /* one token: a longer block, 8 lanes per down row */
    EMBED_WG = 64,
};

static zcg_affine konst(int64_t v, int64_t div) {
    return (zcg_affine){0, v, div};
}
static zcg_affine per_token(int64_t a, int64_t div) {
    return (zcg_affine){a, 0, div};
}

/* ---- matching ------------------------------------------------------------ */

/* A segment of a matmul_rows kernel: its matmul and the epilogue fuse-qkv
 * gave it (fuse-epilogue's chain: a bias add, an activation, a product by
 * an [N] weight), and the value it writes: the chain's last. */
typedef struct mm_seg {
    const zir_node *mm, *bias, *unary, *emul;
    const zir_value *y;
} mm_seg;

/* What a node computes, whatever form it came in: a plain matmul, or a
 * kernel node whose body is [rms_norm] matmul(s) [swiglu [matmul]] [add]. */
typedef struct mm_match {
    const zir_node *norm, *glu, *add;
    const zir_node *unary, *emul; /* fuse-epilogue: a sigmoid, softplus or silu, then a product by an [N] weight */
    const zir_node
        *store; /* a kv_store the output goes to (through reshapes): the epilogue writes the cache */
    const zir_node *first, *up, *down; /* first: the only matmul, or gate */
    const zir_value *x;                /* the activation read (before the norm) */
    const zir_value *other;            /* the add's operand that is not the matmul's */
    int add_mode;                      /* 0 none, 1 residual [T,N], 2 bias [N] */
    int64_t K, N;                      /* of the first matmul */
    /* matmul_rows: the segments in row order; the last one's matmul is
     * `first` and its value the kernel's output, the others are exported. */
    mm_seg seg[ZIR_MAX_SEGMENTS];
    int n_seg;
} mm_match;

static zstatus bad(const zir_node *n, const char *why, zdiag *d) {
    return zdiag_set(d, ZE_UNSUPPORTED, "codegen: kernel '%s' (%s): %s", n->out->name,
                     zir_ktemplate_name(n->kp.tmpl), why);
}

static zstatus no_slot(const zir_node *n, const zir_node *b, zdiag *d) {
    return zdiag_set(d, ZE_UNSUPPORTED, "codegen: kernel '%s' (%s): body node '%s' (%s) fits no slot",
                     n->out->name, zir_ktemplate_name(n->kp.tmpl), b->out->name, zir_ops[b->op].name);
}

static bool is_unary(const zir_node *b) {
    return b->op == ZOP_SIGMOID || b->op == ZOP_SOFTPLUS || b->op == ZOP_SILU;
}

/* matmul_rows: the norm, then each segment's matmul and its chain, in the
 * chain's order (ir/verify.c checks that each node takes the one before). */
static zstatus split_rows(const zir_node *n, mm_match *m, int end, zdiag *d) {
    for (int i = 0; i < end; i++) {
        const zir_node *b = n->body[i];
        const zir_op_info *oi = &zir_ops[b->op];
        mm_seg *s = m->n_seg ? &m->seg[m->n_seg - 1] : NULL;
        if (oi->kind == ZK_NORM && (oi->flags & ZF_W1) && i == 0)
            m->norm = b;
        else if (oi->kind == ZK_MATMUL && m->n_seg < ZIR_MAX_SEGMENTS)
            m->seg[m->n_seg++] = (mm_seg){.mm = b};
        else if (s && (oi->flags & ZF_SUM) && b->n_in == 2 && !s->bias && !s->unary && !s->emul)
            s->bias = b;
        else if (s && is_unary(b) && !s->unary && !s->emul)
            s->unary = b;
        else if (s && b->op == ZOP_MUL && s->unary && !s->emul)
            s->emul = b;
        else
            return no_slot(n, b, d);
    }
    return ZOK;
}

/* Sorts the body nodes by role; a node that fits no role is refused. */
static zstatus split_body(const zir_node *n, mm_match *m, const zir_node **mm, int *n_mm, zdiag *d) {
    *n_mm = 0;
    int end = n->n_body; /* a trailing [reshape...] kv_store is the store */
    if (end >= 2 && n->body[end - 1]->op == ZOP_KV_STORE) {
        m->store = n->body[--end];
        while (end > 0 && n->body[end - 1]->op == ZOP_RESHAPE)
            end--;
    }
    if (n->kp.tmpl == ZKT_MATMUL_ROWS) return split_rows(n, m, end, d);
    for (int i = 0; i < end; i++) {
        const zir_node *b = n->body[i];
        const zir_op_info *oi = &zir_ops[b->op];
        if (oi->kind == ZK_NORM && (oi->flags & ZF_W1) && i == 0)
            m->norm = b;
        else if (oi->kind == ZK_MATMUL && *n_mm < ZIR_MAX_SEGMENTS)
            mm[(*n_mm)++] = b;
        else if ((oi->flags & ZF_GLU) && !m->glu)
            m->glu = b;
        else if ((oi->flags & ZF_SUM) && b->n_in == 2 && !m->add && !m->unary && !m->emul)
            m->add = b;
        else if (is_unary(b) && !m->unary && !m->emul)
            m->unary = b;
        else if (b->op == ZOP_MUL && !m->emul)
            m->emul = b;
        else
            return no_slot(n, b, d);
    }
    return ZOK;
}

/* Gate, up (and down) around the SwiGLU, whatever their body order. */
static zstatus match_glu(const zir_node *n, mm_match *m, const zir_node *const *mm, int n_mm, zdiag *d) {
    for (int i = 0; i < n_mm; i++) {
        if (mm[i]->out == m->glu->in[0])
            m->first = mm[i];
        else if (mm[i]->out == m->glu->in[1])
            m->up = mm[i];
        else if (mm[i]->in[0] == m->glu->out)
            m->down = mm[i];
    }
    if (!m->first || !m->up || m->first->in[0] != m->up->in[0])
        return bad(n, "gate and up must be matmuls of one input feeding the swiglu", d);
    if ((n_mm == 3) != (m->down != NULL)) return bad(n, "the down projection must read the swiglu", d);
    const zir_value *g = m->first->in[1], *u = m->up->in[1];
    if (g->rank != 2 || u->rank != 2 || g->shape[0] != u->shape[0] || g->shape[1] != u->shape[1])
        return bad(n, "gate and up weights differ in shape", d);
    if (m->down && (m->down->in[1]->rank != 2 || m->down->in[1]->shape[1] != g->shape[0] ||
                    m->down->in[1]->shape[0] != g->shape[1]))
        return bad(n, "the down weight must be [hidden, ff]", d);
    return ZOK;
}

static zstatus match_add(const zir_node *n, mm_match *m, const zir_node *last, zdiag *d) {
    const zir_node *add = m->add;
    int k = add->in[0] == last->out ? 0 : add->in[1] == last->out ? 1 : -1;
    int64_t N = last->out->shape[1];
    if (k < 0) return bad(n, "the add must take the matmul's output", d);
    m->other = add->in[1 - k];
    if (m->other->role == ZR_WEIGHT) {
        if (k != 0 || m->other->rank != 1 || m->other->shape[0] != N)
            return bad(n, "a bias must be a [N] weight added to the matmul's output", d);
        m->add_mode = 2;
        return ZOK;
    }
    if (m->other->rank != 2 || m->other->shape[0] != ZDIM_T || m->other->shape[1] != N ||
        m->other->dtype != ZT_F32)
        return bad(n, "the residual must be an f32 [T, N] activation", d);
    m->add_mode = 1;
    return ZOK;
}

/* fuse-epilogue's chain after the matmul (and its add): the unary takes
 * *y, the product by an [N] f32 weight what came before it; *y becomes the
 * chain's last output. Plain matmul kernels only. */
static zstatus match_epilogue(const zir_node *n, const mm_match *m, const zir_value **y, zdiag *d) {
    if (n->kp.tmpl != ZKT_MATMUL || m->store) return bad(n, "an epilogue chain needs a plain matmul kernel", d);
    if (m->unary) {
        if (m->unary->in[0] != *y) return bad(n, "the unary must take the matmul's (or its add's) output", d);
        *y = m->unary->out;
    }
    if (m->emul) {
        const zir_value *w = m->emul->in[1];
        if (m->emul->in[0] != *y || w->role != ZR_WEIGHT || w->rank != 1 || w->shape[0] != m->N ||
            w->dtype != ZT_F32)
            return bad(n, "the product must take the chain's output and an f32 [N] weight", d);
        *y = m->emul->out;
    }
    return ZOK;
}

/* y [T, N] reaches the kv_store through the body's reshapes, and a cache
 * row holds N elements. */
static zstatus match_store(const zir_node *n, const mm_match *m, const zir_value *y, zdiag *d) {
    const zir_value *v = m->store->in[0], *c = m->store->in[1];
    while (v != y && v->producer && v->producer->op == ZOP_RESHAPE && v->producer->parent == n)
        v = v->producer->in[0];
    if (v != y || m->store->out != n->out) return bad(n, "the kv_store must take the matmul's output", d);
    if (m->glu || m->down || y->rank != 2 || c->role != ZR_KV || c->rank != 3 ||
        c->shape[1] * c->shape[2] != m->N)
        return bad(n, "a stored projection must be one matmul whose row is a cache row", d);
    return ZOK;
}

/* An f32 [N] weight, read by element (gemv_segs.glsl's float buffers). */
static bool f32_row(const zir_value *w, int64_t N) {
    return w->role == ZR_WEIGHT && w->rank == 1 && w->shape[0] == N && w->dtype == ZT_F32;
}

/* Segment s's chain: each node takes the one before, the bias and the
 * product an f32 [N] weight; s->y becomes the chain's last value. */
static zstatus match_seg_chain(const zir_node *n, mm_seg *s, zdiag *d) {
    int64_t N = s->mm->in[1]->shape[0];
    s->y = s->mm->out;
    if (s->bias && (s->bias->in[0] != s->y || !f32_row(s->bias->in[1], N)))
        return bad(n, "a segment's add must take its matmul's output and an f32 [N] bias", d);
    if (s->bias) s->y = s->bias->out;
    if (s->unary && s->unary->in[0] != s->y)
        return bad(n, "a segment's activation must take its matmul's (or its bias add's) output", d);
    if (s->unary) s->y = s->unary->out;
    if (s->emul && (s->emul->in[0] != s->y || !f32_row(s->emul->in[1], N)))
        return bad(n, "a segment's product must take its activation's output and an f32 [N] weight", d);
    if (s->emul) s->y = s->emul->out;
    return ZOK;
}

/* The segments of a matmul_rows kernel: each reads what the last reads,
 * over the same K, and all but the last write an exported [T, N_s]. */
static zstatus match_segments(const zir_node *n, mm_match *m, zdiag *d) {
    for (int i = 0; i < m->n_seg; i++) {
        mm_seg *s = &m->seg[i];
        const zir_value *w = s->mm->in[1];
        if (s->mm->in[0] != m->first->in[0] || w->rank != 2 || w->shape[1] != m->K)
            return bad(n, "every matmul must read the same input over the same K", d);
        zstatus st = match_seg_chain(n, s, d);
        if (st) return st;
        if (i < m->n_seg - 1 &&
            (!s->y->producer || !s->y->producer->exported || s->y->rank != 2 || s->y->dtype != ZT_F32))
            return bad(n, "a segment but the last must give an exported f32 [T, N]", d);
    }
    return ZOK;
}

static zstatus match_kernel(const zir_node *n, mm_match *m, zdiag *d) {
    const zir_node *mm[3];
    int n_mm;
    zstatus s = split_body(n, m, mm, &n_mm, d);
    if (s) return s;
    switch (n->kp.tmpl) {
    case ZKT_MATMUL:
        if (n_mm != 1 || m->glu) return bad(n, "expected [rms_norm] matmul [add]", d);
        m->first = mm[0];
        return ZOK;
    case ZKT_GATE_UP_SWIGLU:
        if (n_mm != 2 || !m->glu || m->add) return bad(n, "expected [rms_norm] matmul matmul swiglu", d);
        return match_glu(n, m, mm, n_mm, d);
    case ZKT_MLP:
        if (n_mm != 3 || !m->glu) return bad(n, "expected [rms_norm] matmul matmul swiglu matmul [add]", d);
        return match_glu(n, m, mm, n_mm, d);
    case ZKT_MATMUL_ROWS:
        if (m->n_seg < 2) return bad(n, "expected rms_norm, then 2 to 4 matmuls with their epilogues", d);
        m->first = m->seg[m->n_seg - 1].mm;
        return ZOK;
    default: return bad(n, "not a matmul template", d);
    }
}

static zstatus match(const zir_node *n, mm_match *m, zdiag *d) {
    memset(m, 0, sizeof *m);
    zstatus s = ZOK;
    if (n->op == ZOP_KERNEL)
        s = match_kernel(n, m, d);
    else
        m->first = n;
    if (s) return s;
    const zir_value *in = m->first->in[0], *w = m->first->in[1];
    if (m->norm && m->norm->out != in) return bad(n, "the norm must feed the matmul", d);
    m->x = m->norm ? m->norm->in[0] : in;
    if (w->rank != 2) return bad(n, "the matmul weight must be 2-D", d);
    m->N = w->shape[0];
    m->K = w->shape[1];
    const zir_value *x = m->x;
    if (x->rank != 2 || x->shape[0] != ZDIM_T || x->shape[1] != m->K || x->dtype != ZT_F32)
        return zdiag_set(d, ZE_UNSUPPORTED, "codegen: '%s': input '%s' must be f32 [T, %lld]", n->out->name,
                         x->name, (long long)m->K);
    if (m->norm && (m->norm->in[1]->rank != 1 || m->norm->in[1]->shape[0] != m->K))
        return bad(n, "the norm must be over the matmul's K", d);
    const zir_node *last = m->down ? m->down : m->glu ? m->glu : m->first;
    if (m->add && (s = match_add(n, m, last, d))) return s;
    if (m->n_seg && (s = match_segments(n, m, d))) return s;
    const zir_value *y = m->n_seg ? m->seg[m->n_seg - 1].y : (m->add ? m->add : last)->out;
    if ((m->unary || m->emul) && (s = match_epilogue(n, m, &y, d))) return s;
    if (m->store) return match_store(n, m, y, d);
    if (y != n->out) return bad(n, "the body's last node must give the output", d);
    if (n->out->rank != 2 || n->out->dtype != ZT_F32) return bad(n, "the output must be f32 [T, N]", d);
    return ZOK;
}

/* ---- shared pieces of the matmul kernels ----------------------------------- */

/* The unary's code in matmul_io.glsl's EPI_UNARY and gemv_segs.glsl's
 * S<s>_UNARY: 1 sigmoid, 2 softplus, 3 silu. */
static int unary_code(const zir_node *u) {
    return u->op == ZOP_SIGMOID ? 1 : u->op == ZOP_SOFTPLUS ? 2 : 3;
}

/* x and the norm: the bindings and defines of matmul_io.glsl's prologue. */
static zstatus io_in(zcg_builder *b, const zir_node *n, const mm_match *m, zdiag *d) {
    zcg_bind(b, "B_X", m->x, false, 0);
    zcg_def_i(b, "HAS_NORM", m->norm != NULL);
    if (!m->norm) return ZOK;
    zcg_def_f(b, "NORM_EPS", m->norm->attr.eps);
    return zcg_weight(b, n, "NW", m->norm->in[1], m->K, d);
}

/* The add and the output; N is the output width. */
static zstatus io_out(zcg_builder *b, const zir_node *n, const mm_match *m, int64_t N, zdiag *d) {
    zcg_def_i(b, "ADD_MODE", m->add_mode);
    zstatus s = ZOK;
    if (m->add_mode == 2) s = zcg_weight(b, n, "BIAS", m->other, N, d);
    if (m->unary) zcg_def_i(b, "EPI_UNARY", unary_code(m->unary));
    if (!s && m->emul) {
        zcg_def_i(b, "EPI_MUL", 1);
        s = zcg_weight(b, n, "EMUL", m->emul->in[1], N, d);
    }
    if (m->add_mode == 1 && m->other == m->x)
        zcg_def_s(b, "R_IS_X", "1");
    else if (m->add_mode == 1)
        zcg_bind(b, "B_R", m->other, false, 0);
    if (m->store) zcg_def_s(b, "Y_KV", "1"); /* rows pos .. pos+T-1 of the cache */
    zcg_bind(b, "B_Y", m->store ? m->store->in[1] : n->out, true, 0);
    return s;
}

static const char *add_suffix(zcg_builder *b, const mm_match *m) {
    if (m->store) return m->add_mode == 2 ? "+bias+store" : "+store";
    const char *a = m->add_mode == 1 ? "+add" : m->add_mode == 2 ? "+bias" : "";
    if (!m->unary && !m->emul) return a;
    return zarena_printf(b->a, "%s%s%s%s", a, m->unary ? "+" : "", m->unary ? zir_ops[m->unary->op].name : "",
                         m->emul ? "+mul" : "");
}

/* Segment i's epilogue (gemv_segs.glsl): S<i>_BIAS, S<i>_UNARY, S<i>_EMUL. */
static zstatus seg_epilogue(zcg_builder *b, const zir_node *n, const mm_seg *x, int i, zdiag *d) {
    int64_t N = x->mm->in[1]->shape[0];
    zstatus s = ZOK;
    if (x->bias) s = zcg_weight(b, n, zarena_printf(b->a, "S%d_BIAS", i), x->bias->in[1], N, d);
    if (x->unary) zcg_def_i(b, zarena_printf(b->a, "S%d_UNARY", i), unary_code(x->unary));
    if (!s && x->emul) s = zcg_weight(b, n, zarena_printf(b->a, "S%d_EMUL", i), x->emul->in[1], N, d);
    return s;
}

/* matmul_rows: segment s reads weight W<s> and has N<s> rows; all but the
 * last write their exported value through B_Y<s>, the last the kernel's
 * output (io_out: maybe the KV cache); each its own epilogue. */
static zstatus seg_bindings(zcg_builder *b, const zir_node *n, const mm_match *m, zdiag *d) {
    zstatus s = ZOK;
    zcg_def_i(b, "SEGS", m->n_seg);
    for (int i = 0; i < ZIR_MAX_SEGMENTS && !s; i++) {
        const mm_seg *x = i < m->n_seg ? &m->seg[i] : NULL;
        zcg_def_i(b, zarena_printf(b->a, "N%d", i), x ? x->mm->in[1]->shape[0] : 0);
        if (x) s = zcg_weight(b, n, zarena_printf(b->a, "W%d", i), x->mm->in[1], m->K, d);
        if (!s && x) s = seg_epilogue(b, n, x, i, d);
        if (x && i < m->n_seg - 1) zcg_bind(b, zarena_printf(b->a, "B_Y%d", i), x->y, true, 0);
    }
    return s;
}

/* Whether n gives the logits of a prefill step, of which a step usually
 * reads the last row only (step.logits_rows). */
static bool prefill_logits(const zcg_builder *b, const zir_node *n) {
    return b->g && n->out == b->g->logits && b->o->phase == ZPH_PREFILL;
}

/* x, norm, the first (and up) weight, add and output, with N and K. */
static zstatus mm_bindings(zcg_builder *b, const zir_node *n, const mm_match *m, zdiag *d) {
    /* The logits of a prefill step: only the rows the step asks for. */
    if (prefill_logits(b, n)) zcg_def_s(b, "LOGITS_ROWS", "1");
    zstatus s = io_in(b, n, m, d);
    if (!s && m->n_seg) s = seg_bindings(b, n, m, d);
    if (!s && !m->n_seg) s = zcg_weight(b, n, "W0", m->first->in[1], m->K, d);
    if (!s && m->glu) s = zcg_weight(b, n, "W1", m->up->in[1], m->K, d);
    if (!s) s = io_out(b, n, m, m->N, d);
    zcg_def_i(b, "N", m->N);
    zcg_def_i(b, "K", m->K);
    zcg_def_i(b, "GLU", m->glu != NULL);
    return s;
}

/* Output rows of the kernel: every segment's, or the one matmul's. */
static int64_t mm_rows(const mm_match *m) {
    int64_t r = m->n_seg ? 0 : m->N;
    for (int i = 0; i < m->n_seg; i++)
        r += m->seg[i].mm->in[1]->shape[0];
    return r;
}

/* A segment's type and its epilogue, as add_suffix names a kernel's. */
static const char *seg_name(zcg_builder *b, const mm_seg *s) {
    return zarena_printf(b->a, "%s%s%s%s%s", ztype_name(s->mm->in[1]->dtype), s->bias ? "+bias" : "",
                         s->unary ? "+" : "", s->unary ? zir_ops[s->unary->op].name : "",
                         s->emul ? "+mul" : "");
}

static void mm_name(zcg_builder *b, const char *kind, const mm_match *m, const char *extra) {
    const char *types = m->n_seg ? seg_name(b, &m->seg[m->n_seg - 1]) : ztype_name(m->first->in[1]->dtype);
    for (int i = m->n_seg - 2; i >= 0; i--) /* matmul_rows: each segment's, in row order */
        types = zarena_printf(b->a, "%s.%s", seg_name(b, &m->seg[i]), types);
    snprintf(b->k->name, sizeof b->k->name, "%s%s%s_%s_n%lld_k%lld%s%s%s", kind, m->glu ? "_gateup" : "",
             m->n_seg ? "_rows" : "", types, (long long)mm_rows(m), (long long)m->K, extra,
             m->norm ? "+norm" : "", add_suffix(b, m));
}

/* ---- generators ------------------------------------------------------------ */

static zstatus gen_embed(const zir_node *n, zcg_builder *b, zdiag *d) {
    const zir_value *w = n->in[0], *tok = n->in[1];
    if (w->rank != 2 || tok->role != ZR_INPUT || tok->dtype != ZT_I32)
        return zdiag_set(d, ZE_UNSUPPORTED, "codegen: '%s': expected a [V, H] table and i32 token ids",
                         n->out->name);
    int64_t V = w->shape[0], H = w->shape[1];
    zstatus s = zcg_weight(b, n, "W0", w, H, d);
    if (s) return s;
    zcg_bind(b, "B_TOK", tok, false, 0);
    zcg_bind(b, "B_Y", n->out, true, 0);
    zcg_def_i(b, "H", H);
    zcg_def_i(b, "V", V);
    zcg_def_i(b, "WG", EMBED_WG);
    b->k->groups[0] = per_token(H / 8, EMBED_WG);
    b->k->groups[1] = b->k->groups[2] = konst(1, 1);
    snprintf(b->k->name, sizeof b->k->name, "embed_%s_v%lld_h%lld", ztype_name(w->dtype), (long long)V,
             (long long)H);
    static const char *const files[] = {"dequant", "embed", NULL};
    return zcg_build(b, files, n, d);
}

/* The GEMV's group layout (matmul_gemv.glsl): q4_K and q6_K have their own
 * when every matrix of the kernel has that type, else 8-element groups. */
static int gemv_mode(const mm_match *m) {
    ztype t = m->first->in[1]->dtype;
    if (m->glu && m->up->in[1]->dtype != t) return 0;
    for (int i = 0; i < m->n_seg; i++)
        if (m->seg[i].mm->in[1]->dtype != t) return 0;
    return t == ZT_Q4_K ? 12 : t == ZT_Q6_K ? 14 : 0;
}

/* Whether every matrix of m is held as q6_K planes (the weight-layout pass). */
static bool all_q6_planes(const mm_match *m) {
    if (m->first->in[1]->layout != ZWL_Q6_PLANES || (m->glu && m->up->in[1]->layout != ZWL_Q6_PLANES))
        return false;
    for (int i = 0; i < m->n_seg; i++)
        if (m->seg[i].mm->in[1]->layout != ZWL_Q6_PLANES) return false;
    return true;
}

/* The default layout: RS rows per subgroup, four subgroups per workgroup,
 * one group per trip. More rows per subgroup share each x load and keep
 * more weight loads in flight, fewer leave more workgroups to fill the
 * device: RS is the largest of 4, 2, 1 that still gives two workgroups per
 * compute unit (the targets' n_cu). One group per trip: on the H200 a
 * second one in flight was 10-25 % slower at every size. What was measured
 * on the device (zincc --tune) replaces it (docs/performance.md).
 * With int8 x (q8) the H200's tuner (run 25) chose eight subgroups for
 * every GEMV it sped up (gate+up, o, the q6_K down) and, for the output
 * head's 151936 rows, eight rows a subgroup: fewer float instructions a
 * weight leave each lane's loads the longer wait, and more lanes hide it. */
static zcg_gemv gemv_layout(const zcg_builder *b, int64_t N, bool q8) {
    const ztarget *t = b->o->target;
    int64_t cu = t->n_cu > 0 ? t->n_cu : 1;
    zcg_gemv g = {N >= 8 * cu * 4 ? 4 : N >= 2 * cu * 4 ? 2 : 1, 1, 4};
    if (q8) g = N >= 32 * cu * 4 ? (zcg_gemv){8, 1, 4} : (zcg_gemv){g.rs, 1, 8};
    const zcg_gemv *w = b->o->force_gemv;
    for (int i = 0; !w && b->o->tuning && i < b->o->tuning->n; i++)
        if (!strcmp(b->o->tuning->key[i], b->k->key)) w = &b->o->tuning->gemv[i];
    /* ZINC_GEMV_LAYOUT=rs,unroll,nsg,x_shared (0: the default) replaces the
     * layout of every GEMV, to measure others end to end (like ZINC_CM_LAYOUT). */
    zcg_gemv e = {0};
    const char *env = getenv("ZINC_GEMV_LAYOUT");
    if (!w && env && sscanf(env, "%d,%d,%d,%d", &e.rs, &e.unroll, &e.nsg, &e.x_shared) == 4 && e.rs >= 0 &&
        e.unroll >= 0 && e.nsg >= 0)
        w = &e;
    if (w && w->rs > 0) g.rs = w->rs;
    if (w && w->unroll > 0) g.unroll = w->unroll;
    if (w && w->nsg > 0) g.nsg = w->nsg;
    if (w) g.restrict_w = w->restrict_w;
    if (w) g.x_shared = w->x_shared;
    return g;
}

/* Whether the GEMV stages x in shared memory (matmul_gemv.glsl, X_SHARED):
 * where K floats, the run sums and the norm's reduction slots fit the
 * target's shared memory. The down projection (K = 12288 in an 8B) does
 * not fit 48 KiB and reads x from L1. */
static bool gemv_x_shared(const zcg_builder *b, const zcg_gemv *g, int64_t K, int mode, int wg) {
    if (g->x_shared) return g->x_shared > 0;
    int64_t runlen = mode == 12 ? 16 : 8,
            budget = b->o->target->smem_bytes > 0 ? b->o->target->smem_bytes : 16384;
    return K % runlen == 0 && 4 * (K + K / runlen + wg) <= budget;
}

/* Whether the kernel's matmuls quantize x to int8 (attr.gemv_q8, the mm-f16
 * pass): all of them or none, and only where the q4_K or q6_K layout (GMODE 12, 14) and
 * the target's integer dot products are there to honour it; what the pass
 * marked and the kernel cannot compute is an internal error. */
static zstatus gemv_idot(const zcg_builder *b, const zir_node *n, const mm_match *m, int mode, bool *idot,
                         zdiag *d) {
    *idot = m->first->attr.gemv_q8;
    bool same = (!m->glu || m->up->attr.gemv_q8 == *idot);
    for (int i = 0; i < m->n_seg; i++)
        same = same && m->seg[i].mm->attr.gemv_q8 == *idot;
    if (!same)
        return zdiag_set(d, ZE_INTERNAL, "codegen: '%s': some of its matmuls have int8 x, some not",
                         n->out->name);
    bool kquant = mode == 12 || mode == 14;
    if (*idot && (!kquant || !b->o->target->int_dot))
        return zdiag_set(
            d, ZE_INTERNAL,
            "codegen: '%s': int8 x needs all q4_K or all q6_K weights and integer dot products (%s)",
            n->out->name, !kquant ? "weights of other types" : "the target has none");
    return ZOK;
}

/* A GEMV with int8 x: the integer-dot path (IDOT), the q8_1 rounding, and
 * the SPIR-V rewrite of the zdot4 markers (zvk_glsl_opts.int_dot). */
static void def_idot(zcg_builder *b) {
    zcg_def_i(b, "IDOT", 1);
    zcg_def_f(b, "Q8_INV127", ZIR_Q8_INV127);
    b->k->int_dot = true;
}

/* matmul_rows: each segment starts a workgroup of its own (WG_SEG<s>, the
 * first workgroup of segment s), so that a workgroup's rows share one
 * weight and one destination. Returns the workgroups of all segments. */
static int64_t seg_groups(zcg_builder *b, const mm_match *m, int64_t rows_wg) {
    int64_t at = 0;
    for (int i = 0; i < ZIR_MAX_SEGMENTS; i++) {
        zcg_def_i(b, zarena_printf(b->a, "WG_SEG%d", i), at);
        if (i < m->n_seg) at += (m->seg[i].mm->in[1]->shape[0] + rows_wg - 1) / rows_wg;
    }
    return at;
}

/* Decode: RS rows per subgroup, NSG subgroups per workgroup, one token per
 * workgroup row of the grid. */
static zstatus gen_gemv(const zir_node *n, const mm_match *m, zcg_builder *b, zdiag *d) {
    int sg = b->o->target->subgroup > 0 ? b->o->target->subgroup : 32;
    mm_name(b, "gemv", m, "");
    snprintf(b->k->key, sizeof b->k->key, "%s", b->k->name);
    zcg_gemv g = gemv_layout(b, mm_rows(m), m->first->attr.gemv_q8);
    if (g.rs > 8 || g.unroll > 8 || g.nsg > 16 || g.nsg * sg > 1024)
        return zdiag_set(d, ZE_INVALID,
                         "codegen: '%s': GEMV layout %d rows, %d groups, %d subgroups: expected "
                         "at most 8, 8 and 16 (1024 threads)",
                         n->out->name, g.rs, g.unroll, g.nsg);
    zstatus s = mm_bindings(b, n, m, d);
    if (s) return s;
    zcg_def_i(b, "UNROLL", g.unroll);
    zcg_def_i(b, "WG", g.nsg * sg);
    zcg_def_i(b, "RS", g.rs);
    zcg_def_i(b, "ROWS_WG", g.nsg * g.rs);
    int mode = gemv_mode(m);
    bool idot;
    s = gemv_idot(b, n, m, mode, &idot, d);
    if (s) return s;
    /* the int8 x is always staged: a quarter of the floats' bytes */
    bool xsh = idot || gemv_x_shared(b, &g, m->K, mode, g.nsg * sg);
    if (idot && ZPASS_IDOT_SMEM(m->K, g.nsg * sg) > (int64_t)b->o->target->smem_bytes)
        return zdiag_set(
            d, ZE_UNSUPPORTED,
            "codegen: '%s': int8 x of %lld elements: %lld bytes of shared memory, the target has %u",
            n->out->name, (long long)m->K, (long long)ZPASS_IDOT_SMEM(m->K, g.nsg * sg),
            b->o->target->smem_bytes);
    zcg_def_i(b, "GMODE", mode);
    zcg_def_i(b, "X_SHARED", xsh);
    if (idot) def_idot(b);
    /* the bits of a 16-byte unit's index that pick its bank group, XORed
     * with those that tell apart the lanes reading together (see the shader) */
    zcg_def_i(b, "SWZ_SHIFT", mode == 12 ? 4 : 5);
    zcg_def_i(b, "SWZ_MASK", mode == 12 ? 3 : mode == 14 ? 1 : 0);
    if (g.restrict_w) zcg_def_s(b, "WEIGHTS_RESTRICT", "1");
    b->k->groups[0] = m->n_seg ? konst(seg_groups(b, m, g.nsg * g.rs), 1) : konst(m->N, g.nsg * g.rs);
    b->k->groups[1] = per_token(1, 1);
    b->k->groups[2] = konst(1, 1);
    const char *lay = g.unroll == 1 && g.nsg == 4 ? zarena_printf(b->a, "_r%d", g.rs)
                                                  : zarena_printf(b->a, "_r%du%dg%d", g.rs, g.unroll, g.nsg);
    if (g.restrict_w) lay = zarena_printf(b->a, "%s_nc", lay);
    if (xsh) lay = zarena_printf(b->a, "%s_xs", lay); /* the tuner's key stays the name without it */
    if (idot) lay = zarena_printf(b->a, "%s_idot", lay);
    mm_name(b, "gemv", m, lay);
    /* attn_reduce for the staged norm, idot for the int8 x */
    const char *files[8] = {"dequant", "matmul_io"};
    int nf = 2;
    if (xsh && m->norm) files[nf++] = "attn_reduce";
    if (idot) files[nf++] = "idot";
    files[nf++] = "gemv_groups";
    files[nf++] = "gemv_segs";
    files[nf++] = "matmul_gemv";
    return zcg_build(b, files, n, d);
}

/* 16-byte units of one token row of int8 x in the multi-row GEMV's scratch
 * (glsl/gemvn_xq.glsl): K bytes of quants, four floats for each group of
 * 32 elements, the norm's 1/rms. */
static int64_t gemvn_xq_row16(int64_t K) {
    return K / 16 + K / 32 + 1;
}

/* An x pass of a multi-row GEMV (kernel.pre): the GEMV's bindings (so one
 * descriptor set serves both), writing only its x scratch (binding xb), a
 * workgroup per token row of the step, built from files with `access`
 * (when set) defining XQ_ACCESS writeonly. The lowering dispatches it just
 * before the GEMV, the scratch one buffer for the two. */
static zstatus gemvn_x_pass(zcg_builder *b, const zir_node *n, const mm_match *m, int xb, const char *name,
                            const char *const *files, bool access, zdiag *d) {
    zcg_kernel *q = zarena_alloc(b->a, sizeof *q);
    if (!q) return zdiag_set(d, ZE_NOMEM, "codegen: out of memory for '%s'", n->out->name);
    *q = *b->k;
    for (int i = 0; i < q->n_bind; i++)
        q->bind[i].written = i == xb - 1;
    q->pre = NULL;
    q->int_dot = false;
    snprintf(q->name, sizeof q->name, "%s", name);
    /* what it computes, for the lowering to dispatch it once for consecutive
     * GEMVs of the same x (v beside q and k): its name (K, the norm), the
     * step's rows, and x and its norm by name */
    snprintf(q->key, sizeof q->key, "%s|%lld|%d|%s|%s|%.9g", name, (long long)b->o->max_tokens,
             access ? gemv_mode(m) : 0, m->x->name, m->norm ? m->norm->in[1]->name : "",
             m->norm ? (double)m->norm->attr.eps : 0.0);
    if (zcg_knob_off("ZINC_PRE_SHARE")) q->key[0] = '\0'; /* each GEMV its own x pass, to measure */
    q->groups[0] = konst(1, 1);
    q->groups[1] = per_token(1, 1);
    q->groups[2] = konst(1, 1);
    zcg_kernel *gemv = b->k;
    b->k = q;
    if (access) zcg_def_s(b, "XQ_ACCESS", "writeonly");
    zstatus s = zcg_build(b, files, n, d);
    if (access) b->nd--; /* the GEMV's own access follows */
    b->k = gemv;
    gemv->pre = q;
    return s;
}

/* The quantizing pass of an int8-x multi-row GEMV (gemvn_quant.glsl),
 * writing the x scratch xq. */
static zstatus gemvn_quant_pass(zcg_builder *b, const zir_node *n, const mm_match *m, int xq, bool xt, zdiag *d) {
    const char *files[8] = {"dequant", "matmul_io"};
    int nf = 2;
    if (m->norm) files[nf++] = "attn_reduce";
    files[nf++] = "idot";
    files[nf++] = "gemv_groups";
    files[nf++] = "gemvn_xq";
    files[nf++] = "gemvn_quant";
    files[nf] = NULL;
    return gemvn_x_pass(b, n, m, xq,
                        zarena_printf(b->a, "gemvn_xq8_k%lld%s%s", (long long)m->K, xt ? "_xt" : "", m->norm ? "+norm" : ""), files,
                        true, d);
}

/* Prefill's multi-row GEMV (attr.mm_gemv): token rows a workgroup, given
 * its workgroups over the weight rows. Each workgroup is a chain (a weight
 * group dequantized, then NTOK tokens' products), so the fewest of 16, 8
 * and 4 token rows whose workgroups fill the device (zcg_fill_workgroups).
 * The 9B's 32-row beta and alpha at a 512-token step: 4 row groups of 8,
 * so 4 token rows (512 workgroups) where 16 gave 128, each reading its
 * weights once per 4 tokens (74 KB, from L2). Run 52 measured the 16-row
 * form at 52 us a call, the cost model's 12 being what it would take at
 * full issue. ZINC_PREFILL_GEMV_ROWS=n forces n (1 to 16), to measure. */
static int prefill_gemv_rows(const zcg_builder *b, int64_t row_groups) {
    int64_t T = b->o->max_tokens > 0 ? b->o->max_tokens : 512, rows = ZCOST_GEMVN_ROWS;
    while (rows > 4 && row_groups * ((T + rows - 1) / rows) < zcg_fill_workgroups(b->o))
        rows /= 2;
    return (int)zcg_knob("ZINC_PREFILL_GEMV_ROWS", 1, ZCOST_GEMVN_ROWS, rows);
}

/* The x pass of the tensor-core multi-row GEMV (gemvn_xh.glsl): fp16 x,
 * normalized where the kernel has the norm, into the scratch xh. */
static zstatus gemvn_xh_pass(zcg_builder *b, const zir_node *n, const mm_match *m, int xh, zdiag *d) {
    const char *files[6] = {"dequant", "matmul_io"};
    int nf = 2;
    if (m->norm) files[nf++] = "attn_reduce";
    files[nf++] = "gemvn_xh";
    files[nf] = NULL;
    return gemvn_x_pass(b, n, m, xh, zarena_printf(b->a, "gemvn_xh_k%lld%s", (long long)m->K, m->norm ? "+norm" : ""),
                        files, false, d);
}

enum { GEMVN_CM_TOK = 16, GEMVN_CM_BK = 64, GEMVN_CM_NSG = 4 };

/* A batch step's rows on the matrix units (matmul_gemvn_cm.glsl; the
 * mm-f16 pass marked the matmuls attr.mm_f16 for it): 16 weight rows (of
 * each matrix) and 16 token rows a workgroup, NSG subgroups splitting K in
 * steps of 64; x written once a step as fp16 by the kernel's x pass. */
static zstatus gen_gemvn_cm(const zir_node *n, const mm_match *m, zcg_builder *b, zdiag *d) {
    zstatus s = mm_bindings(b, n, m, d);
    if (s) return s;
    /* all q4_K: raw blocks fetched a step ahead (ZINC_GEMVN_CM_RAW=0: DQ8 on staging, to measure) */
    bool raw = gemv_mode(m) == 12 && zcg_knob("ZINC_GEMVN_CM_RAW", 0, 1, 1);
    /* the weights' A fragments decoded in registers (ZINC_GEMVN_CM_FRAG=1, a
     * measurement): the layout zvk_probe_fragmap found on NVIDIA's driver */
    const ztarget *t = b->o->target;
    bool frag = raw && t->frag_right && zcg_knob("ZINC_GEMVN_CM_FRAG", 0, 1, 0);
    /* K permuted in each step so that a quad of lanes reads its rows' bytes
     * once, straight into A fragments (ZINC_GEMVN_CM_PERM=1; 2 decodes in
     * fp32): the same layout (the target's, where it is known) */
    int64_t perm = raw && !frag && t->frag_right ? zcg_knob("ZINC_GEMVN_CM_PERM", 0, 2, 0) : 0;
    /* with PERM_K a plan of 8 rows or fewer takes products of 8 token columns */
    int64_t ntok = perm && b->o->max_tokens <= 8 ? 8 : GEMVN_CM_TOK;
    int64_t T = b->o->max_tokens > ntok ? b->o->max_tokens : ntok;
    T = (T + ntok - 1) / ntok * ntok; /* whole tiles of token rows */
    int xh = zcg_bind(b, "B_XH", NULL, false, (uint64_t)T * (uint64_t)m->K * 2u);
    /* subgroups splitting K (ZINC_GEMVN_CM_NSG, to measure), as many as
     * their tiles fit shared memory: 16 rows of each matrix and 16 of x,
     * padded, and the sums */
    int64_t nsg = zcg_knob("ZINC_GEMVN_CM_NSG", 1, 16, GEMVN_CM_NSG), nmat = m->glu ? 2 : 1;
    int64_t tiles = 16 * (GEMVN_CM_BK / 8 + 1) * 16 * (nmat + 1);
    while (nsg > 1 && nsg * (tiles + nmat * 1024) > b->o->target->smem_bytes)
        nsg /= 2;
    const int64_t v[] = {ntok, nsg * ZCG_CM_SG, nsg, ZCG_CM_SG, GEMVN_CM_BK};
    const char *const names[] = {"NTOK", "WG", "NSG", "SG", "BK"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        zcg_def_i(b, names[i], v[i]);
    b->k->groups[0] = m->n_seg ? konst(seg_groups(b, m, 16), 1) : konst(m->N, 16);
    b->k->groups[1] = per_token(1, ntok);
    b->k->groups[2] = konst(1, 1);
    bool xg = zcg_knob("ZINC_GEMVN_CM_XG", 0, 1, 0); /* x fragments from the buffer: a measurement */
    if (xg) zcg_def_i(b, "X_GLOBAL", 1);
    if (raw) zcg_def_i(b, "Q4_RAW", 1);
    /* q6_K planes fetched a step ahead as raw bytes (ZINC_GEMVN_CM_Q6RAW=1, to measure) */
    bool q6raw = gemv_mode(m) == 14 && all_q6_planes(m) && zcg_knob("ZINC_GEMVN_CM_Q6RAW", 0, 1, 0);
    if (q6raw) zcg_def_i(b, "Q6_RAW", 1);
    bool staged_raw = q6raw || (raw && !frag && !perm); /* raw blocks decoded into staged tiles (stage_w) */
    /* the staged tiles' quants decoded two at a time in fp16 (ZINC_GEMVN_CM_H2=1: one fp16
     * scale, past the tolerance; 2: the scales as hi + lo pairs; q6_K always the pairs) */
    int64_t h2 = staged_raw && !xg ? zcg_knob("ZINC_GEMVN_CM_H2", 0, 2, 0) : 0;
    if (h2) zcg_def_i(b, "DQ_H2", h2);
    /* the fp32 decode's bits without integer-to-float conversions (ZINC_GEMVN_CM_F32M=1, to measure) */
    bool f32m = !h2 && staged_raw && zcg_knob("ZINC_GEMVN_CM_F32M", 0, 1, 0);
    if (f32m) zcg_def_i(b, "DQ_MAGIC", 1);
    /* the raw blocks fetched two steps ahead (ZINC_GEMVN_CM_DEPTH=2, to measure) */
    bool depth2 = staged_raw && zcg_knob("ZINC_GEMVN_CM_DEPTH", 1, 2, 1) == 2;
    if (depth2) zcg_def_i(b, "CM_DEPTH2", 1);
    /* timing only, the values wrong: the staged tiles not decoded (ZINC_GEMVN_CM_ABLATE=1) */
    bool abl = raw && !frag && !perm && !xg && zcg_knob("ZINC_GEMVN_CM_ABLATE", 0, 1, 0);
    if (abl) zcg_def_i(b, "CM_ABLATE", 1);
    if (frag || perm) zcg_def_i(b, frag ? "FRAG_A" : "PERM_K", 1), zcg_def_i(b, "FRAG_RIGHT", t->frag_right),
        zcg_def_i(b, "FRAG_DOWN", t->frag_down);
    if (perm == 2) zcg_def_i(b, "PERM_F32", 1);
    mm_name(b, "gemvn", m,
            zarena_printf(b->a, "_t%lld_cm16k%d%s%s%s%s%s%s", (long long)ntok, GEMVN_CM_BK,
                          raw ? (abl ? "ra" : h2 == 2 ? "rh2" : h2 ? "rh" : f32m ? "rm" : "r") : q6raw ? (h2 ? "r6h" : f32m ? "r6m" : "r6") : "", depth2 ? "d2" : "",
                          frag ? "f" : "", perm ? (perm == 2 ? "p32" : "p") : "", xg ? "xg" : "",
                          nsg != GEMVN_CM_NSG ? zarena_printf(b->a, "s%lld", (long long)nsg) : ""));
    if ((s = gemvn_xh_pass(b, n, m, xh, d))) return s;
    static const char *const files[] = {"dequant", "matmul_io", "gemv_segs", "matmul_gemvn_cm", NULL};
    static const char *const files_perm[] = {"dequant", "matmul_io", "gemv_segs", "perm_k", "matmul_gemvn_cm", NULL};
    return zcg_build(b, perm ? files_perm : files, n, d);
}

/* A batch step's rows (o->gemv_rows, the cost model's choice), or a
 * prefill matmul of few output rows (attr.mm_gemv, the mm-f16 pass: the
 * cost model priced it under the GEMM's tiles; rows 0: prefill_gemv_rows
 * chooses): NTOK = rows token rows a workgroup, each weight group
 * dequantized once for all of them.
 * Each lane holds its rows' groups and NTOK sums per row: RS = 2 rows a
 * subgroup (gate+up too: run 33 measured its 8-row step 31 % faster than
 * with one; at 16 rows, runs 34 and 35: 697.9 against 653.5 tok/s), four
 * subgroups. ZINC_GEMVN_LAYOUT=rs,nsg replaces it, to measure others.
 * Not kept, measured on the 8B at 8 streams: forming every row's products
 * without the branch past T (run 34, 566.7 against 592.6 tok/s), loading a
 * lane's next weight group before this one's products (run 35, 559.9
 * against 587.0).
 * With int8 x (attr.gemv_q8) the kernel's quantizing pass (kernel.pre)
 * writes the step's rows of x once into a scratch that every workgroup
 * reads (where each used to quantize them all itself). */
static zstatus gen_gemvn(const zir_node *n, const mm_match *m, int rows, zcg_builder *b, zdiag *d) {
    int sg = b->o->target->subgroup > 0 ? b->o->target->subgroup : 32, rs = 2, nsg = 4, er, en;
    /* a batch step's: the cost model's layout (prefill's few-row matmuls keep two rows, four subgroups) */
    if (rows > 0 && b->o->batch) zcost_batch_gemv_layout(b->o->target, mm_rows(m), m->K, m->glu, NULL, 0, &rs, &nsg);
    const char *e = getenv("ZINC_GEMVN_LAYOUT");
    if (e && sscanf(e, "%d,%d", &er, &en) == 2 && er >= 1 && er <= 8 && en >= 1 && en * sg <= 1024)
        rs = er, nsg = en;
    if (rows == 0) rows = prefill_gemv_rows(b, (m->N + nsg * rs - 1) / (nsg * rs));
    if (rows < 1 || rows > 16)
        return zdiag_set(d, ZE_INVALID, "codegen: '%s': a multi-row GEMV of %d token rows: expected 1 to 16",
                         n->out->name, rows);
    zstatus s = mm_bindings(b, n, m, d);
    if (s) return s;
    int mode = gemv_mode(m), xq = 0;
    bool idot;
    if ((s = gemv_idot(b, n, m, mode, &idot, d))) return s;
    if (idot) {
        int64_t T = b->o->max_tokens > rows ? b->o->max_tokens : rows; /* a step's rows */
        xq = zcg_bind(b, "B_XQ", NULL, false, (uint64_t)T * (uint64_t)gemvn_xq_row16(m->K) * 16u);
        zcg_def_i(b, "XQ_ROW16", gemvn_xq_row16(m->K));
        def_idot(b);
    }
    /* x's scratch slot-major, as the lanes load it (ZINC_GEMVN_XT=1, to measure: gemvn_xq.glsl) */
    bool xt = idot && (mode == 12 || mode == 14) && zcg_knob("ZINC_GEMVN_XT", 0, 1, 0);
    if (xt) zcg_def_i(b, "XQ_T", 1);
    const int64_t v[] = {rows, nsg * sg, rs, nsg * rs, mode};
    const char *const names[] = {"NTOK", "WG", "RS", "ROWS_WG", "GMODE"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        zcg_def_i(b, names[i], v[i]);
    b->k->groups[0] = m->n_seg ? konst(seg_groups(b, m, nsg * rs), 1) : konst(m->N, nsg * rs);
    b->k->groups[1] = per_token(1, rows);
    b->k->groups[2] = konst(1, 1);
    /* timing only, the values wrong (matmul_gemvn.glsl's ABLATE): what its parts cost */
    int ablate = idot ? (int)zcg_knob("ZINC_GEMVN_ABLATE", 0, 3, 0) : 0;
    if (ablate) zcg_def_i(b, "ABLATE", ablate);
    mm_name(b, "gemvn", m, zarena_printf(b->a, "_t%d_r%dg%d%s%s", rows, rs, nsg, idot ? (xt ? "_idot_xt" : "_idot") : "",
                                         ablate ? zarena_printf(b->a, "_ablate%d", ablate) : ""));
    if (idot && (s = gemvn_quant_pass(b, n, m, xq, xt, d))) return s;
    if (idot) zcg_def_s(b, "XQ_ACCESS", "readonly");
    const char *files[8] = {"dequant", "matmul_io"};
    int nf = 2;
    if (idot) files[nf++] = "idot";
    if (idot) files[nf++] = "gemvn_xq";
    files[nf++] = "gemv_groups";
    files[nf++] = "gemv_segs";
    files[nf++] = "matmul_gemvn";
    return zcg_build(b, files, n, d);
}

/* The x tile, the weight tile (padded strides) and the norm scales. */
static uint32_t gemm_smem(int bm) {
    return 4u * (uint32_t)(GEMM_BK * (bm + 1) + GEMM_BK * (GEMM_BN + 1) + bm);
}

/* Prefill: BM tokens x 64 weight rows per workgroup (32 gate + 32 up rows
 * for gate+up). BM follows the kernel's token tile (16, 32 or 64), halved
 * while the tiles overflow shared memory. */
static zstatus gen_gemm(const zir_node *n, const mm_match *m, zcg_builder *b, zdiag *d) {
    const ztarget *t = b->o->target;
    int tile = n->op == ZOP_KERNEL && n->kp.token_tile > 0 ? n->kp.token_tile : t->prefill_tile;
    int bm = tile <= 16 ? 16 : tile <= 32 ? 32 : 64;
    while (bm > 16 && gemm_smem(bm) > t->smem_bytes)
        bm /= 2;
    if (gemm_smem(bm) > t->smem_bytes)
        return zdiag_set(d, ZE_UNSUPPORTED,
                         "codegen: '%s': a 16-token GEMM tile needs %u B of shared memory, %s has %u",
                         n->out->name, gemm_smem(bm), t->name, t->smem_bytes);
    zstatus s = mm_bindings(b, n, m, d);
    if (s) return s;
    if (m->first->attr.mm_f16) zcg_def_s(b, "MM_F16", "1");
    zcg_def_gemm_tile(b, bm);
    b->k->groups[0] = konst(m->N, m->glu ? GEMM_BN / 2 : GEMM_BN);
    b->k->groups[1] = per_token(1, bm);
    b->k->groups[2] = konst(1, 1);
    mm_name(b, "gemm", m, zarena_printf(b->a, "_t%d", bm));
    static const char *const files[] = {"dequant", "matmul_io", "gemm_tile", "matmul_gemm", NULL};
    return zcg_build(b, files, n, d);
}

/* The x and weight tiles (padded rows of fp16) and the norm scales; the
 * epilogue reuses the weight tile (1 KiB a subgroup, 2 with gate+up). */
static uint32_t cm_smem(const zcg_cm *c, bool glu) {
    uint32_t nbuf = c->pipe == 2 || c->pipe == 3 ? 2u : 1u;
    uint32_t tiles = nbuf * 2u * (uint32_t)((c->bm + c->bn) * (c->bk + 8));
    uint32_t epi = c->wg ? 4u * (uint32_t)(c->bm * (glu ? c->bn / 2 : c->bn))
                         : (glu ? 2048u : 1024u) * (uint32_t)(c->sgm * c->sgn);
    uint32_t w = nbuf * 2u * (uint32_t)(c->bn * (c->bk + 8));
    return tiles + 4u * (uint32_t)c->bm + (epi > w ? epi - w : 0u) + (uint32_t)c->pad;
}

/* 64 tokens x 64 rows (128 with gate+up) in 8 subgroups, 64 of K a step
 * (32 with gate+up): the fastest of the layouts measured on the H200
 * (docs/performance.md, runs 8-9): small tiles keep two workgroups
 * (<= 128 registers a lane) on each SM, and a step of 64 amortizes the
 * memory latency each step's prefetch waits on; gate+up, which holds twice
 * the weight chunks, measured 59.7 ms a token tile at 32 and 76.5 at 64.
 * Shorter steps where K or shared memory ask for them.
 * ZINC_CM_LAYOUT=bm,bn,bk,sgm,sgn[,pipe,wch] replaces it for the plain
 * GEMMs and ZINC_CM_GLU_LAYOUT for gate+up, to measure others. */
/* Shared memory a layout may declare: the target's, less what the driver
 * keeps for workgroup-scope matrices. */
static uint32_t cm_smem_budget(const ztarget *t, const zcg_cm *c, uint32_t extra) {
    uint32_t keep = (c->wg ? t->coopmat_wg_smem : 0u) + extra;
    return t->smem_bytes > keep ? t->smem_bytes - keep : 0u;
}

static bool cm_parse(const char *e, zcg_cm *w) {
    int n = sscanf(e, "%d,%d,%d,%d,%d,%d,%d", &w->bm, &w->bn, &w->bk, &w->sgm, &w->sgn, &w->pipe, &w->wch);
    if (n < 5 || w->bm <= 0 || w->bn <= 0 || w->bk <= 0 || w->sgm <= 0 || w->sgn <= 0 || w->bm % (16 * w->sgm) ||
        w->bn % (16 * w->sgn) || w->bk % 32 || w->pipe < 0 || w->pipe == 3 || w->pipe > 3 ||
        (w->wch != 16 && w->wch != 32))
        return false;
    return (w->sgm * w->sgn + w->sgp) * ZCG_CM_SG <= 1024;
}

zcg_cm zcg_cm_default(const zcg_builder *b, bool glu, int64_t K, bool logits, uint32_t extra_smem) {
    zcg_cm c = {64, 64, 64, 2, 4, 0, 0, 16};
    /* The logits of a prefill step are read for the last row only (unless
     * --logits-out asks for all): a tile of 16 tokens does a quarter of a
     * 64-token tile's products for that row, and 128 rows of the output
     * matrix a workgroup keep eight subgroups busy on it.
     * ZINC_CM_LOGITS=0 keeps the general layout, to measure the difference. */
    if (logits && !zcg_knob_off("ZINC_CM_LOGITS")) c = (zcg_cm){16, 128, 64, 1, 8, 0, 0, 16};
    /* Staging threads decode 16-element chunks (half a Q4_K sub-block):
     * twice the threads share a step's decoding, with shorter chains and
     * fewer live registers; 5 % faster a prefill step than whole sub-blocks
     * on the H200 (run 19). ZINC_CM_WCH=32 measures those. */
    c.pipe = (int)zcg_knob("ZINC_CM_PIPE", 0, 3, 0);
    c.wch = zcg_knob("ZINC_CM_WCH", 16, 32, 16) == 32 ? 32 : 16;
    c.sgp = c.pipe == 3 ? (int)zcg_knob("ZINC_CM_SGP", 1, 16, 4) : 0;
    c.ablate = c.pipe == 0 ? (int)zcg_knob("ZINC_CM_ABLATE", 0, 3, 0) : 0;
    c.mfirst = (int)zcg_knob("ZINC_CM_MFIRST", 0, 1, 0);
    c.pad = (int)zcg_knob("ZINC_CM_PAD", 0, 49152, 0) & ~3;
    /* ZINC_CM_Q6RAW=1: Q6_K travels raw (its quant, high-bit, scale and d
     * words) and is decoded as it is staged, as Q4_K is, instead of as it
     * is fetched. Measured on the H100 (session 20): no faster (the 9B's
     * Q6_K GEMMs 1-3 % slower in the profile, pp512 0.7 % faster, 120
     * registers against 97), so decoding on fetch stays the default. */
    c.q6raw = (int)zcg_knob("ZINC_CM_Q6RAW", 0, 1, 0);
    const char *e = logits ? NULL : getenv(glu ? "ZINC_CM_GLU_LAYOUT" : "ZINC_CM_LAYOUT");
    zcg_cm w = {.pipe = c.pipe,     .sgp = c.sgp, .wch = c.wch,  .ablate = c.ablate,
                .mfirst = c.mfirst, .pad = c.pad, .q6raw = c.q6raw};
    bool knob = e && cm_parse(e, &w);
    if (knob) c = w;
    if (!knob && glu) c.bk = 32;
    if (glu && c.bn < 32 * c.sgn) c.bn = 32 * c.sgn; /* a gate and an up fragment per subgroup */
    /* ZINC_CM_WG=1 (a measurement until the H200 says): workgroup-scope
     * matrices where the device has them, in a workgroup of the size its
     * flexible shape names (or ZINC_CM_WG's, when that is 128 or more). */
    const ztarget *t = b->o->target;
    int64_t wg = zcg_knob("ZINC_CM_WG", 0, 1024, 0);
    if (wg && t->coopmat_wg && c.pipe == 0 && !logits) {
        c.wg = wg >= 128 ? (int)wg : (int)t->coopmat_wg;
        int on = glu ? c.bn / 2 : c.bn;
        if (c.bm % (int)t->coopmat_wg_m || on % (int)t->coopmat_wg_n || c.bk % (int)t->coopmat_wg_k) c.wg = 0;
    }
    while (c.bk > 32 && (K % c.bk || cm_smem(&c, glu) > cm_smem_budget(t, &c, extra_smem)))
        c.bk /= 2;
    return c;
}

bool zcg_cm_usable(const zcg_builder *b, const zcg_cm *c, bool glu, int64_t K, uint32_t extra_smem) {
    const ztarget *t = b->o->target;
    return t->coopmat && t->subgroup == ZCG_CM_SG && K % c->bk == 0 &&
           cm_smem(c, glu) <= cm_smem_budget(t, c, extra_smem);
}

static bool use_coopmat(const zcg_builder *b, const mm_match *m, const zcg_cm *c) {
    return m->first->attr.mm_f16 && zcg_cm_usable(b, c, m->glu != NULL, m->K, 0);
}

void zcg_def_cm(zcg_builder *b, const zcg_cm *c) {
    const int64_t v[] = {c->bm,   c->bn,  c->bk,  c->sgm,    c->sgn,    ZCG_CM_SG, c->wg ? c->wg : (c->sgm * c->sgn + c->sgp) * ZCG_CM_SG,
                         c->pipe, c->sgp, c->wch, c->ablate, c->mfirst, c->wg != 0, c->pad, c->q6raw};
    const char *const names[] = {"BM",        "BN",        "BK",    "SGM",    "SGN",   "SG",
                                 "WG",        "CM_PIPE",   "SGP",   "WCH",    "CM_ABLATE",
                                 "CM_MFIRST", "CM_WG",     "CM_PAD", "Q6_RAW"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        zcg_def_i(b, names[i], v[i]);
}

const char *zcg_cm_suffix(zcg_builder *b, const zcg_cm *c) {
    static const char *const pipes[] = {"", "d", "b", "p"};
    return zarena_printf(b->a, "_cm%dx%dk%d%s%s%s%s%s%s%s", c->bm, c->bn, c->bk, pipes[c->pipe],
                         c->wch == 16 ? "h" : "", c->mfirst ? "m" : "", c->wg ? zarena_printf(b->a, "w%d", c->wg) : "",
                         c->ablate ? zarena_printf(b->a, "_ablate%d", c->ablate) : "",
                         c->pad ? zarena_printf(b->a, "_pad%d", c->pad) : "", c->q6raw ? "_q6raw" : "");
}

static zstatus gen_gemm_cm(const zir_node *n, const mm_match *m, const zcg_cm *c, zcg_builder *b,
                           zdiag *d) {
    zstatus s = mm_bindings(b, n, m, d);
    if (s) return s;
    zcg_def_cm(b, c);
    /* ZINC_CM_DIRECT=1, a measurement (matmul_cm.glsl): fp16 weights and
     * fp16 x with no norm, fragments (with ZINC_CM_WG workgroup-scope
     * matrices) loaded straight from VRAM */
    bool direct = zcg_knob("ZINC_CM_DIRECT", 0, 1, 0) && b->o->act_f16 && !m->norm && c->pipe == 0 &&
                  m->first->in[1]->dtype == ZT_F16 && (!m->glu || m->up->in[1]->dtype == ZT_F16);
    if (direct) zcg_def_i(b, "CM_DIRECT", 1);
    b->k->groups[c->mfirst] = konst(m->N, m->glu ? c->bn / 2 : c->bn);
    b->k->groups[!c->mfirst] = per_token(1, c->bm);
    b->k->groups[2] = konst(1, 1);
    mm_name(b, "gemm", m, direct ? zarena_printf(b->a, "%s_direct", zcg_cm_suffix(b, c)) : zcg_cm_suffix(b, c));
    static const char *const files[] = {"dequant", "matmul_io", "matmul_cm", NULL};
    return zcg_build(b, files, n, d);
}

/* The prefill GEMM with K permuted (matmul_cmp.glsl: the weights' A
 * fragments decoded in registers, no weight tile in shared memory), for
 * matmuls whose weights are all Q4_K or one matrix of Q6_K planes, where
 * the target's fragment layout is known (ztarget.frag_right) and its
 * cm_perm asks: 2 decodes in fp32, 1 in fp16 (ZINC_CM_PERM=0/1/2
 * overrides). 128 tokens a workgroup (fewer where shared memory asks:
 * Q6_K's 128-wide steps take 80), 4 subgroups of 16 rows each: on the
 * H100 (run 68) the 2-layer 8B-wide step's gate+up took 1101.7 us with
 * them, 1377.1 with 64 (token tiles first), 1734.3 with the staged tiles;
 * the 8B's pp512 +14.5 %. ZINC_CMP_LAYOUT=bm,nsg and ZINC_CMP_MFIRST=1
 * (token tiles along x: a tie on the 8B, run 68) measure others. */
static int cm_perm(const zcg_builder *b, const zir_node *n, const mm_match *m) {
    /* Q6_K in the weight-layout pass's planes (8-byte aligned fields), one matrix */
    bool q6 = gemv_mode(m) == 14 && !m->glu && m->first->in[1]->layout == ZWL_Q6_PLANES;
    if (!m->first->attr.mm_f16 || m->n_seg || (gemv_mode(m) != 12 && !q6) || m->K % 128 || prefill_logits(b, n))
        return 0;
    const ztarget *t = b->o->target;
    if (!t->coopmat || t->subgroup != ZCG_CM_SG || !t->frag_right) return 0;
    return (int)zcg_knob("ZINC_CM_PERM", 0, 2, t->cm_perm);
}

/* The permuted GEMM's token tile: 128, halved (to 32) while its grid
 * has fewer workgroups than ZINC_CMP_FILL percent (90) of the target's
 * compute units. At 128 tokens the 8B's k and v (1024 rows, 16 row tiles)
 * are 64 workgroups of a 512-token step on 132 SMs: run 69 measured k at
 * 112.7 us a call, against q's 141.7 for 4x the rows. */
static int cmp_tokens(const zcg_builder *b, int64_t N, int nsg, int fill_pct) {
    int64_t T = b->o->max_tokens > 0 ? b->o->max_tokens : 512, cols = (N + 16 * nsg - 1) / (16 * nsg);
    int64_t fill = b->o->target->n_cu * zcg_knob("ZINC_CMP_FILL", 0, 10000, fill_pct) / 100;
    int bm = 128;
    while (bm > 32 && cols * ((T + bm - 1) / bm) < fill)
        bm /= 2;
    return bm;
}

/* The layout run 74's tuner measured best for Q4_K, as a rule (the
 * default since run 75; ZINC_CMP_RULE=0 takes the old one, to measure).
 * Eight subgroups where 128-row tiles of 128 tokens fill the device (each
 * lane stages half the x chunks: q 184 registers against 255, 6-13 %
 * faster for every matrix of 4096 rows or more), else four; tokens by the
 * grid at 150 % of the compute units (the 1024-row k and v at 32 tokens,
 * +10 %). Run 75 (H100): the 8B's pp512 9216 and 9286 -> 9755 and 9757
 * tok/s. Not Q6_K planes: run 75's q6_K down at 64 x 128 took 421.5 us
 * against 370.7 at the old 128 x 64 (one x buffer). */
static void cmp_rule(const zcg_builder *b, int64_t N, int *bm, int *nsg) {
    int64_t T = b->o->max_tokens > 0 ? b->o->max_tokens : 512;
    int64_t fill = b->o->target->n_cu * 90 / 100;
    *nsg = (N + 127) / 128 * ((T + 127) / 128) >= fill ? 8 : 4;
    *bm = cmp_tokens(b, N, *nsg, 150);
}

/* rows > 0: a batch step's rows (gemv_rows), x from the fp16 x pass
 * (gemvn_xh.glsl, the norm applied once a row), 16 tokens a workgroup
 * (ZINC_BCMP_LAYOUT=bm,nsg measures others). */
static zstatus gen_gemm_cmp(const zir_node *n, const mm_match *m, int perm, int rows, zcg_builder *b,
                            zdiag *d) {
    zstatus s = mm_bindings(b, n, m, d);
    if (s) return s;
    int bm = rows ? 16 : 128, nsg = 4, xh = 0;
    if (rows) {
        int64_t T = b->o->max_tokens > rows ? b->o->max_tokens : rows;
        xh = zcg_bind(b, "B_XH", NULL, false, (uint64_t)T * (uint64_t)m->K * 2u);
        zcg_def_i(b, "XH_IN", 1);
    }
    /* a prefill GEMM's layout: the tuner's candidate, or the measured one
     * of its key (zincc --tune), else the token tile by the grid */
    const zcg_gemv *w = NULL;
    if (!rows) {
        mm_name(b, "gemm", m, "_cmp");
        snprintf(b->k->key, sizeof b->k->key, "%s", b->k->name);
        w = b->o->force_gemv;
        for (int i = 0; !w && b->o->tuning && i < b->o->tuning->n; i++)
            if (!strcmp(b->o->tuning->key[i], b->k->key)) w = &b->o->tuning->gemv[i];
        if (w && !(w->bm >= 16 && w->bm <= 256 && w->bm % 16 == 0 && w->nsg >= 1 && w->nsg <= 16)) w = NULL;
    }
    const char *e = getenv(rows ? "ZINC_BCMP_LAYOUT" : "ZINC_CMP_LAYOUT");
    int w0, w1;
    const ztarget *t = b->o->target;
    if (e && sscanf(e, "%d,%d", &w0, &w1) == 2 && w0 >= 16 && w0 <= 256 && w0 % 16 == 0 && w1 >= 1 && w1 <= 16)
        bm = w0, nsg = w1;
    else if (w)
        bm = w->bm, nsg = w->nsg;
    else if (!rows && m->first->in[1]->dtype != ZT_Q6_K && zcg_knob("ZINC_CMP_RULE", 0, 1, 1))
        cmp_rule(b, m->N, &bm, &nsg);
    else if (!rows)
        bm = cmp_tokens(b, m->N, nsg, 90);
    int mfirst = (int)zcg_knob("ZINC_CMP_MFIRST", 0, 1, 0);
    /* two x tiles of BM tokens x one step (64, Q6_K 128), padded, in shared
     * memory; where they overflow, one (a second barrier a step: run 69,
     * the Q6_K down at 128 tokens 489.8 us against 535.6 at 80 in two
     * buffers; ZINC_CMP_XBUF=2 takes fewer tokens instead, to measure) */
    int bk = m->first->in[1]->dtype == ZT_Q6_K ? 128 : 64;
    int64_t tile = bk / 8 + 1, xbufs = 2;
    if ((uint32_t)(2 * bm * tile * 16) > t->smem_bytes && zcg_knob("ZINC_CMP_XBUF", 1, 2, 1) == 1 &&
        (uint32_t)(bm * tile * 16) <= t->smem_bytes)
        xbufs = 1;
    while (bm > 16 && (uint32_t)(xbufs * bm * tile * 16) > t->smem_bytes)
        bm -= 16;
    const int64_t v[] = {bm, nsg, ZCG_CM_SG, nsg * ZCG_CM_SG, mfirst, t->frag_right, t->frag_down, xbufs};
    const char *const names[] = {"BM", "NSG", "SG", "WG", "MFIRST", "FRAG_RIGHT", "FRAG_DOWN", "XBUFS"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        zcg_def_i(b, names[i], v[i]);
    if (perm == 2) zcg_def_i(b, "PERM_F32", 1);
    /* timing only, the values wrong (matmul_cmp.glsl's ABLATE): what a step's parts cost */
    int ablate = (int)zcg_knob("ZINC_CMP_ABLATE", 0, 7, 0);
    if (ablate) zcg_def_i(b, "ABLATE", ablate);
    b->k->groups[mfirst] = konst(m->N, 16 * nsg);
    b->k->groups[!mfirst] = per_token(1, bm);
    b->k->groups[2] = konst(1, 1);
    mm_name(b, rows ? "gemvn" : "gemm", m,
            zarena_printf(b->a, "_cmp%dx%d%s%s%s%s", bm, 16 * nsg, perm == 2 ? "p32" : "", mfirst ? "m" : "",
                          xbufs == 1 ? "b1" : "",
                          ablate ? zarena_printf(b->a, "_ablate%d", ablate) : ""));
    if (rows && (s = gemvn_xh_pass(b, n, m, xh, d))) return s;
    static const char *const files[] = {"dequant", "matmul_io", "perm_k", "matmul_cmp", NULL};
    return zcg_build(b, files, n, d);
}

/* How an MLP kernel is laid out: TT tokens per workgroup, the intermediate
 * cut into NSPLIT slices of SLICE rows. */
typedef struct mlp_cfg {
    int64_t tt, nsplit, slice, tmax, cnt, mb, rc;
    int wg, gu, du;
} mlp_cfg;

/* Shared memory of mlp.glsl: the TT x H accumulator, the TT x MB block of
 * the intermediate and the "last workgroup" flag. */
static uint64_t mlp_smem(int64_t tt, int64_t H, int64_t mb) {
    return 4u * (uint64_t)(tt * H + tt * mb + 1);
}

/* Decode (or any split > 1) cuts the intermediate across workgroups; the
 * prefill tile is the pass's, and must fit: refusing beats overflowing. */
static zstatus mlp_layout(const zir_node *n, const zcg_opts *o, int64_t H, int64_t FF, mlp_cfg *c, zdiag *d) {
    const ztarget *t = o->target;
    bool decode = o->phase == ZPH_DECODE;
    int64_t want = n->kp.split > 1 ? n->kp.split : 1;
    c->tt = decode ? 1 : (n->kp.token_tile > 0 ? n->kp.token_tile : 1);
    c->slice = ((FF + want - 1) / want + 7) / 8 * 8;
    c->nsplit = (FF + c->slice - 1) / c->slice;
    int64_t maxt = o->max_tokens > 0 ? o->max_tokens : 1;
    c->tmax = c->nsplit > 1 ? (maxt + c->tt - 1) / c->tt * c->tt : 0x7fffffff;
    /* The split reduction runs in chunks of at least 64 hidden columns, at
     * most 8 of them (each costs every workgroup a round trip to an atomic
     * counter): one counter per token tile and chunk. */
    c->rc = H / 64 < 1 ? 1 : H / 64 > 8 ? 8 : H / 64;
    c->cnt = c->nsplit > 1 ? (c->tmax / c->tt * c->rc + 3) / 4 * 4 : 0;
    /* Decode runs about one workgroup per compute unit (split = n_cu): it
     * takes the largest workgroup, so that enough loads are in flight, and
     * four gate/up chunks and four down rows per lane and trip. A prefill
     * tile already has tile-many sums per lane. */
    int sg = t->subgroup > 0 ? t->subgroup : 32, w = (c->tt == 1 ? 32 : 8) * sg;
    c->wg = w < 64 ? 64 : w > (c->tt == 1 ? 1024 : 256) ? (c->tt == 1 ? 1024 : 256) : w;
    c->gu = c->du = c->tt == 1 ? 4 : 1;
    c->mb = c->tt == 1 ? MLP_MB_DECODE : MLP_MB_PREFILL;
    uint64_t need = mlp_smem(c->tt, H, c->mb);
    if (need > t->smem_bytes)
        return zdiag_set(
            d, ZE_UNSUPPORTED,
            "codegen: kernel '%s' (mlp): a %lld-token tile needs %llu B of shared memory (a %lld x %lld "
            "fp32 accumulator and a %d-row block of the intermediate); target %s has %u B",
            n->out->name, (long long)c->tt, (unsigned long long)need, (long long)c->tt, (long long)H,
            (int)c->mb, t->name, t->smem_bytes);
    return ZOK;
}

static zstatus gen_mlp(const zir_node *n, const mm_match *m, zcg_builder *b, zdiag *d) {
    int64_t H = m->K, FF = m->N;
    mlp_cfg c;
    zstatus s = mlp_layout(n, b->o, H, FF, &c, d);
    if (!s) s = io_in(b, n, m, d);
    if (!s) s = zcg_weight(b, n, "W0", m->first->in[1], H, d);
    if (!s) s = zcg_weight(b, n, "W1", m->up->in[1], H, d);
    if (!s) s = zcg_weight(b, n, "W2", m->down->in[1], FF, d);
    if (!s) s = io_out(b, n, m, H, d);
    if (s) return s;
    if (c.nsplit > 1) {
        zcg_bind(b, "B_SCR", NULL, true, 4u * (uint64_t)(c.cnt + c.nsplit * c.tmax * H));
        zcg_def_i(b, "SCR_CNT", c.cnt);
        zcg_def_i(b, "RC", c.rc);
    }
    const int64_t v[] = {H, H, H, FF, c.tt, c.mb, c.slice, c.nsplit, c.tmax, c.wg, c.gu, c.du};
    const char *const names[] = {"N",     "K",      "H",    "FF", "TT", "MB",
                                 "SLICE", "NSPLIT", "TMAX", "WG", "GU", "DU"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        zcg_def_i(b, names[i], v[i]);
    b->k->groups[0] = konst(c.nsplit, 1);
    b->k->groups[1] = per_token(1, c.tt);
    b->k->groups[2] = konst(1, 1);
    snprintf(b->k->name, sizeof b->k->name, "mlp_%s.%s.%s_h%lld_f%lld_%s%lld%s%s",
             ztype_name(m->first->in[1]->dtype), ztype_name(m->up->in[1]->dtype),
             ztype_name(m->down->in[1]->dtype), (long long)H, (long long)FF, c.nsplit > 1 ? "s" : "t",
             (long long)(c.nsplit > 1 ? c.nsplit : c.tt), m->norm ? "+norm" : "", add_suffix(b, m));
    static const char *const files[] = {"dequant", "matmul_io", "mlp", NULL};
    return zcg_build(b, files, n, d);
}

zstatus zcg_matmul_family(const zir_graph *g, const zir_node *n, const zcg_opts *o, zarena *a,
                          zcg_kernel *out, zdiag *d) {
    memset(out, 0, sizeof *out);
    if (!o || !o->target) return zdiag_set(d, ZE_INVALID, "codegen: '%s': no target", n->out->name);
    zcg_builder b = {.g = g, .a = a, .o = o, .k = out};
    if (n->op == ZOP_EMBED) return gen_embed(n, &b, d);
    if (n->op != ZOP_MATMUL && n->op != ZOP_KERNEL)
        return zdiag_set(d, ZE_UNSUPPORTED, "codegen: '%s': op %s is not in the matmul family", n->out->name,
                         zir_ops[n->op].name);
    mm_match m;
    zstatus s = match(n, &m, d);
    if (s) return s;
    if (m.down) return gen_mlp(n, &m, &b, d);
    if (o->phase == ZPH_DECODE) return gen_gemv(n, &m, &b, d);
    if (o->gemv_rows > 0 && m.first->attr.mm_f16) {
        /* the mm-f16 pass marks a batch GEMV so only for a target with
         * matrix units; elsewhere the scalar GEMM rounds the operands alike */
        /* K permuted, the weights decoded into A fragments, 16 token rows
         * by 64 weight rows a workgroup (ZINC_BATCH_CMP=1: a measurement) */
        int perm = zcg_knob("ZINC_BATCH_CMP", 0, 1, 0) ? cm_perm(&b, n, &m) : 0;
        if (perm) return gen_gemm_cmp(n, &m, perm, o->gemv_rows, &b, d);
        if (o->target->coopmat && o->target->subgroup == ZCG_CM_SG && m.K % GEMVN_CM_BK == 0)
            return gen_gemvn_cm(n, &m, &b, d);
        if (m.n_seg) return bad(n, "fp16 operands in a rows kernel need the matrix units (coopmat)", d);
        return gen_gemm(n, &m, &b, d);
    }
    if (o->gemv_rows > 0) return gen_gemvn(n, &m, o->gemv_rows, &b, d);
    /* prefill: a matmul of few rows that the cost model sent to the GEMV */
    if (m.first->attr.mm_gemv) return gen_gemvn(n, &m, 0, &b, d);
    if (m.n_seg) return bad(n, "a horizontal GEMV runs in decode or as a batch step's multi-row GEMV", d);
    int perm = cm_perm(&b, n, &m);
    if (perm) return gen_gemm_cmp(n, &m, perm, 0, &b, d);
    zcg_cm c = zcg_cm_default(&b, m.glu != NULL, m.K, prefill_logits(&b, n), 0);
    return use_coopmat(&b, &m, &c) ? gen_gemm_cm(n, &m, &c, &b, d) : gen_gemm(n, &m, &b, d);
}
