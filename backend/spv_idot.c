/* zdot4 / zdot4sat markers to OpSDot / OpSDotAccSat, over SPIR-V words.
 *
 * Reading order: scan (header, instructions, the definitions of types and
 * the OpNames of markers), check_marker (the signature), then emit, which
 * copies the module, adds the capabilities and the extension after the
 * last OpCapability, and gives each marker a new body:
 *
 *   %l = OpLabel; [%v = OpLoad %T %param]...; %s = OpSDot %int %a %b 0;
 *   %r = OpIAdd %int %s %acc; OpReturnValue %r; OpFunctionEnd
 *
 * (OpSDotAccSat %int %a %b %acc 0 for zdot4sat). New ids start at the old
 * bound. The old body is dropped whole, so whatever it called or computed
 * is simply no longer reached. */
#include "spv_util.h"
#include "spv_idot.h"

#include <string.h>

#define SPV_ENABLE_UTILITY_CODE
#include <spirv/unified1/spirv.h>

enum {
    HEADER_WORDS = 5,
    MAX_BOUND = 1u << 22, /* SPIR-V's universal id limit; def[] is as long as the bound */
    MAX_WORDS = 1u << 28,
    PACKED_4X8 = 0, /* PackedVectorFormat4x8Bit */
    N_PARAMS = 3,
    BODY_WORDS = 2 + 4 * N_PARAMS + 7 + 5 + 3 + 1, /* label, loads, dot, add, return, end */
};

#define IDOT_EXT "SPV_KHR_integer_dot_product"

/* The markers, by the start of glslang's mangled name. */
typedef enum mkind { MK_NONE, MK_DOT, MK_SAT } mkind;
static const struct {
    const char *prefix;
    mkind kind;
} markers[] = {{"zdot4(", MK_DOT}, {"zdot4sat(", MK_SAT}};

typedef struct idot {
    const uint32_t *w;
    uint32_t n, bound, next_id;
    uint32_t *def;       /* id -> offset of its defining instruction; 0: none */
    uint8_t *mark;       /* id -> mkind of the function an OpName calls a marker */
    uint8_t *gone;       /* id -> defined in a marker's old body: its names and decorations go too */
    uint32_t after_caps; /* offset of the first instruction past the capabilities */
    bool has_cap_dot, has_cap_4x8, has_ext;
    int n_markers;
    zarena *s;
    zdiag *d;
} idot;

static uint32_t op_of(uint32_t w0) {
    return w0 & SpvOpCodeMask;
}
static uint32_t wc_of(uint32_t w0) {
    return w0 >> SpvWordCountShift;
}

/* Whether the literal string at i[first..wc) is s (NUL included), or starts
 * with s when prefix. */
static bool str_is(const uint32_t *i, uint32_t first, uint32_t wc, const char *s, bool prefix) {
    size_t len = strlen(s), room = (size_t)(wc - first) * 4;
    for (size_t k = 0; k < len + !prefix; k++) {
        if (k >= room) return false;
        if (((i[first + k / 4] >> (8 * (k % 4))) & 0xff) != (uint8_t)s[k]) return false;
    }
    return true;
}

static mkind marker_of(const uint32_t *i, uint32_t wc) {
    for (size_t m = 0; m < sizeof markers / sizeof markers[0]; m++)
        if (wc >= 3 && str_is(i, 2, wc, markers[m].prefix, true)) return markers[m].kind;
    return MK_NONE;
}

static zstatus check_header(const uint32_t *w, size_t n, zdiag *d) {
    if (!w || n < HEADER_WORDS)
        return zdiag_set(d, ZE_FORMAT, "a SPIR-V module of %zu words: expected at least the %d-word header",
                         n, HEADER_WORDS);
    if (w[0] != SpvMagicNumber)
        return zdiag_set(d, ZE_FORMAT, "SPIR-V magic number: expected 0x%08x, found 0x%08x", SpvMagicNumber,
                         w[0]);
    if (w[3] == 0 || w[3] > MAX_BOUND || n > MAX_WORDS)
        return zdiag_set(d, ZE_FORMAT, "SPIR-V header: id bound %u in %zu words: expected 1..%u ids", w[3], n,
                         MAX_BOUND);
    return ZOK;
}

/* The result id of instruction i (0: none). */
static uint32_t result_of(const uint32_t *i, uint32_t wc) {
    bool res = false, type = false;
    SpvHasResultAndType((SpvOp)op_of(i[0]), &res, &type);
    uint32_t at = type ? 2 : 1;
    return res && wc > at ? i[at] : 0;
}

static zstatus scan_insn(idot *c, uint32_t off, uint32_t op, uint32_t wc) {
    const uint32_t *i = c->w + off;
    uint32_t id = result_of(i, wc);
    if (id >= c->bound)
        return zdiag_set(c->d, ZE_FORMAT, "word %u: id %u is past the bound %u", off, id, c->bound);
    if (id) c->def[id] = off;
    if (op == SpvOpCapability && wc >= 2) {
        c->has_cap_dot |= i[1] == SpvCapabilityDotProduct;
        c->has_cap_4x8 |= i[1] == SpvCapabilityDotProductInput4x8BitPacked;
    }
    if (op != SpvOpCapability && !c->after_caps) c->after_caps = off;
    if (op == SpvOpExtension) c->has_ext |= str_is(i, 1, wc, IDOT_EXT, false);
    if (op == SpvOpName && wc >= 3) {
        if (i[1] >= c->bound)
            return zdiag_set(c->d, ZE_FORMAT, "word %u: OpName of id %u, past the bound %u", off, i[1],
                             c->bound);
        mkind k = marker_of(i, wc);
        if (k) c->mark[i[1]] = (uint8_t)k;
    }
    return ZOK;
}

static zstatus scan(idot *c) {
    for (uint32_t off = HEADER_WORDS; off < c->n;) {
        uint32_t wc = wc_of(c->w[off]);
        if (wc == 0 || wc > c->n - off)
            return zdiag_set(c->d, ZE_FORMAT, "word %u: an instruction of %u words in a module of %u", off,
                             wc, c->n);
        zstatus s = scan_insn(c, off, op_of(c->w[off]), wc);
        if (s) return s;
        off += wc;
    }
    return ZOK;
}

/* The instruction defining id, if its opcode is op. */
static const uint32_t *def_as(const idot *c, uint32_t id, uint32_t op) {
    uint32_t at = id && id < c->bound ? c->def[id] : 0;
    return at && op_of(c->w[at]) == op ? c->w + at : NULL;
}

static bool is_int32(const idot *c, uint32_t type, bool want_signed) {
    const uint32_t *t = def_as(c, type, SpvOpTypeInt);
    return t && wc_of(t[0]) == 4 && t[2] == 32 && (!want_signed || t[3] == 1);
}

/* A parameter's value type: the type itself, or the pointee of a Function
 * pointer (then *ptr is set). */
static uint32_t param_value_type(const idot *c, uint32_t type, bool *ptr) {
    const uint32_t *p = def_as(c, type, SpvOpTypePointer);
    *ptr = p != NULL;
    return p && wc_of(p[0]) == 4 && p[2] == SpvStorageClassFunction ? p[3] : p ? 0 : type;
}

/* The marker function at off: int(int32, int32 of the same type, int). */
static zstatus check_marker(const idot *c, uint32_t off, uint32_t *val_type) {
    const uint32_t *f = c->w + off;
    uint32_t ret = f[1];
    bool ok = is_int32(c, ret, true);
    uint32_t at = off + wc_of(f[0]), vt[N_PARAMS] = {0};
    for (int k = 0; ok && k < N_PARAMS; k++) {
        const uint32_t *p = at < c->n ? c->w + at : NULL;
        ok = p && op_of(p[0]) == SpvOpFunctionParameter && wc_of(p[0]) == 3;
        bool ptr;
        if (ok) vt[k] = param_value_type(c, p[1], &ptr);
        if (ok) at += 3;
    }
    ok = ok && is_int32(c, vt[0], false) && vt[1] == vt[0] && vt[2] == ret;
    ok = ok && at < c->n && op_of(c->w[at]) != SpvOpFunctionParameter;
    if (!ok)
        return zdiag_set(c->d, ZE_UNSUPPORTED,
                         "word %u: marker function %%%u: expected int(uint, uint, int) (32-bit, by value or "
                         "through Function pointers)",
                         off, f[2]);
    *val_type = vt[0];
    return ZOK;
}

/* The ids a marker's old body defines (past its parameters). */
static void mark_gone(idot *c, uint32_t off) {
    for (off += wc_of(c->w[off]); off < c->n && op_of(c->w[off]) != SpvOpFunctionEnd;
         off += wc_of(c->w[off])) {
        uint32_t id =
            op_of(c->w[off]) == SpvOpFunctionParameter ? 0 : result_of(c->w + off, wc_of(c->w[off]));
        if (id) c->gone[id] = 1;
    }
}

/* Every named marker must be a function of the module. */
static zstatus check_named(idot *c) {
    for (uint32_t id = 0; id < c->bound; id++) {
        if (!c->mark[id]) continue;
        const uint32_t *f = def_as(c, id, SpvOpFunction);
        if (!f)
            return zdiag_set(c->d, ZE_FORMAT, "%%%u is named as a marker (zdot4/zdot4sat) but is no function",
                             id);
        mark_gone(c, (uint32_t)(f - c->w));
    }
    return ZOK;
}

/* Debug and annotation instructions about an id of a dropped body. */
static bool about_gone(const idot *c, uint32_t op, const uint32_t *i, uint32_t wc) {
    bool about = op == SpvOpName || op == SpvOpMemberName || op == SpvOpDecorate || op == SpvOpMemberDecorate;
    return about && wc >= 2 && i[1] < c->bound && c->gone[i[1]];
}

/* ------------------------------------------------------------------- emit */

static void put_insn(zspv_obuf *o, uint32_t op, uint32_t wc) {
    zspv_put(o, wc << SpvWordCountShift | op);
}

static void put_caps(idot *c, zspv_obuf *o) {
    if (!c->has_cap_dot) put_insn(o, SpvOpCapability, 2), zspv_put(o, SpvCapabilityDotProduct);
    if (!c->has_cap_4x8) put_insn(o, SpvOpCapability, 2), zspv_put(o, SpvCapabilityDotProductInput4x8BitPacked);
    if (c->has_ext) return;
    size_t len = strlen(IDOT_EXT), words = (len + 4) / 4;
    put_insn(o, SpvOpExtension, (uint32_t)(1 + words));
    for (size_t k = 0; k < words; k++) {
        uint32_t w = 0;
        for (size_t b = 0; b < 4 && 4 * k + b < len; b++)
            w |= (uint32_t)(uint8_t)IDOT_EXT[4 * k + b] << (8 * b);
        zspv_put(o, w);
    }
}

/* The marker's OpFunction and parameters, then the new body. Returns the
 * offset of the instruction after the old OpFunctionEnd. */
static zstatus emit_marker(idot *c, zspv_obuf *o, uint32_t off, uint32_t *next) {
    uint32_t vt = 0;
    zstatus s = check_marker(c, off, &vt);
    if (s) return s;
    const uint32_t *f = c->w + off;
    uint32_t ret = f[1], wc = wc_of(f[0]), val[N_PARAMS];
    for (uint32_t k = 0; k < wc; k++)
        zspv_put(o, f[k]);
    uint32_t at = off + wc;
    for (int k = 0; k < N_PARAMS; k++, at += 3) {
        for (uint32_t j = 0; j < 3; j++)
            zspv_put(o, c->w[at + j]);
        val[k] = c->w[at + 2];
    }
    put_insn(o, SpvOpLabel, 2), zspv_put(o, c->next_id++);
    for (int k = 0; k < N_PARAMS; k++) {
        bool ptr;
        param_value_type(c, c->w[at - 3 * (N_PARAMS - k) + 1], &ptr);
        if (!ptr) continue;
        uint32_t v = c->next_id++;
        put_insn(o, SpvOpLoad, 4), zspv_put(o, k == 2 ? ret : vt), zspv_put(o, v), zspv_put(o, val[k]);
        val[k] = v;
    }
    uint32_t r = c->next_id++;
    if (c->mark[f[2]] == MK_SAT) {
        put_insn(o, SpvOpSDotAccSat, 7), zspv_put(o, ret), zspv_put(o, r), zspv_put(o, val[0]), zspv_put(o, val[1]),
            zspv_put(o, val[2]);
        zspv_put(o, PACKED_4X8);
    } else {
        uint32_t dot = r;
        r = c->next_id++;
        put_insn(o, SpvOpSDot, 6), zspv_put(o, ret), zspv_put(o, dot), zspv_put(o, val[0]), zspv_put(o, val[1]),
            zspv_put(o, PACKED_4X8);
        put_insn(o, SpvOpIAdd, 5), zspv_put(o, ret), zspv_put(o, r), zspv_put(o, dot), zspv_put(o, val[2]);
    }
    put_insn(o, SpvOpReturnValue, 2), zspv_put(o, r);
    put_insn(o, SpvOpFunctionEnd, 1);
    while (at < c->n && op_of(c->w[at]) != SpvOpFunctionEnd)
        at += wc_of(c->w[at]);
    if (at >= c->n)
        return zdiag_set(c->d, ZE_FORMAT, "word %u: the marker function has no OpFunctionEnd", off);
    *next = at + 1;
    c->n_markers++;
    return ZOK;
}

static zstatus emit(idot *c, zarena *a, uint32_t **out, size_t *out_words) {
    uint32_t n_marks = 0;
    for (uint32_t id = 0; id < c->bound; id++)
        n_marks += c->mark[id] != 0;
    zspv_obuf o = {.cap = (size_t)c->n + 16 + (size_t)n_marks * BODY_WORDS};
    o.w = zarena_array(a, o.cap, sizeof *o.w);
    if (!o.w) return zdiag_set(c->d, ZE_NOMEM, "out of host memory for %zu words", o.cap);
    for (uint32_t k = 0; k < HEADER_WORDS; k++)
        zspv_put(&o, c->w[k]);
    for (uint32_t off = HEADER_WORDS; off < c->n;) {
        uint32_t op = op_of(c->w[off]), wc = wc_of(c->w[off]);
        if (off == c->after_caps) put_caps(c, &o);
        if (op == SpvOpFunction && wc == 5 && c->mark[c->w[off + 2]]) {
            zstatus s = emit_marker(c, &o, off, &off);
            if (s) return s;
            continue;
        }
        for (uint32_t k = 0; k < wc && !about_gone(c, op, c->w + off, wc); k++)
            zspv_put(&o, c->w[off + k]);
        off += wc;
    }
    if (o.n > o.cap)
        return zdiag_set(c->d, ZE_INTERNAL, "wrote %zu words where %zu were planned", o.n, o.cap);
    o.w[3] = c->next_id;
    *out = o.w;
    *out_words = o.n;
    return ZOK;
}

static zstatus rewrite(idot *c, zarena *a, uint32_t **out, size_t *out_words) {
    zstatus s = scan(c);
    if (!s) s = check_named(c);
    if (s) return s;
    bool any = false;
    for (uint32_t id = 0; id < c->bound && !any; id++)
        any = c->mark[id] != 0;
    if (any) return emit(c, a, out, out_words);
    *out = zarena_array(a, c->n, sizeof **out);
    if (!*out) return zdiag_set(c->d, ZE_NOMEM, "out of host memory for %u words", c->n);
    memcpy(*out, c->w, (size_t)c->n * sizeof **out);
    *out_words = c->n;
    return ZOK;
}

zstatus zspv_int_dot(const uint32_t *in, size_t n_words, zarena *a, uint32_t **out, size_t *out_words,
                     int *n_markers, zdiag *d) {
    *out = NULL;
    *out_words = 0;
    *n_markers = 0;
    zstatus s = check_header(in, n_words, d);
    idot c = {.w = in, .n = (uint32_t)n_words, .d = d};
    if (!s) {
        c.bound = c.next_id = in[3];
        c.s = zarena_new();
        c.def = c.s ? zarena_array(c.s, c.bound, sizeof *c.def) : NULL;
        c.mark = c.s ? zarena_array(c.s, c.bound, sizeof *c.mark) : NULL;
        c.gone = c.s ? zarena_array(c.s, c.bound, sizeof *c.gone) : NULL;
        if (!c.def || !c.mark || !c.gone)
            s = zdiag_set(d, ZE_NOMEM, "out of host memory for %u ids", c.bound);
    }
    if (!s) s = rewrite(&c, a, out, out_words);
    if (c.s) zarena_free(c.s);
    if (s) {
        *out = NULL;
        *out_words = 0;
        zdiag_prefix(d, "SPIR-V integer dot product");
    } else {
        *n_markers = c.n_markers;
    }
    return s;
}
