/* mkmodel: random-weight GGUF test models (see mkmodel.h and docs/test-models.md).
 *
 * Facts taken from llama.cpp (src/llama-quant.cpp, src/llama-vocab.cpp,
 * src/models/{qwen3,qwen2,llama}.cpp, convert_hf_to_gguf.py):
 *  - Q4_K_M: output.weight -> Q6_K (Q8_0 if its rows are not a multiple of
 *    256), and token_embd too when there is no output.weight; attn_v and
 *    ffn_down -> Q6_K on layers where use_more_bits; other 2-D weights Q4_K;
 *    1-D tensors (norms, biases) stay F32.
 *  - --pure file types (q4_0 ... iq4_xs, q8_0, f16): every 2-D weight in the
 *    one type. Rows a type cannot hold fall back as tensor_type_fallback
 *    does: Q4_K -> Q5_0, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, then F16.
 *  - llama requires rope.dimension_count == key_length; qwen2 requires
 *    head_count * key_length == embedding_length (its attn_q is {H, H}).
 *  - Vocabulary padding uses "[PAD<id>]" tokens of type UNUSED.
 *  - qwen3moe (src/models/qwen3moe.cpp): ffn_gate_inp {H, E} is never
 *    quantized (tensor_allows_quantization; the converter writes it f32);
 *    the stacked ffn_*_exps {.., .., E} follow the ffn_gate/up/down rules
 *    (ffn_down_exps Q6_K on use_more_bits layers); with exactly 8 experts
 *    Q4_K_M puts attn_v and attn_k in Q8_0 and attn_output in Q5_K. */
#include "mkmodel.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"

/* ---- options ------------------------------------------------------------ */

static const char *const arch_names[ZMK_ARCH_COUNT] = {"qwen3",    "llama",  "qwen2",
                                                       "qwen3moe", "qwen35", "qwen35moe"};

void zmk_defaults(zmk_opts *o) {
    *o = (zmk_opts){.arch = ZMK_QWEN3,
                    .layers = 2,
                    .hidden = 256,
                    .ff = 768,
                    .heads = 4,
                    .kv_heads = 2,
                    .head_dim = 64,
                    .vocab = 512,
                    .ctx = 4096,
                    .experts = 8,
                    .experts_used = 2,
                    .expert_ff = 256,
                    .full_attn = 4,
                    .ssm_conv = 4,
                    .ssm_state = 32,
                    .ssm_groups = 2,
                    .ssm_heads = 4,
                    .shared_ff = 256,
                    .quant = ZMK_Q4_K_M,
                    .seed = 1,
                    .tied = false};
}

const char *zmk_arch_name(zmk_arch a) {
    return (unsigned)a < ZMK_ARCH_COUNT ? arch_names[a] : "?";
}

/* The file types, and the one type a pure file type gives every 2-D weight. */
static const struct {
    zmk_quant q;
    const char *name;
    ztype t; /* ZT_F32 for q4_k_m's mix, chosen per tensor */
} quants[] = {
    {ZMK_F32, "f32", ZT_F32},          {ZMK_F16, "f16", ZT_F16},    {ZMK_Q8_0, "q8_0", ZT_Q8_0},
    {ZMK_Q4_K_M, "q4_k_m", ZT_F32},    {ZMK_Q4_0, "q4_0", ZT_Q4_0}, {ZMK_Q4_1, "q4_1", ZT_Q4_1},
    {ZMK_Q5_0, "q5_0", ZT_Q5_0},       {ZMK_Q5_1, "q5_1", ZT_Q5_1}, {ZMK_IQ4_NL, "iq4_nl", ZT_IQ4_NL},
    {ZMK_IQ4_XS, "iq4_xs", ZT_IQ4_XS},
};
#define N_QUANTS (sizeof quants / sizeof quants[0])

const char zmk_quant_names[] = "q4_k_m, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs, f16 or f32";

const char *zmk_quant_name(zmk_quant q) {
    for (size_t i = 0; i < N_QUANTS; i++)
        if (quants[i].q == q) return quants[i].name;
    return "?";
}

bool zmk_parse_arch(const char *s, zmk_arch *out) {
    for (int i = 0; i < ZMK_ARCH_COUNT; i++)
        if (!strcmp(s, arch_names[i])) {
            *out = (zmk_arch)i;
            return true;
        }
    return false;
}

bool zmk_parse_quant(const char *s, zmk_quant *out) {
    for (size_t i = 0; i < N_QUANTS; i++)
        if (!strcmp(s, quants[i].name)) {
            *out = quants[i].q;
            return true;
        }
    return false;
}

/* Bounds that keep every size product far from overflow and files sane. */
#define ZMK_MAX_DIM    (1u << 20)
#define ZMK_MAX_LAYERS 1024u

static zstatus check_dim(const char *name, uint32_t v, uint32_t max, zdiag *d) {
    if (v == 0 || v > max)
        return zdiag_set(d, ZE_INVALID, "mkmodel: --%s: expected 1..%u, found %u", name, max, v);
    return ZOK;
}

zstatus zmk_validate(const zmk_opts *o, zdiag *d) {
    if ((unsigned)o->arch >= ZMK_ARCH_COUNT) return zdiag_set(d, ZE_INVALID, "mkmodel: unknown architecture");
    if (!strcmp(zmk_quant_name(o->quant), "?")) return zdiag_set(d, ZE_INVALID, "mkmodel: unknown file type");
    const struct {
        const char *name;
        uint32_t v, max;
    } dims[] = {{"layers", o->layers, ZMK_MAX_LAYERS},
                {"hidden", o->hidden, ZMK_MAX_DIM},
                {"ff", o->ff, ZMK_MAX_DIM},
                {"heads", o->heads, 4096},
                {"kv-heads", o->kv_heads, 4096},
                {"head-dim", o->head_dim, 4096},
                {"vocab", o->vocab, 1u << 24},
                {"ctx", o->ctx, 1u << 24}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        zstatus s = check_dim(dims[i].name, dims[i].v, dims[i].max, d);
        if (s) return s;
    }
    if (o->heads % o->kv_heads)
        return zdiag_set(d, ZE_INVALID, "mkmodel: --heads %u must be a multiple of --kv-heads %u", o->heads,
                         o->kv_heads);
    if (o->head_dim % 2)
        return zdiag_set(d, ZE_INVALID, "mkmodel: --head-dim %u must be even (RoPE rotates pairs)",
                         o->head_dim);
    if (o->arch == ZMK_QWEN2 && (uint64_t)o->heads * o->head_dim != o->hidden)
        return zdiag_set(d, ZE_INVALID,
                         "mkmodel: qwen2 needs heads * head-dim == hidden (llama.cpp's qwen2 attn_q is "
                         "[hidden, hidden]): expected %u, found %u * %u = %llu",
                         o->hidden, o->heads, o->head_dim, (unsigned long long)o->heads * o->head_dim);
    if (o->arch == ZMK_QWEN35 || o->arch == ZMK_QWEN35MOE) {
        zstatus s = check_dim("full-attn-interval", o->full_attn, o->layers, d);
        if (!s) s = check_dim("ssm-conv", o->ssm_conv, 64, d);
        if (!s && o->ssm_conv < 2)
            s = zdiag_set(d, ZE_INVALID, "mkmodel: --ssm-conv: expected 2..64, found 1");
        if (!s) s = check_dim("ssm-state", o->ssm_state, 1024, d);
        if (!s) s = check_dim("ssm-groups", o->ssm_groups, 4096, d);
        if (!s) s = check_dim("ssm-heads", o->ssm_heads, 4096, d);
        if (!s && o->ssm_heads % o->ssm_groups)
            s = zdiag_set(d, ZE_INVALID, "mkmodel: --ssm-heads %u must be a multiple of --ssm-groups %u",
                          o->ssm_heads, o->ssm_groups);
        if (!s && o->arch == ZMK_QWEN35MOE) s = check_dim("shared-ff", o->shared_ff, ZMK_MAX_DIM, d);
        if (!s && (zmk_rope_dim(o) > o->head_dim || zmk_rope_dim(o) % 2))
            s = zdiag_set(d, ZE_INVALID,
                          "mkmodel: --rope-dim %u: expected an even number up to --head-dim %u",
                          zmk_rope_dim(o), o->head_dim);
        if (s) return s;
    }
    if (o->arch == ZMK_QWEN3MOE || o->arch == ZMK_QWEN35MOE) {
        zstatus s = check_dim("experts", o->experts, 1024, d);
        if (!s) s = check_dim("experts-used", o->experts_used, o->experts, d);
        if (!s) s = check_dim("expert-ff", o->expert_ff, ZMK_MAX_DIM, d);
        if (s) return s;
    }
    if (o->vocab < zmk_min_vocab(o->arch))
        return zdiag_set(
            d, ZE_INVALID,
            "mkmodel: --vocab %u is too small for %s: expected at least %u (256 byte tokens + %u "
            "special tokens)",
            o->vocab, zmk_arch_name(o->arch), zmk_min_vocab(o->arch), zmk_min_vocab(o->arch) - 256);
    return ZOK;
}

/* ---- tensors ------------------------------------------------------------ */

/* Legend: name suffix; per layer; init class (what the weight is, for the
 * initialiser); which architectures have it. */
enum { INIT_MATRIX, INIT_RESID_OUT, INIT_NORM, INIT_BIAS };
enum { INIT_SSM_A = INIT_BIAS + 1 };
/* A_HYB: qwen35 and qwen35moe, whose attention tensors exist on full-attention
 * layers only and whose delta-net tensors (A_SSM) on the others. */
enum {
    A_HYB = (1 << ZMK_QWEN35) | (1 << ZMK_QWEN35MOE),
    A_SSM = A_HYB,
    A_MOE = (1 << ZMK_QWEN3MOE) | (1 << ZMK_QWEN35MOE),
    A_SHEXP = 1 << ZMK_QWEN35MOE,
    A_DENSE = (1 << ZMK_QWEN3) | (1 << ZMK_LLAMA) | (1 << ZMK_QWEN2) | (1 << ZMK_QWEN35),
    A_ALL = A_DENSE | A_MOE,
    A_QWEN3 = (1 << ZMK_QWEN3) | A_MOE | A_HYB,
    A_QWEN2 = 1 << ZMK_QWEN2,
    A_FFN_NORM = A_ALL & ~A_HYB
};

static const struct {
    const char *name;
    bool per_layer;
    int init;
    int archs;
} kinds[ZMK_KIND_COUNT] = {
    [ZMK_TOKEN_EMBD] = {"token_embd.weight", false, INIT_MATRIX, A_ALL},
    [ZMK_ATTN_NORM] = {"attn_norm.weight", true, INIT_NORM, A_ALL},
    [ZMK_ATTN_Q] = {"attn_q.weight", true, INIT_MATRIX, A_ALL},
    [ZMK_ATTN_Q_B] = {"attn_q.bias", true, INIT_BIAS, A_QWEN2},
    [ZMK_ATTN_K] = {"attn_k.weight", true, INIT_MATRIX, A_ALL},
    [ZMK_ATTN_K_B] = {"attn_k.bias", true, INIT_BIAS, A_QWEN2},
    [ZMK_ATTN_V] = {"attn_v.weight", true, INIT_MATRIX, A_ALL},
    [ZMK_ATTN_V_B] = {"attn_v.bias", true, INIT_BIAS, A_QWEN2},
    [ZMK_ATTN_Q_NORM] = {"attn_q_norm.weight", true, INIT_NORM, A_QWEN3},
    [ZMK_ATTN_K_NORM] = {"attn_k_norm.weight", true, INIT_NORM, A_QWEN3},
    [ZMK_ATTN_OUT] = {"attn_output.weight", true, INIT_RESID_OUT, A_ALL},
    [ZMK_FFN_NORM] = {"ffn_norm.weight", true, INIT_NORM, A_FFN_NORM},
    [ZMK_FFN_GATE] = {"ffn_gate.weight", true, INIT_MATRIX, A_DENSE},
    [ZMK_FFN_UP] = {"ffn_up.weight", true, INIT_MATRIX, A_DENSE},
    [ZMK_FFN_DOWN] = {"ffn_down.weight", true, INIT_RESID_OUT, A_DENSE},
    [ZMK_FFN_GATE_INP] = {"ffn_gate_inp.weight", true, INIT_MATRIX, A_MOE},
    [ZMK_FFN_GATE_EXPS] = {"ffn_gate_exps.weight", true, INIT_MATRIX, A_MOE},
    [ZMK_FFN_UP_EXPS] = {"ffn_up_exps.weight", true, INIT_MATRIX, A_MOE},
    [ZMK_FFN_DOWN_EXPS] = {"ffn_down_exps.weight", true, INIT_RESID_OUT, A_MOE},
    [ZMK_ATTN_POST_NORM] = {"post_attention_norm.weight", true, INIT_NORM, A_HYB},
    [ZMK_ATTN_QKV] = {"attn_qkv.weight", true, INIT_MATRIX, A_SSM},
    [ZMK_ATTN_GATE] = {"attn_gate.weight", true, INIT_MATRIX, A_SSM},
    [ZMK_SSM_CONV1D] = {"ssm_conv1d.weight", true, INIT_MATRIX, A_SSM},
    [ZMK_SSM_DT] = {"ssm_dt.bias", true, INIT_BIAS, A_SSM},
    [ZMK_SSM_A] = {"ssm_a", true, INIT_SSM_A, A_SSM},
    [ZMK_SSM_BETA] = {"ssm_beta.weight", true, INIT_MATRIX, A_SSM},
    [ZMK_SSM_ALPHA] = {"ssm_alpha.weight", true, INIT_MATRIX, A_SSM},
    [ZMK_SSM_NORM] = {"ssm_norm.weight", true, INIT_NORM, A_SSM},
    [ZMK_SSM_OUT] = {"ssm_out.weight", true, INIT_RESID_OUT, A_SSM},
    [ZMK_FFN_GATE_INP_SHEXP] = {"ffn_gate_inp_shexp.weight", true, INIT_MATRIX, A_SHEXP},
    [ZMK_FFN_GATE_SHEXP] = {"ffn_gate_shexp.weight", true, INIT_MATRIX, A_SHEXP},
    [ZMK_FFN_UP_SHEXP] = {"ffn_up_shexp.weight", true, INIT_MATRIX, A_SHEXP},
    [ZMK_FFN_DOWN_SHEXP] = {"ffn_down_shexp.weight", true, INIT_RESID_OUT, A_SHEXP},
    [ZMK_OUTPUT_NORM] = {"output_norm.weight", false, INIT_NORM, A_ALL},
    [ZMK_OUTPUT] = {"output.weight", false, INIT_MATRIX, A_ALL},
};

const char *zmk_kind_name(zmk_kind k) {
    return (unsigned)k < ZMK_KIND_COUNT ? kinds[k].name : "?";
}

bool zmk_kind_present(const zmk_opts *o, zmk_kind k) {
    if ((unsigned)k >= ZMK_KIND_COUNT) return false;
    if (k == ZMK_OUTPUT && o->tied) return false;
    return (kinds[k].archs >> o->arch) & 1;
}

bool zmk_recurrent_layer(const zmk_opts *o, int l) {
    return (o->arch == ZMK_QWEN35 || o->arch == ZMK_QWEN35MOE) && (l + 1) % (int)o->full_attn != 0;
}

bool zmk_kind_in_layer(const zmk_opts *o, zmk_kind k, int l) {
    if (!zmk_kind_present(o, k)) return false;
    if (!((A_HYB >> o->arch) & 1)) return true;
    bool attn = k == ZMK_ATTN_Q || k == ZMK_ATTN_K || k == ZMK_ATTN_V || k == ZMK_ATTN_Q_NORM ||
                k == ZMK_ATTN_K_NORM || k == ZMK_ATTN_OUT;
    bool ssm = k >= ZMK_ATTN_QKV && k <= ZMK_SSM_OUT;
    return zmk_recurrent_layer(o, l) ? !attn : !ssm;
}

uint32_t zmk_rope_dim(const zmk_opts *o) {
    return o->rope_dim ? o->rope_dim : (o->head_dim / 4) % 2 ? o->head_dim : o->head_dim / 4;
}

/* rope.dimension_sections: the option, or the real models' 11:11:10 split of
 * the rotated pairs (32 pairs -> 11, 11, 10, 0). */
void zmk_rope_sections(const zmk_opts *o, int32_t out[4]) {
    int32_t n = (int32_t)zmk_rope_dim(o) / 2;
    bool given = o->rope_sections[0] || o->rope_sections[1] || o->rope_sections[2] || o->rope_sections[3];
    for (int i = 0; i < 4; i++)
        out[i] = given ? o->rope_sections[i] : i == 3 ? 0 : (n + 2 - i) / 3;
}

uint32_t zmk_kind_shape(const zmk_opts *o, zmk_kind k, int64_t ne[3]) {
    const int64_t H = o->hidden, F = o->ff, Q = (int64_t)o->heads * o->head_dim;
    const int64_t KV = (int64_t)o->kv_heads * o->head_dim, FE = o->expert_ff;
    const int64_t KD = (int64_t)o->ssm_groups * o->ssm_state, VD = (int64_t)o->ssm_heads * o->ssm_state;
    const bool hyb = (A_HYB >> o->arch) & 1;
    ne[1] = ne[2] = 1;
    switch (k) {
    case ZMK_ATTN_POST_NORM: ne[0] = H; return 1;
    case ZMK_ATTN_QKV: ne[0] = H, ne[1] = 2 * KD + VD; return 2;
    case ZMK_ATTN_GATE: ne[0] = H, ne[1] = VD; return 2;
    case ZMK_SSM_CONV1D: ne[0] = o->ssm_conv, ne[1] = 2 * KD + VD; return 2;
    case ZMK_SSM_DT:
    case ZMK_SSM_A: ne[0] = o->ssm_heads; return 1;
    case ZMK_SSM_BETA:
    case ZMK_SSM_ALPHA: ne[0] = H, ne[1] = o->ssm_heads; return 2;
    case ZMK_SSM_NORM: ne[0] = o->ssm_state; return 1;
    case ZMK_SSM_OUT: ne[0] = VD, ne[1] = H; return 2;
    case ZMK_FFN_GATE_INP_SHEXP: ne[0] = H; return 1;
    case ZMK_FFN_GATE_SHEXP:
    case ZMK_FFN_UP_SHEXP: ne[0] = H, ne[1] = o->shared_ff; return 2;
    case ZMK_FFN_DOWN_SHEXP: ne[0] = o->shared_ff, ne[1] = H; return 2;
    case ZMK_FFN_GATE_INP: ne[0] = H, ne[1] = o->experts; return 2;
    case ZMK_FFN_GATE_EXPS:
    case ZMK_FFN_UP_EXPS: ne[0] = H, ne[1] = FE, ne[2] = o->experts; return 3;
    case ZMK_FFN_DOWN_EXPS: ne[0] = FE, ne[1] = H, ne[2] = o->experts; return 3;
    case ZMK_TOKEN_EMBD:
    case ZMK_OUTPUT: ne[0] = H, ne[1] = o->vocab; return 2;
    case ZMK_ATTN_Q: ne[0] = H, ne[1] = hyb ? 2 * Q : Q; return 2; /* qwen35: query and gate per head */
    case ZMK_ATTN_K:
    case ZMK_ATTN_V: ne[0] = H, ne[1] = KV; return 2;
    case ZMK_ATTN_OUT: ne[0] = Q, ne[1] = H; return 2;
    case ZMK_FFN_GATE:
    case ZMK_FFN_UP: ne[0] = H, ne[1] = F; return 2;
    case ZMK_FFN_DOWN: ne[0] = F, ne[1] = H; return 2;
    case ZMK_ATTN_Q_B: ne[0] = Q; return 1;
    case ZMK_ATTN_K_B:
    case ZMK_ATTN_V_B: ne[0] = KV; return 1;
    case ZMK_ATTN_Q_NORM:
    case ZMK_ATTN_K_NORM: ne[0] = o->head_dim; return 1;
    case ZMK_ATTN_NORM:
    case ZMK_FFN_NORM:
    case ZMK_OUTPUT_NORM: ne[0] = H; return 1;
    case ZMK_KIND_COUNT: break;
    }
    ne[0] = 0;
    return 0;
}

bool zmk_use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* What llama-quantize's llama_tensor_get_type picks for Q4_K_M, before the
 * row-length fallback. */
static ztype q4_k_m_type(const zmk_opts *o, zmk_kind k, int layer) {
    bool eight = (A_MOE >> o->arch & 1) && o->experts == 8; /* llama.cpp's n_expert == 8 rules */
    switch (k) {
    case ZMK_OUTPUT: return ZT_Q6_K;
    case ZMK_TOKEN_EMBD: return o->tied ? ZT_Q6_K : ZT_Q4_K;
    case ZMK_ATTN_K: return eight ? ZT_Q8_0 : ZT_Q4_K;
    case ZMK_ATTN_OUT: return eight ? ZT_Q5_K : ZT_Q4_K;
    case ZMK_ATTN_V:
    case ZMK_ATTN_QKV: /* attn_v-like; one of the two per layer, so i_attention_wv is the layer */
        if (eight) return ZT_Q8_0;
        return zmk_use_more_bits(layer, (int)o->layers) ? ZT_Q6_K : ZT_Q4_K;
    case ZMK_FFN_DOWN:
    case ZMK_FFN_DOWN_SHEXP:
    case ZMK_FFN_DOWN_EXPS: return zmk_use_more_bits(layer, (int)o->layers) ? ZT_Q6_K : ZT_Q4_K;
    default: return ZT_Q4_K;
    }
}

/* The type the file type asks for, before the row-length fallback. */
static ztype wanted_type(const zmk_opts *o, zmk_kind k, int layer) {
    int64_t ne[3];
    if (zmk_kind_shape(o, k, ne) < 2 || k == ZMK_FFN_GATE_INP || k == ZMK_SSM_CONV1D) return ZT_F32;
    if (o->quant == ZMK_Q4_K_M) return q4_k_m_type(o, k, layer);
    for (size_t i = 0; i < N_QUANTS; i++)
        if (quants[i].q == o->quant) return quants[i].t;
    return ZT_F32;
}

ztype zmk_tensor_type(const zmk_opts *o, zmk_kind k, int layer, bool *fell_back) {
    int64_t ne[3];
    zmk_kind_shape(o, k, ne);
    ztype t = wanted_type(o, k, layer);
    bool fb = ne[0] % ztype_get(t)->block_elems != 0;
    /* llama-quantize's tensor_type_fallback: a 256-element block type takes
     * its 32-element stand-in, and F16 when not even 32 divides. */
    if (fb)
        t = t == ZT_IQ4_XS ? ZT_IQ4_NL
            : t == ZT_Q4_K ? ZT_Q5_0
            : t == ZT_Q5_K ? ZT_Q5_1
            : t == ZT_Q6_K ? ZT_Q8_0
                           : t;
    if (fb && ne[0] % ztype_get(t)->block_elems) t = ZT_F16;
    if (fell_back) *fell_back = fb;
    return t;
}

/* ---- vocabulary --------------------------------------------------------- */

static const char *const qwen_specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
static const char *const llama3_specials[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
                                              "<|start_header_id|>", "<|end_header_id|>"};

/* Qwen2-Instruct's ChatML template (with its default system prompt), a plain
 * ChatML one for Qwen3 (its real template adds <think> handling on top), and
 * Meta-Llama-3-Instruct's. llama.cpp recognises all three by their markers. */
static const char qwen2_template[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
static const char chatml_template[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif "
    "%}";
static const char llama3_template[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

uint32_t zmk_min_vocab(zmk_arch arch) {
    return 256 + (arch == ZMK_LLAMA ? sizeof llama3_specials / sizeof llama3_specials[0]
                                    : sizeof qwen_specials / sizeof qwen_specials[0]);
}

/* Special-token roles as the families' GGUFs set them (ids relative to the
 * first special): Qwen bos = pad = <|endoftext|>, eos = <|im_end|>, no BOS
 * added; Llama 3 bos = <|begin_of_text|>, eos = <|eot_id|> (instruct),
 * pad = <|end_of_text|>, BOS added. */
static void family_specials(zmk_arch arch, zmk_vocab *v) {
    bool llama = arch == ZMK_LLAMA;
    int32_t f = (int32_t)v->first_special;
    v->bos = f;
    v->eos = f + 2;
    v->pad = llama ? f + 1 : f;
    v->add_bos = llama;
    v->pre = llama ? "llama-bpe" : "qwen2";
    v->chat_template = llama ? llama3_template : arch == ZMK_QWEN2 ? qwen2_template : chatml_template;
}

zstatus zmk_build_vocab(zmk_arch arch, uint32_t vocab_size, zarena *a, zmk_vocab *out, zdiag *d) {
    bool llama = arch == ZMK_LLAMA;
    const char *const *sp = llama ? llama3_specials : qwen_specials;
    uint32_t n_sp = zmk_min_vocab(arch) - 256;
    if (vocab_size < 256 + n_sp)
        return zdiag_set(d, ZE_INVALID, "mkmodel: vocab %u is too small: expected at least %u", vocab_size,
                         256 + n_sp);
    zmk_bpe bpe;
    zstatus s = zmk_bpe_train(zmk_corpus, llama ? 3 : 1, vocab_size - 256 - n_sp, a, &bpe, d);
    if (s) return s;
    const char **tok = zarena_array(a, vocab_size, sizeof *tok);
    int32_t *types = zarena_array(a, vocab_size, sizeof *types);
    if (!tok || !types)
        return zdiag_set(d, ZE_NOMEM, "mkmodel: out of memory for a %u-token vocabulary", vocab_size);
    uint32_t n = 0;
    for (; n < bpe.n_tokens; n++)
        tok[n] = bpe.tokens[n], types[n] = ZMK_TOK_NORMAL;
    for (uint32_t i = 0; i < n_sp; i++, n++)
        tok[n] = sp[i], types[n] = ZMK_TOK_CONTROL;
    for (; n < vocab_size; n++) {
        if (!(tok[n] = zarena_printf(a, "[PAD%u]", n)))
            return zdiag_set(d, ZE_NOMEM, "mkmodel: out of memory");
        types[n] = ZMK_TOK_UNUSED;
    }
    *out = (zmk_vocab){.n_tokens = vocab_size,
                       .tokens = tok,
                       .types = types,
                       .n_merges = bpe.n_merges,
                       .merges = bpe.merges,
                       .n_learned = bpe.n_tokens - 256,
                       .n_special = n_sp,
                       .first_special = bpe.n_tokens};
    family_specials(arch, out);
    return ZOK;
}

/* ---- weights ------------------------------------------------------------ */

/* splitmix64: seeds one independent stream per tensor from (seed, name), so
 * a tensor's values do not depend on which other tensors exist. */
static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* Box-Muller on 53-bit uniforms; u1 is kept away from 0. */
static float normal(uint64_t *s) {
    double u1 = ((splitmix64(s) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = (splitmix64(s) >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Fills row r (ne0 values) of tensor `name` of kind k (docs/test-models.md).
 * Each row has its own stream, seeded from (seed, name, row), so rows can be
 * generated in parallel and the bytes do not depend on the thread count. */
static void init_row(const zmk_opts *o, zmk_kind k, const char *name, int64_t ne0, int64_t r, float *x) {
    uint64_t s = o->seed ^ fnv1a(name) ^ ((uint64_t)r * 0xD1B54A32D192ED03ull);
    splitmix64(&s);
    double scale;
    switch (kinds[k].init) {
    case INIT_NORM:
        for (int64_t i = 0; i < ne0; i++)
            x[i] = 1.0f + 0.1f * normal(&s);
        return;
    case INIT_SSM_A: /* A = -exp(A_log), as the converter writes it */
        for (int64_t i = 0; i < ne0; i++)
            x[i] = -expf(0.5f * normal(&s));
        return;
    case INIT_BIAS: scale = 0.1; break;
    case INIT_RESID_OUT: scale = 1.0 / sqrt((double)ne0 * 2.0 * o->layers); break;
    default: scale = 1.0 / sqrt((double)ne0); break;
    }
    for (int64_t i = 0; i < ne0; i++)
        x[i] = (float)(scale * normal(&s));
}

/* A range of rows to generate and quantize on one thread. */
typedef struct row_job {
    const zmk_opts *o;
    zmk_kind k;
    const char *name;
    ztype t;
    int64_t ne0, r0, r1;
    uint64_t row_bytes;
    uint8_t *q;
    zstatus s;
} row_job;

static void *row_worker(void *arg) {
    row_job *j = arg;
    float *x = malloc(sizeof *x * (size_t)j->ne0);
    j->s = x ? ZOK : ZE_NOMEM;
    for (int64_t r = j->r0; r < j->r1 && !j->s; r++) {
        init_row(j->o, j->k, j->name, j->ne0, r, x);
        j->s = ztype_quantize_row(j->t, x, j->q + (uint64_t)r * j->row_bytes, j->ne0);
    }
    free(x);
    return NULL;
}

enum { MAX_THREADS = 32 };

/* Generates all rows, on as many threads as there are cores (large tensors
 * only: threads cost more than they save on small ones). */
static zstatus gen_rows(row_job *proto, int64_t rows) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n = (int)(cores < 1 ? 1 : cores > MAX_THREADS ? MAX_THREADS : cores);
    if ((uint64_t)rows * (uint64_t)proto->ne0 < (1u << 20)) n = 1;
    row_job job[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    bool started[MAX_THREADS] = {0};
    for (int i = 0; i < n; i++) {
        job[i] = *proto;
        job[i].r0 = rows * i / n;
        job[i].r1 = rows * (i + 1) / n;
        if (n > 1) started[i] = pthread_create(&th[i], NULL, row_worker, &job[i]) == 0;
        if (!started[i]) row_worker(&job[i]);
    }
    zstatus s = ZOK;
    for (int i = 0; i < n; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        if (job[i].s && !s) s = job[i].s;
    }
    return s;
}

typedef struct mk_ctx {
    const zmk_opts *o;
    gguf_writer *w;
    zmk_report *rep;
    bool noted[ZMK_KIND_COUNT];
} mk_ctx;

/* One note per tensor kind, not per tensor: the command prints them. */
static void note_fallback(mk_ctx *c, zmk_kind k, int layer, int64_t ne0, ztype t) {
    if (c->noted[k] || c->rep->n_notes >= ZMK_KIND_COUNT) return;
    c->noted[k] = true;
    ztype want = wanted_type(c->o, k, layer);
    snprintf(c->rep->notes[c->rep->n_notes++], sizeof c->rep->notes[0],
             "%s: row length %lld is not a multiple of %u (the block of %s): written as %s", kinds[k].name,
             (long long)ne0, ztype_get(want)->block_elems, ztype_name(want), ztype_name(t));
}

static zstatus add_tensor(mk_ctx *c, zmk_kind k, int layer, zdiag *d) {
    char name[96];
    if (kinds[k].per_layer)
        snprintf(name, sizeof name, "blk.%d.%s", layer, kinds[k].name);
    else
        snprintf(name, sizeof name, "%s", kinds[k].name);
    int64_t ne[3];
    uint32_t nd = zmk_kind_shape(c->o, k, ne);
    bool fell_back, ok;
    ztype t = zmk_tensor_type(c->o, k, layer, &fell_back);
    int64_t rows = ne[1] * ne[2]; /* stacked experts: expert e's row r is row e * ne[1] + r */
    uint64_t row = ztype_row_bytes(t, (uint64_t)ne[0], &ok), n = (uint64_t)ne[0] * (uint64_t)rows;
    zarena *a = zarena_new(); /* scratch for this tensor; the writer keeps its own copy */
    uint8_t *q = a && ok ? zarena_array(a, (size_t)rows, row) : NULL;
    zstatus s = ZOK;
    if (!q) {
        s = zdiag_set(d, ZE_NOMEM, "mkmodel: out of memory for %s (%llu values)", name,
                      (unsigned long long)n);
        goto done;
    }
    row_job proto = {.o = c->o, .k = k, .name = name, .t = t, .ne0 = ne[0], .row_bytes = row, .q = q};
    if ((s = gen_rows(&proto, rows))) {
        zdiag_set(d, s, "mkmodel: cannot write %s as %s", name, ztype_name(t));
        goto done;
    }
    gguf_add_tensor(c->w, name, t, nd, ne, q, row * (uint64_t)rows);
    c->rep->n_tensors++;
    c->rep->n_params += n;
    if (fell_back) note_fallback(c, k, layer, ne[0], t);
done:
    zarena_free(a);
    return s;
}

static zstatus add_tensors(mk_ctx *c, zdiag *d) {
    zstatus s = add_tensor(c, ZMK_TOKEN_EMBD, -1, d);
    for (int l = 0; l < (int)c->o->layers && !s; l++)
        for (int k = ZMK_ATTN_NORM; k < ZMK_OUTPUT_NORM && !s; k++)
            if (zmk_kind_in_layer(c->o, (zmk_kind)k, l)) s = add_tensor(c, (zmk_kind)k, l, d);
    if (!s) s = add_tensor(c, ZMK_OUTPUT_NORM, -1, d);
    if (!s && zmk_kind_present(c->o, ZMK_OUTPUT)) s = add_tensor(c, ZMK_OUTPUT, -1, d);
    return s;
}

/* ---- metadata ----------------------------------------------------------- */

/* Family values of the real models: Qwen2/Qwen3 use RMS eps 1e-6 and RoPE
 * base 1e6, Llama 3 uses 1e-5 and 5e5. */
static void set_hparams(gguf_writer *w, const zmk_opts *o) {
    const char *arch = zmk_arch_name(o->arch);
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    gguf_set_u32(w, KEY("context_length"), o->ctx);
    gguf_set_u32(w, KEY("embedding_length"), o->hidden);
    gguf_set_u32(w, KEY("block_count"), o->layers);
    gguf_set_u32(w, KEY("feed_forward_length"), o->ff);
    gguf_set_u32(w, KEY("attention.head_count"), o->heads);
    gguf_set_u32(w, KEY("attention.head_count_kv"), o->kv_heads);
    gguf_set_u32(w, KEY("attention.key_length"), o->head_dim);
    gguf_set_u32(w, KEY("attention.value_length"), o->head_dim);
    gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), o->arch == ZMK_LLAMA ? 1e-5f : 1e-6f);
    gguf_set_f32(w, KEY("rope.freq_base"), o->arch == ZMK_LLAMA ? 500000.0f : 1000000.0f);
    if (o->arch == ZMK_QWEN35 || o->arch == ZMK_QWEN35MOE) {
        int32_t sec[4];
        zmk_rope_sections(o, sec);
        gguf_set_u32(w, KEY("rope.dimension_count"), zmk_rope_dim(o));
        gguf_set_arr_i32(w, KEY("rope.dimension_sections"), sec, 4);
        gguf_set_u32(w, KEY("full_attention_interval"), o->full_attn);
        gguf_set_u32(w, KEY("ssm.conv_kernel"), o->ssm_conv);
        gguf_set_u32(w, KEY("ssm.state_size"), o->ssm_state);
        gguf_set_u32(w, KEY("ssm.group_count"), o->ssm_groups);
        gguf_set_u32(w, KEY("ssm.time_step_rank"), o->ssm_heads);
        gguf_set_u32(w, KEY("ssm.inner_size"), o->ssm_state * o->ssm_heads);
    }
    if (o->arch == ZMK_QWEN35MOE) gguf_set_u32(w, KEY("expert_shared_feed_forward_length"), o->shared_ff);
    if (o->arch == ZMK_QWEN3MOE || o->arch == ZMK_QWEN35MOE) {
        gguf_set_u32(w, KEY("expert_count"), o->experts);
        gguf_set_u32(w, KEY("expert_used_count"), o->experts_used);
        gguf_set_u32(w, KEY("expert_feed_forward_length"), o->expert_ff);
    }
    if (o->arch == ZMK_LLAMA) {
        gguf_set_u32(w, KEY("rope.dimension_count"), o->head_dim);
        gguf_set_u32(w, KEY("vocab_size"), o->vocab);
    }
#undef KEY
}

static void set_general(gguf_writer *w, const zmk_opts *o, zarena *a) {
    gguf_set_str(w, "general.architecture", zmk_arch_name(o->arch));
    gguf_set_str(w, "general.type", "model");
    const char *name = zarena_printf(a, "zinc-test-%s-%uL-%uH-%s%s", zmk_arch_name(o->arch), o->layers,
                                     o->hidden, zmk_quant_name(o->quant), o->tied ? "-tied" : "");
    gguf_set_str(w, "general.name", name ? name : "zinc-test");
    const char *desc = zarena_printf(a, "random-weight test model written by zinc mkmodel, seed %llu",
                                     (unsigned long long)o->seed);
    gguf_set_str(w, "general.description", desc ? desc : "random-weight test model");
    gguf_set_u32(w, "general.file_type", (uint32_t)o->quant);
    gguf_set_u32(w, "general.quantization_version", 2);
}

static void set_tokenizer(gguf_writer *w, const zmk_vocab *v) {
    gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_set_str(w, "tokenizer.ggml.pre", v->pre);
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", v->tokens, v->n_tokens);
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", v->types, v->n_tokens);
    gguf_set_arr_str(w, "tokenizer.ggml.merges", v->merges, v->n_merges);
    gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos);
    gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos);
    gguf_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)v->pad);
    gguf_set_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos);
    gguf_set_str(w, "tokenizer.chat_template", v->chat_template);
}

zstatus zmk_write(const zmk_opts *o, const char *path, zmk_report *rep, zdiag *d) {
    zmk_report local;
    if (!rep) rep = &local;
    memset(rep, 0, sizeof *rep);
    zstatus s = zmk_validate(o, d);
    if (s) return s;
    zarena *a = zarena_new();
    gguf_writer *w = gguf_writer_new();
    if (!a || !w) {
        s = zdiag_set(d, ZE_NOMEM, "mkmodel: out of memory");
        goto done;
    }
    zmk_vocab v;
    if ((s = zmk_build_vocab(o->arch, o->vocab, a, &v, d))) goto done;
    rep->n_merges = v.n_merges;
    rep->n_learned = v.n_learned;
    rep->n_pad = v.n_tokens - 256 - v.n_learned - v.n_special;
    set_general(w, o, a);
    set_hparams(w, o);
    set_tokenizer(w, &v);
    mk_ctx c = {.o = o, .w = w, .rep = rep};
    if ((s = add_tensors(&c, d))) goto done;
    s = gguf_writer_write(w, path, d);
done:
    if (w) gguf_writer_free(w);
    zarena_free(a);
    return s;
}
