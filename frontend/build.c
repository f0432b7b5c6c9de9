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
    zir_attrs a = {.rope = {hp->rope_mode, hp->n_rot, hp->rope_theta, hp->rope_freq_scale}};
    return op(b, ZOP_ROPE, what, x, freq_factors, &a);
}

static zir_value *kv_cache(builder *b, const char *what) {
    const zir_hparams *hp = &b->g->hp;
    char name[64];
    snprintf(name, sizeof name, "l%d.%s_cache", b->layer, what);
    zdim shape[3] = {ZDIM_C, hp->n_head_kv, hp->head_dim};
    zir_value *v = zir_value_new(b->g, name, ZR_KV, ZT_F32, 3, shape, b->d);
    if (v) v->layer = b->layer;
    return v;
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

static zir_value *mlp(builder *b, zir_value *x) {
    const zir_hparams *hp = &b->g->hp;
    b->group = ZG_MLP;
    zir_value *h = norm(b, "ffn_in", x, blk_weight(b, "ffn_norm.weight", hp->n_embd, 0, false));
    zir_value *wg = blk_weight(b, "ffn_gate.weight", hp->n_embd, hp->n_ff, false);
    zir_value *wu = blk_weight(b, "ffn_up.weight", hp->n_embd, hp->n_ff, false);
    zir_value *wd = blk_weight(b, "ffn_down.weight", hp->n_ff, hp->n_embd, false);
    if (!wg || !wu || !wd) return NULL;
    zir_value *gate = op(b, ZOP_MATMUL, "gate", h, wg, NULL);
    zir_value *up = op(b, ZOP_MATMUL, "up", h, wu, NULL);
    zir_value *act = op(b, ZOP_SWIGLU, "act", gate, up, NULL);
    zir_value *down = op(b, ZOP_MATMUL, "down", act, wd, NULL);
    return op(b, ZOP_ADD, "resid_mlp", x, down, NULL);
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
    b->group = ZG_MLP;
    zir_value *h = norm(b, "ffn_in", x, blk_weight(b, "ffn_norm.weight", hp->n_embd, 0, false));
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
        x = attention(b, x, ff);
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
