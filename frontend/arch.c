/* The architecture table and the layer description shared by all rows. */
#include "arch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct arch_traits {
    const char *name;
    zir_rope_mode rope;
    bool qk_norm;  /* RMSNorm over each q and k head before RoPE (Qwen3) */
    bool qkv_bias; /* bias added after the q, k and v projections (Qwen2) */
    bool moe;      /* mixture-of-experts MLP: router, top-k, stacked experts (Qwen3-MoE) */
    bool hybrid;   /* gated delta-net layers between gated full-attention ones, post-attention
                    * norm, a shared expert beside a MoE MLP (Qwen3.5) */
} arch_traits;

static const arch_traits archs[] = {
    {"qwen3", ZROPE_NEOX, true, false, false, false},    {"qwen2", ZROPE_NEOX, false, true, false, false},
    {"llama", ZROPE_NORMAL, false, false, false, false}, {"qwen3moe", ZROPE_NEOX, true, false, true, false},
    {"qwen35", ZROPE_IMROPE, true, false, false, true},  {"qwen35moe", ZROPE_IMROPE, true, false, true, true},
};
enum { N_ARCHS = sizeof archs / sizeof archs[0] };

const char *zir_supported_archs(void) {
    return "qwen3, qwen2, llama, qwen3moe, qwen35, qwen35moe";
}

static const arch_traits *find_arch(const char *name) {
    for (int i = 0; i < N_ARCHS; i++)
        if (!strcmp(archs[i].name, name)) return &archs[i];
    return NULL;
}

/* Reads "<arch>.<suffix>" as u32; a missing required key is an error. */
static zstatus key_u32(const gguf_file *f, const char *arch, const char *suffix, uint32_t *out, bool required,
                       zdiag *d) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int r = gguf_opt_u32(f, key, out, d);
    if (r < 0) return d->code;
    if (r == 0 && required)
        return zdiag_set(d, ZE_INVALID, "%s: metadata key '%s' is missing (required for %s models)", f->path,
                         key, arch);
    return ZOK;
}

static zstatus key_f32(const gguf_file *f, const char *arch, const char *suffix, float *out, zdiag *d) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_opt_f32(f, key, out, d) < 0 ? d->code : ZOK;
}

static zstatus check_positive(const gguf_file *f, const char *what, uint32_t v, uint32_t max, zdiag *d) {
    if (v == 0 || v > max)
        return zdiag_set(d, ZE_INVALID, "%s: %s is %u: expected 1..%u", f->path, what, v, max);
    return ZOK;
}

static zstatus read_rope_scaling(const gguf_file *f, const char *arch, zir_hparams *hp, zdiag *d) {
    char key[128];
    const char *type = NULL;
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    if (gguf_opt_str(f, key, &type, d) < 0) return d->code;
    hp->rope_freq_scale = 1.0f;
    if (!type || !strcmp(type, "none")) return ZOK;
    if (strcmp(type, "linear"))
        return zdiag_set(d, ZE_UNSUPPORTED, "%s: rope scaling '%s' is not supported: expected none or linear",
                         f->path, type);
    float factor = 1.0f;
    if (key_f32(f, arch, "rope.scaling.factor", &factor, d)) return d->code;
    if (!(factor >= 1.0f && factor <= 1024.0f))
        return zdiag_set(d, ZE_INVALID, "%s: %s.rope.scaling.factor is %g: expected 1..1024", f->path, arch,
                         factor);
    hp->rope_freq_scale = 1.0f / factor;
    return ZOK;
}

static zstatus read_sizes(const gguf_file *f, const char *a, zir_hparams *hp, zdiag *d) {
    uint32_t nl = 0, ne = 0, nff = 0, nh = 0, nkv = 0, kl = 0, vl = 0, nrot = 0, ctx = 0;
    if (key_u32(f, a, "block_count", &nl, true, d) || key_u32(f, a, "embedding_length", &ne, true, d) ||
        key_u32(f, a, "feed_forward_length", &nff, true, d) ||
        key_u32(f, a, "attention.head_count", &nh, true, d) ||
        key_u32(f, a, "attention.head_count_kv", &nkv, false, d) ||
        key_u32(f, a, "attention.key_length", &kl, false, d) ||
        key_u32(f, a, "attention.value_length", &vl, false, d) ||
        key_u32(f, a, "rope.dimension_count", &nrot, false, d) ||
        key_u32(f, a, "context_length", &ctx, false, d))
        return d->code;
    if (check_positive(f, "block_count", nl, 4096, d) ||
        check_positive(f, "embedding_length", ne, 1 << 20, d) ||
        check_positive(f, "feed_forward_length", nff, 1 << 22, d) ||
        check_positive(f, "attention.head_count", nh, 4096, d))
        return d->code;
    if (!nkv) nkv = nh;
    if (!kl) kl = ne / nh;
    if (!vl) vl = kl;
    if (!nrot) nrot = kl;
    if (nh % nkv || kl != vl || kl == 0 || nrot > kl || nrot % 2)
        return zdiag_set(
            d, ZE_UNSUPPORTED,
            "%s: attention geometry heads=%u kv_heads=%u key_length=%u value_length=%u n_rot=%u: "
            "expected heads divisible by kv_heads, key_length = value_length, even n_rot <= key_length",
            f->path, nh, nkv, kl, vl, nrot);
    *hp = (zir_hparams){.n_layer = (int)nl,
                        .n_embd = (int)ne,
                        .n_ff = (int)nff,
                        .n_head = (int)nh,
                        .n_head_kv = (int)nkv,
                        .head_dim = (int)kl,
                        .n_rot = (int)nrot,
                        .n_ctx_train = ctx ? (int)ctx : 4096};
    return ZOK;
}

/* llama.cpp's LLAMA_MAX_EXPERTS */
#define MAX_EXPERTS 1024u

/* The expert keys llama.cpp reads; expert_feed_forward_length defaults, as
 * there, to feed_forward_length / expert_used_count. */
static zstatus read_experts(const gguf_file *f, const char *a, zir_hparams *hp, zdiag *d) {
    uint32_t ne = 0, nu = 0, ff = 0;
    if (key_u32(f, a, "expert_count", &ne, true, d) || key_u32(f, a, "expert_used_count", &nu, true, d) ||
        key_u32(f, a, "expert_feed_forward_length", &ff, false, d) ||
        check_positive(f, "expert_count", ne, MAX_EXPERTS, d))
        return d->code;
    if (nu == 0 || nu > ne)
        return zdiag_set(d, ZE_INVALID, "%s: %s.expert_used_count is %u: expected 1..%u (expert_count)",
                         f->path, a, nu, ne);
    if (!ff) ff = (uint32_t)hp->n_ff / nu;
    if (check_positive(f, "expert_feed_forward_length", ff, 1 << 22, d)) return d->code;
    hp->n_expert = (int)ne;
    hp->n_expert_used = (int)nu;
    hp->n_ff_exp = (int)ff;
    return ZOK;
}

/* attention.recurrent_layers (one flag per layer) when present, else every
 * full_attention_interval-th layer (default 4) is full attention, as
 * llama.cpp's qwen35 loader decides. */
static zstatus read_layer_kinds(const gguf_file *f, const char *a, zir_hparams *hp, zdiag *d) {
    char key[128];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", a);
    if (gguf_find_kv(f, key)) {
        const gguf_value *v;
        if (gguf_get_arr(f, key, GGUF_VTYPE_COUNT, &v, d)) return d->code;
        if (v->arr.n != (uint64_t)hp->n_layer || v->arr.elem == GGUF_STRING || v->arr.elem == GGUF_ARRAY ||
            v->arr.elem == GGUF_F32 || v->arr.elem == GGUF_F64)
            return zdiag_set(d, ZE_INVALID, "%s: %s: expected %d booleans or integers (one per layer)",
                             f->path, key, hp->n_layer);
        for (int l = 0; l < hp->n_layer; l++)
            hp->recurrent[l] = v->arr.items[l].u != 0; /* the integer's bits: zero or not */
        return ZOK;
    }
    uint32_t interval = 4;
    if (key_u32(f, a, "full_attention_interval", &interval, false, d) ||
        check_positive(f, "full_attention_interval", interval, (uint32_t)hp->n_layer, d))
        return d->code;
    for (int l = 0; l < hp->n_layer; l++)
        hp->recurrent[l] = (l + 1) % (int)interval != 0;
    return ZOK;
}

/* The gated delta-net's sizes (llama.cpp's ssm.* keys): k heads of state_size
 * (group_count), v heads of state_size (time_step_rank), inner_size = the v
 * width; and rope.dimension_sections for the multi-section RoPE. */
static zstatus read_hybrid(const gguf_file *f, const char *a, zir_hparams *hp, zdiag *d) {
    uint32_t conv = 0, inner = 0, state = 0, rank = 0, groups = 0;
    if (hp->n_layer > (int)(sizeof hp->recurrent / sizeof hp->recurrent[0]))
        return zdiag_set(d, ZE_UNSUPPORTED, "%s: %d layers: zinc reads hybrid models of at most %d layers",
                         f->path, hp->n_layer, (int)(sizeof hp->recurrent / sizeof hp->recurrent[0]));
    if (key_u32(f, a, "ssm.conv_kernel", &conv, true, d) ||
        key_u32(f, a, "ssm.inner_size", &inner, true, d) ||
        key_u32(f, a, "ssm.state_size", &state, true, d) ||
        key_u32(f, a, "ssm.time_step_rank", &rank, true, d) ||
        key_u32(f, a, "ssm.group_count", &groups, true, d) ||
        check_positive(f, "ssm.conv_kernel", conv, 64, d) ||
        (conv < 2 && zdiag_set(d, ZE_UNSUPPORTED, "%s: ssm.conv_kernel is 1: zinc reads 2..64", f->path)) ||
        check_positive(f, "ssm.state_size", state, 1024, d) ||
        check_positive(f, "ssm.time_step_rank", rank, 4096, d) ||
        check_positive(f, "ssm.group_count", groups, 4096, d))
        return d->code;
    if ((uint64_t)state * rank != inner || rank % groups)
        return zdiag_set(
            d, ZE_INVALID,
            "%s: ssm.inner_size %u, state_size %u, time_step_rank %u, group_count %u: expected "
            "inner_size = state_size x time_step_rank and time_step_rank a multiple of group_count",
            f->path, inner, state, rank, groups);
    char key[128];
    const gguf_value *v;
    snprintf(key, sizeof key, "%s.rope.dimension_sections", a);
    if (gguf_get_arr(f, key, GGUF_VTYPE_COUNT, &v, d)) return d->code;
    if (v->arr.n < 1 || v->arr.n > 4 || (v->arr.elem != GGUF_I32 && v->arr.elem != GGUF_U32))
        return zdiag_set(d, ZE_INVALID, "%s: %s: expected 1 to 4 integers", f->path, key);
    for (uint64_t i = 0; i < v->arr.n; i++) {
        int64_t x = v->arr.elem == GGUF_I32 ? v->arr.items[i].i : (int64_t)v->arr.items[i].u;
        if (x < 0 || x > hp->head_dim)
            return zdiag_set(d, ZE_INVALID, "%s: %s[%d] is %lld: expected 0..%d", f->path, key, (int)i,
                             (long long)x, hp->head_dim);
        hp->rope_sections[i] = (int)x;
    }
    hp->hybrid = true;
    hp->ssm_conv = (int)conv;
    hp->ssm_state = (int)state;
    hp->ssm_heads = (int)rank;
    hp->ssm_groups = (int)groups;
    hp->ssm_inner = (int)inner;
    return read_layer_kinds(f, a, hp, d);
}

/* qwen35moe: the shared expert's width (default feed_forward_length); an
 * expert weight scale other than 1 is not read yet. */
static zstatus read_shared_expert(const gguf_file *f, const char *a, zir_hparams *hp, zdiag *d) {
    uint32_t ff = 0;
    float scale = 0.0f;
    if (key_u32(f, a, "expert_shared_feed_forward_length", &ff, false, d) ||
        key_f32(f, a, "expert_weights_scale", &scale, d))
        return d->code;
    if (scale != 0.0f && scale != 1.0f)
        return zdiag_set(d, ZE_UNSUPPORTED, "%s: %s.expert_weights_scale is %g: zinc reads 0 or 1", f->path,
                         a, scale);
    hp->n_ff_shexp = ff ? (int)ff : hp->n_ff;
    return check_positive(f, "expert_shared_feed_forward_length", (uint32_t)hp->n_ff_shexp, 1 << 22, d);
}

zstatus zir_read_hparams(const gguf_file *f, zir_hparams *hp, zdiag *d) {
    const char *arch = NULL;
    if (gguf_get_str(f, "general.architecture", &arch, d)) return d->code;
    const arch_traits *t = find_arch(arch);
    if (!t)
        return zdiag_set(d, ZE_UNSUPPORTED, "%s: architecture '%s' is not supported: expected one of %s",
                         f->path, arch, zir_supported_archs());
    if (read_sizes(f, arch, hp, d) || (t->moe && read_experts(f, arch, hp, d)) ||
        (t->hybrid && read_hybrid(f, arch, hp, d)) ||
        (t->hybrid && t->moe && read_shared_expert(f, arch, hp, d)))
        return d->code;
    hp->arch = t->name;
    hp->rope_mode = t->rope;
    hp->qk_norm = t->qk_norm;
    hp->qkv_bias = t->qkv_bias;
    hp->rms_eps = 1e-6f;
    hp->rope_theta = 10000.0f;
    if (key_f32(f, arch, "attention.layer_norm_rms_epsilon", &hp->rms_eps, d) ||
        key_f32(f, arch, "rope.freq_base", &hp->rope_theta, d) || read_rope_scaling(f, arch, hp, d))
        return d->code;
    if (!(hp->rms_eps > 0 && hp->rms_eps < 1) || !(hp->rope_theta > 0 && isfinite(hp->rope_theta)))
        return zdiag_set(d, ZE_INVALID, "%s: rms epsilon %g or rope base %g out of range", f->path,
                         hp->rms_eps, hp->rope_theta);
    const gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb)
        return zdiag_set(d, ZE_INVALID, "%s: tensor 'token_embd.weight' is missing (required by %s)", f->path,
                         arch);
    hp->n_vocab = (int)emb->ne[1];
    hp->tied_output = gguf_find_tensor(f, "output.weight") == NULL;
    return ZOK;
}
