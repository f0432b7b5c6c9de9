/* GGUF reader and writer: round trips through real files, one test per
 * malformed case (status, offset and expectation checked), an exhaustive
 * truncation sweep, seeded byte-mutation, and writer failure paths. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../frontend/gguf.h"
#include "testutil.h"

/* ---- a byte builder for hand-made files ------------------------------------ */

typedef struct bb {
    uint8_t *p;
    size_t n, cap;
} bb;

static void bb_put(bb *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void bb_u8(bb *b, uint8_t v) {
    bb_put(b, &v, 1);
}
static void bb_u32(bb *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    bb_put(b, x, 4);
}
static void bb_u64(bb *b, uint64_t v) {
    bb_u32(b, (uint32_t)v);
    bb_u32(b, (uint32_t)(v >> 32));
}
static void bb_strn(bb *b, const char *s, size_t n) {
    bb_u64(b, n);
    bb_put(b, s, n);
}
static void bb_str(bb *b, const char *s) {
    bb_strn(b, s, strlen(s));
}
static void bb_zeros(bb *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        bb_u8(b, 0);
}
static void bb_pad(bb *b, size_t align) {
    bb_zeros(b, (align - b->n % align) % align);
}

static void hdr(bb *b, uint64_t n_tensors, uint64_t n_kv) {
    bb_put(b, "GGUF", 4);
    bb_u32(b, 3);
    bb_u64(b, n_tensors);
    bb_u64(b, n_kv);
}

/* A u32 key-value pair; returns the offset of its value's type tag. */
static size_t kv_u32(bb *b, const char *key, uint32_t v) {
    bb_str(b, key);
    size_t at = b->n;
    bb_u32(b, GGUF_U32);
    bb_u32(b, v);
    return at;
}

/* File offsets of a hand-made tensor info's fields. */
typedef struct tpos {
    size_t info, n_dims, ne[GGUF_MAX_DIMS], type, offset;
} tpos;

static tpos tinfo(bb *b, const char *name, uint32_t nd, const int64_t *ne, uint32_t type, uint64_t off) {
    tpos p = {.info = b->n};
    bb_str(b, name);
    p.n_dims = b->n;
    bb_u32(b, nd);
    for (uint32_t j = 0; j < nd; j++) {
        if (j < GGUF_MAX_DIMS) p.ne[j] = b->n;
        bb_u64(b, (uint64_t)ne[j]);
    }
    p.type = b->n;
    bb_u32(b, type);
    p.offset = b->n;
    bb_u64(b, off);
    return p;
}

/* Parses b from an exact-size heap copy, so that ASan sees any over-read. */
static zstatus parse_exact(const uint8_t *p, size_t n, gguf_file **f, zdiag *d) {
    uint8_t *buf = malloc(n ? n : 1);
    cr_assert_not_null(buf);
    if (n) memcpy(buf, p, n);
    zstatus st = gguf_parse(n ? buf : NULL, n, "m.gguf", f, d);
    if (st == ZOK) gguf_close(*f); /* the parse result points into buf */
    free(buf);
    return st;
}

/* The one-line message contract: "<path>: offset <N>: <what>: expected <X>, found <Y>". */
static void expect_msg(const zdiag *d, const char *path, uint64_t off, const char *needle) {
    char pre[256];
    snprintf(pre, sizeof pre, "%s: offset %" PRIu64 ": ", path, off);
    cr_expect(strncmp(d->msg, pre, strlen(pre)) == 0, "message \"%s\" should start with \"%s\"", d->msg, pre);
    cr_expect(strstr(d->msg, ": expected ") && strstr(d->msg, ", found "), "no expectation in \"%s\"",
              d->msg);
    cr_expect(strstr(d->msg, needle), "message \"%s\" should mention \"%s\"", d->msg, needle);
    cr_expect(!strchr(d->msg, '\n'), "message \"%s\" is more than one line", d->msg);
}

static void expect_fail(const bb *b, zstatus code, uint64_t off, const char *needle) {
    gguf_file *f = (gguf_file *)&f; /* must be reset to NULL */
    zdiag d = {0};
    zstatus st = parse_exact(b->p, b->n, &f, &d);
    cr_expect_eq(st, code, "status %s, expected %s (%s)", zstatus_name(st), zstatus_name(code), d.msg);
    cr_expect_eq(d.code, code);
    if (st != ZOK) cr_expect_null(f);
    cr_log_info("%s", d.msg);
    expect_msg(&d, "m.gguf", off, needle);
}

static void expect_ok(const bb *b) {
    gguf_file *f = NULL;
    zdiag d = {0};
    zstatus st = parse_exact(b->p, b->n, &f, &d);
    cr_expect_eq(st, ZOK, "unexpected failure: %s", d.msg);
}

/* ---- a sample file with every value type, written by the writer ------------- */

static gguf_value V(gguf_vtype t) {
    return (gguf_value){.type = t};
}
static gguf_value VS(const char *s) {
    return (gguf_value){.type = GGUF_STRING, .s = {strlen(s), s}};
}
static gguf_value VA(gguf_vtype elem, uint64_t n, gguf_value *items) {
    return (gguf_value){.type = GGUF_ARRAY, .arr = {elem, n, items}};
}

typedef struct sample {
    const char *keys[32];
    gguf_value vals[32];
    int n;
    /* storage the values point at */
    gguf_value u8s[3], strs[4], inner[3], ij[4], deep[3], deep_s[2];
} sample;

static void add(sample *s, const char *key, gguf_value v) {
    s->keys[s->n] = key;
    s->vals[s->n++] = v;
}

static void sample_values(sample *s) {
    gguf_value v;
    v = V(GGUF_U8), v.u = 200, add(s, "t.u8", v);
    v = V(GGUF_I8), v.i = -100, add(s, "t.i8", v);
    v = V(GGUF_U16), v.u = 60000, add(s, "t.u16", v);
    v = V(GGUF_I16), v.i = -30000, add(s, "t.i16", v);
    v = V(GGUF_U32), v.u = 4000000000u, add(s, "t.u32", v);
    v = V(GGUF_I32), v.i = -2000000000, add(s, "t.i32", v);
    v = V(GGUF_F32), v.f = 3.25, add(s, "t.f32", v);
    v = V(GGUF_BOOL), v.u = 1, add(s, "t.bool", v);
    add(s, "t.str", VS("h\xc3\xa9llo, world"));
    add(s, "t.str_empty", VS(""));
    v = V(GGUF_U64), v.u = (1ull << 60) + 1, add(s, "t.u64", v);
    v = V(GGUF_I64), v.i = -(1ll << 60) - 3, add(s, "t.i64", v);
    v = V(GGUF_F64), v.f = 3.141592653589793, add(s, "t.f64", v);
    for (int i = 0; i < 3; i++)
        s->u8s[i] = V(GGUF_U8), s->u8s[i].u = (uint64_t)(i * 100);
    add(s, "t.arr_u8", VA(GGUF_U8, 3, s->u8s));
    s->strs[0] = VS("a"), s->strs[1] = VS(""), s->strs[2] = VS("tok\n with newline"), s->strs[3] = VS("z");
    add(s, "t.arr_str", VA(GGUF_STRING, 4, s->strs));
    add(s, "t.arr_empty", VA(GGUF_F32, 0, NULL));
    /* [[1, 2], [], [3, -4]] of i16 */
    for (int i = 0; i < 4; i++)
        s->ij[i] = V(GGUF_I16), s->ij[i].i = i < 3 ? i + 1 : -4;
    s->inner[0] = VA(GGUF_I16, 2, s->ij), s->inner[1] = VA(GGUF_I16, 0, NULL),
    s->inner[2] = VA(GGUF_I16, 2, s->ij + 2);
    add(s, "t.nested", VA(GGUF_ARRAY, 3, s->inner));
    /* [[["x", "yy"]]]: three levels */
    s->deep_s[0] = VS("x"), s->deep_s[1] = VS("yy");
    s->deep[0] = VA(GGUF_STRING, 2, s->deep_s);
    s->deep[1] = VA(GGUF_ARRAY, 1, &s->deep[0]);
    s->deep[2] = VA(GGUF_ARRAY, 1, &s->deep[1]);
    add(s, "t.deep", s->deep[2]);
}

typedef struct stensor {
    const char *name;
    ztype type;
    uint32_t n_dims;
    int64_t ne[4];
} stensor;

static const stensor sample_tensors[] = {
    {"tok_embd.weight", ZT_F32, 2, {8, 3}},        {"blk.0.attn_q.weight", ZT_Q8_0, 2, {64, 2}},
    {"blk.0.ffn_up.weight", ZT_Q4_K, 2, {256, 2}}, {"blk.0.attn_norm.weight", ZT_F16, 3, {16, 2, 2}},
    {"output.weight", ZT_Q6_K, 1, {256}},          {"pos", ZT_I32, 1, {5}},
};
enum { N_SAMPLE_TENSORS = sizeof sample_tensors / sizeof sample_tensors[0] };

static uint64_t tensor_bytes(const stensor *t) {
    bool ok = false;
    uint64_t rows = 1;
    for (uint32_t j = 1; j < t->n_dims; j++)
        rows *= (uint64_t)t->ne[j];
    uint64_t n = ztype_row_bytes(t->type, (uint64_t)t->ne[0], &ok) * rows;
    cr_assert(ok);
    return n;
}

/* Random bytes for tensor i; the reader does not interpret them. */
static uint8_t *tensor_data(int i, uint64_t seed, uint64_t *n) {
    *n = tensor_bytes(&sample_tensors[i]);
    uint8_t *p = malloc(*n);
    tu_rng r = tu_rng_seed(seed * 100 + (uint64_t)i);
    for (uint64_t k = 0; k < *n; k++)
        p[k] = (uint8_t)tu_next(&r);
    return p;
}

static gguf_writer *sample_writer(sample *s, uint64_t seed) {
    memset(s, 0, sizeof *s);
    sample_values(s);
    gguf_writer *w = gguf_writer_new();
    cr_assert_not_null(w);
    gguf_set_str(w, "general.architecture", "test");
    for (int i = 0; i < s->n; i++)
        gguf_set_value(w, s->keys[i], &s->vals[i]);
    for (int i = 0; i < N_SAMPLE_TENSORS; i++) {
        uint64_t n;
        uint8_t *p = tensor_data(i, seed, &n);
        const stensor *t = &sample_tensors[i];
        gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, p, n);
        free(p);
    }
    return w;
}

static const char *write_sample(const char *name, uint64_t seed) {
    sample s;
    gguf_writer *w = sample_writer(&s, seed);
    const char *path = tu_tmp(name);
    zdiag d = {0};
    zstatus st = gguf_writer_write(w, path, &d);
    cr_assert_eq(st, ZOK, "%s", d.msg);
    gguf_writer_free(w);
    return path;
}

static void expect_same(const gguf_value *a, const gguf_value *b, const char *key) {
    cr_assert_eq(a->type, b->type, "%s: type %d vs %d", key, a->type, b->type);
    switch (a->type) {
    case GGUF_I8:
    case GGUF_I16:
    case GGUF_I32:
    case GGUF_I64: cr_expect_eq(a->i, b->i, "%s: %" PRId64 " vs %" PRId64, key, a->i, b->i); break;
    case GGUF_F32:
    case GGUF_F64: cr_expect(a->f == b->f, "%s: %.17g vs %.17g", key, a->f, b->f); break;
    case GGUF_STRING:
        cr_assert_eq(a->s.len, b->s.len, "%s", key);
        cr_expect(memcmp(a->s.ptr, b->s.ptr, a->s.len) == 0, "%s", key);
        cr_expect_eq(b->s.ptr[b->s.len], 0, "%s: reader copy is NUL-terminated", key);
        break;
    case GGUF_ARRAY:
        cr_assert_eq(a->arr.elem, b->arr.elem, "%s", key);
        cr_assert_eq(a->arr.n, b->arr.n, "%s", key);
        for (uint64_t i = 0; i < a->arr.n; i++)
            expect_same(&a->arr.items[i], &b->arr.items[i], key);
        break;
    default: cr_expect_eq(a->u, b->u, "%s: %" PRIu64 " vs %" PRIu64, key, a->u, b->u); break;
    }
}

/* ---- round trips ------------------------------------------------------------ */

static void check_sample(const gguf_file *f, uint64_t seed, uint32_t version) {
    sample s;
    memset(&s, 0, sizeof s);
    sample_values(&s);
    cr_expect_eq(f->version, version);
    cr_assert_eq(f->n_kv, (uint64_t)s.n + 1);
    cr_expect_str_eq(f->kvs[0].key, "general.architecture");
    for (int i = 0; i < s.n; i++) {
        cr_expect_str_eq(f->kvs[i + 1].key, s.keys[i], "insertion order is kept");
        const gguf_kv *kv = gguf_find_kv(f, s.keys[i]);
        cr_assert_not_null(kv, "%s", s.keys[i]);
        expect_same(&s.vals[i], &kv->val, s.keys[i]);
    }
    cr_expect_eq(f->alignment, 32);
    cr_expect_eq(f->data_offset % 32, 0);
    cr_expect(f->data_offset >= f->header_end && f->data_offset - f->header_end < 32);
    cr_assert_eq(f->n_tensors, N_SAMPLE_TENSORS);
    for (int i = 0; i < N_SAMPLE_TENSORS; i++) {
        const stensor *e = &sample_tensors[i];
        const gguf_tensor *t = gguf_find_tensor(f, e->name);
        cr_assert_eq(t, &f->tensors[i], "%s", e->name);
        cr_expect_eq(t->type, e->type);
        cr_expect_eq(t->n_dims, e->n_dims);
        uint64_t n_elems = 1;
        for (uint32_t j = 0; j < 4; j++) {
            cr_expect_eq(t->ne[j], j < e->n_dims ? e->ne[j] : 1, "%s ne[%u]", e->name, j);
            n_elems *= (uint64_t)t->ne[j];
        }
        cr_expect_eq(t->n_elems, n_elems);
        cr_expect_eq(t->offset % 32, 0);
        uint64_t n;
        uint8_t *want = tensor_data(i, seed, &n);
        cr_assert_eq(t->nbytes, n, "%s", e->name);
        cr_expect_eq(t->data, f->base + f->data_offset + t->offset);
        cr_expect(memcmp(t->data, want, n) == 0, "%s data", e->name);
        free(want);
    }
}

Test(gguf_roundtrip, every_value_type_and_tensor_type) {
    const char *path = write_sample("all.gguf", 7);
    gguf_file *f = NULL;
    zdiag d = {0};
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    cr_expect_str_eq(f->path, path);
    check_sample(f, 7, 3);
    gguf_close(f);
}

Test(gguf_roundtrip, parse_from_buffer_matches_open) {
    const char *path = write_sample("buf.gguf", 9);
    size_t n;
    uint8_t *buf = tu_read_file(path, &n);
    cr_assert_not_null(buf);
    gguf_file *f = NULL, *g = NULL;
    zdiag d = {0};
    cr_assert_eq(gguf_parse(buf, n, "buffer", &f, &d), ZOK, "%s", d.msg);
    cr_assert_eq(gguf_open(path, &g, &d), ZOK, "%s", d.msg);
    check_sample(f, 9, 3);
    cr_expect_eq(f->header_end, g->header_end);
    cr_expect_eq(gguf_identity_hash(f), gguf_identity_hash(g));
    gguf_close(f);
    gguf_close(g);
    free(buf);
}

Test(gguf_roundtrip, version_2_is_read) {
    const char *path = write_sample("v2.gguf", 3);
    size_t n;
    uint8_t *buf = tu_read_file(path, &n);
    buf[4] = 2; /* v2 and v3 share the layout; v3 only added big-endian files */
    gguf_file *f = NULL;
    zdiag d = {0};
    cr_assert_eq(gguf_parse(buf, n, "v2", &f, &d), ZOK, "%s", d.msg);
    cr_expect_eq(f->version, 2);
    check_sample(f, 3, 2);
    gguf_close(f);
    free(buf);
}

Test(gguf_roundtrip, custom_alignment_and_replaced_key) {
    gguf_writer *w = gguf_writer_new();
    gguf_set_str(w, "general.name", "first");
    gguf_set_u32(w, "general.alignment", 256);
    gguf_set_str(w, "general.name", "second"); /* replaces, keeps position 0 */
    float a[3] = {1, 2, 3}, b[300];
    for (int i = 0; i < 300; i++)
        b[i] = (float)i * 0.5f;
    gguf_add_tensor(w, "a", ZT_F32, 1, (int64_t[]){3}, a, sizeof a);
    gguf_add_tensor(w, "b", ZT_F32, 2, (int64_t[]){100, 3}, b, sizeof b);
    const char *path = tu_tmp("align.gguf");
    zdiag d = {0};
    cr_assert_eq(gguf_writer_write(w, path, &d), ZOK, "%s", d.msg);
    gguf_writer_free(w);
    gguf_file *f = NULL;
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    cr_expect_eq(f->n_kv, 2);
    cr_expect_str_eq(f->kvs[0].key, "general.name");
    const char *name = NULL;
    cr_expect_eq(gguf_get_str(f, "general.name", &name, &d), ZOK);
    cr_expect_str_eq(name, "second");
    cr_expect_eq(f->alignment, 256);
    cr_expect_eq(f->data_offset % 256, 0);
    cr_expect_eq(f->tensors[0].offset, 0);
    cr_expect_eq(f->tensors[1].offset, 256);
    cr_expect(memcmp(f->tensors[1].data, b, sizeof b) == 0);
    cr_expect_eq(f->size, f->data_offset + 256 + 1280, "the last tensor is padded too");
    gguf_close(f);
}

Test(gguf_roundtrip, max_nesting_depth_round_trips) {
    gguf_value lv[GGUF_MAX_ARRAY_DEPTH];
    gguf_value leaf = V(GGUF_U8);
    leaf.u = 42;
    lv[0] = VA(GGUF_U8, 1, &leaf);
    for (int i = 1; i < GGUF_MAX_ARRAY_DEPTH; i++)
        lv[i] = VA(GGUF_ARRAY, 1, &lv[i - 1]);
    gguf_writer *w = gguf_writer_new();
    gguf_set_value(w, "deep", &lv[GGUF_MAX_ARRAY_DEPTH - 1]);
    const char *path = tu_tmp("deep.gguf");
    zdiag d = {0};
    cr_assert_eq(gguf_writer_write(w, path, &d), ZOK, "%s", d.msg);
    gguf_writer_free(w);
    gguf_file *f = NULL;
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    expect_same(&lv[GGUF_MAX_ARRAY_DEPTH - 1], &gguf_find_kv(f, "deep")->val, "deep");
    gguf_close(f);
}

/* A real vocabulary is ~150k strings plus scores and types; parsing must stay
 * linear. The bound is loose (quadratic behaviour would take minutes). */
Test(gguf_roundtrip, large_vocabulary_parses_fast) {
    enum { NV = 151936 };
    char **toks = malloc(NV * sizeof *toks);
    float *scores = malloc(NV * sizeof *scores);
    int32_t *types = malloc(NV * sizeof *types);
    for (int i = 0; i < NV; i++) {
        toks[i] = malloc(24);
        snprintf(toks[i], 24, "\xc4\xa0tok%d", i);
        scores[i] = -(float)i;
        types[i] = i % 6;
    }
    gguf_writer *w = gguf_writer_new();
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, NV);
    gguf_set_arr_f32(w, "tokenizer.ggml.scores", scores, NV);
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", types, NV);
    gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)toks, NV);
    const char *path = tu_tmp("vocab.gguf");
    zdiag d = {0};
    cr_assert_eq(gguf_writer_write(w, path, &d), ZOK, "%s", d.msg);
    gguf_writer_free(w);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    gguf_file *f = NULL;
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    cr_log_info("parsed %d-token vocabulary in %.3f s", NV, s);
    cr_expect(s < 5.0, "parse took %.3f s", s);
    const gguf_value *arr = NULL;
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &arr, &d), ZOK, "%s", d.msg);
    cr_assert_eq(arr->arr.n, NV);
    cr_expect_str_eq(arr->arr.items[NV - 1].s.ptr, toks[NV - 1]);
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_F32, &arr, &d), ZOK, "%s", d.msg);
    cr_expect(arr->arr.items[1234].f == -1234.0);
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_I32, &arr, &d), ZOK, "%s", d.msg);
    cr_expect_eq(arr->arr.items[NV - 1].i, (NV - 1) % 6);
    gguf_close(f);
    for (int i = 0; i < NV; i++)
        free(toks[i]);
    free(toks);
    free(scores);
    free(types);
}

Test(gguf_roundtrip, identity_hash_covers_header_and_size_only) {
    const char *p1 = write_sample("h1.gguf", 5),
               *p2 = write_sample("h2.gguf", 6); /* same header, other data */
    gguf_file *a = NULL, *b = NULL;
    zdiag d = {0};
    cr_assert_eq(gguf_open(p1, &a, &d), ZOK, "%s", d.msg);
    cr_assert_eq(gguf_open(p2, &b, &d), ZOK, "%s", d.msg);
    cr_expect_eq(gguf_identity_hash(a), gguf_identity_hash(b));
    size_t n;
    uint8_t *buf = tu_read_file(p1, &n);
    gguf_file *c = NULL;
    const gguf_kv *kv = gguf_find_kv(a, "t.u32");
    buf[kv->value_offset + 4] ^= 1; /* one metadata bit */
    cr_assert_eq(gguf_parse(buf, n, "c", &c, &d), ZOK, "%s", d.msg);
    cr_expect_neq(gguf_identity_hash(a), gguf_identity_hash(c));
    gguf_close(c);
    buf[kv->value_offset + 4] ^= 1;
    cr_assert_eq(gguf_parse(buf, n - 1, "c", &c, &d), ZOK, "%s", d.msg); /* drops a byte of final padding */
    cr_expect_neq(gguf_identity_hash(a), gguf_identity_hash(c), "the size is part of the identity");
    gguf_close(c);
    /* FNV-1a 64 of the header bytes then the size, computed here independently. */
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < a->header_end; i++)
        h = (h ^ buf[i]) * 0x100000001b3ull;
    for (int k = 0; k < 8; k++)
        h = (h ^ ((a->size >> (8 * k)) & 0xff)) * 0x100000001b3ull;
    cr_expect_eq(gguf_identity_hash(a), h);
    gguf_close(a);
    gguf_close(b);
    free(buf);
}

/* ---- typed getters ----------------------------------------------------------- */

static gguf_file *getter_file(void) {
    gguf_writer *w = gguf_writer_new();
    gguf_value v = V(GGUF_U8);
    v.u = 7;
    gguf_set_value(w, "k.u8", &v);
    gguf_set_i32(w, "k.neg", -5);
    gguf_set_u64(w, "k.big", 1ull << 40);
    gguf_set_u64(w, "k.huge", UINT64_MAX);
    gguf_set_f32(w, "k.f32", 0.5f);
    v = V(GGUF_F64), v.f = 0.25, gguf_set_value(w, "k.f64", &v);
    gguf_set_bool(w, "k.bool", true);
    gguf_set_str(w, "k.str", "hi");
    gguf_set_arr_i32(w, "k.arr", (int32_t[]){1, 2}, 2);
    const char *path = tu_tmp("getters.gguf");
    zdiag d = {0};
    cr_assert_eq(gguf_writer_write(w, path, &d), ZOK, "%s", d.msg);
    gguf_writer_free(w);
    gguf_file *f = NULL;
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    return f;
}

/* Getter failures name the key and, for a present key, its offset. */
static void expect_getter_fail(const gguf_file *f, zstatus st, const zdiag *d, zstatus code, const char *key,
                               const char *needle) {
    cr_expect_eq(st, code, "%s: %s", key, d->msg);
    cr_expect(strstr(d->msg, key), "\"%s\" should name %s", d->msg, key);
    cr_expect(strstr(d->msg, needle), "\"%s\" should mention \"%s\"", d->msg, needle);
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (kv) expect_msg(d, f->path, kv->value_offset, needle);
}

Test(gguf_getters, integers_convert_when_they_fit) {
    gguf_file *f = getter_file();
    zdiag d = {0};
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    int64_t i64 = 0;
    cr_expect_eq(gguf_get_u32(f, "k.u8", &u32, &d), ZOK);
    cr_expect_eq(u32, 7);
    cr_expect_eq(gguf_get_u64(f, "k.big", &u64, &d), ZOK);
    cr_expect_eq(u64, 1ull << 40);
    cr_expect_eq(gguf_get_i64(f, "k.neg", &i64, &d), ZOK);
    cr_expect_eq(i64, -5);
    cr_expect_eq(gguf_get_i64(f, "k.u8", &i64, &d), ZOK);
    cr_expect_eq(i64, 7);
    u32 = 99;
    expect_getter_fail(f, gguf_get_u32(f, "k.big", &u32, &d), &d, ZE_FORMAT, "k.big", "out of range");
    expect_getter_fail(f, gguf_get_u32(f, "k.neg", &u32, &d), &d, ZE_FORMAT, "k.neg", "out of range");
    expect_getter_fail(f, gguf_get_u64(f, "k.neg", &u64, &d), &d, ZE_FORMAT, "k.neg", "out of range");
    expect_getter_fail(f, gguf_get_i64(f, "k.huge", &i64, &d), &d, ZE_FORMAT, "k.huge", "out of range");
    expect_getter_fail(f, gguf_get_u32(f, "k.str", &u32, &d), &d, ZE_FORMAT, "k.str", "found string");
    expect_getter_fail(f, gguf_get_u32(f, "k.nope", &u32, &d), &d, ZE_INVALID, "k.nope", "missing key");
    cr_expect_eq(u32, 99, "a failed getter leaves *out alone");
    gguf_close(f);
}

Test(gguf_getters, floats_bools_strings_arrays) {
    gguf_file *f = getter_file();
    zdiag d = {0};
    float x = 0;
    bool b = false;
    const char *s = NULL;
    const gguf_value *arr = NULL;
    cr_expect_eq(gguf_get_f32(f, "k.f32", &x, &d), ZOK);
    cr_expect(x == 0.5f);
    cr_expect_eq(gguf_get_f32(f, "k.f64", &x, &d), ZOK);
    cr_expect(x == 0.25f);
    expect_getter_fail(f, gguf_get_f32(f, "k.u8", &x, &d), &d, ZE_FORMAT, "k.u8", "found u8");
    cr_expect_eq(gguf_get_bool(f, "k.bool", &b, &d), ZOK);
    cr_expect(b);
    expect_getter_fail(f, gguf_get_bool(f, "k.u8", &b, &d), &d, ZE_FORMAT, "k.u8", "expected bool");
    cr_expect_eq(gguf_get_str(f, "k.str", &s, &d), ZOK);
    cr_expect_str_eq(s, "hi");
    expect_getter_fail(f, gguf_get_str(f, "k.arr", &s, &d), &d, ZE_FORMAT, "k.arr", "found array of i32");
    cr_expect_eq(gguf_get_arr(f, "k.arr", GGUF_I32, &arr, &d), ZOK);
    cr_expect_eq(arr->arr.n, 2);
    cr_expect_eq(gguf_get_arr(f, "k.arr", GGUF_VTYPE_COUNT, &arr, &d), ZOK);
    expect_getter_fail(f, gguf_get_arr(f, "k.arr", GGUF_F32, &arr, &d), &d, ZE_FORMAT, "k.arr",
                       "array of f32");
    expect_getter_fail(f, gguf_get_arr(f, "k.str", GGUF_VTYPE_COUNT, &arr, &d), &d, ZE_FORMAT, "k.str",
                       "an array");
    gguf_close(f);
}

Test(gguf_getters, optional_forms) {
    gguf_file *f = getter_file();
    zdiag d = {0};
    uint32_t u = 11;
    float x = 1.5f;
    const char *s = "untouched";
    cr_expect_eq(gguf_opt_u32(f, "absent", &u, &d), 0);
    cr_expect_eq(gguf_opt_f32(f, "absent", &x, &d), 0);
    cr_expect_eq(gguf_opt_str(f, "absent", &s, &d), 0);
    cr_expect_eq(u, 11);
    cr_expect(x == 1.5f);
    cr_expect_str_eq(s, "untouched");
    cr_expect_eq(gguf_opt_u32(f, "k.u8", &u, &d), 1);
    cr_expect_eq(u, 7);
    cr_expect_eq(gguf_opt_f32(f, "k.f32", &x, &d), 1);
    cr_expect(x == 0.5f);
    cr_expect_eq(gguf_opt_str(f, "k.str", &s, &d), 1);
    cr_expect_str_eq(s, "hi");
    cr_expect_eq(gguf_opt_u32(f, "k.str", &u, &d), -1);
    cr_expect_eq(u, 7);
    cr_expect(strstr(d.msg, "k.str") != NULL);
    cr_expect_eq(gguf_opt_f32(f, "k.str", &x, &d), -1);
    cr_expect_eq(gguf_opt_str(f, "k.u8", &s, &d), -1);
    cr_expect_str_eq(gguf_vtype_name(GGUF_F64), "f64");
    cr_expect_str_eq(gguf_vtype_name((gguf_vtype)99), "?");
    gguf_close(f);
}

/* ---- malformed headers and metadata ------------------------------------------ */

Test(gguf_malformed, empty_file) {
    bb b = {0};
    expect_fail(&b, ZE_FORMAT, 0, "truncated magic");
}

Test(gguf_malformed, bad_magic) {
    bb b = {0};
    bb_put(&b, "GGML", 4);
    bb_u32(&b, 3);
    bb_zeros(&b, 16);
    expect_fail(&b, ZE_FORMAT, 0, "bad magic");
    free(b.p);
}

Test(gguf_malformed, version_1_unsupported) {
    bb b = {0};
    bb_put(&b, "GGUF", 4);
    bb_u32(&b, 1);
    bb_zeros(&b, 16);
    expect_fail(&b, ZE_UNSUPPORTED, 4, "version 1 is no longer supported");
    free(b.p);
}

Test(gguf_malformed, future_version_unsupported) {
    bb b = {0};
    bb_put(&b, "GGUF", 4);
    bb_u32(&b, 4);
    bb_zeros(&b, 16);
    expect_fail(&b, ZE_UNSUPPORTED, 4, "found 4");
    free(b.p);
}

Test(gguf_malformed, big_endian_detected) {
    bb b = {0};
    bb_put(&b, "GGUF", 4);
    bb_put(&b, "\0\0\0\3", 4);
    bb_zeros(&b, 16);
    expect_fail(&b, ZE_UNSUPPORTED, 4, "big-endian");
    free(b.p);
}

Test(gguf_malformed, absurd_tensor_count) {
    bb b = {0};
    hdr(&b, 1ull << 32, 0);
    bb_zeros(&b, 76); /* a 100-byte file holds at most (100 - 24) / 25 = 3 tensor infos */
    expect_fail(&b, ZE_FORMAT, 8,
                "tensor count 4294967296 is absurd: expected at most 3 for a 100-byte file");
    free(b.p);
}

Test(gguf_malformed, absurd_kv_count) {
    bb b = {0};
    hdr(&b, 0, 1000);
    bb_zeros(&b, 76);
    expect_fail(&b, ZE_FORMAT, 16, "key-value count 1000 is absurd: expected at most 5");
    free(b.p);
}

Test(gguf_malformed, key_length_beyond_file) {
    bb b = {0};
    hdr(&b, 0, 1);
    bb_u64(&b, 1000);
    bb_put(&b, "abcdef", 6);
    expect_fail(&b, ZE_FORMAT, 24,
                "length of key runs past the end of the file: expected at most 6, found 1000");
    free(b.p);
}

Test(gguf_malformed, string_value_length_beyond_file) {
    bb b = {0};
    hdr(&b, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, GGUF_STRING);
    size_t at = b.n;
    bb_u64(&b, 1ull << 62);
    bb_put(&b, "xy", 2);
    expect_fail(&b, ZE_FORMAT, at, "length of string value of key 'k' runs past the end");
    free(b.p);
}

Test(gguf_malformed, array_length_beyond_file) {
    bb b = {0};
    hdr(&b, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, GGUF_ARRAY);
    bb_u32(&b, GGUF_U32);
    size_t at = b.n;
    bb_u64(&b, 1000000);
    bb_zeros(&b, 40);
    expect_fail(&b, ZE_FORMAT, at,
                "array length of key 'k' runs past the end of the file: expected at most 10 u32");
    free(b.p);
}

Test(gguf_malformed, string_array_count_beyond_file) {
    bb b = {0};
    hdr(&b, 0, 1);
    bb_str(&b, "tokens");
    bb_u32(&b, GGUF_ARRAY);
    bb_u32(&b, GGUF_STRING);
    size_t at = b.n;
    bb_u64(&b, UINT64_MAX); /* would be 2^64 items of 32 bytes if trusted */
    bb_str(&b, "a");
    expect_fail(&b, ZE_FORMAT, at, "expected at most 1 string items");
    free(b.p);
}

Test(gguf_malformed, unknown_value_type) {
    bb b = {0};
    hdr(&b, 0, 1);
    bb_str(&b, "k");
    size_t at = b.n;
    bb_u32(&b, 13);
    bb_zeros(&b, 8);
    expect_fail(&b, ZE_FORMAT, at, "unknown value type of key 'k': expected 0 to 12, found 13");
    free(b.p);
}

Test(gguf_malformed, unknown_array_element_type) {
    bb b = {0};
    hdr(&b, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, GGUF_ARRAY);
    size_t at = b.n;
    bb_u32(&b, 0xffffffffu);
    bb_u64(&b, 0);
    expect_fail(&b, ZE_FORMAT, at,
                "unknown array element type of key 'k': expected 0 to 12, found 4294967295");
    free(b.p);
}

/* Arrays of arrays: `levels` arrays, the innermost an empty u8 array. */
static size_t nested(bb *b, int levels) {
    hdr(b, 0, 1);
    bb_str(b, "nest");
    bb_u32(b, GGUF_ARRAY);
    size_t last = 0;
    for (int i = 1; i <= levels; i++) {
        last = b->n;
        bb_u32(b, i < levels ? GGUF_ARRAY : GGUF_U8);
        bb_u64(b, i < levels ? 1 : 0);
    }
    return last;
}

Test(gguf_malformed, nesting_too_deep) {
    bb ok = {0}, bad = {0};
    nested(&ok, GGUF_MAX_ARRAY_DEPTH);
    expect_ok(&ok);
    size_t at = nested(&bad, GGUF_MAX_ARRAY_DEPTH + 1);
    expect_fail(&bad, ZE_FORMAT, at, "nested too deeply: expected at most 8 levels, found 9");
    free(ok.p);
    free(bad.p);
}

Test(gguf_malformed, bool_not_0_or_1) {
    bb b = {0};
    hdr(&b, 0, 1);
    bb_str(&b, "flag");
    bb_u32(&b, GGUF_BOOL);
    size_t at = b.n;
    bb_u8(&b, 2);
    expect_fail(&b, ZE_FORMAT, at, "bool value of key 'flag' is invalid: expected 0 or 1, found 2");
    free(b.p);
}

Test(gguf_malformed, duplicate_key) {
    bb b = {0};
    hdr(&b, 0, 2);
    kv_u32(&b, "a.b", 1);
    size_t at = b.n;
    kv_u32(&b, "a.b", 2);
    expect_fail(&b, ZE_FORMAT, at,
                "duplicate key 'a.b': expected each key once, found a second definition "
                "(the first is at offset 24)");
    free(b.p);
}

Test(gguf_malformed, empty_key) {
    bb b = {0};
    hdr(&b, 0, 1);
    kv_u32(&b, "", 1);
    expect_fail(&b, ZE_FORMAT, 24, "empty key: expected a non-empty string, found length 0");
    free(b.p);
}

Test(gguf_malformed, key_with_nul_byte) {
    bb b = {0};
    hdr(&b, 0, 1);
    bb_strn(&b, "ab\0c", 4);
    bb_u32(&b, GGUF_U8);
    bb_u8(&b, 1);
    expect_fail(&b, ZE_FORMAT, 24,
                "key 'ab' contains a NUL byte: expected none in 4 bytes, found one at byte 2");
    free(b.p);
}

Test(gguf_malformed, unprintable_key_keeps_message_one_line) {
    bb b = {0};
    hdr(&b, 0, 2);
    kv_u32(&b, "line\nbreak", 1);
    size_t at = b.n;
    kv_u32(&b, "line\nbreak", 1);
    expect_fail(&b, ZE_FORMAT, at, "duplicate key 'line?break'");
    free(b.p);
}

Test(gguf_malformed, alignment_wrong_type) {
    bb b = {0};
    hdr(&b, 0, 1);
    bb_str(&b, "general.alignment");
    size_t at = b.n;
    bb_u32(&b, GGUF_U64);
    bb_u64(&b, 32);
    expect_fail(&b, ZE_FORMAT, at, "general.alignment has the wrong type: expected u32, found u64");
    free(b.p);
}

Test(gguf_malformed, alignment_not_power_of_two) {
    bb b = {0};
    hdr(&b, 0, 1);
    size_t at = kv_u32(&b, "general.alignment", 48);
    expect_fail(&b, ZE_FORMAT, at + 4, "not a power of two: expected a nonzero power of two, found 48");
    free(b.p);
}

Test(gguf_malformed, alignment_zero) {
    bb b = {0};
    hdr(&b, 0, 1);
    size_t at = kv_u32(&b, "general.alignment", 0);
    expect_fail(&b, ZE_FORMAT, at + 4, "found 0");
    free(b.p);
}

/* ---- malformed tensor infos ----------------------------------------------------- */

/* A file of one tensor info followed by padding and `data` bytes of data. */
static tpos one_tensor(bb *b, const char *name, uint32_t nd, const int64_t *ne, uint32_t type, uint64_t off,
                       size_t data) {
    hdr(b, 1, 0);
    tpos p = tinfo(b, name, nd, ne, type, off);
    bb_pad(b, 32);
    bb_zeros(b, data);
    return p;
}

Test(gguf_malformed, good_tensor_baseline) {
    bb b = {0};
    one_tensor(&b, "w", 2, (int64_t[]){4, 2}, ZT_F32, 0, 32);
    expect_ok(&b);
    bb c = {0};
    one_tensor(&c, "s", 0, NULL, ZT_F32, 0, 4); /* zero dimensions: a scalar, as ggml allows */
    expect_ok(&c);
    free(b.p);
    free(c.p);
}

Test(gguf_malformed, too_many_dims) {
    bb b = {0};
    tpos p = one_tensor(&b, "w", 5, (int64_t[]){1, 1, 1, 1, 1}, ZT_F32, 0, 64);
    expect_fail(&b, ZE_FORMAT, p.n_dims, "tensor 'w' has too many dimensions: expected at most 4, found 5");
    free(b.p);
}

Test(gguf_malformed, zero_dim) {
    bb b = {0};
    tpos p = one_tensor(&b, "w", 2, (int64_t[]){4, 0}, ZT_F32, 0, 64);
    expect_fail(&b, ZE_FORMAT, p.ne[1],
                "dimension 1 of tensor 'w' is not positive: expected at least 1, found 0");
    free(b.p);
}

Test(gguf_malformed, negative_dim) {
    bb b = {0};
    tpos p = one_tensor(&b, "w", 1, (int64_t[]){-3}, ZT_F32, 0, 64);
    expect_fail(&b, ZE_FORMAT, p.ne[0],
                "dimension 0 of tensor 'w' is not positive: expected at least 1, found -3");
    free(b.p);
}

Test(gguf_malformed, dim_product_overflows_int64) {
    bb b = {0};
    tpos p = one_tensor(&b, "w", 3, (int64_t[]){1 << 20, 1ll << 32, 1ll << 20}, ZT_F32, 0, 64);
    expect_fail(&b, ZE_FORMAT, p.ne[2], "element count of tensor 'w' overflows int64");
    free(b.p);
}

Test(gguf_malformed, data_size_overflows) {
    bb b = {0};
    tpos p = one_tensor(&b, "w", 1, (int64_t[]){1ll << 62}, ZT_F64, 0, 64); /* 2^62 * 8 bytes */
    expect_fail(&b, ZE_FORMAT, p.type, "data size of tensor 'w' overflows");
    free(b.p);
}

Test(gguf_malformed, unknown_tensor_type) {
    bb b = {0}, c = {0};
    tpos p = one_tensor(&b, "w", 1, (int64_t[]){4}, 4 /* Q4_2, removed from ggml */, 0, 64);
    expect_fail(&b, ZE_UNSUPPORTED, p.type,
                "tensor 'w' has an unknown type: expected a ggml type id, found 4");
    p = one_tensor(&c, "w", 1, (int64_t[]){4}, 1000, 0, 64);
    expect_fail(&c, ZE_UNSUPPORTED, p.type, "found 1000");
    free(b.p);
    free(c.p);
}

Test(gguf_malformed, row_not_multiple_of_block) {
    bb b = {0};
    tpos p = one_tensor(&b, "w", 2, (int64_t[]){100, 2}, ZT_Q4_K, 0, 512);
    expect_fail(&b, ZE_FORMAT, p.ne[0],
                "row length of tensor 'w' is not a multiple of the q4_K block: expected a "
                "multiple of 256, found 100");
    free(b.p);
}

Test(gguf_malformed, data_out_of_bounds) {
    bb b = {0};
    tpos p = one_tensor(&b, "w", 1, (int64_t[]){4}, ZT_F32, 0, 15); /* needs 16 bytes */
    expect_fail(&b, ZE_FORMAT, p.offset,
                "data of tensor 'w' runs past the end of the file: expected at most 15 "
                "bytes");
    bb c = {0};
    p = one_tensor(&c, "w", 1, (int64_t[]){4}, ZT_F32, 1ull << 63, 64); /* offset itself far beyond */
    expect_fail(&c, ZE_FORMAT, p.offset, "found 9223372036854775808 + 16");
    free(b.p);
    free(c.p);
}

Test(gguf_malformed, misaligned_offset) {
    bb b = {0};
    tpos p = one_tensor(&b, "w", 1, (int64_t[]){4}, ZT_F32, 4, 64);
    expect_fail(&b, ZE_FORMAT, p.offset,
                "data offset of tensor 'w' is misaligned: expected a multiple of 32, "
                "found 4");
    free(b.p);
}

Test(gguf_malformed, overlapping_tensors) {
    bb b = {0};
    hdr(&b, 2, 0);
    tinfo(&b, "a", 1, (int64_t[]){16}, ZT_F32, 0); /* bytes [0, 64) */
    tpos p = tinfo(&b, "b", 1, (int64_t[]){8}, ZT_F32, 32);
    bb_pad(&b, 32);
    bb_zeros(&b, 128);
    expect_fail(&b, ZE_FORMAT, p.offset,
                "data of tensor 'b' overlaps tensor 'a': expected an offset of at least "
                "64, found 32");
    free(b.p);
}

Test(gguf_malformed, overlap_found_whatever_the_file_order) {
    bb b = {0};
    hdr(&b, 3, 0);
    tpos p = tinfo(&b, "late", 1, (int64_t[]){8}, ZT_F32, 96);
    tinfo(&b, "c", 1, (int64_t[]){8}, ZT_F32, 0);
    tinfo(&b, "big", 1, (int64_t[]){32}, ZT_F32, 32); /* [32, 160) covers "late" */
    bb_pad(&b, 32);
    bb_zeros(&b, 256);
    expect_fail(&b, ZE_FORMAT, p.offset, "data of tensor 'late' overlaps tensor 'big'");
    free(b.p);
}

Test(gguf_malformed, duplicate_tensor_name) {
    bb b = {0};
    hdr(&b, 2, 0);
    tinfo(&b, "w", 1, (int64_t[]){8}, ZT_F32, 0);
    tpos p = tinfo(&b, "w", 1, (int64_t[]){8}, ZT_F32, 32);
    bb_pad(&b, 32);
    bb_zeros(&b, 64);
    expect_fail(&b, ZE_FORMAT, p.info,
                "duplicate tensor name 'w': expected each name once, found a second tensor "
                "(the first is at offset 24)");
    free(b.p);
}

Test(gguf_malformed, empty_tensor_name) {
    bb b = {0};
    tpos p = one_tensor(&b, "", 1, (int64_t[]){4}, ZT_F32, 0, 64);
    expect_fail(&b, ZE_FORMAT, p.info, "empty tensor name");
    free(b.p);
}

Test(gguf_malformed, tensor_count_absurd_after_metadata) {
    bb b = {0};
    hdr(&b, 2, 1);
    bb_str(&b, "pad");
    bb_u32(&b, GGUF_STRING);
    bb_str(&b,
           "01234567890123456789012345678901234567890123456789"); /* header bound passes; no room for infos */
    expect_fail(&b, ZE_FORMAT, 8, "tensor count 2 is absurd: expected at most 0");
    free(b.p);
}

/* ---- truncation and mutation ------------------------------------------------------ */

static uint64_t parse_offset(const char *msg) {
    const char *p = strstr(msg, ": offset ");
    return p ? strtoull(p + 9, NULL, 10) : UINT64_MAX;
}

/* Every prefix of a good file up to the end of its header, and prefixes that
 * cut into the data, must fail cleanly with an offset inside the prefix. */
Test(gguf_malformed, truncation_sweep) {
    const char *path = write_sample("sweep.gguf", 11);
    size_t n;
    uint8_t *buf = tu_read_file(path, &n);
    gguf_file *f = NULL;
    zdiag d = {0};
    cr_assert_eq(gguf_parse(buf, n, "m.gguf", &f, &d), ZOK, "%s", d.msg);
    uint64_t data_end = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        uint64_t e = f->data_offset + f->tensors[i].offset + f->tensors[i].nbytes;
        if (e > data_end) data_end = e;
    }
    uint64_t data_offset = f->data_offset;
    gguf_close(f);
    int cuts = 0;
    for (uint64_t cut = 0; cut < data_end; cut = cut < data_offset ? cut + 1 : cut + 61) {
        zstatus st = parse_exact(buf, (size_t)cut, &f, &d);
        cr_assert_eq(st, ZE_FORMAT, "cut at %" PRIu64 ": %s (%s)", cut, zstatus_name(st), d.msg);
        cr_assert(strncmp(d.msg, "m.gguf: offset ", 15) == 0 && strstr(d.msg, ": expected "),
                  "cut %" PRIu64 ": %s", cut, d.msg);
        cr_assert_leq(parse_offset(d.msg), cut, "cut %" PRIu64 ": %s", cut, d.msg);
        cuts++;
    }
    zstatus st = parse_exact(buf, (size_t)data_end - 1, &f, &d);
    cr_expect_eq(st, ZE_FORMAT, "one byte short of the last tensor: %s", d.msg);
    cr_expect_eq(parse_exact(buf, (size_t)data_end, &f, &d), ZOK, "%s", d.msg); /* only padding is missing */
    cr_log_info("%d truncations rejected (header and tensor infos: %" PRIu64 " bytes)", cuts, data_offset);
    free(buf);
}

/* The mapped path too: a few prefixes written to disk and opened. */
Test(gguf_malformed, truncated_files_on_disk) {
    const char *path = write_sample("disk.gguf", 12);
    size_t n;
    uint8_t *buf = tu_read_file(path, &n);
    const size_t cuts[] = {0, 3, 4, 23, 24, 100, n / 2, n - 200};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        const char *cut_path = tu_tmp("cut.gguf");
        cr_assert_eq(tu_write_file(cut_path, buf, cuts[i]), 0);
        gguf_file *f = NULL;
        zdiag d = {0};
        cr_expect_eq(gguf_open(cut_path, &f, &d), ZE_FORMAT, "cut %zu: %s", cuts[i], d.msg);
        cr_expect_null(f);
        char pre[600];
        snprintf(pre, sizeof pre, "%s: offset ", cut_path);
        cr_expect(strncmp(d.msg, pre, strlen(pre)) == 0, "%s", d.msg);
    }
    free(buf);
}

/* Seeded random byte changes in the header: each parse either succeeds or
 * fails with a well-formed message; under ASan nothing reads out of bounds. */
Test(gguf_malformed, mutated_headers) {
    const char *path = write_sample("mut.gguf", 13);
    size_t n;
    uint8_t *orig = tu_read_file(path, &n);
    gguf_file *f = NULL;
    zdiag d = {0};
    cr_assert_eq(gguf_parse(orig, n, "m.gguf", &f, &d), ZOK);
    uint64_t header = f->header_end;
    gguf_close(f);
    tu_rng r = tu_rng_seed(20240601);
    int failed = 0;
    for (int it = 0; it < 3000; it++) {
        uint8_t *buf = malloc(n);
        memcpy(buf, orig, n);
        int flips = 1 + (int)(tu_next(&r) % 4);
        for (int k = 0; k < flips; k++) {
            uint64_t at = tu_next(&r) % header;
            buf[at] = (tu_next(&r) & 1) ? (uint8_t)tu_next(&r) : buf[at] ^ (uint8_t)(1u << (tu_next(&r) % 8));
        }
        zstatus st = gguf_parse(buf, n, "m.gguf", &f, &d);
        if (st == ZOK) {
            gguf_close(f);
        } else {
            failed++;
            cr_assert(strncmp(d.msg, "m.gguf: offset ", 15) == 0 && strstr(d.msg, ": expected ") &&
                          strstr(d.msg, ", found ") && !strchr(d.msg, '\n'),
                      "iteration %d: %s", it, d.msg);
            cr_assert_lt(parse_offset(d.msg), n, "%s", d.msg);
        }
        free(buf);
    }
    cr_log_info("%d of 3000 mutated headers rejected", failed);
    cr_expect_gt(failed, 1000);
    free(orig);
}

/* ---- files that cannot be opened ------------------------------------------------- */

Test(gguf_files, missing_file_and_directory) {
    gguf_file *f = NULL;
    zdiag d = {0};
    cr_expect_eq(gguf_open("/nonexistent-zinc/m.gguf", &f, &d), ZE_IO);
    cr_expect_str_eq(d.msg, "cannot open /nonexistent-zinc/m.gguf: No such file or directory");
    cr_expect_null(f);
    const char *dir = tu_tmp("a-directory");
    mkdir(dir, 0700);
    cr_expect_eq(gguf_open(dir, &f, &d), ZE_IO);
    cr_expect(strstr(d.msg, "is a directory"), "%s", d.msg);
}

Test(gguf_files, bad_file_names_its_path) {
    const char *path = tu_tmp("bad.gguf");
    cr_assert_eq(tu_write_file(path, "GGUF\1\0\0\0", 8), 0);
    gguf_file *f = NULL;
    zdiag d = {0};
    cr_expect_eq(gguf_open(path, &f, &d), ZE_UNSUPPORTED);
    expect_msg(&d, path, 4, "version 1");
}

/* ---- writer failures --------------------------------------------------------------- */

/* Whether dir holds any leftover temporary file of ours. */
static bool has_temp(const char *dir) {
    DIR *dp = opendir(dir);
    cr_assert_not_null(dp);
    bool found = false;
    for (struct dirent *e; (e = readdir(dp));)
        found |= strstr(e->d_name, ".tmp-") != NULL;
    closedir(dp);
    return found;
}

static const char *tmp_dir(void) {
    static char dir[512];
    snprintf(dir, sizeof dir, "%s", tu_tmp("x"));
    *strrchr(dir, '/') = 0;
    return dir;
}

Test(gguf_write, unwritable_path_leaves_no_file) {
    sample s;
    gguf_writer *w = sample_writer(&s, 1);
    zdiag d = {0};
    cr_expect_eq(gguf_writer_write(w, "/nonexistent-zinc/out.gguf", &d), ZE_IO);
    cr_expect_str_eq(d.msg, "cannot write /nonexistent-zinc/out.gguf: No such file or directory");
    const char *file = tu_tmp("plain-file");
    cr_assert_eq(tu_write_file(file, "x", 1), 0);
    char under[600];
    snprintf(under, sizeof under, "%s/out.gguf", file);
    cr_expect_eq(gguf_writer_write(w, under, &d), ZE_IO);
    cr_expect(strstr(d.msg, "cannot write ") && strstr(d.msg, ": Not a directory"), "%s", d.msg);
    cr_expect_neq(access(under, F_OK), 0);
    gguf_writer_free(w);
}

Test(gguf_write, rename_failure_cleans_up_the_temp) {
    sample s;
    gguf_writer *w = sample_writer(&s, 1);
    const char *dir = tu_tmp("target-is-a-dir");
    cr_assert_eq(mkdir(dir, 0700), 0);
    zdiag d = {0};
    cr_expect_eq(gguf_writer_write(w, dir, &d), ZE_IO);
    cr_expect(strstr(d.msg, "cannot write ") && strstr(d.msg, "directory"), "%s", d.msg);
    cr_expect_not(has_temp(tmp_dir()), "a temporary file was left behind");
    gguf_writer_free(w);
}

/* A write that fails half-way (file size limit) leaves the old file intact and no temp. */
Test(gguf_write, failed_write_keeps_the_old_file) {
    const char *path = write_sample("keep.gguf", 2);
    size_t n0;
    uint8_t *before = tu_read_file(path, &n0);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {4096, 4096};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    gguf_writer *w = gguf_writer_new();
    static uint8_t big[1 << 16];
    gguf_add_tensor(w, "big", ZT_I8, 1, (int64_t[]){sizeof big}, big, sizeof big);
    zdiag d = {0};
    cr_expect_eq(gguf_writer_write(w, path, &d), ZE_IO);
    cr_expect(strstr(d.msg, "cannot write ") && strstr(d.msg, "File too large"), "%s", d.msg);
    size_t n1;
    uint8_t *after = tu_read_file(path, &n1);
    cr_assert_eq(n1, n0);
    cr_expect(memcmp(before, after, n0) == 0, "the old file changed");
    cr_expect_not(has_temp(tmp_dir()), "a temporary file was left behind");
    gguf_writer_free(w);
    free(before);
    free(after);
}

Test(gguf_write, invalid_input_is_reported_and_writes_nothing) {
    struct {
        const char *needle;
        zstatus code;
    } cases[] = {
        {"tensor 'w': data size for 4 f32 elements in rows of 4: expected 16 bytes, found 15", ZE_INVALID},
        {"duplicate tensor 'w'", ZE_INVALID},
        {"tensor 'w': expected a ggml type, found id 4", ZE_INVALID},
        {"row length is not a multiple of the q8_0 block: expected a multiple of 32, found 4", ZE_INVALID},
        {"arrays nested too deeply", ZE_INVALID},
        {"array item 1 has the wrong type: expected u8, found i8", ZE_INVALID},
        {"value out of range: expected a value that fits u8, found 256", ZE_INVALID},
        {"general.alignment: expected a u32 power of two, found u32 48", ZE_INVALID},
        {"empty key", ZE_INVALID},
    };
    float x[4] = {0};
    gguf_value lv[GGUF_MAX_ARRAY_DEPTH + 1], leaf = V(GGUF_U8), mixed[2] = {V(GGUF_U8), V(GGUF_I8)};
    lv[0] = VA(GGUF_U8, 1, &leaf);
    for (int i = 1; i <= GGUF_MAX_ARRAY_DEPTH; i++)
        lv[i] = VA(GGUF_ARRAY, 1, &lv[i - 1]);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gguf_writer *w = gguf_writer_new();
        gguf_value v = V(GGUF_U8);
        switch (c) {
        case 0: gguf_add_tensor(w, "w", ZT_F32, 1, (int64_t[]){4}, x, 15); break;
        case 1:
            gguf_add_tensor(w, "w", ZT_F32, 1, (int64_t[]){4}, x, 16);
            gguf_add_tensor(w, "w", ZT_F32, 1, (int64_t[]){4}, x, 16);
            break;
        case 2: gguf_add_tensor(w, "w", (ztype)4, 1, (int64_t[]){4}, x, 16); break;
        case 3: gguf_add_tensor(w, "w", ZT_Q8_0, 1, (int64_t[]){4}, x, 16); break;
        case 4: gguf_set_value(w, "deep", &lv[GGUF_MAX_ARRAY_DEPTH]); break;
        case 5:
            gguf_set_value(w, "mixed", &(gguf_value){.type = GGUF_ARRAY, .arr = {GGUF_U8, 2, mixed}});
            break;
        case 6: v.u = 256, gguf_set_value(w, "big", &v); break;
        case 7: gguf_set_u32(w, "general.alignment", 48); break;
        case 8: gguf_set_u32(w, "", 1); break;
        }
        gguf_set_str(w, "after.error", "ignored"); /* later calls do not hide the first error */
        const char *path = tu_tmp("invalid.gguf");
        zdiag d = {0};
        cr_expect_eq(gguf_writer_write(w, path, &d), cases[c].code, "case %zu: %s", c, d.msg);
        cr_expect(strncmp(d.msg, "cannot write ", 13) == 0, "case %zu: %s", c, d.msg);
        cr_expect(strstr(d.msg, cases[c].needle), "case %zu: \"%s\" should mention \"%s\"", c, d.msg,
                  cases[c].needle);
        cr_expect_neq(access(path, F_OK), 0, "case %zu wrote a file", c);
        gguf_writer_free(w);
    }
    cr_expect_not(has_temp(tmp_dir()));
}
