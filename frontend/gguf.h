/* gguf: reader and writer for GGUF v2/v3, the llama.cpp model format.
 *
 * The reader maps the file and never trusts a byte: every length, count,
 * offset and type is checked against the file's size and the format's rules
 * before use. A failure fills the zdiag with one line:
 *     "<path>: offset <N>: <what>: expected <X>, found <Y>"
 * Parsed structures live in the file's arena and point into the mapping, so
 * they are valid until gguf_close. */
#ifndef ZINC_GGUF_H
#define ZINC_GGUF_H

#include <stdbool.h>
#include <stdint.h>

#include "../ir/arena.h"
#include "../ir/dtype.h"
#include "../ir/zhash.h"
#include "../ir/zstatus.h"

#define GGUF_MAGIC             0x46554747u /* "GGUF" read as a little-endian u32 */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS          4
#define GGUF_MAX_ARRAY_DEPTH   8 /* arrays nested deeper than this are rejected */

typedef enum gguf_vtype {
    GGUF_U8 = 0,
    GGUF_I8 = 1,
    GGUF_U16 = 2,
    GGUF_I16 = 3,
    GGUF_U32 = 4,
    GGUF_I32 = 5,
    GGUF_F32 = 6,
    GGUF_BOOL = 7,
    GGUF_STRING = 8,
    GGUF_ARRAY = 9,
    GGUF_U64 = 10,
    GGUF_I64 = 11,
    GGUF_F64 = 12,
    GGUF_VTYPE_COUNT
} gguf_vtype;

/* Not NUL-terminated in the file; the reader stores a NUL-terminated copy. */
typedef struct gguf_str {
    uint64_t len;
    const char *ptr;
} gguf_str;

typedef struct gguf_value gguf_value;
struct gguf_value {
    gguf_vtype type;
    union {
        uint64_t u; /* U8, U16, U32, U64, BOOL (0/1) */
        int64_t i;  /* I8, I16, I32, I64 */
        double f;   /* F32, F64 */
        gguf_str s; /* STRING */
        struct {
            gguf_vtype elem;
            uint64_t n;
            gguf_value *items; /* n parsed items (nested arrays included) */
        } arr;
    };
};

typedef struct gguf_kv {
    const char *key;       /* NUL-terminated copy */
    uint64_t offset;       /* file offset of the key, for messages */
    uint64_t value_offset; /* file offset of the value's type tag; the value follows it */
    gguf_value val;
    UT_hash_handle hh;
} gguf_kv;

typedef struct gguf_tensor {
    const char *name;
    uint64_t info_offset; /* file offset of this tensor info, for messages */
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the contiguous dimension; unused dims are 1 */
    ztype type;
    uint64_t n_elems;
    uint64_t offset; /* relative to the data section */
    uint64_t nbytes;
    const uint8_t *data; /* points into the mapping */
    UT_hash_handle hh;
} gguf_tensor;

typedef struct gguf_file {
    const char *path; /* for messages; "<memory>" when parsed from a buffer */
    const uint8_t *base;
    uint64_t size;
    uint32_t version;
    uint64_t n_kv, n_tensors;
    gguf_kv *kvs;         /* n_kv, in file order */
    gguf_tensor *tensors; /* n_tensors, in file order */
    gguf_kv *kv_index;    /* uthash by key */
    gguf_tensor *tensor_index;
    uint64_t alignment;
    uint64_t data_offset; /* file offset of the tensor data section */
    uint64_t header_end;  /* bytes of header + kv + tensor infos (hashed for plan identity) */
    zarena *arena;
    void *map; /* private to the reader */
    uint64_t map_size;
} gguf_file;

/* Maps and parses the file at path. On failure *out is NULL. */
zstatus gguf_open(const char *path, gguf_file **out, zdiag *d);
/* Parses a buffer the caller keeps alive (fuzzers, tests). name is used in messages. */
zstatus gguf_parse(const void *buf, uint64_t size, const char *name, gguf_file **out, zdiag *d);
void gguf_close(gguf_file *f);

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);
const char *gguf_vtype_name(gguf_vtype t);

/* Typed getters. Integers convert between widths when the value fits; a
 * missing key or a wrong type is ZE_INVALID (or ZE_FORMAT for a bad type) with
 * a message naming the key. The *_opt forms return false when the key is
 * absent and leave *out untouched (a present key of the wrong type still
 * fails through the zstatus they return via d). */
zstatus gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, zdiag *d);
zstatus gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out, zdiag *d);
zstatus gguf_get_i64(const gguf_file *f, const char *key, int64_t *out, zdiag *d);
zstatus gguf_get_f32(const gguf_file *f, const char *key, float *out, zdiag *d);
zstatus gguf_get_bool(const gguf_file *f, const char *key, bool *out, zdiag *d);
zstatus gguf_get_str(const gguf_file *f, const char *key, const char **out, zdiag *d);
/* An array of elem type (GGUF_VTYPE_COUNT accepts any). */
zstatus gguf_get_arr(const gguf_file *f, const char *key, gguf_vtype elem, const gguf_value **out, zdiag *d);
/* Returns 1 and sets *out when present and well-typed, 0 when absent, -1 (with d set) on a wrong type. */
int gguf_opt_u32(const gguf_file *f, const char *key, uint32_t *out, zdiag *d);
int gguf_opt_f32(const gguf_file *f, const char *key, float *out, zdiag *d);
int gguf_opt_str(const gguf_file *f, const char *key, const char **out, zdiag *d);

/* FNV-1a 64 over the first header_end bytes, continued over the file size as
 * 8 little-endian bytes: the identity a compiled plan records of the GGUF it
 * came from. Tensor data is not hashed (the size stands in for it). */
uint64_t gguf_identity_hash(const gguf_file *f);

/* ---- writer ------------------------------------------------------------ */

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);

/* Metadata, kept in insertion order; setting a key twice replaces it.
 * Setters copy their arguments. Any allocation failure is reported by
 * gguf_writer_write. */
void gguf_set_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_set_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_set_u64(gguf_writer *w, const char *key, uint64_t v);
void gguf_set_f32(gguf_writer *w, const char *key, float v);
void gguf_set_bool(gguf_writer *w, const char *key, bool v);
void gguf_set_str(gguf_writer *w, const char *key, const char *v);
void gguf_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
void gguf_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
void gguf_set_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n);
/* Any value, deep-copied: every scalar type and arrays nested up to
 * GGUF_MAX_ARRAY_DEPTH (each item's type must equal the array's elem). */
void gguf_set_value(gguf_writer *w, const char *key, const gguf_value *v);

/* Adds a tensor; data (nbytes, which must equal the type's row bytes times the
 * rows) is copied. ne[0] is the contiguous dimension. */
void gguf_add_tensor(gguf_writer *w, const char *name, ztype type, uint32_t n_dims, const int64_t *ne,
                     const void *data, uint64_t nbytes);

/* Writes a GGUF v3 file (alignment from general.alignment if set, else 32)
 * to a temporary file beside path, then renames it into place: a failure
 * never leaves a partial file. */
zstatus gguf_writer_write(gguf_writer *w, const char *path, zdiag *d);

#endif
