/* The pass manager and what every pass sees.
 *
 * A pass is one file in passes/ and one row in passes/passes.def:
 *     zstatus zpass_<name>(zir_graph *g, const zpass_opts *o, zdiag *d);
 * Analyses annotate the graph (value widths, ...); transforms rewrite it
 * (fusion). Transforms that choose between alternatives ask the cost model
 * (passes/cost.h) and record each decision, with its reason, in o->report.
 *
 * The same model is compiled twice, once per phase: prefill (token tiles of
 * o->token_tile) and decode (one token). Passes read o->phase. */
#ifndef ZINC_PASS_H
#define ZINC_PASS_H

#include <stdbool.h>
#include <stdio.h>

#include "../ir/ir.h"

typedef enum zpass_phase { ZPH_PREFILL, ZPH_DECODE, ZPH_COUNT } zpass_phase;
const char *zpass_phase_name(zpass_phase p);

/* A compilation target as the cost model sees it. Named profiles live in
 * passes/target.c; the live Vulkan device can fill one too. */
typedef struct ztarget {
    const char *name;
    int subgroup;          /* threads per subgroup (wave) */
    uint32_t smem_bytes;   /* shared memory (LDS) per workgroup */
    uint32_t regs_per_sm;  /* 32-bit registers per SM/CU (occupancy estimates) */
    int n_cu;              /* compute units / SMs: workgroups needed to fill the device */
    double bandwidth_gbs;  /* DRAM bandwidth, GB/s, read + write */
    double dispatch_us;    /* cost of one dispatch plus its barrier, microseconds */
    /* A dispatch that needs no barrier before it (it reads nothing the one
     * before it writes) overlaps its neighbour: what it adds, measured;
     * 0: unmeasured, priced as dispatch_us. */
    double concurrent_dispatch_us;
    int prefill_tile;      /* default tokens per prefill workgroup tile */
    double fuse_threshold; /* default: bytes per token per layer a fusion must save */
    bool coopmat;          /* cooperative matrix available */
    /* Workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2) with
     * fp16 operands and fp32 sums: the workgroup size they need (0: none),
     * the granularity of their M, N and K, and the shared memory the driver
     * keeps for them. Filled from the live device only. */
    uint32_t coopmat_wg, coopmat_wg_m, coopmat_wg_n, coopmat_wg_k, coopmat_wg_smem;
    bool int_dot;          /* packed 4x8-bit integer dot products (shaderIntegerDotProduct) */
    /* Decode GEMVs take int8 x by default (the mm-f16 pass, attr.gemv_q8):
     * the packed dot products are accelerated and the GEMVs were measured
     * bound by their arithmetic there, not their bytes (docs/performance.md). */
    bool gemv_int8;
    /* The same for the batch schedule's multi-row GEMVs: false on the h200,
     * where each workgroup quantizing all the step's rows of x made them
     * slower than fp32 x (run 31, docs/performance.md). */
    bool batch_gemv_int8;
    /* The batch schedule's matmuls are multi-row GEMVs up to this many rows
     * (--parallel), GEMMs beyond: the GEMV's step grows with its rows, the
     * GEMMs' tiles do not (measured; 0: ZCOST_GEMVN_ROWS, the kernel's limit). */
    int batch_gemv_rows;
    /* The batch schedule's multi-row GEMVs go on the matrix units (fp16
     * operands, fp32 sums: matmul_gemvn_cm.glsl) in plans of at least this
     * many rows (--parallel), where coopmat is there: the mm-f16 pass marks
     * their matmuls attr.mm_f16 instead of int8 x. The kernel's time hardly
     * depends on the step's rows, so it pays at full batches and costs at
     * one row (measured). 0: never; ZINC_BATCH_CM=1/0 overrides it. */
    int batch_gemv_cm_rows;
    /* Where A's 16 x 16 fp16 fragments are in mma's quads (lane l: rows
     * l / 4 and + 8, columns 2 (l % 4) + {0, 1} and + 8), the element bits
     * that move 8 right and 8 down (zvk_fragmap_a_quads); 0: unknown, and
     * no kernel that writes fragment elements itself (PERM_K, FRAG_A) is
     * compiled. The live device's are probed (zvk_target_from_device). */
    int frag_right, frag_down;
    /* Where B's 16 x 8 fp16 fragments are in quads (lane l: rows l / 4 and
     * + 8, columns 2 (l % 4) + {0, 1}): 1 where element bit 0 is the
     * column pair and bit 1 the 8 below, 2 the other way round
     * (zvk_fragmap_b_quads); 0 unknown, and no kernel builds B fragments
     * itself (matmul_gemvn_cm.glsl's X_REG). Probed with A's. */
    int frag_b;
    /* Prefill GEMMs of Q4_K weights (and Q6_K planes) with K permuted
     * (matmul_cmp.glsl: each lane decodes its A fragments from the bytes it
     * loaded; no weight tile in shared memory), where frag_right is known:
     * 0 never, 1 decoding in fp16 (past the fp16 tolerance for Q4_K, run
     * 67: a measurement), 2 in fp32. Measured; ZINC_CM_PERM overrides. */
    int cm_perm;
    int act_bytes;         /* bytes per element of activations kept in VRAM (2: fp16) */
    /* Decode streams the weights once per token; how fast depends on the
     * kernel's shape, so each family has its measured fraction of
     * bandwidth_gbs (docs/performance.md): the GEMV (many workgroups, rows
     * streamed whole) and the split MLP (one workgroup per slice of the
     * intermediate, down read in short column strips). 0 reads as 1. */
    double gemv_eff, mlp_split_eff;
    /* Decode attention (attn_decode.glsl), as `zinc bench --profile` prices
     * it: a fixed chain of dependent steps a call plus one for each query
     * head a workgroup holds (microseconds), and its K and V rows at this
     * fraction of bandwidth_gbs (0 reads as 1). Measured; 0 where not. */
    double attn_chain_us, attn_q_us, attn_eff;
    /* Prefill's tensor-core GEMM (matmul_cm.glsl: 64 tokens x 64 rows a
     * workgroup, K in steps of 64) as a latency floor: the time of one K
     * step of a wave of tiles, microseconds. A matmul of few rows leaves
     * the device idle and takes waves x K steps x this (run 51: the 9B's
     * N 32 projections, 8 tiles, 64 steps in ~64 us; its N 1024 ones, 128
     * tiles in one wave, 68 us). 0: not measured. */
    double cm_step_us;
    /* The multi-row GEMV (matmul_gemvn.glsl, 16 token rows a workgroup) as
     * measured throughput, TFLOP/s (run 34: the 8B's batch step at 16 rows,
     * 697.9 tok/s, 16 rows x 16.4 GFLOP in 22.9 ms). With cm_step_us it
     * lets the cost model send prefill matmuls of few rows to the GEMV
     * (zcost_prefill_gemv). 0: not measured. */
    double gemvn_tflops;
} ztarget;

/* Returns the named profile (llvmpipe, h200, rdna4, generic) or NULL. */
const ztarget *ztarget_find(const char *name);
/* "llvmpipe, h200, rdna4, generic" */
const char *ztarget_names(void);

/* One fusion decision, for the report. Bytes are per token per layer. */
typedef struct zpass_decision {
    int layer;       /* 0-based; -1 outside layers */
    zir_group group; /* mlp, attn, ... */
    zpass_phase phase;
    const char *what; /* the intermediate in question, e.g. "l0.act" */
    double width;     /* its width relative to the hidden size */
    double crossings_before, crossings_after;
    double bytes_before, bytes_after; /* wide-intermediate VRAM traffic */
    double extra_bytes;               /* what fusion costs instead: weight re-reads, partial sums */
    bool fused;
    zir_ktemplate chosen;
    char reason[320]; /* the arithmetic behind the decision */
} zpass_decision;

typedef struct zpass_report {
    zarena *arena;
    zpass_decision *items;
    int n, cap;
} zpass_report;

zpass_decision *zpass_report_add(zpass_report *r);

/* The KV cache's storage: the target's choice, or --kv-type's. */
typedef enum zpass_kv { ZKV_TARGET, ZKV_F32, ZKV_F16 } zpass_kv;
/* Prefill matmul operands (the mm-f16 pass): the target's choice (fp16
 * where it has matrix units), or --matmul's. */
typedef enum zpass_mm { ZMM_TARGET, ZMM_F32, ZMM_F16 } zpass_mm;
/* Decode GEMVs over q4_K and q6_K with x quantized to int8 and integer dot
 * products (the mm-f16 pass, attr.gemv_q8): the target's choice
 * (ztarget.gemv_int8), or --gemv-x's (on where the target has integer dot
 * products at all). */
typedef enum zpass_idot { ZIDOT_TARGET, ZIDOT_OFF, ZIDOT_ON } zpass_idot;

typedef struct zpass_opts {
    const ztarget *target;
    zpass_phase phase;
    int token_tile;          /* prefill tile; decode uses 1 */
    int64_t ctx;             /* context length the analyses assume for attention */
    double fuse_threshold;   /* bytes per token per layer */
    bool verify_each;        /* run the verifier after every pass */
    const char *print_after; /* comma-separated pass names, or "all" */
    FILE *print_to;
    zpass_report *report; /* decisions are appended here (may be NULL) */
    zpass_kv kv_type;     /* KV-cache storage (the kv-type pass) */
    zpass_mm mm_type;     /* prefill matmul operands (the mm-f16 pass) */
    zpass_idot gemv_idot; /* decode GEMV x in int8 (the mm-f16 pass) */
    /* > 0: the graph of the batch schedule (zincc --parallel N), at most
     * this many rows a step, each a token of its own sequence: prefill's
     * phase, steps of batch_rows tokens. Where its matmuls are multi-row
     * GEMVs (zcost_batch_gemv), the passes take decode's GEMV decisions:
     * q, k and v as one GEMV over their rows (fuse-qkv), the norms in the
     * GEMVs' prologues (fuse-norm), int8 x (mm-f16); beyond, prefill's. */
    int64_t batch_rows;
    /* Prefill: the most tokens in one step (zincc --chunk, the plan's
     * prefill max_tokens); 0: 512, zincc's default. The multi-row GEMV's
     * decision prices a step of this many tokens (zcost_prefill_tokens). */
    int64_t step_tokens;
} zpass_opts;

/* Shared memory the integer-dot GEMV stages x in, for K columns and wg
 * threads: int8 x, a run sum per 8 elements (q6_K; q4_K needs half), a d
 * per 32, the norm's slots. */
#define ZPASS_IDOT_SMEM(K, wg) ((K) + 4 * ((K) / 8) + 4 * ((K) / 32) + 4 * (wg))
typedef zstatus (*zpass_fn)(zir_graph *g, const zpass_opts *o, zdiag *d);

typedef enum zpass_type { ZPK_ANALYSIS, ZPK_TRANSFORM } zpass_type;

typedef struct zpass_info {
    const char *name;
    zpass_fn run;
    zpass_type kind;
    bool in_default; /* part of the default pipeline */
    const char *summary;
} zpass_info;

#define ZPASS(name, fn, kind, def, summary) zstatus fn(zir_graph *g, const zpass_opts *o, zdiag *d);
#include "passes.def"
#undef ZPASS

const zpass_info *zpass_find(const char *name);
int zpass_count(void);
const zpass_info *zpass_at(int i);

/* The default pipeline as a comma-separated list. */
const char *zpass_default_pipeline(void);

/* Runs one pass with the manager's checks (--verify-each, --print-after).
 * Out-of-tree passes (examples/) run through this too. */
zstatus zpass_run_one(zir_graph *g, const zpass_info *p, const zpass_opts *o, zdiag *d);

/* Runs the comma-separated pipeline, minus the comma-separated `disabled`
 * names, on g. Unknown names are ZE_INVALID naming the pass. */
zstatus zpass_run_pipeline(zir_graph *g, const char *pipeline, const char *disabled, const zpass_opts *o,
                           zdiag *d);

#endif
