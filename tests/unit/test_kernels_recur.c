/* delta_net's kernels (and ssm_conv's) against the CPU interpreter, every element of the
 * output and of the state, on the default Vulkan device (llvmpipe in CI):
 * the token-by-token kernel of decode and the chunked scan of prefill
 * (backend/cg_recur.c chooses), for steps of T = 1, C-1, C and 2C+3 tokens
 * (a partial chunk, one whole, several and a partial one), each at position
 * 0 (the state poisoned: a fresh sequence must not read it) and again at
 * position T with the state of the first step carried in. The outputs are
 * poisoned with NaN before each dispatch.
 *
 * The graph: token t embeds to row t of a random table, and q, k, v, the
 * gates and beta are slices of it, made like a model's (q and k unit
 * vectors per head, as after the l2 norms; beta in (0, 1), a sigmoid; the
 * gates in [-1, 0], log decays), so that every step's inputs are fresh. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_harness.h"
#include "testutil.h"

enum { V = 512, CTX = 256 };

typedef struct shape {
    int hk, hv, d;
    const char *target;
    bool fused; /* fuse-delta: q and k l2-normed and q, k, v sliced in the kernel */
} shape;

typedef struct rig {
    zir_graph *g;
    zir_node *net; /* delta_net, or fuse-delta's kernel ending in it */
    zir_value *st; /* the state */
    float *table;
    int x; /* floats per table row */
} rig;

static zir_value *op(rig *r, zir_op o, const char *name, zir_value *x, const zir_attrs *a) {
    zdiag d = {0};
    zir_value *in[2] = {x, NULL};
    zir_node *n = zir_node_add(r->g, o, name, in, zir_ops[o].arity, a, 0, ZG_ATTN, &d);
    cr_assert(n, "%s: %s", name, d.msg);
    return n->out;
}

/* Floats [off, off + len) of each token's row, as [T, heads, len / heads]
 * (heads 0: [T, len]). */
static zir_value *cut(rig *r, zir_value *x, const char *name, int off, int len, int heads) {
    zir_attrs s = {.slice = {off, len}};
    zir_value *v = op(r, ZOP_SLICE, name, x, &s);
    if (!heads) return v;
    zir_attrs at = {.reshape = {3, {ZDIM_T, heads, len / heads}}};
    return op(r, ZOP_RESHAPE, zarena_printf(r->g->arena, "%s3", name), v, &at);
}

static void fill_table(rig *r, const shape *s, uint64_t seed) {
    tu_rng g = tu_rng_seed(seed);
    int D = s->d;
    for (int t = 0; t < V; t++) {
        float *row = r->table + (size_t)t * r->x;
        for (int i = 0; i < r->x; i++)
            row[i] = tu_uniform(&g, -1, 1);
        for (int h = 0; h < 2 * s->hk; h++) { /* q and k: unit vectors; fused, of length 0.3 to 3 */
            double ss = 0;
            for (int i = 0; i < D; i++)
                ss += (double)row[h * D + i] * row[h * D + i];
            float len = s->fused ? tu_uniform(&g, 0.3f, 3.0f) : 1.0f;
            for (int i = 0; i < D; i++)
                row[h * D + i] *= len / (float)sqrt(ss);
        }
        float *gates = row + (2 * s->hk + s->hv) * D;
        for (int h = 0; h < 2 * s->hv; h++) /* gates in [-1, 0], then beta in [0, 1] */
            gates[h] = h < s->hv ? -fabsf(gates[h]) : fabsf(gates[h]);
    }
}

static rig rig_new(const shape *s, uint64_t seed) {
    int D = s->d;
    rig r = {.g = zir_graph_new(), .x = (2 * s->hk + s->hv) * D + 2 * s->hv};
    r.table = malloc(sizeof(float) * (size_t)V * r.x);
    fill_table(&r, s, seed);
    zdiag d = {0};
    zdim ts[1] = {ZDIM_T}, es[2] = {V, r.x}, ss[3] = {s->hv, D, D};
    r.g->hp.n_vocab = V;
    r.g->tokens = zir_value_new(r.g, "tokens", ZR_INPUT, ZT_I32, 1, ts, &d);
    zir_value *e = zir_value_new(r.g, "table", ZR_WEIGHT, ZT_F32, 2, es, &d);
    e->data = r.table;
    e->nbytes = sizeof(float) * (uint64_t)V * r.x;
    zir_value *in[6] = {e, r.g->tokens};
    zir_value *x = zir_node_add(r.g, ZOP_EMBED, "x", in, 2, NULL, -1, ZG_EMBED, &d)->out;
    in[0] = cut(&r, x, "q", 0, s->hk * D, s->hk);
    in[1] = cut(&r, x, "k", s->hk * D, s->hk * D, s->hk);
    in[2] = cut(&r, x, "v", 2 * s->hk * D, s->hv * D, s->hv);
    in[3] = cut(&r, x, "g", (2 * s->hk + s->hv) * D, s->hv, 0);
    in[4] = cut(&r, x, "beta", (2 * s->hk + s->hv) * D + s->hv, s->hv, 0);
    if (s->fused) {
        zir_attrs l2 = {.eps = 1e-6f};
        in[0] = op(&r, ZOP_L2_NORM, "q_l2", in[0], &l2);
        in[1] = op(&r, ZOP_L2_NORM, "k_l2", in[1], &l2);
    }
    in[5] = r.st = zir_value_new(r.g, "ssm_state", ZR_KV, ZT_F32, 3, ss, &d);
    zir_attrs a = {.scale = 1.0f / sqrtf((float)D)};
    r.net = zir_node_add(r.g, ZOP_DELTA_NET, "o", in, 6, &a, 0, ZG_ATTN, &d);
    cr_assert(r.net, "%s", d.msg);
    r.g->logits = r.net->out;
    cr_assert_eq(zir_verify(r.g, &d), ZOK, "%s", d.msg);
    if (s->fused) { /* the pass makes the kernel node: three slices, three views, two norms and the rule */
        ztarget t = *ztarget_find(s->target);
        zpass_opts po = kh_pass_opts(&t, ZPH_PREFILL);
        cr_assert_eq(zpass_run_pipeline(r.g, "shape,fuse-delta", NULL, &po, &d), ZOK, "%s", d.msg);
        r.net = r.net->parent;
        cr_assert(r.net && r.net->kp.tmpl == ZKT_DELTA && r.net->n_body == 9, "fuse-delta made no 9-node kernel");
    }
    return r;
}

static void rig_free(rig *r) {
    zir_graph_free(r->g);
    free(r->table);
}

/* Bounds on max |got - want| / rms(want) over the output and the state.
 * The token kernel repeats the interpreter's arithmetic in another order of
 * summation (fp32, D terms): a few ulps. The chunked scan computes the same
 * quantities as a different sum: the decays as e^(G_t - G_s) of summed gates
 * instead of products of e^g, and u_t by forward substitution over up to 63
 * earlier tokens of the chunk. Measured on llvmpipe at these shapes: at
 * most 3e-6 (token) and 4e-6 (chunked); 1e-4 leaves room for other devices'
 * exp and fused multiply-adds, while a decay off by 0.1% gives 2e-3 and a
 * wrong beta, head or token more. */
#define TOL_TOKEN 1e-5
#define TOL_CHUNK 1e-4

/* The widest subgroup the running device offers: the most lanes a row its
 * shuffles can sum. */
static uint32_t device_subgroup(const kh_ctx *k) {
    return k->dev.prof.subgroup_max ? k->dev.prof.subgroup_max : k->dev.prof.subgroup_size;
}

/* One step of T random tokens through the interpreter, then the kernel of
 * delta_net for o (max_tokens: which kernel) against it. */
static void check_step(kh_ctx *k, rig *r, zir_interp *it, const zcg_opts *o, int T, tu_rng *g,
                       const char *want_kernel, double tol) {
    const zir_value *st = r->st;
    int64_t n = 0;
    const float *before = zir_interp_value(it, st, &n);
    float *in = NULL;
    if (zir_interp_pos(it) > 0) { /* the state carried in; at position 0 it stays poisoned */
        in = malloc(sizeof(float) * (size_t)n);
        memcpy(in, before, sizeof(float) * (size_t)n);
    }
    int32_t tok[CTX];
    for (int i = 0; i < T; i++)
        tok[i] = (int32_t)(tu_next(g) % V);
    zdiag d = {0};
    zir_step step = {T, zir_interp_pos(it), CTX};
    cr_assert_eq(zir_interp_step(it, tok, T, NULL, &d), ZOK, "%s", d.msg);
    k->state = st, k->state_in = in;
    kh_result res;
    zstatus s = kh_check_node(k, r->g, r->net, o, it, step, &res, &d);
    cr_assert_eq(s, ZOK, "T %d at %lld: %s", T, (long long)step.pos, d.msg);
    cr_assert(!strncmp(res.kernel, want_kernel, strlen(want_kernel)), "kernel %s, expected %s", res.kernel,
              want_kernel);
    cr_assert_eq(res.checked, (int64_t)T * r->net->out->shape[1] * r->net->out->shape[2] + n);
    cr_expect_leq(res.max_err, tol, "%s, T %d at %lld: %.3g of the RMS", res.kernel, T, (long long)step.pos,
                  res.max_err);
    cr_log_info("%s: T %d at %lld: %.2g of the RMS", res.kernel, T, (long long)step.pos, res.max_err);
    free(in);
}

/* Both kernels for shape s: prefill's (the chunk the target's shared memory
 * allows, checked against want_c) and decode's, each over steps of 1, C-1,
 * C and 2C+3 tokens at position 0 and again at position T. */
static void check_shape(const shape *s, int64_t want_c) {
    kh_ctx k;
    char err[256];
    cr_assert(kh_open(&k, err, sizeof err), "%s", err);
    /* A target's lanes a row may outnumber the running device's subgroup
     * (the H200's 16 at the 9B's head, llvmpipe's 8): its kernels run here
     * with as many as the device holds, the target's own on the H200. */
    uint32_t sg = device_subgroup(&k);
    bool narrowed = !getenv("ZINC_DELTA_LANES") && sg < (uint32_t)ztarget_find(s->target)->subgroup;
    if (narrowed) {
        char v[16];
        snprintf(v, sizeof v, "%u", sg);
        setenv("ZINC_DELTA_LANES", v, 1);
    }
    rig r = rig_new(s, 7 + s->d);
    zcg_opts pre = {.target = ztarget_find(s->target), .phase = ZPH_PREFILL, .max_tokens = CTX / 2};
    zcg_opts dec = pre;
    dec.phase = ZPH_DECODE, dec.max_tokens = 1;
    int64_t C = zcg_delta_chunk(&pre, s->d);
    cr_assert_eq(C, want_c, "chunk %lld for d %d on %s, expected %lld", (long long)C, s->d, s->target,
                 (long long)want_c);
    cr_assert_eq(zcg_delta_chunk(&dec, s->d), 0, "decode keeps the token kernel");
    int steps[4] = {1, (int)C - 1, (int)C, 2 * (int)C + 3};
    zdiag d = {0};
    zir_interp *it;
    cr_assert_eq(zir_interp_new(r.g, CTX, &it, &d), ZOK, "%s", d.msg);
    tu_rng g = tu_rng_seed(3);
    for (int kind = 0; kind < 2; kind++)
        for (int i = 0; i < 4; i++) {
            zir_interp_reset(it);
            for (int rep = 0; rep < 2; rep++) /* at position 0, then at T with the state carried */
                check_step(&k, &r, it, kind ? &dec : &pre, steps[i], &g,
                           kind ? "delta_net_hk" : "delta_net_chunk", kind ? TOL_TOKEN : TOL_CHUNK);
    if (s->fused) { /* the names say it: q, k and v read in place, the norms in the prologue */
        zarena *a = zarena_new();
        zcg_kernel kn;
        for (int kind = 0; kind < 2; kind++) {
            cr_assert_eq(zcg_node(r.g, r.net, kind ? &dec : &pre, a, &kn, &d), ZOK, "%s", d.msg);
            cr_expect(strstr(kn.name, "+qkv+l2") != NULL, "kernel %s", kn.name);
        }
        zarena_free(a);
    }
        }
    zir_interp_free(it);
    rig_free(&r);
    kh_close(&k);
    if (narrowed) unsetenv("ZINC_DELTA_LANES");
}

/* A chunk of 32 over a head dimension of 16: more tokens a chunk than
 * threads, so the kernel stages the gates in strides. */
Test(delta_net, chunk_wider_than_the_head) {
    check_shape(&(shape){1, 2, 16, "llvmpipe"}, 32);
}

/* Two value heads per key head (the GQA-like mapping h % HK), mkmodel's
 * default delta-net shape. */
Test(delta_net, two_value_heads_per_key_head) {
    check_shape(&(shape){2, 4, 32, "llvmpipe"}, 32);
}

/* Qwen3.5-9B's head dimension of 128 with the H200's 48 KiB of shared
 * memory: a chunk of 16 (llvmpipe offers 32 KiB, enough for it). */
Test(delta_net, head_128_h200_chunk) {
    check_shape(&(shape){2, 4, 128, "h200"}, 16);
}

/* The chunked scan with 2 lanes a state row and with 1 (a thread a row),
 * which other head dimensions and targets get (ZINC_DELTA_LANES). */
Test(delta_net, chunk_two_lanes_and_one_a_row) {
    for (int lanes = 1; lanes <= 2; lanes++) {
        char v[8];
        snprintf(v, sizeof v, "%d", lanes);
        setenv("ZINC_DELTA_LANES", v, 1);
        check_shape(&(shape){2, 4, 32, "llvmpipe"}, 32);
    }
    unsetenv("ZINC_DELTA_LANES");
}

/* The 9B's head on the H200's budget with 8, 16 and 32 lanes a row (a
 * lane keeps 16, 8 and 4 of the row's 128 elements; with 32 the lanes
 * outnumber the chunk's 16 tokens, so half of them write no output): the
 * many-workgroup layouts ZINC_DELTA_LANES measures (docs/performance.md).
 * The lanes sum by shuffles within a subgroup, so a device whose subgroups
 * are narrower (llvmpipe's 8) runs only those that fit; the H200 runs all
 * three in the device calls. */
Test(delta_net, chunk_eight_to_thirty_two_lanes_a_row) {
    kh_ctx k;
    char err[256];
    cr_assert(kh_open(&k, err, sizeof err), "%s", err);
    uint32_t sg = device_subgroup(&k);
    kh_close(&k);
    for (int lanes = 8; lanes <= 32; lanes *= 2) {
        if ((uint32_t)lanes > sg) {
            fprintf(stderr, "%d lanes a row: skipped, the device's subgroups are %u wide\n", lanes, sg);
            continue;
        }
        char v[8];
        snprintf(v, sizeof v, "%d", lanes);
        setenv("ZINC_DELTA_LANES", v, 1);
        check_shape(&(shape){2, 4, 128, "h200", true}, 16);
    }
    unsetenv("ZINC_DELTA_LANES");
}

/* The lanes a row that codegen picks by default: the fewest from 4 whose
 * workgroups fill the device three deep, at most 16 (session 20's
 * measurement). The 9B's 32 value heads on the H200's 132 SMs take 16 (512
 * workgroups); two value heads on llvmpipe's two cores keep 4. */
static void check_lanes(const shape *s, const char *want) {
    unsetenv("ZINC_DELTA_LANES");
    rig r = rig_new(s, 11);
    zcg_opts pre = {.target = ztarget_find(s->target), .phase = ZPH_PREFILL, .max_tokens = CTX / 2};
    zarena *a = zarena_new();
    zcg_kernel kn;
    zdiag d = {0};
    cr_assert_eq(zcg_node(r.g, r.net, &pre, a, &kn, &d), ZOK, "%s", d.msg);
    cr_expect(strstr(kn.name, want) != NULL, "%s on %s: kernel %s, expected %s", "the scan", s->target, kn.name,
              want);
    zarena_free(a);
    rig_free(&r);
}

Test(delta_net, lanes_fill_the_device) {
    check_lanes(&(shape){16, 32, 128, "h200", true}, "_c16_l16+");
    check_lanes(&(shape){1, 2, 32, "llvmpipe", true}, "_l4+");
}

/* fuse-delta's kernels: q and k of lengths 0.3 to 3 normed in the
 * kernels' prologues (a missing or doubled norm is off by that factor), q,
 * k and v read as column ranges of the one [T, (2 Hk + Hv) D + 2 Hv] row;
 * the token kernel and the chunked scan, at mkmodel's shape and at the 9B's
 * head on the H200's budget, then 2 lanes a row. */
Test(delta_net, fused_slices_and_norms) {
    check_shape(&(shape){2, 4, 32, "llvmpipe", true}, 32);
    check_shape(&(shape){2, 4, 128, "h200", true}, 16);
    setenv("ZINC_DELTA_LANES", "2", 1);
    check_shape(&(shape){1, 2, 16, "llvmpipe", true}, 32);
    unsetenv("ZINC_DELTA_LANES");
}

/* ---- the causal conv (ssm_conv.glsl) ------------------------------------- */

/* x [T, C] (rows of a random table) through ssm_conv with K taps and its
 * state: steps of 1, K-2, 15, 16, 17 and 40 tokens (shorter than the
 * window's K-1 rows, a chunk less one, one, one more and several), each at
 * position 0 (the state poisoned) and again with the state carried in, every
 * output and state element against the interpreter. The sums are the
 * interpreter's, in the same k order: equal but for fused multiply-adds. */
static void check_conv(int C, int K, bool silu) {
    kh_ctx k;
    char err[256];
    cr_assert(kh_open(&k, err, sizeof err), "%s", err);
    zir_graph *g = zir_graph_new();
    zdiag d = {0};
    zdim ts[1] = {ZDIM_T}, es[2] = {V, C}, ws[2] = {C, K}, ss[2] = {K - 1, C};
    float *table = malloc(sizeof(float) * (size_t)V * C), *taps = malloc(sizeof(float) * (size_t)C * K);
    tu_rng r = tu_rng_seed(11);
    for (int i = 0; i < V * C; i++)
        table[i] = tu_uniform(&r, -1, 1);
    for (int i = 0; i < C * K; i++)
        taps[i] = tu_uniform(&r, -1, 1);
    g->hp.n_vocab = V;
    g->tokens = zir_value_new(g, "tokens", ZR_INPUT, ZT_I32, 1, ts, &d);
    zir_value *e = zir_value_new(g, "table", ZR_WEIGHT, ZT_F32, 2, es, &d);
    zir_value *w = zir_value_new(g, "taps", ZR_WEIGHT, ZT_F32, 2, ws, &d);
    e->data = table, e->nbytes = sizeof(float) * (uint64_t)V * C;
    w->data = taps, w->nbytes = sizeof(float) * (uint64_t)C * K;
    zir_value *in[3] = {e, g->tokens};
    in[0] = zir_node_add(g, ZOP_EMBED, "x", in, 2, NULL, -1, ZG_EMBED, &d)->out;
    in[1] = w;
    in[2] = zir_value_new(g, "conv_state", ZR_KV, ZT_F32, 2, ss, &d);
    zir_node *conv = zir_node_add(g, ZOP_SSM_CONV, "y", in, 3, NULL, 0, ZG_ATTN, &d);
    cr_assert(conv, "%s", d.msg);
    g->logits = conv->out;
    if (silu) { /* fuse-conv's kernel: SiLU on the conv's outputs */
        zir_value *y = conv->out;
        zir_node *u = zir_node_add(g, ZOP_SILU, "y_silu", &y, 1, NULL, 0, ZG_ATTN, &d);
        cr_assert(u, "%s", d.msg);
        g->logits = u->out;
        zpass_opts po = kh_pass_opts(ztarget_find("llvmpipe"), ZPH_PREFILL);
        cr_assert_eq(zpass_run_pipeline(g, "shape,fuse-conv", NULL, &po, &d), ZOK, "%s", d.msg);
        conv = u->parent;
        cr_assert(conv && conv->kp.tmpl == ZKT_CONV, "fuse-conv made no kernel");
    }
    cr_assert_eq(zir_verify(g, &d), ZOK, "%s", d.msg);
    zcg_opts o = {.target = ztarget_find("llvmpipe"), .phase = ZPH_PREFILL, .max_tokens = CTX / 2};
    zir_interp *it;
    cr_assert_eq(zir_interp_new(g, CTX, &it, &d), ZOK, "%s", d.msg);
    const int steps[] = {1, K - 2, 15, 16, 17, 40};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        zir_interp_reset(it);
        for (int rep = 0; rep < 2; rep++) {
            int T = steps[i];
            int64_t n = 0;
            const float *before = zir_interp_value(it, in[2], &n);
            float *carried = NULL;
            if (zir_interp_pos(it) > 0) {
                carried = malloc(sizeof(float) * (size_t)n);
                memcpy(carried, before, sizeof(float) * (size_t)n);
            }
            int32_t tok[CTX];
            for (int j = 0; j < T; j++)
                tok[j] = (int32_t)(tu_next(&r) % V);
            zir_step st = {T, zir_interp_pos(it), CTX};
            cr_assert_eq(zir_interp_step(it, tok, T, NULL, &d), ZOK, "%s", d.msg);
            k.tokens = tok, k.state = in[2], k.state_in = carried;
            kh_result res;
            cr_assert_eq(kh_check_node(&k, g, conv, &o, it, st, &res, &d), ZOK, "T %d: %s", T, d.msg);
            cr_assert_eq(res.checked, (int64_t)T * C + (int64_t)(K - 1) * C, "%s, T %d: checked %lld", res.kernel,
                         T, (long long)res.checked);
            /* SiLU's exp is not correctly rounded on GPUs (Vulkan allows 3 + 2|x| ulp), so the fused
             * form gets test_kernels_misc's swiglu bound; the conv alone is multiply-adds in the
             * interpreter's order. */
            double tol = silu ? 5e-6 : 1e-6;
            cr_expect_leq(res.max_err, tol, "%s, T %d at %lld: %.3g of the RMS", res.kernel, T,
                          (long long)st.pos, res.max_err);
            cr_log_info("%s: T %d at %lld: %.2g of the RMS", res.kernel, T, (long long)st.pos, res.max_err);
            cr_expect_eq(strstr(res.kernel, "+silu") != NULL, silu, "kernel %s", res.kernel);
            free(carried);
        }
    }
    zir_interp_free(it);
    zir_graph_free(g);
    free(table), free(taps);
    kh_close(&k);
}

/* Qwen3.5's 4 taps over a channel count no workgroup divides, and the
 * most taps the kernel takes (16: the window of 15 rows is a whole chunk). */
Test(ssm_conv, chunks_and_the_carried_state) {
    check_conv(200, 4, false);
    check_conv(72, 16, false);
}

/* fuse-conv: the same steps with SiLU in the conv kernel's epilogue. */
Test(ssm_conv, silu_in_the_epilogue) {
    check_conv(200, 4, true);
}

/* ---- the gated norm (rms_norm.glsl with GATE) ---------------------------- */

/* fuse-norm-gate's kernel, Qwen3.5's norm of the delta rule's output per
 * value head times SiLU(z): x and z [T, H, D] (two column ranges of a
 * random table's rows, as views of heads), an f32 weight [D], steps of 1, 7
 * and 33 tokens, every element against the interpreter's rms_norm then
 * swiglu. */
Test(norm_gate, per_head_norm_times_silu_of_the_gate) {
    enum { H = 4, D = 32, X = 2 * H * D };
    kh_ctx k;
    char err[256];
    cr_assert(kh_open(&k, err, sizeof err), "%s", err);
    rig r = {.g = zir_graph_new(), .x = X};
    zdiag d = {0};
    zdim ts[1] = {ZDIM_T}, es[2] = {V, X}, wsh[1] = {D};
    r.table = malloc(sizeof(float) * V * X);
    float *w = malloc(sizeof(float) * D);
    tu_rng g = tu_rng_seed(5);
    for (int i = 0; i < V * X; i++)
        r.table[i] = tu_uniform(&g, -2, 2);
    for (int i = 0; i < D; i++)
        w[i] = tu_uniform(&g, 0.5f, 1.5f);
    r.g->hp.n_vocab = V;
    r.g->tokens = zir_value_new(r.g, "tokens", ZR_INPUT, ZT_I32, 1, ts, &d);
    zir_value *e = zir_value_new(r.g, "table", ZR_WEIGHT, ZT_F32, 2, es, &d);
    zir_value *wv = zir_value_new(r.g, "norm_w", ZR_WEIGHT, ZT_F32, 1, wsh, &d);
    e->data = r.table, e->nbytes = sizeof(float) * V * X;
    wv->data = w, wv->nbytes = sizeof(float) * D;
    zir_value *in[2] = {e, r.g->tokens};
    zir_value *x = zir_node_add(r.g, ZOP_EMBED, "x", in, 2, NULL, -1, ZG_EMBED, &d)->out;
    zir_value *o = cut(&r, x, "o", 0, H * D, H), *z = cut(&r, x, "z", H * D, H * D, H);
    zir_attrs eps = {.eps = 1e-6f};
    in[0] = o, in[1] = wv;
    zir_node *nn = zir_node_add(r.g, ZOP_RMS_NORM, "normed", in, 2, &eps, 0, ZG_ATTN, &d);
    cr_assert(nn, "%s", d.msg);
    in[0] = z, in[1] = nn->out;
    zir_node *u = zir_node_add(r.g, ZOP_SWIGLU, "gated", in, 2, NULL, 0, ZG_ATTN, &d);
    cr_assert(u, "%s", d.msg);
    r.g->logits = u->out;
    cr_assert_eq(zir_verify(r.g, &d), ZOK, "%s", d.msg);
    zpass_opts po = kh_pass_opts(ztarget_find("llvmpipe"), ZPH_PREFILL);
    cr_assert_eq(zpass_run_pipeline(r.g, "shape,fuse-norm-gate", NULL, &po, &d), ZOK, "%s", d.msg);
    zir_node *kn = u->parent;
    cr_assert(kn && kn->kp.tmpl == ZKT_NORM_GATE, "fuse-norm-gate made no kernel");
    zcg_opts co = {.target = ztarget_find("llvmpipe"), .phase = ZPH_PREFILL, .max_tokens = CTX / 2};
    zir_interp *it;
    cr_assert_eq(zir_interp_new(r.g, CTX, &it, &d), ZOK, "%s", d.msg);
    const int steps[] = {1, 7, 33};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int T = steps[i];
        int32_t tok[CTX];
        for (int j = 0; j < T; j++)
            tok[j] = (int32_t)(tu_next(&g) % V);
        zir_interp_reset(it);
        zir_step st = {T, 0, CTX};
        cr_assert_eq(zir_interp_step(it, tok, T, NULL, &d), ZOK, "%s", d.msg);
        k.tokens = tok, k.state = NULL, k.state_in = NULL;
        kh_result res;
        cr_assert_eq(kh_check_node(&k, r.g, kn, &co, it, st, &res, &d), ZOK, "T %d: %s", T, d.msg);
        cr_assert_eq(res.checked, (int64_t)T * H * D, "%s, T %d: checked %lld", res.kernel, T, (long long)res.checked);
        cr_expect(strstr(res.kernel, "+gate") != NULL, "kernel %s", res.kernel);
        cr_expect_leq(res.max_err, 1e-6, "%s, T %d: %.3g of the RMS", res.kernel, T, res.max_err);
    }
    zir_interp_free(it);
    free(w);
    rig_free(&r);
    kh_close(&k);
}
