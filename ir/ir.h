/* The zincc tensor IR.
 *
 * A graph holds values (tensors) and nodes (operations) in dependency order,
 * as ggml does: a node's inputs are produced by earlier nodes, or are graph
 * inputs, weights or the KV cache. Every node has one output value.
 *
 * The graph is written once for a symbolic token count: the dimension T is
 * the number of tokens in a step (prefill tile or decode's 1) and P = pos + T
 * is the number of cached positions attention sees. The same graph serves
 * prefill and decode; passes reason about both phases by substituting T.
 *
 * Everything lives in the graph's arena. Ops are declared in ir/ops.def and
 * passes match on the kind and flags there, never on op names. */
#ifndef ZINC_IR_H
#define ZINC_IR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "dtype.h"
#include "zhash.h"
#include "zstatus.h"

typedef enum zir_kind {
    ZK_GATHER,      /* indexed row reads (embedding lookup) */
    ZK_NORM,        /* row-wise reduction then elementwise (RMSNorm, softmax) */
    ZK_MATMUL,      /* contraction with a weight */
    ZK_ELEMENTWISE, /* per element (with broadcast), RoPE included */
    ZK_SHAPE,       /* views: reshape */
    ZK_KV,          /* KV-cache writes */
    ZK_ATTENTION,   /* contractions between activations and the KV cache */
    ZK_FUSED,       /* a kernel made by a fusion pass */
    ZK_MOE,         /* mixture of experts: routing, and contractions with the experts it selects */
    ZK_RECURRENT,   /* recurrences over the tokens with a state kept across steps (conv, delta rule) */
    ZK_COUNT
} zir_kind;

enum {
    ZF_W0 = 1 << 0,
    ZF_W1 = 1 << 1,
    ZF_VIEW = 1 << 2,
    ZF_POSITIONAL = 1 << 3,
    ZF_STATEFUL = 1 << 4,
    ZF_FUSED = 1 << 5,
    ZF_GLU = 1 << 6,
    ZF_NO_GPU = 1 << 7,
    ZF_SUM = 1 << 8, /* a + b: a residual or bias that a matmul's epilogue may absorb */
};

typedef enum zir_op {
#define ZOP(NAME, name, arity, kind, flags) ZOP_##NAME,
#include "ops.def"
#undef ZOP
    ZOP_COUNT
} zir_op;

typedef struct zir_op_info {
    const char *name;
    int arity;
    zir_kind kind;
    uint32_t flags;
} zir_op_info;

extern const zir_op_info zir_ops[ZOP_COUNT];
const char *zir_kind_name(zir_kind k);

/* Dimensions: a non-negative constant, or a symbol. */
typedef int64_t zdim;
#define ZDIM_T       ((zdim)-1) /* tokens in this step */
#define ZDIM_P       ((zdim)-2) /* positions in the KV cache after this step: pos + T */
#define ZDIM_C       ((zdim)-3) /* capacity of the KV cache (the context length) */
#define ZIR_MAX_RANK 4
#define ZIR_MAX_IN   8

typedef enum zir_role {
    ZR_INPUT,      /* fed per step (token ids) */
    ZR_WEIGHT,     /* read-only model parameter from the GGUF */
    ZR_ACTIVATION, /* produced by a node, lives for one step */
    ZR_KV,         /* persistent KV cache */
    ZR_COUNT
} zir_role;

const char *zir_role_name(zir_role r);

typedef struct zir_node zir_node;

/* A weight's device layout (the weight-layout pass, docs/architecture.md).
 * Q6_PLANES: each row of a q6_K matrix as four planes of its own bytes, in
 * place (the row keeps its size and offset): the quants' low nibbles of
 * every block (128 bytes a block), their high bits (64), the scales (16),
 * then the d's (2), so that the kernels load 8 or 16 aligned bytes where
 * ggml's 210-byte blocks allow only 2. The plan's load schedule rewrites
 * the rows on the device after the upload (q6_planes.glsl). */
typedef enum zir_wlayout { ZWL_GGUF = 0, ZWL_Q6_PLANES = 1 } zir_wlayout;

typedef struct zir_value {
    uint32_t id;
    const char *name; /* unique in the graph */
    zir_role role;
    ztype dtype;
    int rank;
    zdim shape[ZIR_MAX_RANK]; /* outermost first */
    int32_t layer;            /* -1 when not part of a layer */
    zir_node *producer;       /* NULL for inputs, weights and KV caches */
    uint32_t n_uses;
    float width;      /* elements per token relative to the hidden size (width pass) */
    const void *data; /* weights: bytes in the mapped GGUF */
    uint64_t nbytes;  /* weights: size of data */
    /* weights: how the device holds the bytes (the weight-layout pass); the
     * GGUF file and the interpreter keep ggml's blocks whatever this says. */
    zir_wlayout layout;
    /* activations: stored as fp16 (the mm-f16 pass, where every reader is a
     * matmul that rounds it to fp16 anyway); the interpreter rounds it so */
    bool store_f16;
    UT_hash_handle hh;
} zir_value;

/* ggml's rope modes; IMROPE (Qwen3.5) is NeoX pairing where pair i takes
 * the position of section (i mod sum(sections)) interleaved t,h,w: for text
 * the three are the token's position and a pair outside them rotates by 0. */
typedef enum zir_rope_mode { ZROPE_NORMAL = 0, ZROPE_NEOX = 2, ZROPE_IMROPE = 40 } zir_rope_mode;

/* Attributes; each op reads the fields its comment in ops.def names. */
typedef struct zir_attrs {
    float eps;   /* rms_norm, l2_norm */
    float scale; /* attn_scores, delta_net (the query's scale) */
    struct {
        int rank;
        zdim shape[ZIR_MAX_RANK];
    } reshape; /* reshape: the new shape */
    struct {
        zir_rope_mode mode;
        int n_rot;        /* rotated dimensions, <= head dim */
        float theta;      /* frequency base */
        float freq_scale; /* 1 / linear scaling factor */
        int sections[4];  /* imrope: rope.dimension_sections */
    } rope;
    struct {
        int64_t off, len; /* slice: a range of the last dimension */
    } slice;
    /* matmul: both operands rounded to fp16, products summed in fp32, as the
     * matrix units compute them (the mm-f16 pass; the interpreter rounds
     * the same way). */
    bool mm_f16;
    /* matmul in a decode GEMV: x quantized per 32 elements to int8 as
     * llama.cpp's q8_1 (zir_quantize_q8), the products integer dot
     * products (the mm-f16 pass: the target's choice or zincc --gemv-x;
     * the interpreter quantizes the same way). */
    bool gemv_q8;
    /* prefill matmul: a multi-row GEMV of token rows, not GEMM tiles (the
     * mm-f16 pass, where the cost model prices it cheaper:
     * zcost_prefill_gemv); its operands stay fp32, never mm_f16. */
    bool mm_gemv;
    int topk; /* moe_topk: experts used per token */
} zir_attrs;

/* x[0..n) (n a multiple of 32) quantized in place as attr.gemv_q8 says, and
 * dequantized back: per 32-element block d = amax * ZIR_Q8_INV127, q =
 * clamp(roundeven(x / d), -127, 127) computed as x * (1 / d), x = q * d.
 * The GEMV kernel (glsl/matmul_gemv.glsl, IDOT) does the same arithmetic. */
#define ZIR_Q8_INV127 (1.0f / 127.0f)
void zir_quantize_q8(float *x, int64_t n);

/* The group of a node, for reports: which part of a layer it belongs to. */
typedef enum zir_group { ZG_NONE, ZG_EMBED, ZG_ATTN, ZG_MLP, ZG_OUTPUT, ZG_COUNT } zir_group;
const char *zir_group_name(zir_group g);

/* What a fused kernel computes, for the backend's template choice. The
 * matching pass fills it; the body says exactly which ops are inside. */
typedef enum zir_ktemplate {
    ZKT_NONE,           /* not a kernel node */
    ZKT_MATMUL,         /* [rms_norm] matmul [add] [reshape kv_store]: norm prologue, bias/residual
                         * epilogue, or the row stored into the KV cache (fuse-store) */
    ZKT_GATE_UP_SWIGLU, /* [rms_norm] matmul matmul swiglu */
    ZKT_MLP,            /* [rms_norm] matmul matmul swiglu matmul [add]: intermediate staged on chip */
    ZKT_ATTENTION,      /* attn_scores softmax_causal attn_mix */
    ZKT_HEAD,           /* per-head [rms_norm] [rope] [kv_store]: q/k preparation in one pass over a head */
    ZKT_MOE_GATE_UP,    /* matmul_id matmul_id swiglu: the chosen experts' gate, up and SwiGLU */
    ZKT_MOE_DOWN,       /* matmul_id moe_sum [add]: the chosen experts' down rows, weighted sum, residual */
    ZKT_MATMUL_ROWS,    /* rms_norm (matmul [epilogue])x2..4 [reshape kv_store]: matmuls of one normed
                         * input as one GEMV over their concatenated rows, each a segment with its own
                         * output: the last the kernel's, the others exported (fuse-qkv). A segment's
                         * epilogue is fuse-epilogue's chain, [add of an [N] bias] sigmoid|softplus|silu
                         * [mul by an [N] weight]; at most ZIR_MAX_SEGMENTS */
    ZKT_MOE_SUM,        /* moe_sum add: the grouped GEMMs' products weighed and summed, and the residual */
    ZKT_CONV,           /* ssm_conv silu: the delta-net's causal conv with SiLU on its output (fuse-conv) */
    ZKT_DELTA,          /* [slice] [reshape] [l2_norm] ... delta_net: the delta rule reading q, k and v as
                         * column ranges of one row, q and k L2-normed in its prologue (fuse-delta) */
    ZKT_NORM_GATE,      /* rms_norm swiglu: a per-head RMSNorm times SiLU of a gate (fuse-norm-gate) */
    ZKT_COUNT
} zir_ktemplate;
const char *zir_ktemplate_name(zir_ktemplate t);

/* Matmuls in one matmul_rows kernel: the GEMV binds one weight each (W0..W3).
 * Four: a Qwen3.5 delta-net layer's qkv, z, beta and alpha. */
enum { ZIR_MAX_SEGMENTS = 4 };

/* Parameters a fusion pass chose for a kernel node. */
typedef struct zir_kparams {
    zir_ktemplate tmpl;
    int token_tile; /* tokens per workgroup (prefill); 1 in decode */
    int split;      /* >1: the intermediate is split across this many workgroups (partial sums) */
} zir_kparams;

typedef enum zir_dequant { ZDQ_STAGED = 0, ZDQ_FUSED = 1 } zir_dequant;

struct zir_node {
    uint32_t id;
    zir_op op;
    int n_in;
    zir_value *in[ZIR_MAX_IN]; /* an optional input is NULL */
    zir_value *out;
    int32_t layer;
    zir_group group;
    zir_attrs attr;
    /* A quantized weight operand is either dequantized to a scratch copy by a
     * kernel of its own (staged, the baseline) or inside this node's kernel. */
    zir_dequant dequant;
    /* Fused kernels: the original nodes, in order, that this kernel computes.
     * Their values other than the kernel's output stay on chip. A body node
     * points back at its kernel through parent. */
    int n_body;
    zir_node **body;
    zir_node *parent;
    /* A body node whose output also leaves its kernel: a kernel of several
     * outputs (fuse-qkv's q and k beside the kernel's own output). */
    bool exported;
    zir_kparams kp;
};

/* Hyperparameters the builders read from GGUF metadata. */
typedef struct zir_hparams {
    const char *arch; /* "qwen3", "llama", "qwen2" */
    int n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab, n_ctx_train;
    float rms_eps;
    zir_rope_mode rope_mode;
    int n_rot;
    float rope_theta, rope_freq_scale;
    bool qk_norm, qkv_bias, tied_output;
    int n_expert, n_expert_used, n_ff_exp; /* mixture of experts (qwen3moe); 0 for a dense MLP */
    int n_ff_shexp;                        /* shared expert width (qwen35moe); 0 without one */
    /* Gated delta-net (qwen35): layer l is recurrent when recurrent[l]; the
     * others are gated full attention. */
    bool hybrid;
    bool recurrent[512];
    int ssm_conv, ssm_state, ssm_groups, ssm_heads,
        ssm_inner; /* conv kernel, head dim, k heads, v heads, v width */
    int rope_sections[4];
} zir_hparams;

typedef struct zir_graph {
    zarena *arena;
    zir_hparams hp;
    zir_value **values;
    uint32_t n_values, cap_values;
    zir_node **nodes; /* dependency order */
    uint32_t n_nodes, cap_nodes;
    zir_value *by_name; /* uthash */
    zir_value *tokens;  /* the input */
    zir_value *logits;  /* the output */
} zir_graph;

zir_graph *zir_graph_new(void);
void zir_graph_free(zir_graph *g);

/* Builders: return NULL (with d set) on a duplicate name or out of memory. */
zir_value *zir_value_new(zir_graph *g, const char *name, zir_role role, ztype dtype, int rank,
                         const zdim *shape, zdiag *d);
zir_value *zir_find(const zir_graph *g, const char *name);

/* Appends a node computing op over in[] into a new activation called name,
 * with the output shape inferred by zir_infer_shape. */
zir_node *zir_node_add(zir_graph *g, zir_op op, const char *name, zir_value *const *in, int n_in,
                       const zir_attrs *attr, int32_t layer, zir_group group, zdiag *d);

/* Replaces body[0..n) (top-level nodes, in graph order) with one kernel node
 * computing them. Only the last body node's output may be used outside the
 * body. The kernel takes the position of the last body node. */
zir_node *zir_fuse(zir_graph *g, zir_node *const *body, int n, const zir_kparams *kp, zdiag *d);

/* zir_fuse for a kernel of several outputs: the outputs of the body nodes
 * outs[0..n_outs) (top-level nodes among body[], or kernels: their outputs)
 * may also be used after the kernel; their producers become exported body
 * nodes. Exported nodes of absorbed kernels stay exported. */
zir_node *zir_fuse_outs(zir_graph *g, zir_node *const *body, int n, zir_node *const *outs, int n_outs,
                        const zir_kparams *kp, zdiag *d);

/* The values top-level node n writes for other nodes: a kernel's exported
 * body values (body order), then its output. cap >= 1; returns the count. */
enum { ZIR_MAX_OUT = 8 };
int zir_node_outputs(const zir_node *n, zir_value **out, int cap);

/* Moves top-level node n to position pos of the node list (the nodes
 * between shift by one); the caller keeps the order a dependency order. */
void zir_node_move(zir_graph *g, zir_node *n, uint32_t pos);

/* Re-infers n's output shape and compares it with the recorded one: code on
 * a mismatch (the verifier passes ZE_INTERNAL, the shape pass ZE_INVALID). */
zstatus zir_check_shape(const zir_node *n, zstatus code, zdiag *d);

/* Shape inference for one node from its inputs; ZE_INVALID on a mismatch. */
zstatus zir_infer_shape(const zir_node *n, int *rank, zdim *shape, zdiag *d);

/* One step of execution: T new tokens at positions pos..pos+T-1, with a KV
 * cache of ctx positions. Symbols in shapes resolve against it. */
typedef struct zir_step {
    int64_t T, pos, ctx;
} zir_step;

static inline int64_t zdim_eval(zdim d, const zir_step *s) {
    return d == ZDIM_T ? s->T : d == ZDIM_P ? s->pos + s->T : d == ZDIM_C ? s->ctx : d;
}
int64_t zir_value_elems(const zir_value *v, const zir_step *s);

/* A recurrent state (a delta-net layer's conv window or its delta-rule
 * matrices): persistent like a KV cache, but of constant shape, with no
 * dimension in C. The backend gives it a buffer of its own kind (ZPB_STATE). */
bool zir_value_is_state(const zir_value *v);

/* Checks every structural invariant: dependency order, arity, shapes,
 * roles, use counts, unique names. Passes run it after each step in tests. */
zstatus zir_verify(const zir_graph *g, zdiag *d);

/* Stable, line-oriented text form (golden tests diff it). */
void zir_print(const zir_graph *g, FILE *out);
void zir_print_node(const zir_node *n, FILE *out);
void zir_print_type(const zir_value *v, FILE *out);

#endif
