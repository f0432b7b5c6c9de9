/* Plan files: a synthetic plan with real SPIR-V (compiled by shaderc) is
 * written and read back field by field; every truncation and every flipped
 * byte of the file must be rejected in one line; the container's rules
 * (magic, versions, sections, checksums, padding, record sizes) and each
 * semantic check of zplan_validate have a test of their own; `zinc info`
 * runs on a written plan.
 *
 * The container helpers below (checksums, section table, rebuilding a file
 * with other sections) are written from docs/plan-format.md, not from
 * backend/plan_io.c, so they also check that the document is exact. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../backend/plan.h"
#include "../../backend/shaderc.h"
#include "testutil.h"

/* This build's plan format, "major.minor". */
#define STR_(x) #x
#define STR(x) STR_(x)
#define FMT STR(ZPLAN_VERSION_MAJOR) "." STR(ZPLAN_VERSION_MINOR)

/* ---- the synthetic plan ------------------------------------------------------ */

static const char scale_src[] = "#version 450\n"
                                "layout(local_size_x = 64) in;\n"
                                "layout(std430, binding = 0) readonly buffer Step { uint step[4]; };\n"
                                "layout(std430, binding = 1) readonly buffer X { float x[]; };\n"
                                "layout(std430, binding = 2) buffer Y { float y[]; };\n"
                                "void main() {\n"
                                "    uint i = gl_GlobalInvocationID.x;\n"
                                "    if (i < step[0] * 64u) y[i] = 2.0 * x[i];\n"
                                "}\n";

static const char add_src[] = "#version 450\n"
                              "layout(local_size_x = 32) in;\n"
                              "layout(std430, binding = 0) readonly buffer Step { uint step[4]; };\n"
                              "layout(std430, binding = 1) readonly buffer A { float a[]; };\n"
                              "layout(std430, binding = 2) readonly buffer B { float b[]; };\n"
                              "layout(std430, binding = 3) writeonly buffer C { float c[]; };\n"
                              "shared float s[32];\n"
                              "void main() {\n"
                              "    uint i = gl_GlobalInvocationID.x;\n"
                              "    s[gl_LocalInvocationID.x] = a[i];\n"
                              "    barrier();\n"
                              "    if (i < step[0] * 32u) c[i] = s[gl_LocalInvocationID.x] + b[i];\n"
                              "}\n";

enum { N_VOCAB = 32, MAX_T = 8, CTX = 64 };
enum { B_STEP, B_TOKENS, B_LOGITS, B_EMBD, B_UP, B_ACT, B_KV, B_SCRATCH, N_BUF };

typedef struct sbuf {
    char *s;
    uint32_t n;
} sbuf;

static uint32_t str(sbuf *b, const char *s) {
    uint32_t at = b->n, len = (uint32_t)strlen(s) + 1;
    b->s = realloc(b->s, b->n + len);
    cr_assert_not_null(b->s);
    memcpy(b->s + at, s, len);
    b->n += len;
    return at;
}

static void compile(zarena *a, const char *src, const char *name, zvk_spirv *out) {
    zvk_glsl_opts o = {.name = name};
    zdiag d = {0};
    zstatus st = zvk_glsl_compile(a, src, strlen(src), &o, out, &d);
    cr_assert_eq(st, ZOK, "shaderc: %s", d.msg);
    cr_assert_gt(out->n_words, 5);
}

static void add_binding(zplan *p, uint32_t buf, uint64_t off, uint64_t range) {
    p->bindings[p->n_bindings++] = (zplan_binding){.buffer = buf, .offset = off, .range = range};
}

/* One dispatch of kernel k over the given (buffer, offset, range) triples. */
static void add_dispatch(zplan *p, sbuf *sb, uint32_t k, const char *node, uint32_t flags, zplan_affine gx,
                         const uint64_t (*b)[3], uint32_t nb) {
    zplan_dispatch *dp = &p->dispatches[p->n_dispatches++];
    *dp = (zplan_dispatch){.kernel = k,
                           .first_binding = p->n_bindings,
                           .n_bindings = nb + 1,
                           .flags = flags,
                           .node = str(sb, node)};
    dp->groups[0] = gx;
    dp->groups[1] = (zplan_affine){0, 1, 1};
    dp->groups[2] = (zplan_affine){0, 3, 2};
    add_binding(p, B_STEP, 0, 0);
    for (uint32_t i = 0; i < nb; i++)
        add_binding(p, (uint32_t)b[i][0], b[i][1], b[i][2]);
}

static void add_dispatches(zplan *p, sbuf *sb) {
    const uint64_t s0[][3] = {{B_EMBD, 0, 0}, {B_ACT, 0, 2048}};
    const uint64_t a0[][3] = {{B_ACT, 0, 2048}, {B_KV, 0, 2048}, {B_ACT, 2048, 2048}};
    const uint64_t s1[][3] = {{B_ACT, 2048, 2048}, {B_LOGITS, 0, 0}};
    const uint64_t a1[][3] = {{B_UP, 4096, 4096}, {B_SCRATCH, 0, 256}, {B_ACT, 0, 0}};
    /* prefill: dispatches 0..2 */
    add_dispatch(p, sb, 0, "blk.0.scale", ZPLAN_BARRIER, (zplan_affine){64, 63, 64}, s0, 2);
    add_dispatch(p, sb, 1, "blk.0.add", ZPLAN_BARRIER, (zplan_affine){32, -5, 32}, a0, 3);
    add_dispatch(p, sb, 0, "output", ZPLAN_BARRIER, (zplan_affine){1, 0, 1}, s1, 2);
    /* decode: dispatches 3..6 */
    add_dispatch(p, sb, 0, "blk.0.scale", ZPLAN_BARRIER, (zplan_affine){0, 1, 1}, s0, 2);
    add_dispatch(p, sb, 1, "blk.0.add", 0, (zplan_affine){0, 2, 1}, a1, 3);
    add_dispatch(p, sb, 1, "blk.0.add", ZPLAN_BARRIER, (zplan_affine){32, 0, 32}, a0, 3);
    add_dispatch(p, sb, 0, "output", ZPLAN_BARRIER, (zplan_affine){1, 0, 1}, s1, 2);
    p->sched[ZPLAN_PREFILL] = (zplan_schedule){0, 3, MAX_T, MAX_T};
    p->sched[ZPLAN_DECODE] = (zplan_schedule){3, 4, 1, 1};
}

static void add_buffers(zplan *p, sbuf *sb) {
    const struct {
        uint32_t kind;
        const char *name;
        uint64_t size, src;
    } b[N_BUF] = {
        [B_STEP] = {ZPB_STEP, "step", 16, 0},
        [B_TOKENS] = {ZPB_TOKENS, "tokens", 4 * MAX_T, 0},
        [B_LOGITS] = {ZPB_LOGITS, "logits", 4 * MAX_T * N_VOCAB, 0},
        [B_EMBD] = {ZPB_WEIGHTS, "token_embd.weight", 4096, 1024},
        [B_UP] = {ZPB_WEIGHTS, "blk.0.ffn_up.weight", 8192, 5120},
        [B_ACT] = {ZPB_ACT, "activations", 4096, 0},
        [B_KV] = {ZPB_KV, "cache_k.0", 2048, 0},
        [B_SCRATCH] = {ZPB_SCRATCH, "scratch", 256, 0},
    };
    for (int i = 0; i < N_BUF; i++)
        p->buffers[i] = (zplan_buffer){b[i].kind, str(sb, b[i].name), b[i].size, b[i].src};
    p->n_buffers = N_BUF;
}

static void add_kernels(zplan *p, sbuf *sb) {
    zvk_spirv k0, k1;
    compile(p->arena, scale_src, "scale.comp", &k0);
    compile(p->arena, add_src, "add.comp", &k1);
    p->n_spirv_words = (uint32_t)(k0.n_words + k1.n_words);
    p->spirv = zarena_array(p->arena, p->n_spirv_words, 4);
    cr_assert_not_null(p->spirv);
    memcpy(p->spirv, k0.words, k0.n_words * 4);
    memcpy(p->spirv + k0.n_words, k1.words, k1.n_words * 4);
    p->kernels[0] = (zplan_kernel){str(sb, "scale"), 0, (uint32_t)k0.n_words, 3, 0, 0};
    p->kernels[1] = (zplan_kernel){str(sb, "add"), (uint32_t)k0.n_words, (uint32_t)k1.n_words, 4, 128, 0};
    p->n_kernels = 2;
}

/* A small but complete plan: every buffer kind, two kernels, both phases. */
static zplan *make_plan(void) {
    zarena *a = zarena_new();
    zplan *p = a ? zarena_alloc(a, sizeof *p) : NULL;
    cr_assert_not_null(p);
    sbuf sb = {0};
    *p = (zplan){.arena = a, .major = ZPLAN_VERSION_MAJOR, .minor = ZPLAN_VERSION_MINOR, .n_seqs = 1};
    str(&sb, "");
    p->gguf_path = str(&sb, "/models/tiny-\xc3\xa9.gguf");
    p->gguf_size = 1u << 20;
    p->gguf_hash = 0xfedcba9876543210ull;
    p->arch = str(&sb, "qwen3");
    p->n_vocab = N_VOCAB, p->n_embd = 16, p->n_layer = 1, p->ctx = CTX;
    p->target = str(&sb, "h200");
    p->device_name = str(&sb, "NVIDIA H200");
    p->vendor_id = 0x10de, p->device_id = 0x2335;
    p->subgroup_size = 32, p->shared_bytes = 49152;
    p->required = ZPLAN_NEED_FP16 | ZPLAN_NEED_STORAGE16 | ZPLAN_NEED_SUBGROUP_SIZE;
    p->compiler = str(&sb, "zincc 0.1.0, test");
    p->step_buffer = B_STEP, p->tokens_buffer = B_TOKENS, p->logits_buffer = B_LOGITS;
    p->buffers = zarena_array(a, N_BUF, sizeof *p->buffers);
    p->kernels = zarena_array(a, 2, sizeof *p->kernels);
    p->bindings = zarena_array(a, 32, sizeof *p->bindings);
    p->dispatches = zarena_array(a, 8, sizeof *p->dispatches);
    add_buffers(p, &sb);
    add_kernels(p, &sb);
    add_dispatches(p, &sb);
    p->strings = zarena_alloc(a, sb.n);
    cr_assert_not_null(p->strings);
    memcpy(p->strings, sb.s, sb.n);
    p->n_strings_bytes = sb.n;
    free(sb.s);
    zdiag d = {0};
    cr_assert_eq(zplan_validate(p, "synthetic", &d), ZOK, "the synthetic plan is invalid: %s", d.msg);
    return p;
}

/* The written bytes of the synthetic plan (malloc'd). */
static uint8_t *plan_bytes(size_t *n) {
    zplan *p = make_plan();
    const char *path = tu_tmp("bytes.zplan");
    zdiag d = {0};
    cr_assert_eq(zplan_write(p, path, &d), ZOK, "%s", d.msg);
    zplan_free(p);
    uint8_t *b = tu_read_file(path, n);
    cr_assert_not_null(b);
    unlink(path);
    return b;
}

/* ---- field-by-field comparison ------------------------------------------------- */

#define SAME(f) cr_expect_eq(a->f, b->f, #f ": %" PRIu64 " != %" PRIu64, (uint64_t)a->f, (uint64_t)b->f)
static void expect_same_meta(const zplan *a, const zplan *b) {
    SAME(gguf_path);
    SAME(gguf_size);
    SAME(gguf_hash);
    SAME(arch);
    SAME(n_vocab);
    SAME(n_embd);
    SAME(n_layer);
    SAME(ctx);
    SAME(target);
    SAME(device_name);
    SAME(vendor_id);
    SAME(device_id);
    SAME(subgroup_size);
    SAME(shared_bytes);
    SAME(required);
    SAME(compiler);
    SAME(step_buffer);
    SAME(tokens_buffer);
    SAME(logits_buffer);
    SAME(n_strings_bytes);
    SAME(n_buffers);
    SAME(n_kernels);
    SAME(n_spirv_words);
    SAME(n_bindings);
    SAME(n_dispatches);
    for (int ph = 0; ph < ZPLAN_PHASES; ph++) {
        SAME(sched[ph].first);
        SAME(sched[ph].count);
        SAME(sched[ph].max_tokens);
        SAME(sched[ph].logits_rows);
    }
}

static void expect_same_tables(const zplan *a, const zplan *b) {
    cr_assert_eq(memcmp(a->strings, b->strings, a->n_strings_bytes), 0);
    cr_assert_eq(memcmp(a->spirv, b->spirv, (size_t)a->n_spirv_words * 4), 0);
    for (uint32_t i = 0; i < a->n_buffers; i++) {
        SAME(buffers[i].kind);
        SAME(buffers[i].name);
        SAME(buffers[i].size);
        SAME(buffers[i].src_offset);
    }
    for (uint32_t i = 0; i < a->n_kernels; i++) {
        SAME(kernels[i].name);
        SAME(kernels[i].code);
        SAME(kernels[i].n_words);
        SAME(kernels[i].n_bindings);
        SAME(kernels[i].shared_bytes);
    }
    for (uint32_t i = 0; i < a->n_bindings; i++) {
        SAME(bindings[i].buffer);
        SAME(bindings[i].offset);
        SAME(bindings[i].range);
    }
    for (uint32_t i = 0; i < a->n_dispatches; i++) {
        SAME(dispatches[i].kernel);
        SAME(dispatches[i].first_binding);
        SAME(dispatches[i].n_bindings);
        SAME(dispatches[i].flags);
        SAME(dispatches[i].node);
        for (int g = 0; g < 3; g++) {
            SAME(dispatches[i].groups[g].a);
            SAME(dispatches[i].groups[g].b);
            SAME(dispatches[i].groups[g].div);
        }
    }
}
#undef SAME

static void expect_same(const zplan *a, const zplan *b) {
    expect_same_meta(a, b);
    expect_same_tables(a, b);
}

/* ---- the container, from docs/plan-format.md ------------------------------------ */

static uint32_t rd32(const uint8_t *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static uint64_t rd64(const uint8_t *b) {
    return rd32(b) | (uint64_t)rd32(b + 4) << 32;
}
static void wr32(uint8_t *b, uint32_t v) {
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}
static void wr64(uint8_t *b, uint64_t v) {
    wr32(b, (uint32_t)v);
    wr32(b + 4, (uint32_t)(v >> 32));
}

static uint64_t fnv(uint64_t h, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV0 0xcbf29ce484222325ull

enum { S_META = 1, S_STRINGS, S_BUFFERS, S_KERNELS, S_SPIRV, S_BINDINGS, S_DISPATCHES };

/* Recomputes every checksum after a test edited the bytes. */
static void fix_checksums(uint8_t *b, size_t n) {
    uint32_t hs = rd32(b + 12), ns = rd32(b + 20);
    uint64_t to = rd64(b + 32);
    cr_assert(hs >= 64 && hs <= n && to <= n && (uint64_t)ns * 32 <= n - to);
    for (uint32_t i = 0; i < ns; i++) {
        uint8_t *e = b + to + 32 * i;
        uint64_t off = rd64(e + 8), sz = rd64(e + 16);
        if (off <= n && sz <= n - off) wr64(e + 24, fnv(FNV0, b + off, sz));
    }
    wr64(b + 40, fnv(FNV0, b + to, (size_t)ns * 32));
    static const uint8_t zeros[8];
    wr64(b + 56, fnv(fnv(fnv(FNV0, b, 56), zeros, 8), b + 64, hs - 64));
}

/* The table entry of section id (its offset in the file), or 0. */
static size_t entry_of(const uint8_t *b, uint32_t id) {
    uint32_t ns = rd32(b + 20);
    uint64_t to = rd64(b + 32);
    for (uint32_t i = 0; i < ns; i++)
        if (rd32(b + to + 32 * i) == id) return (size_t)(to + 32 * i);
    return 0;
}

/* File offset of record i of section id. */
static size_t record_at(const uint8_t *b, uint32_t id, uint32_t i) {
    size_t e = entry_of(b, id);
    cr_assert(e, "no section %u", id);
    uint64_t off = rd64(b + e + 8);
    return (size_t)(off + 8 + (uint64_t)i * rd32(b + off + 4));
}

typedef struct tsec {
    uint32_t id, flags;
    const uint8_t *p;
    size_t n;
} tsec;

static int sections_of(const uint8_t *b, tsec *s) {
    uint32_t ns = rd32(b + 20);
    uint64_t to = rd64(b + 32);
    for (uint32_t i = 0; i < ns; i++) {
        const uint8_t *e = b + to + 32 * i;
        s[i] = (tsec){rd32(e), rd32(e + 4), b + rd64(e + 8), (size_t)rd64(e + 16)};
    }
    return (int)ns;
}

/* A new file from sections: header of hs bytes (extra bytes 0xee), the table
 * right after it, then the sections, each 8-aligned. */
static uint8_t *rebuild(const tsec *s, int ns, uint32_t hs, uint16_t minor, size_t *n) {
    size_t to = hs, at = to + 32 * (size_t)ns;
    size_t total = at;
    for (int i = 0; i < ns; i++)
        total = ((total + 7) & ~(size_t)7) + s[i].n;
    uint8_t *b = calloc(1, total);
    cr_assert_not_null(b);
    memcpy(b, "ZINCPLAN", 8);
    b[8] = 1, b[10] = (uint8_t)minor;
    wr32(b + 12, hs), wr32(b + 20, (uint32_t)ns), wr64(b + 24, total), wr64(b + 32, to);
    memset(b + 64, 0xee, hs - 64);
    for (int i = 0; i < ns; i++) {
        at = (at + 7) & ~(size_t)7;
        uint8_t *e = b + to + 32 * i;
        wr32(e, s[i].id), wr32(e + 4, s[i].flags), wr64(e + 8, at), wr64(e + 16, s[i].n);
        memcpy(b + at, s[i].p, s[i].n);
        at += s[i].n;
    }
    fix_checksums(b, total);
    *n = total;
    return b;
}

/* ---- parsing and messages ---------------------------------------------------------- */

/* Parses from an exact-size heap copy, so that ASan sees any over-read. */
static zstatus parse_exact(const uint8_t *b, size_t n, zplan **p, zdiag *d) {
    uint8_t *c = malloc(n ? n : 1);
    cr_assert_not_null(c);
    if (n) memcpy(c, b, n);
    zstatus st = zplan_parse(n ? c : NULL, n, "m.zplan", p, d);
    free(c);
    return st;
}

/* "<path>: offset <N>: <what>: expected <X>, found <Y>"; off < 0: no offset. */
static void expect_msg(const zdiag *d, const char *name, int64_t off, const char *needle) {
    char pre[256];
    if (off >= 0)
        snprintf(pre, sizeof pre, "%s: offset %" PRId64 ": ", name, off);
    else
        snprintf(pre, sizeof pre, "%s: ", name);
    cr_expect(strncmp(d->msg, pre, strlen(pre)) == 0, "message \"%s\" should start with \"%s\"", d->msg, pre);
    if (off < 0) cr_expect(strncmp(d->msg + strlen(pre), "offset ", 7) != 0, "unexpected offset: %s", d->msg);
    cr_expect(strstr(d->msg, ": expected ") && strstr(d->msg, ", found "), "no expectation in \"%s\"",
              d->msg);
    cr_expect(strstr(d->msg, needle), "message \"%s\" should mention \"%s\"", d->msg, needle);
    cr_expect(!strchr(d->msg, '\n'), "message \"%s\" is more than one line", d->msg);
}

static void expect_fail(const uint8_t *b, size_t n, zstatus code, int64_t off, const char *needle) {
    zplan *p = (zplan *)&p; /* must be reset to NULL */
    zdiag d = {0};
    zstatus st = parse_exact(b, n, &p, &d);
    cr_expect_eq(st, code, "status %s, expected %s (%s)", zstatus_name(st), zstatus_name(code), d.msg);
    cr_expect_eq(d.code, code);
    cr_expect_null(p);
    cr_log_info("%s", d.msg);
    expect_msg(&d, "m.zplan", off, needle);
}

static zplan *expect_ok(const uint8_t *b, size_t n) {
    zplan *p = NULL;
    zdiag d = {0};
    zstatus st = parse_exact(b, n, &p, &d);
    cr_assert_eq(st, ZOK, "unexpected failure: %s", d.msg);
    return p;
}

/* ---- round trip ---------------------------------------------------------------- */

Test(plan_io, round_trip) {
    zplan *p = make_plan();
    const char *path = tu_tmp("rt.zplan");
    zdiag d = {0};
    cr_assert_eq(zplan_write(p, path, &d), ZOK, "%s", d.msg);
    zplan *q = NULL;
    cr_assert_eq(zplan_read(path, &q, &d), ZOK, "%s", d.msg);
    cr_expect_eq(q->major, ZPLAN_VERSION_MAJOR);
    cr_expect_eq(q->minor, ZPLAN_VERSION_MINOR);
    expect_same(p, q);
    cr_expect_str_eq(zplan_str(q, q->arch), "qwen3");
    cr_expect_eq(q->dispatches[1].groups[0].b, -5);
    cr_expect_eq(q->spirv[q->kernels[1].code], 0x07230203u);
    /* Writing what was read gives the same bytes: the encoding is canonical. */
    const char *again = tu_tmp("rt2.zplan");
    cr_assert_eq(zplan_write(q, again, &d), ZOK, "%s", d.msg);
    size_t n1, n2;
    uint8_t *b1 = tu_read_file(path, &n1), *b2 = tu_read_file(again, &n2);
    cr_assert(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0);
    free(b1), free(b2);
    zplan_free(p), zplan_free(q);
}

Test(plan_io, layout_matches_the_document) {
    size_t n;
    uint8_t *b = plan_bytes(&n);
    cr_expect_eq(memcmp(b, "ZINCPLAN", 8), 0);
    cr_expect_eq(rd32(b + 8) & 0xffff, 1);
    cr_expect_eq(rd32(b + 12), 64);
    cr_expect_eq(rd32(b + 20), 7);
    cr_expect_eq(rd64(b + 24), n);
    cr_expect_eq(rd64(b + 32), 64);
    const uint32_t rs[] = {0, 156, 1, 24, 24, 4, 24, 96};
    tsec s[16];
    int ns = sections_of(b, s);
    for (int i = 0; i < ns; i++) {
        cr_expect_eq(s[i].id, (uint32_t)i + 1);
        cr_expect_eq((size_t)(s[i].p - b) % 8, 0, "section %d is not 8-aligned", i);
        cr_expect_eq(rd32(s[i].p + 4), rs[s[i].id], "section %u: record size %u", s[i].id, rd32(s[i].p + 4));
        cr_expect_eq(s[i].n, 8 + (size_t)rd32(s[i].p) * rs[s[i].id]);
    }
    /* The checksums computed from the document match the writer's. */
    uint8_t *c = malloc(n);
    memcpy(c, b, n);
    fix_checksums(c, n);
    cr_expect_eq(memcmp(b, c, n), 0);
    free(b), free(c);
}

Test(plan_io, write_is_atomic_and_refuses_invalid_plans) {
    zplan *p = make_plan();
    const char *path = tu_tmp("refused.zplan");
    unlink(path);
    p->dispatches[2].kernel = 9;
    zdiag d = {0};
    cr_expect_eq(zplan_write(p, path, &d), ZE_INVALID);
    char name[600];
    snprintf(name, sizeof name, "%s (not written)", path);
    expect_msg(&d, name, -1, "dispatch 2: kernel index out of range");
    struct stat sb;
    cr_expect_neq(stat(path, &sb), 0, "an invalid plan was written");
    zplan *q = make_plan();
    cr_expect_eq(zplan_write(q, "/nonexistent-dir/x.zplan", &d), ZE_IO);
    cr_expect(strstr(d.msg, "cannot write /nonexistent-dir/x.zplan"), "%s", d.msg);
    zplan_free(p), zplan_free(q);
}

Test(plan_io, read_errors) {
    zplan *p = (zplan *)&p;
    zdiag d = {0};
    cr_expect_eq(zplan_read("/nonexistent.zplan", &p, &d), ZE_IO);
    cr_expect_null(p);
    cr_expect_eq(zplan_read(tu_tmp("."), &p, &d), ZE_IO);
    cr_expect(strstr(d.msg, "is a directory"), "%s", d.msg);
    const char *empty = tu_tmp("empty.zplan");
    cr_assert_eq(tu_write_file(empty, "", 0), 0);
    cr_expect_eq(zplan_read(empty, &p, &d), ZE_FORMAT);
    expect_msg(&d, empty, 0, "truncated header");
    cr_expect_eq(zplan_parse(NULL, 5, "x", &p, &d), ZE_INVALID);
    zplan_free(NULL);
}

/* ---- every truncation, every flipped byte -------------------------------------------- */

Test(plan_corrupt, every_truncation_fails_in_one_line) {
    size_t n;
    uint8_t *b = plan_bytes(&n);
    for (size_t k = 0; k < n; k++) {
        zplan *p = NULL;
        zdiag d = {0};
        zstatus st = parse_exact(b, k, &p, &d);
        cr_assert_eq(st, ZE_FORMAT, "truncated to %zu bytes: %s (%s)", k, zstatus_name(st), d.msg);
        cr_assert_null(p);
        cr_assert(strncmp(d.msg, "m.zplan: offset ", 16) == 0 && !strchr(d.msg, '\n') &&
                      strstr(d.msg, ": expected ") && strstr(d.msg, ", found "),
                  "truncated to %zu: %s", k, d.msg);
    }
    free(b);
}

Test(plan_corrupt, every_flipped_byte_fails_in_one_line) {
    size_t n;
    uint8_t *b = plan_bytes(&n);
    static const uint8_t masks[] = {0x01, 0x80, 0xff};
    for (size_t i = 0; i < n; i++)
        for (size_t m = 0; m < sizeof masks; m++) {
            b[i] ^= masks[m];
            zplan *p = NULL;
            zdiag d = {0};
            zstatus st = parse_exact(b, n, &p, &d);
            b[i] ^= masks[m];
            cr_assert_neq(st, ZOK, "byte %zu ^ 0x%02x was accepted", i, masks[m]);
            cr_assert_null(p);
            cr_assert(strncmp(d.msg, "m.zplan: offset ", 16) == 0 && !strchr(d.msg, '\n') &&
                          strstr(d.msg, ": expected ") && strstr(d.msg, ", found "),
                      "byte %zu ^ 0x%02x: %s", i, masks[m], d.msg);
        }
    free(b);
}

/* Mutations behind valid checksums reach the record decoder and the
 * validator: each must end in a clean failure or a plan that validates
 * and prints. */
Test(plan_corrupt, mutations_with_fixed_checksums) {
    size_t n;
    uint8_t *b = plan_bytes(&n);
    uint8_t *c = malloc(n);
    tu_rng r = tu_rng_seed(20240607);
    int failed = 0, passed = 0;
    size_t first = rd64(b + rd64(b + 32) + 8); /* the first section: header and table stay intact */
    FILE *null = fopen("/dev/null", "w");
    cr_assert_not_null(null);
    for (int it = 0; it < 3000; it++) {
        memcpy(c, b, n);
        int k = 1 + (int)(tu_next(&r) % 3);
        for (int j = 0; j < k; j++) {
            size_t at = first + (size_t)(tu_next(&r) % (n - first));
            c[at] = (it & 1) ? (uint8_t)tu_next(&r) : (uint8_t)(c[at] ^ (1u << (tu_next(&r) % 8)));
        }
        fix_checksums(c, n);
        zplan *p = NULL;
        zdiag d = {0};
        zstatus st = parse_exact(c, n, &p, &d);
        if (st == ZOK) {
            zplan_print(p, null, true);
            zplan_free(p);
            passed++;
            continue;
        }
        failed++;
        cr_assert_null(p);
        cr_assert(strncmp(d.msg, "m.zplan: offset ", 16) == 0 && !strchr(d.msg, '\n') &&
                      strstr(d.msg, ": expected ") && strstr(d.msg, ", found "),
                  "mutation %d: %s", it, d.msg);
    }
    fclose(null);
    cr_log_info("mutations: %d rejected, %d accepted", failed, passed);
    cr_expect_gt(failed, 1000);
    free(b), free(c);
}

/* ---- header ----------------------------------------------------------------------------- */

static uint8_t *bytes_with(size_t *n, size_t at, const void *v, size_t len, bool fix) {
    uint8_t *b = plan_bytes(n);
    memcpy(b + at, v, len);
    if (fix) fix_checksums(b, *n);
    return b;
}

Test(plan_header, wrong_magic) {
    size_t n;
    uint8_t *b = bytes_with(&n, 0, "GGUF", 4, false);
    expect_fail(b, n, ZE_FORMAT, 0, "bad magic");
    expect_fail((const uint8_t *)"ZINCPLAX", 8, ZE_FORMAT, 0, "5a 49 4e 43 50 4c 41 58");
    expect_fail((const uint8_t *)"ZINC", 4, ZE_FORMAT, 4, "truncated header");
    free(b);
}

Test(plan_header, newer_major_is_rejected) {
    size_t n;
    uint8_t v[2] = {2, 0};
    uint8_t *b = bytes_with(&n, 8, v, 2, true);
    expect_fail(b, n, ZE_UNSUPPORTED, 8, "expected major version 1, found 2");
    free(b);
}

Test(plan_header, newer_minor_is_accepted) {
    size_t n;
    uint8_t v[2] = {7, 0};
    uint8_t *b = bytes_with(&n, 10, v, 2, true);
    zplan *p = expect_ok(b, n);
    cr_expect_eq(p->minor, 7);
    zplan *q = make_plan();
    expect_same(q, p);
    zplan_free(p), zplan_free(q), free(b);
}

/* The plan of make_plan with its META cut to `bytes` (an older minor's
 * record), read as format 1.<minor>: the plan, which the caller frees. At
 * the current minor the same record is too short. */
static zplan *read_older_meta(uint32_t bytes, int minor, const char *too_short) {
    size_t n;
    uint8_t *b = plan_bytes(&n);
    tsec s[16];
    int ns = sections_of(b, s);
    uint8_t meta[8 + 156];
    memcpy(meta, s[0].p, 8 + bytes);
    wr32(meta + 4, bytes);
    s[0] = (tsec){S_META, 0, meta, 8 + bytes};
    size_t m;
    uint8_t *c = rebuild(s, ns, 64, minor, &m);
    zplan *p = NULL;
    zdiag d = {0};
    cr_assert_eq(zplan_parse(c, m, "m.zplan", &p, &d), ZOK, "%s", d.msg);
    cr_expect_eq(p->minor, minor);
    free(c);
    c = rebuild(s, ns, 64, ZPLAN_VERSION_MINOR, &m);
    expect_fail(c, m, ZE_FORMAT, (int64_t)rd64(c + entry_of(c, S_META) + 8) + 4, too_short);
    free(c), free(b);
    return p;
}

/* A 1.1 plan (META of 120 bytes: no sequence slots, no batch schedule)
 * reads as a plan of one slot without a batch schedule. */
Test(plan_header, older_minor_with_the_shorter_meta) {
    zplan *p = read_older_meta(120, 1, "section META: record size: expected 156 bytes (format " FMT "), found 120");
    cr_expect_eq(p->n_seqs, 1);
    cr_expect_eq(p->sched[ZPLAN_BATCH].count, 0);
    zplan_free(p);
}

/* A 1.2 plan (META of 140 bytes: no load schedule) reads as a plan whose
 * weights keep ggml's layout. */
Test(plan_header, a_1_2_plan_has_no_load_schedule) {
    zplan *p = read_older_meta(140, 2, "section META: record size: expected 156 bytes (format " FMT "), found 140");
    cr_expect_eq(p->sched[ZPLAN_LOAD].count, 0);
    zplan_free(p);
}

/* A newer minor may grow the header and the records; this reader reads the
 * fields it knows. The same growth at the current minor is an error. */
Test(plan_header, newer_minor_with_larger_header_and_records) {
    size_t n, m;
    uint8_t *b = plan_bytes(&n);
    tsec s[16];
    int ns = sections_of(b, s);
    const tsec *bufs = &s[S_BUFFERS - 1];
    uint32_t count = rd32(bufs->p);
    size_t big_n = 8 + (size_t)count * 32;
    uint8_t *big = calloc(1, big_n);
    wr32(big, count), wr32(big + 4, 32);
    for (uint32_t i = 0; i < count; i++) {
        memcpy(big + 8 + 32 * i, bufs->p + 8 + 24 * i, 24);
        memset(big + 8 + 32 * i + 24, 0xab, 8); /* a field this reader does not know */
    }
    s[S_BUFFERS - 1] = (tsec){S_BUFFERS, 0, big, big_n};
    uint8_t *c = rebuild(s, ns, 72, ZPLAN_VERSION_MINOR + 1, &m);
    zplan *p = expect_ok(c, m), *q = make_plan();
    expect_same(q, p);
    free(c);
    c = rebuild(s, ns, 64, ZPLAN_VERSION_MINOR, &m);
    expect_fail(c, m, ZE_FORMAT, (int64_t)record_at(c, S_BUFFERS, 0) - 4, "record size: expected 24 bytes");
    zplan_free(p), zplan_free(q), free(c), free(big), free(b);
}

Test(plan_header, bad_header_size) {
    size_t n;
    uint8_t v[4] = {60, 0, 0, 0};
    uint8_t *b = bytes_with(&n, 12, v, 4, false);
    expect_fail(b, n, ZE_FORMAT, 12, "header size");
    free(b);
}

Test(plan_header, bad_header_checksum) {
    size_t n;
    uint8_t v = 0x55;
    uint8_t *b = bytes_with(&n, 50, &v, 1, false); /* a reserved byte */
    expect_fail(b, n, ZE_FORMAT, 56, "header checksum");
    free(b);
}

Test(plan_header, unknown_must_understand_flag) {
    size_t n;
    uint8_t v[4] = {0, 0, 1, 0}; /* bit 16 is informational: accepted */
    uint8_t *b = bytes_with(&n, 16, v, 4, true);
    zplan_free(expect_ok(b, n));
    free(b);
    uint8_t w[4] = {4, 0, 0, 0};
    b = bytes_with(&n, 16, w, 4, true);
    expect_fail(b, n, ZE_UNSUPPORTED, 16, "header flags");
    free(b);
}

Test(plan_header, file_size_mismatch) {
    size_t n;
    uint8_t *b = plan_bytes(&n);
    uint8_t *c = calloc(1, n + 8);
    memcpy(c, b, n);
    expect_fail(c, n + 8, ZE_FORMAT, 24, "file size does not match");
    expect_fail(b, n - 1, ZE_FORMAT, 24, "file size does not match");
    free(b), free(c);
}

Test(plan_header, bad_section_count_and_table) {
    size_t n;
    uint8_t z[4] = {0};
    uint8_t *b = bytes_with(&n, 20, z, 4, true);
    expect_fail(b, n, ZE_FORMAT, 20, "section count");
    free(b);
    uint8_t off[8] = {60};
    b = bytes_with(&n, 32, off, 8, true);
    expect_fail(b, n, ZE_FORMAT, 32, "section table offset");
    free(b);
    b = plan_bytes(&n);
    b[64 + 3 * 32 + 4] ^= 1; /* a section's flags: only the table checksum covers them */
    expect_fail(b, n, ZE_FORMAT, 40, "section table checksum");
    free(b);
}

/* ---- sections ------------------------------------------------------------------------------ */

Test(plan_sections, unknown_optional_section_is_skipped) {
    size_t n, m;
    uint8_t *b = plan_bytes(&n);
    tsec s[16];
    int ns = sections_of(b, s);
    memmove(s + 3, s + 2, sizeof *s * (size_t)(ns - 2)); /* in the middle of the table */
    s[2] = (tsec){0x1000, 1, (const uint8_t *)"profile data", 12};
    uint8_t *c = rebuild(s, ns + 1, 64, ZPLAN_VERSION_MINOR, &m);
    zplan *p = expect_ok(c, m), *q = make_plan();
    expect_same(q, p);
    zplan_free(p), zplan_free(q), free(c), free(b);
}

Test(plan_sections, unknown_required_section_is_rejected) {
    size_t n, m;
    uint8_t *b = plan_bytes(&n);
    tsec s[16];
    int ns = sections_of(b, s);
    s[ns] = (tsec){0x1000, 0, (const uint8_t *)"must understand", 15};
    uint8_t *c = rebuild(s, ns + 1, 64, 0, &m);
    expect_fail(c, m, ZE_UNSUPPORTED, 64 + 32 * ns, "unknown required section");
    free(c), free(b);
}

Test(plan_sections, missing_and_duplicate_sections) {
    size_t n, m;
    uint8_t *b = plan_bytes(&n);
    tsec s[16];
    int ns = sections_of(b, s);
    uint8_t *c = rebuild(s, ns - 1, 64, 0, &m); /* no DISPATCHES */
    expect_fail(c, m, ZE_FORMAT, 64, "missing section DISPATCHES");
    free(c);
    s[ns] = s[S_KERNELS - 1];
    c = rebuild(s, ns + 1, 64, 0, &m);
    expect_fail(c, m, ZE_FORMAT, 64 + 32 * ns, "duplicate");
    free(c), free(b);
}

Test(plan_sections, bad_section_checksum) {
    size_t n;
    uint8_t *b = plan_bytes(&n);
    size_t e = entry_of(b, S_BUFFERS);
    b[record_at(b, S_BUFFERS, 1) + 9] ^= 0x40;
    expect_fail(b, n, ZE_FORMAT, (int64_t)e + 24, "section BUFFERS (entry 2) checksum");
    free(b);
}

Test(plan_sections, misaligned_past_the_end_and_overlapping) {
    size_t n;
    uint8_t *b = plan_bytes(&n);
    size_t e = entry_of(b, S_KERNELS);
    uint64_t off = rd64(b + e + 8);
    wr64(b + e + 8, off + 4);
    fix_checksums(b, n);
    expect_fail(b, n, ZE_FORMAT, (int64_t)e + 8, "expected a multiple of 8");
    wr64(b + e + 8, n - 8);
    fix_checksums(b, n);
    expect_fail(b, n, ZE_FORMAT, (int64_t)e + 16, "runs past the end of the file");
    wr64(b + e + 8, rd64(b + entry_of(b, S_BUFFERS) + 8)); /* KERNELS at BUFFERS' offset */
    fix_checksums(b, n);
    expect_fail(b, n, ZE_FORMAT, (int64_t)rd64(b + e + 8), "overlaps");
    free(b);
}

Test(plan_sections, nonzero_padding) {
    size_t n;
    uint8_t *b = plan_bytes(&n);
    /* STRINGS holds 8 + n_strings bytes; the bytes up to the next 8 are padding. */
    size_t e = entry_of(b, S_STRINGS);
    uint64_t end = rd64(b + e + 8) + rd64(b + e + 16);
    cr_assert(end % 8, "the synthetic string table should leave padding");
    b[end] = 0x5a;
    expect_fail(b, n, ZE_FORMAT, (int64_t)end, "padding byte");
    free(b);
}

Test(plan_sections, record_counts_and_sizes) {
    size_t n;
    uint8_t *b = plan_bytes(&n);
    size_t at = record_at(b, S_BINDINGS, 0) - 8;
    wr32(b + at, rd32(b + at) + 1);
    fix_checksums(b, n);
    expect_fail(
        b, n, ZE_FORMAT, (int64_t)at,
        "record count does not match the section size: expected 24 (576 bytes of 24-byte records), found 25");
    wr32(b + at, rd32(b + at) - 1);
    wr32(b + at + 4, 25); /* a newer minor's record size; 576 bytes are not a whole number of them */
    b[10] = ZPLAN_VERSION_MINOR + 1;
    fix_checksums(b, n);
    expect_fail(b, n, ZE_FORMAT, (int64_t)at,
                "size: expected 8 + a multiple of the 25-byte record size, found 584");
    wr32(b + at + 4, 16);
    b[10] = ZPLAN_VERSION_MINOR;
    fix_checksums(b, n);
    expect_fail(b, n, ZE_FORMAT, (int64_t)at + 4, "record size");
    free(b);
    b = plan_bytes(&n);
    tsec s[16];
    int ns = sections_of(b, s);
    uint8_t meta2[8 + 312] = {0};
    memcpy(meta2, s[0].p, 8 + 156);
    memcpy(meta2 + 164, s[0].p + 8, 156);
    wr32(meta2, 2);
    s[0] = (tsec){S_META, 0, meta2, sizeof meta2};
    size_t m;
    uint8_t *c = rebuild(s, ns, 64, ZPLAN_VERSION_MINOR, &m);
    expect_fail(c, m, ZE_FORMAT, (int64_t)record_at(c, S_META, 0) - 8, "record count: expected 1, found 2");
    s[0] = (tsec){S_META, 0, meta2, 4};
    free(c);
    c = rebuild(s, ns, 64, ZPLAN_VERSION_MINOR, &m);
    expect_fail(c, m, ZE_FORMAT, (int64_t)rd64(c + entry_of(c, S_META) + 8), "too small");
    free(c), free(b);
}

/* Semantic errors found by the reader carry the offset of the record. */
Test(plan_sections, semantic_errors_name_the_record_offset) {
    size_t n;
    uint8_t *b = plan_bytes(&n);
    /* dispatch 5, binding 3: act [0, +2048) becomes [3072, +2048) in a 4096-byte buffer */
    uint32_t bi = rd32(b + record_at(b, S_DISPATCHES, 5) + 4) + 3;
    size_t at = record_at(b, S_BINDINGS, bi);
    wr64(b + at + 8, 3072);
    fix_checksums(b, n);
    expect_fail(
        b, n, ZE_FORMAT, (int64_t)at,
        "dispatch 5: binding 3: range [3072, +2048) ends past buffer 5 'activations': expected an end "
        "<= 4096, found 5120");
    free(b);
    b = plan_bytes(&n);
    at = record_at(b, S_KERNELS, 1);
    uint32_t code = rd32(b + at + 4);
    wr32(b + record_at(b, S_SPIRV, code), 0x03022307);
    fix_checksums(b, n);
    expect_fail(b, n, ZE_FORMAT, (int64_t)at, "kernel 1 'add': SPIR-V magic");
    free(b);
    b = plan_bytes(&n);
    at = record_at(b, S_META, 0);
    wr32(b + at + 64, 1u << 20); /* required features */
    fix_checksums(b, n);
    expect_fail(b, n, ZE_UNSUPPORTED, (int64_t)at, "required device features unknown");
    free(b);
}

/* ---- zplan_validate: one test per rule ------------------------------------------------------- */

static void expect_invalid(void (*mutate)(zplan *), zstatus code, const char *needle) {
    zplan *p = make_plan();
    mutate(p);
    zdiag d = {0};
    zstatus st = zplan_validate(p, "m.zplan", &d);
    cr_log_info("%s", d.msg);
    cr_expect_eq(st, code, "status %s, expected %s (%s)", zstatus_name(st), zstatus_name(code), d.msg);
    expect_msg(&d, "m.zplan", -1, needle);
    zplan_free(p);
}

#define SEMANTIC(tname, code, needle, body)                                                                  \
    static void mut_##tname(zplan *p) {                                                                      \
        body;                                                                                                \
    }                                                                                                        \
    Test(plan_validate, tname) {                                                                             \
        expect_invalid(mut_##tname, code, needle);                                                           \
    }

SEMANTIC(strings_not_terminated, ZE_INVALID, "string table does not end with a NUL byte",
         p->strings[p->n_strings_bytes - 1] = 'x')
SEMANTIC(string_offset_out_of_range, ZE_INVALID, "buffer 3: name: string offset out of range",
         p->buffers[3].name = p->n_strings_bytes)
SEMANTIC(meta_string_out_of_range, ZE_INVALID, "arch: string offset out of range", p->arch = 1u << 30)
SEMANTIC(model_shape_zero, ZE_INVALID, "model shape", p->n_vocab = 0)
SEMANTIC(context_out_of_range, ZE_INVALID, "context size", p->ctx = 0)
SEMANTIC(subgroup_not_power_of_two, ZE_INVALID, "subgroup size", p->subgroup_size = 48)
SEMANTIC(subgroup_required_but_zero, ZE_INVALID, "name a subgroup size", p->subgroup_size = 0)
SEMANTIC(unknown_required_feature, ZE_UNSUPPORTED, "required device features unknown",
         p->required |= 1u << 31)
SEMANTIC(unknown_buffer_kind, ZE_INVALID, "buffer 6 'cache_k.0': unknown kind: expected 1..9, found 10",
         p->buffers[6].kind = 10)
SEMANTIC(state_buffer_before_1_2, ZE_INVALID,
         "buffer 6 'cache_k.0': kind state (a recurrent state): expected format 1.2 or newer, found 1.1",
         p->buffers[6].kind = ZPB_STATE;
         p->minor = 1)
SEMANTIC(load_schedule_fields_without_dispatches, ZE_INVALID,
         "load schedule: expected all zero without dispatches, found first 0, max_tokens 1, logits rows 0",
         p->sched[ZPLAN_LOAD].max_tokens = 1)
SEMANTIC(load_schedule_of_two_tokens, ZE_INVALID,
         "load schedule: expected max_tokens 1 and logits rows 1, found 2 and 1",
         p->sched[ZPLAN_LOAD].count = 1;
         p->sched[ZPLAN_LOAD].max_tokens = 2;
         p->sched[ZPLAN_LOAD].logits_rows = 1)
SEMANTIC(load_schedule_past_the_table, ZE_INVALID, "load schedule: dispatches [",
         p->sched[ZPLAN_LOAD].first = p->n_dispatches;
         p->sched[ZPLAN_LOAD].count = 1;
         p->sched[ZPLAN_LOAD].max_tokens = 1;
         p->sched[ZPLAN_LOAD].logits_rows = 1)
SEMANTIC(zero_size_buffer, ZE_INVALID, "buffer 7 'scratch': size", p->buffers[7].size = 0)
SEMANTIC(weights_outside_gguf, ZE_INVALID, "outside the GGUF", p->buffers[4].src_offset = p->gguf_size - 100)
SEMANTIC(source_offset_of_non_weights, ZE_INVALID, "source offset of a kv buffer",
         p->buffers[6].src_offset = 8)
SEMANTIC(step_buffer_out_of_range, ZE_INVALID, "step buffer: buffer index out of range",
         p->step_buffer = N_BUF)
SEMANTIC(tokens_buffer_wrong_kind, ZE_INVALID, "tokens buffer: buffer 5 'activations' has the wrong kind",
         p->tokens_buffer = B_ACT)
SEMANTIC(logits_buffer_too_small, ZE_INVALID, "logits buffer: buffer 2 'logits' is too small",
         p->buffers[B_LOGITS].size = 4 * N_VOCAB)
SEMANTIC(spirv_range_outside_table, ZE_INVALID, "kernel 1 'add': SPIR-V words [", p->kernels[1].n_words += 1)
SEMANTIC(spirv_too_short, ZE_INVALID, "kernel 0 'scale': SPIR-V size: expected at least 5 words",
         p->kernels[0].n_words = 4)
SEMANTIC(spirv_bad_magic, ZE_INVALID, "kernel 0 'scale': SPIR-V magic at word 0: expected 0x07230203",
         p->spirv[0] = 0xdeadbeef)
SEMANTIC(spirv_bad_version, ZE_INVALID, "SPIR-V version word", p->spirv[1] = 0x00020000)
SEMANTIC(kernel_too_many_bindings, ZE_INVALID, "kernel 0 'scale': bindings: expected 1..16",
         p->kernels[0].n_bindings = ZPLAN_MAX_BINDINGS + 1)
SEMANTIC(kernel_shared_memory, ZE_INVALID, "shared memory", p->kernels[1].shared_bytes = 65536)
SEMANTIC(schedule_outside_dispatches, ZE_INVALID, "decode schedule: dispatches [3, +5)",
         p->sched[1].count = 5)
SEMANTIC(schedule_max_tokens, ZE_INVALID, "prefill schedule: max_tokens", p->sched[0].max_tokens = CTX + 1)
SEMANTIC(schedule_logits_rows, ZE_INVALID, "prefill schedule: logits rows: expected 1 or 8",
         p->sched[0].logits_rows = 3)
SEMANTIC(dispatch_kernel_out_of_range, ZE_INVALID, "dispatch 4: kernel index out of range",
         p->dispatches[4].kernel = 2)
SEMANTIC(dispatch_binding_count, ZE_INVALID, "dispatch 0: bindings: expected 3 (kernel 0 'scale'), found 4",
         p->dispatches[0].n_bindings = 4)
SEMANTIC(dispatch_bindings_outside_table, ZE_INVALID, "dispatch 6: bindings [",
         p->dispatches[6].first_binding = p->n_bindings - 1)
SEMANTIC(dispatch_unknown_flags, ZE_INVALID, "dispatch 1: flags", p->dispatches[1].flags = 6)
SEMANTIC(dispatch_node_out_of_range, ZE_INVALID, "dispatch 2: node: string offset",
         p->dispatches[2].node = ~0u)
SEMANTIC(binding_buffer_out_of_range, ZE_INVALID, "dispatch 0: binding 1: buffer index out of range",
         p->bindings[1].buffer = N_BUF)
SEMANTIC(
    binding_range_past_buffer, ZE_INVALID,
    "dispatch 1: binding 3: range [2048, +4096) ends past buffer 5 'activations': expected an end <= 4096, "
    "found 6144",
    p->bindings[p->dispatches[1].first_binding + 3].range = 4096)
SEMANTIC(binding_offset_past_buffer, ZE_INVALID,
         "dispatch 0: binding 1: offset 4096 (to the end) is past buffer 3", p->bindings[1].offset = 4096)
SEMANTIC(binding_range_overflow, ZE_INVALID, "ends past buffer",
         (p->bindings[2].offset = 8, p->bindings[2].range = UINT64_MAX - 4))
SEMANTIC(binding_zero_not_step, ZE_INVALID,
         "dispatch 3: binding 0: expected the step buffer 0, found buffer 5",
         p->bindings[p->dispatches[3].first_binding].buffer = B_ACT)
SEMANTIC(unreferenced_binding, ZE_INVALID, "binding 24: buffer index out of range",
         p->bindings[p->n_bindings++] = (zplan_binding){.buffer = 99})
SEMANTIC(affine_divisor_zero, ZE_INVALID, "dispatch 2: groups[1]: divisor",
         p->dispatches[2].groups[1].div = 0)
SEMANTIC(affine_coefficient_too_large, ZE_INVALID, "coefficients", p->dispatches[0].groups[2].b = 1ll << 40)
SEMANTIC(groups_absurd_at_max_tokens, ZE_INVALID, "dispatch 1: groups[0] at T=8: expected at most 2^31",
         p->dispatches[1].groups[0] = ((zplan_affine){1ll << 30, 0, 1}))
SEMANTIC(groups_absurd_at_one, ZE_INVALID, "dispatch 4: groups[2] at T=1",
         p->dispatches[4].groups[2] = ((zplan_affine){0, (1ll << 31) + 1, 1}))

Test(plan_validate, groups_fine_at_the_limit) {
    zplan *p = make_plan();
    p->dispatches[1].groups[0] = (zplan_affine){1ll << 28, 0, 1}; /* 2^31 at T=8 */
    p->dispatches[4].groups[0] = (zplan_affine){-5, 3, 7};        /* negative: no groups */
    zdiag d = {0};
    cr_expect_eq(zplan_validate(p, "m.zplan", &d), ZOK, "%s", d.msg);
    zplan_free(p);
}

/* ---- printing and zinc info --------------------------------------------------------------------- */

Test(plan_print, summary_and_verbose) {
    zplan *p = make_plan();
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    zplan_print(p, f, true);
    fclose(f);
    cr_log_info("%s", text);
    const char *want[] = {"zinc plan " FMT,
                          "identity fedcba9876543210",
                          "qwen3, 1 layers, n_embd 16",
                          "device 'NVIDIA H200'",
                          " fp16 storage16 subgroup-size",
                          "weights 0.01 MiB in 2",
                          "token_embd.weight",
                          "gguf bytes 1024, +4096",
                          "kernels:   2",
                          "prefill: 3 dispatches",
                          "decode: 4 dispatches [3, 7), 3 barriers",
                          "kernels: scale x2, add x1\n",
                          "kernels: scale x2, add x2\n",
                          "groups T=1 1x1x2, T=8 8x1x2",
                          "/models/tiny-??.gguf"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(strstr(text, want[i]), "no \"%s\" in:\n%s", want[i], text);
    free(text);
    /* An invalid plan prints its fault, not a crash. */
    p->dispatches[0].first_binding = 1u << 30;
    f = open_memstream(&text, &len);
    zplan_print(p, f, true);
    fclose(f);
    cr_expect(strstr(text, "invalid plan: dispatch 0: bindings [") && !strstr(text, "schedules:"), "%s",
              text);
    free(text);
    zplan_free(p);
}

Test(plan_print, zinc_info) {
    zplan *p = make_plan();
    const char *path = tu_tmp("info.zplan");
    zdiag d = {0};
    cr_assert_eq(zplan_write(p, path, &d), ZOK, "%s", d.msg);
    zplan_free(p);
    char *out = NULL;
    int rc = tu_run(&out, "%s/zinc info %s", ZINC_BINARY_DIR, path);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "format:    zinc plan " FMT) && strstr(out, "cache_k.0") && strstr(out, "scale") &&
                  !strstr(out, "bindings:"),
              "%s", out);
    free(out);
    rc = tu_run(&out, "%s/zinc info --verbose %s", ZINC_BINARY_DIR, path);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "bindings: 0=0:step[0,end]") && strstr(out, "node blk.0.add"), "%s", out);
    free(out);
    /* A corrupt plan: one line on stderr and a failing exit status. */
    size_t n;
    uint8_t *b = tu_read_file(path, &n);
    b[n - 1] ^= 1;
    const char *bad = tu_tmp("bad.zplan");
    cr_assert_eq(tu_write_file(bad, b, n), 0);
    free(b);
    rc = tu_run(&out, "%s/zinc info %s", ZINC_BINARY_DIR, bad);
    cr_expect_neq(rc, 0);
    cr_expect(strncmp(out, "zinc info: error: ", 18) == 0 && strstr(out, "checksum") &&
                  strchr(out, '\n') == out + strlen(out) - 1,
              "%s", out);
    free(out);
    cr_expect_eq(tu_run(NULL, "%s/zinc info --help", ZINC_BINARY_DIR), 0);
    cr_expect_eq(tu_run(NULL, "%s/zinc info", ZINC_BINARY_DIR), 64); /* usage: EX_USAGE */
    cr_expect_eq(tu_run(NULL, "%s/zinc info %s %s", ZINC_BINARY_DIR, path, path), 64);
}

/* A plan compiled by zincc from a real (random-weight) GGUF passes the
 * reader's checks, and writing it back gives the same bytes. */
Test(plan_print, plan_from_zincc, .timeout = 600) {
    const char *model = tu_tmp("zincc-model.gguf"), *plan = tu_tmp("zincc.zplan");
    char *out = NULL;
    int rc =
        tu_run(&out, "%s/zinc mkmodel --layers 1 --vocab 300 --quant q8_0 -o %s", ZINC_BINARY_DIR, model);
    cr_assert_eq(rc, 0, "%s", out);
    free(out);
    rc = tu_run(&out, "%s/zincc %s -o %s --target llvmpipe --ctx=256 --chunk 32", ZINC_BINARY_DIR, model,
                plan);
    cr_assert_eq(rc, 0, "%s", out);
    free(out);
    zplan *p = NULL;
    zdiag d = {0};
    cr_assert_eq(zplan_read(plan, &p, &d), ZOK, "%s", d.msg);
    cr_expect_eq(p->ctx, 256);
    cr_expect_eq(p->sched[ZPLAN_PREFILL].max_tokens, 32);
    cr_expect_gt(p->sched[ZPLAN_DECODE].count, 0);
    const char *again = tu_tmp("zincc-again.zplan");
    cr_assert_eq(zplan_write(p, again, &d), ZOK, "%s", d.msg);
    zplan_free(p);
    size_t n1, n2;
    uint8_t *b1 = tu_read_file(plan, &n1), *b2 = tu_read_file(again, &n2);
    cr_assert(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0, "the re-written plan differs");
    free(b1), free(b2);
    struct stat sb;
    cr_assert_eq(stat(plan, &sb), 0);
    cr_expect_eq(sb.st_mode & 0777, 0644, "mode %o", sb.st_mode & 0777);
    rc = tu_run(&out, "%s/zinc info %s", ZINC_BINARY_DIR, plan);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "zinc plan " FMT) && strstr(out, "decode:") && strstr(out, "token_embd.weight"),
              "%s", out);
    free(out);
}
