/* Kernel generation: one compute kernel per top-level IR node (a plain node
 * or a fused kernel node), as GLSL text ready for shaderc, with the list of
 * values it binds and its workgroup counts as affine functions of the token
 * count T of a step.
 *
 * The kernel ABI, shared by every template (backend/glsl/common.glsl):
 *   - binding 0: the step parameters, a storage buffer of uints
 *       { T, pos, ctx, logits_rows } : T tokens at positions pos .. pos+T-1,
 *       KV-cache capacity ctx, and how many of the last rows need logits
 *       (0: all; the executor asks for 1 unless the caller reads them all).
 *       The executor updates it between submissions, so a recorded command
 *       buffer replays for every decode step.
 *   - bindings 1..n: bind[0..n-1] below, in order. Weights are bound as raw
 *     bytes (uint words; the kernel decodes ggml blocks itself), activations
 *     and KV caches as float (or float16 when the target stores fp16).
 *   - workgroup counts: groups[axis] = ceil((a * T + b) / div).
 * Shapes are compile-time constants (#define) except T, pos and P = pos + T,
 * which are read from binding 0; identical sources are deduplicated when the
 * plan is written, so the 36 layers of a model share their kernels. */
#ifndef ZINC_CODEGEN_H
#define ZINC_CODEGEN_H

#include "../ir/ir.h"
#include "../passes/pass.h"
#include "plan.h"

/* Bindings a kernel has besides the step buffer: the plan's limit less
 * that one (a rows GEMV of four segments with their epilogues and int8 x
 * takes 13). */
#define ZCG_MAX_BIND (ZPLAN_MAX_BINDINGS - 1)

typedef struct zcg_affine {
    int64_t a, b, div; /* ceil((a*T + b) / div); div >= 1 */
} zcg_affine;

static inline int64_t zcg_affine_eval(zcg_affine f, int64_t T) {
    int64_t x = f.a * T + f.b;
    return x <= 0 ? 0 : (x + f.div - 1) / f.div;
}

/* Bindings that are neither a value nor scratch. */
enum { ZCG_BIND_TOPK = 1 /* the plan's top-k candidates buffer */ };

typedef struct zcg_binding {
    const zir_value *value; /* NULL: per-dispatch scratch of scratch_bytes, or a special buffer */
    uint64_t scratch_bytes; /* for scratch: bytes, zero-filled once at load */
    bool written;           /* the kernel writes this binding */
    int special;            /* ZCG_BIND_*, with value NULL (last: positional initializers stay valid) */
    /* Scratch a node's pre pass writes whole before the node's kernel reads it,
     * and nothing reads after: the lowering gives every such binding of the
     * plan one buffer (its hazards order the dispatches), not one each. */
    bool transient;
} zcg_binding;

/* How a decode GEMV is laid out (matmul_gemv.glsl): rows per subgroup,
 * groups per trip, subgroups per workgroup. 0 fields: codegen's default.
 * A prefill GEMM on the matrix units (matmul_cmp.glsl) reads bm and nsg:
 * tokens and subgroups (of 16 weight rows each) a workgroup. */
typedef struct zcg_gemv {
    int rs, unroll, nsg;
    int restrict_w; /* 1: weights declared restrict (dequant.glsl) */
    int x_shared;   /* x staged in shared memory: 0 where it fits (the default), 1 always, -1 never */
    int bm;         /* the prefill GEMM's token tile (matmul_cmp.glsl); 0: codegen's (cmp_tokens) */
} zcg_gemv;

/* Layouts chosen by measuring (zvk_tune_gemv), by kernel key: the kernel's
 * name without its layout ("gemv_gateup_q4_K_n12288_k4096+norm", a prefill
 * GEMM's "gemm_gateup_q4_K_n12288_k4096_cmp+norm"). */
typedef struct zcg_tuning {
    int n;
    const char **key;
    zcg_gemv *gemv;
} zcg_tuning;

typedef struct zcg_opts {
    const ztarget *target;
    zpass_phase phase;
    int64_t max_tokens;         /* most tokens in one step (prefill chunk; batch: rows) */
    bool act_f16;               /* activations stored as float16 (needs 16-bit storage) */
    const zcg_tuning *tuning;   /* measured layouts, or NULL */
    const zcg_gemv *force_gemv; /* the layout of every GEMV (the tuner's candidates), or NULL */
    bool batch;    /* the batch schedule: row t is a token of sequence slot rows[t].y at position rows[t].x */
    int gemv_rows; /* > 0: matmuls outside decode are multi-row GEMVs of this many token rows a
                      workgroup (the batch schedule, zcost_batch_gemv); 0: GEMMs */
} zcg_opts;

typedef struct zcg_kernel {
    char name[128];   /* e.g. "matmul_q4_K_n768_k256+norm+add" */
    char key[128];    /* tunable kernels: the name without the layout; else "" */
    const char *glsl; /* complete source, arena-owned; NULL: the node needs no kernel (a view) */
    int n_bind;
    zcg_binding bind[ZCG_MAX_BIND];
    zcg_affine groups[3];
    bool int_dot; /* calls the zdot4 markers (glsl/idot.glsl): compile with zvk_glsl_opts.int_dot */
    /* A kernel dispatched just before this one for the same node, or NULL:
     * same bindings (one descriptor set), its scratch bindings the same
     * buffers as this kernel's (the int8-x multi-row GEMV's quantizing pass). */
    const struct zcg_kernel *pre;
} zcg_kernel;

/* The kernel for top-level node n. Unsupported nodes are ZE_UNSUPPORTED
 * naming the node and why. */
zstatus zcg_node(const zir_graph *g, const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *out,
                 zdiag *d);

/* Per-family generators, called by zcg_node (backend/cg_*.c). */
zstatus zcg_matmul_family(const zir_graph *g, const zir_node *n, const zcg_opts *o, zarena *a,
                          zcg_kernel *out, zdiag *d);
zstatus zcg_misc(const zir_graph *g, const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *out,
                 zdiag *d);
zstatus zcg_moe(const zir_graph *g, const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *out,
                zdiag *d);
/* The ops of a Qwen3.5 delta-net layer (backend/cg_recur.c): silu, sigmoid,
 * softplus, l2_norm, slice, ssm_conv and delta_net; zcg_misc calls it. */
zstatus zcg_recurrent(const zir_graph *g, const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *out,
                      zdiag *d);
/* The chunk of tokens delta_net's prefill kernel solves at once for head
 * dimension D (by o's most tokens a step and shared memory), or 0: the
 * token-by-token kernel (cg_recur.c says why). */
int64_t zcg_delta_chunk(const zcg_opts *o, int64_t D);
zstatus zcg_attention(const zir_graph *g, const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *out,
                      zdiag *d);

/* The top-k selection over the logits of a step's last row (the batch
 * schedule: of each row, into a record of its own), appended to each
 * schedule by the lowering (backend/cg_topk.c). */
zstatus zcg_topk(const zir_graph *g, const zcg_opts *o, zarena *a, zcg_kernel *out, zdiag *d);

/* The load schedule's rewrite of weight w into the weight-layout pass's
 * q6_K planes, in place (backend/glsl/q6_planes.glsl; cg_misc.c). */
zstatus zcg_q6_planes(const zir_value *w, const zcg_opts *o, zarena *a, zcg_kernel *out, zdiag *d);
/* What RoPE node n needs from rope_lib.glsl: defines appended to defs at
 * *nd (D, NR, NPAIR, NEOX and the angle tables U1..U3); cg_misc.c. */
zstatus zcg_rope_defs(const zir_node *n, int64_t D, zarena *a, const char **defs, int *nd, zdiag *d);

/* The text of backend/glsl/<name>.glsl, embedded at build time; NULL if absent. */
const char *zcg_glsl(const char *name);

/* Builds a kernel source: the common prologue (version, extensions, the step
 * buffer), the given "#define NAME VALUE" lines (defs is a NULL-terminated
 * list of alternating names and values), then the named library and template
 * files in order (NULL-terminated). */
const char *zcg_compose(zarena *a, const char *const *defs, const char *const *files, const zcg_opts *o);

/* Helpers for templates: "#define" values. */
const char *zcg_i64(zarena *a, int64_t v);
const char *zcg_f32(zarena *a, float v); /* exact: hexadecimal-free decimal with 9 digits */

/* Measuring knobs (ZINC_ATTN_SPLIT=68, ZINC_CM_PIPE=1...): the value of
 * environment variable name when it is set within [lo, hi], else dflt; and
 * whether a switch is set to "0" (ZINC_ATTN_CM=0: the other kernel). */
int64_t zcg_knob(const char *name, int64_t lo, int64_t hi, int64_t dflt);
bool zcg_knob_off(const char *name);

#endif
