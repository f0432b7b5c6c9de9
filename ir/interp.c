/* The reference interpreter. Each op has a plain loop nest; there is no
 * blocking or threading, so that a reader can check it against the maths. */
#include "interp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct zir_interp {
    const zir_graph *g;
    zir_step step; /* the step being run (pos = its first position) */
    zir_step last; /* the last completed step, for zir_interp_value */
    float **buf;   /* per value: activation or KV-cache storage */
    bool *owned;   /* buf[i] was allocated for this step (not a view, not a cache) */
    float *row;    /* scratch for one dequantized weight row */
    int64_t row_cap;
};

zstatus zir_weight_row(const zir_value *w, int64_t r, float *dst, zdiag *d) {
    int64_t k = w->shape[w->rank - 1], rows = 1;
    for (int i = 0; i + 1 < w->rank; i++) /* stacked experts [E,N,K]: row e*N + n */
        rows *= w->shape[i];
    bool ok;
    uint64_t rb = ztype_row_bytes(w->dtype, (uint64_t)k, &ok);
    if (!ok || r < 0 || r >= rows || (uint64_t)(r + 1) * rb > w->nbytes)
        return zdiag_set(d, ZE_INTERNAL, "weight '%s': row %lld out of range", w->name, (long long)r);
    zstatus s = ztype_dequant_row(w->dtype, (const uint8_t *)w->data + (uint64_t)r * rb, dst, k);
    if (s) return zdiag_set(d, s, "weight '%s': cannot dequantize type %s", w->name, ztype_name(w->dtype));
    return ZOK;
}

zstatus zir_interp_new(const zir_graph *g, int64_t ctx, zir_interp **out, zdiag *d) {
    *out = NULL;
    if (ctx <= 0 || ctx > (1 << 24))
        return zdiag_set(d, ZE_INVALID, "context %lld: expected 1..16777216", (long long)ctx);
    zir_interp *it = calloc(1, sizeof *it);
    if (!it) return zdiag_set(d, ZE_NOMEM, "out of memory");
    it->g = g;
    it->step.ctx = ctx;
    it->buf = calloc(g->n_values, sizeof *it->buf);
    it->owned = calloc(g->n_values, sizeof *it->owned);
    int64_t maxk = 1;
    for (uint32_t i = 0; i < g->n_values; i++) {
        const zir_value *v = g->values[i];
        if (v->role == ZR_WEIGHT && v->shape[v->rank - 1] > maxk) maxk = v->shape[v->rank - 1];
        if (v->role != ZR_KV || !it->buf) continue;
        int64_t n = zir_value_elems(v, &it->step);
        if (!(it->buf[i] = calloc((size_t)n, sizeof(float)))) break;
    }
    it->row_cap = maxk;
    it->row = malloc(sizeof(float) * (size_t)maxk);
    for (uint32_t i = 0; i < g->n_values && it->row && it->buf; i++)
        if (g->values[i]->role == ZR_KV && !it->buf[i]) it->row = NULL; /* a cache failed to allocate */
    if (!it->buf || !it->owned || !it->row) {
        zir_interp_free(it);
        return zdiag_set(d, ZE_NOMEM, "out of memory for a KV cache of %lld positions", (long long)ctx);
    }
    *out = it;
    return ZOK;
}

static void release_step(zir_interp *it) {
    for (uint32_t i = 0; i < it->g->n_values; i++) {
        if (it->owned[i]) free(it->buf[i]);
        if (it->g->values[i]->role != ZR_KV) it->buf[i] = NULL;
        it->owned[i] = false;
    }
}

void zir_interp_free(zir_interp *it) {
    if (!it) return;
    if (it->buf && it->owned) release_step(it);
    for (uint32_t i = 0; it->buf && i < it->g->n_values; i++)
        free(it->buf[i]);
    free(it->buf);
    free(it->owned);
    free(it->row);
    free(it);
}

void zir_interp_reset(zir_interp *it) {
    it->step.pos = 0;
}
int64_t zir_interp_pos(const zir_interp *it) {
    return it->step.pos;
}

const float *zir_interp_value(const zir_interp *it, const zir_value *v, int64_t *n_elems) {
    if (v->role == ZR_WEIGHT || v->role == ZR_INPUT) return NULL;
    if (n_elems) *n_elems = zir_value_elems(v, v->role == ZR_KV ? &it->step : &it->last);
    return it->buf[v->id];
}

static float dot(const float *a, const float *b, int64_t n) {
    float acc[8] = {0};
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += a[k + j] * b[k + j];
    for (; k < n; k++)
        acc[0] += a[k] * b[k];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* ---- ops -------------------------------------------------------------- */

typedef struct ctx {
    zir_interp *it;
    const zir_node *n;
    const float *in[ZIR_MAX_IN];
    float *out;
    const int32_t *tokens;
    zdiag *d;
} ctx;

static int64_t dim(ctx *c, const zir_value *v, int i) {
    return zdim_eval(v->shape[i], &c->it->step);
}

static zstatus op_embed(ctx *c) {
    const zir_value *w = c->n->in[0];
    int64_t T = dim(c, c->n->out, 0), H = w->shape[1];
    for (int64_t t = 0; t < T; t++) {
        zstatus s = zir_weight_row(w, c->tokens[t], c->out + t * H, c->d);
        if (s) return s;
    }
    return ZOK;
}

static zstatus op_rms_norm(ctx *c) {
    const zir_value *x = c->n->in[0];
    int64_t n = x->shape[x->rank - 1], rows = zir_value_elems(x, &c->it->step) / n;
    const float *w = c->in[1];
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = c->in[0] + r * n;
        double ss = 0;
        for (int64_t i = 0; i < n; i++)
            ss += (double)xr[i] * xr[i];
        float scale = (float)(1.0 / sqrt(ss / (double)n + c->n->attr.eps));
        for (int64_t i = 0; i < n; i++)
            c->out[r * n + i] = xr[i] * scale * w[i];
    }
    return ZOK;
}

static void round_f16(float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        v[i] = zf16_to_f32(zf32_to_f16(v[i]));
}

void zir_quantize_q8(float *x, int64_t n) {
    for (int64_t b = 0; b + 32 <= n; b += 32) {
        float amax = 0;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[b + i]));
        float d = amax * ZIR_Q8_INV127, id = d > 0 ? 1.0f / d : 0.0f;
        for (int i = 0; i < 32; i++) {
            float q = nearbyintf(x[b + i] * id); /* the default rounding: to nearest, ties to even */
            x[b + i] = fminf(fmaxf(q, -127.0f), 127.0f) * d;
        }
    }
}

/* With attr.mm_f16 both operands are rounded to fp16 first; a product of
 * two halves is exact in fp32, so only the order of the sums differs from
 * the matrix units'. With attr.gemv_q8 each token's x is quantized as the
 * integer-dot GEMV quantizes it. */
static zstatus op_matmul(ctx *c) {
    const zir_value *w = c->n->in[1];
    int64_t T = dim(c, c->n->out, 0), N = w->shape[0], K = w->shape[1];
    bool f16 = c->n->attr.mm_f16, q8 = c->n->attr.gemv_q8;
    float *xh = NULL;
    if (f16 || q8) {
        if (!(xh = malloc(sizeof(float) * (size_t)(T * K))))
            return zdiag_set(c->d, ZE_NOMEM, "interpreter: out of memory for '%s'", c->n->out->name);
        memcpy(xh, c->in[0], sizeof(float) * (size_t)(T * K));
        if (f16) round_f16(xh, T * K);
        for (int64_t t = 0; q8 && t < T; t++)
            zir_quantize_q8(xh + t * K, K);
    }
    const float *x = xh ? xh : c->in[0];
    for (int64_t r = 0; r < N; r++) {
        zstatus s = zir_weight_row(w, r, c->it->row, c->d);
        if (s) {
            free(xh);
            return s;
        }
        if (f16) round_f16(c->it->row, K);
        for (int64_t t = 0; t < T; t++)
            c->out[t * N + r] = dot(x + t * K, c->it->row, K);
    }
    free(xh);
    return ZOK;
}

static zstatus op_binary(ctx *c) {
    int64_t n = zir_value_elems(c->n->out, &c->it->step), m = zir_value_elems(c->n->in[1], &c->it->step);
    const float *a = c->in[0], *b = c->in[1];
    for (int64_t i = 0; i < n; i++) {
        float y = b[i % m];
        if (c->n->op == ZOP_SWIGLU)
            c->out[i] = a[i] / (1.0f + expf(-a[i])) * y;
        else
            c->out[i] = a[i] + y;
    }
    return ZOK;
}

/* Whether pair j of an imrope rotates by the token's position: ggml's
 * ggml_mrope_cache_init gives sector j % sum(sections) the t, h or w
 * position (all the token's position for text) when it falls in the
 * interleaved t,h,w pattern, else the 4th position, 0 for text. */
static bool imrope_moves(const int *sc, int j) {
    int sector = j % (sc[0] + sc[1] + sc[2] + sc[3]);
    return (sector % 3 == 1 && sector < 3 * sc[1]) || (sector % 3 == 2 && sector < 3 * sc[2]) ||
           (sector % 3 == 0 && sector < 3 * sc[0]);
}

/* RoPE as ggml computes it: pair (i, i+1) in normal mode and (i, i+n_rot/2)
 * in NeoX and imrope modes rotate by pos * freq_scale * theta^(-i/n_rot) /
 * factor[i/2]; dimensions past n_rot pass through. */
static zstatus op_rope(ctx *c) {
    const zir_value *x = c->n->in[0];
    int64_t T = dim(c, x, 0), H = x->shape[1], D = x->shape[2];
    int nr = c->n->attr.rope.n_rot;
    zir_rope_mode mode = c->n->attr.rope.mode;
    bool neox = mode == ZROPE_NEOX || mode == ZROPE_IMROPE;
    memcpy(c->out, c->in[0], sizeof(float) * (size_t)(T * H * D));
    for (int64_t t = 0; t < T; t++) {
        for (int i = 0; i < nr; i += 2) {
            double p = (double)(c->it->step.pos + t);
            if (mode == ZROPE_IMROPE && !imrope_moves(c->n->attr.rope.sections, i / 2)) p = 0;
            double theta = p * c->n->attr.rope.freq_scale * pow(c->n->attr.rope.theta, -(double)i / nr);
            if (c->in[1]) theta /= c->in[1][i / 2];
            float cs = (float)cos(theta), sn = (float)sin(theta);
            int64_t i0 = neox ? i / 2 : i, i1 = neox ? i / 2 + nr / 2 : i + 1;
            for (int64_t h = 0; h < H; h++) {
                const float *src = c->in[0] + (t * H + h) * D;
                float *dst = c->out + (t * H + h) * D;
                dst[i0] = src[i0] * cs - src[i1] * sn;
                dst[i1] = src[i0] * sn + src[i1] * cs;
            }
        }
    }
    return ZOK;
}

static zstatus op_kv_store(ctx *c) {
    const zir_value *x = c->n->in[0];
    int64_t T = dim(c, x, 0), row = x->shape[1] * x->shape[2];
    float *cache = c->it->buf[c->n->in[1]->id], *at = cache + c->it->step.pos * row;
    memcpy(at, c->in[0], sizeof(float) * (size_t)(T * row));
    if (c->n->in[1]->dtype == ZT_F16) /* an f16 cache keeps what the device's would (kv-type) */
        for (int64_t i = 0; i < T * row; i++)
            at[i] = zf16_to_f32(zf32_to_f16(at[i]));
    c->out = cache; /* the output is a view of the cache's first P rows */
    return ZOK;
}

static zstatus op_attn_scores(ctx *c) {
    const zir_value *q = c->n->in[0], *k = c->n->in[1];
    int64_t T = dim(c, q, 0), H = q->shape[1], D = q->shape[2], P = dim(c, k, 0), Hkv = k->shape[1];
    for (int64_t h = 0; h < H; h++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t p = 0; p < P; p++)
                c->out[(h * T + t) * P + p] =
                    dot(c->in[0] + (t * H + h) * D, c->in[1] + (p * Hkv + h / (H / Hkv)) * D, D) *
                    c->n->attr.scale;
    return ZOK;
}

/* Query t sits at position pos + t and sees keys 0 ..= pos + t. */
static zstatus op_softmax_causal(ctx *c) {
    const zir_value *s = c->n->in[0];
    int64_t H = s->shape[0], T = dim(c, s, 1), P = dim(c, s, 2);
    for (int64_t h = 0; h < H; h++)
        for (int64_t t = 0; t < T; t++) {
            const float *x = c->in[0] + (h * T + t) * P;
            float *y = c->out + (h * T + t) * P;
            int64_t last = c->it->step.pos + t;
            float mx = -INFINITY;
            for (int64_t p = 0; p <= last; p++)
                mx = fmaxf(mx, x[p]);
            double sum = 0;
            for (int64_t p = 0; p <= last; p++)
                sum += (y[p] = expf(x[p] - mx));
            for (int64_t p = 0; p < P; p++)
                y[p] = p <= last ? (float)(y[p] / sum) : 0.0f;
        }
    return ZOK;
}

static zstatus op_attn_mix(ctx *c) {
    const zir_value *pr = c->n->in[0], *v = c->n->in[1];
    int64_t H = pr->shape[0], T = dim(c, pr, 1), P = dim(c, pr, 2), Hkv = v->shape[1], D = v->shape[2];
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            float *y = c->out + (t * H + h) * D;
            const float *p = c->in[0] + (h * T + t) * P;
            for (int64_t e = 0; e < D; e++)
                y[e] = 0;
            for (int64_t j = 0; j < P; j++) {
                const float *vr = c->in[1] + (j * Hkv + h / (H / Hkv)) * D;
                for (int64_t e = 0; e < D; e++)
                    y[e] += p[j] * vr[e];
            }
        }
    return ZOK;
}

/* Mixture of experts, as llama.cpp's build_moe_ffn computes it for
 * qwen3moe: p = softmax(logits) (max subtracted, the sum in double, as
 * ggml_soft_max), the topk largest p in descending order (lower id first on
 * a tie), their weights p / max(sum of the chosen p, 2^-14). */
static zstatus op_moe_topk(ctx *c) {
    const zir_value *x = c->n->in[0];
    int64_t T = dim(c, x, 0), E = x->shape[1], K = c->n->attr.topk;
    float *p = malloc(sizeof(float) * (size_t)E);
    if (!p) return zdiag_set(c->d, ZE_NOMEM, "interpreter: out of memory for '%s'", c->n->out->name);
    for (int64_t t = 0; t < T; t++) {
        const float *l = c->in[0] + t * E;
        float mx = -INFINITY;
        for (int64_t e = 0; e < E; e++)
            mx = fmaxf(mx, l[e]);
        double sum = 0;
        for (int64_t e = 0; e < E; e++)
            sum += (p[e] = expf(l[e] - mx));
        float *r = c->out + t * K * 2;
        double wsum = 0;
        for (int64_t k = 0; k < K; k++) {
            int64_t best = -1;
            for (int64_t e = 0; e < E; e++)
                if (p[e] >= 0 && (best < 0 || p[e] > p[best])) best = e;
            r[2 * k] = (float)best;
            r[2 * k + 1] = p[best] * (float)(1.0 / sum);
            wsum += r[2 * k + 1];
            p[best] = -1.0f; /* taken */
        }
        float div = fmaxf((float)wsum, 6.103515625e-5f);
        for (int64_t k = 0; k < K; k++)
            r[2 * k + 1] /= div;
    }
    free(p);
    return ZOK;
}

/* y[t,u] = x[t] (or x[t,u]) . w[e]^T, e = the route's u-th expert of token
 * t. Expert by expert, so that each weight row is dequantized once a step.
 * With attr.mm_f16 (a grouped GEMM on the matrix units) both operands are
 * rounded to fp16 first, as op_matmul does. */
static zstatus op_matmul_id(ctx *c) {
    const zir_value *x = c->n->in[0], *w = c->n->in[1];
    int64_t T = dim(c, x, 0), U = c->n->out->shape[1], E = w->shape[0], N = w->shape[1], K = w->shape[2];
    int64_t rs = c->n->in[2]->shape[2]; /* 2, or 4 for a sorted route */
    int64_t xn = (x->rank == 3 ? T * U : T) * K, *sel = malloc(sizeof(int64_t) * (size_t)(T * U)), n_sel;
    bool f16 = c->n->attr.mm_f16;
    float *xh = f16 ? malloc(sizeof(float) * (size_t)xn) : NULL;
    if (!sel || (f16 && !xh)) {
        free(sel), free(xh);
        return zdiag_set(c->d, ZE_NOMEM, "interpreter: out of memory for '%s'", c->n->out->name);
    }
    if (f16) {
        memcpy(xh, c->in[0], sizeof(float) * (size_t)xn);
        round_f16(xh, xn);
    }
    const float *xs = f16 ? xh : c->in[0];
    zstatus s = ZOK;
    for (int64_t e = 0; e < E && !s; e++) {
        n_sel = 0;
        for (int64_t tu = 0; tu < T * U; tu++)
            if ((int64_t)c->in[2][tu * rs] == e) sel[n_sel++] = tu;
        for (int64_t r = 0; r < N && n_sel && !s; r++) {
            if ((s = zir_weight_row(w, e * N + r, c->it->row, c->d))) break;
            if (f16) round_f16(c->it->row, K);
            for (int64_t i = 0; i < n_sel; i++) {
                const float *xr = xs + (x->rank == 3 ? sel[i] : sel[i] / U) * K;
                c->out[sel[i] * N + r] = dot(xr, c->it->row, K);
            }
        }
    }
    free(sel), free(xh);
    return s;
}

/* The route's pairs sorted by expert, then token, then slot (a counting
 * sort; stable): out[p] = (id, expert, token, slot) with id pair p's
 * expert (what matmul_id reads) and (expert, token, slot) the pair of rank
 * p. */
static zstatus op_moe_route(ctx *c) {
    const zir_value *r = c->n->in[0];
    int64_t T = dim(c, r, 0), U = r->shape[1], P = T * U, at = 0, most = 0;
    for (int64_t p = 0; p < P; p++) {
        c->out[p * 4] = c->in[0][p * 2];
        if ((int64_t)c->in[0][p * 2] > most) most = (int64_t)c->in[0][p * 2];
    }
    for (int64_t e = 0; e <= most; e++)
        for (int64_t p = 0; p < P; p++)
            if ((int64_t)c->in[0][p * 2] == e) {
                c->out[at * 4 + 1] = (float)e;
                c->out[at * 4 + 2] = (float)(p / U);
                c->out[at * 4 + 3] = (float)(p % U);
                at++;
            }
    return ZOK;
}

/* ggml's order: the weighted experts summed one after another. */
static zstatus op_moe_sum(ctx *c) {
    const zir_value *y = c->n->in[0];
    int64_t T = dim(c, y, 0), U = y->shape[1], H = y->shape[2];
    for (int64_t t = 0; t < T; t++) {
        float *o = c->out + t * H;
        for (int64_t u = 0; u < U; u++) {
            float wt = c->in[1][(t * U + u) * 2 + 1];
            const float *yr = c->in[0] + (t * U + u) * H;
            for (int64_t i = 0; i < H; i++)
                o[i] = u ? o[i] + yr[i] * wt : yr[i] * wt;
        }
    }
    return ZOK;
}

/* a * b with b aligned on a's trailing dimensions, each equal or 1. */
static zstatus op_mul(ctx *c) {
    const zir_value *a = c->n->in[0], *b = c->n->in[1];
    int64_t n = zir_value_elems(a, &c->it->step), ad[ZIR_MAX_RANK], bd[ZIR_MAX_RANK];
    int off = a->rank - b->rank;
    for (int i = 0; i < a->rank; i++) {
        ad[i] = dim(c, a, i);
        bd[i] = i < off ? 1 : dim(c, b, i - off);
    }
    for (int64_t e = 0; e < n; e++) {
        int64_t rest = e, bi = 0, stride = 1;
        for (int i = a->rank - 1; i >= 0; i--) {
            int64_t ix = rest % ad[i];
            rest /= ad[i];
            if (bd[i] != 1) bi += ix * stride;
            stride *= bd[i];
        }
        c->out[e] = c->in[0][e] * c->in[1][bi];
    }
    return ZOK;
}

/* silu, sigmoid and softplus, in ggml's float formulas. */
static zstatus op_unary(ctx *c) {
    int64_t n = zir_value_elems(c->n->out, &c->it->step);
    const float *x = c->in[0];
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        c->out[i] = c->n->op == ZOP_SILU      ? v / (1.0f + expf(-v))
                    : c->n->op == ZOP_SIGMOID ? 1.0f / (1.0f + expf(-v))
                    : v > 20.0f               ? v
                                              : logf(1.0f + expf(v));
    }
    return ZOK;
}

/* ggml_l2_norm: x / max(sqrt(sum x^2), eps), the sum in double. */
static zstatus op_l2_norm(ctx *c) {
    const zir_value *x = c->n->in[0];
    int64_t n = x->shape[x->rank - 1], rows = zir_value_elems(x, &c->it->step) / n;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = c->in[0] + r * n;
        double ss = 0;
        for (int64_t i = 0; i < n; i++)
            ss += (double)(xr[i] * xr[i]);
        float scale = 1.0f / fmaxf(sqrtf((float)ss), c->n->attr.eps);
        for (int64_t i = 0; i < n; i++)
            c->out[r * n + i] = xr[i] * scale;
    }
    return ZOK;
}

static zstatus op_slice(ctx *c) {
    const zir_value *x = c->n->in[0];
    int64_t n = x->shape[x->rank - 1], rows = zir_value_elems(x, &c->it->step) / n;
    int64_t off = c->n->attr.slice.off, len = c->n->attr.slice.len;
    for (int64_t r = 0; r < rows; r++)
        memcpy(c->out + r * len, c->in[0] + r * n + off, sizeof(float) * (size_t)len);
    return ZOK;
}

/* A recurrent state starts from zeros with each sequence (a step at
 * position 0) and is carried from step to step like the KV cache. */
static float *state_of(ctx *c, int input) {
    float *st = c->it->buf[c->n->in[input]->id];
    if (c->it->step.pos == 0)
        memset(st, 0, sizeof(float) * (size_t)zir_value_elems(c->n->in[input], &c->it->step));
    return st;
}

/* ggml_ssm_conv over concat(state, x): y[t,c] = sum_k win[t+k,c] w[c,k],
 * summed in float in k order; the state keeps the last K-1 rows. */
static zstatus op_ssm_conv(ctx *c) {
    const zir_value *x = c->n->in[0], *w = c->n->in[1];
    int64_t T = dim(c, x, 0), C = x->shape[1], K = w->shape[1];
    float *st = state_of(c, 2), *win = malloc(sizeof(float) * (size_t)((K - 1 + T) * C));
    if (!win) return zdiag_set(c->d, ZE_NOMEM, "interpreter: out of memory for '%s'", c->n->out->name);
    memcpy(win, st, sizeof(float) * (size_t)((K - 1) * C));
    memcpy(win + (K - 1) * C, c->in[0], sizeof(float) * (size_t)(T * C));
    for (int64_t ch = 0; ch < C; ch++) {
        zstatus s = zir_weight_row(w, ch, c->it->row, c->d);
        if (s) {
            free(win);
            return s;
        }
        for (int64_t t = 0; t < T; t++) {
            float sum = 0.0f;
            for (int64_t k = 0; k < K; k++)
                sum += win[(t + k) * C + ch] * c->it->row[k];
            c->out[t * C + ch] = sum;
        }
    }
    memcpy(st, win + T * C, sizeof(float) * (size_t)((K - 1) * C));
    free(win);
    return ZOK;
}

/* The gated delta rule, token by token as ggml's gated_delta_net computes
 * it. Per value head h (key head h % Hk), with the state M[j][i] (j over
 * values, i over keys): M *= exp(g); d[j] = (v[j] - M[j].k) * beta;
 * M[j][i] += k[i] d[j]; o[j] = M[j].q * scale. */
static zstatus op_delta_net(ctx *c) {
    const zir_value *q = c->n->in[0], *v = c->n->in[2];
    int64_t T = dim(c, q, 0), Hk = q->shape[1], D = q->shape[2], Hv = v->shape[1];
    float *st = state_of(c, 5), *delta = malloc(sizeof(float) * (size_t)D);
    if (!delta) return zdiag_set(c->d, ZE_NOMEM, "interpreter: out of memory for '%s'", c->n->out->name);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < Hv; h++) {
            float *M = st + h * D * D, decay = expf(c->in[3][t * Hv + h]), beta = c->in[4][t * Hv + h];
            const float *qh = c->in[0] + (t * Hk + h % Hk) * D, *kh = c->in[1] + (t * Hk + h % Hk) * D;
            const float *vh = c->in[2] + (t * Hv + h) * D;
            for (int64_t i = 0; i < D * D; i++)
                M[i] *= decay;
            for (int64_t j = 0; j < D; j++)
                delta[j] = (vh[j] - dot(M + j * D, kh, D)) * beta;
            for (int64_t j = 0; j < D; j++)
                for (int64_t i = 0; i < D; i++)
                    M[j * D + i] += kh[i] * delta[j];
            for (int64_t j = 0; j < D; j++)
                c->out[(t * Hv + h) * D + j] = dot(M + j * D, qh, D) * c->n->attr.scale;
        }
    free(delta);
    return ZOK;
}

typedef zstatus (*op_fn)(ctx *);

static op_fn op_table(zir_op op) {
    switch (op) {
    case ZOP_EMBED: return op_embed;
    case ZOP_RMS_NORM: return op_rms_norm;
    case ZOP_MATMUL: return op_matmul;
    case ZOP_ADD:
    case ZOP_SWIGLU: return op_binary;
    case ZOP_ROPE: return op_rope;
    case ZOP_KV_STORE: return op_kv_store;
    case ZOP_ATTN_SCORES: return op_attn_scores;
    case ZOP_SOFTMAX_CAUSAL: return op_softmax_causal;
    case ZOP_ATTN_MIX: return op_attn_mix;
    case ZOP_MOE_TOPK: return op_moe_topk;
    case ZOP_MATMUL_ID: return op_matmul_id;
    case ZOP_MOE_SUM: return op_moe_sum;
    case ZOP_MOE_ROUTE: return op_moe_route;
    case ZOP_MUL: return op_mul;
    case ZOP_SILU:
    case ZOP_SIGMOID:
    case ZOP_SOFTPLUS: return op_unary;
    case ZOP_L2_NORM: return op_l2_norm;
    case ZOP_SLICE: return op_slice;
    case ZOP_SSM_CONV: return op_ssm_conv;
    case ZOP_DELTA_NET: return op_delta_net;
    default: return NULL;
    }
}

/* Weights that an op reads whole (norm scales, biases, rope factors) are
 * dequantized into a step buffer like an activation. */
static zstatus load_small_weight(zir_interp *it, const zir_value *w, zdiag *d) {
    if (w->role != ZR_WEIGHT || w->rank != 1 || it->buf[w->id]) return ZOK;
    if (!(it->buf[w->id] = malloc(sizeof(float) * (size_t)w->shape[0])))
        return zdiag_set(d, ZE_NOMEM, "out of memory");
    it->owned[w->id] = true;
    return zir_weight_row(w, 0, it->buf[w->id], d);
}

static zstatus run_node(zir_interp *it, const zir_node *n, const int32_t *tokens, zdiag *d) {
    if (n->op == ZOP_KERNEL) { /* a fused kernel computes exactly its body */
        zstatus s = ZOK;
        for (int i = 0; i < n->n_body && !s; i++)
            s = run_node(it, n->body[i], tokens, d);
        return s;
    }
    ctx c = {it, n, {0}, NULL, tokens, d};
    for (int i = 0; i < n->n_in; i++) {
        if (!n->in[i]) continue;
        zstatus s = load_small_weight(it, n->in[i], d);
        if (s) return s;
        c.in[i] = it->buf[n->in[i]->id];
    }
    uint32_t o = n->out->id;
    if (zir_ops[n->op].flags & ZF_VIEW) {
        it->buf[o] = (float *)c.in[0];
        return ZOK;
    }
    op_fn fn = op_table(n->op);
    if (!fn)
        return zdiag_set(d, ZE_UNSUPPORTED, "interpreter: op '%s' is not implemented", zir_ops[n->op].name);
    if (n->op != ZOP_KV_STORE) {
        int64_t elems = zir_value_elems(n->out, &it->step);
        if (!(c.out = malloc(sizeof(float) * (size_t)(elems ? elems : 1))))
            return zdiag_set(d, ZE_NOMEM, "out of memory for '%s' (%lld floats)", n->out->name,
                             (long long)elems);
        it->owned[o] = true;
    }
    it->buf[o] = c.out;
    zstatus s = fn(&c);
    it->buf[o] = c.out;
    if (!s && n->out->store_f16) /* kept in fp16 on the device (mm-f16) */
        for (int64_t i = 0, e = zir_value_elems(n->out, &it->step); i < e; i++)
            c.out[i] = zf16_to_f32(zf32_to_f16(c.out[i]));
    return s;
}

zstatus zir_interp_step(zir_interp *it, const int32_t *tokens, int64_t n, float *logits, zdiag *d) {
    const zir_graph *g = it->g;
    if (n <= 0) return zdiag_set(d, ZE_INVALID, "a step needs at least one token");
    if (it->step.pos + n > it->step.ctx)
        return zdiag_set(d, ZE_INVALID,
                         "context full: %lld cached + %lld new tokens exceed the context of %lld",
                         (long long)it->step.pos, (long long)n, (long long)it->step.ctx);
    for (int64_t t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= g->hp.n_vocab)
            return zdiag_set(d, ZE_INVALID,
                             "token %d at index %lld: expected an id below the vocabulary size %d", tokens[t],
                             (long long)t, g->hp.n_vocab);
    release_step(it);
    it->step.T = n;
    zstatus s = ZOK;
    for (uint32_t i = 0; i < g->n_nodes && !s; i++)
        s = run_node(it, g->nodes[i], tokens, d);
    if (s) return s;
    if (logits) memcpy(logits, it->buf[g->logits->id], sizeof(float) * (size_t)(n * g->hp.n_vocab));
    it->last = it->step;
    it->step.pos += n;
    return ZOK;
}
