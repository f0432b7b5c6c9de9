/* NV to KHR cooperative matrix, over SPIR-V words.
 *
 * The two extensions differ in three ways that matter here: a KHR matrix
 * type carries its Use (A, B or accumulator) where an NV type does not; KHR
 * loads and stores take the layout as an integer constant placed before the
 * stride where NV takes a boolean "column major" after it; and the KHR
 * multiply-add says which integer operands are signed, where NV read it off
 * the component types.
 *
 * Reading order: index_module (header, instructions, definitions),
 * type_roots (which types hold an NV matrix), unify_insn (which values must
 * share a Use), settle_uses (the Use of every value, the Uses of every
 * type), check_split (what a type split by use cannot be part of),
 * plan_clones (ids of the split types), then emit_insn. */
#include "spv_util.h"
#include "spv_coopmat.h"

#include <string.h>

/* SpvHasResultAndType is a C99 inline function: with no external
 * declaration no translation unit would define it, and an unoptimised build
 * would not link. This declaration makes this file define it. */
#define SPV_ENABLE_UTILITY_CODE
#include <spirv/unified1/spirv.h>
extern void SpvHasResultAndType(SpvOp opcode, bool *hasResult, bool *hasResultType);

/* SPV_KHR_cooperative_matrix's numbers, from the SPIR-V registry
 * (spirv.core.grammar.json): Debian 12's spirv-headers (1.3.239) predate
 * the extension, so its spirv.h has the NV names only. */
enum {
    KHR_OP_TYPE = 4456,   /* result, component type, scope, rows, columns, use */
    KHR_OP_LOAD = 4457,   /* result type, result, pointer, layout, stride, [memory operands] */
    KHR_OP_STORE = 4458,  /* pointer, object, layout, stride, [memory operands] */
    KHR_OP_MULADD = 4459, /* result type, result, A, B, C, [cooperative matrix operands] */
    KHR_OP_LENGTH = 4460, /* result type, result, type */
    KHR_CAPABILITY = 6022,
};

/* CooperativeMatrixUse; each use is one bit of a mask (1 << use). */
enum use { USE_A = 0, USE_B = 1, USE_ACC = 2, N_USES };
/* CooperativeMatrixLayout: the same small integers, so konst[] serves both. */
enum { LAYOUT_ROW = 0, LAYOUT_COL = 1 };
/* CooperativeMatrixOperands bits. */
enum { SIGNED_A = 0x1, SIGNED_B = 0x2, SIGNED_C = 0x4, SIGNED_RESULT = 0x8 };

#define NV_EXT  "SPV_NV_cooperative_matrix"
#define KHR_EXT "SPV_KHR_cooperative_matrix"

enum {
    HEADER_WORDS = 5,
    MAX_BOUND = 1u << 22,      /* SPIR-V's universal id limit; the per-id tables are as long as the bound */
    MAX_WORDS = 1u << 28,      /* offsets are kept in 32 bits */
    BYTE_SWAPPED = 0x03022307, /* the magic number read in the wrong byte order */
};

static const char *const use_name[N_USES] = {"A", "B", "the accumulator"};

typedef struct cm {
    const uint32_t *w;
    uint32_t n, bound, next_id;
    uint32_t *insn; /* offsets of the instructions, in order */
    uint32_t n_insn;
    uint32_t *def;     /* id -> offset of its defining instruction; 0: none */
    uint32_t *type_of; /* id -> its result type; 0: none */
    uint32_t *root;    /* type -> the NV matrix type under its pointers and arrays; 0: none */
    uint32_t *parent;  /* union-find of the values that must share one use */
    uint8_t *mask;     /* class (a root of parent) -> its uses */
    uint32_t *why;     /* class -> for each use, the multiply-add that gave it (for messages) */
    uint8_t *uses;     /* NV type -> the uses of its values */
    uint8_t *fn_used;  /* function type -> an OpFunction has it (the optimizer leaves dead ones) */
    uint32_t *clone;   /* type on a split chain -> 1 + its index in clones; 0: not split */
    uint32_t *clones;  /* N_USES ids per split type (0 for a use it does not have) */
    uint32_t first_nv; /* offset of the first NV matrix type: new constants go before it */
    uint32_t int_type; /* the 32-bit integer type of the first NV type's scope */
    uint32_t konst[N_USES];
    bool new_konst[N_USES];
    bool nv, khr, khr_cap, khr_ext, split_any;
    size_t extra; /* words the output may add */
    zarena *s;    /* scratch, freed at the end */
    zdiag *d;
} cm;

static uint32_t op_of(uint32_t word0) {
    return word0 & SpvOpCodeMask;
}
static uint32_t wc_of(uint32_t word0) {
    return word0 >> SpvWordCountShift;
}
static uint32_t root_of(const cm *c, uint32_t type) {
    return type < c->bound ? c->root[type] : 0;
}
static uint32_t lowest_use(uint8_t mask) {
    return mask & 1 ? USE_A : mask & 2 ? USE_B : USE_ACC;
}
static bool several(uint8_t mask) {
    return (mask & (mask - 1)) != 0;
}

static bool is_int32(const cm *c, uint32_t type) {
    uint32_t at = type < c->bound ? c->def[type] : 0;
    return at && op_of(c->w[at]) == SpvOpTypeInt && wc_of(c->w[at]) == 4 && c->w[at + 2] == 32;
}

static const char *op_name(uint32_t op) {
    switch (op) {
    case SpvOpTypeCooperativeMatrixNV: return "OpTypeCooperativeMatrixNV";
    case SpvOpCooperativeMatrixLoadNV: return "OpCooperativeMatrixLoadNV";
    case SpvOpCooperativeMatrixStoreNV: return "OpCooperativeMatrixStoreNV";
    case SpvOpCooperativeMatrixMulAddNV: return "OpCooperativeMatrixMulAddNV";
    case SpvOpCooperativeMatrixLengthNV: return "OpCooperativeMatrixLengthNV";
    default: return "an instruction";
    }
}

/* Whether an OpExtension's literal is name (NUL included), read byte by
 * byte within the instruction's words. */
static bool ext_is(const uint32_t *i, uint32_t wc, const char *name) {
    size_t len = strlen(name);
    if ((size_t)(wc - 1) * 4 < len + 1) return false;
    for (size_t k = 0; k <= len; k++)
        if (((i[1 + k / 4] >> (8 * (k % 4))) & 0xff) != (uint8_t)name[k]) return false;
    return true;
}

static bool is_nv(const uint32_t *i, uint32_t op, uint32_t wc) {
    if (op >= SpvOpTypeCooperativeMatrixNV && op <= SpvOpCooperativeMatrixLengthNV) return true;
    if (op == SpvOpCapability) return wc >= 2 && i[1] == SpvCapabilityCooperativeMatrixNV;
    if (op == SpvOpExtension) return ext_is(i, wc, NV_EXT);
    return op == SpvOpSpecConstantOp && wc >= 4 && i[3] == SpvOpCooperativeMatrixLengthNV;
}

bool zspv_uses_coopmat_nv(const uint32_t *w, size_t n) {
    if (!w || n < HEADER_WORDS || w[0] != SpvMagicNumber) return false;
    for (size_t off = HEADER_WORDS; off < n;) {
        uint32_t wc = wc_of(w[off]);
        if (wc == 0 || wc > n - off) return false;
        if (is_nv(w + off, op_of(w[off]), wc)) return true;
        off += wc;
    }
    return false;
}

/* The value of a 32-bit OpConstant, or UINT32_MAX when id is not one. */
static uint32_t const_u32(const uint32_t *w, size_t n, uint32_t id) {
    for (size_t off = HEADER_WORDS; off < n;) {
        uint32_t wc = wc_of(w[off]);
        if (wc == 0 || wc > n - off) return UINT32_MAX;
        if (op_of(w[off]) == SpvOpConstant && wc == 4 && w[off + 2] == id) return w[off + 3];
        off += wc;
    }
    return UINT32_MAX;
}

bool zspv_coopmat_workgroup_scope(const uint32_t *w, size_t n) {
    if (!w || n < HEADER_WORDS || w[0] != SpvMagicNumber) return false;
    for (size_t off = HEADER_WORDS; off < n;) {
        uint32_t wc = wc_of(w[off]), op = op_of(w[off]);
        if (wc == 0 || wc > n - off) return false;
        if ((op == SpvOpTypeCooperativeMatrixNV || op == KHR_OP_TYPE) && wc >= 4 &&
            const_u32(w, n, w[off + 3]) == SpvScopeWorkgroup)
            return true;
        off += wc;
    }
    return false;
}

#define NV2_EXT "SPV_NV_cooperative_matrix2"

zstatus zspv_add_coopmat2_extension(const uint32_t *in, size_t n, zarena *a, uint32_t **out,
                                    size_t *out_words, zdiag *d) {
    if (!in || n < HEADER_WORDS || in[0] != SpvMagicNumber)
        return zdiag_set(d, ZE_FORMAT, "not a SPIR-V module (%zu words)", n);
    size_t at = HEADER_WORDS;
    for (size_t off = HEADER_WORDS; off < n;) {
        uint32_t wc = wc_of(in[off]), op = op_of(in[off]);
        if (wc == 0 || wc > n - off) return zdiag_set(d, ZE_FORMAT, "word %zu: bad word count %u", off, wc);
        if (op == SpvOpExtension && !strncmp((const char *)(in + off + 1), NV2_EXT, (wc - 1) * 4)) {
            *out = (uint32_t *)in, *out_words = n; /* there already */
            return ZOK;
        }
        if (op == SpvOpCapability || op == SpvOpExtension)
            at = off + wc;
        else if (op != SpvOpExtInstImport && at > HEADER_WORDS)
            break;
        off += wc;
    }
    uint32_t sw = (uint32_t)(sizeof NV2_EXT + 3) / 4; /* the string with its NUL, in words */
    uint32_t *w = zarena_array(a, n + 1 + sw, sizeof *w);
    if (!w) return zdiag_set(d, ZE_NOMEM, "out of host memory adding a SPIR-V extension");
    memcpy(w, in, at * sizeof *w);
    w[at] = (1 + sw) << 16 | SpvOpExtension;
    memset(w + at + 1, 0, sw * sizeof *w);
    memcpy(w + at + 1, NV2_EXT, sizeof NV2_EXT - 1);
    memcpy(w + at + 1 + sw, in + at, (n - at) * sizeof *w);
    *out = w, *out_words = n + 1 + sw;
    return ZOK;
}

/* ------------------------------------------------------------------ index */

/* Which instructions define a result, and whether it has a type. The KHR
 * opcodes are not in Debian's header table. */
static void result_layout(uint32_t op, bool *res, bool *type) {
    switch (op) {
    case KHR_OP_TYPE: *res = true, *type = false; return;
    case KHR_OP_STORE: *res = false, *type = false; return;
    case KHR_OP_LOAD:
    case KHR_OP_MULADD:
    case KHR_OP_LENGTH: *res = true, *type = true; return;
    default: SpvHasResultAndType((SpvOp)op, res, type);
    }
}

/* The operand counts the rewrite relies on, for the NV instructions. */
static zstatus check_nv_arity(cm *c, uint32_t off, uint32_t op, uint32_t wc) {
    uint32_t least = 0, most = UINT32_MAX;
    switch (op) {
    case SpvOpTypeCooperativeMatrixNV: least = most = 6; break;
    case SpvOpCooperativeMatrixLoadNV: least = 6; break;
    case SpvOpCooperativeMatrixStoreNV: least = 5; break;
    case SpvOpCooperativeMatrixMulAddNV: least = most = 6; break;
    case SpvOpCooperativeMatrixLengthNV: least = most = 4; break;
    default: return ZOK;
    }
    if (wc >= least && wc <= most) return ZOK;
    return zdiag_set(c->d, ZE_FORMAT, "word %u: %s of %u words: expected %s%u", off, op_name(op), wc,
                     least == most ? "" : "at least ", least);
}

static zstatus define(cm *c, uint32_t off) {
    const uint32_t *i = c->w + off;
    uint32_t op = op_of(i[0]), wc = wc_of(i[0]);
    bool has_res, has_type;
    result_layout(op, &has_res, &has_type);
    if (!has_res) return ZOK;
    uint32_t at = has_type ? 2 : 1;
    if (wc <= at)
        return zdiag_set(c->d, ZE_FORMAT, "word %u: opcode %u of %u words has no room for its result id", off,
                         op, wc);
    uint32_t id = i[at], type = has_type ? i[1] : 0;
    bool id_ok = id != 0 && id < c->bound, type_ok = !has_type || (type != 0 && type < c->bound);
    if (!id_ok || !type_ok)
        return zdiag_set(c->d, ZE_FORMAT,
                         "word %u: %s %u of opcode %u is not within the module's id bound %u", off,
                         id_ok ? "result type" : "result id", id_ok ? type : id, op, c->bound);
    if (c->def[id])
        return zdiag_set(c->d, ZE_FORMAT, "word %u: id %u is defined again (first at word %u)", off, id,
                         c->def[id]);
    c->def[id] = off;
    c->type_of[id] = type;
    return ZOK;
}

static zstatus note_insn(cm *c, uint32_t off) {
    const uint32_t *i = c->w + off;
    uint32_t op = op_of(i[0]), wc = wc_of(i[0]);
    c->nv |= is_nv(i, op, wc);
    c->khr |= op >= KHR_OP_TYPE && op <= KHR_OP_LENGTH;
    c->khr_cap |= op == SpvOpCapability && wc >= 2 && i[1] == KHR_CAPABILITY;
    c->khr_ext |= op == SpvOpExtension && ext_is(i, wc, KHR_EXT);
    if (op == SpvOpExtension) c->extra += 2;                 /* the KHR name is one byte longer */
    if (op == SpvOpCooperativeMatrixMulAddNV) c->extra += 1; /* the operands mask */
    if (op == SpvOpTypeCooperativeMatrixNV) c->extra += 1;   /* the use */
    if (op == SpvOpFunction && wc >= 5 && i[4] < c->bound) c->fn_used[i[4]] = 1;
    zstatus s = check_nv_arity(c, off, op, wc);
    return s ? s : define(c, off);
}

static zstatus index_module(cm *c) {
    c->insn = zarena_array(c->s, c->n, sizeof *c->insn);
    if (!c->insn) return zdiag_set(c->d, ZE_NOMEM, "out of host memory for %u words", c->n);
    for (uint32_t off = HEADER_WORDS; off < c->n;) {
        uint32_t wc = wc_of(c->w[off]), op = op_of(c->w[off]);
        if (wc == 0)
            return zdiag_set(c->d, ZE_FORMAT, "word %u: opcode %u has a word count of 0, expected at least 1",
                             off, op);
        if (wc > c->n - off)
            return zdiag_set(c->d, ZE_FORMAT,
                             "word %u: opcode %u of %u words runs past the end of the module (%u words)", off,
                             op, wc, c->n);
        c->insn[c->n_insn++] = off;
        zstatus s = note_insn(c, off);
        if (s) return s;
        off += wc;
    }
    return ZOK;
}

/* ------------------------------------------------------------------ types */

/* The scope operand of an NV type is a 32-bit integer constant: its type
 * also serves the KHR Use and layout constants. */
static zstatus take_int_type(cm *c, uint32_t off, uint32_t scope) {
    uint32_t t = scope < c->bound ? c->type_of[scope] : 0;
    if (!is_int32(c, t))
        return zdiag_set(
            c->d, ZE_FORMAT,
            "word %u: the scope %u of OpTypeCooperativeMatrixNV is not a 32-bit integer constant", off,
            scope);
    c->int_type = t;
    return ZOK;
}

static zstatus type_roots(cm *c) {
    for (uint32_t k = 0; k < c->n_insn; k++) {
        uint32_t off = c->insn[k];
        const uint32_t *i = c->w + off;
        uint32_t wc = wc_of(i[0]);
        switch (op_of(i[0])) {
        case SpvOpTypeCooperativeMatrixNV:
            c->root[i[1]] = i[1];
            if (!c->first_nv) {
                c->first_nv = off;
                zstatus s = take_int_type(c, off, i[3]);
                if (s) return s;
            }
            break;
        case SpvOpTypePointer:
            if (wc == 4) c->root[i[1]] = root_of(c, i[3]);
            break;
        case SpvOpTypeArray:
        case SpvOpTypeRuntimeArray:
            if (wc >= 3) c->root[i[1]] = root_of(c, i[2]);
            break;
        default: break;
        }
    }
    return ZOK;
}

/* ------------------------------------------------------------------ uses */

static bool is_matrix_value(const cm *c, uint32_t id) {
    return id && id < c->bound && c->root[c->type_of[id]];
}

static uint32_t find(cm *c, uint32_t x) {
    while (c->parent[x] != x) {
        c->parent[x] = c->parent[c->parent[x]];
        x = c->parent[x];
    }
    return x;
}

static void join(cm *c, uint32_t a, uint32_t b) {
    if (!is_matrix_value(c, a) || !is_matrix_value(c, b)) return;
    a = find(c, a);
    b = find(c, b);
    if (a == b) return;
    c->parent[b] = a;
    for (int u = 0; u < N_USES; u++)
        if (!(c->mask[a] & 1u << u) && (c->mask[b] & 1u << u))
            c->why[(size_t)a * N_USES + u] = c->why[(size_t)b * N_USES + u];
    c->mask[a] |= c->mask[b];
}

static void give_use(cm *c, uint32_t id, uint32_t off, enum use u) {
    if (!is_matrix_value(c, id)) return;
    uint32_t r = find(c, id);
    if (c->mask[r] & 1u << u) return;
    c->mask[r] |= (uint8_t)(1u << u);
    c->why[(size_t)r * N_USES + u] = off;
}

/* How an instruction ties the use of its result to its operands: which of
 * its words are values that must have the same KHR type (or at least the
 * same use, for conversions). TIE_UNKNOWN: an instruction whose result the
 * rewrite cannot retype. */
typedef enum tie {
    TIE_UNKNOWN,
    TIE_NONE,     /* a value with no matrix operand */
    TIE_PAIR,     /* words 1 and 2: OpStore, OpCopyMemory */
    TIE_FIRST,    /* the result and word 3 */
    TIE_ALL,      /* the result and every word from 3 */
    TIE_PHI,      /* the result and words 3, 5, 7, ... */
    TIE_SELECT,   /* the result and words 4, 5 */
    TIE_INSERT,   /* the result and words 3, 4 */
    TIE_VARIABLE, /* the result and its initializer, word 4 */
    TIE_MULADD,
} tie;

static tie tie_of(uint32_t op) {
    switch (op) {
    case SpvOpStore:
    case SpvOpCopyMemory: return TIE_PAIR;
    case SpvOpLoad:
    case SpvOpCopyObject:
    case SpvOpCopyLogical:
    case SpvOpAccessChain:
    case SpvOpInBoundsAccessChain:
    case SpvOpPtrAccessChain:
    case SpvOpCompositeExtract: return TIE_FIRST;
    case SpvOpCompositeConstruct:
    case SpvOpConstantComposite:
    case SpvOpSpecConstantComposite:
    case SpvOpFNegate:
    case SpvOpSNegate:
    case SpvOpFAdd:
    case SpvOpFSub:
    case SpvOpFMul:
    case SpvOpFDiv:
    case SpvOpIAdd:
    case SpvOpISub:
    case SpvOpIMul:
    case SpvOpSDiv:
    case SpvOpUDiv:
    case SpvOpMatrixTimesScalar:
    case SpvOpFConvert:
    case SpvOpSConvert:
    case SpvOpUConvert:
    case SpvOpConvertFToS:
    case SpvOpConvertFToU:
    case SpvOpConvertSToF:
    case SpvOpConvertUToF: return TIE_ALL;
    case SpvOpPhi: return TIE_PHI;
    case SpvOpSelect: return TIE_SELECT;
    case SpvOpCompositeInsert: return TIE_INSERT;
    case SpvOpVariable: return TIE_VARIABLE;
    case SpvOpCooperativeMatrixMulAddNV: return TIE_MULADD;
    case SpvOpUndef:
    case SpvOpConstantNull:
    case SpvOpCooperativeMatrixLoadNV:
    case SpvOpFunction:
    case SpvOpFunctionParameter:
    case SpvOpFunctionCall: return TIE_NONE;
    default: return TIE_UNKNOWN;
    }
}

static void unify_insn(cm *c, uint32_t off) {
    const uint32_t *i = c->w + off;
    uint32_t wc = wc_of(i[0]);
    switch (tie_of(op_of(i[0]))) {
    case TIE_PAIR:
        if (wc >= 3) join(c, i[1], i[2]);
        break;
    case TIE_FIRST:
        if (wc >= 4) join(c, i[2], i[3]);
        break;
    case TIE_ALL:
        for (uint32_t k = 3; k < wc; k++)
            join(c, i[2], i[k]);
        break;
    case TIE_PHI:
        for (uint32_t k = 3; k < wc; k += 2)
            join(c, i[2], i[k]);
        break;
    case TIE_SELECT:
    case TIE_INSERT:
        for (uint32_t k = tie_of(op_of(i[0])) == TIE_SELECT ? 4 : 3, e = k + 2; k < wc && k < e; k++)
            join(c, i[2], i[k]);
        break;
    case TIE_VARIABLE:
        if (wc >= 5) join(c, i[2], i[4]);
        break;
    case TIE_MULADD:
        give_use(c, i[3], off, USE_A);
        give_use(c, i[4], off, USE_B);
        give_use(c, i[5], off, USE_ACC);
        give_use(c, i[2], off, USE_ACC);
        break;
    default: break;
    }
}

static zstatus conflict(cm *c, uint32_t r) {
    uint8_t m = c->mask[r];
    enum use u1 = lowest_use(m), u2 = lowest_use((uint8_t)(m & ~(1u << u1)));
    uint32_t a = c->why[(size_t)r * N_USES + u1], b = c->why[(size_t)r * N_USES + u2];
    return zdiag_set(c->d, ZE_UNSUPPORTED,
                     "id %u (%s of the multiply-add at word %u) and id %u (%s of the one at word %u) are one "
                     "value, joined through variables, copies, phis or conversions: KHR types each use apart "
                     "and has no conversion between uses",
                     c->w[a + 3 + u1], use_name[u1], a, c->w[b + 3 + u2], use_name[u2], b);
}

/* A class that no multiply-add gave a use takes one its types already have
 * (the accumulator first: loads, stores and element access work in any
 * use), so that it splits no type that need not be split. */
static void default_uses(cm *c, uint8_t *cand) {
    for (uint32_t id = 1; id < c->bound; id++)
        if (is_matrix_value(c, id) && !c->mask[find(c, id)]) {
            uint8_t have = c->uses[c->root[c->type_of[id]]];
            cand[find(c, id)] &= have ? have : 7;
        }
    for (uint32_t id = 1; id < c->bound; id++) {
        if (!is_matrix_value(c, id)) continue;
        uint32_t r = find(c, id);
        if (!c->mask[r])
            c->mask[r] = (uint8_t)(cand[r] & 1u << USE_ACC ? 1u << USE_ACC : 1u << lowest_use(cand[r]));
    }
}

static zstatus settle_uses(cm *c) {
    uint8_t *cand = zarena_alloc(c->s, c->bound);
    if (!cand) return zdiag_set(c->d, ZE_NOMEM, "out of host memory for %u ids", c->bound);
    memset(cand, 7, c->bound);
    for (uint32_t id = 1; id < c->bound; id++) {
        if (!is_matrix_value(c, id)) continue;
        uint32_t r = find(c, id);
        if (several(c->mask[r])) return conflict(c, r);
        c->uses[c->root[c->type_of[id]]] |= c->mask[r];
    }
    default_uses(c, cand);
    for (uint32_t id = 1; id < c->bound; id++)
        if (is_matrix_value(c, id)) c->uses[c->root[c->type_of[id]]] |= c->mask[find(c, id)];
    for (uint32_t id = 1; id < c->bound; id++) {
        if (c->root[id] != id) continue;
        if (!c->uses[id]) c->uses[id] = 1u << USE_ACC; /* a type with no values */
        c->split_any |= several(c->uses[id]);
    }
    return ZOK;
}

/* ----------------------------------------------------------------- splits */

static bool is_split(const cm *c, uint32_t type) {
    uint32_t t = root_of(c, type);
    return t && several(c->uses[t]);
}

/* A type split by use can be cloned along pointers and arrays, not inside a
 * struct or the signature of a function (one clone per member or parameter
 * would be needed; a dead function type keeps the original id and is
 * harmless), and the length of a split type names no single KHR type. */
static zstatus check_split(cm *c, uint32_t off) {
    const uint32_t *i = c->w + off;
    uint32_t op = op_of(i[0]), wc = wc_of(i[0]);
    if (op == SpvOpTypeStruct || (op == SpvOpTypeFunction && c->fn_used[i[1]])) {
        for (uint32_t k = 2; k < wc; k++)
            if (is_split(c, i[k]))
                return zdiag_set(
                    c->d, ZE_UNSUPPORTED,
                    "word %u: %s %u holds cooperative matrix type %u, which is used in several "
                    "roles: a type split by use cannot be a struct member or a function parameter "
                    "or result (compile with optimization, so that the function is inlined)",
                    off, op == SpvOpTypeStruct ? "struct" : "function type", i[1], root_of(c, i[k]));
        return ZOK;
    }
    uint32_t len_of = op == SpvOpCooperativeMatrixLengthNV                                             ? i[3]
                      : op == SpvOpSpecConstantOp && wc >= 5 && i[3] == SpvOpCooperativeMatrixLengthNV ? i[4]
                                                                                                       : 0;
    if (len_of && is_split(c, len_of))
        return zdiag_set(
            c->d, ZE_UNSUPPORTED,
            "word %u: the length of cooperative matrix type %u, which is used in several roles: "
            "a KHR length is per use and the type names no one use (take the length of another type)",
            off, len_of);
    bool has_res, has_type;
    result_layout(op, &has_res, &has_type);
    if (has_type && is_split(c, i[1]) && tie_of(op) == TIE_UNKNOWN)
        return zdiag_set(c->d, ZE_UNSUPPORTED,
                         "word %u: opcode %u makes a value of type %u, a cooperative matrix used in several "
                         "roles: the rewrite retypes only variables, loads, stores, copies, phis, selects, "
                         "composites, arithmetic and conversions",
                         off, op, i[1]);
    return ZOK;
}

static bool on_split_chain(const cm *c, const uint32_t *i) {
    uint32_t op = op_of(i[0]);
    bool type = op == SpvOpTypeCooperativeMatrixNV || op == SpvOpTypePointer || op == SpvOpTypeArray ||
                op == SpvOpTypeRuntimeArray;
    return type && is_split(c, i[1]);
}

/* Each type on a split chain gets an id per use of its NV type: the lowest
 * use keeps the original id (so names and decorations stay with one of
 * them), the others take new ids past the bound. */
static zstatus plan_clones(cm *c) {
    uint32_t n = 0;
    for (uint32_t k = 0; k < c->n_insn; k++)
        n += on_split_chain(c, c->w + c->insn[k]);
    c->clones = zarena_array(c->s, (size_t)n * N_USES + 1, sizeof *c->clones);
    if (!c->clones) return zdiag_set(c->d, ZE_NOMEM, "out of host memory for %u split types", n);
    n = 0;
    for (uint32_t k = 0; k < c->n_insn; k++) {
        const uint32_t *i = c->w + c->insn[k];
        if (!on_split_chain(c, i)) continue;
        uint8_t m = c->uses[c->root[i[1]]];
        c->clone[i[1]] = ++n;
        for (uint32_t u = 0; u < N_USES; u++) {
            if (!(m & 1u << u)) continue;
            c->clones[(size_t)(n - 1) * N_USES + u] = u == lowest_use(m) ? i[1] : c->next_id++;
            c->extra += u == lowest_use(m) ? 0 : wc_of(i[0]) + 1;
        }
    }
    return ZOK;
}

/* The int constants 0, 1, 2 for uses and layouts (KHR takes any 32-bit
 * integer constant): existing ones if they are defined before the first NV
 * type (which will refer to them), else new ones of the scope's type. */
static void plan_konsts(cm *c) {
    for (uint32_t k = 0; k < c->n_insn && c->insn[k] < c->first_nv; k++) {
        const uint32_t *i = c->w + c->insn[k];
        if (op_of(i[0]) == SpvOpConstant && wc_of(i[0]) == 4 && i[3] < N_USES && !c->konst[i[3]] &&
            is_int32(c, i[1]))
            c->konst[i[3]] = i[2];
    }
    for (int v = 0; v < N_USES; v++)
        if (!c->konst[v]) {
            c->konst[v] = c->next_id++;
            c->new_konst[v] = true;
            c->extra += 4;
        }
}

/* ------------------------------------------------------------------- emit */

static void put_words(zspv_obuf *o, const uint32_t *src, uint32_t n) {
    for (uint32_t k = 0; k < n; k++)
        zspv_put(o, src[k]);
}

static uint32_t use_of(cm *c, uint32_t value) {
    return lowest_use(c->mask[find(c, value)]);
}

static uint32_t retype(const cm *c, uint32_t type, uint32_t u) {
    return type < c->bound && c->clone[type] ? c->clones[(size_t)(c->clone[type] - 1) * N_USES + u] : type;
}

static void put_string_insn(zspv_obuf *o, uint32_t op, const char *s) {
    size_t len = strlen(s), words = (len + 4) / 4;
    zspv_put(o, (uint32_t)(1 + words) << SpvWordCountShift | op);
    for (size_t k = 0; k < words; k++) {
        uint32_t w = 0;
        for (size_t b = 0; b < 4 && 4 * k + b < len; b++)
            w |= (uint32_t)(uint8_t)s[4 * k + b] << (8 * b);
        zspv_put(o, w);
    }
}

/* A type on a split chain, once per use; a lone NV type once. */
static void emit_type(cm *c, zspv_obuf *o, const uint32_t *i) {
    uint32_t op = op_of(i[0]), wc = wc_of(i[0]);
    uint8_t m = c->uses[c->root[i[1]]];
    bool nv = op == SpvOpTypeCooperativeMatrixNV;
    for (uint32_t u = 0; u < N_USES; u++) {
        if (!(m & 1u << u)) continue;
        uint32_t base = nv ? 0 : op == SpvOpTypePointer ? 3 : 2; /* the pointee or element type */
        zspv_put(o, (wc + nv) << SpvWordCountShift | (nv ? KHR_OP_TYPE : op));
        zspv_put(o, retype(c, i[1], u));
        for (uint32_t k = 2; k < wc; k++)
            zspv_put(o, k == base ? retype(c, i[k], u) : i[k]);
        if (nv) zspv_put(o, c->konst[u]);
    }
}

/* NV says "column major" with a boolean constant; KHR wants a layout. */
static zstatus layout_of(cm *c, uint32_t off, uint32_t id, uint32_t *layout) {
    uint32_t at = id < c->bound ? c->def[id] : 0, op = at ? op_of(c->w[at]) : 0;
    if (op == SpvOpConstantTrue || op == SpvOpConstantFalse || op == SpvOpConstantNull) {
        *layout = op == SpvOpConstantTrue ? LAYOUT_COL : LAYOUT_ROW;
        return ZOK;
    }
    return zdiag_set(
        c->d, ZE_UNSUPPORTED,
        "word %u: %s's column-major operand %u is not a boolean constant (OpConstantTrue/False): "
        "KHR takes the layout as an integer constant",
        off, op_name(op_of(c->w[off])), id);
}

/* Load: type, result, pointer, stride, column-major, [mem] -> type,
 * result, pointer, layout, stride, [mem]. Store: pointer, object, stride,
 * column-major, [mem] -> pointer, object, layout, stride, [mem]. */
static zstatus emit_load_store(cm *c, zspv_obuf *o, uint32_t off) {
    const uint32_t *i = c->w + off;
    uint32_t wc = wc_of(i[0]);
    bool load = op_of(i[0]) == SpvOpCooperativeMatrixLoadNV;
    uint32_t at = load ? 4 : 3, layout = LAYOUT_ROW; /* the stride; column-major follows it */
    zstatus s = layout_of(c, off, i[at + 1], &layout);
    if (s) return s;
    zspv_put(o, wc << SpvWordCountShift | (load ? KHR_OP_LOAD : KHR_OP_STORE));
    zspv_put(o, load && is_matrix_value(c, i[2]) ? retype(c, i[1], use_of(c, i[2])) : i[1]);
    put_words(o, i + 2, at - 2);
    zspv_put(o, c->konst[layout]);
    zspv_put(o, i[at]);
    put_words(o, i + at + 2, wc - at - 2);
    return ZOK;
}

/* NV reads signedness off the component types; KHR wants it said. */
static bool signed_int(const cm *c, uint32_t type) {
    uint32_t t = root_of(c, type), at = t ? c->def[t] : 0;
    uint32_t comp = at ? c->w[at + 2] : 0, cat = comp < c->bound ? c->def[comp] : 0;
    return cat && op_of(c->w[cat]) == SpvOpTypeInt && wc_of(c->w[cat]) == 4 && c->w[cat + 3] == 1;
}

static uint32_t value_type(const cm *c, uint32_t id) {
    return id < c->bound ? c->type_of[id] : 0;
}

static void emit_muladd(cm *c, zspv_obuf *o, const uint32_t *i) {
    uint32_t ops = (signed_int(c, value_type(c, i[3])) ? SIGNED_A : 0) |
                   (signed_int(c, value_type(c, i[4])) ? SIGNED_B : 0) |
                   (signed_int(c, value_type(c, i[5])) ? SIGNED_C : 0) |
                   (signed_int(c, i[1]) ? SIGNED_RESULT : 0);
    zspv_put(o, (ops ? 7u : 6u) << SpvWordCountShift | KHR_OP_MULADD);
    zspv_put(o, retype(c, i[1], USE_ACC));
    put_words(o, i + 2, 4);
    if (ops) zspv_put(o, ops);
}

/* Anything else: copied, with its result type changed when that type was
 * split (the value takes the clone of its class's use). */
static void emit_other(cm *c, zspv_obuf *o, const uint32_t *i) {
    uint32_t op = op_of(i[0]), wc = wc_of(i[0]);
    bool has_res, has_type;
    result_layout(op, &has_res, &has_type);
    zspv_put(o, i[0]);
    if (has_type && is_split(c, i[1]) && is_matrix_value(c, i[2])) {
        zspv_put(o, retype(c, i[1], use_of(c, i[2])));
        put_words(o, i + 2, wc - 2);
        return;
    }
    put_words(o, i + 1, wc - 1);
}

static zstatus emit_insn(cm *c, zspv_obuf *o, uint32_t off) {
    const uint32_t *i = c->w + off;
    uint32_t op = op_of(i[0]), wc = wc_of(i[0]);
    if (off == c->first_nv)
        for (uint32_t v = 0; v < N_USES; v++)
            if (c->new_konst[v])
                put_words(
                    o, (uint32_t[]){4u << SpvWordCountShift | SpvOpConstant, c->int_type, c->konst[v], v}, 4);
    if (op == SpvOpCapability && wc >= 2 && i[1] == SpvCapabilityCooperativeMatrixNV) {
        if (!c->khr_cap)
            put_words(o, (uint32_t[]){2u << SpvWordCountShift | SpvOpCapability, KHR_CAPABILITY}, 2);
        c->khr_cap = true;
    } else if (op == SpvOpExtension && ext_is(i, wc, NV_EXT)) {
        if (!c->khr_ext) put_string_insn(o, SpvOpExtension, KHR_EXT);
        c->khr_ext = true;
    } else if (op == SpvOpTypeCooperativeMatrixNV || on_split_chain(c, i)) {
        emit_type(c, o, i);
    } else if (op == SpvOpCooperativeMatrixLoadNV || op == SpvOpCooperativeMatrixStoreNV) {
        return emit_load_store(c, o, off);
    } else if (op == SpvOpCooperativeMatrixMulAddNV) {
        emit_muladd(c, o, i);
    } else if (op == SpvOpCooperativeMatrixLengthNV) {
        put_words(o, (uint32_t[]){4u << SpvWordCountShift | KHR_OP_LENGTH, i[1], i[2], i[3]}, 4);
    } else if (op == SpvOpSpecConstantOp && wc >= 4 && i[3] == SpvOpCooperativeMatrixLengthNV) {
        put_words(o, i, 3); /* the length as a specialization constant, as glslang writes .length() */
        zspv_put(o, KHR_OP_LENGTH);
        put_words(o, i + 4, wc - 4);
    } else {
        emit_other(c, o, i);
    }
    return ZOK;
}

/* ------------------------------------------------------------------ entry */

static zstatus check_header(const uint32_t *w, size_t n, zdiag *d) {
    if (!w || n < HEADER_WORDS)
        return zdiag_set(d, ZE_FORMAT, "a SPIR-V module of %zu words: expected at least the %d-word header",
                         n, HEADER_WORDS);
    if (w[0] != SpvMagicNumber)
        return zdiag_set(d, ZE_FORMAT, "SPIR-V magic number: expected 0x%08x, found 0x%08x%s", SpvMagicNumber,
                         w[0], w[0] == BYTE_SWAPPED ? " (a module of the other byte order)" : "");
    if (w[3] == 0) return zdiag_set(d, ZE_FORMAT, "SPIR-V header: an id bound of 0, expected at least 1");
    if (w[3] > MAX_BOUND || n > MAX_WORDS)
        return zdiag_set(d, ZE_UNSUPPORTED,
                         "a SPIR-V module of %zu words with id bound %u: the rewrite handles up to %u words "
                         "and %u ids",
                         n, w[3], MAX_WORDS, MAX_BOUND);
    return ZOK;
}

/* The tables every module needs; the rest waits until it has NV. */
static zstatus setup(cm *c, const uint32_t *w, size_t n, zdiag *d) {
    memset(c, 0, sizeof *c);
    c->w = w;
    c->n = (uint32_t)n;
    c->bound = c->next_id = w[3];
    c->d = d;
    c->s = zarena_new();
    if (!c->s) return zdiag_set(d, ZE_NOMEM, "out of host memory");
    c->def = zarena_array(c->s, c->bound, sizeof *c->def);
    c->type_of = zarena_array(c->s, c->bound, sizeof *c->type_of);
    c->fn_used = zarena_array(c->s, c->bound, sizeof *c->fn_used);
    if (!c->def || !c->type_of || !c->fn_used)
        return zdiag_set(d, ZE_NOMEM, "out of host memory for %u ids", c->bound);
    return ZOK;
}

static zstatus setup_uses(cm *c) {
    c->root = zarena_array(c->s, c->bound, sizeof *c->root);
    c->parent = zarena_array(c->s, c->bound, sizeof *c->parent);
    c->mask = zarena_array(c->s, c->bound, sizeof *c->mask);
    c->why = zarena_array(c->s, (size_t)c->bound * N_USES, sizeof *c->why);
    c->uses = zarena_array(c->s, c->bound, sizeof *c->uses);
    c->clone = zarena_array(c->s, c->bound, sizeof *c->clone);
    if (!c->root || !c->parent || !c->mask || !c->why || !c->uses || !c->clone)
        return zdiag_set(c->d, ZE_NOMEM, "out of host memory for %u ids", c->bound);
    for (uint32_t id = 0; id < c->bound; id++)
        c->parent[id] = id;
    return ZOK;
}

static zstatus give(zarena *a, const uint32_t *w, size_t n, uint32_t **out, size_t *out_words, zdiag *d) {
    *out = zarena_array(a, n, sizeof **out);
    if (!*out) return zdiag_set(d, ZE_NOMEM, "out of host memory for %zu words", n);
    memcpy(*out, w, n * sizeof *w);
    *out_words = n;
    return ZOK;
}

static zstatus emit(cm *c, zarena *a, uint32_t **out, size_t *out_words) {
    zspv_obuf o = {.cap = (size_t)c->n + c->extra};
    o.w = zarena_array(c->s, o.cap, sizeof *o.w);
    if (!o.w) return zdiag_set(c->d, ZE_NOMEM, "out of host memory for %zu words", o.cap);
    put_words(&o, c->w, HEADER_WORDS);
    for (uint32_t k = 0; k < c->n_insn; k++) {
        zstatus s = emit_insn(c, &o, c->insn[k]);
        if (s) return s;
    }
    if (o.n > o.cap)
        return zdiag_set(c->d, ZE_INTERNAL, "wrote %zu words where %zu were planned", o.n, o.cap);
    o.w[3] = c->next_id;
    return give(a, o.w, o.n, out, out_words, c->d);
}

static zstatus rewrite(cm *c, zarena *a, uint32_t **out, size_t *out_words) {
    zstatus s = index_module(c);
    if (s) return s;
    if (!c->nv) return give(a, c->w, c->n, out, out_words, c->d);
    if (c->khr)
        return zdiag_set(c->d, ZE_UNSUPPORTED,
                         "the module has both NV and KHR cooperative matrix instructions: expected NV only");
    s = setup_uses(c);
    if (!s) s = type_roots(c);
    for (uint32_t k = 0; !s && k < c->n_insn; k++)
        unify_insn(c, c->insn[k]);
    if (!s) s = settle_uses(c);
    for (uint32_t k = 0; !s && c->split_any && k < c->n_insn; k++)
        s = check_split(c, c->insn[k]);
    if (!s) s = plan_clones(c);
    if (!s && c->first_nv) plan_konsts(c);
    return s ? s : emit(c, a, out, out_words);
}

zstatus zspv_coopmat_nv_to_khr(const uint32_t *in, size_t n_words, zarena *a, uint32_t **out,
                               size_t *out_words, zdiag *d) {
    *out = NULL;
    *out_words = 0;
    cm c = {0};
    zstatus s = check_header(in, n_words, d);
    if (!s) s = setup(&c, in, n_words, d);
    if (!s) s = rewrite(&c, a, out, out_words);
    if (c.s) zarena_free(c.s);
    if (s) zdiag_prefix(d, "SPIR-V NV to KHR cooperative matrix");
    return s;
}
