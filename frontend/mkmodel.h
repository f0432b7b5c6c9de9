/* mkmodel: writes random-weight test models in GGUF, shaped and labelled like
 * the real qwen3 / llama / qwen2 files that llama.cpp loads, with a small
 * byte-level BPE tokenizer trained on an embedded text.
 *
 * Everything is a function of the options: the same options (seed included)
 * give the same bytes. Weights are N(0,1)/sqrt(fan_in) (see docs/test-models.md
 * for why this keeps activations O(1) through many layers); tensor types follow
 * llama-quantize's choices for the requested file type. */
#ifndef ZINC_MKMODEL_H
#define ZINC_MKMODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "../ir/arena.h"
#include "../ir/dtype.h"
#include "../ir/zstatus.h"

typedef enum zmk_arch {
    ZMK_QWEN3,
    ZMK_LLAMA,
    ZMK_QWEN2,
    ZMK_QWEN3MOE,
    ZMK_QWEN35,
    ZMK_QWEN35MOE,
    ZMK_ARCH_COUNT
} zmk_arch;

/* The file types we can write, with llama.cpp's LLAMA_FTYPE numbers. All but
 * q4_k_m put every 2-D weight in one type (llama-quantize --pure). */
typedef enum zmk_quant {
    ZMK_F32 = 0,
    ZMK_F16 = 1,
    ZMK_Q4_0 = 2,
    ZMK_Q4_1 = 3,
    ZMK_Q8_0 = 7,
    ZMK_Q5_0 = 8,
    ZMK_Q5_1 = 9,
    ZMK_Q4_K_M = 15,
    ZMK_IQ4_NL = 25,
    ZMK_IQ4_XS = 30,
} zmk_quant;

/* The names zmk_parse_quant accepts, comma-separated, for messages. */
extern const char zmk_quant_names[];

typedef struct zmk_opts {
    zmk_arch arch;
    uint32_t layers, hidden, ff, heads, kv_heads, head_dim, vocab, ctx;
    /* qwen3moe: expert_count, expert_used_count, one expert's feed-forward width */
    uint32_t experts, experts_used, expert_ff;
    /* qwen35/qwen35moe: every full_attn-th layer is full attention, the others
     * gated delta-net with a conv of ssm_conv taps, ssm_groups key heads and
     * ssm_heads value heads of ssm_state; rotary dims and rope sections (0:
     * head_dim / 4 and the 11:11:10 split of the real models); shared_ff the
     * shared expert's width (qwen35moe) */
    uint32_t full_attn, ssm_conv, ssm_state, ssm_groups, ssm_heads, rope_dim, shared_ff;
    int32_t rope_sections[4];
    zmk_quant quant;
    uint64_t seed;
    bool tied; /* no output.weight: the output projection reuses token_embd */
} zmk_opts;

/* The defaults that `zinc mkmodel --help` documents. */
void zmk_defaults(zmk_opts *o);

const char *zmk_arch_name(zmk_arch a);
const char *zmk_quant_name(zmk_quant q);
/* Parse "qwen3" / "q4_k_m"...; false for an unknown name. */
bool zmk_parse_arch(const char *s, zmk_arch *out);
bool zmk_parse_quant(const char *s, zmk_quant *out);

/* Checks that the options describe a model llama.cpp can load. */
zstatus zmk_validate(const zmk_opts *o, zdiag *d);

/* The tensors of a model, in the order they are written. */
typedef enum zmk_kind {
    ZMK_TOKEN_EMBD,
    ZMK_ATTN_NORM,
    ZMK_ATTN_Q,
    ZMK_ATTN_Q_B,
    ZMK_ATTN_K,
    ZMK_ATTN_K_B,
    ZMK_ATTN_V,
    ZMK_ATTN_V_B,
    ZMK_ATTN_Q_NORM,
    ZMK_ATTN_K_NORM,
    ZMK_ATTN_OUT,
    ZMK_FFN_NORM,
    ZMK_FFN_GATE,
    ZMK_FFN_UP,
    ZMK_FFN_DOWN,
    ZMK_FFN_GATE_INP,  /* qwen3moe: the router, {hidden, experts}, always f32 */
    ZMK_FFN_GATE_EXPS, /* qwen3moe: stacked experts {hidden, expert_ff, experts} */
    ZMK_FFN_UP_EXPS,
    ZMK_FFN_DOWN_EXPS,      /* {expert_ff, hidden, experts} */
    ZMK_ATTN_POST_NORM,     /* qwen35: the norm before the MLP */
    ZMK_ATTN_QKV,           /* qwen35 delta-net layers: q,k,v {hidden, 2 key_dim + value_dim} */
    ZMK_ATTN_GATE,          /* z {hidden, value_dim} */
    ZMK_SSM_CONV1D,         /* {conv, 2 key_dim + value_dim}, never quantized */
    ZMK_SSM_DT,             /* dt bias {heads} */
    ZMK_SSM_A,              /* -exp(A_log) {heads} */
    ZMK_SSM_BETA,           /* {hidden, heads} */
    ZMK_SSM_ALPHA,          /* {hidden, heads} */
    ZMK_SSM_NORM,           /* {state} */
    ZMK_SSM_OUT,            /* {value_dim, hidden} */
    ZMK_FFN_GATE_INP_SHEXP, /* qwen35moe shared expert: its gate {hidden} */
    ZMK_FFN_GATE_SHEXP,
    ZMK_FFN_UP_SHEXP,
    ZMK_FFN_DOWN_SHEXP,
    ZMK_OUTPUT_NORM,
    ZMK_OUTPUT,
    ZMK_KIND_COUNT
} zmk_kind;

/* llama.cpp's tensor name suffix, e.g. "attn_q.weight" (without "blk.N."). */
const char *zmk_kind_name(zmk_kind k);
/* Whether the architecture has this tensor (given --tied). */
bool zmk_kind_present(const zmk_opts *o, zmk_kind k);
/* rope.dimension_count and rope.dimension_sections of a qwen35 model. */
uint32_t zmk_rope_dim(const zmk_opts *o);
void zmk_rope_sections(const zmk_opts *o, int32_t out[4]);
/* Whether layer l has this tensor (hybrid models differ per layer). */
bool zmk_kind_in_layer(const zmk_opts *o, zmk_kind k, int l);
/* Whether layer l of a qwen35 model is a gated delta-net layer. */
bool zmk_recurrent_layer(const zmk_opts *o, int l);
/* Shape in ggml order: ne[0] is the contiguous (input) dimension, ne[2] the
 * expert of stacked experts (1 otherwise). Returns n_dims. */
uint32_t zmk_kind_shape(const zmk_opts *o, zmk_kind k, int64_t ne[3]);

/* llama-quantize's use_more_bits(i_layer, n_layers), integer arithmetic. */
bool zmk_use_more_bits(int i, int n);

/* The type a tensor gets in the file: what llama-quantize picks for the file
 * type, then llama-quantize's fallback for a row length the type cannot hold
 * (a 256-element block: Q4_K -> Q5_0, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL; then
 * a 32-element block -> F16). *fell_back, when not NULL, tells whether the
 * fallback was taken. */
ztype zmk_tensor_type(const zmk_opts *o, zmk_kind k, int layer, bool *fell_back);

/* ---- tokenizer ---------------------------------------------------------- */

enum { ZMK_TOK_NORMAL = 1, ZMK_TOK_CONTROL = 3, ZMK_TOK_UNUSED = 5 }; /* llama_token_type */

typedef struct zmk_vocab {
    uint32_t n_tokens;   /* == the requested vocab size */
    const char **tokens; /* UTF-8, in the GPT-2 byte-to-unicode alphabet */
    int32_t *types;      /* ZMK_TOK_* */
    uint32_t n_merges;
    const char **merges; /* "left right", rank order */
    uint32_t n_learned;  /* tokens made by merges (some merges re-make a token) */
    uint32_t n_special;
    uint32_t first_special; /* ids first_special .. first_special + n_special - 1 */
    int32_t bos, eos, pad;
    bool add_bos;
    const char *pre;           /* tokenizer.ggml.pre */
    const char *chat_template; /* tokenizer.chat_template */
} zmk_vocab;

/* Builds the vocabulary of exactly vocab_size tokens: the 256 byte symbols,
 * merges learned from the embedded text, the family's special tokens as
 * CONTROL tokens, and "[PADn]" UNUSED tokens if the text runs out of merges
 * (what llama.cpp's converter does for padded vocabularies). */
zstatus zmk_build_vocab(zmk_arch arch, uint32_t vocab_size, zarena *a, zmk_vocab *out, zdiag *d);

/* The smallest vocabulary an architecture accepts: 256 bytes + its specials. */
uint32_t zmk_min_vocab(zmk_arch arch);

/* Byte-level BPE training (frontend/bpe_train.c): learns up to max_new new
 * tokens from text, splitting it first with the family's pre-tokenizer
 * (digits one at a time for Qwen, in runs of up to 3 for Llama 3). Token ids
 * 0..255 are the byte symbols in GPT-2 order. */
typedef struct zmk_bpe {
    uint32_t n_tokens; /* 256 + n_learned */
    const char **tokens;
    uint32_t n_merges;
    const char **merges;
} zmk_bpe;
zstatus zmk_bpe_train(const char *text, int digit_run, uint32_t max_new, zarena *a, zmk_bpe *out, zdiag *d);
/* The UTF-8 symbol GPT-2 uses for byte b (at most 2 bytes + NUL), and the id of byte b. */
void zmk_byte_symbol(uint8_t b, char out[3]);
uint32_t zmk_byte_id(uint8_t b);
/* The embedded training text. */
extern const char zmk_corpus[];

/* ---- writer ------------------------------------------------------------- */

/* What a run did, for the command to print. */
typedef struct zmk_report {
    uint32_t n_tensors;
    uint64_t n_params;
    uint32_t n_merges, n_learned, n_pad;
    uint32_t n_notes;
    char notes[ZMK_KIND_COUNT][200]; /* one line per tensor kind that fell back */
} zmk_report;

/* Validates, builds and writes the model to path (atomically). rep may be NULL. */
zstatus zmk_write(const zmk_opts *o, const char *path, zmk_report *rep, zdiag *d);

#endif
