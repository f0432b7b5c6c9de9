/* The NV to KHR cooperative matrix rewrite (backend/spv_coopmat.c) on real
 * kernels compiled by shaderc: what the KHR module says (uses, layouts,
 * signedness), that a validator accepts it, what is refused, and hostile
 * modules.
 *
 * Validation: the input is checked by the linked SPIRV-Tools. Debian 12's
 * SPIRV-Tools (2023.1) predates SPV_KHR_cooperative_matrix, so the output
 * is checked by the linked one only where it knows the KHR capability, and
 * by the spirv-val named in ZINC_SPIRV_VAL (a newer build) when set; the
 * test's own reading of the output (kinfo) runs everywhere. */
#include <criterion/criterion.h>
#include <spirv-tools/libspirv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/shaderc.h"
#include "backend/spv_coopmat.h"
#include "testutil.h"

/* Opcodes the test reads, from the SPIR-V registry (written out so that the
 * test checks the rewrite against the spec, not against its own table). */
enum {
    OP_EXTENSION = 10,
    OP_CAPABILITY = 17,
    OP_CONSTANT = 43,
    OP_SPEC_CONSTANT_OP = 52,
    KHR_TYPE = 4456,
    KHR_LOAD = 4457,
    KHR_STORE = 4458,
    KHR_MULADD = 4459,
    KHR_LENGTH = 4460,
    NV_FIRST = 5358, /* OpTypeCooperativeMatrixNV .. OpCooperativeMatrixLengthNV */
    NV_LAST = 5362,
    CAP_NV = 5357,
    CAP_KHR = 6022,
};

/* ---------------------------------------------------------------- kernels */

#define PRELUDE                                                                                              \
    "#version 450\n"                                                                                         \
    "#extension GL_NV_cooperative_matrix : require\n"                                                        \
    "#extension GL_KHR_memory_scope_semantics : require\n"                                                   \
    "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"                                 \
    "layout(local_size_x = 32) in;\n"                                                                        \
    "layout(std430, binding = 0) readonly buffer A { float16_t a[]; };\n"                                    \
    "layout(std430, binding = 1) readonly buffer B { float16_t b[]; };\n"                                    \
    "layout(std430, binding = 2) buffer C { float c[]; };\n"
#define F16(r, c) "fcoopmatNV<16, gl_ScopeSubgroup, " #r ", " #c ">"
#define F32(r, c) "fcoopmatNV<32, gl_ScopeSubgroup, " #r ", " #c ">"

/* A 16x16 by 16x8 fp16 tile: three distinct types, a row-major and a
 * column-major load, element access over .length(), two stores. */
#define TILE_BODY                                                                                            \
    "    " F16(16, 16) " ma;\n"                                                                              \
                       "    " F16(                                                                           \
                           16, 8) " mb;\n"                                                                   \
                                  "    coopMatLoadNV(ma, a, 0, 16, false);\n"                                \
                                  "    coopMatLoadNV(mb, b, 0, 16, true);\n"                                 \
                                  "    " F32(16, 8) " acc = " F32(                                           \
                                      16, 8) "(0.0);\n"                                                      \
                                             "    acc = coopMatMulAddNV(ma, mb, acc);\n"                     \
                                             "    for (int i = 0; i < acc.length(); i++) acc[i] *= 2.0;\n"   \
                                             "    coopMatStoreNV(acc, c, 0, 8, false);\n"                    \
                                             "    coopMatStoreNV(acc, c, 128, 16, true);\n"
static const char k_tile[] = PRELUDE "void main() {\n" TILE_BODY "}\n";
/* The same, with int constants 0, 1, 2 (glslang folds the indices to int)
 * defined before the matrix types: the rewrite uses them rather than adding
 * its own. */
static const char k_tile_consts[] = PRELUDE "void main() {\n"
                                            "    c[0u] = 0.0; c[1u] = 1.0; c[2u] = 2.0;\n" TILE_BODY "}\n";

/* A GEMM's K loop at 16x16x16: one fp16 type for A and B (split in two),
 * the accumulator carried around the loop. */
static const char k_loop[] =
    PRELUDE "layout(constant_id = 0) const uint K = 64;\n"
            "void main() {\n"
            "    " F32(16, 16) " acc = " F32(
                16, 16) "(0.0);\n"
                        "    for (uint k = 0; k < K; k += 16) {\n"
                        "        " F16(16, 16) " ma, mb;\n"
                                               "        coopMatLoadNV(ma, a, k, K, false);\n"
                                               "        coopMatLoadNV(mb, b, k * 16, 16, true);\n"
                                               "        acc = coopMatMulAddNV(ma, mb, acc);\n"
                                               "    }\n"
                                               "    coopMatStoreNV(acc, c, 0, 16, false);\n"
                                               "}\n";

/* int8 x int8 + int32 (GL_NV_integer_cooperative_matrix). */
static const char k_int8[] = "#version 450\n"
                             "#extension GL_NV_cooperative_matrix : require\n"
                             "#extension GL_NV_integer_cooperative_matrix : require\n"
                             "#extension GL_KHR_memory_scope_semantics : require\n"
                             "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n"
                             "layout(local_size_x = 32) in;\n"
                             "layout(std430, binding = 0) readonly buffer A { int8_t a[]; };\n"
                             "layout(std430, binding = 1) readonly buffer B { int8_t b[]; };\n"
                             "layout(std430, binding = 2) buffer C { int c[]; };\n"
                             "void main() {\n"
                             "    icoopmatNV<8, gl_ScopeSubgroup, 16, 32> ma;\n"
                             "    icoopmatNV<8, gl_ScopeSubgroup, 32, 16> mb;\n"
                             "    coopMatLoadNV(ma, a, 0, 32, false);\n"
                             "    coopMatLoadNV(mb, b, 0, 16, true);\n"
                             "    icoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc = "
                             "icoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0);\n"
                             "    acc = coopMatMulAddNV(ma, mb, acc);\n"
                             "    coopMatStoreNV(acc, c, 0, 16, false);\n"
                             "}\n";

/* Refused: one value as A and as B. */
static const char k_same_value[] = PRELUDE
    "void main() {\n"
    "    " F16(16, 16) " ma;\n"
                       "    coopMatLoadNV(ma, a, 0, 16, false);\n"
                       "    " F32(16, 16) " acc = " F32(16, 16) "(0.0);\n"
                                                                "    acc = coopMatMulAddNV(ma, ma, acc);\n"
                                                                "    coopMatStoreNV(acc, c, 0, 16, false);\n"
                                                                "}\n";

/* Refused: an accumulator converted to fp16 and used as A (base KHR has no
 * conversion between uses). */
static const char k_acc_to_a[] = PRELUDE
    "void main() {\n"
    "    " F16(16, 16) " ma, mb;\n"
                       "    coopMatLoadNV(ma, a, 0, 16, false);\n"
                       "    coopMatLoadNV(mb, b, 0, 16, false);\n"
                       "    " F32(16, 16) " s = coopMatMulAddNV(ma, mb, " F32(
                           16, 16) "(0.0));\n"
                                   "    " F16(16, 16) " p = " F16(
                                       16, 16) "(s);\n"
                                               "    " F32(16,
                                                          16) " acc = coopMatMulAddNV(p, mb, s);\n"
                                                              "    coopMatStoreNV(acc, c, 0, 16, false);\n"
                                                              "}\n";

/* Refused: the length of a type that is split into A and B. */
static const char k_split_length[] = PRELUDE
    "void main() {\n"
    "    " F16(16, 16) " ma, mb;\n"
                       "    coopMatLoadNV(ma, a, 0, 16, false);\n"
                       "    coopMatLoadNV(mb, b, 0, 16, false);\n"
                       "    " F32(16, 16) " acc = " F32(16, 16) "(0.0);\n"
                                                                "    acc = coopMatMulAddNV(ma, mb, acc);\n"
                                                                "    c[1000] = float(ma.length());\n"
                                                                "    coopMatStoreNV(acc, c, 0, 16, false);\n"
                                                                "}\n";

/* A helper function taking the split type: refused unless the optimizer
 * inlines it. */
static const char k_function[] = PRELUDE F32(16, 16) " step(" F16(16, 16) " x, " F16(16, 16) " y, " F32(
    16, 16) " z) {\n"
            "    return coopMatMulAddNV(x, y, z);\n"
            "}\n"
            "void main() {\n"
            "    " F16(16, 16) " ma, mb;\n"
                               "    coopMatLoadNV(ma, a, 0, 16, false);\n"
                               "    coopMatLoadNV(mb, b, 0, 16, true);\n"
                               "    coopMatStoreNV(step(ma, mb, " F32(16, 16) "(1.0)), c, 0, 16, false);\n"
                                                                              "}\n";

static const char k_plain[] = "#version 450\n"
                              "layout(local_size_x = 64) in;\n"
                              "layout(std430, binding = 0) buffer X { float x[]; };\n"
                              "void main() { x[gl_GlobalInvocationID.x] *= 2.0; }\n";

/* ---------------------------------------------------------------- helpers */

typedef struct mod {
    uint32_t *w;
    size_t n;
} mod;

static mod compile(zarena *a, const char *name, const char *src, bool optimize, zvk_target t) {
    zvk_glsl_opts o = {.name = name, .optimize = optimize, .target = t};
    zvk_spirv sp;
    zdiag d = {0};
    cr_assert_eq(zvk_glsl_compile(a, src, strlen(src), &o, &sp, &d), ZOK, "%s: %s", name, d.msg);
    return (mod){sp.words, sp.n_words};
}

/* The first line of the validator's verdict, "" when valid. */
static bool validate(const mod *m, spv_target_env env, char *why, size_t n) {
    spv_context ctx = spvContextCreate(env);
    spv_const_binary_t bin = {m->w, m->n};
    spv_diagnostic diag = NULL;
    spv_result_t r = spvValidate(ctx, &bin, &diag);
    snprintf(why, n, "%s", diag && diag->error ? diag->error : r == SPV_SUCCESS ? "" : "invalid");
    why[strcspn(why, "\n")] = 0;
    spvDiagnosticDestroy(diag);
    spvContextDestroy(ctx);
    return r == SPV_SUCCESS;
}

/* Whether the linked SPIRV-Tools knows SPV_KHR_cooperative_matrix. */
static bool linked_knows_khr(void) {
    static const char text[] = "OpCapability CooperativeMatrixKHR\n";
    spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_3);
    spv_binary bin = NULL;
    spv_diagnostic diag = NULL;
    bool ok = spvTextToBinary(ctx, text, strlen(text), &bin, &diag) == SPV_SUCCESS;
    spvBinaryDestroy(bin);
    spvDiagnosticDestroy(diag);
    spvContextDestroy(ctx);
    return ok;
}

/* Validates a rewritten module by every validator at hand that knows KHR
 * cooperative matrix; returns how many did. */
static int validate_khr(const mod *m, const char *name) {
    int checked = 0;
    char why[512];
    if (linked_knows_khr()) {
        cr_expect(validate(m, SPV_ENV_VULKAN_1_3, why, sizeof why), "%s: SPIRV-Tools: %s", name, why);
        checked++;
    }
    const char *val = getenv("ZINC_SPIRV_VAL");
    if (val && *val) {
        const char *path = tu_tmp(name);
        cr_assert_eq(tu_write_file(path, m->w, m->n * 4), 0);
        char *log = NULL;
        int rc = tu_run(&log, "'%s' --target-env vulkan1.3 '%s'", val, path);
        cr_expect_eq(rc, 0, "%s: %s: %s", name, val, log ? log : "");
        free(log);
        checked++;
    }
    if (!checked)
        cr_log_info("%s: no validator here knows SPV_KHR_cooperative_matrix (set ZINC_SPIRV_VAL to a newer "
                    "spirv-val); checked by reading only",
                    name);
    return checked;
}

static mod rewrite_ok(zarena *a, const mod *in, const char *name) {
    mod out = {0};
    zdiag d = {0};
    cr_assert_eq(zspv_coopmat_nv_to_khr(in->w, in->n, a, &out.w, &out.n, &d), ZOK, "%s: %s", name, d.msg);
    return out;
}

static zstatus rewrite_err(zarena *a, const uint32_t *w, size_t n, zdiag *d) {
    uint32_t *out = (uint32_t *)1;
    size_t n_out = 99;
    zstatus s = zspv_coopmat_nv_to_khr(w, n, a, &out, &n_out, d);
    if (s) {
        cr_expect_null(out);
        cr_expect_eq(n_out, 0);
        cr_expect(strlen(d->msg) > 20, "a clear message, found '%s'", d->msg);
    }
    return s;
}

/* ------------------------------------------------------- reading a module */

/* Offset of the nth (from 0) instruction with opcode op, or 0. */
static size_t find_op(const mod *m, uint32_t op, int nth) {
    for (size_t off = 5; off < m->n && m->w[off] >> 16; off += m->w[off] >> 16)
        if ((m->w[off] & 0xffff) == op && nth-- == 0) return off;
    return 0;
}

/* Offset of the instruction defining id, or 0: among types (result at word
 * 1) and the typed instructions whose results the test looks up. */
static size_t def_of(const mod *m, uint32_t id) {
    static const uint32_t typed[] = {
        1,  41, 42, 43,  44,  46,   59,
        61, 80, 83, 115, 245, 4457, 4459}; /* OpUndef .. OpPhi, KHR load, multiply-add */
    for (size_t off = 5; off < m->n && m->w[off] >> 16; off += m->w[off] >> 16) {
        uint32_t op = m->w[off] & 0xffff, wc = m->w[off] >> 16;
        bool type = op == KHR_TYPE || (op >= 19 && op <= 39); /* OpTypeVoid .. OpTypeForwardPointer */
        bool value = false;
        for (size_t k = 0; k < sizeof typed / sizeof *typed; k++)
            value |= op == typed[k];
        if ((type && wc > 1 && m->w[off + 1] == id) || (value && wc > 2 && m->w[off + 2] == id)) return off;
    }
    return 0;
}

static int const_value(const mod *m, uint32_t id) {
    size_t at = def_of(m, id);
    return at && (m->w[at] & 0xffff) == OP_CONSTANT ? (int)m->w[at + 3] : -1;
}

/* The Use of a KHR matrix type, or -1. */
static int type_use(const mod *m, uint32_t type) {
    size_t at = def_of(m, type);
    return at && (m->w[at] & 0xffff) == KHR_TYPE && m->w[at] >> 16 == 7 ? const_value(m, m->w[at + 6]) : -1;
}

static int value_use(const mod *m, uint32_t value) {
    size_t at = def_of(m, value);
    return at ? type_use(m, m->w[at + 1]) : -1;
}

/* What the test reads off a rewritten module, independently of the rewrite. */
typedef struct kinfo {
    int nv_left; /* NV opcodes, capability, extension or spec-constant length */
    int khr_cap, khr_ext, length;
    int types[3];                               /* KHR matrix types by use */
    int n_loads, loads[8], n_stores, stores[8]; /* layouts */
    int n_muladd, muladd_bad;                   /* bad: an operand of the wrong use */
    uint32_t ops[8];                            /* cooperative matrix operands of each multiply-add */
} kinfo;

static void read_insn(const mod *m, size_t off, kinfo *k) {
    const uint32_t *i = m->w + off;
    uint32_t op = i[0] & 0xffff, wc = i[0] >> 16;
    k->nv_left += op >= NV_FIRST && op <= NV_LAST;
    k->nv_left += op == OP_CAPABILITY && i[1] == CAP_NV;
    k->nv_left += op == OP_EXTENSION && !strcmp((const char *)(i + 1), "SPV_NV_cooperative_matrix");
    k->nv_left += op == OP_SPEC_CONSTANT_OP && i[3] == NV_LAST;
    k->khr_cap += op == OP_CAPABILITY && i[1] == CAP_KHR;
    k->khr_ext += op == OP_EXTENSION && !strcmp((const char *)(i + 1), "SPV_KHR_cooperative_matrix");
    k->length += op == KHR_LENGTH || (op == OP_SPEC_CONSTANT_OP && i[3] == KHR_LENGTH);
    if (op == KHR_TYPE) {
        int u = type_use(m, i[1]);
        cr_assert(u >= 0 && u < 3, "KHR type %u has use %d", i[1], u);
        k->types[u]++;
    }
    if (op == KHR_LOAD && k->n_loads < 8) k->loads[k->n_loads++] = const_value(m, i[4]);
    if (op == KHR_STORE && k->n_stores < 8) k->stores[k->n_stores++] = const_value(m, i[3]);
    if (op == KHR_MULADD && k->n_muladd < 8) {
        k->ops[k->n_muladd++] = wc > 6 ? i[6] : 0;
        k->muladd_bad += value_use(m, i[3]) != 0 || value_use(m, i[4]) != 1 || value_use(m, i[5]) != 2 ||
                         type_use(m, i[1]) != 2;
    }
}

static kinfo read_module(const mod *m) {
    kinfo k = {0};
    cr_assert_eq(m->w[0], 0x07230203u);
    for (size_t off = 5; off < m->n; off += m->w[off] >> 16) {
        cr_assert(m->w[off] >> 16 && off + (m->w[off] >> 16) <= m->n, "word %zu: a bad word count", off);
        read_insn(m, off, &k);
    }
    return k;
}

static void expect_khr_only(const kinfo *k, const char *name) {
    cr_expect_eq(k->nv_left, 0, "%s: %d NV leftovers", name, k->nv_left);
    cr_expect_eq(k->khr_cap, 1, "%s", name);
    cr_expect_eq(k->khr_ext, 1, "%s", name);
    cr_expect_eq(k->muladd_bad, 0, "%s: a multiply-add operand of the wrong use", name);
}

/* Rewrites a module that should come out with one KHR type per use, checks
 * it (reading and validators) and returns what was read. */
static kinfo rewrite_checked(zarena *a, const mod *in, const char *name, mod *out) {
    *out = rewrite_ok(a, in, name);
    kinfo k = read_module(out);
    expect_khr_only(&k, name);
    cr_expect(k.types[0] == 1 && k.types[1] == 1 && k.types[2] == 1, "%s: types by use %d %d %d", name,
              k.types[0], k.types[1], k.types[2]);
    validate_khr(out, name);
    return k;
}

/* The tile at workgroup scope (VK_NV_cooperative_matrix2): 128 invocations
 * hold a 64x32 by 32x64 product. */
static const char k_workgroup[] =
    "#version 450\n"
    "#extension GL_NV_cooperative_matrix : require\n"
    "#extension GL_KHR_memory_scope_semantics : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
    "layout(local_size_x = 128) in;\n"
    "layout(std430, binding = 0) readonly buffer A { float16_t a[]; };\n"
    "layout(std430, binding = 1) buffer C { float c[]; };\n"
    "shared uvec4 bs[64 * 5];\n"
    "void main() {\n"
    "    fcoopmatNV<16, gl_ScopeWorkgroup, 64, 32> ma;\n"
    "    fcoopmatNV<16, gl_ScopeWorkgroup, 32, 64> mb;\n"
    "    fcoopmatNV<32, gl_ScopeWorkgroup, 64, 64> acc = fcoopmatNV<32, gl_ScopeWorkgroup, 64, 64>(0.0);\n"
    "    coopMatLoadNV(ma, a, 0, 32, false);\n"
    "    coopMatLoadNV(mb, bs, 0, 5, true);\n"
    "    acc = coopMatMulAddNV(ma, mb, acc);\n"
    "    coopMatStoreNV(acc, c, 0, 64, false);\n"
    "}\n";

/* The scope of a KHR matrix type, or -1. */
static int type_scope(const mod *m, uint32_t type) {
    size_t at = def_of(m, type);
    return at && (m->w[at] & 0xffff) == KHR_TYPE ? const_value(m, m->w[at + 3]) : -1;
}

static int count_ext(const mod *m, const char *name) {
    int n = 0;
    for (size_t off = 5; off < m->n; off += m->w[off] >> 16)
        n += (m->w[off] & 0xffff) == OP_EXTENSION && !strcmp((const char *)(m->w + off + 1), name);
    return n;
}

/* ------------------------------------------------------------------ tests */

Test(spv_coopmat, workgroup_scope_keeps_its_scope_and_declares_coopmat2) {
    zarena *a = zarena_new();
    mod in = compile(a, "workgroup.comp", k_workgroup, false, ZVK_TARGET_VK12);
    cr_assert(zspv_coopmat_workgroup_scope(in.w, in.n), "glslang's NV types carry the workgroup scope");
    mod sub = compile(a, "tile.comp", k_tile, false, ZVK_TARGET_VK12);
    cr_expect(!zspv_coopmat_workgroup_scope(sub.w, sub.n), "a subgroup-scope module is not workgroup scope");
    mod out;
    kinfo k = rewrite_checked(a, &in, "workgroup.spv", &out);
    cr_expect(k.n_muladd == 1 && k.n_loads == 2 && k.n_stores == 1);
    cr_assert(zspv_coopmat_workgroup_scope(out.w, out.n));
    for (size_t off = 5; off < out.n; off += out.w[off] >> 16)
        if ((out.w[off] & 0xffff) == KHR_TYPE)
            cr_expect_eq(type_scope(&out, out.w[off + 1]), 2, "KHR type %u keeps scope Workgroup",
                         out.w[off + 1]);
    zdiag d = {0};
    mod ext, twice;
    cr_assert_eq(zspv_add_coopmat2_extension(out.w, out.n, a, &ext.w, &ext.n, &d), ZOK, "%s", d.msg);
    cr_expect_eq(count_ext(&ext, "SPV_NV_cooperative_matrix2"), 1);
    cr_expect_eq(count_ext(&ext, "SPV_KHR_cooperative_matrix"), 1, "the KHR extension stays");
    cr_expect_eq(ext.n, out.n + 8, "one OpExtension of 8 words");
    kinfo k2 = read_module(&ext);
    expect_khr_only(&k2, "workgroup.spv + coopmat2");
    cr_assert_eq(zspv_add_coopmat2_extension(ext.w, ext.n, a, &twice.w, &twice.n, &d), ZOK, "%s", d.msg);
    cr_expect(twice.n == ext.n && !memcmp(twice.w, ext.w, ext.n * 4), "declared once, however often added");
    uint32_t junk[3] = {1, 2, 3};
    cr_expect_eq(zspv_add_coopmat2_extension(junk, 3, a, &twice.w, &twice.n, &d), ZE_FORMAT);
    zarena_free(a);
}

/* ZINC_CM_TENSOR=1 (backend/spv_tensor.c): the workgroup-scope loads from
 * VRAM as tensor-addressed loads. k_workgroup loads A from a buffer
 * (row-major) and B from shared memory; k_direct loads both from buffers of
 * uvec4, B column-major, as matmul_cm.glsl's CM_DIRECT does. */
static const char k_direct[] =
    "#version 450\n"
    "#extension GL_NV_cooperative_matrix : require\n"
    "#extension GL_KHR_memory_scope_semantics : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
    "layout(local_size_x = 128) in;\n"
    "layout(std430, binding = 0) readonly buffer A { uvec4 a[]; };\n"
    "layout(std430, binding = 1) readonly buffer B { uvec4 b[]; };\n"
    "layout(std430, binding = 2) buffer C { float c[]; };\n"
    "layout(push_constant) uniform P { uint k; } p;\n"
    "void main() {\n"
    "    fcoopmatNV<16, gl_ScopeWorkgroup, 64, 32> ma;\n"
    "    fcoopmatNV<16, gl_ScopeWorkgroup, 32, 64> mb;\n"
    "    fcoopmatNV<32, gl_ScopeWorkgroup, 64, 64> acc = fcoopmatNV<32, gl_ScopeWorkgroup, 64, 64>(0.0);\n"
    "    coopMatLoadNV(ma, a, gl_WorkGroupID.x * 4u, p.k / 8u, false);\n"
    "    coopMatLoadNV(mb, b, 0, p.k / 8u, true);\n"
    "    acc = coopMatMulAddNV(ma, mb, acc);\n"
    "    coopMatStoreNV(acc, c, 0, 64, false);\n"
    "}\n";

/* The module's instructions of opcode op: how many, and the offset of the last. */
static int count_op(const mod *m, uint32_t op, size_t *last) {
    int n = 0;
    for (size_t off = 5; off < m->n; off += m->w[off] >> 16)
        if ((m->w[off] & 0xffff) == op) n++, *last = off;
    return n;
}

/* The instruction (offset) whose result is id: a value's second word, a type's first. */
static size_t result_at(const mod *m, uint32_t id) {
    for (size_t off = 5; off < m->n; off += m->w[off] >> 16) {
        uint32_t op = m->w[off] & 0xffff, wc = m->w[off] >> 16;
        bool type = (op >= 19 && op <= 39) || op == KHR_TYPE || op == 5370 || op == 5371;
        bool meta = (op >= 2 && op <= 17) || (op >= 71 && op <= 74) || op == 330 || op == 331 || op == 332 ||
                    op == 5632 || op == 5633; /* debug, mode and annotation instructions: no result */
        if (meta) continue;
        if ((type && wc >= 2 && m->w[off + 1] == id) || (!type && wc >= 3 && m->w[off + 2] == id)) return off;
    }
    return 0;
}

static mod tensor_rewrite(zarena *a, const char *name, const char *src, int want) {
    mod in = compile(a, name, src, false, ZVK_TARGET_VK12), k, ext, out;
    zdiag d = {0};
    int n = -1;
    cr_assert_eq(zspv_coopmat_nv_to_khr(in.w, in.n, a, &k.w, &k.n, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zspv_add_coopmat2_extension(k.w, k.n, a, &ext.w, &ext.n, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zspv_coopmat_tensor_loads(ext.w, ext.n, a, &out.w, &out.n, &n, &d), ZOK, "%s: %s", name, d.msg);
    cr_expect_eq(n, want, "%s: %d loads rewritten, expected %d", name, n, want);
    cr_expect_eq(out.w[1], 0x00010600u, "%s: SPIR-V 1.6", name);
    size_t last = 0;
    cr_expect_eq(count_op(&out, 5367, &last), want, "%s: OpCooperativeMatrixLoadTensorNV", name);
    cr_expect_eq(count_op(&out, KHR_LOAD, &last), 2 - want, "%s: the other loads stay KHR", name);
    cr_expect_eq(count_ext(&out, "SPV_NV_tensor_addressing"), 1);
    cr_expect_eq(count_ext(&out, "SPV_NV_cooperative_matrix2"), 1);
    int caps = 0;
    for (size_t off = 5; off < out.n; off += out.w[off] >> 16)
        caps += (out.w[off] & 0xffff) == OP_CAPABILITY && (out.w[off + 1] == 5439 || out.w[off + 1] == 5433);
    cr_expect_eq(caps, 2, "%s: TensorAddressingNV and CooperativeMatrixTensorAddressingNV", name);
    /* every tensor load: its layout made by SetStride from SetDimension from CreateTensorLayout, ids inside the bound */
    for (size_t off = 5; off < out.n; off += out.w[off] >> 16) {
        uint32_t wc = out.w[off] >> 16;
        cr_assert(wc && off + wc <= out.n);
        if ((out.w[off] & 0xffff) != 5367) continue;
        cr_expect(wc == 8 || wc == 9, "%s: a tensor load of %u words", name, wc);
        size_t st = result_at(&out, out.w[off + 5]);
        cr_assert(st && (out.w[st] & 0xffff) == 5374, "%s: the load's layout is set by OpTensorLayoutSetStrideNV", name);
        size_t dm = result_at(&out, out.w[st + 3]);
        cr_assert(dm && (out.w[dm] & 0xffff) == 5373, "%s: ... from OpTensorLayoutSetDimensionNV", name);
        size_t cr = result_at(&out, out.w[dm + 3]);
        cr_assert(cr && (out.w[cr] & 0xffff) == 5372, "%s: ... from OpCreateTensorLayoutNV", name);
        size_t ob = result_at(&out, out.w[off + 4]);
        cr_expect(ob && (out.w[ob] & 0xffff) == 1 && out.w[ob + 1] == out.w[off + 1], "%s: the Object is an OpUndef of the matrix type", name);
        cr_expect_eq(out.w[off + 7], wc == 9 ? 1u : 0u, "%s: a view exactly for a column-major load", name);
        for (uint32_t i = 1; i < wc; i++)
            if (i != 6 && i != 7) cr_expect_lt(out.w[off + i], out.w[3], "%s: an id past the bound", name);
    }
    return out;
}

Test(spv_coopmat, tensor_loads_replace_workgroup_loads_from_buffers) {
    zarena *a = zarena_new();
    tensor_rewrite(a, "workgroup.comp", k_workgroup, 1); /* the shared-memory load stays */
    mod out = tensor_rewrite(a, "direct.comp", k_direct, 2);
    size_t last = 0;
    cr_expect_eq(count_op(&out, 5377, &last), 1, "one transposing view, for the column-major load");
    cr_expect_eq(count_op(&out, 5371, &last), 1, "one view type");
    cr_expect_eq(count_op(&out, 5370, &last), 1, "one layout type");
    /* a module without workgroup-scope loads from buffers comes back word for word */
    mod sub = compile(a, "tile.comp", k_tile, false, ZVK_TARGET_VK12), k, same;
    zdiag d = {0};
    int n = -1;
    cr_assert_eq(zspv_coopmat_nv_to_khr(sub.w, sub.n, a, &k.w, &k.n, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zspv_coopmat_tensor_loads(k.w, k.n, a, &same.w, &same.n, &n, &d), ZOK, "%s", d.msg);
    cr_expect(n == 0 && same.n == k.n && !memcmp(same.w, k.w, k.n * 4));
    uint32_t junk[3] = {1, 2, 3};
    cr_expect_eq(zspv_coopmat_tensor_loads(junk, 3, a, &same.w, &same.n, &n, &d), ZE_FORMAT);
    zarena_free(a);
}

Test(spv_coopmat, tile_gets_one_type_per_use_and_its_layouts) {
    zarena *a = zarena_new();
    mod in = compile(a, "tile.comp", k_tile, false, ZVK_TARGET_VK12);
    char why[512];
    cr_assert(validate(&in, SPV_ENV_VULKAN_1_2, why, sizeof why), "NV input: %s", why);
    cr_assert(zspv_uses_coopmat_nv(in.w, in.n));
    mod out;
    kinfo k = rewrite_checked(a, &in, "tile.spv", &out);
    cr_expect(k.n_loads == 2 && k.loads[0] == 0 && k.loads[1] == 1, "loads: row-major A, column-major B");
    cr_expect(k.n_stores == 2 && k.stores[0] == 0 && k.stores[1] == 1, "stores: row-major, column-major");
    cr_expect(k.n_muladd == 1 && k.ops[0] == 0, "float operands carry no signedness");
    cr_expect_geq(k.length, 1, ".length() became the KHR length");
    cr_expect(out.w[3] >= in.w[3] && out.w[3] <= in.w[3] + 3, "bound %u -> %u: only Use/layout constants",
              in.w[3], out.w[3]);
    cr_expect(!zspv_uses_coopmat_nv(out.w, out.n));
    zarena_free(a);
}

Test(spv_coopmat, existing_int_constants_serve_as_uses_and_layouts) {
    zarena *a = zarena_new();
    mod in = compile(a, "tile-consts.comp", k_tile_consts, false, ZVK_TARGET_VK12);
    mod out;
    rewrite_checked(a, &in, "tile-consts.spv", &out);
    cr_expect_eq(out.w[3], in.w[3], "no new id: the module's int 0, 1, 2 are used");
    cr_expect_eq(out.n, in.n + 3, "one word more per type (its use); the names fit the same words");
    zarena_free(a);
}

/* One fp16 16x16 type serves A and B: split in two KHR types, at -O0 (loads
 * through function variables) and optimized (phis), SPIR-V 1.5 and 1.6. */
Test(spv_coopmat, one_type_as_a_and_b_is_split) {
    zarena *a = zarena_new();
    for (int v = 0; v < 4; v++) {
        char name[32];
        snprintf(name, sizeof name, "loop-%s-%s.spv", v & 1 ? "O" : "O0", v & 2 ? "vk13" : "vk12");
        mod in = compile(a, name, k_loop, v & 1, v & 2 ? ZVK_TARGET_VK13 : ZVK_TARGET_VK12);
        char why[512];
        cr_assert(validate(&in, v & 2 ? SPV_ENV_VULKAN_1_3 : SPV_ENV_VULKAN_1_2, why, sizeof why), "%s: %s",
                  name, why);
        mod out;
        kinfo k = rewrite_checked(a, &in, name, &out);
        cr_expect(k.n_loads == 2 && k.loads[0] == 0 && k.loads[1] == 1, "%s", name);
        cr_expect_eq(k.n_muladd, 1, "%s", name);
        cr_expect_gt(out.w[3], in.w[3], "%s: the clones take new ids", name);
        /* The split type's clone has the original's component type and shape. */
        size_t by_use[3] = {0};
        for (int t = 0; find_op(&out, KHR_TYPE, t); t++) {
            size_t at = find_op(&out, KHR_TYPE, t);
            by_use[type_use(&out, out.w[at + 1])] = at;
        }
        cr_expect(by_use[0] && by_use[1] && !memcmp(out.w + by_use[0] + 2, out.w + by_use[1] + 2, 4 * 4),
                  "%s: the A and B types differ in more than their use", name);
    }
    zarena_free(a);
}

Test(spv_coopmat, int8_multiply_add_says_which_operands_are_signed) {
    zarena *a = zarena_new();
    mod in = compile(a, "int8.comp", k_int8, true, ZVK_TARGET_VK12);
    mod out;
    kinfo k = rewrite_checked(a, &in, "int8.spv", &out);
    cr_expect(k.n_muladd == 1 && k.ops[0] == 0xf, "signed A, B, C and result: found 0x%x", k.ops[0]);
    zarena_free(a);
}

static void expect_refusal(zarena *a, const char *name, const char *src, bool optimize, const char *what) {
    mod in = compile(a, name, src, optimize, ZVK_TARGET_VK12);
    zdiag d = {0};
    cr_expect_eq(rewrite_err(a, in.w, in.n, &d), ZE_UNSUPPORTED, "%s: %s", name, d.msg);
    cr_expect(strstr(d.msg, what), "%s: expected '%s' in: %s", name, what, d.msg);
    cr_log_info("%s: %s", name, d.msg);
}

Test(spv_coopmat, what_khr_cannot_say_is_refused_clearly) {
    zarena *a = zarena_new();
    expect_refusal(a, "same-value.comp", k_same_value, false, "(A of the multiply-add");
    expect_refusal(a, "same-value-O.comp", k_same_value, true, "(B of the");
    expect_refusal(a, "acc-to-a.comp", k_acc_to_a, true, "the accumulator of the");
    expect_refusal(a, "split-length.comp", k_split_length, false, "the length of cooperative matrix type");
    expect_refusal(a, "function.comp", k_function, false, "function type");
    /* The same helper, inlined by the optimizer, is fine. */
    mod in = compile(a, "function-O.comp", k_function, true, ZVK_TARGET_VK12);
    mod out;
    rewrite_checked(a, &in, "function-O.spv", &out);
    zarena_free(a);
}

Test(spv_coopmat, module_without_nv_comes_back_word_for_word) {
    zarena *a = zarena_new();
    for (int o = 0; o < 2; o++) {
        mod in = compile(a, "plain.comp", k_plain, o, ZVK_TARGET_VK12);
        cr_assert(!zspv_uses_coopmat_nv(in.w, in.n));
        mod out = rewrite_ok(a, &in, "plain.spv");
        cr_expect_eq(out.n, in.n);
        cr_expect(out.w != in.w && !memcmp(out.w, in.w, in.n * 4), "byte-identical copy");
    }
    zarena_free(a);
}

/* ---------------------------------------------------------------- hostile */

static mod copy_of(zarena *a, const mod *m) {
    mod c = {zarena_array(a, m->n, 4), m->n};
    cr_assert_not_null(c.w);
    memcpy(c.w, m->w, m->n * 4);
    return c;
}

static void expect_format(zarena *a, const mod *m, const char *what) {
    zdiag d = {0};
    cr_expect_eq(rewrite_err(a, m->w, m->n, &d), ZE_FORMAT, "expected '%s', found: %s", what, d.msg);
    cr_expect(strstr(d.msg, what), "expected '%s' in: %s", what, d.msg);
}

Test(spv_coopmat, hostile_headers_and_word_counts) {
    zarena *a = zarena_new();
    mod in = compile(a, "tile.comp", k_tile, false, ZVK_TARGET_VK12);
    zdiag d = {0};
    cr_expect_eq(rewrite_err(a, NULL, 0, &d), ZE_FORMAT);
    cr_expect_eq(rewrite_err(a, in.w, 4, &d), ZE_FORMAT);
    cr_expect(strstr(d.msg, "5-word header"), "%s", d.msg);
    mod m = copy_of(a, &in);
    m.w[0] = 0x03022307;
    expect_format(a, &m, "other byte order");
    m.w[0] = 0xdeadbeef;
    expect_format(a, &m, "magic number");
    m = copy_of(a, &in);
    m.w[3] = 0;
    expect_format(a, &m, "bound of 0");
    m.w[3] = 0xffffffff;
    cr_expect_eq(rewrite_err(a, m.w, m.n, &d), ZE_UNSUPPORTED, "%s", d.msg);
    m = copy_of(a, &in);
    m.w[5] &= 0xffff; /* the first instruction's word count */
    expect_format(a, &m, "word count of 0");
    m = copy_of(a, &in);
    size_t last = find_op(&m, 56 /* OpFunctionEnd */, 0);
    m.w[last] = 9u << 16 | 56;
    expect_format(a, &m, "runs past the end");
    m = copy_of(a, &in);
    size_t t = find_op(&m, NV_FIRST, 0);
    m.w[t + 1] = in.w[3] + 5;
    expect_format(a, &m, "not within the module's id bound");
    zarena_free(a);
}

Test(spv_coopmat, hostile_operands) {
    zarena *a = zarena_new();
    mod in = compile(a, "tile.comp", k_tile, false, ZVK_TARGET_VK12);
    mod m = copy_of(a, &in);
    size_t ld = find_op(&m, 5359 /* OpCooperativeMatrixLoadNV */, 0);
    m.w[ld + 5] = m.w[ld + 4]; /* column-major := the stride, not a boolean constant */
    zdiag d = {0};
    cr_expect_eq(rewrite_err(a, m.w, m.n, &d), ZE_UNSUPPORTED, "%s", d.msg);
    cr_expect(strstr(d.msg, "not a boolean constant"), "%s", d.msg);
    m = copy_of(a, &in);
    size_t mul = find_op(&m, 5361 /* OpCooperativeMatrixMulAddNV */, 0);
    m.w[mul] = 5u << 16 | 5361;
    m.w[mul + 5] = 1u << 16 | 0; /* keep the stream aligned: an OpNop where C was */
    expect_format(a, &m, "OpCooperativeMatrixMulAddNV of 5 words");
    zarena_free(a);
}

/* A word to mutate: half the time one inside an NV instruction, where the
 * rewrite reads operands, else any word past the header. */
static size_t pick_word(const mod *m, tu_rng *r) {
    if (tu_next(r) & 1) {
        int nth = (int)(tu_next(r) % 8);
        size_t at = find_op(m, NV_FIRST + (uint32_t)(tu_next(r) % 5), nth);
        if (at) return at + tu_next(r) % (m->w[at] >> 16);
    }
    return 5 + tu_next(r) % (m->n - 5);
}

static uint32_t mutate(uint32_t word, uint32_t bound, tu_rng *r) {
    uint64_t x = tu_next(r);
    switch (x & 3) {
    case 0: return (uint32_t)(x >> 8) % (bound + 4); /* another id, or just past the bound */
    case 1: return (uint32_t)(x >> 32);
    case 2: return word ^ 1u << (x >> 59);
    default: return (word & 0xffff) | (uint32_t)(x >> 40) % 12 << 16; /* another word count */
    }
}

/* Truncations at every length and random words: an answer, never a crash
 * (the sanitizer build runs this too). */
Test(spv_coopmat, truncated_and_mutated_modules) {
    zarena *a = zarena_new();
    const mod ins[] = {compile(a, "loop.comp", k_loop, true, ZVK_TARGET_VK12),
                       compile(a, "tile.comp", k_tile, false, ZVK_TARGET_VK12)};
    int refused = 0, runs = 0;
    tu_rng r = tu_rng_seed(20261201);
    for (int v = 0; v < 2; v++) {
        const mod *in = &ins[v];
        for (size_t n = 0; n < in->n; n++, runs++) {
            zdiag d = {0};
            zarena *b = zarena_new();
            refused += rewrite_err(b, in->w, n, &d) != ZOK;
            zarena_free(b);
        }
        for (int it = 0; it < 2000; it++, runs++) {
            zarena *b = zarena_new();
            mod m = copy_of(b, in);
            for (int k = 0, nk = 1 + (int)(tu_next(&r) % 3); k < nk; k++) {
                size_t at = pick_word(&m, &r);
                m.w[at] = mutate(m.w[at], in->w[3], &r);
            }
            zdiag d = {0};
            refused += rewrite_err(b, m.w, m.n, &d) != ZOK;
            zarena_free(b);
        }
    }
    cr_log_info("%d of %d truncated or mutated modules refused", refused, runs);
    cr_expect_gt(refused, 0);
    zarena_free(a);
}
