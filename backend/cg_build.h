/* A kernel under construction, shared by the generators that bind weights
 * (cg_matmul.c, cg_moe.c): the #define list, the bindings (each value bound
 * once) and the weight checks every dequantizing kernel makes. */
#ifndef ZINC_CG_BUILD_H
#define ZINC_CG_BUILD_H

#include "codegen.h"

/* A rows GEMV of four segments with their epilogues and int8 x takes 54. */
enum { ZCG_MAX_DEFS = 64 };

typedef struct zcg_builder {
    const zir_graph *g;
    zarena *a;
    const zcg_opts *o;
    zcg_kernel *k;
    const char *defs[2 * ZCG_MAX_DEFS + 1];
    int nd;
    bool too_many_bindings; /* a binding past ZCG_MAX_BIND was asked for */
} zcg_builder;

/* "#define name val", an integer, and a float literal GLSL reads as float. */
void zcg_def_s(zcg_builder *b, const char *name, const char *val);
void zcg_def_i(zcg_builder *b, const char *name, int64_t v);
void zcg_def_f(zcg_builder *b, const char *name, float v);

/* Binds v (once: a value bound twice reuses its binding) and defines its
 * binding number under macro (may be NULL). NULL v: a scratch binding of
 * `bytes`. Returns the binding number. */
int zcg_bind(zcg_builder *b, const char *macro, const zir_value *v, bool written, uint64_t bytes);

/* Checks weight w (rows of k elements: [k], [rows, k] or [experts, rows, k])
 * and defines <slot>_TYPE, <slot>_ROWB and the binding B_<slot>. */
zstatus zcg_weight(zcg_builder *b, const zir_node *n, const char *slot, const zir_value *w, int64_t k,
                   zdiag *d);

/* The scalar GEMM's tile (matmul_gemm.glsl, and moe_gemm.glsl over an
 * expert's run of tokens): GEMM_BN weight rows, GEMM_BK of the contraction a
 * step (a Q8_0 block, a Q4_K sub-block), GEMM_TN rows a thread. */
enum { GEMM_BN = 64, GEMM_BK = 32, GEMM_TN = 4, GEMM_WG = 256 };

/* Workgroups that fill the target: ZCG_FILL_DEEP a compute unit. A kernel
 * whose workgroups are each a chain of dependent steps (the delta scan,
 * prefill's multi-row GEMV) hides a lane's latencies only behind the other
 * subgroups of its compute unit; one workgroup of 4 subgroups a unit (one a
 * scheduler) left the 9B's scan at 490 us a layer where 4 gave 363 (the
 * H100, docs/performance.md, session 20). Layouts that choose between more
 * and fewer workgroups take the fewest that reach this. */
enum { ZCG_FILL_DEEP = 3 };
int64_t zcg_fill_workgroups(const zcg_opts *o);

/* Defines BM (tokens or pairs a tile), BN, BK, TM, TN and WG for that tile. */
void zcg_def_gemm_tile(zcg_builder *b, int64_t bm);

/* The tensor-core GEMM's layout (matmul_cm.glsl): a BM x BN tile, BK per
 * step, SGM x SGN subgroups of ZCG_CM_SG. cg_matmul.c's dense GEMMs and
 * cg_moe.c's grouped expert GEMMs (MOE) share it. */
enum { ZCG_CM_SG = 32 };
typedef struct zcg_cm {
    int bm, bn, bk, sgm, sgn;
    int pipe; /* 0: one step prefetched in registers, 1: direct, 2: double-buffered shared tiles,
                 3: 2 with sgp producer subgroups that stage while the others multiply */
    int sgp;  /* producer subgroups (pipe 3) */
    int wch;  /* a staging thread's chunk of a weight row: 16 or 32 elements */
    int ablate; /* ZINC_CM_ABLATE (matmul_cm.glsl): 0, or a measurement with wrong results */
    int mfirst; /* token tiles on the grid's first axis (ZINC_CM_MFIRST) */
    int wg;     /* workgroup-scope matrices in a workgroup of this many invocations (0: subgroup scope) */
    int pad;    /* ZINC_CM_PAD: unused shared bytes, fewer workgroups a compute unit (a measurement) */
    int q6raw;  /* ZINC_CM_Q6RAW=1: Q6_K travels raw and is decoded as it is staged (a measurement) */
} zcg_cm;

/* The default layout for a GEMM over K (gate+up with glu; the logits of a
 * prefill step), its knobs applied; extra_smem is shared memory the kernel
 * declares beside the tiles. */
zcg_cm zcg_cm_default(const zcg_builder *b, bool glu, int64_t K, bool logits, uint32_t extra_smem);
/* Whether the target runs layout c (matrix units, subgroups of 32, K a
 * multiple of BK, the tiles and extra_smem in its shared memory). */
bool zcg_cm_usable(const zcg_builder *b, const zcg_cm *c, bool glu, int64_t K, uint32_t extra_smem);
/* Defines BM, BN, BK, SGM, SGN, SG, WG and the knobs' macros. */
void zcg_def_cm(zcg_builder *b, const zcg_cm *c);
/* The layout in a kernel's name: _cm<BM>x<BN>k<BK> and the knobs'. */
const char *zcg_cm_suffix(zcg_builder *b, const zcg_cm *c);

/* Composes the kernel's source from the defines and the files. */
zstatus zcg_build(zcg_builder *b, const char *const *files, const zir_node *n, zdiag *d);

#endif
