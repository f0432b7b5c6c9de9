/* Tensor-addressed cooperative-matrix loads (SPV_NV_tensor_addressing with
 * SPV_NV_cooperative_matrix2), over SPIR-V words: step 1 of
 * docs/coopmat2-tensor-loads.md, a measurement (ZINC_CM_TENSOR=1).
 *
 * Debian 12's glslang cannot compile GL_NV_cooperative_matrix2. llama.cpp's
 * coopmat2 GEMM, 1.5x zincc's prefill on the same GPUs, loads its tiles
 * straight from VRAM with OpCooperativeMatrixLoadTensorNV; zincc's
 * workgroup-scope loads from VRAM (matmul_cm.glsl's CM_WG + CM_DIRECT) were
 * 2.5-3x slower than its staged tiles (run 55). This rewrite turns each such
 * load, once in the KHR form, into the tensor form of the same elements, so
 * that one measurement says whether NVIDIA's tensor loads are what the gap
 * is made of. For a KHR load of an R x C matrix, stride s in units of the
 * pointer's pointee (f = its bytes / the component's):
 *   row-major:    a layout of dimensions (R, C), strides (f s, 1);
 *   column-major: dimensions (C, R), the same strides, and a transposing
 *                 view (tensorViewNV<2, false, 1, 0>);
 * the pointer stays the tile's origin (an element of the buffer's array),
 * clamping Undefined (as the load it replaces: no bounds), the Object an
 * OpUndef. Only workgroup-scope matrices loaded through a StorageBuffer
 * pointer are rewritten; shared-memory loads keep their form. The module is
 * marked SPIR-V 1.6, which both extensions require.
 *
 * Debian's SPIRV-Tools (2023.1) knows none of these instructions, so the
 * output is checked by test_spv_coopmat's own reading of it, and by a newer
 * spirv-val through ZINC_SPIRV_VAL where one is at hand. */
#include <stdbool.h>
#include <string.h>

#include <spirv/unified1/spirv.h>

#include "spv_util.h"
#include "spv_coopmat.h"

/* Defined in spv_coopmat.c (SPV_ENABLE_UTILITY_CODE there). */
extern void SpvHasResultAndType(SpvOp opcode, bool *hasResult, bool *hasResultType);

enum {
    HEADER = 5,
    OP_UNDEF = 1,
    OP_EXTENSION = 10,
    OP_CAPABILITY = 17,
    OP_TYPE_BOOL = 20,
    OP_TYPE_INT = 21,
    OP_TYPE_FLOAT = 22,
    OP_TYPE_VECTOR = 23,
    OP_TYPE_POINTER = 32,
    OP_CONSTANT_FALSE = 42,
    OP_CONSTANT = 43,
    OP_FUNCTION = 54,
    OP_ACCESS_CHAIN = 65,
    OP_IN_BOUNDS_ACCESS_CHAIN = 66,
    OP_IMUL = 132,
    KHR_TYPE = 4456, /* result, component, scope, rows, columns, use */
    KHR_LOAD = 4457, /* type, result, pointer, layout, stride, [memory operands] */
    NV_LOAD_TENSOR = 5367, /* type, result, pointer, object, layout, memory operands, tensor operands */
    NV_TYPE_LAYOUT = 5370, /* result, dim, clamp mode */
    NV_TYPE_VIEW = 5371,   /* result, dim, has dimensions, permutation... */
    NV_CREATE_LAYOUT = 5372,
    NV_LAYOUT_DIMENSION = 5373,
    NV_LAYOUT_STRIDE = 5374,
    NV_CREATE_VIEW = 5377,
    CAP_TENSOR_ADDRESSING = 5439,
    CAP_CM_TENSOR_ADDRESSING = 5433,
    SC_STORAGE_BUFFER = 12,
    SCOPE_WORKGROUP = 2,
    TENSOR_VIEW_BIT = 0x1,
    MAX_IDS = 1u << 22,
};

#define TENSOR_EXT "SPV_NV_tensor_addressing"

typedef struct tm {
    const uint32_t *w;
    size_t n;
    uint32_t bound;
    uint32_t *def; /* per id: the offset of its defining instruction, 0: none */
} tm;

static uint32_t op(uint32_t w0) {
    return w0 & 0xffffu;
}
static uint32_t wc(uint32_t w0) {
    return w0 >> 16;
}

/* The instruction defining id, or NULL. */
static const uint32_t *def(const tm *t, uint32_t id) {
    return id && id < t->bound && t->def[id] ? t->w + t->def[id] : NULL;
}

/* The value of a 32-bit integer OpConstant, or UINT32_MAX. */
static uint32_t konst(const tm *t, uint32_t id) {
    const uint32_t *i = def(t, id);
    return i && op(i[0]) == OP_CONSTANT && wc(i[0]) == 4 ? i[3] : UINT32_MAX;
}

/* Bytes of a scalar or vector type, 0 if neither. */
static uint32_t type_bytes(const tm *t, uint32_t id) {
    const uint32_t *i = def(t, id);
    if (!i) return 0;
    if ((op(i[0]) == OP_TYPE_INT || op(i[0]) == OP_TYPE_FLOAT) && wc(i[0]) >= 3) return i[2] / 8;
    if (op(i[0]) == OP_TYPE_VECTOR && wc(i[0]) == 4) return type_bytes(t, i[2]) * i[3];
    return 0;
}

/* Whether id is a 32-bit integer type. */
static bool int32_type(const tm *t, uint32_t id) {
    const uint32_t *i = def(t, id);
    return i && op(i[0]) == OP_TYPE_INT && wc(i[0]) == 4 && i[2] == 32;
}

/* The result type of value id (an instruction with a type), or 0. */
static uint32_t type_of(const tm *t, uint32_t id) {
    const uint32_t *i = def(t, id);
    if (!i || wc(i[0]) < 3) return 0;
    return i[2] == id ? i[1] : 0;
}

/* What one load becomes: its matrix type, the multiplier of its stride
 * (pointee bytes / component bytes), and whether it is column-major. */
typedef struct tload {
    uint32_t off, mtype, factor, col, stride_type;
} tload;

/* Whether the KHR load at off is one to rewrite; *why says why not when it
 * is a workgroup-scope load from a buffer that the rewrite cannot take. */
static bool candidate(const tm *t, uint32_t off, tload *l, const char **why) {
    const uint32_t *i = t->w + off;
    *why = NULL;
    if (wc(i[0]) < 6) return false;
    const uint32_t *mt = def(t, i[1]), *pc = def(t, i[3]);
    if (!mt || op(mt[0]) != KHR_TYPE || wc(mt[0]) != 7 || konst(t, mt[3]) != SCOPE_WORKGROUP) return false;
    if (!pc || (op(pc[0]) != OP_ACCESS_CHAIN && op(pc[0]) != OP_IN_BOUNDS_ACCESS_CHAIN)) return false;
    const uint32_t *pt = def(t, pc[1]);
    if (!pt || op(pt[0]) != OP_TYPE_POINTER || wc(pt[0]) != 4 || pt[2] != SC_STORAGE_BUFFER) return false;
    uint32_t pb = type_bytes(t, pt[3]), cb = type_bytes(t, mt[2]), layout = konst(t, i[4]);
    uint32_t st = type_of(t, i[5]);
    if (!pb || !cb || pb % cb) *why = "a pointee that is not a whole number of matrix components";
    else if (layout > 1) *why = "a layout other than row- or column-major";
    else if (!int32_type(t, st)) *why = "a stride that is not a 32-bit integer";
    if (*why) return false;
    *l = (tload){off, i[1], pb / cb, layout, st};
    return true;
}

/* ---- output --------------------------------------------------------------- */

static void put_insn(zspv_obuf *o, uint32_t opcode, int n, const uint32_t *ops) {
    zspv_put(o, (uint32_t)(n + 1) << 16 | opcode);
    for (int k = 0; k < n; k++)
        zspv_put(o, ops[k]);
}

/* An existing id satisfying a test, or 0. */
static uint32_t find_int_type(const tm *t, uint32_t sign) {
    for (uint32_t id = 1; id < t->bound; id++) {
        const uint32_t *i = def(t, id);
        if (i && op(i[0]) == OP_TYPE_INT && wc(i[0]) == 4 && i[2] == 32 && i[3] == sign) return id;
    }
    return 0;
}
static uint32_t find_const(const tm *t, uint32_t type, uint32_t v) {
    for (uint32_t id = 1; id < t->bound; id++) {
        const uint32_t *i = def(t, id);
        if (i && op(i[0]) == OP_CONSTANT && wc(i[0]) == 4 && i[1] == type && i[3] == v) return id;
    }
    return 0;
}

zstatus zspv_coopmat_tensor_loads(const uint32_t *in, size_t n, zarena *a, uint32_t **out, size_t *out_words,
                                  int *rewritten, zdiag *d) {
    *rewritten = 0;
    if (!in || n < HEADER || in[0] != 0x07230203u) return zdiag_set(d, ZE_FORMAT, "not a SPIR-V module (%zu words)", n);
    tm t = {in, n, in[3], NULL};
    if (t.bound == 0 || t.bound > MAX_IDS) return zdiag_set(d, ZE_FORMAT, "id bound %u: expected 1..%u", t.bound, MAX_IDS);
    t.def = zarena_array(a, t.bound, sizeof *t.def);
    tload *loads = zarena_array(a, n / 6 + 1, sizeof *loads);
    uint32_t *undef_of = zarena_array(a, t.bound, sizeof *undef_of); /* matrix type -> its OpUndef (new) */
    if (!t.def || !loads || !undef_of) return zdiag_set(d, ZE_NOMEM, "out of host memory rewriting tensor loads");
    memset(t.def, 0, t.bound * sizeof *t.def);
    memset(undef_of, 0, t.bound * sizeof *undef_of);
    size_t cap_end = HEADER, ext_end = 0, first_fn = 0;
    bool have_cap[2] = {false, false}, have_ext = false;
    for (size_t off = HEADER; off < n;) {
        uint32_t c = wc(in[off]), o = op(in[off]);
        if (c == 0 || c > n - off) return zdiag_set(d, ZE_FORMAT, "word %zu: bad word count %u", off, c);
        bool res = false, type = false;
        if (o == KHR_TYPE)
            res = true;
        else if (o < 4456 || o > 4460) /* the KHR opcodes are not in Debian's table */
            SpvHasResultAndType((SpvOp)o, &res, &type);
        if (o == OP_CAPABILITY && c == 2) {
            cap_end = off + c;
            have_cap[0] |= in[off + 1] == CAP_TENSOR_ADDRESSING;
            have_cap[1] |= in[off + 1] == CAP_CM_TENSOR_ADDRESSING;
        } else if (o == OP_EXTENSION) {
            ext_end = off + c;
            have_ext |= !strncmp((const char *)(in + off + 1), TENSOR_EXT, (c - 1) * 4);
        } else if (o == OP_FUNCTION && !first_fn) {
            first_fn = off;
        }
        /* result ids: a type's is its first operand, a value's its second */
        uint32_t rid = res ? (type ? (c >= 3 ? in[off + 2] : 0) : in[off + 1]) : 0;
        if (rid && rid < t.bound) t.def[rid] = (uint32_t)off;
        off += c;
    }
    if (!first_fn) return zdiag_set(d, ZE_FORMAT, "a module without functions");
    int nl = 0;
    for (size_t off = HEADER; off < n; off += wc(in[off])) {
        const char *why;
        if (op(in[off]) != KHR_LOAD) continue;
        if (candidate(&t, (uint32_t)off, &loads[nl], &why))
            nl++;
        else if (why)
            return zdiag_set(d, ZE_UNSUPPORTED, "tensor loads: the load at word %zu has %s", off, why);
    }
    if (!nl) {
        *out = (uint32_t *)in, *out_words = n;
        return ZOK;
    }
    /* New ids past the bound: what the module lacks, then per load. */
    uint32_t next = t.bound;
    uint32_t u32 = find_int_type(&t, 0), new_u32 = 0;
    if (!u32) u32 = new_u32 = next++;
    uint32_t k[4] = {0, 1, 2}, kid[3], new_k[3] = {0};
    for (int i = 0; i < 3; i++) {
        kid[i] = new_u32 ? 0 : find_const(&t, u32, k[i]);
        if (!kid[i]) kid[i] = new_k[i] = next++;
    }
    bool any_col = false;
    for (int i = 0; i < nl; i++)
        any_col |= loads[i].col;
    uint32_t tbool = 0, tfalse = 0, tl = next++, tv = any_col ? next++ : 0;
    if (any_col) tbool = next++, tfalse = next++;
    /* the factor constants, one per (stride type, factor) seen */
    uint32_t fac_type[8], fac_val[8], fac_id[8], fac_new[8];
    int nf = 0;
    for (int i = 0; i < nl; i++) {
        int f = 0;
        while (f < nf && !(fac_type[f] == loads[i].stride_type && fac_val[f] == loads[i].factor)) f++;
        if (f == nf) {
            if (nf == 8) return zdiag_set(d, ZE_UNSUPPORTED, "tensor loads: more than 8 stride kinds");
            fac_type[nf] = loads[i].stride_type, fac_val[nf] = loads[i].factor;
            fac_id[nf] = find_const(&t, loads[i].stride_type, loads[i].factor);
            fac_new[nf] = !fac_id[nf];
            if (!fac_id[nf]) fac_id[nf] = next++;
            nf++;
        }
        if (!undef_of[loads[i].mtype]) undef_of[loads[i].mtype] = next++;
    }
    uint32_t per_load = 5;
    if ((uint64_t)next + (uint64_t)nl * per_load >= MAX_IDS)
        return zdiag_set(d, ZE_UNSUPPORTED, "tensor loads: the module would pass %u ids", MAX_IDS);
    /* Two passes: count, then write. */
    zspv_obuf o = {NULL, 0, 0};
    for (int pass = 0; pass < 2; pass++) {
        if (pass) {
            o.cap = o.n, o.n = 0;
            o.w = zarena_array(a, o.cap, sizeof *o.w);
            if (!o.w) return zdiag_set(d, ZE_NOMEM, "out of host memory rewriting tensor loads");
        }
        uint32_t id = next;
        zspv_put(&o, in[0]);
        zspv_put(&o, 0x00010600u); /* SPIR-V 1.6: both extensions require it */
        zspv_put(&o, in[2]);
        zspv_put(&o, 0); /* the bound, below */
        zspv_put(&o, in[4]);
        int li = 0;
        size_t ext_at = ext_end ? ext_end : cap_end;
        for (size_t off = HEADER; off <= n;) {
            if (off == cap_end) {
                if (!have_cap[0]) put_insn(&o, OP_CAPABILITY, 1, (uint32_t[]){CAP_TENSOR_ADDRESSING});
                if (!have_cap[1]) put_insn(&o, OP_CAPABILITY, 1, (uint32_t[]){CAP_CM_TENSOR_ADDRESSING});
            }
            if (off == ext_at && !have_ext) {
                uint32_t s[7] = {0};
                memcpy(s, TENSOR_EXT, sizeof TENSOR_EXT - 1);
                put_insn(&o, OP_EXTENSION, (int)((sizeof TENSOR_EXT + 3) / 4), s);
            }
            if (off == first_fn) {
                if (new_u32) put_insn(&o, OP_TYPE_INT, 3, (uint32_t[]){u32, 32, 0});
                for (int i = 0; i < 3; i++)
                    if (new_k[i]) put_insn(&o, OP_CONSTANT, 3, (uint32_t[]){u32, new_k[i], k[i]});
                for (int f = 0; f < nf; f++)
                    if (fac_new[f]) put_insn(&o, OP_CONSTANT, 3, (uint32_t[]){fac_type[f], fac_id[f], fac_val[f]});
                put_insn(&o, NV_TYPE_LAYOUT, 3, (uint32_t[]){tl, kid[2], kid[0]}); /* 2-D, clamp Undefined */
                if (any_col) {
                    put_insn(&o, OP_TYPE_BOOL, 1, (uint32_t[]){tbool});
                    put_insn(&o, OP_CONSTANT_FALSE, 2, (uint32_t[]){tbool, tfalse});
                    put_insn(&o, NV_TYPE_VIEW, 5, (uint32_t[]){tv, kid[2], tfalse, kid[1], kid[0]});
                }
                for (uint32_t m = 1; m < t.bound; m++)
                    if (undef_of[m]) put_insn(&o, OP_UNDEF, 2, (uint32_t[]){m, undef_of[m]});
            }
            if (off == n) break;
            const uint32_t *i = in + off;
            if (li < nl && loads[li].off == off) {
                const tload *l = &loads[li++];
                const uint32_t *mt = def(&t, l->mtype);
                int f = 0;
                while (!(fac_type[f] == l->stride_type && fac_val[f] == l->factor)) f++;
                uint32_t s8 = id++, l0 = id++, l1 = id++, l2 = id++, v = l->col ? id++ : 0;
                uint32_t d0 = l->col ? mt[5] : mt[4], d1 = l->col ? mt[4] : mt[5];
                put_insn(&o, OP_IMUL, 4, (uint32_t[]){l->stride_type, s8, i[5], fac_id[f]});
                put_insn(&o, NV_CREATE_LAYOUT, 2, (uint32_t[]){tl, l0});
                put_insn(&o, NV_LAYOUT_DIMENSION, 5, (uint32_t[]){tl, l1, l0, d0, d1});
                put_insn(&o, NV_LAYOUT_STRIDE, 5, (uint32_t[]){tl, l2, l1, s8, kid[1]});
                if (v) put_insn(&o, NV_CREATE_VIEW, 2, (uint32_t[]){tv, v});
                uint32_t nmem = wc(i[0]) - 6; /* the memory operands, copied (a mask and its ids) */
                zspv_put(&o, (uint32_t)(6 + (nmem ? nmem : 1) + (v ? 2 : 1)) << 16 | NV_LOAD_TENSOR);
                zspv_put(&o, i[1]);
                zspv_put(&o, i[2]);
                zspv_put(&o, i[3]);
                zspv_put(&o, undef_of[l->mtype]);
                zspv_put(&o, l2);
                if (nmem)
                    for (uint32_t m = 0; m < nmem; m++)
                        zspv_put(&o, i[6 + m]);
                else
                    zspv_put(&o, 0);
                zspv_put(&o, v ? TENSOR_VIEW_BIT : 0);
                if (v) zspv_put(&o, v);
            } else {
                for (uint32_t m = 0; m < wc(i[0]); m++)
                    zspv_put(&o, i[m]);
            }
            off += wc(i[0]);
        }
        if (pass) o.w[3] = id;
    }
    *out = o.w, *out_words = o.n;
    *rewritten = nl;
    return ZOK;
}
