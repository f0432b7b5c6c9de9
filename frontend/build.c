/* The layer description: one function lays out a transformer block from the
 * architecture's traits, and zir_build_from_gguf repeats it per layer. */
#include "arch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct builder {
    zir_graph *g;
    const gguf_file *f;
    zdiag *d;
    int layer;
    zir_group group;
} builder;

static const char *fmt_ne(const int64_t *ne, int n, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)ne[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

/* Looks up a weight tensor, checks its ggml shape (want[0] = contiguous,
 * n dims) and type, and declares it in the graph. */
static zir_value *weight_nd(builder *b, const char *name, int n, const int64_t *want, bool optional) {
    const gguf_tensor *t = gguf_find_tensor(b->f, name);
    if (!t) {
        if (!optional)
            zdiag_set(b->d, ZE_INVALID, "%s: tensor '%s' is missing (required by %s)", b->f->path, name,
                      b->g->hp.arch);
        return NULL;
    }
    bool same = t->n_dims == (uint32_t)n;
    for (int i = 0; i < n && same; i++)
        same = t->ne[i] == want[i];
    if (!same) {
        char w[64], f[96];
        zdiag_set(b->d, ZE_INVALID, "%s: tensor '%s' has shape %s: expected %s (ggml order)", b->f->path,
                  name, fmt_ne(t->ne, (int)t->n_dims, f, sizeof f), fmt_ne(want, n, w, sizeof w));
        return NULL;
    }
    const ztype_info *ti = ztype_get((uint32_t)t->type);
    if (!ti || !(ti->flags & ZTF_COMPUTE) || (n == 1 && t->type != ZT_F32)) {
        char types[256] = "f32";
        if (n > 1) ztype_list(ZTF_COMPUTE, types, sizeof types);
        zdiag_set(b->d, ZE_UNSUPPORTED, "%s: tensor '%s' has type %s: zinc reads %s%s", b->f->path, name,
                  ztype_name(t->type), n == 1 ? "1-D tensors in " : "", types);
        return NULL;
    }
    zdim shape[3];
    for (int i = 0; i < n; i++)
        shape[i] = want[n - 1 - i];
    zir_value *v = zir_find(b->g, name);
    if (v) return v; /* tied embeddings are declared once */
    v = zir_value_new(b->g, name, ZR_WEIGHT, t->type, n, shape, b->d);
    if (!v) return NULL;
    v->data = t->data;
    v->nbytes = t->nbytes;
    v->layer = b->layer;
    return v;
}

/* A 1-D (ne1 = 0) or 2-D weight. */
static zir_value *weight(builder *b, const char *name, int64_t ne0, int64_t ne1, bool optional) {
    int64_t want[2] = {ne0, ne1};
    return weight_nd(b, name, ne1 ? 2 : 1, want, optional);
}

static zir_value *blk_weight(builder *b, const char *suffix, int64_t ne0, int64_t ne1, bool optional) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", b->layer, suffix);
    return weight(b, name, ne0, ne1, optional);
}

/* Adds a node named "l<layer>.<what>" (or plain "what" outside layers). */
static zir_value *op(builder *b, zir_op o, const char *what, zir_value *a, zir_value *c,
                     const zir_attrs *attr) {
    if (b->d->code) return NULL; /* an earlier step failed */
    char name[96];
    if (b->layer >= 0)
        snprintf(name, sizeof name, "l%d.%s", b->layer, what);
    else
        snprintf(name, sizeof name, "%s", what);
    zir_value *in[2] = {a, c};
    zir_node *n = zir_node_add(b->g, o, name, in, zir_ops[o].arity, attr, b->layer, b->group, b->d);
    return n ? n->out : NULL;
}

static zir_value *op3(builder *b, zir_op o, const char *what, zir_value *a, zir_value *c, zir_value *e) {
    if (b->d->code) return NULL;
    char name[96];
    snprintf(name, sizeof name, "l%d.%s", b->layer, what);
    zir_value *in[3] = {a, c, e};
    zir_node *n = zir_node_add(b->g, o, name, in, 3, NULL, b->layer, b->group, b->d);
    return n ? n->out : NULL;
}

static zir_value *reshape(builder *b, const char *what, zir_value *x, int rank, zdim d0, zdim d1, zdim d2) {
    zir_attrs a = {.reshape = {rank, {d0, d1, d2}}};
    return op(b, ZOP_RESHAPE, what, x, NULL, &a);
}

static zir_value *norm(builder *b, const char *what, zir_value *x, zir_value *w) {
    zir_attrs a = {.eps = b->g->hp.rms_eps};
    return op(b, ZOP_RMS_NORM, what, x, w, &a);
}

/* Projection to heads: matmul, optional bias, split into [T, heads, head_dim]. */
static zir_value *project(builder *b, const char *what, zir_value *x, int heads) {
    const zir_hparams *hp = &b->g->hp;
    char wname[32], tmp[32];
    int64_t out = (int64_t)heads * hp->head_dim;
    snprintf(wname, sizeof wname, "attn_%s.weight", what);
    zir_value *w = blk_weight(b, wname, hp->n_embd, out, false);
    zir_value *y = w ? op(b, ZOP_MATMUL, what, x, w, NULL) : NULL;
    if (y && hp->qkv_bias) {
        snprintf(wname, sizeof wname, "attn_%s.bias", what);
        snprintf(tmp, sizeof tmp, "%s_bias", what);
        zir_value *bias = blk_weight(b, wname, out, 0, false);
        y = bias ? op(b, ZOP_ADD, tmp, y, bias, NULL) : NULL;
    }
    snprintf(tmp, sizeof tmp, "%s_heads", what);
    return y ? reshape(b, tmp, y, 3, ZDIM_T, heads, hp->head_dim) : NULL;
}

static zir_value *rope(builder *b, const char *what, zir_value *x, zir_value *freq_factors) {
    const zir_hparams *hp = &b->g->hp;
    zir_attrs a = {.rope = {hp->rope_mode, hp->n_rot, hp->rope_theta, hp->rope_freq_scale, {0}}};
    memcpy(a.rope.sections, hp->rope_sections, sizeof a.rope.sections);
    return op(b, ZOP_ROPE, what, x, freq_factors, &a);
}

/* Persistent state of a layer: "l<layer>.<what>" (the KV caches, and the
 * conv and delta-net states of a recurrent layer). */
static zir_value *state(builder *b, const char *what, int rank, zdim d0, zdim d1, zdim d2) {
    if (b->d->code) return NULL;
    char name[64];
    snprintf(name, sizeof name, "l%d.%s", b->layer, what);
    zdim shape[3] = {d0, d1, d2};
    zir_value *v = zir_value_new(b->g, name, ZR_KV, ZT_F32, rank, shape, b->d);
    if (v) v->layer = b->layer;
    return v;
}

static zir_value *kv_cache(builder *b, const char *what) {
    const zir_hparams *hp = &b->g->hp;
    char name[32];
    snprintf(name, sizeof name, "%s_cache", what);
    return state(b, name, 3, ZDIM_C, hp->n_head_kv, hp->head_dim);
}

static zir_value *attention(builder *b, zir_value *x, zir_value *freq_factors) {
    const zir_hparams *hp = &b->g->hp;
    b->group = ZG_ATTN;
    zir_value *h = norm(b, "attn_in", x, blk_weight(b, "attn_norm.weight", hp->n_embd, 0, false));
    zir_value *q = h ? project(b, "q", h, hp->n_head) : NULL;
    zir_value *k = q ? project(b, "k", h, hp->n_head_kv) : NULL;
    zir_value *v = k ? project(b, "v", h, hp->n_head_kv) : NULL;
    if (v && hp->qk_norm) {
        q = norm(b, "q_normed", q, blk_weight(b, "attn_q_norm.weight", hp->head_dim, 0, false));
        k = norm(b, "k_normed", k, blk_weight(b, "attn_k_norm.weight", hp->head_dim, 0, false));
    }
    q = rope(b, "q_rope", q, freq_factors);
    k = rope(b, "k_rope", k, freq_factors);
    zir_value *kc = kv_cache(b, "k"), *vc = kv_cache(b, "v");
    zir_value *kall = op(b, ZOP_KV_STORE, "k_all", k, kc, NULL);
    zir_value *vall = op(b, ZOP_KV_STORE, "v_all", v, vc, NULL);
    zir_attrs sa = {.scale = 1.0f / sqrtf((float)hp->head_dim)};
    zir_value *s = op(b, ZOP_ATTN_SCORES, "scores", q, kall, &sa);
    zir_value *p = op(b, ZOP_SOFTMAX_CAUSAL, "probs", s, NULL, NULL);
    zir_value *o = op(b, ZOP_ATTN_MIX, "attn", p, vall, NULL);
    o = reshape(b, "attn_flat", o, 2, ZDIM_T, (zdim)hp->n_head * hp->head_dim, 0);
    zir_value *wo =
        blk_weight(b, "attn_output.weight", (int64_t)hp->n_head * hp->head_dim, hp->n_embd, false);
    zir_value *a = wo ? op(b, ZOP_MATMUL, "attn_out", o, wo, NULL) : NULL;
    return op(b, ZOP_ADD, "resid_attn", x, a, NULL);
}

/* The norm before the MLP: Qwen3.5 calls it post_attention_norm. */
static zir_value *ffn_norm(builder *b, zir_value *x) {
    const zir_hparams *hp = &b->g->hp;
    b->group = ZG_MLP;
    const char *w = hp->hybrid ? "post_attention_norm.weight" : "ffn_norm.weight";
    return norm(b, "ffn_in", x, blk_weight(b, w, hp->n_embd, 0, false));
}

/* The SwiGLU MLP down(silu(gate(h)) * up(h)) over the tensors ffn_<x><sfx>. */
static zir_value *swiglu_mlp(builder *b, zir_value *h, const char *sfx, int64_t ff, const char *pfx) {
    const zir_hparams *hp = &b->g->hp;
    char wg[48], wu[48], wd[48], ng[24], nu[24], na[24], nd[24];
    snprintf(wg, sizeof wg, "ffn_gate%s.weight", sfx);
    snprintf(wu, sizeof wu, "ffn_up%s.weight", sfx);
    snprintf(wd, sizeof wd, "ffn_down%s.weight", sfx);
    snprintf(ng, sizeof ng, "%sgate", pfx);
    snprintf(nu, sizeof nu, "%sup", pfx);
    snprintf(na, sizeof na, "%sact", pfx);
    snprintf(nd, sizeof nd, "%sdown", pfx);
    zir_value *g = h ? blk_weight(b, wg, hp->n_embd, ff, false) : NULL;
    zir_value *u = g ? blk_weight(b, wu, hp->n_embd, ff, false) : NULL;
    zir_value *dn = u ? blk_weight(b, wd, ff, hp->n_embd, false) : NULL;
    if (!dn) return NULL;
    zir_value *gate = op(b, ZOP_MATMUL, ng, h, g, NULL);
    zir_value *up = op(b, ZOP_MATMUL, nu, h, u, NULL);
    return op(b, ZOP_MATMUL, nd, op(b, ZOP_SWIGLU, na, gate, up, NULL), dn, NULL);
}

static zir_value *slice(builder *b, const char *what, zir_value *x, int64_t off, int64_t len) {
    zir_attrs a = {.slice = {off, len}};
    return op(b, ZOP_SLICE, what, x, NULL, &a);
}

/* Qwen3.5's gated full attention: attn_q gives each head's query and gate
 * side by side ([T, H, 2D]); q/k RMSNorm, imrope, attention, then the output
 * times sigmoid(gate) before attn_output. Returns the mixer's output. */
static zir_value *gated_attention(builder *b, zir_value *h, zir_value *ff) {
    const zir_hparams *hp = &b->g->hp;
    int64_t D = hp->head_dim, H = hp->n_head;
    zir_value *wq = blk_weight(b, "attn_q.weight", hp->n_embd, 2 * H * D, false);
    zir_value *qg =
        wq ? reshape(b, "qg_heads", op(b, ZOP_MATMUL, "qg", h, wq, NULL), 3, ZDIM_T, H, 2 * D) : NULL;
    zir_value *q = slice(b, "q_heads", qg, 0, D);
    zir_value *gate = reshape(b, "qgate", slice(b, "qgate_heads", qg, D, D), 2, ZDIM_T, H * D, 0);
    zir_value *k = q ? project(b, "k", h, hp->n_head_kv) : NULL;
    zir_value *v = k ? project(b, "v", h, hp->n_head_kv) : NULL;
    if (!v) return NULL;
    q = norm(b, "q_normed", q, blk_weight(b, "attn_q_norm.weight", D, 0, false));
    k = norm(b, "k_normed", k, blk_weight(b, "attn_k_norm.weight", D, 0, false));
    q = rope(b, "q_rope", q, ff);
    k = rope(b, "k_rope", k, ff);
    zir_value *kc = kv_cache(b, "k"), *vc = kv_cache(b, "v");
    zir_value *kall = op(b, ZOP_KV_STORE, "k_all", k, kc, NULL);
    zir_value *vall = op(b, ZOP_KV_STORE, "v_all", v, vc, NULL);
    zir_attrs sa = {.scale = 1.0f / sqrtf((float)D)};
    zir_value *p =
        op(b, ZOP_SOFTMAX_CAUSAL, "probs", op(b, ZOP_ATTN_SCORES, "scores", q, kall, &sa), NULL, NULL);
    zir_value *o = reshape(b, "attn_flat", op(b, ZOP_ATTN_MIX, "attn", p, vall, NULL), 2, ZDIM_T, H * D, 0);
    zir_value *sg = op(b, ZOP_SIGMOID, "gate_sigmoid", gate, NULL, NULL);
    zir_value *wo = blk_weight(b, "attn_output.weight", H * D, hp->n_embd, false);
    return wo ? op(b, ZOP_MATMUL, "attn_out", op(b, ZOP_MUL, "attn_gated", o, sg, NULL), wo, NULL) : NULL;
}

/* The delta-net's per-head decay g = softplus(x W_alpha + dt_bias) * A and
 * write strength beta = sigmoid(x W_beta), each [T, Hv]. */
static zir_value *delta_gates(builder *b, zir_value *h, zir_value **beta) {
    const zir_hparams *hp = &b->g->hp;
    int64_t Hv = hp->ssm_heads;
    zir_value *wb = blk_weight(b, "ssm_beta.weight", hp->n_embd, Hv, false);
    zir_value *wa = wb ? blk_weight(b, "ssm_alpha.weight", hp->n_embd, Hv, false) : NULL;
    zir_value *dt = wa ? blk_weight(b, "ssm_dt.bias", Hv, 0, false) : NULL;
    zir_value *A = dt ? blk_weight(b, "ssm_a", Hv, 0, false) : NULL;
    if (!A) return NULL;
    *beta = op(b, ZOP_SIGMOID, "beta", op(b, ZOP_MATMUL, "beta_logit", h, wb, NULL), NULL, NULL);
    zir_value *alpha = op(b, ZOP_ADD, "alpha_biased", op(b, ZOP_MATMUL, "alpha", h, wa, NULL), dt, NULL);
    return op(b, ZOP_MUL, "decay", op(b, ZOP_SOFTPLUS, "alpha_softplus", alpha, NULL, NULL), A, NULL);
}

/* Qwen3.5's gated delta-net, as llama.cpp's qwen35 builds it: the q,k,v
 * projection through a causal conv (state kept across steps) and SiLU,
 * L2-normed q and k per head, the gated delta rule (state kept across
 * steps), RMSNorm times SiLU(z), ssm_out. */
static zir_value *delta_net(builder *b, zir_value *h) {
    const zir_hparams *hp = &b->g->hp;
    int64_t D = hp->ssm_state, Hk = hp->ssm_groups, Hv = hp->ssm_heads, kd = D * Hk, vd = D * Hv;
    int64_t cd = 2 * kd + vd;
    zir_value *wqkv = blk_weight(b, "attn_qkv.weight", hp->n_embd, cd, false);
    zir_value *wz = wqkv ? blk_weight(b, "attn_gate.weight", hp->n_embd, vd, false) : NULL;
    zir_value *wc = wz ? blk_weight(b, "ssm_conv1d.weight", hp->ssm_conv, cd, false) : NULL;
    zir_value *beta = NULL, *g = wc ? delta_gates(b, h, &beta) : NULL;
    if (!g) return NULL;
    zir_value *qkv = op(b, ZOP_MATMUL, "qkv", h, wqkv, NULL);
    zir_value *z = op(b, ZOP_MATMUL, "z", h, wz, NULL);
    zir_value *cs = state(b, "conv_state", 2, hp->ssm_conv - 1, cd, 0);
    zir_value *conv = op3(b, ZOP_SSM_CONV, "conv", qkv, wc, cs);
    zir_value *act = op(b, ZOP_SILU, "conv_silu", conv, NULL, NULL);
    zir_attrs ea = {.eps = hp->rms_eps};
    zir_value *q = reshape(b, "q_heads", slice(b, "q_conv", act, 0, kd), 3, ZDIM_T, Hk, D);
    zir_value *k = reshape(b, "k_heads", slice(b, "k_conv", act, kd, kd), 3, ZDIM_T, Hk, D);
    zir_value *v = reshape(b, "v_heads", slice(b, "v_conv", act, 2 * kd, vd), 3, ZDIM_T, Hv, D);
    q = op(b, ZOP_L2_NORM, "q_l2", q, NULL, &ea);
    k = op(b, ZOP_L2_NORM, "k_l2", k, NULL, &ea);
    zir_value *ss = state(b, "ssm_state", 3, Hv, D, D);
    zir_node *n = NULL;
    if (!b->d->code) {
        char name[32];
        snprintf(name, sizeof name, "l%d.delta", b->layer);
        zir_value *in[6] = {q, k, v, g, beta, ss};
        zir_attrs da = {.scale = 1.0f / sqrtf((float)D)};
        n = zir_node_add(b->g, ZOP_DELTA_NET, name, in, 6, &da, b->layer, b->group, b->d);
    }
    zir_value *on = n ? norm(b, "delta_normed", n->out, blk_weight(b, "ssm_norm.weight", D, 0, false)) : NULL;
    zir_value *gated = op(b, ZOP_SWIGLU, "delta_gated", reshape(b, "z_heads", z, 3, ZDIM_T, Hv, D), on, NULL);
    zir_value *wo = gated ? blk_weight(b, "ssm_out.weight", vd, hp->n_embd, false) : NULL;
    return wo ? op(b, ZOP_MATMUL, "ssm_out", reshape(b, "delta_flat", gated, 2, ZDIM_T, vd, 0), wo, NULL)
              : NULL;
}

/* A Qwen3.5 block: attn_norm, the token mixer (delta-net or gated
 * attention), the residual; the MLP is added by the caller. */
static zir_value *hybrid_mixer(builder *b, zir_value *x, zir_value *ff) {
    const zir_hparams *hp = &b->g->hp;
    b->group = ZG_ATTN;
    zir_value *h = norm(b, "attn_in", x, blk_weight(b, "attn_norm.weight", hp->n_embd, 0, false));
    zir_value *m = !h ? NULL : hp->recurrent[b->layer] ? delta_net(b, h) : gated_attention(b, h, ff);
    return m ? op(b, ZOP_ADD, "resid_attn", x, m, NULL) : NULL;
}

static zir_value *mlp(builder *b, zir_value *x) {
    const zir_hparams *hp = &b->g->hp;
    zir_value *h = ffn_norm(b, x);
    zir_value *down = swiglu_mlp(b, h, "", hp->n_ff, "");
    return down ? op(b, ZOP_ADD, "resid_mlp", x, down, NULL) : NULL;
}

/* qwen35moe's shared expert, added to the routed experts' sum after a
 * sigmoid gate of its own: ffn_gate_inp_shexp {H} is one row, h . w a
 * scalar per token. */
static zir_value *shared_expert(builder *b, zir_value *h, zir_value *moe) {
    const zir_hparams *hp = &b->g->hp;
    zir_value *wg = blk_weight(b, "ffn_gate_inp_shexp.weight", hp->n_embd, 0, false);
    if (!wg) return NULL;
    if (wg->rank == 1) { /* read as the matrix [1, H] it multiplies like */
        wg->rank = 2;
        wg->shape[0] = 1;
        wg->shape[1] = hp->n_embd;
    }
    zir_value *sh = swiglu_mlp(b, h, "_shexp", hp->n_ff_shexp, "shexp_");
    zir_value *logit = op(b, ZOP_MATMUL, "shexp_logit", h, wg, NULL);
    zir_value *gate = op(b, ZOP_SIGMOID, "shexp_sigmoid", logit, NULL, NULL);
    return op(b, ZOP_ADD, "ffn_out", moe, op(b, ZOP_MUL, "shexp_out", sh, gate, NULL), NULL);
}

/* Stacked experts "blk.N.<suffix>", ggml {ne0, ne1, n_expert}: [E, ne1, ne0]. */
static zir_value *experts(builder *b, const char *suffix, int64_t ne0, int64_t ne1) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", b->layer, suffix);
    int64_t want[3] = {ne0, ne1, b->g->hp.n_expert};
    return weight_nd(b, name, 3, want, false);
}

/* llama.cpp's build_moe_ffn for qwen3moe: router logits, softmax and top-k
 * with renormalized weights (moe_topk), each chosen expert's SwiGLU MLP
 * (matmul_id), and the weighted sum of their outputs (moe_sum). */
static zir_value *moe_mlp(builder *b, zir_value *x) {
    const zir_hparams *hp = &b->g->hp;
    zir_value *h = ffn_norm(b, x);
    zir_value *wr = h ? blk_weight(b, "ffn_gate_inp.weight", hp->n_embd, hp->n_expert, false) : NULL;
    zir_value *wg = wr ? experts(b, "ffn_gate_exps.weight", hp->n_embd, hp->n_ff_exp) : NULL;
    zir_value *wu = wg ? experts(b, "ffn_up_exps.weight", hp->n_embd, hp->n_ff_exp) : NULL;
    zir_value *wd = wu ? experts(b, "ffn_down_exps.weight", hp->n_ff_exp, hp->n_embd) : NULL;
    if (!wd) return NULL;
    zir_attrs ka = {.topk = hp->n_expert_used};
    zir_value *route = op(b, ZOP_MOE_TOPK, "route", op(b, ZOP_MATMUL, "router", h, wr, NULL), NULL, &ka);
    zir_value *gate = op3(b, ZOP_MATMUL_ID, "gate", h, wg, route);
    zir_value *up = op3(b, ZOP_MATMUL_ID, "up", h, wu, route);
    zir_value *act = op(b, ZOP_SWIGLU, "act", gate, up, NULL);
    zir_value *down = op3(b, ZOP_MATMUL_ID, "down", act, wd, route);
    zir_value *moe = op(b, ZOP_MOE_SUM, "moe", down, route, NULL);
    if (hp->hybrid) moe = shared_expert(b, h, moe);
    return op(b, ZOP_ADD, "resid_mlp", x, moe, NULL);
}

static zstatus build_graph(builder *b) {
    zir_graph *g = b->g;
    const zir_hparams *hp = &g->hp;
    zdim tshape[1] = {ZDIM_T};
    b->layer = -1;
    b->group = ZG_EMBED;
    g->tokens = zir_value_new(g, "tokens", ZR_INPUT, ZT_I32, 1, tshape, b->d);
    zir_value *emb = g->tokens ? weight(b, "token_embd.weight", hp->n_embd, hp->n_vocab, false) : NULL;
    zir_value *x = emb ? op(b, ZOP_EMBED, "embed", emb, g->tokens, NULL) : NULL;
    zir_value *ff = x ? weight(b, "rope_freqs.weight", hp->n_rot / 2, 0, true) : NULL;
    if (b->d->code) return b->d->code;
    for (int l = 0; l < hp->n_layer && x; l++) {
        b->layer = l;
        x = hp->hybrid ? hybrid_mixer(b, x, ff) : attention(b, x, ff);
        x = x ? (hp->n_expert ? moe_mlp(b, x) : mlp(b, x)) : NULL;
    }
    if (!x) return b->d->code ? b->d->code : zdiag_set(b->d, ZE_INTERNAL, "layer build failed");
    b->layer = -1;
    b->group = ZG_OUTPUT;
    zir_value *on = weight(b, "output_norm.weight", hp->n_embd, 0, false);
    zir_value *out = hp->tied_output ? emb : weight(b, "output.weight", hp->n_embd, hp->n_vocab, false);
    x = on && out ? norm(b, "out_norm", x, on) : NULL;
    g->logits = x ? op(b, ZOP_MATMUL, "logits", x, out, NULL) : NULL;
    return g->logits ? ZOK : b->d->code;
}

zstatus zir_build_from_gguf(const gguf_file *f, zir_graph **out, zdiag *d) {
    *out = NULL;
    zir_graph *g = zir_graph_new();
    if (!g) return zdiag_set(d, ZE_NOMEM, "out of memory");
    d->code = ZOK;
    zstatus s = zir_read_hparams(f, &g->hp, d);
    if (!s && (g->hp.n_vocab <= 0 || g->hp.n_vocab > (1 << 24)))
        s = zdiag_set(d, ZE_INVALID, "%s: vocabulary of %d tokens: expected 1..16777216", f->path,
                      g->hp.n_vocab);
    builder b = {g, f, d, -1, ZG_NONE};
    if (!s) s = build_graph(&b);
    if (!s) s = zir_verify(g, d);
    if (s) {
        zir_graph_free(g);
        return s;
    }
    *out = g;
    return ZOK;
}
