/* Kernels for the ops around the matmuls: RMSNorm, add (residual or bias),
 * SwiGLU, RoPE and the KV-cache store. Each is a short template
 * (backend/glsl/<name>.glsl) specialised by #defines: shapes are constants,
 * T and pos come from the step buffer. Token-major ops put the token on
 * grid axis y, so a prefill of up to 65535 tokens needs no grid-stride loop.
 * The causal softmax is an attention op in all but kind (ZK_NORM); it is
 * generated with the others in cg_attn.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codegen.h"

#define MAX_GRID_Y 65535 /* the smallest maxComputeWorkGroupCount Vulkan guarantees */

static zstatus unsupported(zdiag *d, const zir_node *n, const char *why) {
    return zdiag_set(d, ZE_UNSUPPORTED, "codegen: %s '%s': %s", zir_ops[n->op].name, n->out->name, why);
}

/* Elements per token of v, when v is [T, constants...]. */
static bool per_token(const zir_value *v, int64_t *per) {
    if (v->rank < 1 || v->shape[0] != ZDIM_T) return false;
    int64_t e = 1;
    for (int i = 1; i < v->rank; i++) {
        if (v->shape[i] <= 0) return false;
        e *= v->shape[i];
    }
    *per = e;
    return e <= UINT32_MAX / MAX_GRID_Y;
}

/* Elements of v, when every dimension is a constant. */
static bool const_elems(const zir_value *v, int64_t *n) {
    int64_t e = 1;
    for (int i = 0; i < v->rank; i++) {
        if (v->shape[i] <= 0) return false;
        e *= v->shape[i];
    }
    *n = e;
    return true;
}

static bool f32_weight(const zir_value *v, int64_t n) {
    return v && v->role == ZR_WEIGHT && v->dtype == ZT_F32 && v->nbytes >= (uint64_t)n * 4;
}

static void bind(zcg_kernel *k, const zir_value *v, bool written) {
    k->bind[k->n_bind++] = (zcg_binding){.value = v, .written = written};
}

/* Grid of x-blocks covering `per` elements of each of the T tokens on y. */
static void token_grid(zcg_kernel *k, int64_t per, int64_t wg) {
    k->groups[0] = (zcg_affine){0, per, wg};
    k->groups[1] = (zcg_affine){1, 0, 1};
    k->groups[2] = (zcg_affine){0, 1, 1};
}

/* Composes the kernel from its library files and template (NULL-terminated). */
static zstatus finish_files(zcg_kernel *k, zarena *a, const char *const *defs, const char *const *files,
                            const zcg_opts *o, zdiag *d) {
    k->glsl = zcg_compose(a, defs, files, o);
    if (!k->glsl) return zdiag_set(d, ZE_NOMEM, "codegen: cannot compose kernel '%s'", k->name);
    return ZOK;
}

static zstatus finish(zcg_kernel *k, zarena *a, const char *const *defs, const char *file, const zcg_opts *o,
                      zdiag *d) {
    const char *files[] = {file, NULL};
    return finish_files(k, a, defs, files, o, d);
}

static zstatus check_tokens(const zir_node *n, const zcg_opts *o, zdiag *d) {
    if (o->max_tokens > MAX_GRID_Y) return unsupported(d, n, "steps of more than 65535 tokens");
    return ZOK;
}

/* An rms_norm node, or a ZKT_NORM_GATE kernel (fuse-norm-gate: rms_norm,
 * then swiglu(gate, normed): the norm's output times SiLU of the gate). */
static zstatus gen_rms_norm(const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *k, zdiag *d) {
    const zir_node *nn = n->op == ZOP_KERNEL ? n->body[0] : n;
    const zir_value *x = nn->in[0], *w = nn->in[1], *gate = NULL;
    int64_t per, per_g, len = x->rank ? x->shape[x->rank - 1] : 0;
    if (n->op == ZOP_KERNEL) {
        const zir_node *u = n->n_body == 2 ? n->body[1] : NULL;
        if (nn->op != ZOP_RMS_NORM || !u || u->op != ZOP_SWIGLU || u->in[1] != nn->out)
            return unsupported(d, n, "expected a kernel of rms_norm and swiglu(gate, normed)");
        gate = u->in[0];
    }
    if (!per_token(x, &per) || len <= 0) return unsupported(d, n, "expected an input of shape [T, ...]");
    if (gate && (!per_token(gate, &per_g) || per_g != per))
        return unsupported(d, n, "expected a gate of the input's shape");
    if (!f32_weight(w, len) || w->rank != 1 || w->shape[0] != len)
        return unsupported(d, n, "expected an f32 weight as long as the last dimension");
    /* Wide rows (a 4096 hidden state) get more threads than per-head rows. */
    int64_t wg = len >= 1024 ? 256 : 64;
    snprintf(k->name, sizeof k->name, "rms_norm_n%lld_x%lld%s", (long long)len, (long long)(per / len),
             gate ? "+gate" : "");
    bind(k, x, false);
    bind(k, w, false);
    bind(k, n->out, true);
    if (gate) bind(k, gate, false); /* binding 4 */
    k->groups[0] = (zcg_affine){0, per / len, 1};
    k->groups[1] = (zcg_affine){1, 0, 1};
    k->groups[2] = (zcg_affine){0, 1, 1};
    const char *eps = zarena_printf(a, "float(%.9g)", nn->attr.eps);
    const char *defs[] = {"N",   zcg_i64(a, len), "ROWS_PER_T", zcg_i64(a, per / len), "WG", zcg_i64(a, wg),
                          "EPS", eps,             gate ? "GATE" : NULL, "1",           NULL};
    static const char *const files[] = {"attn_reduce", "rms_norm", NULL};
    return finish_files(k, a, defs, files, o, d);
}

/* add, swiglu and mul: out = op(a, b), b broadcast over the leading dims
 * (or, for mul, one value per token). */
static zstatus gen_binary(const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *k, zdiag *d) {
    const zir_value *x = n->in[0], *b = n->in[1];
    int64_t per, per_a, per_b = 0, m = 0;
    if (!per_token(n->out, &per) || !per_token(x, &per_a) || per_a != per)
        return unsupported(d, n, "expected a first operand and output of shape [T, ...]");
    bool full = per_token(b, &per_b), row = full && per_b == 1 && per != 1 && n->op == ZOP_MUL;
    full = full && !row;
    if (full && per_b != per) return unsupported(d, n, "a [T, ...] second operand must match the first");
    if (!full && !row && (!const_elems(b, &m) || per % m))
        return unsupported(d, n, "expected a second operand that repeats over the first");
    bool weight = b->role == ZR_WEIGHT;
    if (weight && (full || !f32_weight(b, m))) return unsupported(d, n, "expected an f32 weight operand");
    bool glu = n->op == ZOP_SWIGLU, mul = n->op == ZOP_MUL;
    snprintf(k->name, sizeof k->name, "%s_n%lld%s", zir_ops[n->op].name, (long long)per,
             full     ? ""
             : row    ? "+row"
             : weight ? "+bias"
                      : "+bcast");
    bind(k, x, false);
    bind(k, b, false);
    bind(k, n->out, true);
    token_grid(k, per, 256);
    const char *defs[16] = {"PER_T",       zcg_i64(a, per),
                            "WG",          "256",
                            "BINOP(a, b)", glu ? "(silu(a) * (b))" : mul ? "((a) * (b))" : "((a) + (b))"};
    int nd = 6;
    if (weight) defs[nd++] = "B_WEIGHT", defs[nd++] = "1";
    if (row)
        defs[nd++] = "B_ROW", defs[nd++] = "1";
    else if (full)
        defs[nd++] = "B_FULL", defs[nd++] = "1";
    else
        defs[nd++] = "B_N", defs[nd++] = zarena_printf(a, "%lldu", (long long)m);
    defs[nd] = NULL;
    return finish(k, a, defs, "add", o, d);
}

static zstatus gen_kv_store(const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *k, zdiag *d) {
    const zir_value *x = n->in[0], *c = n->in[1];
    int64_t row;
    if (!per_token(x, &row) || x->rank != 3)
        return unsupported(d, n, "expected new rows of shape [T, Hkv, D]");
    if (c->role != ZR_KV || c->rank != 3 || c->shape[0] != ZDIM_C || c->shape[1] != x->shape[1] ||
        c->shape[2] != x->shape[2])
        return unsupported(d, n, "expected a [C, Hkv, D] cache matching the new rows");
    snprintf(k->name, sizeof k->name, "kv_store_row%lld", (long long)row);
    bind(k, x, false);
    bind(k, c, true); /* the node's output is a view of c: nothing else to write */
    int64_t wg = 64;
    token_grid(k, row, wg);
    const char *defs[] = {"ROW", zarena_printf(a, "%lldu", (long long)row), "WG", zcg_i64(a, wg), NULL};
    return finish(k, a, defs, "kv_store", o, d);
}

/* A float as a GLSL literal that is exact when read back as a float. */
static const char *flit(zarena *a, float v) {
    const char *s = zarena_printf(a, "%.9g", v);
    return s && !strpbrk(s, ".en") ? zarena_printf(a, "%s.0", s) : s;
}

/* v rounded to 12 significant bits: a product with another 12-bit number is
 * exact in fp32. */
static double top12(double v) {
    int e;
    double m = frexp(v, &e);
    return v == 0 ? 0 : ldexp(nearbyint(m * 4096.0), e - 12);
}

/* The turns per position of each pair, u_j = c_j / 2pi with
 * c_j = freq_scale * theta^(-2j/n_rot) / factor_j (the interpreter's angle,
 * in double), as float[](...) initializers of its pieces U1 + U2 + U3
 * (rope.glsl says why). The factors are weight bytes, known here. */
static zstatus turn_tables(const zir_node *n, const float *factor, zarena *a, const char *tab[3]) {
    int nr = n->attr.rope.n_rot;
    size_t cap = (size_t)nr / 2 * 20 + 16, len[3];
    char *t[3];
    for (int i = 0; i < 3; i++) {
        if (!(t[i] = zarena_alloc(a, cap))) return ZE_NOMEM;
        len[i] = (size_t)snprintf(t[i], cap, "float[](");
    }
    for (int j = 0; j < nr / 2; j++) {
        double c = (double)n->attr.rope.freq_scale * pow((double)n->attr.rope.theta, -(double)(2 * j) / nr);
        if (factor) c /= factor[j];
        double u = c / 6.283185307179586477, u1 = top12(u), u2 = top12(u - u1);
        float piece[3] = {(float)u1, (float)u2, (float)(u - u1 - u2)};
        for (int i = 0; i < 3; i++) {
            const char *lit = flit(a, piece[i]);
            if (!lit) return ZE_NOMEM;
            len[i] += (size_t)snprintf(t[i] + len[i], cap - len[i], "%s%s", j ? "," : "", lit);
        }
    }
    for (int i = 0; i < 3; i++) {
        snprintf(t[i] + len[i], cap - len[i], ")");
        tab[i] = t[i];
    }
    return ZOK;
}

/* imrope (Qwen3.5): which pairs turn, as a uint[](...) initializer. For text
 * the t, h and w positions are all the token's; ggml gives sector j mod
 * sum(sections) one of them when it falls in the interleaved t,h,w pattern,
 * else the 4th position, which is 0 for text: those pairs stay. The same
 * rule as the interpreter's imrope_moves. */
static const char *imrope_moves(const zir_node *n, zarena *a) {
    const int *sc = n->attr.rope.sections;
    int npair = n->attr.rope.n_rot / 2, sum = sc[0] + sc[1] + sc[2] + sc[3];
    char *t = sum > 0 ? zarena_alloc(a, (size_t)npair * 2 + 16) : NULL;
    if (!t) return NULL;
    size_t len = (size_t)sprintf(t, "uint[](");
    for (int j = 0; j < npair; j++) {
        int s = j % sum;
        bool mv =
            (s % 3 == 1 && s < 3 * sc[1]) || (s % 3 == 2 && s < 3 * sc[2]) || (s % 3 == 0 && s < 3 * sc[0]);
        len += (size_t)sprintf(t + len, "%s%d", j ? "," : "", mv);
    }
    sprintf(t + len, ")");
    return t;
}

/* What RoPE node n needs from rope_lib.glsl: defines appended to defs at
 * *nd (D, NR, NPAIR, NEOX, the angle tables U1..U3 and imrope's MOVES). */
zstatus zcg_rope_defs(const zir_node *n, int64_t D, zarena *a, const char **defs, int *nd, zdiag *d) {
    const zir_value *ff = n->in[1];
    int nr = n->attr.rope.n_rot;
    bool imrope = n->attr.rope.mode == ZROPE_IMROPE, neox = n->attr.rope.mode == ZROPE_NEOX || imrope;
    if (nr < 2 || nr % 2 || nr > D) return unsupported(d, n, "expected an even n_rot <= head_dim");
    if (!neox && n->attr.rope.mode != ZROPE_NORMAL) return unsupported(d, n, "unknown RoPE mode");
    const char *moves = imrope ? imrope_moves(n, a) : NULL;
    if (imrope && !moves) return unsupported(d, n, "expected imrope sections that sum to at least 1");
    if (ff && (!f32_weight(ff, nr / 2) || ff->rank != 1 || ff->shape[0] != nr / 2 || !ff->data))
        return unsupported(d, n, "expected frequency factors as an f32 weight of n_rot/2 elements");
    const char *tab[3];
    if (turn_tables(n, ff ? (const float *)ff->data : NULL, a, tab))
        return zdiag_set(d, ZE_NOMEM, "codegen: out of memory");
    const char *kv[] = {"D",     zcg_i64(a, D),
                        "NR",    zcg_i64(a, nr),
                        "NPAIR", zcg_i64(a, nr / 2),
                        "NEOX",  neox ? "1" : "0",
                        "U1",    tab[0],
                        "U2",    tab[1],
                        "U3",    tab[2]};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        defs[(*nd)++] = kv[i];
    if (moves) defs[(*nd)++] = "MOVES", defs[(*nd)++] = moves;
    return ZOK;
}

static zstatus gen_rope(const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *k, zdiag *d) {
    const zir_value *x = n->in[0];
    int64_t per;
    if (!per_token(x, &per) || x->rank != 3) return unsupported(d, n, "expected an input of shape [T, H, D]");
    int64_t H = x->shape[1], D = x->shape[2];
    int nr = n->attr.rope.n_rot, nd = 4;
    const char *defs[26] = {"H", zcg_i64(a, H), "WG", "64"};
    zstatus s = zcg_rope_defs(n, D, a, defs, &nd, d);
    if (s) return s;
    defs[nd] = NULL;
    snprintf(k->name, sizeof k->name, "rope_%s_h%lld_d%lld_r%d%s",
             n->attr.rope.mode == ZROPE_IMROPE ? "imrope"
             : n->attr.rope.mode == ZROPE_NEOX ? "neox"
                                               : "norm",
             (long long)H, (long long)D, nr, n->in[1] ? "+ff" : "");
    bind(k, x, false);
    bind(k, n->out, true);
    token_grid(k, H * (nr / 2 + (D - nr)), 64);
    static const char *const files[] = {"rope_lib", "rope", NULL};
    return finish_files(k, a, defs, files, o, d);
}

/* The body of a head kernel (ZKT_HEAD): [rms_norm] [rope] [kv_store]. */
static zstatus head_body(const zir_node *n, const zir_node **norm, const zir_node **rope,
                         const zir_node **store, zdiag *d) {
    *norm = *rope = *store = NULL;
    for (int i = 0; i < n->n_body; i++) {
        const zir_node *b = n->body[i];
        const zir_node **slot = b->op == ZOP_RMS_NORM   ? norm
                                : b->op == ZOP_ROPE     ? rope
                                : b->op == ZOP_KV_STORE ? store
                                                        : NULL;
        if (!slot || *slot)
            return unsupported(d, n, "a head kernel holds one each of rms_norm, rope, kv_store");
        *slot = b;
    }
    return ZOK;
}

/* q or k preparation: one workgroup per head and token (head.glsl). */
static zstatus gen_head(const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *k, zdiag *d) {
    const zir_node *norm, *rope, *store;
    zstatus s = head_body(n, &norm, &rope, &store, d);
    if (s) return s;
    const zir_value *x = n->body[0]->in[0];
    int64_t per;
    if (!per_token(x, &per) || x->rank != 3)
        return unsupported(d, n, "expected a head input of shape [T, H, D]");
    int64_t H = x->shape[1], D = x->shape[2];
    if (norm && (!f32_weight(norm->in[1], D) || norm->in[1]->rank != 1 || norm->in[1]->shape[0] != D))
        return unsupported(d, n, "expected an f32 norm weight as long as the head");
    if (store && (store->in[1]->role != ZR_KV || store->in[1]->rank != 3 || store->in[1]->shape[1] != H ||
                  store->in[1]->shape[2] != D))
        return unsupported(d, n, "expected a [C, H, D] cache matching the heads");
    int64_t wg = D >= 64 ? 64 : 32;
    int nd = 0;
    const char *defs[42];
    const char *kv[] = {"H",         zcg_i64(a, H),    "WG",       zcg_i64(a, wg),
                        "HAS_NORM",  norm ? "1" : "0", "HAS_ROPE", rope ? "1" : "0",
                        "HAS_STORE", store ? "1" : "0"};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        defs[nd++] = kv[i];
    if (rope && (s = zcg_rope_defs(rope, D, a, defs, &nd, d))) return s;
    if (!rope) defs[nd++] = "D", defs[nd++] = zcg_i64(a, D);
    bind(k, x, false);
    if (norm) {
        bind(k, norm->in[1], false);
        defs[nd++] = "B_NW", defs[nd++] = "2";
        defs[nd++] = "EPS", defs[nd++] = zarena_printf(a, "float(%.9g)", norm->attr.eps);
    }
    bind(k, store ? store->in[1] : n->out, true); /* a store's output is a view of its cache */
    defs[nd++] = "B_Y", defs[nd++] = zcg_i64(a, k->n_bind);
    defs[nd] = NULL;
    snprintf(k->name, sizeof k->name, "head%s%s%s_h%lld_d%lld", norm ? "_norm" : "", rope ? "_rope" : "",
             store ? "_store" : "", (long long)H, (long long)D);
    k->groups[0] = (zcg_affine){0, H, 1};
    k->groups[1] = (zcg_affine){1, 0, 1};
    k->groups[2] = (zcg_affine){0, 1, 1};
    static const char *const with_rope[] = {"attn_reduce", "rope_lib", "head", NULL};
    static const char *const without[] = {"attn_reduce", "head", NULL};
    return finish_files(k, a, defs, rope ? with_rope : without, o, d);
}

zstatus zcg_misc(const zir_graph *g, const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *out,
                 zdiag *d) {
    memset(out, 0, sizeof *out);
    zstatus s = check_tokens(n, o, d);
    if (s) return s;
    if (n->op == ZOP_KERNEL && n->kp.tmpl == ZKT_HEAD) return gen_head(n, o, a, out, d);
    if (n->op == ZOP_KERNEL && n->kp.tmpl == ZKT_NORM_GATE) return gen_rms_norm(n, o, a, out, d);
    switch (n->op) {
    case ZOP_RMS_NORM: return gen_rms_norm(n, o, a, out, d);
    case ZOP_ADD:
    case ZOP_MUL:
    case ZOP_SWIGLU: return gen_binary(n, o, a, out, d);
    case ZOP_ROPE: return gen_rope(n, o, a, out, d);
    case ZOP_KV_STORE: return gen_kv_store(n, o, a, out, d);
    case ZOP_SOFTMAX_CAUSAL: return zcg_attention(g, n, o, a, out, d);
    case ZOP_SILU:
    case ZOP_SIGMOID:
    case ZOP_SOFTPLUS:
    case ZOP_L2_NORM:
    case ZOP_SLICE:
    case ZOP_SSM_CONV:
    case ZOP_DELTA_NET: return zcg_recurrent(g, n, o, a, out, d);
    default: break;
    }
    return unsupported(d, n, "no elementwise kernel for this op");
}

zstatus zcg_q6_planes(const zir_value *w, const zcg_opts *o, zarena *a, zcg_kernel *out, zdiag *d) {
    int64_t K = w->shape[w->rank - 1], rows = 1;
    for (int i = 0; i + 1 < w->rank; i++)
        rows *= w->shape[i];
    uint32_t smem = o->target && o->target->smem_bytes ? o->target->smem_bytes : 16384u;
    if (w->dtype != ZT_Q6_K || K % 1024 || (uint64_t)K / 256u * 210u > smem || rows < 1)
        return zdiag_set(d, ZE_INTERNAL,
                         "codegen: weight '%s' in q6_K planes: expected q6_K rows of a multiple of 1024 elements "
                         "that fit %u bytes of shared memory, found %s rows of %lld",
                         w->name, smem, ztype_name(w->dtype), (long long)K);
    int64_t groups = rows < 16384 ? rows : 16384; /* each workgroup takes every groups-th row */
    const char *defs[] = {"WG", "256", "NB", zcg_i64(a, K / 256), "ROWS", zcg_i64(a, rows), NULL};
    const char *files[] = {"q6_planes", NULL};
    *out = (zcg_kernel){.n_bind = 1, .groups = {{0, groups, 1}, {0, 1, 1}, {0, 1, 1}}};
    snprintf(out->name, sizeof out->name, "q6_planes_k%lld_r%lld", (long long)K, (long long)rows);
    out->bind[0] = (zcg_binding){.value = w, .written = true};
    if (!(out->glsl = zcg_compose(a, defs, files, o))) return zdiag_set(d, ZE_NOMEM, "out of memory");
    return ZOK;
}
