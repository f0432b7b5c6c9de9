/* libFuzzer harness: the GGUF reader (frontend/gguf.h) on arbitrary bytes,
 * then the typed getters and the tokenizer loader on what it accepts.
 *
 * The reader promises that an accepted file can be used without further
 * checks: every tensor's data lies inside the buffer, every key and name is
 * NUL-terminated, and lookups find what the tables hold. Seeds: GGUFs from
 * `zinc mkmodel` (scripts/fuzz.sh). */
#include <string.h>

#include "../frontend/gguf.h"
#include "../runtime/tokenizer.h"
#include "common.h"

/* Touches every value, so that ASan sees any pointer outside the buffer. */
static uint64_t walk_value(const gguf_value *v, int depth) {
    if (depth > GGUF_MAX_ARRAY_DEPTH + 1) fz_fail("array nested %d deep was accepted", depth);
    uint64_t h = (uint64_t)v->type;
    switch (v->type) {
    case GGUF_STRING:
        if (v->s.ptr[v->s.len] != 0)
            fz_fail("string of %llu bytes not NUL-terminated", (unsigned long long)v->s.len);
        h += fz_fnv1a(v->s.ptr, (size_t)v->s.len);
        break;
    case GGUF_ARRAY:
        for (uint64_t i = 0; i < v->arr.n; i++) {
            if (v->arr.items[i].type != v->arr.elem)
                fz_fail("array item of type %d in an array of %d", (int)v->arr.items[i].type,
                        (int)v->arr.elem);
            h += walk_value(&v->arr.items[i], depth + 1);
        }
        break;
    default: h += v->u;
    }
    return h;
}

static void check_tensor(const gguf_file *f, const gguf_tensor *t) {
    const uint8_t *end = f->base + f->size;
    if (t->data < f->base || t->data > end || t->nbytes > (uint64_t)(end - t->data))
        fz_fail("tensor '%s' data [%p, +%llu) outside the buffer [%p, %p)", t->name, (const void *)t->data,
                (unsigned long long)t->nbytes, (const void *)f->base, (const void *)end);
    if (t->n_dims > GGUF_MAX_DIMS) fz_fail("tensor '%s' with %u dims accepted", t->name, t->n_dims);
    if (gguf_find_tensor(f, t->name) != t) fz_fail("tensor '%s' not found by name", t->name);
    if (t->nbytes) {
        volatile uint8_t x = t->data[0];
        x ^= t->data[t->nbytes - 1];
        (void)x;
    }
}

/* The getters must fail cleanly on a wrong type, never misread. */
static void try_getters(const gguf_file *f, const char *key) {
    zdiag d = {0};
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f32;
    bool b;
    const char *s;
    const gguf_value *arr;
    fz_check(gguf_get_u32(f, key, &u32, &d), &d, "gguf_get_u32");
    fz_check(gguf_get_u64(f, key, &u64, &d), &d, "gguf_get_u64");
    fz_check(gguf_get_i64(f, key, &i64, &d), &d, "gguf_get_i64");
    fz_check(gguf_get_f32(f, key, &f32, &d), &d, "gguf_get_f32");
    fz_check(gguf_get_bool(f, key, &b, &d), &d, "gguf_get_bool");
    fz_check(gguf_get_str(f, key, &s, &d), &d, "gguf_get_str");
    fz_check(gguf_get_arr(f, key, GGUF_VTYPE_COUNT, &arr, &d), &d, "gguf_get_arr");
}

static void check_file(const gguf_file *f) {
    uint64_t h = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kvs[i];
        if (gguf_find_kv(f, kv->key) != kv) fz_fail("key '%s' not found by name", kv->key);
        h += walk_value(&kv->val, 0);
        try_getters(f, kv->key);
    }
    for (uint64_t i = 0; i < f->n_tensors; i++)
        check_tensor(f, &f->tensors[i]);
    if (f->header_end > f->size || f->data_offset > f->size + f->alignment)
        fz_fail("header_end %llu / data_offset %llu past a %llu-byte file", (unsigned long long)f->header_end,
                (unsigned long long)f->data_offset, (unsigned long long)f->size);
    h += gguf_identity_hash(f);
    if (h == 1) fputc(0, fz_null()); /* keep the walk from being optimised away */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = NULL;
    zdiag d = {0};
    zstatus s = gguf_parse(data, size, "fuzz.gguf", &f, &d);
    fz_check(s, &d, "gguf_parse");
    if (s) {
        if (f) fz_fail("gguf_parse failed but returned a file");
        return 0;
    }
    check_file(f);
    zrt_tok *t = NULL;
    zdiag td = {0};
    zstatus ts = zrt_tok_load(f, &t, &td);
    fz_check(ts, &td, "zrt_tok_load");
    if (!ts) {
        zarena *a = zarena_new();
        int32_t *ids;
        size_t n;
        zdiag ed = {0};
        static const char text[] = "Hello world! <|im_start|> 123 \xe4\xb8\xad\xff";
        fz_check(zrt_tok_encode(t, text, sizeof text - 1, ZRT_TOK_ADD_SPECIAL | ZRT_TOK_PARSE_SPECIAL, a,
                                &ids, &n, &ed),
                 &ed, "zrt_tok_encode");
        zarena_free(a);
        zrt_tok_free(t);
    }
    gguf_close(f);
    return 0;
}
