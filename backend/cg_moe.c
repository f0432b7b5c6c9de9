/* Mixture-of-experts kernels (ZK_MOE ops and the fuse-moe templates):
 *
 *   moe_topk       the router's softmax, top-k and renormalization, a subgroup per token
 *   moe_route      the route's pairs sorted by expert (a workgroup per expert), for
 *                  the grouped GEMMs
 *   moe_gemv       the chosen experts' rows of a stacked weight: a plain matmul_id,
 *                  gate+up+SwiGLU (ZKT_MOE_GATE_UP), or the down projection with the
 *                  weighted expert sum and the residual add (ZKT_MOE_DOWN)
 *   moe_gemm       prefill (a kernel node with a token tile above 1, fuse-moe's
 *                  grouped option): a GEMM per expert over its run of moe_route's
 *                  sorted pairs, gate+up+SwiGLU or the down rows alone (moe_sum
 *                  and the residual add follow as nodes)
 *   moe_sum        the weighted expert sum, alone or with the residual add
 *                  (ZKT_MOE_SUM, after the grouped GEMMs)
 *
 * Decode reads only the selected experts' rows, a GEMV per (token, slot);
 * the grouped GEMMs read each used expert's tile once per tile of its
 * tokens (docs/performance.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_build.h"

enum {
    TOPK_NSG = 4,      /* tokens (subgroups) per workgroup */
    TOPK_MAX_NP = 16,  /* p values a lane keeps in registers; those past recompute them */
    TOPK_MAX_E = 1024, /* the id and weight arrays are sized by topk <= E */
    SUM_WG = 256,
    ROUTE_WG = 256,
    GEMV_NSG = 4, /* subgroups per workgroup */
    MAX_GRID_Y = 65535,
};

static zstatus refuse(const zir_node *n, const char *why, zdiag *d) {
    return zdiag_set(d, ZE_UNSUPPORTED, "codegen: %s '%s': %s",
                     n->op == ZOP_KERNEL ? zir_ktemplate_name(n->kp.tmpl) : zir_ops[n->op].name, n->out->name,
                     why);
}

/* v is f32 [T, a] (b < 0) or [T, a, b]. */
static bool act_shape(const zir_value *v, int64_t a, int64_t b) {
    int rank = b < 0 ? 2 : 3;
    return v->rank == rank && v->dtype == ZT_F32 && v->shape[0] == ZDIM_T && v->shape[1] == a &&
           (rank == 2 || v->shape[2] == b);
}

/* moe_topk_lib.glsl's defines: E, TOPK and NP from the target's subgroup
 * size (returned). */
static int topk_defs(zcg_builder *b, int64_t E, int64_t U) {
    zcg_def_i(b, "E", E);
    zcg_def_i(b, "TOPK", U);
    int sg = b->o->target->subgroup > 0 ? b->o->target->subgroup : 32;
    int64_t np = (E + sg - 1) / sg;
    zcg_def_i(b, "NP", np < TOPK_MAX_NP ? np : TOPK_MAX_NP);
    return sg;
}

/* The router's top-k (moe_topk.glsl), a subgroup per token: its lanes
 * share the E experts, keeping their p in registers, and reduce the max,
 * the sum and each round's pick across the subgroup. A thread per token
 * cost 123 us for 4 layers of 128 experts on the H200 in decode (one thread
 * walking all experts TOPK + 2 times, as slow as attention); a subgroup
 * divides that serial walk by its size. TOPK_NSG tokens a workgroup; NP
 * from the target's subgroup size, the shader reading the device's. */
static zstatus gen_topk(const zir_node *n, zcg_builder *b, zdiag *d) {
    const zir_value *l = n->in[0];
    int64_t E = l->rank == 2 ? l->shape[1] : 0, U = n->attr.topk;
    if (!act_shape(l, E, -1) || E < 1 || E > TOPK_MAX_E || U < 1 || U > E || !act_shape(n->out, U, 2))
        return refuse(n, "expected f32 router logits [T, E] with E <= 1024 and 1 <= topk <= E", d);
    zcg_bind(b, "B_LOGITS", l, false, 0);
    zcg_bind(b, NULL, n->out, true, 0);
    int sg = topk_defs(b, E, U);
    zcg_def_i(b, "WG", TOPK_NSG * sg);
    zcg_def_i(b, "TPW", TOPK_NSG);
    b->k->groups[0] = (zcg_affine){1, 0, TOPK_NSG};
    b->k->groups[1] = b->k->groups[2] = (zcg_affine){0, 1, 1};
    snprintf(b->k->name, sizeof b->k->name, "moe_topk_e%lld_k%lld", (long long)E, (long long)U);
    static const char *const files[] = {"moe_topk_lib", "moe_topk", NULL};
    return zcg_build(b, files, n, d);
}

/* The experts of the stacked weights that read route v (a moe_route's
 * output): a matmul_id's, top-level or in a kernel body; 0 if none. */
static int64_t experts_reading(const zir_graph *g, const zir_value *v) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        int nb = n->op == ZOP_KERNEL ? n->n_body : 1;
        for (int j = 0; j < nb; j++) {
            const zir_node *x = n->op == ZOP_KERNEL ? n->body[j] : n;
            if (zir_ops[x->op].kind == ZK_MOE && (zir_ops[x->op].flags & ZF_W1) && x->in[2] == v)
                return x->in[1]->shape[0];
        }
    }
    return 0;
}

static zstatus gen_route(const zir_graph *g, const zir_node *n, zcg_builder *b, zdiag *d) {
    const zir_value *r = n->in[0];
    int64_t U = r->rank == 3 ? r->shape[1] : 0, E = experts_reading(g, n->out);
    if (!act_shape(r, U, 2) || !act_shape(n->out, U, 4) || E < 1)
        return refuse(n, "expected an f32 [T, U, 2] route read by expert matmuls", d);
    zcg_bind(b, "B_IN", r, false, 0);
    zcg_bind(b, "B_OUT", n->out, true, 0);
    zcg_def_i(b, "E", E);
    zcg_def_i(b, "U", U);
    zcg_def_i(b, "WG", ROUTE_WG);
    b->k->groups[0] = (zcg_affine){0, E, 1};
    b->k->groups[1] = b->k->groups[2] = (zcg_affine){0, 1, 1};
    snprintf(b->k->name, sizeof b->k->name, "moe_route_e%lld_u%lld", (long long)E, (long long)U);
    static const char *const files[] = {"moe_route", NULL};
    return zcg_build(b, files, n, d);
}

/* moe_sum, alone or as a ZKT_MOE_SUM kernel with the residual add. */
static zstatus gen_sum(const zir_node *n, zcg_builder *b, zdiag *d) {
    const zir_node *sum = n->op == ZOP_KERNEL ? n->body[0] : n, *add = NULL;
    const zir_value *resid = NULL;
    if (n->op == ZOP_KERNEL) {
        add = n->n_body == 2 ? n->body[1] : NULL;
        if (!add || add->op != ZOP_ADD || sum->op != ZOP_MOE_SUM ||
            (add->in[0] != sum->out && add->in[1] != sum->out))
            return refuse(n, "expected moe_sum add, the add taking the sum", d);
        resid = add->in[0] == sum->out ? add->in[1] : add->in[0];
    }
    const zir_value *y = sum->in[0], *r = sum->in[1];
    int64_t U = y->rank == 3 ? y->shape[1] : 0, H = y->rank == 3 ? y->shape[2] : 0;
    if (!act_shape(y, U, H) || !act_shape(r, U, 2) || !act_shape(n->out, H, -1) ||
        (resid && !act_shape(resid, H, -1)))
        return refuse(
            n, "expected f32 [T, U, H] expert outputs, their [T, U, 2] route and a [T, H] residual", d);
    zcg_bind(b, NULL, y, false, 0);
    zcg_bind(b, NULL, r, false, 0);
    zcg_bind(b, NULL, n->out, true, 0);
    if (resid) zcg_bind(b, NULL, resid, false, 0);
    zcg_def_i(b, "ADD", resid != NULL);
    zcg_def_i(b, "H", H);
    zcg_def_i(b, "U", U);
    zcg_def_i(b, "WG", SUM_WG);
    b->k->groups[0] = (zcg_affine){0, H, SUM_WG};
    b->k->groups[1] = (zcg_affine){1, 0, 1};
    b->k->groups[2] = (zcg_affine){0, 1, 1};
    snprintf(b->k->name, sizeof b->k->name, "moe_sum_u%lld_h%lld%s", (long long)U, (long long)H,
             resid ? "+add" : "");
    static const char *const files[] = {"moe_sum", NULL};
    return zcg_build(b, files, n, d);
}

/* ---- the expert GEMV --------------------------------------------------------- */

/* What a GEMV node computes: a matmul_id, gate+up around a SwiGLU, or the
 * down projection with the weighted sum and the residual. */
typedef struct moe_match {
    const zir_node *first, *up, *glu, *sum, *add, *norm, *topk;
    const zir_value *x, *route, *resid;
    int64_t E, N, K, U;
} moe_match;

static bool is_matmul_id(const zir_node *n) {
    return n && zir_ops[n->op].kind == ZK_MOE && (zir_ops[n->op].flags & ZF_W1);
}

/* [moe_topk] [rms_norm] matmul_id matmul_id swiglu: the router's top-k
 * (fuse-topk) gives the route, the norm (fuse-norm's prologue) feeds both
 * expert matmuls. */
static zstatus match_gate_up(const zir_node *n, moe_match *m, zdiag *d) {
    int i = 0;
    if (i < n->n_body && n->body[i]->op == ZOP_MOE_TOPK) m->topk = n->body[i++];
    if (i < n->n_body && n->body[i]->op == ZOP_RMS_NORM) m->norm = n->body[i++];
    if (n->n_body - i != 3 || !(zir_ops[n->body[n->n_body - 1]->op].flags & ZF_GLU))
        return refuse(n, "expected [moe_topk] [rms_norm] matmul_id matmul_id swiglu", d);
    m->glu = n->body[n->n_body - 1];
    m->first = m->glu->in[0]->producer;
    m->up = m->glu->in[1]->producer;
    if (!is_matmul_id(m->first) || !is_matmul_id(m->up) || m->first->parent != n || m->up->parent != n ||
        m->first->in[0] != m->up->in[0] || m->first->in[2] != m->up->in[2])
        return refuse(n, "gate and up must be expert matmuls of one input and one route", d);
    const zir_value *g = m->first->in[1], *u = m->up->in[1];
    for (int i = 0; i < 3; i++)
        if (g->shape[i] != u->shape[i]) return refuse(n, "gate and up experts differ in shape", d);
    if (m->norm && (m->first->in[0] != m->norm->out || m->norm->in[1]->rank != 1 ||
                    m->norm->in[1]->shape[0] != g->shape[2]))
        return refuse(n, "the norm must feed the expert matmuls, over their K", d);
    if (m->topk && !m->topk->exported)
        return refuse(n, "a route ranked in the kernel must be exported to the down projection", d);
    if (m->topk && (m->first->in[2] != m->topk->out || m->topk->in[0]->rank != 2 ||
                    m->topk->in[0]->shape[1] != g->shape[0] || g->shape[0] > TOPK_MAX_E))
        return refuse(n, "the top-k must rank the experts' router logits (at most 1024) into the route", d);
    return ZOK;
}

/* matmul_id [moe_sum [add]]: the sum weighs the matmul's slots by its
 * route, and the add takes the sum and an f32 [T, N] residual. The grouped
 * form is the matmul_id alone. */
static zstatus match_down(const zir_node *n, moe_match *m, zdiag *d) {
    if (n->n_body < 1 || n->n_body > 3) return refuse(n, "expected matmul_id [moe_sum [add]]", d);
    m->first = n->body[0];
    if (n->n_body == 1) return is_matmul_id(m->first) ? ZOK : refuse(n, "expected matmul_id", d);
    m->sum = n->body[1];
    m->add = n->n_body == 3 ? n->body[2] : NULL;
    if (!is_matmul_id(m->first) || m->sum->n_in != 2 || zir_ops[m->sum->op].kind != ZK_MOE ||
        m->sum->in[0] != m->first->out || m->sum->in[1] != m->first->in[2])
        return refuse(n, "the sum must weigh the expert matmul's rows by its route", d);
    if (!m->add) return ZOK;
    int k = m->add->in[0] == m->sum->out ? 0 : m->add->in[1] == m->sum->out ? 1 : -1;
    if (m->add->op != ZOP_ADD || k < 0) return refuse(n, "the add must take the sum", d);
    m->resid = m->add->in[1 - k];
    return ZOK;
}

static zstatus match(const zir_node *n, moe_match *m, zdiag *d) {
    memset(m, 0, sizeof *m);
    zstatus s = ZOK;
    if (n->op != ZOP_KERNEL)
        m->first = n;
    else
        s = n->kp.tmpl == ZKT_MOE_GATE_UP ? match_gate_up(n, m, d) : match_down(n, m, d);
    if (s) return s;
    const zir_value *w = m->first->in[1];
    m->x = m->norm ? m->norm->in[0] : m->first->in[0];
    m->route = m->first->in[2];
    if (w->rank != 3) return refuse(n, "the experts must be stacked [E, N, K]", d);
    m->E = w->shape[0], m->N = w->shape[1], m->K = w->shape[2], m->U = m->route->shape[1];
    if (!(act_shape(m->route, m->U, 2) || act_shape(m->route, m->U, 4)) ||
        !(act_shape(m->x, m->K, -1) || act_shape(m->x, m->U, m->K)))
        return refuse(n, "expected f32 activations [T, K] or [T, U, K] and a [T, U, 2] or [T, U, 4] route",
                      d);
    if (m->sum && m->x->rank != 3) return refuse(n, "a summed projection reads one row per slot", d);
    if (m->sum && m->route->shape[2] != 2) return refuse(n, "the weighted sum reads moe_topk's route", d);
    if (m->resid && !act_shape(m->resid, m->N, -1)) return refuse(n, "the residual must be f32 [T, N]", d);
    return ZOK;
}

static zstatus gemv_bindings(const zir_node *n, const moe_match *m, zcg_builder *b, zdiag *d) {
    zcg_bind(b, "B_X", m->x, false, 0);
    /* a route the kernel ranks itself is written for the down projection */
    zcg_bind(b, "B_ROUTE", m->route, m->topk != NULL, 0);
    if (m->topk) zcg_bind(b, "B_LOGITS", m->topk->in[0], false, 0);
    zstatus s = zcg_weight(b, n, "W0", m->first->in[1], m->K, d);
    if (!s && m->glu) s = zcg_weight(b, n, "W1", m->up->in[1], m->K, d);
    if (!s && m->norm) s = zcg_weight(b, n, "NW", m->norm->in[1], m->K, d);
    if (s) return s;
    if (m->resid) zcg_bind(b, "B_R", m->resid, false, 0);
    zcg_bind(b, "B_Y", n->out, true, 0);
    const int64_t v[] = {
        m->N,           m->K, m->E, m->U, m->sum != NULL, m->glu != NULL, m->x->rank == 3, m->resid ? 1 : 0,
        m->norm != NULL};
    const char *const names[] = {"N", "K", "E", "U", "SUM", "GLU", "X3", "ADD_MODE", "HAS_NORM"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        zcg_def_i(b, names[i], v[i]);
    if (m->norm) zcg_def_f(b, "NORM_EPS", m->norm->attr.eps);
    zcg_def_i(b, "TOPK_IN", m->topk != NULL);
    if (m->topk) topk_defs(b, m->E, m->U);
    /* the route's floats a pair: 2, or 4 for moe_route's (no weights) */
    zcg_def_i(b, "ROUTE_FL", m->route->shape[2]);
    return ZOK;
}

/* The decode GEMV's group layout for the experts' type (matmul_gemv.glsl's
 * GMODE): q4_K 12, q6_K 14 (gate and up of one type), else 8-element groups. */
static int expert_gmode(const moe_match *m) {
    ztype t = m->first->in[1]->dtype;
    if (m->glu && m->up->in[1]->dtype != t) return 0;
    return t == ZT_Q4_K ? 12 : t == ZT_Q6_K ? 14 : 0;
}

/* The expert GEMV is the decode GEMV (matmul_gemv.glsl) with MOE set: its
 * q4_K / q6_K group loads (16-byte quads, scales decoded once a group), RS
 * rows a subgroup sharing each x load, x staged in shared memory where it
 * fits. Run 44 measured the kernel it replaces (one subgroup a row, 8-element
 * groups through DQ8, the slots of the summed down projection one after the
 * other) at 720 GB/s for gate+up and 241-309 for the down projection,
 * 2-4x the cost model's price. RS as the dense GEMV's default picks it from
 * the rows the grid holds (N x U pairs, or N for the sum), four subgroups;
 * ZINC_MOE_GEMV_LAYOUT=rs,nsg replaces it, to measure others. */
static zstatus gen_gemv(const zir_node *n, zcg_builder *b, zdiag *d) {
    moe_match m;
    zstatus s = match(n, &m, d);
    if (!s) s = gemv_bindings(n, &m, b, d);
    if (s) return s;
    int64_t rows_y = m.sum ? 1 : m.U, maxt = b->o->max_tokens > 0 ? b->o->max_tokens : 1;
    if (maxt * rows_y > MAX_GRID_Y) return refuse(n, "more than 65535 (token, expert) pairs in a step", d);
    if (m.K % 8) return refuse(n, "the experts' K must be a multiple of 8", d);
    const ztarget *t = b->o->target;
    int sg = t->subgroup > 0 ? t->subgroup : 32;
    int64_t cu = t->n_cu > 0 ? t->n_cu : 1, rows = m.N * rows_y;
    int rs = rows >= 32 * cu ? 4 : rows >= 8 * cu ? 2 : 1, nsg = GEMV_NSG;
    const char *env = getenv("ZINC_MOE_GEMV_LAYOUT");
    int ers = 0, ensg = 0;
    if (env && sscanf(env, "%d,%d", &ers, &ensg) == 2 && ers >= 1 && ers <= 8 && ensg >= 1 && ensg * sg <= 1024)
        rs = ers, nsg = ensg;
    int mode = expert_gmode(&m);
    int64_t runlen = mode == 12 ? 16 : 8, xrows = m.sum ? m.U : 1,
            budget = t->smem_bytes > 0 ? t->smem_bytes : 16384;
    /* K floats, the run sums and (with the norm) attn_reduce's slot a thread */
    bool xsh =
        (m.K % runlen) == 0 && 4 * (xrows * m.K + xrows * m.K / runlen + (m.norm ? nsg * sg : 0)) <= budget;
    zcg_def_i(b, "MOE", m.sum ? 2 : 1);
    zcg_def_i(b, "GMODE", mode);
    zcg_def_i(b, "X_SHARED", xsh);
    zcg_def_i(b, "SWZ_SHIFT", mode == 12 ? 4 : 5);
    zcg_def_i(b, "SWZ_MASK", mode == 12 ? 3 : mode == 14 ? 1 : 0);
    /* ZINC_MOE_GEMV_UNROLL=n: n groups a lane a trip, their loads in flight
     * together (1, the dense GEMV's measured best, until the H200 says;
     * a single token's expert GEMVs hold fewer subgroups a compute unit
     * to hide the loads than a dense GEMV's many rows) */
    int64_t unroll = zcg_knob("ZINC_MOE_GEMV_UNROLL", 1, 8, 1);
    zcg_def_i(b, "UNROLL", unroll);
    zcg_def_i(b, "RS", rs);
    zcg_def_i(b, "WG", nsg * sg);
    zcg_def_i(b, "ROWS_WG", nsg * rs);
    b->k->groups[0] = (zcg_affine){0, m.N, nsg * rs};
    b->k->groups[1] = (zcg_affine){rows_y, 0, 1};
    b->k->groups[2] = (zcg_affine){0, 1, 1};
    snprintf(b->k->name, sizeof b->k->name, "moe_gemv%s_%s_e%lld_n%lld_k%lld_u%lld_r%dg%d%s%s%s%s%s%s",
             m.glu ? "_gateup" : "", ztype_name(m.first->in[1]->dtype), (long long)m.E, (long long)m.N,
             (long long)m.K, (long long)m.U, rs, nsg, unroll > 1 ? zarena_printf(b->a, "x%lld", (long long)unroll) : "",
             xsh ? "_xs" : "", m.topk ? "+topk" : "",
             m.norm ? "+norm" : "", m.sum ? "+sum" : "", m.resid ? "+add" : "");
    /* attn_reduce: the staged norm's workgroup sum; moe_topk_lib: the
     * route ranked in the prologue */
    const char *files[8] = {"dequant", "matmul_io"};
    int nf = 2;
    if (m.norm && xsh) files[nf++] = "attn_reduce";
    if (m.topk) files[nf++] = "moe_topk_lib";
    files[nf++] = "gemv_groups";
    files[nf++] = "gemv_segs";
    files[nf++] = "matmul_gemv";
    return zcg_build(b, files, n, d);
}

/* Shared memory of a grouped tile: matmul_gemm.glsl's x and weight tiles,
 * the experts' first ranks and the tile's pair ids. */
static uint32_t grouped_smem(int64_t bm, int64_t E) {
    return 4u * (uint32_t)(GEMM_BK * (bm + 1) + GEMM_BK * (GEMM_BN + 1) + E + 1 + bm);
}

/* The grouped GEMM on the matrix units: matmul_cm.glsl with MOE, its tile
 * over BM of one expert's sorted pairs (moe_tiles.glsl), x rows gathered
 * and the expert's weight rows, fp16 operands as the mm-f16 pass marked
 * them. The dense GEMM's layout, with BM the kernel's token tile (16 or 32
 * pairs in one or two rows of subgroups, else 64) and the tile's expert
 * starts and pair ids beside it in shared memory. */
static zstatus gen_grouped_cm(const zir_node *n, const moe_match *m, const zcg_cm *c, zcg_builder *b,
                              zdiag *d) {
    zcg_def_cm(b, c);
    zcg_def_i(b, "MOE", 1);
    b->k->groups[0] = (zcg_affine){0, m->N, m->glu ? c->bn / 2 : c->bn};
    b->k->groups[1] = (zcg_affine){m->U, m->E * (c->bm - 1), c->bm};
    b->k->groups[2] = (zcg_affine){0, 1, 1};
    snprintf(b->k->name, sizeof b->k->name, "moe_gemm%s_%s_e%lld_n%lld_k%lld_u%lld%s", m->glu ? "_gateup" : "",
             ztype_name(m->first->in[1]->dtype), (long long)m->E, (long long)m->N, (long long)m->K,
             (long long)m->U, zcg_cm_suffix(b, c));
    static const char *const files[] = {"dequant", "matmul_io", "moe_tiles", "matmul_cm", NULL};
    return zcg_build(b, files, n, d);
}

/* Prefill's grouped GEMM (moe_gemm.glsl): BM pairs of one expert x 64
 * weight rows (32 gate + 32 up rows with GLU) a workgroup. BM is the
 * kernel's token tile (16, 32 or 64), halved while the tiles overflow
 * shared memory. An expert's last tile is partial (its rows computed on
 * zeros): Qwen3-30B-A3B's 512-token step gives an expert 32 pairs on
 * average, half a 64-pair tile. ZINC_MOE_TILE=16, 32 or 64 forces BM, to
 * measure the trade between those rows and re-reading the weights. */
static zstatus gen_grouped(const zir_node *n, zcg_builder *b, zdiag *d) {
    moe_match m;
    zstatus s = match(n, &m, d);
    if (!s && m.sum) return refuse(n, "a grouped GEMM writes the products; the sum is a node of its own", d);
    if (!s && m.route->shape[2] != 4)
        return refuse(n, "a grouped GEMM reads moe_route's sorted [T, U, 4] route", d);
    if (!s) s = gemv_bindings(n, &m, b, d);
    if (s) return s;
    const ztarget *t = b->o->target;
    int64_t tile = zcg_knob("ZINC_MOE_TILE", 16, 64, n->kp.token_tile);
    int64_t bm = tile <= 16 ? 16 : tile <= 32 ? 32 : 64;
    while (bm > 16 && grouped_smem(bm, m.E) > t->smem_bytes)
        bm /= 2;
    if (grouped_smem(bm, m.E) > t->smem_bytes)
        return refuse(n, "a 16-pair grouped tile does not fit the target's shared memory", d);
    int64_t maxt = b->o->max_tokens > 0 ? b->o->max_tokens : 1;
    if ((maxt * m.U + m.E * (bm - 1)) / bm > MAX_GRID_Y)
        return refuse(n, "more than 65535 tiles in a step", d);
    bool f16 = m.first->attr.mm_f16 && (!m.glu || m.up->attr.mm_f16);
    /* The matrix units where the target has them: run 54 (H100) passed
     * test_kernels_moe with them (KHR and NV) and took the 12-layer A3B's
     * prefill step from 48.4 to 15.7 ms (pp512 10400 -> 31700, llama.cpp's
     * 31948). ZINC_MOE_CM=0 keeps the scalar tiles, which round as the
     * matrix units would (docs/performance.md, session 21). */
    if (f16 && !m.norm && zcg_knob("ZINC_MOE_CM", 0, 1, 1)) {
        uint32_t extra = 4u * (uint32_t)(m.E + 1 + bm);
        zcg_cm c = zcg_cm_default(b, m.glu != NULL, m.K, false, extra);
        c.bm = (int)bm, c.sgm = bm >= 32 ? 2 : 1, c.wg = 0, c.mfirst = 0;
        if (zcg_cm_usable(b, &c, m.glu != NULL, m.K, extra)) return gen_grouped_cm(n, &m, &c, b, d);
    }
    if (f16) zcg_def_s(b, "MM_F16", "1");
    zcg_def_gemm_tile(b, bm);
    b->k->groups[0] = (zcg_affine){0, m.N, m.glu ? GEMM_BN / 2 : GEMM_BN};
    b->k->groups[1] = (zcg_affine){m.U, m.E * (bm - 1), bm};
    b->k->groups[2] = (zcg_affine){0, 1, 1};
    snprintf(b->k->name, sizeof b->k->name, "moe_gemm%s_%s_e%lld_n%lld_k%lld_u%lld_t%lld",
             m.glu ? "_gateup" : "", ztype_name(m.first->in[1]->dtype), (long long)m.E, (long long)m.N,
             (long long)m.K, (long long)m.U, (long long)bm);
    static const char *const files[] = {"dequant", "matmul_io", "gemm_tile", "moe_tiles", "moe_gemm", NULL};
    return zcg_build(b, files, n, d);
}

zstatus zcg_moe(const zir_graph *g, const zir_node *n, const zcg_opts *o, zarena *a, zcg_kernel *out,
                zdiag *d) {
    memset(out, 0, sizeof *out);
    if (!o || !o->target) return zdiag_set(d, ZE_INVALID, "codegen: '%s': no target", n->out->name);
    zcg_builder b = {.g = g, .a = a, .o = o, .k = out};
    if (n->op == ZOP_KERNEL && n->kp.tmpl == ZKT_MOE_SUM) return gen_sum(n, &b, d);
    if (n->op == ZOP_KERNEL && n->kp.token_tile > 1) return gen_grouped(n, &b, d);
    if (n->op == ZOP_MOE_ROUTE) return gen_route(g, n, &b, d);
    if (n->op == ZOP_KERNEL || is_matmul_id(n)) return gen_gemv(n, &b, d);
    if (n->n_in == 1) return gen_topk(n, &b, d);
    return gen_sum(n, &b, d);
}
