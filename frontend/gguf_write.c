/* GGUF v3 writer: metadata and tensors are collected in an arena, checked as
 * they are added, and written in one go to a temporary file beside the
 * target, which is renamed into place only once every byte is on disk.
 *
 * The first error made while collecting (a bad argument, no memory) is kept
 * and reported by gguf_writer_write, so that callers can chain setters without
 * checking each one. */
#include "gguf.h"

#include "../ir/fileio.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct wkv {
    const char *key;
    gguf_value val;
    struct wkv *next; /* insertion order */
    UT_hash_handle hh;
} wkv;

typedef struct wtensor {
    const char *name;
    ztype type;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    const uint8_t *data;
    uint64_t nbytes, offset;
    struct wtensor *next;
    UT_hash_handle hh;
} wtensor;

struct gguf_writer {
    zarena *a; /* owns the writer itself and everything it holds */
    wkv *kvs, **kv_tail, *kv_index;
    wtensor *tensors, **t_tail, *t_index;
    uint64_t n_kv, n_tensors;
    zstatus err;
    char msg[768];
};

/* Records an error (the first one wins: later ones are often its
 * consequence). Returns false, for `return werr(...)` in checks. */
static bool werr(gguf_writer *w, zstatus code, const char *fmt, ...) ZPRINTF(3, 4);
static bool werr(gguf_writer *w, zstatus code, const char *fmt, ...) {
    if (w->err) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    w->err = code;
    return false;
}

gguf_writer *gguf_writer_new(void) {
    zarena *a = zarena_new();
    gguf_writer *w = a ? zarena_alloc(a, sizeof *w) : NULL;
    if (!w) {
        zarena_free(a);
        return NULL;
    }
    w->a = a;
    w->kv_tail = &w->kvs;
    w->t_tail = &w->tensors;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (w) zarena_free(w->a);
}

/* ---- metadata ---------------------------------------------------------------- */

/* Whether an integer value fits the width its type tag promises. */
static bool fits(const gguf_value *v) {
    switch (v->type) {
    case GGUF_U8: return v->u <= UINT8_MAX;
    case GGUF_U16: return v->u <= UINT16_MAX;
    case GGUF_U32: return v->u <= UINT32_MAX;
    case GGUF_I8: return v->i >= INT8_MIN && v->i <= INT8_MAX;
    case GGUF_I16: return v->i >= INT16_MIN && v->i <= INT16_MAX;
    case GGUF_I32: return v->i >= INT32_MIN && v->i <= INT32_MAX;
    case GGUF_BOOL: return v->u <= 1;
    default: return true;
    }
}

static bool copy_value(gguf_writer *w, gguf_value *dst, const gguf_value *src, int depth, const char *key);

static bool copy_array(gguf_writer *w, gguf_value *dst, const gguf_value *src, int depth, const char *key) {
    if (depth >= GGUF_MAX_ARRAY_DEPTH) {
        werr(w, ZE_INVALID, "key '%s': arrays nested too deeply: expected at most %d levels, found more", key,
             GGUF_MAX_ARRAY_DEPTH);
        return false;
    }
    gguf_vtype elem = src->arr.elem;
    uint64_t n = src->arr.n;
    if ((unsigned)elem >= GGUF_VTYPE_COUNT || (n && !src->arr.items)) {
        werr(w, ZE_INVALID,
             "key '%s': bad array: expected an element type below %d and %" PRIu64 " items, found "
             "type %d and %s",
             key, GGUF_VTYPE_COUNT, n, (int)elem, src->arr.items ? "items" : "NULL");
        return false;
    }
    gguf_value *items = zarena_array(w->a, n ? (size_t)n : 1, sizeof *items);
    if (!items) {
        werr(w, ZE_NOMEM, "key '%s': out of memory for %" PRIu64 " array items", key, n);
        return false;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (src->arr.items[i].type != elem) {
            werr(w, ZE_INVALID, "key '%s': array item %" PRIu64 " has the wrong type: expected %s, found %s",
                 key, i, gguf_vtype_name(elem), gguf_vtype_name(src->arr.items[i].type));
            return false;
        }
        if (!copy_value(w, &items[i], &src->arr.items[i], depth + 1, key)) return false;
    }
    dst->arr.items = items;
    return true;
}

static bool copy_value(gguf_writer *w, gguf_value *dst, const gguf_value *src, int depth, const char *key) {
    if ((unsigned)src->type >= GGUF_VTYPE_COUNT) {
        werr(w, ZE_INVALID, "key '%s': unknown value type: expected 0 to %d, found %d", key,
             GGUF_VTYPE_COUNT - 1, (int)src->type);
        return false;
    }
    if (!fits(src)) {
        werr(w, ZE_INVALID, "key '%s': value out of range: expected a value that fits %s, found %" PRIu64,
             key, gguf_vtype_name(src->type), src->u);
        return false;
    }
    *dst = *src;
    if (src->type == GGUF_ARRAY) return copy_array(w, dst, src, depth, key);
    if (src->type != GGUF_STRING) return true;
    if (!src->s.ptr && src->s.len) {
        werr(w, ZE_INVALID, "key '%s': string of %" PRIu64 " bytes: expected its bytes, found NULL", key,
             src->s.len);
        return false;
    }
    char *c = zarena_alloc(w->a, (size_t)src->s.len + 1);
    if (!c) {
        werr(w, ZE_NOMEM, "key '%s': out of memory for a %" PRIu64 "-byte string", key, src->s.len);
        return false;
    }
    if (src->s.len) memcpy(c, src->s.ptr, (size_t)src->s.len);
    dst->s.ptr = c;
    return true;
}

void gguf_set_value(gguf_writer *w, const char *key, const gguf_value *v) {
    if (!w || w->err) return;
    if (!key || !*key || !v) {
        werr(w, ZE_INVALID, "bad key-value pair: expected a non-empty key and a value, found %s",
             !key    ? "a NULL key"
             : !*key ? "an empty key"
                     : "a NULL value");
        return;
    }
    gguf_value copy;
    if (!copy_value(w, &copy, v, 0, key)) return;
    wkv *kv = NULL;
    HASH_FIND_STR(w->kv_index, key, kv);
    if (kv) { /* replaced in place: the key keeps its first position */
        kv->val = copy;
        return;
    }
    kv = zarena_alloc(w->a, sizeof *kv);
    if (kv) kv->key = zarena_strdup(w->a, key);
    if (!kv || !kv->key) {
        werr(w, ZE_NOMEM, "key '%s': out of memory", key);
        return;
    }
    kv->val = copy;
    zhash_arena = w->a;
    zhash_oom = 0;
    HASH_ADD_KEYPTR(hh, w->kv_index, kv->key, strlen(kv->key), kv);
    if (zhash_oom) {
        werr(w, ZE_NOMEM, "key '%s': out of memory for the key index", key);
        return;
    }
    *w->kv_tail = kv;
    w->kv_tail = &kv->next;
    w->n_kv++;
}

void gguf_set_u32(gguf_writer *w, const char *key, uint32_t v) {
    gguf_set_value(w, key, &(gguf_value){.type = GGUF_U32, .u = v});
}
void gguf_set_i32(gguf_writer *w, const char *key, int32_t v) {
    gguf_set_value(w, key, &(gguf_value){.type = GGUF_I32, .i = v});
}
void gguf_set_u64(gguf_writer *w, const char *key, uint64_t v) {
    gguf_set_value(w, key, &(gguf_value){.type = GGUF_U64, .u = v});
}
void gguf_set_f32(gguf_writer *w, const char *key, float v) {
    gguf_set_value(w, key, &(gguf_value){.type = GGUF_F32, .f = v});
}
void gguf_set_bool(gguf_writer *w, const char *key, bool v) {
    gguf_set_value(w, key, &(gguf_value){.type = GGUF_BOOL, .u = v});
}
void gguf_set_str(gguf_writer *w, const char *key, const char *v) {
    gguf_set_value(w, key, &(gguf_value){.type = GGUF_STRING, .s = {v ? strlen(v) : 1, v}});
}

/* The array setters build a temporary item list; it is copied and dropped. */
static void set_arr(gguf_writer *w, const char *key, gguf_vtype elem, const void *v, uint64_t n) {
    if (!w || w->err) return;
    gguf_value *items = n && v ? calloc((size_t)n, sizeof *items) : NULL;
    if (n && !items) {
        werr(w, v ? ZE_NOMEM : ZE_INVALID, "key '%s': %" PRIu64 " array items: expected them, found %s", key,
             n, v ? "no memory to copy them" : "NULL");
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        items[i].type = elem;
        if (elem == GGUF_STRING) {
            const char *s = ((const char *const *)v)[i];
            items[i].s = (gguf_str){s ? strlen(s) : 1, s};
        } else if (elem == GGUF_I32) {
            items[i].i = ((const int32_t *)v)[i];
        } else {
            items[i].f = ((const float *)v)[i];
        }
    }
    gguf_value arr = {.type = GGUF_ARRAY, .arr = {elem, n, items}};
    gguf_set_value(w, key, &arr);
    free(items);
}

void gguf_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    set_arr(w, key, GGUF_STRING, v, n);
}
void gguf_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    set_arr(w, key, GGUF_I32, v, n);
}
void gguf_set_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n) {
    set_arr(w, key, GGUF_F32, v, n);
}

/* ---- tensors ----------------------------------------------------------------- */

/* The same rules the reader applies, so that the writer cannot produce a file
 * the reader rejects. */
static bool check_tensor(gguf_writer *w, const char *name, ztype type, uint32_t n_dims, const int64_t *ne,
                         const void *data, uint64_t nbytes) {
    const ztype_info *ti = ztype_get((uint32_t)type);
    if (!name || !*name)
        return werr(w, ZE_INVALID, "tensor with no name: expected a non-empty name, found %s",
                    name ? "\"\"" : "NULL");
    if (!ti) return werr(w, ZE_INVALID, "tensor '%s': expected a ggml type, found id %d", name, (int)type);
    if (n_dims > GGUF_MAX_DIMS || (n_dims && !ne))
        return werr(w, ZE_INVALID, "tensor '%s': expected at most %d dimensions, found %" PRIu32 "%s", name,
                    GGUF_MAX_DIMS, n_dims, n_dims && !ne ? " and NULL" : "");
    int64_t prod = 1;
    for (uint32_t j = 0; j < n_dims; j++) {
        if (ne[j] <= 0 || ne[j] > INT64_MAX / prod)
            return werr(w, ZE_INVALID,
                        "tensor '%s': dimension %" PRIu32 ": expected a positive size whose "
                        "product fits int64, found %" PRId64,
                        name, j, ne[j]);
        prod *= ne[j];
    }
    int64_t ne0 = n_dims ? ne[0] : 1;
    if (ne0 % ti->block_elems != 0)
        return werr(w, ZE_INVALID,
                    "tensor '%s': row length is not a multiple of the %s block: expected a "
                    "multiple of %" PRIu32 ", found %" PRId64,
                    name, ti->name, ti->block_elems, ne0);
    bool ok = false;
    uint64_t row = ztype_row_bytes(type, (uint64_t)ne0, &ok), rows = (uint64_t)(prod / ne0);
    if (!ok || row > UINT64_MAX / rows || row * rows != nbytes)
        return werr(w, ZE_INVALID,
                    "tensor '%s': data size for %" PRId64 " %s elements in rows of %" PRId64
                    ": expected %" PRIu64 " bytes, found %" PRIu64,
                    name, prod, ti->name, ne0, ok && row <= UINT64_MAX / rows ? row * rows : 0, nbytes);
    if (nbytes && !data) return werr(w, ZE_INVALID, "tensor '%s': expected data, found NULL", name);
    wtensor *dup = NULL;
    HASH_FIND_STR(w->t_index, name, dup);
    if (dup)
        return werr(w, ZE_INVALID, "duplicate tensor '%s': expected each name once, found it twice", name);
    return true;
}

void gguf_add_tensor(gguf_writer *w, const char *name, ztype type, uint32_t n_dims, const int64_t *ne,
                     const void *data, uint64_t nbytes) {
    if (!w || w->err || !check_tensor(w, name, type, n_dims, ne, data, nbytes)) return;
    wtensor *t = zarena_alloc(w->a, sizeof *t);
    uint8_t *copy = t ? zarena_alloc(w->a, (size_t)nbytes) : NULL;
    if (t) t->name = zarena_strdup(w->a, name);
    if (!t || !copy || !t->name) {
        werr(w, ZE_NOMEM, "tensor '%s': out of memory for %" PRIu64 " bytes", name, nbytes);
        return;
    }
    memcpy(copy, data, (size_t)nbytes);
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t j = 0; j < GGUF_MAX_DIMS; j++)
        t->ne[j] = j < n_dims ? ne[j] : 1;
    t->data = copy;
    t->nbytes = nbytes;
    zhash_arena = w->a;
    zhash_oom = 0;
    HASH_ADD_KEYPTR(hh, w->t_index, t->name, strlen(t->name), t);
    if (zhash_oom) {
        werr(w, ZE_NOMEM, "tensor '%s': out of memory for the name index", name);
        return;
    }
    *w->t_tail = t;
    w->t_tail = &t->next;
    w->n_tensors++;
}

/* ---- output ------------------------------------------------------------------ */

/* A writer over a stdio stream that remembers the first errno and counts
 * the bytes it accepted (the current file offset). */
typedef struct wbuf {
    FILE *fp;
    int err;
    uint64_t written;
} wbuf;

static void wb_put(wbuf *b, const void *p, size_t n) {
    if (b->err) return;
    b->written += n;
    if (n && fwrite(p, 1, n, b->fp) != n) b->err = errno ? errno : EIO;
}

static void put_u32(wbuf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    wb_put(b, x, 4);
}

static void put_u64(wbuf *b, uint64_t v) {
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

static void put_str(wbuf *b, const char *s, uint64_t len) {
    put_u64(b, len);
    wb_put(b, s, (size_t)len);
}

static void put_zeros(wbuf *b, uint64_t n) {
    static const uint8_t zeros[256];
    for (; n > 0 && !b->err; n -= n > sizeof zeros ? sizeof zeros : n)
        wb_put(b, zeros, n > sizeof zeros ? sizeof zeros : (size_t)n);
}

static void put_value(wbuf *b, const gguf_value *v) {
    uint32_t f32;
    float f;
    switch (v->type) {
    case GGUF_U8:
    case GGUF_I8:
    case GGUF_BOOL: wb_put(b, &(uint8_t){(uint8_t)v->u}, 1); break;
    case GGUF_U16:
    case GGUF_I16: wb_put(b, (uint8_t[2]){(uint8_t)v->u, (uint8_t)(v->u >> 8)}, 2); break;
    case GGUF_U32:
    case GGUF_I32: put_u32(b, (uint32_t)v->u); break;
    case GGUF_U64:
    case GGUF_I64: put_u64(b, v->u); break;
    case GGUF_F32:
        f = (float)v->f;
        memcpy(&f32, &f, 4);
        put_u32(b, f32);
        break;
    case GGUF_F64: {
        uint64_t u;
        memcpy(&u, &v->f, 8);
        put_u64(b, u);
        break;
    }
    case GGUF_STRING: put_str(b, v->s.ptr, v->s.len); break;
    case GGUF_ARRAY:
        put_u32(b, (uint32_t)v->arr.elem);
        put_u64(b, v->arr.n);
        for (uint64_t i = 0; i < v->arr.n; i++)
            put_value(b, &v->arr.items[i]);
        break;
    default: break; /* unreachable: copy_value admits only known types */
    }
}

static void pad_to(wbuf *b, uint64_t align) {
    put_zeros(b, (align - b->written % align) % align);
}

static void emit(const gguf_writer *w, wbuf *b, uint64_t align) {
    put_u32(b, GGUF_MAGIC);
    put_u32(b, 3);
    put_u64(b, w->n_tensors);
    put_u64(b, w->n_kv);
    for (const wkv *kv = w->kvs; kv; kv = kv->next) {
        put_str(b, kv->key, strlen(kv->key));
        put_u32(b, (uint32_t)kv->val.type);
        put_value(b, &kv->val);
    }
    for (const wtensor *t = w->tensors; t; t = t->next) {
        put_str(b, t->name, strlen(t->name));
        put_u32(b, t->n_dims);
        for (uint32_t j = 0; j < t->n_dims; j++)
            put_u64(b, (uint64_t)t->ne[j]);
        put_u32(b, (uint32_t)t->type);
        put_u64(b, t->offset);
    }
    pad_to(b, align);
    /* Each tensor is padded to the alignment, the last one too, as llama.cpp writes it. */
    for (const wtensor *t = w->tensors; t; t = t->next) {
        wb_put(b, t->data, (size_t)t->nbytes);
        pad_to(b, align);
    }
}

/* Alignment from general.alignment when set; it must be what the reader accepts. */
static zstatus layout(gguf_writer *w, const char *path, uint64_t *align, zdiag *d) {
    wkv *kv = NULL;
    HASH_FIND_STR(w->kv_index, "general.alignment", kv);
    *align = GGUF_DEFAULT_ALIGNMENT;
    if (kv) {
        uint64_t a = kv->val.u;
        if (kv->val.type != GGUF_U32 || a == 0 || (a & (a - 1)))
            return zdiag_set(d, ZE_INVALID,
                             "cannot write %s: general.alignment: expected a u32 power of two, "
                             "found %s %" PRIu64,
                             path, gguf_vtype_name(kv->val.type), a);
        *align = a;
    }
    uint64_t off = 0;
    for (wtensor *t = w->tensors; t; t = t->next) {
        uint64_t padded = t->nbytes + (*align - t->nbytes % *align) % *align;
        if (padded < t->nbytes || off > UINT64_MAX - padded)
            return zdiag_set(d, ZE_INVALID,
                             "cannot write %s: tensor data exceeds 2^64 bytes: expected less, "
                             "found more at tensor '%s'",
                             path, t->name);
        t->offset = off;
        off += padded;
    }
    return ZOK;
}

zstatus gguf_writer_write(gguf_writer *w, const char *path, zdiag *d) {
    if (!w)
        return zdiag_set(d, ZE_NOMEM, "cannot write %s: out of memory: expected a writer, found NULL", path);
    if (w->err) return zdiag_set(d, w->err, "cannot write %s: %s", path, w->msg);
    uint64_t align;
    zstatus st = layout(w, path, &align, d);
    zfile_out o;
    if (!st) st = zfile_begin(&o, path, d);
    if (st) return st;
    wbuf b = {o.fp, 0, 0};
    errno = 0;
    emit(w, &b, align);
    if (b.err) st = zdiag_set(d, ZE_IO, "cannot write %s: %s", path, strerror(b.err));
    return zfile_end(&o, st, d);
}
