/* quantcheck: zincc's side of the llama.cpp checks of the quantized types
 * (compare.sh runs it next to the harness, which is ggml's side).
 *
 *   quantcheck random OUT.gguf
 *       one tensor per type zincc dequantizes (but f32), 64 rows of 4096
 *       random bytes' worth of values: 8192 blocks of 32 or 1024 of 256, so
 *       that every value of every field shows up (scales included:
 *       subnormal, negative, Inf and NaN halves).
 *   quantcheck sources OUT.gguf
 *       F32 tensors that are hard on a quantizer: normals, 10x smaller
 *       sub-blocks, outliers, zero and constant sub-blocks, one sign only,
 *       large values, values below the smallest half.
 *   quantcheck quantize SRC.gguf TYPE OUT.gguf
 *       every 2-D F32 tensor of SRC quantized by zincc (ztype_quantize_row)
 *       as TYPE; `harness SRC.gguf requant OUT.gguf` then redoes it with
 *       ggml's quantizer and compares the bytes.
 *   quantcheck dequant MODEL.gguf TWIN.gguf
 *       every tensor of MODEL dequantized by zincc (ztype_dequant_row, what
 *       the interpreter runs) against TWIN, the F32 copy ggml's to_float made
 *       (`harness MODEL.gguf dequant TWIN.gguf`): bit for bit, a NaN matching
 *       any NaN. One line per type; exits 1 on any difference.
 *
 * Exit status: 0 success, 1 a difference, 2 bad usage or unreadable input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/gguf.h"
#include "ir/dtype.h"

enum { ROWS = 64, COLS = 4096 };

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float normal(uint64_t *s) {
    double u1 = ((splitmix64(s) >> 11) + 1.0) * 0x1.0p-53, u2 = (splitmix64(s) >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static int write_file(gguf_writer *w, const char *path) {
    zdiag d = {0};
    zstatus s = gguf_writer_write(w, path, &d);
    gguf_writer_free(w);
    if (s) fprintf(stderr, "quantcheck: %s\n", d.msg);
    return s ? 2 : 0;
}

static int cmd_random(const char *out) {
    gguf_writer *w = gguf_writer_new();
    uint64_t seed = 2024;
    const int64_t ne[2] = {COLS, ROWS};
    for (uint32_t id = 0; id < ZT_ID_LIMIT; id++) {
        const ztype_info *ti = ztype_get(id);
        if (!ti || !(ti->flags & ZTF_COMPUTE) || id == ZT_F32) continue;
        uint64_t bytes = ztype_row_bytes((ztype)id, COLS, NULL) * ROWS;
        uint8_t *b = malloc(bytes);
        if (!b) return gguf_writer_free(w), fprintf(stderr, "quantcheck: out of memory\n"), 2;
        for (uint64_t i = 0; i < bytes; i++)
            b[i] = (uint8_t)(splitmix64(&seed) >> 56);
        gguf_add_tensor(w, ti->name, (ztype)id, 2, ne, b, bytes);
        free(b);
    }
    return write_file(w, out);
}

/* Value i of distribution k (i / 32: the sub-block, i % 32: the element). */
static float source_value(int k, int64_t i, uint64_t *s) {
    const int64_t sub = i / 32;
    const float x = normal(s);
    switch (k) {
    case 0: return x;
    case 1: return (sub % 4 == 1 ? 0.1f : sub % 4 == 3 ? 0.5f : 1.0f) * x;
    case 2: return i % 97 == 0 ? 50.0f : 0.01f * x;
    case 3: return sub % 3 == 0 ? 0.0f : sub % 3 == 1 ? 3.0f : x;
    case 4: return 1.0f + fabsf(x);
    case 5: return -1.0f - 0.1f * fabsf(x);
    case 6: return 3000.0f * x; /* below 2^16, where ggml's IQ4 sums still fit a float */
    default: return 1e-9f * x;
    }
}

static int cmd_sources(const char *out) {
    static const char *const names[] = {"normal",   "mixed_scales", "outliers", "zero_and_constant",
                                        "positive", "negative",     "large",    "tiny"};
    gguf_writer *w = gguf_writer_new();
    float *x = malloc(sizeof(float) * ROWS * COLS);
    if (!x) return gguf_writer_free(w), fprintf(stderr, "quantcheck: out of memory\n"), 2;
    const int64_t ne[2] = {COLS, ROWS};
    for (int k = 0; k < (int)(sizeof names / sizeof names[0]); k++) {
        uint64_t seed = 77 + (uint64_t)k;
        for (int64_t i = 0; i < ROWS * COLS; i++)
            x[i] = source_value(k, i, &seed);
        gguf_add_tensor(w, names[k], ZT_F32, 2, ne, x, sizeof(float) * ROWS * COLS);
    }
    free(x);
    return write_file(w, out);
}

static gguf_file *open_gguf(const char *path) {
    gguf_file *f = NULL;
    zdiag d = {0};
    if (gguf_open(path, &f, &d)) fprintf(stderr, "quantcheck: %s\n", d.msg);
    return f;
}

static int cmd_quantize(const char *src, const char *tname, const char *out) {
    ztype t = ZT_ID_LIMIT;
    for (uint32_t id = 0; id < ZT_ID_LIMIT; id++)
        if (ztype_get(id) && !strcmp(ztype_get(id)->name, tname)) t = (ztype)id;
    if (t == ZT_ID_LIMIT || !(ztype_get(t)->flags & ZTF_QUANTIZE))
        return fprintf(stderr, "quantcheck: zincc cannot write type '%s'\n", tname), 2;
    gguf_file *f = open_gguf(src);
    if (!f) return 2;
    gguf_writer *w = gguf_writer_new();
    int rc = 0;
    for (uint64_t i = 0; i < f->n_tensors && !rc; i++) {
        const gguf_tensor *x = &f->tensors[i];
        bool ok;
        uint64_t rb = ztype_row_bytes(t, (uint64_t)x->ne[0], &ok), rows = x->n_elems / (uint64_t)x->ne[0];
        if (x->type != ZT_F32 || x->n_dims != 2 || !ok) continue;
        uint8_t *q = malloc(rb * rows);
        for (uint64_t r = 0; q && r < rows && !rc; r++)
            if (ztype_quantize_row(t, (const float *)x->data + r * (uint64_t)x->ne[0], q + r * rb,
                                   x->ne[0])) {
                fprintf(stderr, "quantcheck: cannot quantize %s row %llu\n", x->name, (unsigned long long)r);
                rc = 2;
            }
        if (!q) rc = 2;
        if (!rc) gguf_add_tensor(w, x->name, t, 2, x->ne, q, rb * rows);
        free(q);
    }
    gguf_close(f);
    if (rc) return gguf_writer_free(w), rc;
    return write_file(w, out);
}

/* Per type: tensors, elements and differences seen. */
typedef struct tally {
    uint64_t tensors, elems, diff;
} tally;

static bool same(float a, float b) {
    return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a);
}

/* Dequantizes tensor x row by row and compares it with the F32 twin t. */
static int compare_tensor(const gguf_tensor *x, const gguf_tensor *t, tally *y) {
    if (t->type != ZT_F32 || t->n_elems != x->n_elems) {
        fprintf(stderr, "quantcheck: twin of '%s' is not F32 of %llu elements\n", x->name,
                (unsigned long long)x->n_elems);
        return 2;
    }
    const int64_t n = x->ne[0];
    const uint64_t rows = x->n_elems / (uint64_t)n, rb = ztype_row_bytes(x->type, (uint64_t)n, NULL);
    float *row = malloc(sizeof(float) * (size_t)n);
    if (!row) return 2;
    for (uint64_t r = 0; r < rows; r++) {
        if (ztype_dequant_row(x->type, x->data + r * rb, row, n)) {
            fprintf(stderr, "quantcheck: zincc cannot dequantize '%s' (%s)\n", x->name, ztype_name(x->type));
            free(row);
            return 2;
        }
        for (int64_t i = 0; i < n; i++) {
            float want;
            memcpy(&want, t->data + 4 * (r * (uint64_t)n + (uint64_t)i), 4);
            if (same(row[i], want)) continue;
            if (!y->diff)
                fprintf(stderr, "quantcheck: %s '%s' row %llu [%lld]: zincc %a, ggml %a\n",
                        ztype_name(x->type), x->name, (unsigned long long)r, (long long)i, (double)row[i],
                        (double)want);
            y->diff++;
        }
    }
    free(row);
    y->tensors++;
    y->elems += x->n_elems;
    return 0;
}

static int cmd_dequant(const char *model, const char *twin) {
    gguf_file *m = open_gguf(model), *t = m ? open_gguf(twin) : NULL;
    tally y[ZT_ID_LIMIT] = {0};
    int rc = m && t ? 0 : 2;
    for (uint64_t i = 0; !rc && i < m->n_tensors; i++) {
        const gguf_tensor *x = &m->tensors[i], *tt = gguf_find_tensor(t, x->name);
        if (!tt) {
            fprintf(stderr, "quantcheck: '%s' is not in %s\n", x->name, twin);
            rc = 2;
        } else {
            rc = compare_tensor(x, tt, &y[x->type]);
        }
    }
    for (uint32_t id = 0; !rc && id < ZT_ID_LIMIT; id++) {
        if (!y[id].tensors) continue;
        printf("%s %s dequantization zincc-vs-ggml: %llu tensors, %llu values, %llu differ\n",
               y[id].diff ? "FAIL" : "PASS", ztype_name((ztype)id), (unsigned long long)y[id].tensors,
               (unsigned long long)y[id].elems, (unsigned long long)y[id].diff);
        if (y[id].diff) rc = 1;
    }
    if (t) gguf_close(t);
    if (m) gguf_close(m);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "random")) return cmd_random(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "sources")) return cmd_sources(argv[2]);
    if (argc == 5 && !strcmp(argv[1], "quantize")) return cmd_quantize(argv[2], argv[3], argv[4]);
    if (argc == 4 && !strcmp(argv[1], "dequant")) return cmd_dequant(argv[2], argv[3]);
    fprintf(stderr,
            "usage: quantcheck random OUT.gguf | sources OUT.gguf | quantize SRC.gguf TYPE OUT.gguf |\n"
            "                  dequant MODEL.gguf TWIN.gguf\n");
    return 2;
}
