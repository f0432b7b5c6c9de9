/* GGUF v2/v3 reader: maps the file and checks every byte before use.
 *
 * Layout (all little-endian):
 *   header   "GGUF", u32 version, u64 n_tensors, u64 n_kv
 *   n_kv     { string key; u32 vtype; value }
 *            value: a scalar, a string { u64 len; bytes }, or an array
 *            { u32 elem; u64 n; n values of elem } (arrays may nest)
 *   n_tensor { string name; u32 n_dims; u64 ne[n_dims]; u32 ggml_type; u64 offset }
 *   padding  to general.alignment (default 32); the data section starts here
 *   data     each tensor at data_offset + offset
 *
 * Every count is checked against the bytes left before anything is allocated
 * for it, so a hostile header cannot make the reader allocate more than a
 * small multiple of the file's size. The rules are listed, one per row, in
 * docs/gguf-validation.md. */
#include "gguf.h"

#include "../ir/fileio.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Smallest encodings, used to bound counts by the bytes that remain. */
enum {
    HEADER_BYTES = 24,     /* magic, version, n_tensors, n_kv */
    MIN_KV_BYTES = 14,     /* key length, 1-byte key, value type, 1-byte value */
    MIN_TENSOR_BYTES = 25, /* name length, 1-byte name, n_dims (0), type, offset */
    NAME_SHOWN = 64,       /* names longer than this are cut in messages */
};

/* Per value type: its name and its encoded size; for STRING and ARRAY the
 * size is the smallest encoding (the length, or the element type + count). */
static const struct {
    const char *name;
    unsigned size;
} vtypes[GGUF_VTYPE_COUNT] = {
    [GGUF_U8] = {"u8", 1},        [GGUF_I8] = {"i8", 1},     [GGUF_U16] = {"u16", 2},
    [GGUF_I16] = {"i16", 2},      [GGUF_U32] = {"u32", 4},   [GGUF_I32] = {"i32", 4},
    [GGUF_F32] = {"f32", 4},      [GGUF_BOOL] = {"bool", 1}, [GGUF_STRING] = {"string", 8},
    [GGUF_ARRAY] = {"array", 12}, [GGUF_U64] = {"u64", 8},   [GGUF_I64] = {"i64", 8},
    [GGUF_F64] = {"f64", 8},
};

const char *gguf_vtype_name(gguf_vtype t) {
    return (unsigned)t < GGUF_VTYPE_COUNT ? vtypes[t].name : "?";
}

typedef struct reader {
    const uint8_t *p;
    uint64_t size, pos; /* invariant: pos <= size */
    const char *path;
    zarena *a;
    zdiag *d;
    char shown[2][NAME_SHOWN + 4]; /* printable copies of names, for messages */
    int next_shown;
    char label[NAME_SHOWN + 64];
} reader;

/* ---- messages ------------------------------------------------------------ */

static zstatus fail(reader *r, zstatus code, uint64_t off, const char *fmt, ...) ZPRINTF(4, 5);
static zstatus fail(reader *r, zstatus code, uint64_t off, const char *fmt, ...) {
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return zdiag_set(r->d, code, "%s: offset %" PRIu64 ": %s", r->path, off, what);
}

/* A name from the file may hold any byte, and a message must stay one short
 * line: replace what is not printable ASCII and cut long names. */
static const char *shown(reader *r, const char *s) {
    char *out = r->shown[r->next_shown++ & 1];
    size_t i = 0;
    for (; s[i] && i < NAME_SHOWN; i++) {
        unsigned char c = (unsigned char)s[i];
        out[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    strcpy(out + i, s[i] ? "..." : "");
    return out;
}

/* "what" alone, or "what 'name'" when the field belongs to a named thing. */
static const char *label(reader *r, const char *what, const char *name) {
    if (!name) return what;
    snprintf(r->label, sizeof r->label, "%s '%s'", what, shown(r, name));
    return r->label;
}

static zstatus oom(reader *r, uint64_t bytes) {
    return fail(r, ZE_NOMEM, r->pos,
                "out of memory while parsing: expected %" PRIu64 " more bytes, found none", bytes);
}

/* ---- primitives ------------------------------------------------------------ */

static uint32_t le32(const uint8_t *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static uint64_t le64(const uint8_t *b) {
    return le32(b) | (uint64_t)le32(b + 4) << 32;
}

static zstatus need(reader *r, uint64_t n, const char *what, const char *name) {
    if (r->size - r->pos >= n) return ZOK;
    return fail(r, ZE_FORMAT, r->pos, "truncated %s: expected %" PRIu64 " bytes, found %" PRIu64,
                label(r, what, name), n, r->size - r->pos);
}

static zstatus rd_u32(reader *r, uint32_t *v, const char *what, const char *name) {
    zstatus st = need(r, 4, what, name);
    if (st) return st;
    *v = le32(r->p + r->pos);
    r->pos += 4;
    return ZOK;
}

static zstatus rd_u64(reader *r, uint64_t *v, const char *what, const char *name) {
    zstatus st = need(r, 8, what, name);
    if (st) return st;
    *v = le64(r->p + r->pos);
    r->pos += 8;
    return ZOK;
}

/* A length-prefixed string, copied into the arena with a NUL added. */
static zstatus rd_str(reader *r, gguf_str *s, const char *what, const char *name) {
    uint64_t at = r->pos, len;
    zstatus st = rd_u64(r, &len, what, name);
    if (st) return st;
    if (len > r->size - r->pos)
        return fail(r, ZE_FORMAT, at,
                    "length of %s runs past the end of the file: expected at most %" PRIu64
                    ", found %" PRIu64,
                    label(r, what, name), r->size - r->pos, len);
    char *c = zarena_strndup(r->a, (const char *)r->p + r->pos, (size_t)len);
    if (!c) return oom(r, len + 1);
    s->len = len;
    s->ptr = c;
    r->pos += len;
    return ZOK;
}

/* ---- metadata values ------------------------------------------------------- */

static zstatus rd_value(reader *r, gguf_vtype t, gguf_value *v, int depth, const char *key);

static zstatus rd_scalar(reader *r, gguf_vtype t, gguf_value *v, const char *key) {
    zstatus st = need(r, vtypes[t].size, "value of key", key);
    if (st) return st;
    const uint8_t *b = r->p + r->pos;
    uint32_t u32;
    float f32;
    switch (t) {
    case GGUF_U8: v->u = b[0]; break;
    case GGUF_I8: v->i = (int8_t)b[0]; break;
    case GGUF_U16: v->u = (uint16_t)(b[0] | b[1] << 8); break;
    case GGUF_I16: v->i = (int16_t)(uint16_t)(b[0] | b[1] << 8); break;
    case GGUF_U32: v->u = le32(b); break;
    case GGUF_I32: v->i = (int32_t)le32(b); break;
    case GGUF_U64: v->u = le64(b); break;
    case GGUF_I64: v->i = (int64_t)le64(b); break;
    case GGUF_F32:
        u32 = le32(b);
        memcpy(&f32, &u32, 4);
        v->f = f32;
        break;
    case GGUF_F64: {
        uint64_t u64 = le64(b);
        memcpy(&v->f, &u64, 8);
        break;
    }
    case GGUF_BOOL:
        /* Any other byte means the writer or the file is broken. */
        if (b[0] > 1)
            return fail(r, ZE_FORMAT, r->pos, "bool value of key '%s' is invalid: expected 0 or 1, found %u",
                        shown(r, key), b[0]);
        v->u = b[0];
        break;
    default: return fail(r, ZE_INTERNAL, r->pos, "value type %d reached rd_scalar: expected a scalar", t);
    }
    r->pos += vtypes[t].size;
    return ZOK;
}

static zstatus rd_array(reader *r, gguf_value *v, int depth, const char *key) {
    uint64_t at = r->pos, n;
    uint32_t elem;
    if (depth > GGUF_MAX_ARRAY_DEPTH)
        return fail(r, ZE_FORMAT, at,
                    "array of key '%s' is nested too deeply: expected at most %d levels, found %d",
                    shown(r, key), GGUF_MAX_ARRAY_DEPTH, depth);
    zstatus st = rd_u32(r, &elem, "array element type of key", key);
    if (st) return st;
    if (elem >= GGUF_VTYPE_COUNT)
        return fail(r, ZE_FORMAT, at,
                    "unknown array element type of key '%s': expected 0 to %d, found %" PRIu32, shown(r, key),
                    GGUF_VTYPE_COUNT - 1, elem);
    uint64_t n_at = r->pos;
    if ((st = rd_u64(r, &n, "array length of key", key))) return st;
    uint64_t most = (r->size - r->pos) / vtypes[elem].size;
    if (n > most)
        return fail(r, ZE_FORMAT, n_at,
                    "array length of key '%s' runs past the end of the file: "
                    "expected at most %" PRIu64 " %s items, found %" PRIu64,
                    shown(r, key), most, vtypes[elem].name, n);
    gguf_value *items = zarena_array(r->a, n ? (size_t)n : 1, sizeof *items);
    if (!items) return oom(r, n * sizeof *items);
    v->arr.elem = (gguf_vtype)elem;
    v->arr.n = n;
    v->arr.items = items;
    for (uint64_t i = 0; i < n; i++)
        if ((st = rd_value(r, (gguf_vtype)elem, &items[i], depth, key))) return st;
    return ZOK;
}

/* depth counts the arrays that enclose this value. */
static zstatus rd_value(reader *r, gguf_vtype t, gguf_value *v, int depth, const char *key) {
    v->type = t;
    if (t == GGUF_STRING) return rd_str(r, &v->s, "string value of key", key);
    if (t == GGUF_ARRAY) return rd_array(r, v, depth + 1, key);
    return rd_scalar(r, t, v, key);
}

/* Keys and tensor names: non-empty and free of NUL bytes, because they are
 * looked up as C strings. */
static zstatus check_name(reader *r, const gguf_str *s, uint64_t at, const char *what) {
    if (s->len == 0)
        return fail(r, ZE_FORMAT, at, "empty %s: expected a non-empty string, found length 0", what);
    const char *nul = memchr(s->ptr, 0, (size_t)s->len);
    if (nul)
        return fail(r, ZE_FORMAT, at,
                    "%s '%s' contains a NUL byte: expected none in %" PRIu64 " bytes, found one "
                    "at byte %td",
                    what, shown(r, s->ptr), s->len, nul - s->ptr);
    return ZOK;
}

static zstatus rd_kv(reader *r, gguf_file *f, gguf_kv *kv) {
    gguf_str key;
    uint32_t type;
    kv->offset = r->pos;
    zstatus st = rd_str(r, &key, "key", NULL);
    if (st || (st = check_name(r, &key, kv->offset, "key"))) return st;
    kv->key = key.ptr;
    gguf_kv *dup = NULL;
    HASH_FIND(hh, f->kv_index, key.ptr, (size_t)key.len, dup);
    if (dup)
        return fail(r, ZE_FORMAT, kv->offset,
                    "duplicate key '%s': expected each key once, found a second "
                    "definition (the first is at offset %" PRIu64 ")",
                    shown(r, kv->key), dup->offset);
    kv->value_offset = r->pos;
    if ((st = rd_u32(r, &type, "value type of key", kv->key))) return st;
    if (type >= GGUF_VTYPE_COUNT)
        return fail(r, ZE_FORMAT, kv->value_offset,
                    "unknown value type of key '%s': expected 0 to %d, found %" PRIu32, shown(r, kv->key),
                    GGUF_VTYPE_COUNT - 1, type);
    if ((st = rd_value(r, (gguf_vtype)type, &kv->val, 0, kv->key))) return st;
    zhash_arena = r->a;
    zhash_oom = 0;
    HASH_ADD_KEYPTR(hh, f->kv_index, kv->key, (size_t)key.len, kv);
    return zhash_oom ? oom(r, sizeof(UT_hash_table)) : ZOK;
}

static zstatus rd_alignment(reader *r, gguf_file *f) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find_kv(f, "general.alignment");
    if (!kv) return ZOK;
    if (kv->val.type != GGUF_U32)
        return fail(r, ZE_FORMAT, kv->value_offset,
                    "general.alignment has the wrong type: expected u32, found %s",
                    gguf_vtype_name(kv->val.type));
    uint64_t a = kv->val.u;
    if (a == 0 || (a & (a - 1)) != 0)
        return fail(r, ZE_FORMAT, kv->value_offset + 4,
                    "general.alignment is not a power of two: expected a "
                    "nonzero power of two, found %" PRIu64,
                    a);
    f->alignment = a;
    return ZOK;
}

/* ---- tensor infos ---------------------------------------------------------- */

static zstatus rd_tensor_name(reader *r, gguf_file *f, gguf_tensor *t) {
    gguf_str name;
    zstatus st = rd_str(r, &name, "tensor name", NULL);
    if (st || (st = check_name(r, &name, t->info_offset, "tensor name"))) return st;
    t->name = name.ptr;
    gguf_tensor *dup = NULL;
    HASH_FIND(hh, f->tensor_index, name.ptr, (size_t)name.len, dup);
    if (dup)
        return fail(r, ZE_FORMAT, t->info_offset,
                    "duplicate tensor name '%s': expected each name once, found a "
                    "second tensor (the first is at offset %" PRIu64 ")",
                    shown(r, t->name), dup->info_offset);
    return ZOK;
}

static zstatus rd_shape(reader *r, gguf_tensor *t) {
    uint64_t at = r->pos;
    uint32_t nd;
    zstatus st = rd_u32(r, &nd, "dimension count of tensor", t->name);
    if (st) return st;
    if (nd > GGUF_MAX_DIMS)
        return fail(r, ZE_FORMAT, at,
                    "tensor '%s' has too many dimensions: expected at most %d, found %" PRIu32,
                    shown(r, t->name), GGUF_MAX_DIMS, nd);
    t->n_dims = nd;
    int64_t prod = 1;
    for (uint32_t j = 0; j < GGUF_MAX_DIMS; j++)
        t->ne[j] = 1;
    for (uint32_t j = 0; j < nd; j++) {
        uint64_t dat = r->pos, u;
        if ((st = rd_u64(r, &u, "dimension of tensor", t->name))) return st;
        int64_t ne = (int64_t)u; /* stored as u64, used as int64 by ggml: >= 2^63 is negative */
        if (ne <= 0)
            return fail(r, ZE_FORMAT, dat,
                        "dimension %" PRIu32 " of tensor '%s' is not positive: expected at "
                        "least 1, found %" PRId64,
                        j, shown(r, t->name), ne);
        if (ne > INT64_MAX / prod)
            return fail(r, ZE_FORMAT, dat,
                        "element count of tensor '%s' overflows int64: expected a product of "
                        "dimensions at most %" PRId64 ", found %" PRId64 " x %" PRId64,
                        shown(r, t->name), INT64_MAX, prod, ne);
        prod *= ne;
        t->ne[j] = ne;
    }
    t->n_elems = (uint64_t)prod;
    return ZOK;
}

static zstatus rd_type(reader *r, gguf_tensor *t) {
    uint64_t at = r->pos, ne0_at = at - 8 * (uint64_t)t->n_dims;
    uint32_t id;
    zstatus st = rd_u32(r, &id, "type of tensor", t->name);
    if (st) return st;
    const ztype_info *ti = ztype_get(id);
    /* An id we do not know may be a newer ggml type, not a broken file. */
    if (!ti)
        return fail(r, ZE_UNSUPPORTED, at,
                    "tensor '%s' has an unknown type: expected a ggml type id, found %" PRIu32,
                    shown(r, t->name), id);
    t->type = (ztype)id;
    if (t->ne[0] % ti->block_elems != 0)
        return fail(r, ZE_FORMAT, ne0_at,
                    "row length of tensor '%s' is not a multiple of the %s block: expected "
                    "a multiple of %" PRIu32 ", found %" PRId64,
                    shown(r, t->name), ti->name, ti->block_elems, t->ne[0]);
    bool ok = false;
    uint64_t row = ztype_row_bytes(t->type, (uint64_t)t->ne[0], &ok);
    uint64_t rows = t->n_elems / (uint64_t)t->ne[0];
    if (!ok || row > UINT64_MAX / rows)
        return fail(r, ZE_FORMAT, at,
                    "data size of tensor '%s' overflows: expected at most %" PRIu64 " bytes, "
                    "found %" PRIu64 " elements of %s",
                    shown(r, t->name), UINT64_MAX, t->n_elems, ti->name);
    t->nbytes = row * rows;
    return ZOK;
}

static zstatus rd_tensor(reader *r, gguf_file *f, gguf_tensor *t) {
    t->info_offset = r->pos;
    zstatus st = rd_tensor_name(r, f, t);
    if (st || (st = rd_shape(r, t)) || (st = rd_type(r, t))) return st;
    uint64_t at = r->pos;
    if ((st = rd_u64(r, &t->offset, "data offset of tensor", t->name))) return st;
    if (t->offset % f->alignment != 0)
        return fail(r, ZE_FORMAT, at,
                    "data offset of tensor '%s' is misaligned: expected a multiple of %" PRIu64
                    ", found %" PRIu64,
                    shown(r, t->name), f->alignment, t->offset);
    zhash_arena = r->a;
    zhash_oom = 0;
    HASH_ADD_KEYPTR(hh, f->tensor_index, t->name, strlen(t->name), t);
    return zhash_oom ? oom(r, sizeof(UT_hash_table)) : ZOK;
}

/* File offset of a tensor info's data offset field (for messages after the infos are read). */
static uint64_t offset_field(const gguf_tensor *t) {
    return t->info_offset + 8 + strlen(t->name) + 4 + 8 * (uint64_t)t->n_dims + 4;
}

static int by_offset(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x < y ? -1 : x > y; /* file order among equal offsets, for a stable message */
}

static zstatus check_data(reader *r, gguf_file *f) {
    uint64_t avail = f->data_offset <= f->size ? f->size - f->data_offset : 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return fail(r, ZE_FORMAT, offset_field(t),
                        "data of tensor '%s' runs past the end of the file: "
                        "expected at most %" PRIu64 " bytes after the data section at offset %" PRIu64
                        ", found "
                        "%" PRIu64 " + %" PRIu64,
                        shown(r, t->name), avail, f->data_offset, t->offset, t->nbytes);
        t->data = f->base + f->data_offset + t->offset;
    }
    if (f->n_tensors < 2) return ZOK;
    gguf_tensor **order = zarena_array(r->a, (size_t)f->n_tensors, sizeof *order);
    if (!order) return oom(r, f->n_tensors * sizeof *order);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        order[i] = &f->tensors[i];
    qsort(order, (size_t)f->n_tensors, sizeof *order, by_offset);
    for (uint64_t i = 1; i < f->n_tensors; i++) {
        const gguf_tensor *prev = order[i - 1], *t = order[i];
        if (t->offset < prev->offset + prev->nbytes)
            return fail(r, ZE_FORMAT, offset_field(t),
                        "data of tensor '%s' overlaps tensor '%s': expected an "
                        "offset of at least %" PRIu64 ", found %" PRIu64,
                        shown(r, t->name), shown(r, prev->name), prev->offset + prev->nbytes, t->offset);
    }
    return ZOK;
}

/* ---- header and driver ----------------------------------------------------- */

static zstatus rd_version(reader *r, gguf_file *f) {
    zstatus st = rd_u32(r, &f->version, "version", NULL);
    if (st) return st;
    uint32_t v = f->version, swapped = (v >> 24) | (v >> 8 & 0xff00) | (v << 8 & 0xff0000) | (v << 24);
    if (v == 2 || v == 3) return ZOK;
    if (v == 1)
        return fail(r, ZE_UNSUPPORTED, 4,
                    "GGUF version 1 is no longer supported (re-convert the model): "
                    "expected 2 or 3, found 1");
    if (swapped >= 1 && swapped <= 3)
        return fail(r, ZE_UNSUPPORTED, 4,
                    "big-endian GGUF files are not supported (the version is byte-swapped): "
                    "expected 2 or 3 little-endian, found %" PRIu32 " big-endian",
                    swapped);
    return fail(r, ZE_UNSUPPORTED, 4, "unsupported GGUF version: expected 2 or 3, found %" PRIu32, v);
}

static zstatus rd_header(reader *r, gguf_file *f) {
    zstatus st = need(r, 4, "magic", NULL);
    if (st) return st;
    if (le32(r->p) != GGUF_MAGIC)
        return fail(r, ZE_FORMAT, 0,
                    "bad magic, not a GGUF file: expected 47 47 55 46 (\"GGUF\"), found "
                    "%02x %02x %02x %02x",
                    r->p[0], r->p[1], r->p[2], r->p[3]);
    r->pos = 4;
    if ((st = rd_version(r, f)) || (st = rd_u64(r, &f->n_tensors, "tensor count", NULL)) ||
        (st = rd_u64(r, &f->n_kv, "key-value count", NULL)))
        return st;
    uint64_t room = r->size - HEADER_BYTES;
    if (f->n_tensors > room / MIN_TENSOR_BYTES)
        return fail(r, ZE_FORMAT, 8,
                    "tensor count %" PRIu64 " is absurd: expected at most %" PRIu64 " for a %" PRIu64
                    "-byte file, found %" PRIu64,
                    f->n_tensors, room / MIN_TENSOR_BYTES, r->size, f->n_tensors);
    room -= f->n_tensors * MIN_TENSOR_BYTES;
    if (f->n_kv > room / MIN_KV_BYTES)
        return fail(r, ZE_FORMAT, 16,
                    "key-value count %" PRIu64 " is absurd: expected at most %" PRIu64 " for a %" PRIu64
                    "-byte file with %" PRIu64 " tensors, found %" PRIu64,
                    f->n_kv, room / MIN_KV_BYTES, r->size, f->n_tensors, f->n_kv);
    return ZOK;
}

static zstatus parse(reader *r, gguf_file *f) {
    zstatus st = rd_header(r, f);
    if (st) return st;
    f->kvs = zarena_array(r->a, f->n_kv ? (size_t)f->n_kv : 1, sizeof *f->kvs);
    if (!f->kvs) return oom(r, f->n_kv * sizeof *f->kvs);
    for (uint64_t i = 0; i < f->n_kv; i++)
        if ((st = rd_kv(r, f, &f->kvs[i]))) return st;
    if ((st = rd_alignment(r, f))) return st;
    /* Re-bound the tensor count by what is left after the metadata. */
    if (f->n_tensors > (r->size - r->pos) / MIN_TENSOR_BYTES)
        return fail(r, ZE_FORMAT, 8,
                    "tensor count %" PRIu64 " is absurd: expected at most %" PRIu64 " for the %" PRIu64
                    " bytes after the metadata, found %" PRIu64,
                    f->n_tensors, (r->size - r->pos) / MIN_TENSOR_BYTES, r->size - r->pos, f->n_tensors);
    f->tensors = zarena_array(r->a, f->n_tensors ? (size_t)f->n_tensors : 1, sizeof *f->tensors);
    if (!f->tensors) return oom(r, f->n_tensors * sizeof *f->tensors);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if ((st = rd_tensor(r, f, &f->tensors[i]))) return st;
    f->header_end = r->pos;
    uint64_t pad = (f->alignment - f->header_end % f->alignment) % f->alignment;
    f->data_offset = f->header_end + pad; /* header_end <= size, so this cannot wrap for a real buffer */
    return check_data(r, f);
}

static zstatus load(const uint8_t *base, uint64_t size, const char *path, gguf_file **out, zdiag *d) {
    zarena *a = zarena_new();
    gguf_file *f = a ? zarena_alloc(a, sizeof *f) : NULL;
    const char *p = f ? zarena_strdup(a, path) : NULL;
    if (!p) {
        zarena_free(a);
        return zdiag_set(d, ZE_NOMEM, "%s: out of memory before parsing: expected a few KiB, found none",
                         path);
    }
    f->arena = a;
    f->path = p;
    f->base = base;
    f->size = size;
    reader r = {.p = base, .size = size, .path = p, .a = a, .d = d};
    zstatus st = parse(&r, f);
    if (st) {
        zarena_free(a);
        return st;
    }
    *out = f;
    return ZOK;
}

zstatus gguf_parse(const void *buf, uint64_t size, const char *name, gguf_file **out, zdiag *d) {
    *out = NULL;
    if (!name) name = "<memory>";
    if (!buf && size)
        return zdiag_set(d, ZE_INVALID, "%s: no buffer: expected %" PRIu64 " bytes, found NULL", name, size);
    return load(buf, size, name, out, d);
}

zstatus gguf_open(const char *path, gguf_file **out, zdiag *d) {
    *out = NULL;
    const void *map;
    uint64_t size;
    zstatus st = zfile_map(path, &map, &size, d);
    if (st) return st;
    st = load(map, size, path, out, d);
    if (st) {
        zfile_unmap(map, size);
        return st;
    }
    (*out)->map = (void *)map;
    (*out)->map_size = size;
    return ZOK;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    void *map = f->map;
    uint64_t n = f->map_size;
    zarena_free(f->arena); /* f itself lives in the arena */
    zfile_unmap(map, n);
}

/* ---- lookups and typed getters --------------------------------------------- */

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    gguf_kv *kv = NULL;
    if (f && key) HASH_FIND(hh, f->kv_index, key, strlen(key), kv);
    return kv;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    gguf_tensor *t = NULL;
    if (f && name) HASH_FIND(hh, f->tensor_index, name, strlen(name), t);
    return t;
}

static const char *type_desc(const gguf_value *v, char *buf, size_t n) {
    if (v->type != GGUF_ARRAY) return gguf_vtype_name(v->type);
    snprintf(buf, n, "array of %s", gguf_vtype_name(v->arr.elem));
    return buf;
}

static zstatus missing(const gguf_file *f, const char *key, zdiag *d) {
    return zdiag_set(d, ZE_INVALID, "%s: missing key '%s': expected it in the metadata, found no such key",
                     f->path, key);
}

static zstatus wrong_type(const gguf_file *f, const gguf_kv *kv, const char *want, zdiag *d) {
    char buf[48];
    return zdiag_set(d, ZE_FORMAT,
                     "%s: offset %" PRIu64 ": key '%s' has the wrong type: expected %s, found %s", f->path,
                     kv->value_offset, kv->key, want, type_desc(&kv->val, buf, sizeof buf));
}

static zstatus out_of_range(const gguf_file *f, const gguf_kv *kv, const char *want, zdiag *d) {
    const gguf_value *v = &kv->val;
    bool sgn = v->type == GGUF_I8 || v->type == GGUF_I16 || v->type == GGUF_I32 || v->type == GGUF_I64;
    char found[32];
    if (sgn)
        snprintf(found, sizeof found, "%" PRId64, v->i);
    else
        snprintf(found, sizeof found, "%" PRIu64, v->u);
    return zdiag_set(d, ZE_FORMAT, "%s: offset %" PRIu64 ": key '%s' is out of range: expected %s, found %s",
                     f->path, kv->value_offset, kv->key, want, found);
}

/* Finds an integer-typed key; *sgn tells which union member holds it. */
static zstatus find_int(const gguf_file *f, const char *key, const char *want, const gguf_kv **kv, bool *sgn,
                        zdiag *d) {
    *kv = gguf_find_kv(f, key);
    if (!*kv) return missing(f, key, d);
    switch ((*kv)->val.type) {
    case GGUF_U8:
    case GGUF_U16:
    case GGUF_U32:
    case GGUF_U64: *sgn = false; return ZOK;
    case GGUF_I8:
    case GGUF_I16:
    case GGUF_I32:
    case GGUF_I64: *sgn = true; return ZOK;
    default: return wrong_type(f, *kv, want, d);
    }
}

static zstatus get_unsigned(const gguf_file *f, const char *key, uint64_t max, const char *want,
                            uint64_t *out, zdiag *d) {
    const gguf_kv *kv;
    bool sgn;
    zstatus st = find_int(f, key, want, &kv, &sgn, d);
    if (st) return st;
    if (sgn && kv->val.i < 0) return out_of_range(f, kv, want, d);
    uint64_t v = sgn ? (uint64_t)kv->val.i : kv->val.u;
    if (v > max) return out_of_range(f, kv, want, d);
    *out = v;
    return ZOK;
}

zstatus gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, zdiag *d) {
    uint64_t v = 0;
    zstatus st = get_unsigned(f, key, UINT32_MAX, "an integer in u32 range", &v, d);
    if (st == ZOK) *out = (uint32_t)v;
    return st;
}

zstatus gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out, zdiag *d) {
    return get_unsigned(f, key, UINT64_MAX, "an integer in u64 range", out, d);
}

zstatus gguf_get_i64(const gguf_file *f, const char *key, int64_t *out, zdiag *d) {
    const gguf_kv *kv;
    bool sgn;
    zstatus st = find_int(f, key, "an integer in i64 range", &kv, &sgn, d);
    if (st) return st;
    if (!sgn && kv->val.u > INT64_MAX) return out_of_range(f, kv, "an integer in i64 range", d);
    *out = sgn ? kv->val.i : (int64_t)kv->val.u;
    return ZOK;
}

zstatus gguf_get_f32(const gguf_file *f, const char *key, float *out, zdiag *d) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return missing(f, key, d);
    if (kv->val.type != GGUF_F32 && kv->val.type != GGUF_F64) return wrong_type(f, kv, "f32 or f64", d);
    *out = (float)kv->val.f;
    return ZOK;
}

zstatus gguf_get_bool(const gguf_file *f, const char *key, bool *out, zdiag *d) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return missing(f, key, d);
    if (kv->val.type != GGUF_BOOL) return wrong_type(f, kv, "bool", d);
    *out = kv->val.u != 0;
    return ZOK;
}

zstatus gguf_get_str(const gguf_file *f, const char *key, const char **out, zdiag *d) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return missing(f, key, d);
    if (kv->val.type != GGUF_STRING) return wrong_type(f, kv, "string", d);
    *out = kv->val.s.ptr;
    return ZOK;
}

zstatus gguf_get_arr(const gguf_file *f, const char *key, gguf_vtype elem, const gguf_value **out, zdiag *d) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return missing(f, key, d);
    if (kv->val.type != GGUF_ARRAY || (elem != GGUF_VTYPE_COUNT && kv->val.arr.elem != elem)) {
        char want[48];
        if (elem == GGUF_VTYPE_COUNT)
            snprintf(want, sizeof want, "an array");
        else
            snprintf(want, sizeof want, "array of %s", gguf_vtype_name(elem));
        return wrong_type(f, kv, want, d);
    }
    *out = &kv->val;
    return ZOK;
}

int gguf_opt_u32(const gguf_file *f, const char *key, uint32_t *out, zdiag *d) {
    if (!gguf_find_kv(f, key)) return 0;
    return gguf_get_u32(f, key, out, d) == ZOK ? 1 : -1;
}

int gguf_opt_f32(const gguf_file *f, const char *key, float *out, zdiag *d) {
    if (!gguf_find_kv(f, key)) return 0;
    return gguf_get_f32(f, key, out, d) == ZOK ? 1 : -1;
}

int gguf_opt_str(const gguf_file *f, const char *key, const char **out, zdiag *d) {
    if (!gguf_find_kv(f, key)) return 0;
    return gguf_get_str(f, key, out, d) == ZOK ? 1 : -1;
}

uint64_t gguf_identity_hash(const gguf_file *f) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < f->header_end; i++) {
        h ^= f->base[i];
        h *= 0x100000001b3ull;
    }
    for (int k = 0; k < 8; k++) {
        h ^= (f->size >> (8 * k)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}
