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
} arch_traits;

static const arch_traits archs[] = {
    {"qwen3", ZROPE_NEOX, true, false, false},
    {"qwen2", ZROPE_NEOX, false, true, false},
    {"llama", ZROPE_NORMAL, false, false, false},
    {"qwen3moe", ZROPE_NEOX, true, false, true},
};
enum { N_ARCHS = sizeof archs / sizeof archs[0] };

const char *zir_supported_archs(void) {
    return "qwen3, qwen2, llama, qwen3moe";
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

zstatus zir_read_hparams(const gguf_file *f, zir_hparams *hp, zdiag *d) {
    const char *arch = NULL;
    if (gguf_get_str(f, "general.architecture", &arch, d)) return d->code;
    const arch_traits *t = find_arch(arch);
    if (!t)
        return zdiag_set(d, ZE_UNSUPPORTED, "%s: architecture '%s' is not supported: expected one of %s",
                         f->path, arch, zir_supported_archs());
    if (read_sizes(f, arch, hp, d) || (t->moe && read_experts(f, arch, hp, d))) return d->code;
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
