/* Plan files: the writer, the reader, the semantic validator and the printer.
 *
 * The container is documented byte by byte in docs/plan-format.md:
 *   header   64 bytes: magic, version, sizes, section table offset, checksums
 *   table    n_sections x {u32 id, u32 flags, u64 offset, u64 size, u64 checksum}
 *   sections each 8-byte aligned: {u32 count, u32 record_size, count records}
 * All integers are little-endian and every record field is written one at a
 * time from a field table (below), never as a C struct.
 *
 * Like Lua's lundump, the reader trusts nothing: magic, version, header
 * size, checksums of the header, the table and every section, zero padding,
 * record sizes and counts, and then every index of the decoded plan
 * (zplan_validate), so that the executor can use the plan without checks. */
#include "plan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../ir/fileio.h"

enum {
    HDR_BYTES = 64,       /* header size written by this version; the least a reader accepts */
    HDR_CHECKSUM_AT = 56, /* the header checksum field, hashed as zeros */
    ENTRY_BYTES = 32,     /* one section table entry */
    SEC_PREFIX = 8,       /* u32 count, u32 record_size */
    MAX_SECTIONS = 64,
    SEC_OPTIONAL = 1u << 0,
    HDR_FLAGS_MUST_KNOW = 0xffff, /* header flag bits a reader must understand (none defined in 1.0) */
    SPIRV_MAGIC = 0x07230203,
    SPIRV_HEADER_WORDS = 5,
    WEIGHT_SLACK = 256, /* zero padding a weight buffer may have past the GGUF's end */
    NAME_SHOWN = 48,    /* names longer than this are cut in messages */
};

/* Bounds that keep a*T + b of the executor inside int64 for every T. */
#define LIMIT_CTX    (1ull << 24)
#define LIMIT_AFFINE (1ll << 32)
#define LIMIT_GROUPS (1ll << 31)

#define FNV_INIT  0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

/* Section ids; ids from SEC_END on are unknown to this version. */
enum {
    SEC_META = 1,
    SEC_STRINGS,
    SEC_BUFFERS,
    SEC_KERNELS,
    SEC_SPIRV,
    SEC_BINDINGS,
    SEC_DISPATCHES,
    SEC_END
};

/* ---- record layouts ---------------------------------------------------------
 * A record is its fields in order, each little-endian, no padding. `at` is
 * the field's offset in the in-memory struct; RESERVED fields are written as
 * zeros and ignored on read (a newer minor version may give them a meaning). */

typedef struct field {
    uint16_t at;
    uint8_t size; /* 1, 4 or 8 */
} field;

#define RESERVED 0xffff
#define F(T, m)                                                                                              \
    { offsetof(T, m), sizeof(((T *)0)->m) }
#define FR(n)                                                                                                \
    { RESERVED, n }
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const field meta_fields[] = {
    F(zplan, gguf_path),
    F(zplan, arch),
    F(zplan, gguf_size),
    F(zplan, gguf_hash),
    F(zplan, n_vocab),
    F(zplan, n_embd),
    F(zplan, n_layer),
    F(zplan, ctx),
    F(zplan, target),
    F(zplan, device_name),
    F(zplan, vendor_id),
    F(zplan, device_id),
    F(zplan, subgroup_size),
    F(zplan, shared_bytes),
    F(zplan, required),
    F(zplan, compiler),
    F(zplan, step_buffer),
    F(zplan, tokens_buffer),
    F(zplan, logits_buffer),
    F(zplan, topk_buffer), /* reserved (zero) in 1.0 */
    F(zplan, sched[0].first),
    F(zplan, sched[0].count),
    F(zplan, sched[0].max_tokens),
    F(zplan, sched[0].logits_rows),
    F(zplan, sched[1].first),
    F(zplan, sched[1].count),
    F(zplan, sched[1].max_tokens),
    F(zplan, sched[1].logits_rows),
    /* 1.2 (META 120 -> 140 bytes) */
    F(zplan, n_seqs),
    F(zplan, sched[2].first),
    F(zplan, sched[2].count),
    F(zplan, sched[2].max_tokens),
    F(zplan, sched[2].logits_rows),
    /* 1.3 (META 140 -> 156 bytes) */
    F(zplan, sched[3].first),
    F(zplan, sched[3].count),
    F(zplan, sched[3].max_tokens),
    F(zplan, sched[3].logits_rows),
};
#define META_BYTES_1_1 120 /* the META record of formats 1.0 and 1.1 */
#define META_BYTES_1_2 140 /* and of 1.2 */
static const field byte_fields[] = {{0, 1}};
static const field word_fields[] = {{0, 4}};
static const field buffer_fields[] = {F(zplan_buffer, kind), F(zplan_buffer, name), F(zplan_buffer, size),
                                      F(zplan_buffer, src_offset)};
static const field kernel_fields[] = {F(zplan_kernel, name),         F(zplan_kernel, code),
                                      F(zplan_kernel, n_words),      F(zplan_kernel, n_bindings),
                                      F(zplan_kernel, shared_bytes), FR(4)};
static const field binding_fields[] = {F(zplan_binding, buffer), FR(4), F(zplan_binding, offset),
                                       F(zplan_binding, range)};
static const field dispatch_fields[] = {
    F(zplan_dispatch, kernel),      F(zplan_dispatch, first_binding), F(zplan_dispatch, n_bindings),
    F(zplan_dispatch, flags),       F(zplan_dispatch, node),          FR(4),
    F(zplan_dispatch, groups[0].a), F(zplan_dispatch, groups[0].b),   F(zplan_dispatch, groups[0].div),
    F(zplan_dispatch, groups[1].a), F(zplan_dispatch, groups[1].b),   F(zplan_dispatch, groups[1].div),
    F(zplan_dispatch, groups[2].a), F(zplan_dispatch, groups[2].b),   F(zplan_dispatch, groups[2].div),
};

typedef struct secdesc {
    const char *name;
    const field *f;
    unsigned nf;
    size_t elem; /* bytes of one in-memory record */
} secdesc;

static const secdesc secs[SEC_END] = {
    [SEC_META] = {"META", meta_fields, COUNT(meta_fields), sizeof(zplan)},
    [SEC_STRINGS] = {"STRINGS", byte_fields, 1, 1},
    [SEC_BUFFERS] = {"BUFFERS", buffer_fields, COUNT(buffer_fields), sizeof(zplan_buffer)},
    [SEC_KERNELS] = {"KERNELS", kernel_fields, COUNT(kernel_fields), sizeof(zplan_kernel)},
    [SEC_SPIRV] = {"SPIRV", word_fields, 1, 4},
    [SEC_BINDINGS] = {"BINDINGS", binding_fields, COUNT(binding_fields), sizeof(zplan_binding)},
    [SEC_DISPATCHES] = {"DISPATCHES", dispatch_fields, COUNT(dispatch_fields), sizeof(zplan_dispatch)},
};

static uint32_t rec_bytes(const secdesc *s) {
    uint32_t n = 0;
    for (unsigned i = 0; i < s->nf; i++)
        n += s->f[i].size;
    return n;
}

/* The records of section id in p, and their count. */
static void *sec_records(const zplan *p, int id, uint32_t *n) {
    switch (id) {
    case SEC_META: *n = 1; return (void *)p;
    case SEC_STRINGS: *n = p->n_strings_bytes; return p->strings;
    case SEC_BUFFERS: *n = p->n_buffers; return p->buffers;
    case SEC_KERNELS: *n = p->n_kernels; return p->kernels;
    case SEC_SPIRV: *n = p->n_spirv_words; return p->spirv;
    case SEC_BINDINGS: *n = p->n_bindings; return p->bindings;
    case SEC_DISPATCHES: *n = p->n_dispatches; return p->dispatches;
    default: *n = 0; return NULL;
    }
}

/* Gives p an arena array of n records for section id (META is p itself). */
static void *sec_alloc(zplan *p, int id, uint32_t n) {
    void *a = id == SEC_META ? (void *)p : zarena_array(p->arena, n, secs[id].elem);
    switch (id) {
    case SEC_STRINGS: p->strings = a, p->n_strings_bytes = n; break;
    case SEC_BUFFERS: p->buffers = a, p->n_buffers = n; break;
    case SEC_KERNELS: p->kernels = a, p->n_kernels = n; break;
    case SEC_SPIRV: p->spirv = a, p->n_spirv_words = n; break;
    case SEC_BINDINGS: p->bindings = a, p->n_bindings = n; break;
    case SEC_DISPATCHES: p->dispatches = a, p->n_dispatches = n; break;
    default: break;
    }
    return a;
}

/* ---- little-endian bytes ------------------------------------------------- */

static uint64_t get_le(const uint8_t *b, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}
static uint32_t le32(const uint8_t *b) {
    return (uint32_t)get_le(b, 4);
}
static uint64_t le64(const uint8_t *b) {
    return get_le(b, 8);
}

static void put_le(uint8_t *b, uint64_t v, unsigned n) {
    for (unsigned i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static void encode_rec(const secdesc *s, const void *rec, uint8_t *out) {
    for (unsigned i = 0; i < s->nf; i++) {
        const field *f = &s->f[i];
        uint64_t v = 0;
        const char *m = (const char *)rec + f->at;
        if (f->at != RESERVED) {
            uint8_t u8;
            uint32_t u32;
            if (f->size == 1) memcpy(&u8, m, 1), v = u8;
            if (f->size == 4) memcpy(&u32, m, 4), v = u32;
            if (f->size == 8) memcpy(&v, m, 8);
        }
        put_le(out, v, f->size);
        out += f->size;
    }
}

/* Decodes the fields within the first `bytes` of a record; the rest stay
 * zero (an older minor's shorter record). */
static void decode_rec(const secdesc *s, const uint8_t *in, uint32_t bytes, void *rec) {
    const uint8_t *end = in + bytes;
    for (unsigned i = 0; i < s->nf && in + s->f[i].size <= end; i++) {
        const field *f = &s->f[i];
        uint64_t v = get_le(in, f->size);
        char *m = (char *)rec + f->at;
        in += f->size;
        if (f->at == RESERVED) continue;
        uint8_t u8 = (uint8_t)v;
        uint32_t u32 = (uint32_t)v;
        if (f->size == 1) memcpy(m, &u8, 1);
        if (f->size == 4) memcpy(m, &u32, 4);
        if (f->size == 8) memcpy(m, &v, 8); /* int64 fields: two's complement, as written */
    }
}

/* FNV-1a 64: why this checksum and not CRC32C is in docs/plan-format.md. */
static uint64_t fnv1a(uint64_t h, const uint8_t *b, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ b[i]) * FNV_PRIME;
    return h;
}

/* The header checksum covers [0, header_size) with its own field as zeros. */
static uint64_t header_checksum(const uint8_t *b, uint64_t header_size) {
    static const uint8_t zeros[8];
    uint64_t h = fnv1a(FNV_INIT, b, HDR_CHECKSUM_AT);
    h = fnv1a(h, zeros, 8);
    return fnv1a(h, b + HDR_BYTES, header_size - HDR_BYTES);
}

/* A name from the file may hold any byte; a message stays one short line. */
static const char *shown(char *out, const char *s, size_t limit) {
    size_t i = 0;
    for (; s[i] && i < limit; i++) {
        unsigned char c = (unsigned char)s[i];
        out[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    strcpy(out + i, s[i] ? "..." : "");
    return out;
}

/* ---- semantic validation ------------------------------------------------- */

/* Where the records of each section start in a file being read, so that
 * semantic errors can name a byte offset; NULL when validating in memory. */
typedef struct locator {
    uint64_t off[SEC_END];
    uint32_t rs[SEC_END];
} locator;

typedef struct vctx {
    const zplan *p;
    const char *name;
    const locator *loc;
    zdiag *d;
    zstatus code;
    char buf[4][NAME_SHOWN + 4];
    int next;
    uint32_t *tmax; /* per dispatch: the largest T of the schedules that run it */
} vctx;

static zstatus vfail(vctx *v, int sec, uint64_t idx, const char *fmt, ...) ZPRINTF(4, 5);
static zstatus vfail(vctx *v, int sec, uint64_t idx, const char *fmt, ...) {
    char what[896];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!v->loc) return zdiag_set(v->d, v->code, "%s: %s", v->name, what);
    uint64_t off = v->loc->off[sec] + idx * v->loc->rs[sec];
    return zdiag_set(v->d, v->code, "%s: offset %" PRIu64 ": %s", v->name, off, what);
}

/* A validated string of the plan, made printable. */
static const char *vstr(vctx *v, uint32_t s) {
    return shown(v->buf[v->next++ & 3], zplan_str(v->p, s), NAME_SHOWN);
}

/* what names the field: "arch", or "buffer" / "kernel" / "dispatch" with
 * idx and field appended. */
static zstatus check_str(vctx *v, int sec, uint64_t idx, const char *what, uint32_t s) {
    if (s < v->p->n_strings_bytes) return ZOK;
    char rec[64];
    if (sec != SEC_META) {
        snprintf(rec, sizeof rec, "%s %" PRIu64 ": %s", what, idx, sec == SEC_DISPATCHES ? "node" : "name");
        what = rec;
    }
    return vfail(v, sec, idx,
                 "%s: string offset out of range: expected < %u (the string table's size), found %u", what,
                 v->p->n_strings_bytes, s);
}

static zstatus check_strings(vctx *v) {
    const zplan *p = v->p;
    if (!p->strings || p->n_strings_bytes == 0)
        return vfail(v, SEC_STRINGS, 0, "string table is empty: expected at least 1 byte (a NUL), found 0");
    if (p->strings[p->n_strings_bytes - 1])
        return vfail(v, SEC_STRINGS, p->n_strings_bytes - 1,
                     "string table does not end with a NUL byte: expected 0x00, found 0x%02x",
                     (unsigned char)p->strings[p->n_strings_bytes - 1]);
    return ZOK;
}

#define ZPLAN_NEED_KNOWN (2u * ZPLAN_NEED_COOPMAT_WG - 1u)

static zstatus check_meta(vctx *v) {
    const zplan *p = v->p;
    const struct {
        const char *what;
        uint32_t s;
    } strs[] = {{"gguf path", p->gguf_path},
                {"arch", p->arch},
                {"target", p->target},
                {"device name", p->device_name},
                {"compiler", p->compiler}};
    zstatus st = ZOK;
    for (size_t i = 0; i < COUNT(strs) && !st; i++)
        st = check_str(v, SEC_META, 0, strs[i].what, strs[i].s);
    if (st) return st;
    if (!p->n_vocab || !p->n_embd || !p->n_layer)
        return vfail(v, SEC_META, 0,
                     "model shape: expected n_vocab, n_embd and n_layer >= 1, found %u, %u, %u", p->n_vocab,
                     p->n_embd, p->n_layer);
    if (p->ctx < 1 || p->ctx > LIMIT_CTX)
        return vfail(v, SEC_META, 0, "context size: expected 1..%llu, found %u", LIMIT_CTX, p->ctx);
    if (p->subgroup_size & (p->subgroup_size - 1) || p->subgroup_size > 128)
        return vfail(v, SEC_META, 0, "subgroup size: expected 0 or a power of two <= 128, found %u",
                     p->subgroup_size);
    if ((p->required & ZPLAN_NEED_SUBGROUP_SIZE) && !p->subgroup_size)
        return vfail(v, SEC_META, 0,
                     "required features name a subgroup size: expected a subgroup size, found 0");
    if (p->required & ~ZPLAN_NEED_KNOWN) {
        v->code = ZE_UNSUPPORTED;
        return vfail(v, SEC_META, 0,
                     "required device features unknown to this reader: expected bits within 0x%x, found 0x%x",
                     ZPLAN_NEED_KNOWN, p->required);
    }
    return ZOK;
}

/* Sequence slots (1.2): every KV buffer holds n_seqs caches of a size that
 * any device can bind at a slot's offset; a batch schedule takes at most one
 * row a slot and writes every row's logits. */
static zstatus check_seqs(vctx *v) {
    const zplan *p = v->p;
    const zplan_schedule *b = &p->sched[ZPLAN_BATCH];
    if (p->n_seqs < 1 || p->n_seqs > ZPLAN_MAX_SEQS)
        return vfail(v, SEC_META, 0, "sequence slots: expected 1..%d, found %u", ZPLAN_MAX_SEQS, p->n_seqs);
    if (!b->count && (b->first || b->max_tokens || b->logits_rows))
        return vfail(v, SEC_META, 0,
                     "batch schedule: expected all zero without dispatches, found first %u, max_tokens %u, "
                     "logits rows %u",
                     b->first, b->max_tokens, b->logits_rows);
    if (b->count && b->max_tokens > p->n_seqs)
        return vfail(v, SEC_META, 0, "batch schedule: max_tokens: expected at most %u (the sequence slots), found %u",
                     p->n_seqs, b->max_tokens);
    if (b->count && b->logits_rows != b->max_tokens)
        return vfail(v, SEC_META, 0, "batch schedule: logits rows: expected %u (max_tokens), found %u",
                     b->max_tokens, b->logits_rows);
    for (uint32_t i = 0; p->n_seqs > 1 && i < p->n_buffers; i++) {
        const zplan_buffer *kb = &p->buffers[i];
        if (kb->kind == ZPB_KV && (kb->size % p->n_seqs || kb->size / p->n_seqs % ZPLAN_SLOT_ALIGN))
            return vfail(v, SEC_BUFFERS, i,
                         "buffer %u '%s': %u sequence slots: expected a size of %u slots of a multiple of %d "
                         "bytes, found %" PRIu64,
                         i, vstr(v, kb->name), p->n_seqs, p->n_seqs, ZPLAN_SLOT_ALIGN, kb->size);
    }
    return ZOK;
}

/* The load schedule (1.3): one step of one token, no logits; its
 * dispatches run once, before any other. */
static zstatus check_load(vctx *v) {
    const zplan_schedule *l = &v->p->sched[ZPLAN_LOAD];
    if (!l->count && (l->first || l->max_tokens || l->logits_rows))
        return vfail(v, SEC_META, 0,
                     "load schedule: expected all zero without dispatches, found first %u, max_tokens %u, "
                     "logits rows %u",
                     l->first, l->max_tokens, l->logits_rows);
    if (l->count && (l->max_tokens != 1 || l->logits_rows != 1))
        return vfail(v, SEC_META, 0, "load schedule: expected max_tokens 1 and logits rows 1, found %u and %u",
                     l->max_tokens, l->logits_rows);
    return ZOK;
}

static zstatus check_schedules(vctx *v) {
    static const char *const phase[ZPLAN_SCHEDS] = {"prefill", "decode", "batch", "load"};
    const zplan *p = v->p;
    zstatus st = check_load(v);
    if (st) return st;
    for (int ph = 0; ph < ZPLAN_SCHEDS; ph++) {
        const zplan_schedule *s = &p->sched[ph];
        if ((ph == ZPLAN_BATCH || ph == ZPLAN_LOAD) && !s->count) continue; /* none (check_seqs, check_load) */
        if (s->first > p->n_dispatches || s->count > p->n_dispatches - s->first)
            return vfail(v, SEC_META, 0,
                         "%s schedule: dispatches [%u, +%u) outside the dispatch table: expected an end <= "
                         "%u, found %" PRIu64,
                         phase[ph], s->first, s->count, p->n_dispatches, (uint64_t)s->first + s->count);
        if (s->max_tokens < 1 || s->max_tokens > p->ctx)
            return vfail(v, SEC_META, 0, "%s schedule: max_tokens: expected 1..%u (the context), found %u",
                         phase[ph], p->ctx, s->max_tokens);
        if (s->logits_rows != 1 && s->logits_rows != s->max_tokens)
            return vfail(v, SEC_META, 0, "%s schedule: logits rows: expected 1 or %u (max_tokens), found %u",
                         phase[ph], s->max_tokens, s->logits_rows);
        for (uint32_t i = s->first; i < s->first + s->count; i++)
            if (v->tmax[i] < s->max_tokens) v->tmax[i] = s->max_tokens;
    }
    return ZOK;
}

static const char *const kind_names[ZPB_KIND_LIMIT] = {
    [ZPB_WEIGHTS] = "weights", [ZPB_ACT] = "act",       [ZPB_KV] = "kv",
    [ZPB_STEP] = "step",       [ZPB_TOKENS] = "tokens", [ZPB_LOGITS] = "logits",
    [ZPB_SCRATCH] = "scratch", [ZPB_TOPK] = "topk",     [ZPB_STATE] = "state",
};

static const char *kind_name(uint32_t k) {
    return k && k < ZPB_KIND_LIMIT ? kind_names[k] : "?";
}

static zstatus check_buffer(vctx *v, uint32_t i) {
    const zplan *p = v->p;
    const zplan_buffer *b = &p->buffers[i];
    zstatus st = check_str(v, SEC_BUFFERS, i, "buffer", b->name);
    if (st) return st;
    const char *nm = vstr(v, b->name);
    if (b->kind < ZPB_WEIGHTS || b->kind >= ZPB_KIND_LIMIT)
        return vfail(v, SEC_BUFFERS, i, "buffer %u '%s': unknown kind: expected %d..%d, found %u", i, nm,
                     ZPB_WEIGHTS, ZPB_KIND_LIMIT - 1, b->kind);
    if (b->kind == ZPB_STATE && p->major == 1 && p->minor < 2)
        return vfail(
            v, SEC_BUFFERS, i,
            "buffer %u '%s': kind state (a recurrent state): expected format 1.2 or newer, found 1.%u", i, nm,
            p->minor);
    if (b->size == 0)
        return vfail(v, SEC_BUFFERS, i, "buffer %u '%s': size: expected at least 1 byte, found 0", i, nm);
    if (b->kind != ZPB_WEIGHTS && b->src_offset)
        return vfail(v, SEC_BUFFERS, i,
                     "buffer %u '%s': source offset of a %s buffer: expected 0, found %" PRIu64, i, nm,
                     kind_name(b->kind), b->src_offset);
    if (b->kind == ZPB_WEIGHTS && (b->src_offset >= p->gguf_size || b->size > UINT64_MAX - WEIGHT_SLACK ||
                                   b->size > p->gguf_size + WEIGHT_SLACK - b->src_offset))
        return vfail(v, SEC_BUFFERS, i,
                     "buffer %u '%s': weights [%" PRIu64 ", +%" PRIu64 ") outside the GGUF: expected a start "
                     "< %" PRIu64 " and an end <= %" PRIu64 ", found an end at %" PRIu64,
                     i, nm, b->src_offset, b->size, p->gguf_size, p->gguf_size + WEIGHT_SLACK,
                     b->src_offset + b->size);
    return ZOK;
}

/* The step, token and logits buffers: present, of their kind, big enough. */
static zstatus check_io(vctx *v) {
    const zplan *p = v->p;
    uint64_t max_t = 1, max_rows = 1;
    for (int ph = 0; ph < ZPLAN_SCHEDS; ph++) {
        if (p->sched[ph].max_tokens > max_t) max_t = p->sched[ph].max_tokens;
        if (p->sched[ph].logits_rows > max_rows) max_rows = p->sched[ph].logits_rows;
    }
    const struct {
        const char *what;
        uint32_t index, kind;
        uint64_t need;
        const char *why;
    } io[] = {
        {"step buffer", p->step_buffer, ZPB_STEP, ZPLAN_STEP_BYTES(p->sched[ZPLAN_BATCH].max_tokens),
         "{T, pos, ctx, rows} and (pos, seq) per batch row"},
        {"tokens buffer", p->tokens_buffer, ZPB_TOKENS, 4 * max_t, "int32 x max_tokens"},
        {"logits buffer", p->logits_buffer, ZPB_LOGITS, 4 * max_rows * p->n_vocab, "float x rows x n_vocab"},
        {"top-k buffer", p->topk_buffer ? p->topk_buffer : p->step_buffer,
         p->topk_buffer ? ZPB_TOPK : ZPB_STEP,
         p->topk_buffer ? (uint64_t)ZPLAN_TOPK_BYTES * zplan_topk_rows(p) : 16,
         "count, total, candidates; a record a batch row"}};
    for (size_t i = 0; i < COUNT(io); i++) {
        if (io[i].index >= p->n_buffers)
            return vfail(v, SEC_META, 0, "%s: buffer index out of range: expected < %u, found %u", io[i].what,
                         p->n_buffers, io[i].index);
        const zplan_buffer *b = &p->buffers[io[i].index];
        if (b->kind != io[i].kind)
            return vfail(v, SEC_META, 0, "%s: buffer %u '%s' has the wrong kind: expected %s, found %s",
                         io[i].what, io[i].index, vstr(v, b->name), kind_name(io[i].kind),
                         kind_name(b->kind));
        if (b->size < io[i].need)
            return vfail(v, SEC_META, 0,
                         "%s: buffer %u '%s' is too small: expected at least %" PRIu64
                         " bytes (%s), found %" PRIu64,
                         io[i].what, io[i].index, vstr(v, b->name), io[i].need, io[i].why, b->size);
    }
    return ZOK;
}

static zstatus check_kernel(vctx *v, uint32_t i) {
    const zplan *p = v->p;
    const zplan_kernel *k = &p->kernels[i];
    zstatus st = check_str(v, SEC_KERNELS, i, "kernel", k->name);
    if (st) return st;
    const char *nm = vstr(v, k->name);
    if (k->n_words < SPIRV_HEADER_WORDS)
        return vfail(v, SEC_KERNELS, i,
                     "kernel %u '%s': SPIR-V size: expected at least %d words (the header), found %u", i, nm,
                     SPIRV_HEADER_WORDS, k->n_words);
    if (k->code > p->n_spirv_words || k->n_words > p->n_spirv_words - k->code)
        return vfail(
            v, SEC_KERNELS, i,
            "kernel %u '%s': SPIR-V words [%u, +%u) end past the SPIR-V table: expected an end <= %u, "
            "found %" PRIu64,
            i, nm, k->code, k->n_words, p->n_spirv_words, (uint64_t)k->code + k->n_words);
    if (p->spirv[k->code] != SPIRV_MAGIC)
        return vfail(v, SEC_KERNELS, i,
                     "kernel %u '%s': SPIR-V magic at word %u: expected 0x%08x, found 0x%08x", i, nm, k->code,
                     SPIRV_MAGIC, p->spirv[k->code]);
    uint32_t ver = p->spirv[k->code + 1];
    if ((ver & 0xff0000ffu) || (ver >> 16) != 1 || ((ver >> 8) & 0xff) > 6)
        return vfail(v, SEC_KERNELS, i,
                     "kernel %u '%s': SPIR-V version word: expected 1.0 to 1.6, found 0x%08x", i, nm, ver);
    if (k->n_bindings < 1 || k->n_bindings > ZPLAN_MAX_BINDINGS)
        return vfail(v, SEC_KERNELS, i,
                     "kernel %u '%s': bindings: expected 1..%d (the step buffer included), found %u", i, nm,
                     ZPLAN_MAX_BINDINGS, k->n_bindings);
    if (k->shared_bytes > p->shared_bytes)
        return vfail(v, SEC_KERNELS, i,
                     "kernel %u '%s': shared memory: expected at most %u bytes (the target's), found %u", i,
                     nm, p->shared_bytes, k->shared_bytes);
    return ZOK;
}

/* One binding; ctx is "dispatch 17: binding 3" or "binding 12". */
static zstatus check_binding(vctx *v, uint32_t i, const char *ctx) {
    const zplan *p = v->p;
    const zplan_binding *b = &p->bindings[i];
    if (b->buffer >= p->n_buffers)
        return vfail(v, SEC_BINDINGS, i, "%s: buffer index out of range: expected < %u, found %u", ctx,
                     p->n_buffers, b->buffer);
    const zplan_buffer *buf = &p->buffers[b->buffer];
    if (b->range == 0 && b->offset >= buf->size)
        return vfail(v, SEC_BINDINGS, i,
                     "%s: offset %" PRIu64 " (to the end) is past buffer %u '%s': expected < %" PRIu64
                     ", found %" PRIu64,
                     ctx, b->offset, b->buffer, vstr(v, buf->name), buf->size, b->offset);
    if (b->range && (b->offset > buf->size || b->range > buf->size - b->offset))
        return vfail(v, SEC_BINDINGS, i,
                     "%s: range [%" PRIu64 ", +%" PRIu64 ") ends past buffer %u '%s': expected an end <= "
                     "%" PRIu64 ", found %" PRIu64,
                     ctx, b->offset, b->range, b->buffer, vstr(v, buf->name), buf->size,
                     b->offset > UINT64_MAX - b->range ? UINT64_MAX : b->offset + b->range);
    return ZOK;
}

/* Workgroups as the executor computes them: ceil((a*T + b) / div), 0 when
 * a*T + b <= 0. The bounds on a, b, div and T keep this inside int64. */
static int64_t groups_at(const zplan_affine *f, int64_t T) {
    int64_t x = f->a * T + f->b;
    return x <= 0 ? 0 : (x + f->div - 1) / f->div;
}

static zstatus check_groups(vctx *v, uint32_t i) {
    const zplan_dispatch *dp = &v->p->dispatches[i];
    for (int a = 0; a < 3; a++) {
        const zplan_affine *f = &dp->groups[a];
        if (f->div < 1 || f->div > LIMIT_AFFINE)
            return vfail(v, SEC_DISPATCHES, i,
                         "dispatch %u: groups[%d]: divisor: expected 1..2^32, found %" PRId64, i, a, f->div);
        if (f->a < -LIMIT_AFFINE || f->a > LIMIT_AFFINE || f->b < -LIMIT_AFFINE || f->b > LIMIT_AFFINE)
            return vfail(v, SEC_DISPATCHES, i,
                         "dispatch %u: groups[%d]: coefficients: expected |a|, |b| <= 2^32, found a %" PRId64
                         ", b %" PRId64,
                         i, a, f->a, f->b);
        /* Affine and ceil are monotone in T: the ends of 1..tmax bound the rest. */
        int64_t ts[2] = {1, v->tmax[i]};
        for (int e = 0; e < 2; e++) {
            int64_t g = groups_at(f, ts[e]);
            if (g > LIMIT_GROUPS)
                return vfail(v, SEC_DISPATCHES, i,
                             "dispatch %u: groups[%d] at T=%" PRId64
                             ": expected at most 2^31 workgroups, found "
                             "%" PRId64,
                             i, a, ts[e], g);
        }
    }
    return ZOK;
}

static zstatus check_dispatch(vctx *v, uint32_t i) {
    const zplan *p = v->p;
    const zplan_dispatch *dp = &p->dispatches[i];
    if (dp->kernel >= p->n_kernels)
        return vfail(v, SEC_DISPATCHES, i, "dispatch %u: kernel index out of range: expected < %u, found %u",
                     i, p->n_kernels, dp->kernel);
    const zplan_kernel *k = &p->kernels[dp->kernel];
    if (dp->n_bindings != k->n_bindings)
        return vfail(v, SEC_DISPATCHES, i, "dispatch %u: bindings: expected %u (kernel %u '%s'), found %u", i,
                     k->n_bindings, dp->kernel, vstr(v, k->name), dp->n_bindings);
    if (dp->first_binding > p->n_bindings || dp->n_bindings > p->n_bindings - dp->first_binding)
        return vfail(
            v, SEC_DISPATCHES, i,
            "dispatch %u: bindings [%u, +%u) outside the binding table: expected an end <= %u, found "
            "%" PRIu64,
            i, dp->first_binding, dp->n_bindings, p->n_bindings,
            (uint64_t)dp->first_binding + dp->n_bindings);
    if (dp->flags & ~(uint32_t)ZPLAN_BARRIER)
        return vfail(v, SEC_DISPATCHES, i, "dispatch %u: flags: expected bits within 0x%x, found 0x%x", i,
                     ZPLAN_BARRIER, dp->flags);
    zstatus st = check_str(v, SEC_DISPATCHES, i, "dispatch", dp->node);
    for (uint32_t j = 0; j < dp->n_bindings && !st; j++) {
        char ctx[48];
        snprintf(ctx, sizeof ctx, "dispatch %u: binding %u", i, j);
        st = check_binding(v, dp->first_binding + j, ctx);
    }
    if (st) return st;
    uint32_t b0 = p->bindings[dp->first_binding].buffer;
    if (b0 != p->step_buffer)
        return vfail(v, SEC_BINDINGS, dp->first_binding,
                     "dispatch %u: binding 0: expected the step buffer %u, found buffer %u '%s'", i,
                     p->step_buffer, b0, vstr(v, p->buffers[b0].name));
    return check_groups(v, i);
}

/* Sections in dependency order: names first, then what refers to them. */
static zstatus validate(const zplan *p, const char *name, const locator *loc, zdiag *d) {
    vctx v = {
        .p = p, .name = name ? name : "<plan>", .loc = loc, .d = d, .code = loc ? ZE_FORMAT : ZE_INVALID};
    if (!p) return zdiag_set(d, ZE_INVALID, "%s: no plan: expected a plan, found NULL", v.name);
    v.tmax = calloc(p->n_dispatches ? p->n_dispatches : 1, sizeof *v.tmax);
    if (!v.tmax)
        return zdiag_set(d, ZE_NOMEM, "%s: out of memory validating %u dispatches", v.name, p->n_dispatches);
    for (uint32_t i = 0; i < p->n_dispatches; i++)
        v.tmax[i] = 1;
    zstatus st = check_strings(&v);
    if (!st) st = check_meta(&v);
    if (!st) st = check_schedules(&v);
    for (uint32_t i = 0; i < p->n_buffers && !st; i++)
        st = check_buffer(&v, i);
    if (!st) st = check_io(&v);
    if (!st) st = check_seqs(&v);
    for (uint32_t i = 0; i < p->n_kernels && !st; i++)
        st = check_kernel(&v, i);
    for (uint32_t i = 0; i < p->n_dispatches && !st; i++)
        st = check_dispatch(&v, i);
    /* Bindings no dispatch refers to must still be sound. */
    for (uint32_t i = 0; i < p->n_bindings && !st; i++) {
        char ctx[32];
        snprintf(ctx, sizeof ctx, "binding %u", i);
        st = check_binding(&v, i, ctx);
    }
    free(v.tmax);
    return st;
}

zstatus zplan_validate(const zplan *p, const char *name, zdiag *d) {
    return validate(p, name, NULL, d);
}

/* ---- writer ---------------------------------------------------------------- */

/* Lays out header, table and sections, and encodes them into one buffer. */
static zstatus encode(const zplan *p, uint8_t **out, uint64_t *size, zdiag *d, const char *path) {
    uint64_t off[SEC_END], len[SEC_END];
    uint64_t at = HDR_BYTES + (SEC_END - 1) * ENTRY_BYTES;
    for (int id = 1; id < SEC_END; id++) {
        uint32_t n;
        sec_records(p, id, &n);
        off[id] = at = (at + 7) & ~7ull;
        len[id] = SEC_PREFIX + (uint64_t)n * rec_bytes(&secs[id]);
        at += len[id];
    }
    uint8_t *b = at <= SIZE_MAX ? calloc(1, (size_t)at) : NULL;
    if (!b)
        return zdiag_set(d, ZE_NOMEM,
                         "%s: out of memory encoding the plan: expected %" PRIu64 " bytes, found none", path,
                         at);
    for (int id = 1; id < SEC_END; id++) {
        uint32_t n, rs = rec_bytes(&secs[id]);
        const char *recs = sec_records(p, id, &n);
        uint8_t *s = b + off[id];
        put_le(s, n, 4);
        put_le(s + 4, rs, 4);
        for (uint32_t i = 0; i < n; i++)
            encode_rec(&secs[id], recs + (size_t)i * secs[id].elem, s + SEC_PREFIX + (uint64_t)i * rs);
        uint8_t *e = b + HDR_BYTES + (uint64_t)(id - 1) * ENTRY_BYTES;
        put_le(e, (uint64_t)id, 4);
        put_le(e + 4, 0, 4);
        put_le(e + 8, off[id], 8);
        put_le(e + 16, len[id], 8);
        put_le(e + 24, fnv1a(FNV_INIT, s, len[id]), 8);
    }
    memcpy(b, ZPLAN_MAGIC, 8);
    put_le(b + 8, ZPLAN_VERSION_MAJOR, 2);
    put_le(b + 10, ZPLAN_VERSION_MINOR, 2);
    put_le(b + 12, HDR_BYTES, 4);
    put_le(b + 16, 0, 4);
    put_le(b + 20, SEC_END - 1, 4);
    put_le(b + 24, at, 8);
    put_le(b + 32, HDR_BYTES, 8);
    put_le(b + 40, fnv1a(FNV_INIT, b + HDR_BYTES, (SEC_END - 1) * ENTRY_BYTES), 8);
    put_le(b + HDR_CHECKSUM_AT, header_checksum(b, HDR_BYTES), 8);
    *out = b;
    *size = at;
    return ZOK;
}

zstatus zplan_write(const zplan *p, const char *path, zdiag *d) {
    char name[512];
    snprintf(name, sizeof name, "%s (not written)", path);
    zstatus st = validate(p, name, NULL, d);
    if (st) return st;
    uint8_t *b = NULL;
    uint64_t n = 0;
    st = encode(p, &b, &n, d, path);
    if (st) return st;
    zfile_out o;
    st = zfile_begin(&o, path, d);
    if (!st) {
        if (fwrite(b, 1, (size_t)n, o.fp) != (size_t)n)
            st = zdiag_set(d, ZE_IO, "cannot write %s: %s", path, strerror(errno));
        st = zfile_end(&o, st, d);
    }
    free(b);
    return st;
}

/* ---- reader: container ------------------------------------------------------- */

typedef struct rd {
    const uint8_t *b;
    uint64_t size;
    const char *name;
    zdiag *d;
    uint16_t major, minor;
    uint64_t header_size, table_off;
    uint32_t n_sections;
    int entry[SEC_END]; /* table entry of each known section, -1 if absent */
    uint64_t off[SEC_END], len[SEC_END];
} rd;

static zstatus rfail(rd *r, zstatus code, uint64_t off, const char *fmt, ...) ZPRINTF(4, 5);
static zstatus rfail(rd *r, zstatus code, uint64_t off, const char *fmt, ...) {
    char what[896];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return zdiag_set(r->d, code, "%s: offset %" PRIu64 ": %s", r->name, off, what);
}

static void hex_bytes(char *out, const uint8_t *b, uint64_t n) {
    out[0] = 0;
    for (uint64_t i = 0; i < n && i < 8; i++)
        sprintf(out + strlen(out), "%s%02x", i ? " " : "", b[i]);
    if (n == 0) strcpy(out, "nothing");
}

/* Magic, version and header size: what every later check relies on. */
static zstatus check_ident(rd *r) {
    uint64_t m = r->size < 8 ? r->size : 8;
    if (memcmp(r->b, ZPLAN_MAGIC, (size_t)m) != 0) {
        char found[32];
        hex_bytes(found, r->b, m);
        return rfail(r, ZE_FORMAT, 0,
                     "bad magic, not a zinc plan: expected 5a 49 4e 43 50 4c 41 4e (\"ZINCPLAN\"), found %s",
                     found);
    }
    if (r->size < HDR_BYTES)
        return rfail(r, ZE_FORMAT, r->size, "truncated header: expected at least %d bytes, found %" PRIu64,
                     HDR_BYTES, r->size);
    r->major = (uint16_t)get_le(r->b + 8, 2);
    r->minor = (uint16_t)get_le(r->b + 10, 2);
    if (r->major != ZPLAN_VERSION_MAJOR)
        return rfail(
            r, ZE_UNSUPPORTED, 8,
            "plan format %u.%u is not supported by this zinc (which reads %d.x; recompile with zincc): "
            "expected major version %d, found %u",
            r->major, r->minor, ZPLAN_VERSION_MAJOR, ZPLAN_VERSION_MAJOR, r->major);
    r->header_size = le32(r->b + 12);
    if (r->header_size < HDR_BYTES || r->header_size % 8 || r->header_size > r->size)
        return rfail(r, ZE_FORMAT, 12,
                     "header size: expected a multiple of 8 from %d to %" PRIu64
                     " (the file size), found %" PRIu64,
                     HDR_BYTES, r->size, r->header_size);
    return ZOK;
}

static zstatus check_header(rd *r) {
    zstatus st = check_ident(r);
    if (st) return st;
    uint64_t want = le64(r->b + HDR_CHECKSUM_AT), got = header_checksum(r->b, r->header_size);
    if (want != got)
        return rfail(r, ZE_FORMAT, HDR_CHECKSUM_AT,
                     "header checksum (FNV-1a 64 of bytes 0..%" PRIu64 "): expected 0x%016" PRIx64
                     " as stored, found 0x%016" PRIx64,
                     r->header_size - 1, want, got);
    uint32_t flags = le32(r->b + 16);
    if (flags & HDR_FLAGS_MUST_KNOW)
        return rfail(r, ZE_UNSUPPORTED, 16,
                     "header flags this reader must understand: expected none, found 0x%04x",
                     flags & HDR_FLAGS_MUST_KNOW);
    uint64_t file_size = le64(r->b + 24);
    if (file_size != r->size)
        return rfail(r, ZE_FORMAT, 24,
                     "file size does not match the header (truncated or appended to?): expected "
                     "%" PRIu64 " bytes, found %" PRIu64,
                     file_size, r->size);
    r->n_sections = le32(r->b + 20);
    if (r->n_sections < 1 || r->n_sections > MAX_SECTIONS)
        return rfail(r, ZE_FORMAT, 20, "section count: expected 1..%d, found %u", MAX_SECTIONS,
                     r->n_sections);
    r->table_off = le64(r->b + 32);
    uint64_t tbytes = (uint64_t)r->n_sections * ENTRY_BYTES;
    if (r->table_off % 8 || r->table_off < r->header_size || r->table_off > r->size ||
        tbytes > r->size - r->table_off)
        return rfail(r, ZE_FORMAT, 32,
                     "section table offset: expected a multiple of 8 from %" PRIu64 " with %" PRIu64
                     " bytes of table before the end (%" PRIu64 "), found %" PRIu64,
                     r->header_size, tbytes, r->size, r->table_off);
    want = le64(r->b + 40);
    got = fnv1a(FNV_INIT, r->b + r->table_off, tbytes);
    if (want != got)
        return rfail(r, ZE_FORMAT, 40,
                     "section table checksum (FNV-1a 64 of bytes %" PRIu64 "..%" PRIu64
                     "): expected 0x%016" PRIx64 " as stored, found 0x%016" PRIx64,
                     r->table_off, r->table_off + tbytes - 1, want, got);
    return ZOK;
}

/* A byte range of the file: the header, the table or a section. */
typedef struct span {
    uint64_t lo, hi;
    uint32_t entry; /* UINT32_MAX: header; UINT32_MAX - 1: table */
    uint32_t id;
} span;

static int span_cmp(const void *x, const void *y) {
    const span *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo ? 1 : (a->hi > b->hi) - (a->hi < b->hi);
}

static const char *span_name(const span *s, char *buf, size_t n) {
    if (s->entry == UINT32_MAX) return "the header";
    if (s->entry == UINT32_MAX - 1) return "the section table";
    if (s->id && s->id < SEC_END)
        snprintf(buf, n, "section %s (entry %u)", secs[s->id].name, s->entry);
    else
        snprintf(buf, n, "section id %u (entry %u)", s->id, s->entry);
    return buf;
}

/* Ranges may not overlap, and every byte outside them is zero padding, so
 * that a flipped byte anywhere in the file is caught. */
static zstatus check_spans(rd *r, span *s, uint32_t n) {
    qsort(s, n, sizeof *s, span_cmp);
    uint64_t end = 0;
    for (uint32_t i = 0; i <= n; i++) {
        uint64_t lo = i < n ? s[i].lo : r->size;
        char a[48], b[48];
        if (i && i < n && lo < end)
            return rfail(r, ZE_FORMAT, lo,
                         "%s overlaps %s: expected it to start at or after %" PRIu64 ", found %" PRIu64,
                         span_name(&s[i], a, sizeof a), span_name(&s[i - 1], b, sizeof b), end, lo);
        for (uint64_t k = end; k < lo; k++)
            if (r->b[k])
                return rfail(r, ZE_FORMAT, k,
                             "padding byte outside the header, table and sections: expected 0x00, "
                             "found 0x%02x",
                             r->b[k]);
        if (i < n && s[i].hi > end) end = s[i].hi;
    }
    return ZOK;
}

static zstatus read_entry(rd *r, uint32_t i, span *sp) {
    uint64_t e = r->table_off + (uint64_t)i * ENTRY_BYTES;
    uint32_t id = le32(r->b + e), flags = le32(r->b + e + 4);
    uint64_t off = le64(r->b + e + 8), len = le64(r->b + e + 16), sum = le64(r->b + e + 24);
    char nm[48];
    span tmp = {.entry = i, .id = id};
    span_name(&tmp, nm, sizeof nm);
    if (off % 8)
        return rfail(r, ZE_FORMAT, e + 8, "%s: offset: expected a multiple of 8, found %" PRIu64, nm, off);
    if (off > r->size || len > r->size - off)
        return rfail(r, ZE_FORMAT, e + 16,
                     "%s runs past the end of the file: expected at most %" PRIu64
                     " bytes from offset %" PRIu64 ", found %" PRIu64,
                     nm, off > r->size ? 0 : r->size - off, off, len);
    uint64_t got = fnv1a(FNV_INIT, r->b + off, len);
    if (got != sum)
        return rfail(r, ZE_FORMAT, e + 24,
                     "%s checksum (FNV-1a 64 of bytes %" PRIu64 "..%" PRIu64 "): expected 0x%016" PRIx64
                     " as stored, found 0x%016" PRIx64,
                     nm, off, off + len - (len > 0), sum, got);
    *sp = (span){off, off + len, i, id};
    if (id >= 1 && id < SEC_END) {
        if (r->entry[id] >= 0)
            return rfail(r, ZE_FORMAT, e,
                         "%s is a duplicate: expected one %s section, found a second (the first "
                         "is entry %d)",
                         nm, secs[id].name, r->entry[id]);
        r->entry[id] = (int)i;
        r->off[id] = off;
        r->len[id] = len;
    } else if (!(flags & SEC_OPTIONAL)) {
        return rfail(r, ZE_UNSUPPORTED, e,
                     "unknown required section: expected an id from 1 to %d or the optional "
                     "flag (bit 0), found id %u with flags 0x%x",
                     SEC_END - 1, id, flags);
    }
    return ZOK;
}

static zstatus read_table(rd *r) {
    span s[MAX_SECTIONS + 2];
    for (int id = 0; id < SEC_END; id++)
        r->entry[id] = -1;
    for (uint32_t i = 0; i < r->n_sections; i++) {
        zstatus st = read_entry(r, i, &s[i]);
        if (st) return st;
    }
    for (int id = 1; id < SEC_END; id++)
        if (r->entry[id] < 0)
            return rfail(r, ZE_FORMAT, r->table_off,
                         "section table: missing section %s: expected id %d among the %u "
                         "entries, found none",
                         secs[id].name, id, r->n_sections);
    s[r->n_sections] = (span){0, r->header_size, UINT32_MAX, 0};
    s[r->n_sections + 1] =
        (span){r->table_off, r->table_off + (uint64_t)r->n_sections * ENTRY_BYTES, UINT32_MAX - 1, 0};
    return check_spans(r, s, r->n_sections + 2);
}

/* ---- reader: records ----------------------------------------------------------- */

static zstatus decode_section(rd *r, zplan *p, int id, locator *loc) {
    const secdesc *s = &secs[id];
    uint64_t off = r->off[id], len = r->len[id];
    if (len < SEC_PREFIX)
        return rfail(r, ZE_FORMAT, off,
                     "section %s is too small: expected at least %d bytes (count and record "
                     "size), found %" PRIu64,
                     s->name, SEC_PREFIX, len);
    uint32_t n = le32(r->b + off), rs = le32(r->b + off + 4), want = rec_bytes(s);
    if (id == SEC_META && r->minor < 2) want = META_BYTES_1_1; /* older: no slots, no batch schedule */
    if (id == SEC_META && r->minor == 2) want = META_BYTES_1_2; /* no load schedule */
    bool newer = r->minor > ZPLAN_VERSION_MINOR;
    if (rs < want || (!newer && rs != want))
        return rfail(r, ZE_FORMAT, off + 4,
                     "section %s: record size: expected %s%u bytes (format %u.%u), found %u", s->name,
                     newer ? "at least " : "", want, r->major, r->minor, rs);
    if ((len - SEC_PREFIX) % rs)
        return rfail(r, ZE_FORMAT, off,
                     "section %s: size: expected 8 + a multiple of the %u-byte record size, found %" PRIu64,
                     s->name, rs, len);
    if (n != (len - SEC_PREFIX) / rs)
        return rfail(r, ZE_FORMAT, off,
                     "section %s: record count does not match the section size: expected %" PRIu64
                     " (%" PRIu64 " bytes of %u-byte records), found %u",
                     s->name, (len - SEC_PREFIX) / rs, len - SEC_PREFIX, rs, n);
    if (id == SEC_META && n != 1)
        return rfail(r, ZE_FORMAT, off, "section META: record count: expected 1, found %u", n);
    char *recs = sec_alloc(p, id, n);
    if (!recs)
        return rfail(r, ZE_NOMEM, off, "out of memory for section %s: expected %" PRIu64 " bytes, found none",
                     s->name, (uint64_t)n * s->elem);
    for (uint32_t i = 0; i < n; i++)
        decode_rec(s, r->b + off + SEC_PREFIX + (uint64_t)i * rs, want, recs + (size_t)i * s->elem);
    loc->off[id] = off + SEC_PREFIX;
    loc->rs[id] = rs;
    return ZOK;
}

static zstatus parse(rd *r, zplan *p) {
    zstatus st = check_header(r);
    if (!st) st = read_table(r);
    locator loc = {{0}};
    for (int id = 1; id < SEC_END && !st; id++)
        st = decode_section(r, p, id, &loc);
    p->major = r->major;
    p->minor = r->minor;
    if (!st && r->minor < 2) p->n_seqs = 1; /* before 1.2: one cache per KV buffer */
    if (!st) st = validate(p, r->name, &loc, r->d);
    return st;
}

zstatus zplan_parse(const void *buf, uint64_t size, const char *name, zplan **out, zdiag *d) {
    *out = NULL;
    if (!name) name = "<memory>";
    if (!buf && size)
        return zdiag_set(d, ZE_INVALID, "%s: no buffer: expected %" PRIu64 " bytes, found NULL", name, size);
    static const uint8_t none[1];
    zarena *a = zarena_new();
    zplan *p = a ? zarena_alloc(a, sizeof *p) : NULL;
    if (!p) {
        zarena_free(a);
        return zdiag_set(d, ZE_NOMEM, "%s: out of memory before parsing: expected a few KiB, found none",
                         name);
    }
    p->arena = a;
    rd r = {.b = buf ? buf : none, .size = size, .name = name, .d = d};
    zstatus st = parse(&r, p);
    if (st) {
        zarena_free(a);
        return st;
    }
    *out = p;
    return ZOK;
}

zstatus zplan_read(const char *path, zplan **out, zdiag *d) {
    *out = NULL;
    const void *map;
    uint64_t size;
    zstatus st = zfile_map(path, &map, &size, d);
    if (st) return st;
    /* The plan is decoded into its own arena: the mapping can go at once. */
    st = zplan_parse(map, size, path, out, d);
    zfile_unmap(map, size);
    return st;
}

void zplan_free(zplan *p) {
    if (p) zarena_free(p->arena); /* p lives in its arena */
}

/* ---- printer ------------------------------------------------------------------ */

enum { PRINT_SHOWN = 160 }; /* the printer cuts strings later than messages do */

typedef struct pctx {
    const zplan *p;
    FILE *out;
    char buf[4][PRINT_SHOWN + 4];
    int next;
} pctx;

static const char *pstr(pctx *c, uint32_t s) {
    return shown(c->buf[c->next++ & 3], zplan_str(c->p, s), PRINT_SHOWN);
}

static double mib(uint64_t b) {
    return (double)b / 1048576.0;
}

static const struct {
    uint32_t bit;
    const char *name;
} features[] = {
    {ZPLAN_NEED_FP16, "fp16"},
    {ZPLAN_NEED_STORAGE16, "storage16"},
    {ZPLAN_NEED_STORAGE8, "storage8"},
    {ZPLAN_NEED_INT_DOT, "int-dot"},
    {ZPLAN_NEED_COOPMAT_NV, "coopmat-nv"},
    {ZPLAN_NEED_COOPMAT_KHR, "coopmat-khr"},
    {ZPLAN_NEED_SUBGROUP_SIZE, "subgroup-size"},
    {ZPLAN_NEED_COOPMAT_WG, "coopmat-workgroup"},
};

static void print_identity(pctx *c) {
    const zplan *p = c->p;
    FILE *o = c->out;
    fprintf(o, "format:    zinc plan %u.%u\n", p->major, p->minor);
    fprintf(o, "compiler:  %s\n", pstr(c, p->compiler));
    fprintf(o, "gguf:      %s (%" PRIu64 " bytes, identity %016" PRIx64 ")\n", pstr(c, p->gguf_path),
            p->gguf_size, p->gguf_hash);
    fprintf(o, "model:     %s, %u layers, n_embd %u, n_vocab %u, ctx %u", pstr(c, p->arch), p->n_layer,
            p->n_embd, p->n_vocab, p->ctx);
    if (p->n_seqs > 1) fprintf(o, " per sequence, %u sequence slots", p->n_seqs);
    fputc('\n', o);
    fprintf(o, "target:    %s", pstr(c, p->target));
    if (zplan_str(p, p->device_name)[0]) fprintf(o, ", device '%s'", pstr(c, p->device_name));
    fprintf(o, " (vendor 0x%04x, device 0x%04x), subgroup %u, shared memory %u bytes\n", p->vendor_id,
            p->device_id, p->subgroup_size, p->shared_bytes);
    fprintf(o, "requires: ");
    for (size_t i = 0; i < COUNT(features); i++)
        if (p->required & features[i].bit) fprintf(o, " %s", features[i].name);
    fprintf(o, "%s\n", p->required ? "" : " nothing beyond Vulkan compute");
    fprintf(o, "io:        step buffer %u, tokens buffer %u, logits buffer %u\n", p->step_buffer,
            p->tokens_buffer, p->logits_buffer);
}

static void print_buffers(pctx *c) {
    const zplan *p = c->p;
    uint64_t sum[ZPB_KIND_LIMIT] = {0}, total = 0;
    uint32_t cnt[ZPB_KIND_LIMIT] = {0};
    for (uint32_t i = 0; i < p->n_buffers; i++) {
        sum[p->buffers[i].kind] += p->buffers[i].size;
        cnt[p->buffers[i].kind]++;
        total += p->buffers[i].size;
    }
    uint64_t other = total - sum[ZPB_WEIGHTS] - sum[ZPB_ACT] - sum[ZPB_KV] - sum[ZPB_STATE];
    fprintf(
        c->out,
        "buffers:   %u, %.2f MiB: weights %.2f MiB in %u, activations %.2f MiB in %u, KV %.2f MiB in %u, ",
        p->n_buffers, mib(total), mib(sum[ZPB_WEIGHTS]), cnt[ZPB_WEIGHTS], mib(sum[ZPB_ACT]), cnt[ZPB_ACT],
        mib(sum[ZPB_KV]), cnt[ZPB_KV]);
    /* Recurrent states (qwen35's delta-net layers) are per sequence, like the KV cache. */
    if (cnt[ZPB_STATE]) fprintf(c->out, "state %.2f MiB in %u, ", mib(sum[ZPB_STATE]), cnt[ZPB_STATE]);
    fprintf(c->out, "other %.2f MiB in %u\n", mib(other),
            p->n_buffers - cnt[ZPB_WEIGHTS] - cnt[ZPB_ACT] - cnt[ZPB_KV] - cnt[ZPB_STATE]);
    fprintf(c->out, "  %5s  %-8s %12s  %s\n", "#", "kind", "size MiB", "name");
    for (uint32_t i = 0; i < p->n_buffers; i++) {
        const zplan_buffer *b = &p->buffers[i];
        fprintf(c->out, "  %5u  %-8s %12.2f  %s", i, kind_name(b->kind), mib(b->size), pstr(c, b->name));
        if (b->kind == ZPB_WEIGHTS)
            fprintf(c->out, "  (gguf bytes %" PRIu64 ", +%" PRIu64 ")", b->src_offset, b->size);
        fputc('\n', c->out);
    }
}

static void print_kernels(pctx *c) {
    const zplan *p = c->p;
    fprintf(c->out, "kernels:   %u, SPIR-V %" PRIu64 " bytes\n", p->n_kernels,
            (uint64_t)p->n_spirv_words * 4);
    fprintf(c->out, "  %5s  %8s  %8s  %10s  %s\n", "#", "bindings", "shared B", "SPIR-V B", "name");
    for (uint32_t i = 0; i < p->n_kernels; i++) {
        const zplan_kernel *k = &p->kernels[i];
        fprintf(c->out, "  %5u  %8u  %8u  %10" PRIu64 "  %s\n", i, k->n_bindings, k->shared_bytes,
                (uint64_t)k->n_words * 4, pstr(c, k->name));
    }
}

/* Kernels of one phase by number of dispatches, most used first. */
static void print_histogram(pctx *c, const zplan_schedule *s) {
    uint32_t *n = calloc(c->p->n_kernels ? c->p->n_kernels : 1, sizeof *n);
    if (!n) return;
    for (uint32_t i = s->first; i < s->first + s->count; i++)
        n[c->p->dispatches[i].kernel]++;
    int col = fprintf(c->out, "    kernels:");
    for (uint32_t done = 0;; done++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t k = 0; k < c->p->n_kernels; k++)
            if (n[k] && (best == UINT32_MAX || n[k] > n[best])) best = k;
        if (best == UINT32_MAX) break;
        char item[PRINT_SHOWN + 16];
        snprintf(item, sizeof item, " %s x%u", pstr(c, c->p->kernels[best].name), n[best]);
        if (done && col + (int)strlen(item) + 1 > 110) /* wrap long histograms */
            col = fprintf(c->out, ",\n             ") - 2;
        else if (done)
            col += fprintf(c->out, ",");
        col += fprintf(c->out, "%s", item);
        n[best] = 0;
    }
    fputc('\n', c->out);
    free(n);
}

static void print_dispatch(pctx *c, uint32_t i, uint32_t tmax) {
    const zplan *p = c->p;
    const zplan_dispatch *dp = &p->dispatches[i];
    int64_t g1[3], gm[3];
    for (int a = 0; a < 3; a++)
        g1[a] = groups_at(&dp->groups[a], 1), gm[a] = groups_at(&dp->groups[a], tmax);
    fprintf(c->out, "    %5u %c %-28s node %-28s groups T=1 %" PRId64 "x%" PRId64 "x%" PRId64, i,
            dp->flags & ZPLAN_BARRIER ? 'B' : ' ', pstr(c, p->kernels[dp->kernel].name), pstr(c, dp->node),
            g1[0], g1[1], g1[2]);
    if (tmax > 1) fprintf(c->out, ", T=%u %" PRId64 "x%" PRId64 "x%" PRId64, tmax, gm[0], gm[1], gm[2]);
    fputc('\n', c->out);
    fprintf(c->out, "            bindings:");
    for (uint32_t j = 0; j < dp->n_bindings; j++) {
        const zplan_binding *b = &p->bindings[dp->first_binding + j];
        fprintf(c->out, " %u=%u:%s[%" PRIu64, j, b->buffer, pstr(c, p->buffers[b->buffer].name), b->offset);
        if (b->range)
            fprintf(c->out, ",+%" PRIu64 "]", b->range);
        else
            fprintf(c->out, ",end]");
    }
    fputc('\n', c->out);
}

static void print_schedules(pctx *c, bool verbose) {
    static const char *const phase[ZPLAN_SCHEDS] = {"prefill", "decode", "batch", "load"};
    const zplan *p = c->p;
    uint32_t scheduled = 0;
    fprintf(c->out, "schedules:\n");
    for (int ph = 0; ph < ZPLAN_SCHEDS; ph++) {
        const zplan_schedule *s = &p->sched[ph];
        if ((ph == ZPLAN_BATCH || ph == ZPLAN_LOAD) && !s->count) continue;
        uint32_t barriers = 0;
        for (uint32_t i = s->first; i < s->first + s->count; i++)
            barriers += (p->dispatches[i].flags & ZPLAN_BARRIER) != 0;
        scheduled += s->count;
        if (ph == ZPLAN_LOAD)
            fprintf(c->out, "  load: %u dispatches [%u, %u), run once after the upload: weights rewritten into the device layouts of the weight-layout pass\n",
                    s->count, s->first, s->first + s->count);
        else
            fprintf(c->out, "  %s: %u dispatches [%u, %u), %u barriers, max_tokens %u, logits rows %u\n",
                    phase[ph], s->count, s->first, s->first + s->count, barriers, s->max_tokens, s->logits_rows);
        print_histogram(c, s);
        for (uint32_t i = s->first; verbose && i < s->first + s->count; i++)
            print_dispatch(c, i, s->max_tokens);
    }
    if (scheduled < p->n_dispatches || verbose)
        fprintf(c->out, "dispatches: %u in the table, %u bindings\n", p->n_dispatches, p->n_bindings);
}

void zplan_print(const zplan *p, FILE *out, bool verbose) {
    /* The printer follows every index; a plan that was never validated
     * (one in the making) gets its first fault instead of a crash. */
    zdiag d = {0};
    if (validate(p, "plan", NULL, &d)) {
        fprintf(out, "invalid %s\n", d.msg);
        return;
    }
    pctx c = {.p = p, .out = out};
    print_identity(&c);
    print_buffers(&c);
    print_kernels(&c);
    print_schedules(&c, verbose);
}
