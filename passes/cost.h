/* The fusion cost model. For one group (an MLP, an attention block) in one
 * phase it prices each way of partitioning the group into kernels, in bytes
 * of DRAM traffic per token per layer:
 *
 *   total = act + weight + partial + dispatch
 *   act      wide intermediates crossing VRAM: crossings x width x bytes
 *   weight   weight bytes read per token: weights / tokens sharing a read
 *   partial  partial sums written and read back when work is split
 *   dispatch dispatch + barrier time, as the bytes the device could have
 *            moved meanwhile, per token of the step
 *
 * and says whether the option fits on chip at all. A fusion pass takes the
 * cheapest feasible option whose saving over the staged one passes the
 * threshold; docs/cost-model.md derives each term. */
#ifndef ZINC_COST_H
#define ZINC_COST_H

#include "pass.h"

typedef struct zcost_option {
    zir_ktemplate tmpl; /* ZKT_NONE: the staged baseline */
    bool feasible;
    int token_tile; /* tokens per workgroup */
    int split;      /* workgroups sharing one token's reduction */
    int dispatches;
    int concurrent;   /* of those, the ones with no barrier before them (ztarget.concurrent_dispatch_us) */
    double crossings; /* of the wide intermediate, per token */
    double act, weight, partial, dispatch, total;
    char note[200]; /* why infeasible, or what the option assumes */
} zcost_option;

enum { ZCOST_MLP_OPTIONS = 3, ZCOST_ATTN_OPTIONS = 2 };

typedef struct zcost_mlp {
    int64_t hidden, ff;
    double w_gate, w_up, w_down; /* bytes as stored */
} zcost_mlp;

/* opt[0] staged (4 dispatches), opt[1] gate+up+SwiGLU, opt[2] the full MLP. */
void zcost_price_mlp(const zpass_opts *o, const zcost_mlp *m, zcost_option opt[ZCOST_MLP_OPTIONS]);

enum { ZCOST_MOE_OPTIONS = 3 };

typedef struct zcost_moe {
    int64_t hidden, ff, experts, used; /* ff: one expert's width */
    double w_gate, w_up, w_down;       /* the stacked experts' bytes as stored */
} zcost_moe;

/* Bytes per token of the chosen experts' weights: used / experts of the
 * stacks (each (token, slot) reads its expert's rows; no tile shares them). */
double zcost_moe_weight(const zcost_moe *m);

/* Bytes per token of the grouped GEMMs' weights in a step of `tokens`
 * tokens with `tile` pairs of an expert per workgroup: each expert the step
 * uses (expected, with uniform routing) reads its rows once per tile of its
 * pairs. One token: the GEMVs' bytes. */
double zcost_moe_grouped_weight(const zcost_moe *m, int64_t tokens, int tile);

/* opt[0] staged (gate, up, SwiGLU, down, sum, add: 6 dispatches),
 * opt[1] moe_gate_up then moe_down (down + weighted sum + residual), GEMVs,
 * opt[2] grouped GEMMs: the pairs sorted by expert (moe_route), moe_gate_up
 * and the down rows per expert tile, then moe_sum with the add (4 dispatches).
 * ZINC_MOE_GROUPED=0 makes opt[2] infeasible, to measure the GEMVs. */
void zcost_price_moe(const zpass_opts *o, const zcost_moe *m, zcost_option opt[ZCOST_MOE_OPTIONS]);

typedef struct zcost_attn {
    int64_t heads, kv_heads, head_dim, ctx;
} zcost_attn;

/* opt[0] staged (scores, softmax, mix), opt[1] fused attention. */
void zcost_price_attn(const zpass_opts *o, const zcost_attn *a, zcost_option opt[ZCOST_ATTN_OPTIONS]);

enum { ZCOST_ROWS_OPTIONS = 2 };

typedef struct zcost_rows {
    int64_t hidden;    /* K: the normed row's width */
    int segments;      /* matmuls reading that row */
    double w_bytes;    /* their weights, as stored */
    double norm_bytes; /* the norm's weight */
} zcost_rows;

/* opt[0] a GEMV per matmul, each reading x and computing the norm in its
 * prologue (fuse-norm's split), opt[1] one GEMV over the concatenated rows:
 * x and the norm weight read once, one dispatch. */
void zcost_price_rows(const zpass_opts *o, const zcost_rows *r, zcost_option opt[ZCOST_ROWS_OPTIONS]);

/* The batch schedule's matmuls (zincc --parallel N, at most N rows a step):
 * the token rows of a multi-row GEMV workgroup (backend/glsl/matmul_gemvn.glsl),
 * or 0 for the GEMMs. Fills why (if not NULL) with the reason. */
enum { ZCOST_GEMVN_ROWS = 16 };
int zcost_batch_gemv(const ztarget *t, int64_t rows, char *why, size_t whysz);
/* The batch schedule's multi-row GEMV layout (matmul_gemvn.glsl) for a
 * kernel of N rows (each matrix's; all segments' for a rows GEMV) over K:
 * weight rows a subgroup (*rs) and subgroups a workgroup (*nsg). Fills why
 * (if not NULL) with the reason. */
void zcost_batch_gemv_layout(const ztarget *t, int64_t N, int64_t K, bool glu, char *why, size_t whysz, int *rs,
                             int *nsg);
/* Whether o compiles the batch schedule's graph (o->batch_rows) and its
 * matmuls are multi-row GEMVs: then the passes take decode's GEMV
 * decisions (fuse-qkv, the norm prologue, int8 x). */
bool zcost_gemv_batch(const zpass_opts *o);

/* A prefill matmul of N rows over K, in steps of T tokens: the token rows
 * of a multi-row GEMV workgroup (ZCOST_GEMVN_ROWS) where the target's
 * measurements (ztarget.cm_step_us, gemvn_tflops) price it under the
 * tensor-core GEMM's latency floor, else 0 (the GEMM's tiles). Fills why
 * (if not NULL) with the arithmetic. ZINC_PREFILL_GEMV=0 keeps the GEMMs,
 * =1 takes the GEMV on any target, to measure the difference. */
int zcost_prefill_gemv(const ztarget *t, int64_t N, int64_t K, int64_t T, char *why, size_t whysz);
/* The T that decision prices: the batch step's rows, or the prefill
 * chunk (zpass_opts.step_tokens; 512 where not given). */
int64_t zcost_prefill_tokens(const zpass_opts *o);

/* Index of the option to take: the cheapest feasible one, unless it saves
 * less than the threshold over opt[0]. Fills why with the arithmetic. */
int zcost_choose(const zpass_opts *o, const zcost_option *opt, int n, char *why, size_t whysz);

/* Records the choice a pass priced at node `at` about value v: the
 * crossings and wide-intermediate bytes of opt[0] (staged) and opt[pick].
 * The caller writes the reason. NULL when there is no report. */
zpass_decision *zcost_record(const zpass_opts *o, const zir_node *at, const zir_value *v,
                             const zcost_option *opt, int pick);

/* Tokens that share one dispatch in this phase (prefill step, or 1). */
int64_t zcost_step_tokens(const zpass_opts *o);
/* What a dispatch with no barrier before it costs on t, microseconds
 * (ztarget.concurrent_dispatch_us, else dispatch_us where unmeasured). */
double zcost_concurrent_dispatch_us(const ztarget *t);
int zcost_token_tile(const zpass_opts *o);

#endif
