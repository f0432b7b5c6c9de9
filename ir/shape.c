/* Shape inference: the output shape of each op from its inputs. This is the
 * one place that knows every op's shape rule; the verifier re-runs it. */
#include "ir.h"

#include <stdio.h>
#include <string.h>

static void dim_str(zdim d, char *buf, size_t n) {
    if (d == ZDIM_T)
        snprintf(buf, n, "T");
    else if (d == ZDIM_P)
        snprintf(buf, n, "P");
    else if (d == ZDIM_C)
        snprintf(buf, n, "C");
    else
        snprintf(buf, n, "%lld", (long long)d);
}

static zstatus mismatch(zdiag *d, const char *what, int input, int axis, zdim want, zdim got) {
    char w[24], g[24];
    dim_str(want, w, sizeof w);
    dim_str(got, g, sizeof g);
    return zdiag_set(d, ZE_INVALID, "%s: input %d axis %d: expected %s, found %s", what, input, axis, w, g);
}

static zstatus want_rank(zdiag *d, const zir_value *v, int input, int rank) {
    if (!v) return zdiag_set(d, ZE_INVALID, "input %d is missing", input);
    if (v->rank != rank)
        return zdiag_set(d, ZE_INVALID, "input %d ('%s'): expected rank %d, found rank %d", input, v->name,
                         rank, v->rank);
    return ZOK;
}

#define CHECK(x)                                                                                             \
    do {                                                                                                     \
        zstatus s_ = (x);                                                                                    \
        if (s_) return s_;                                                                                   \
    } while (0)
#define SAME(what, i, ax, want, got)                                                                         \
    do {                                                                                                     \
        if ((want) != (got)) return mismatch(d, what, i, ax, want, got);                                     \
    } while (0)

/* Symbolic element counts agree when the symbols match one for one and the
 * constant factors multiply to the same number. */
static bool same_elems(const zdim *a, int ra, const zdim *b, int rb) {
    int64_t ca = 1, cb = 1;
    int sa[4] = {0}, sb[4] = {0};
    for (int i = 0; i < ra; i++)
        a[i] < 0 ? (void)sa[-a[i]]++ : (void)(ca *= a[i]);
    for (int i = 0; i < rb; i++)
        b[i] < 0 ? (void)sb[-b[i]]++ : (void)(cb *= b[i]);
    return ca == cb && !memcmp(sa, sb, sizeof sa);
}

static void set(int *rank, zdim *shape, int r, zdim a, zdim b, zdim c) {
    *rank = r;
    shape[0] = a;
    shape[1] = b;
    shape[2] = c;
}

static zstatus infer_attention(const zir_node *n, int *rank, zdim *shape, zdiag *d) {
    zir_value *const *in = n->in;
    if (n->op == ZOP_KV_STORE) {
        CHECK(want_rank(d, in[0], 0, 3));
        CHECK(want_rank(d, in[1], 1, 3));
        if (in[1]->role != ZR_KV)
            return zdiag_set(d, ZE_INVALID, "input 1 ('%s') is not a KV cache", in[1]->name);
        SAME("kv_store", 0, 1, in[1]->shape[1], in[0]->shape[1]);
        SAME("kv_store", 0, 2, in[1]->shape[2], in[0]->shape[2]);
        set(rank, shape, 3, ZDIM_P, in[0]->shape[1], in[0]->shape[2]);
        return ZOK;
    }
    if (n->op == ZOP_SOFTMAX_CAUSAL) {
        CHECK(want_rank(d, in[0], 0, 3));
        set(rank, shape, 3, in[0]->shape[0], in[0]->shape[1], in[0]->shape[2]);
        return ZOK;
    }
    CHECK(want_rank(d, in[0], 0, 3));
    CHECK(want_rank(d, in[1], 1, 3));
    if (n->op == ZOP_ATTN_SCORES) { /* q[T,H,D] k[P,Hkv,D] -> [H,T,P] */
        SAME("attn_scores", 1, 2, in[0]->shape[2], in[1]->shape[2]);
        if (in[1]->shape[1] <= 0 || in[0]->shape[1] % in[1]->shape[1])
            return zdiag_set(d, ZE_INVALID, "attn_scores: %lld heads do not group over %lld KV heads",
                             (long long)in[0]->shape[1], (long long)in[1]->shape[1]);
        set(rank, shape, 3, in[0]->shape[1], in[0]->shape[0], in[1]->shape[0]);
        return ZOK;
    }
    /* attn_mix: p[H,T,P] v[P,Hkv,D] -> [T,H,D] */
    SAME("attn_mix", 1, 0, in[0]->shape[2], in[1]->shape[0]);
    if (in[1]->shape[1] <= 0 || in[0]->shape[0] % in[1]->shape[1])
        return zdiag_set(d, ZE_INVALID, "attn_mix: %lld heads do not group over %lld KV heads",
                         (long long)in[0]->shape[0], (long long)in[1]->shape[1]);
    set(rank, shape, 3, in[0]->shape[1], in[0]->shape[0], in[1]->shape[2]);
    return ZOK;
}

static zstatus infer_rope(const zir_node *n, int *rank, zdim *shape, zdiag *d) {
    CHECK(want_rank(d, n->in[0], 0, 3));
    int64_t hd = n->in[0]->shape[2];
    int nr = n->attr.rope.n_rot;
    if (nr <= 0 || nr % 2 || nr > hd)
        return zdiag_set(d, ZE_INVALID, "rope: n_rot %d must be even and in 2..%lld", nr, (long long)hd);
    if (n->attr.rope.mode == ZROPE_IMROPE) {
        const int *sc = n->attr.rope.sections;
        int sum = sc[0] + sc[1] + sc[2] + sc[3];
        if (sc[0] < 0 || sc[1] < 0 || sc[2] < 0 || sc[3] < 0 || sc[0] + sc[1] + sc[2] < 1 || sum > hd)
            return zdiag_set(d, ZE_INVALID,
                             "rope: sections %d,%d,%d,%d: expected non-negative, the first three not all 0, "
                             "sum <= %lld",
                             sc[0], sc[1], sc[2], sc[3], (long long)hd);
    }
    if (n->in[1]) {
        CHECK(want_rank(d, n->in[1], 1, 1));
        SAME("rope freq factors", 1, 0, (zdim)(nr / 2), n->in[1]->shape[0]);
    }
    *rank = 3;
    memcpy(shape, n->in[0]->shape, 3 * sizeof(zdim));
    return ZOK;
}

static zstatus infer_unary(const zir_node *n, int *rank, zdim *shape, zdiag *d);

static zstatus infer_basic(const zir_node *n, int *rank, zdim *shape, zdiag *d) {
    zir_value *const *in = n->in;
    switch (n->op) {
    case ZOP_EMBED:
        CHECK(want_rank(d, in[0], 0, 2));
        CHECK(want_rank(d, in[1], 1, 1));
        set(rank, shape, 2, in[1]->shape[0], in[0]->shape[1], 0);
        return ZOK;
    case ZOP_RMS_NORM:
        CHECK(want_rank(d, in[1], 1, 1));
        if (!in[0] || in[0]->rank < 1) return zdiag_set(d, ZE_INVALID, "input 0 must have rank >= 1");
        SAME("rms_norm", 1, 0, in[0]->shape[in[0]->rank - 1], in[1]->shape[0]);
        break;
    case ZOP_MATMUL:
        CHECK(want_rank(d, in[0], 0, 2));
        CHECK(want_rank(d, in[1], 1, 2));
        SAME("matmul", 1, 1, in[0]->shape[1], in[1]->shape[1]);
        set(rank, shape, 2, in[0]->shape[0], in[1]->shape[0], 0);
        return ZOK;
    case ZOP_ADD:
    case ZOP_SWIGLU:
        if (!in[0] || !in[1] || in[1]->rank > in[0]->rank)
            return zdiag_set(d, ZE_INVALID, "operands do not broadcast");
        for (int i = 0; i < in[1]->rank; i++) {
            int ax = in[0]->rank - in[1]->rank + i;
            SAME(zir_ops[n->op].name, 1, i, in[0]->shape[ax], in[1]->shape[i]);
        }
        if (n->op == ZOP_SWIGLU && in[1]->rank != in[0]->rank)
            return zdiag_set(d, ZE_INVALID, "swiglu: gate and up must have the same shape");
        break;
    case ZOP_RESHAPE:
        if (!in[0] || !same_elems(in[0]->shape, in[0]->rank, n->attr.reshape.shape, n->attr.reshape.rank))
            return zdiag_set(d, ZE_INVALID, "reshape changes the number of elements");
        *rank = n->attr.reshape.rank;
        memcpy(shape, n->attr.reshape.shape, sizeof(zdim) * (size_t)*rank);
        return ZOK;
    case ZOP_MUL:
    case ZOP_SILU:
    case ZOP_SIGMOID:
    case ZOP_SOFTPLUS:
    case ZOP_L2_NORM:
    case ZOP_SLICE: return infer_unary(n, rank, shape, d);
    default: return zdiag_set(d, ZE_INTERNAL, "no shape rule for op %d", (int)n->op);
    }
    *rank = in[0]->rank;
    memcpy(shape, in[0]->shape, sizeof(zdim) * (size_t)*rank);
    return ZOK;
}

/* Mixture of experts. A route [T,U,2] holds, per token, U (expert id,
 * weight) pairs; the contractions read the experts it names. */
/* A route [T,U,2] (moe_topk's), or [T,U,4] when sorted is true (moe_route's). */
static zstatus want_route(zdiag *d, const zir_value *r, int input, zdim t, bool sorted) {
    CHECK(want_rank(d, r, input, 3));
    SAME("route", input, 0, t, r->shape[0]);
    if (!(r->shape[2] == 2 || (sorted && r->shape[2] == 4)))
        return zdiag_set(d, ZE_INVALID, "route (input %d): last dimension %lld: expected 2%s", input,
                         (long long)r->shape[2], sorted ? " or 4" : "");
    return ZOK;
}

static zstatus infer_moe(const zir_node *n, int *rank, zdim *shape, zdiag *d) {
    zir_value *const *in = n->in;
    if (n->op == ZOP_MOE_TOPK) { /* logits[T,E] -> [T,K,2] */
        CHECK(want_rank(d, in[0], 0, 2));
        if (n->attr.topk < 1 || n->attr.topk > in[0]->shape[1])
            return zdiag_set(d, ZE_INVALID, "moe_topk: %d experts used of %lld: expected 1..%lld",
                             n->attr.topk, (long long)in[0]->shape[1], (long long)in[0]->shape[1]);
        set(rank, shape, 3, in[0]->shape[0], n->attr.topk, 2);
        return ZOK;
    }
    if (n->op == ZOP_MOE_ROUTE) { /* route[T,U,2] -> [T,U,4] */
        CHECK(want_route(d, in[0], 0, in[0] ? in[0]->shape[0] : 0, false));
        set(rank, shape, 3, in[0]->shape[0], in[0]->shape[1], 4);
        return ZOK;
    }
    if (n->op == ZOP_MOE_SUM) { /* y[T,U,H], route[T,U,2] -> [T,H] */
        CHECK(want_rank(d, in[0], 0, 3));
        CHECK(want_route(d, in[1], 1, in[0]->shape[0], false));
        SAME("moe_sum", 1, 1, in[0]->shape[1], in[1]->shape[1]);
        set(rank, shape, 2, in[0]->shape[0], in[0]->shape[2], 0);
        return ZOK;
    }
    /* matmul_id: x[T,K] or x[T,U,K], w[E,N,K], route[T,U,2] or [T,U,4] -> [T,U,N] */
    if (!in[0] || (in[0]->rank != 2 && in[0]->rank != 3))
        return zdiag_set(d, ZE_INVALID, "matmul_id: input 0 must have rank 2 or 3");
    CHECK(want_rank(d, in[1], 1, 3));
    CHECK(want_route(d, in[2], 2, in[0]->shape[0], true));
    SAME("matmul_id", 1, 2, in[0]->shape[in[0]->rank - 1], in[1]->shape[2]);
    if (in[0]->rank == 3) SAME("matmul_id", 2, 1, in[0]->shape[1], in[2]->shape[1]);
    set(rank, shape, 3, in[0]->shape[0], in[2]->shape[1], in[1]->shape[1]);
    return ZOK;
}

/* mul: b aligned on a's trailing dims, each equal or 1 (ggml's broadcast,
 * which the gates [T,1] x [T,H] and [T,H*D] x [T,H*D] use). */
static zstatus infer_unary(const zir_node *n, int *rank, zdim *shape, zdiag *d) {
    zir_value *const *in = n->in;
    if (n->op == ZOP_MUL) {
        if (in[1]->rank > in[0]->rank) return zdiag_set(d, ZE_INVALID, "mul: operands do not broadcast");
        for (int i = 0; i < in[1]->rank; i++) {
            zdim a = in[0]->shape[in[0]->rank - in[1]->rank + i], b = in[1]->shape[i];
            if (b != 1 && b != a) return mismatch(d, "mul", 1, i, a, b);
        }
    }
    if (n->op == ZOP_SLICE) {
        int64_t last = in[0]->shape[in[0]->rank - 1], off = n->attr.slice.off, len = n->attr.slice.len;
        if (last < 0 || off < 0 || len < 1 || off + len > last)
            return zdiag_set(d, ZE_INVALID, "slice [%lld, %lld) of a last dimension of %lld", (long long)off,
                             (long long)(off + len), (long long)last);
        *rank = in[0]->rank;
        memcpy(shape, in[0]->shape, sizeof(zdim) * (size_t)*rank);
        shape[*rank - 1] = len;
        return ZOK;
    }
    *rank = in[0]->rank;
    memcpy(shape, in[0]->shape, sizeof(zdim) * (size_t)*rank);
    return ZOK;
}

static zstatus want_state(zdiag *d, const zir_value *s, int input, int rank) {
    CHECK(want_rank(d, s, input, rank));
    if (s->role != ZR_KV)
        return zdiag_set(d, ZE_INVALID, "input %d ('%s') is not a state buffer", input, s->name);
    return ZOK;
}

/* ssm_conv: x[T,C] w[C,K] state[K-1,C] -> [T,C]; delta_net: q,k[T,Hk,D]
 * v[T,Hv,D] g,beta[T,Hv] state[Hv,D,D] -> [T,Hv,D], Hv a multiple of Hk. */
static zstatus infer_recurrent(const zir_node *n, int *rank, zdim *shape, zdiag *d) {
    zir_value *const *in = n->in;
    if (n->op == ZOP_SSM_CONV) {
        CHECK(want_rank(d, in[0], 0, 2));
        CHECK(want_rank(d, in[1], 1, 2));
        CHECK(want_state(d, in[2], 2, 2));
        SAME("ssm_conv", 1, 0, in[0]->shape[1], in[1]->shape[0]);
        SAME("ssm_conv", 2, 0, in[1]->shape[1] - 1, in[2]->shape[0]);
        SAME("ssm_conv", 2, 1, in[0]->shape[1], in[2]->shape[1]);
        set(rank, shape, 2, in[0]->shape[0], in[0]->shape[1], 0);
        return ZOK;
    }
    for (int i = 0; i < 3; i++)
        CHECK(want_rank(d, in[i], i, 3));
    CHECK(want_rank(d, in[3], 3, 2));
    CHECK(want_rank(d, in[4], 4, 2));
    CHECK(want_state(d, in[5], 5, 3));
    zdim T = in[0]->shape[0], Hk = in[0]->shape[1], D = in[0]->shape[2], Hv = in[2]->shape[1];
    for (int i = 1; i < 3; i++) {
        SAME("delta_net", i, 0, T, in[i]->shape[0]);
        SAME("delta_net", i, 2, D, in[i]->shape[2]);
    }
    SAME("delta_net", 1, 1, Hk, in[1]->shape[1]);
    if (Hk <= 0 || Hv % Hk)
        return zdiag_set(d, ZE_INVALID, "delta_net: %lld value heads do not group over %lld key heads",
                         (long long)Hv, (long long)Hk);
    for (int i = 3; i < 5; i++) {
        SAME("delta_net", i, 0, T, in[i]->shape[0]);
        SAME("delta_net", i, 1, Hv, in[i]->shape[1]);
    }
    SAME("delta_net", 5, 0, Hv, in[5]->shape[0]);
    SAME("delta_net", 5, 1, D, in[5]->shape[1]);
    SAME("delta_net", 5, 2, D, in[5]->shape[2]);
    set(rank, shape, 3, T, Hv, D);
    return ZOK;
}

zstatus zir_infer_shape(const zir_node *n, int *rank, zdim *shape, zdiag *d) {
    for (int i = 0; i < n->n_in; i++)
        if (!n->in[i] && !(n->op == ZOP_ROPE && i == 1))
            return zdiag_set(d, ZE_INVALID, "input %d is missing", i);
    switch (zir_ops[n->op].kind) {
    case ZK_KV:
    case ZK_ATTENTION: return infer_attention(n, rank, shape, d);
    case ZK_MOE: return infer_moe(n, rank, shape, d);
    case ZK_RECURRENT: return infer_recurrent(n, rank, shape, d);
    case ZK_FUSED:
        *rank = n->out->rank;
        memcpy(shape, n->out->shape, sizeof(zdim) * (size_t)*rank);
        return ZOK;
    default:
        if (n->op == ZOP_ROPE) return infer_rope(n, rank, shape, d);
        if (n->op == ZOP_SOFTMAX_CAUSAL) return infer_attention(n, rank, shape, d);
        return infer_basic(n, rank, shape, d);
    }
}
