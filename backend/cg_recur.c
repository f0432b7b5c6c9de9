/* Kernels for the ops of a Qwen3.5 gated delta-net layer, one dispatch per
 * op (no fusion yet):
 *
 *   unary      silu, sigmoid, softplus: a thread per element (unary.glsl)
 *   l2_norm    a workgroup per row (l2_norm.glsl)
 *   slice      a copy of a range of the last dimension (slice.glsl)
 *   ssm_conv   the causal depthwise conv: a thread per channel and chunk of
 *              CONV_TT tokens, its window in registers; the first chunk's
 *              writes the last K-1 rows back to the conv state (ssm_conv.glsl)
 *   delta_net  the gated delta rule, in one of two forms: token by token
 *              (delta_net.glsl: the rows of a head's state matrix spread
 *              over workgroups, LPK threads a row), or in chunks of C
 *              tokens whose updates are solved together, L lanes a row of
 *              the state and D / L rows a workgroup (delta_net_chunk.glsl)
 *
 * Both recurrent kernels read their state as zeros in a step at position 0
 * (a new sequence), as the interpreter does, and store it at the end of
 * every step.
 *
 * Which delta_net kernel a schedule gets is decided here, by the most tokens
 * of its steps and the target's shared memory (delta_chunk), not in a shader:
 *   - a schedule of one-token steps (decode) gets the token kernel, which
 *     updates the state in place with nothing staged but k and q: a chunk
 *     of one token only adds the chunk's bookkeeping.
 *   - prefill gets the chunked scan with the largest C of 64, 32, 16 and 8
 *     whose staging (keys, queries and u of C tokens, two C x C products)
 *     fits the target's shared memory: the token kernel's chain of two
 *     barriers and two dependent D-long dot products per token becomes one
 *     serial step per chunk, the chunk's dot products independent of each
 *     other. The C^2 D products grow with C, and 64 is where llama.cpp's
 *     delta-net-base and flash-linear-attention stop. A D too large for a
 *     chunk of 8 keeps the token kernel.
 *   - ZINC_DELTA_CHUNK=n forces prefill's C = n (1 to 64; 0: the token
 *     kernel), for measuring one against the other.
 * docs/architecture.md says what the matrix units would change. */
#include <stdio.h>
#include <string.h>

#include "cg_build.h"

enum {
    EW_WG = 256,
    NORM_WG = 64,
    CONV_WG = 64,
    CONV_MAX_K = 16,   /* taps: the window lives in registers */
    CONV_TT = 16,      /* tokens a conv invocation: at least CONV_MAX_K - 1 (only the first chunk reads the state) */
    DELTA_MAX_D = 256, /* head dimension: a workgroup's threads, a row in registers */
    DELTA_MAX_C = 64,  /* tokens per chunk of the chunked scan */
    DELTA_MIN_C = 8,
    DELTA_CHUNK_MAX_L = 4,   /* the chunked scan's lanes a state row, at least (where D allows) */
    DELTA_FILL_MAX_L = 16,   /* and at most to fill the device (the most measured, session 20) */
    DELTA_CHUNK_KNOB_L = 32, /* ZINC_DELTA_LANES at most: a lane keeps one 16-byte vector of D 128 */
    DELTA_TOKEN_LPK = 16, /* the token kernel's threads a state row */
    DELTA_TOKEN_WG = 128, /* and at most threads a workgroup */
    MAX_GRID_Y = 65535,
};

static zstatus refuse(const zir_node *n, const char *why, zdiag *d) {
    return zdiag_set(d, ZE_UNSUPPORTED, "codegen: %s '%s': %s", zir_ops[n->op].name, n->out->name, why);
}

/* Elements per token of v when v is [T, constants...] (f32 in the IR). */
static bool per_token(const zir_value *v, int64_t *per) {
    if (v->rank < 1 || v->shape[0] != ZDIM_T || v->dtype != ZT_F32) return false;
    int64_t e = 1;
    for (int i = 1; i < v->rank; i++) {
        if (v->shape[i] <= 0) return false;
        e *= v->shape[i];
    }
    *per = e;
    return e <= UINT32_MAX / MAX_GRID_Y;
}

/* The token on grid axis y, x-blocks of wg threads over per elements. */
static void token_grid(zcg_kernel *k, int64_t per, int64_t wg) {
    k->groups[0] = (zcg_affine){0, per, wg};
    k->groups[1] = (zcg_affine){1, 0, 1};
    k->groups[2] = (zcg_affine){0, 1, 1};
}

static void fixed_grid(zcg_kernel *k, int64_t x) {
    k->groups[0] = (zcg_affine){0, x, 1};
    k->groups[1] = k->groups[2] = (zcg_affine){0, 1, 1};
}

/* silu, sigmoid and softplus in the interpreter's (ggml's) float formulas. */
static zstatus gen_unary(const zir_node *n, zcg_builder *b, zdiag *d) {
    int64_t per, per_x;
    if (!per_token(n->out, &per) || !per_token(n->in[0], &per_x) || per_x != per)
        return refuse(n, "expected an input and output of shape [T, ...]", d);
    static const char *const f[] = {[ZOP_SILU] = "silu(x)", [ZOP_SIGMOID] = "sigmoid(x)",
                                    [ZOP_SOFTPLUS] = "softplus(x)"}; /* common.glsl */
    zcg_bind(b, NULL, n->in[0], false, 0);
    zcg_bind(b, NULL, n->out, true, 0);
    zcg_def_i(b, "PER_T", per);
    zcg_def_i(b, "WG", EW_WG);
    zcg_def_s(b, "UNOP(x)", f[n->op]);
    token_grid(b->k, per, EW_WG);
    snprintf(b->k->name, sizeof b->k->name, "%s_n%lld", zir_ops[n->op].name, (long long)per);
    static const char *const files[] = {"unary", NULL};
    return zcg_build(b, files, n, d);
}

static zstatus gen_l2_norm(const zir_node *n, zcg_builder *b, zdiag *d) {
    const zir_value *x = n->in[0];
    int64_t per, len = x->rank ? x->shape[x->rank - 1] : 0;
    if (!per_token(x, &per) || len <= 0) return refuse(n, "expected an input of shape [T, ...]", d);
    zcg_bind(b, NULL, x, false, 0);
    zcg_bind(b, NULL, n->out, true, 0);
    zcg_def_i(b, "N", len);
    zcg_def_i(b, "ROWS_PER_T", per / len);
    zcg_def_i(b, "WG", NORM_WG);
    zcg_def_s(b, "EPS", zarena_printf(b->a, "float(%.9g)", n->attr.eps));
    b->k->groups[0] = (zcg_affine){0, per / len, 1};
    b->k->groups[1] = (zcg_affine){1, 0, 1};
    b->k->groups[2] = (zcg_affine){0, 1, 1};
    snprintf(b->k->name, sizeof b->k->name, "l2_norm_n%lld_x%lld", (long long)len, (long long)(per / len));
    static const char *const files[] = {"attn_reduce", "l2_norm", NULL};
    return zcg_build(b, files, n, d);
}

static zstatus gen_slice(const zir_node *n, zcg_builder *b, zdiag *d) {
    const zir_value *x = n->in[0];
    int64_t per_x, per_y, len = n->attr.slice.len, off = n->attr.slice.off;
    int64_t w = x->rank ? x->shape[x->rank - 1] : 0;
    if (!per_token(x, &per_x) || !per_token(n->out, &per_y) || off < 0 || len < 1 || off + len > w)
        return refuse(n, "expected a slice of the last dimension of a [T, ...] input", d);
    zcg_bind(b, NULL, x, false, 0);
    zcg_bind(b, NULL, n->out, true, 0);
    zcg_def_i(b, "PER_X", per_x);
    zcg_def_i(b, "PER_Y", per_y);
    zcg_def_i(b, "N", w);
    zcg_def_i(b, "OFF", off);
    zcg_def_i(b, "LEN", len);
    zcg_def_i(b, "WG", EW_WG);
    token_grid(b->k, per_y, EW_WG);
    snprintf(b->k->name, sizeof b->k->name, "slice_n%lld_o%lld_l%lld_x%lld", (long long)w, (long long)off,
             (long long)len, (long long)(per_x / w));
    static const char *const files[] = {"slice", NULL};
    return zcg_build(b, files, n, d);
}

/* A recurrent state: f32 [dims...] of constant shape (the kv-type pass
 * leaves states in f32). */
static bool state_shape(const zir_value *s, int rank, int64_t d0, int64_t d1, int64_t d2) {
    int64_t want[3] = {d0, d1, d2};
    if (!zir_value_is_state(s) || s->dtype != ZT_F32 || s->rank != rank) return false;
    for (int i = 0; i < rank; i++)
        if (s->shape[i] != want[i]) return false;
    return true;
}

/* An ssm_conv node, or a ZKT_CONV kernel (fuse-conv: ssm_conv silu). */
static zstatus gen_ssm_conv(const zir_node *n, zcg_builder *b, zdiag *d) {
    const zir_node *cn = n->op == ZOP_KERNEL ? n->body[0] : n;
    bool silu = n->op == ZOP_KERNEL;
    if (cn->op != ZOP_SSM_CONV || (silu && (n->n_body != 2 || n->body[1]->op != ZOP_SILU)))
        return refuse(n, "expected ssm_conv, or a kernel of ssm_conv and silu", d);
    const zir_value *x = cn->in[0], *w = cn->in[1], *st = cn->in[2];
    int64_t per, C = x->rank == 2 ? x->shape[1] : 0, K = w->rank == 2 ? w->shape[1] : 0;
    if (!per_token(x, &per) || x->rank != 2 || w->rank != 2 || w->shape[0] != C)
        return refuse(n, "expected x [T, C] and taps [C, K]", d);
    if (K < 2 || K > CONV_MAX_K) return refuse(n, "expected 2 to 16 taps", d);
    if (w->dtype != ZT_F32 || w->nbytes < (uint64_t)(C * K * 4))
        return zdiag_set(d, ZE_UNSUPPORTED, "codegen: ssm_conv '%s': taps '%s' are %s: expected f32",
                         n->out->name, w->name, ztype_name(w->dtype));
    if (!state_shape(st, 2, K - 1, C, 0)) return refuse(n, "expected an f32 conv state [K-1, C]", d);
    zcg_bind(b, "B_X", x, false, 0);
    zcg_bind(b, "B_W", w, false, 0);
    zcg_bind(b, "B_S", st, true, 0);
    zcg_bind(b, "B_Y", n->out, true, 0);
    zcg_def_i(b, "C", C);
    zcg_def_i(b, "K", K);
    zcg_def_i(b, "WG", CONV_WG);
    zcg_def_i(b, "TT", CONV_TT);
    if (silu) zcg_def_i(b, "SILU_OUT", 1);
    b->k->groups[0] = (zcg_affine){0, C, CONV_WG};
    b->k->groups[1] = (zcg_affine){1, 0, CONV_TT};
    b->k->groups[2] = (zcg_affine){0, 1, 1};
    snprintf(b->k->name, sizeof b->k->name, "ssm_conv_c%lld_k%lld%s", (long long)C, (long long)K,
             silu ? "+silu" : "");
    static const char *const files[] = {"ssm_conv", NULL};
    return zcg_build(b, files, n, d);
}

/* Shared memory of delta_net_chunk.glsl: keys, queries and u of C tokens,
 * the C x C products A and B, and the gates, their sums and the betas. */
static int64_t delta_chunk_smem(int64_t C, int64_t D) {
    return 4 * (3 * C * D + 2 * C * C + 5 * C); /* + 2 C: fuse-delta's norms (counted always) */
}

/* The chunked scan's lanes a state row. A head is L workgroups of D / L
 * rows; each lane keeps D / L elements of its row and runs the chunk's
 * products over them, so more lanes mean more, shorter chains: the scan is
 * a chain per chunk (nothing waits on VRAM), and what hides one lane's
 * latencies is the other subgroups on its compute unit. So: the fewest
 * lanes, from 4, whose Hv L workgroups fill the device
 * (zcg_fill_workgroups), up to DELTA_FILL_MAX_L. On the H100, the
 * 9B's head (D 128, 32 value heads, 132 SMs): 4 lanes (128 workgroups, one
 * subgroup a scheduler) 490 us a layer of a 512-token step, 16 lanes (512)
 * 363 us, pp512 +3.4 % (docs/performance.md, session 20). The lanes sum by
 * shuffles, so they stay within the target's subgroup and leave each lane
 * whole 16-byte vectors of the row. ZINC_DELTA_LANES=n forces it, to
 * measure. */
static int64_t delta_chunk_lanes(const zcg_opts *o, int64_t D, int64_t Hv) {
    int64_t sg = o->target && o->target->subgroup > 0 ? o->target->subgroup : 32;
    int64_t fill = zcg_fill_workgroups(o), want = DELTA_CHUNK_MAX_L;
    while (want < DELTA_FILL_MAX_L && Hv * want < fill)
        want *= 2;
    int64_t l = zcg_knob("ZINC_DELTA_LANES", 1, DELTA_CHUNK_KNOB_L, want);
    while (l > 1 && (D % (4 * l) || l > sg || (l & (l - 1))))
        l--;
    return l;
}

int64_t zcg_delta_chunk(const zcg_opts *o, int64_t D) {
    if (o->max_tokens <= 1 || D % 4) return 0; /* the chunk's rows are 16-byte vectors */
    int64_t forced = zcg_knob("ZINC_DELTA_CHUNK", 0, DELTA_MAX_C, -1);
    if (forced >= 0) return forced;
    int64_t budget = o->target ? o->target->smem_bytes : 16384, C = DELTA_MAX_C;
    while (C >= DELTA_MIN_C && delta_chunk_smem(C, D) > budget)
        C /= 2;
    return C >= DELTA_MIN_C ? C : 0;
}

/* Where one of the delta rule's q, k and v comes from: the value bound,
 * its row stride and first column (elements), and the eps of an L2 norm
 * the kernel applies (fuse-delta: [slice] [reshape] [l2_norm] inside the
 * kernel node kn, in that order from the source). */
typedef struct delta_operand {
    const zir_value *src;
    int64_t rs, off;
    float eps; /* > 0: the kernel L2-normalizes the operand's head rows */
} delta_operand;

static bool delta_operand_of(const zir_node *kn, const zir_value *v, delta_operand *op) {
    int64_t per, len = v->rank == 3 ? v->shape[1] * v->shape[2] : 0;
    *op = (delta_operand){.src = v, .rs = len};
    const zir_node *p = v->producer;
    if (kn && p && p->parent == kn && p->op == ZOP_L2_NORM) {
        op->eps = p->attr.eps > 0 ? p->attr.eps : 1e-30f;
        v = p->in[0], p = v->producer;
    }
    if (kn && p && p->parent == kn && p->op == ZOP_RESHAPE) v = p->in[0], p = v->producer;
    if (kn && p && p->parent == kn && p->op == ZOP_SLICE) {
        const zir_value *x = p->in[0];
        if (x->rank != 2 || p->attr.slice.len != len || p->attr.slice.off < 0 ||
            p->attr.slice.off + len > x->shape[1])
            return false;
        op->off = p->attr.slice.off;
        op->rs = x->shape[1];
        v = x, p = v->producer;
    }
    if (kn && p && p->parent == kn) return false; /* a body node this does not read through */
    op->src = v;
    return per_token(v, &per) && per == op->rs && len > 0;
}

static void delta_bind(zcg_builder *b, const char *which, const delta_operand *op) {
    zcg_bind(b, zarena_printf(b->a, "B_%s", which), op->src, false, 0);
    zcg_def_i(b, zarena_printf(b->a, "%s_RS", which), op->rs);
    zcg_def_i(b, zarena_printf(b->a, "%s_OFF", which), op->off);
    if (op->eps > 0)
        zcg_def_s(b, zarena_printf(b->a, "L2%s_EPS", which), zarena_printf(b->a, "float(%.9g)", op->eps));
}

/* Prefill's chunked rule as two dispatches (the default): the chunks'
 * state-free part, all at once (delta_net_prep.glsl, a workgroup per value
 * head and chunk, as the node's pre pass), then the serial scan over the
 * chunks with the state (delta_net_scan.glsl), through a transient scratch
 * of the step's chunk-padded rows: the normed keys and queries [TP, Hk, D],
 * W and U [TP, Hv, D], B [chunks, Hv, C, C] and G [TP, Hv]. The one-kernel
 * form (delta_net_chunk.glsl, ZINC_DELTA_PREP=0) keeps all of it in the
 * chain of each chunk: run 51 measured it at 836 us a 9B layer of a
 * 512-token step, 20 % of the step. */
static zstatus delta_prep_scan(zcg_builder *b, const zir_node *n, int64_t Hk, int64_t Hv, int64_t D, int64_t C,
                               int64_t l, const char *fused, zdiag *d) {
    int64_t nc = (b->o->max_tokens + C - 1) / C, tp = nc * C;
    int64_t xq = tp * Hk * D / 4, xw = 2 * xq, xu = xw + tp * Hv * D / 4, xb = 4 * (xu + tp * Hv * D / 4);
    int64_t xg = xb + nc * Hv * C * C, floats = xg + tp * Hv;
    if (floats >= (int64_t)1 << 32)
        return refuse(n, "the chunked scan's scratch needs more than 2^32 floats (a shorter prefill chunk)", d);
    int xi = zcg_bind(b, "B_X", NULL, true, 4 * (uint64_t)floats);
    b->k->bind[xi - 1].transient = true;
    zcg_def_i(b, "XK", 0);
    zcg_def_i(b, "XQ", xq);
    zcg_def_i(b, "XW", xw);
    zcg_def_i(b, "XU", xu);
    zcg_def_i(b, "XB", xb);
    zcg_def_i(b, "XG", xg);
    zcg_kernel *pre = zarena_alloc(b->a, sizeof *pre);
    if (!pre) return zdiag_set(d, ZE_NOMEM, "codegen: out of memory for '%s'", n->out->name);
    *pre = *b->k;
    for (int i = 0; i < pre->n_bind; i++)
        pre->bind[i].written = i == xi - 1;
    pre->pre = NULL;
    pre->groups[0] = (zcg_affine){0, Hv, 1};
    pre->groups[1] = (zcg_affine){1, 0, C};
    pre->groups[2] = (zcg_affine){0, 1, 1};
    snprintf(pre->name, sizeof pre->name, "delta_net_prep_hk%lld_hv%lld_d%lld_c%lld%s", (long long)Hk,
             (long long)Hv, (long long)D, (long long)C, fused);
    zcg_kernel *scan = b->k;
    b->k = pre;
    static const char *const prep[] = {"delta_net_io", "delta_net_prep", NULL};
    zstatus s = zcg_build(b, prep, n, d);
    b->k = scan;
    if (s) return s;
    scan->pre = pre;
    scan->bind[xi - 1].written = false;
    snprintf(scan->name, sizeof scan->name, "delta_net_chunk_hk%lld_hv%lld_d%lld_c%lld_l%lld%s", (long long)Hk,
             (long long)Hv, (long long)D, (long long)C, (long long)l, fused);
    static const char *const files[] = {"delta_net_io", "delta_net_scan", NULL};
    return zcg_build(b, files, n, d);
}

/* A delta_net node, or a ZKT_DELTA kernel (fuse-delta) ending in one. */
static zstatus gen_delta_net(const zir_node *n, zcg_builder *b, zdiag *d) {
    const zir_node *kn = n->op == ZOP_KERNEL ? n : NULL, *dn = kn ? n->body[n->n_body - 1] : n;
    if (dn->op != ZOP_DELTA_NET) return refuse(n, "expected a kernel ending in delta_net", d);
    const zir_value *q = dn->in[0], *k = dn->in[1], *v = dn->in[2], *g = dn->in[3], *beta = dn->in[4];
    const zir_value *st = dn->in[5];
    int64_t per;
    bool ok = q->rank == 3 && per_token(q, &per) && v->rank == 3 && per_token(v, &per);
    int64_t Hk = ok ? q->shape[1] : 0, D = ok ? q->shape[2] : 0, Hv = ok ? v->shape[1] : 0;
    ok =
        ok && k->rank == 3 && per_token(k, &per) && k->shape[1] == Hk && k->shape[2] == D && v->shape[2] == D;
    ok = ok && g->rank == 2 && per_token(g, &per) && per == Hv && beta->rank == 2 && per_token(beta, &per) &&
         per == Hv && Hv % Hk == 0;
    if (!ok) return refuse(n, "expected q, k [T, Hk, D], v [T, Hv, D] and gates [T, Hv]", d);
    if (D < 1 || D > DELTA_MAX_D) return refuse(n, "expected a head dimension of at most 256", d);
    if (!state_shape(st, 3, Hv, D, D)) return refuse(n, "expected an f32 state [Hv, D, D]", d);
    delta_operand oq, ok_, ov;
    if (!delta_operand_of(kn, q, &oq) || !delta_operand_of(kn, k, &ok_) || !delta_operand_of(kn, v, &ov) ||
        ov.eps > 0)
        return refuse(n, "expected q, k and v as [slice] [reshape] [l2_norm] of [T, ...] rows (q, k normed)", d);
    delta_bind(b, "Q", &oq);
    delta_bind(b, "K", &ok_);
    delta_bind(b, "V", &ov);
    zcg_bind(b, "B_G", g, false, 0);
    zcg_bind(b, "B_BETA", beta, false, 0);
    zcg_bind(b, "B_S", st, true, 0);
    zcg_bind(b, "B_Y", n->out, true, 0);
    zcg_def_i(b, "D", D);
    zcg_def_i(b, "HK", Hk);
    zcg_def_i(b, "HV", Hv);
    zcg_def_s(b, "SCALE", zarena_printf(b->a, "float(%.9g)", dn->attr.scale));
    /* fuse-delta's share in the name: q/k/v read in place, norms in the prologue */
    const char *fused = !kn                                                      ? ""
                        : (oq.src == ok_.src && ok_.src == ov.src) && oq.eps > 0 ? "+qkv+l2"
                        : oq.eps > 0 || ok_.eps > 0                              ? "+l2"
                                                                                 : "+qkv";
    int64_t C = zcg_delta_chunk(b->o, D);
    if (C) {
        int64_t l = delta_chunk_lanes(b->o, D, Hv);
        fixed_grid(b->k, Hv * l);
        zcg_def_i(b, "C", C);
        zcg_def_i(b, "L", l);
        if (zcg_knob("ZINC_DELTA_PREP", 0, 1, 1)) return delta_prep_scan(b, n, Hk, Hv, D, C, l, fused, d);
        snprintf(b->k->name, sizeof b->k->name, "delta_net_chunk_hk%lld_hv%lld_d%lld_c%lld_l%lld_one%s",
                 (long long)Hk, (long long)Hv, (long long)D, (long long)C, (long long)l, fused);
    } else {
        /* The token kernel: LPK threads a row (the largest of 16, 8, 4, 2
         * and 1 dividing D), RW rows a workgroup (up to 128 threads, RW
         * dividing D), so a head is D / RW workgroups. */
        int64_t lpk = DELTA_TOKEN_LPK, rw;
        while (D % lpk)
            lpk /= 2;
        for (rw = DELTA_TOKEN_WG / lpk; D % rw; rw /= 2)
            ;
        zcg_def_i(b, "LPK", lpk);
        zcg_def_i(b, "RW", rw);
        zcg_def_i(b, "WG", rw * lpk);
        fixed_grid(b->k, Hv * (D / rw));
        snprintf(b->k->name, sizeof b->k->name, "delta_net_hk%lld_hv%lld_d%lld%s", (long long)Hk, (long long)Hv,
                 (long long)D, fused);
    }
    static const char *const token[] = {"delta_net_io", "delta_net", NULL};
    static const char *const chunked[] = {"delta_net_io", "delta_net_chunk", NULL};
    return zcg_build(b, C ? chunked : token, n, d);
}

zstatus zcg_recurrent(const zir_graph *g, const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *out,
                      zdiag *d) {
    memset(out, 0, sizeof *out);
    zcg_builder b = {.g = g, .a = a, .o = o, .k = out};
    if (n->op == ZOP_KERNEL) switch (n->kp.tmpl) {
        case ZKT_CONV: return gen_ssm_conv(n, &b, d);
        case ZKT_DELTA: return gen_delta_net(n, &b, d);
        default: return refuse(n, "not a delta-net kernel", d);
        }
    switch (n->op) {
    case ZOP_SILU:
    case ZOP_SIGMOID:
    case ZOP_SOFTPLUS: return gen_unary(n, &b, d);
    case ZOP_L2_NORM: return gen_l2_norm(n, &b, d);
    case ZOP_SLICE: return gen_slice(n, &b, d);
    case ZOP_SSM_CONV: return gen_ssm_conv(n, &b, d);
    case ZOP_DELTA_NET: return gen_delta_net(n, &b, d);
    default: return refuse(n, "not a delta-net op", d);
    }
}
