#include "naive.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hp {
    const char *arch;
    uint32_t L, E, F, H, Hkv, D, V, nrot;
    uint32_t X, XU, XF; /* experts, experts used, expert width (0: a dense MLP) */
    float eps, base;
    int neox, qknorm, bias;
} hp;

typedef struct mat {
    double *w;
    int64_t rows, cols;
} mat;

/* Whole tensor, dequantized; rows = ne[1] * ne[2] (1 for vectors), cols =
 * ne[0]: expert e of a stacked tensor is rows e * ne[1] ..< (e + 1) * ne[1]. */
static mat load(const gguf_file *f, const char *name) {
    mat m = {0};
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) return m;
    m.cols = t->ne[0];
    m.rows = t->n_dims > 1 ? t->ne[1] * (t->n_dims > 2 ? t->ne[2] : 1) : 1;
    float *tmp = malloc(sizeof(float) * (size_t)m.cols);
    m.w = malloc(sizeof(double) * (size_t)(m.rows * m.cols));
    uint64_t rb = t->nbytes / (uint64_t)m.rows;
    for (int64_t r = 0; r < m.rows; r++) {
        ztype_dequant_row(t->type, t->data + (uint64_t)r * rb, tmp, m.cols);
        for (int64_t c = 0; c < m.cols; c++)
            m.w[r * m.cols + c] = tmp[c];
    }
    free(tmp);
    return m;
}

static mat blk(const gguf_file *f, int l, const char *s) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", l, s);
    return load(f, name);
}

/* y[rows] = W x */
static void matvec(const mat *m, const double *x, double *y) {
    for (int64_t r = 0; r < m->rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < m->cols; c++)
            s += m->w[r * m->cols + c] * x[c];
        y[r] = s;
    }
}

static void rmsnorm(const double *x, const mat *w, int64_t n, float eps, double *y) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * r * w->w[i];
}

static void rope(double *x, int pos, const hp *h) {
    for (uint32_t i = 0; i < h->nrot / 2; i++) {
        double ang = pos * pow(h->base, -2.0 * i / h->nrot);
        uint32_t a = h->neox ? i : 2 * i, b = h->neox ? i + h->nrot / 2 : 2 * i + 1;
        double x0 = x[a], x1 = x[b];
        x[a] = x0 * cos(ang) - x1 * sin(ang);
        x[b] = x0 * sin(ang) + x1 * cos(ang);
    }
}

/* qwen3moe's expert keys; 0 (a dense MLP) where absent. */
static void read_experts(const gguf_file *f, hp *h) {
    const char *keys[3] = {"expert_count", "expert_used_count", "expert_feed_forward_length"};
    uint32_t *dst[3] = {&h->X, &h->XU, &h->XF};
    for (int i = 0; i < 3; i++) {
        char k[96];
        snprintf(k, sizeof k, "%s.%s", h->arch, keys[i]);
        if (gguf_get_u32(f, k, dst[i], NULL)) *dst[i] = 0;
    }
}

static int read_hp(const gguf_file *f, hp *h, char *err, size_t errsz) {
    char k[96];
    if (gguf_get_str(f, "general.architecture", &h->arch, NULL)) return snprintf(err, errsz, "no arch"), -1;
#define U(field, key, def)                                                                                   \
    snprintf(k, sizeof k, "%s." key, h->arch);                                                               \
    if (gguf_get_u32(f, k, &h->field, NULL)) h->field = def;
    U(L, "block_count", 0)
    U(E, "embedding_length", 0)
    U(F, "feed_forward_length", 0) U(H, "attention.head_count", 0) U(Hkv, "attention.head_count_kv", h->H)
        U(D, "attention.key_length", h->E / h->H) U(nrot, "rope.dimension_count", h->D)
#undef U
            snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", h->arch);
    if (gguf_get_f32(f, k, &h->eps, NULL)) h->eps = 1e-6f;
    snprintf(k, sizeof k, "%s.rope.freq_base", h->arch);
    if (gguf_get_f32(f, k, &h->base, NULL)) h->base = 10000.0f;
    h->V = (uint32_t)gguf_find_tensor(f, "token_embd.weight")->ne[1];
    h->neox = strcmp(h->arch, "llama") != 0;
    h->qknorm = !strcmp(h->arch, "qwen3") || !strcmp(h->arch, "qwen3moe");
    h->bias = !strcmp(h->arch, "qwen2");
    read_experts(f, h);
    return 0;
}

/* The attention sub-block of one layer over the whole sequence, in place on x[n][E]. */
static void attention(const gguf_file *f, const hp *h, int l, double *x, int n) {
    mat an = blk(f, l, "attn_norm.weight"), wq = blk(f, l, "attn_q.weight"), wk = blk(f, l, "attn_k.weight"),
        wv = blk(f, l, "attn_v.weight"), wo = blk(f, l, "attn_output.weight");
    mat bq = blk(f, l, "attn_q.bias"), bk = blk(f, l, "attn_k.bias"), bv = blk(f, l, "attn_v.bias");
    mat qn = blk(f, l, "attn_q_norm.weight"), kn = blk(f, l, "attn_k_norm.weight");
    uint32_t E = h->E, D = h->D, QD = h->H * D, KD = h->Hkv * D;
    double *q = calloc((size_t)n * QD, 8), *k = calloc((size_t)n * KD, 8), *v = calloc((size_t)n * KD, 8);
    double *hn = calloc(E, 8), *o = calloc(QD, 8), *y = calloc(E, 8), *sc = calloc((size_t)n, 8);
    for (int t = 0; t < n; t++) {
        rmsnorm(x + (size_t)t * E, &an, E, h->eps, hn);
        matvec(&wq, hn, q + (size_t)t * QD);
        matvec(&wk, hn, k + (size_t)t * KD);
        matvec(&wv, hn, v + (size_t)t * KD);
        for (uint32_t i = 0; h->bias && i < QD; i++)
            q[(size_t)t * QD + i] += bq.w[i];
        for (uint32_t i = 0; h->bias && i < KD; i++)
            k[(size_t)t * KD + i] += bk.w[i], v[(size_t)t * KD + i] += bv.w[i];
        for (uint32_t hh = 0; hh < h->H; hh++) {
            double *qh = q + (size_t)t * QD + hh * D;
            if (h->qknorm) rmsnorm(qh, &qn, D, h->eps, qh);
            rope(qh, t, h);
        }
        for (uint32_t hh = 0; hh < h->Hkv; hh++) {
            double *kh = k + (size_t)t * KD + hh * D;
            if (h->qknorm) rmsnorm(kh, &kn, D, h->eps, kh);
            rope(kh, t, h);
        }
    }
    for (int t = 0; t < n; t++) {
        for (uint32_t hh = 0; hh < h->H; hh++) {
            uint32_t g = hh / (h->H / h->Hkv);
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j <= t; j++) {
                double s = 0;
                for (uint32_t e = 0; e < D; e++)
                    s += q[(size_t)t * QD + hh * D + e] * k[(size_t)j * KD + g * D + e];
                sc[j] = s / sqrt((double)D);
                if (sc[j] > mx) mx = sc[j];
            }
            for (int j = 0; j <= t; j++)
                sum += (sc[j] = exp(sc[j] - mx));
            for (uint32_t e = 0; e < D; e++) {
                double acc = 0;
                for (int j = 0; j <= t; j++)
                    acc += sc[j] / sum * v[(size_t)j * KD + g * D + e];
                o[hh * D + e] = acc;
            }
        }
        matvec(&wo, o, y);
        for (uint32_t i = 0; i < E; i++)
            x[(size_t)t * E + i] += y[i];
    }
    mat all[] = {an, wq, wk, wv, wo, bq, bk, bv, qn, kn};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i].w);
    free(q), free(k), free(v), free(hn), free(o), free(y), free(sc);
}

static void mlp(const gguf_file *f, const hp *h, int l, double *x, int n) {
    mat fn = blk(f, l, "ffn_norm.weight"), wg = blk(f, l, "ffn_gate.weight"), wu = blk(f, l, "ffn_up.weight"),
        wd = blk(f, l, "ffn_down.weight");
    double *hn = calloc(h->E, 8), *g = calloc(h->F, 8), *u = calloc(h->F, 8), *y = calloc(h->E, 8);
    for (int t = 0; t < n; t++) {
        double *xt = x + (size_t)t * h->E;
        rmsnorm(xt, &fn, h->E, h->eps, hn);
        matvec(&wg, hn, g);
        matvec(&wu, hn, u);
        for (uint32_t i = 0; i < h->F; i++)
            g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
        matvec(&wd, g, y);
        for (uint32_t i = 0; i < h->E; i++)
            xt[i] += y[i];
    }
    free(fn.w), free(wg.w), free(wu.w), free(wd.w), free(hn), free(g), free(u), free(y);
}

/* y = W x for the rows of expert e of a stacked tensor. */
static void matvec_expert(const mat *m, int64_t e, int64_t rows, const double *x, double *y) {
    mat sub = {m->w + e * rows * m->cols, rows, m->cols};
    matvec(&sub, x, y);
}

/* The MoE MLP as Qwen3-MoE defines it: softmax over the router logits, the
 * XU most probable experts, their probabilities divided by their sum, and
 * the weighted sum of those experts' SwiGLU MLPs. */
static void moe(const gguf_file *f, const hp *h, int l, double *x, int n) {
    mat fn = blk(f, l, "ffn_norm.weight"), wr = blk(f, l, "ffn_gate_inp.weight"),
        wg = blk(f, l, "ffn_gate_exps.weight"), wu = blk(f, l, "ffn_up_exps.weight"),
        wd = blk(f, l, "ffn_down_exps.weight");
    double *hn = calloc(h->E, 8), *p = calloc(h->X, 8), *g = calloc(h->XF, 8), *u = calloc(h->XF, 8),
           *y = calloc(h->E, 8), *acc = calloc(h->E, 8);
    for (int t = 0; t < n; t++) {
        double *xt = x + (size_t)t * h->E, mx = -INFINITY, sum = 0, wsum = 0;
        rmsnorm(xt, &fn, h->E, h->eps, hn);
        matvec(&wr, hn, p);
        for (uint32_t e = 0; e < h->X; e++)
            mx = p[e] > mx ? p[e] : mx;
        for (uint32_t e = 0; e < h->X; e++)
            sum += (p[e] = exp(p[e] - mx));
        int chosen[64];
        for (uint32_t k = 0; k < h->XU; k++) {
            int best = -1;
            for (uint32_t e = 0; e < h->X; e++)
                if (p[e] >= 0 && (best < 0 || p[e] > p[best])) best = (int)e;
            chosen[k] = best;
            wsum += p[best];
            p[best] = -p[best] - 1; /* taken; -(p + 1) keeps the value */
        }
        memset(acc, 0, 8 * (size_t)h->E);
        for (uint32_t k = 0; k < h->XU; k++) {
            int e = chosen[k];
            double w = (-p[e] - 1) / wsum;
            matvec_expert(&wg, e, h->XF, hn, g);
            matvec_expert(&wu, e, h->XF, hn, u);
            for (uint32_t i = 0; i < h->XF; i++)
                g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
            matvec_expert(&wd, e, h->E, g, y);
            for (uint32_t i = 0; i < h->E; i++)
                acc[i] += w * y[i];
        }
        for (uint32_t i = 0; i < h->E; i++)
            xt[i] += acc[i];
    }
    mat all[] = {fn, wr, wg, wu, wd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i].w);
    free(hn), free(p), free(g), free(u), free(y), free(acc);
}

int naive_forward(const gguf_file *f, const int32_t *tokens, int n, double *logits, char *err, size_t errsz) {
    hp h = {0};
    if (read_hp(f, &h, err, errsz)) return -1;
    if (h.XU > 64) return snprintf(err, errsz, "naive: %u experts used: at most 64", h.XU), -1;
    mat emb = load(f, "token_embd.weight"), on = load(f, "output_norm.weight"),
        out = load(f, "output.weight");
    if (!out.w) out = emb;
    double *x = calloc((size_t)n * h.E, 8), *hn = calloc(h.E, 8);
    for (int t = 0; t < n; t++)
        memcpy(x + (size_t)t * h.E, emb.w + (size_t)tokens[t] * h.E, 8 * (size_t)h.E);
    for (uint32_t l = 0; l < h.L; l++) {
        attention(f, &h, (int)l, x, n);
        if (h.X)
            moe(f, &h, (int)l, x, n);
        else
            mlp(f, &h, (int)l, x, n);
    }
    for (int t = 0; t < n; t++) {
        rmsnorm(x + (size_t)t * h.E, &on, h.E, h.eps, hn);
        matvec(&out, hn, logits + (size_t)t * h.V);
    }
    if (out.w != emb.w) free(out.w);
    free(emb.w), free(on.w), free(x), free(hn);
    return 0;
}
