/* The integer dot-product rewrite (backend/spv_idot.c) on kernels compiled
 * by shaderc from backend/glsl/idot.glsl: what the rewritten module holds,
 * that the linked SPIRV-Tools validates it, that it runs on the device
 * (llvmpipe in CI: functional, not accelerated) and matches both the CPU
 * and the plain-GLSL fallback element for element, what is refused, and
 * hostile modules. */
#include <criterion/criterion.h>
#include <spirv-tools/libspirv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/codegen.h"
#include "backend/shaderc.h"
#include "backend/spv_idot.h"
#include "backend/vk.h"
#include "testutil.h"

/* Opcodes and operands from the SPIR-V registry, written out so the test
 * checks the rewrite against the spec rather than its own table. */
enum {
    OP_NAME = 5,
    OP_EXTENSION = 10,
    OP_CAPABILITY = 17,
    OP_SDOT = 4450,
    OP_SDOT_ACC_SAT = 4453,
    CAP_DOT = 6019,
    CAP_4X8 = 6018,
};

/* out[3i] = zdot4(a, b, c), out[3i+1] = zdot4sat(a, b, c), out[3i+2] =
 * zdot4(a, b, 0), over n elements (push constant); the rest stays poisoned. */
static const char kernel_main[] = "layout(local_size_x = 64) in;\n"
                                  "layout(std430, binding = 0) readonly buffer A { uint a[]; };\n"
                                  "layout(std430, binding = 1) readonly buffer B { uint b[]; };\n"
                                  "layout(std430, binding = 2) readonly buffer C { int c[]; };\n"
                                  "layout(std430, binding = 3) writeonly buffer O { int o[]; };\n"
                                  "layout(push_constant) uniform P { uint n; } p;\n"
                                  "void main() {\n"
                                  "    uint i = gl_GlobalInvocationID.x;\n"
                                  "    if (i >= p.n) return;\n"
                                  "    o[3u * i] = zdot4(a[i], b[i], c[i]);\n"
                                  "    o[3u * i + 1u] = zdot4sat(a[i], b[i], c[i]);\n"
                                  "    o[3u * i + 2u] = zdot4(a[i], b[i], 0);\n"
                                  "}\n";

static const char *kernel_src(zarena *a) {
    const char *lib = zcg_glsl("idot");
    cr_assert_not_null(lib, "backend/glsl/idot.glsl is not embedded");
    return zarena_printf(a, "#version 450\n%s\n%s", lib, kernel_main);
}

typedef struct mod {
    const uint32_t *w;
    size_t n;
} mod;

static mod compile(zarena *a, const char *src, bool int_dot, bool optimize) {
    zvk_glsl_opts o = {.name = "idot.comp", .optimize = optimize, .int_dot = int_dot};
    zvk_spirv sp;
    zdiag d = {0};
    cr_assert_eq(zvk_glsl_compile(a, src, strlen(src), &o, &sp, &d), ZOK, "%s", d.msg);
    return (mod){sp.words, sp.n_words};
}

/* How many instructions have opcode op (and, for a capability, operand v). */
static int count(const mod *m, uint32_t op, uint32_t v) {
    int k = 0;
    for (size_t off = 5; off < m->n;) {
        uint32_t wc = m->w[off] >> 16;
        cr_assert(wc > 0 && wc <= m->n - off, "malformed output at word %zu", off);
        if ((m->w[off] & 0xffff) == op && (op != OP_CAPABILITY || m->w[off + 1] == v)) k++;
        off += wc;
    }
    return k;
}

static bool has_ext(const mod *m) {
    for (size_t off = 5; off < m->n; off += m->w[off] >> 16)
        if ((m->w[off] & 0xffff) == OP_EXTENSION &&
            !strcmp((const char *)(m->w + off + 1), "SPV_KHR_integer_dot_product"))
            return true;
    return false;
}

static bool validate(const mod *m, char *why, size_t n) {
    spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_2);
    spv_const_binary_t bin = {m->w, m->n};
    spv_diagnostic diag = NULL;
    spv_result_t r = spvValidate(ctx, &bin, &diag);
    snprintf(why, n, "%s", diag && diag->error ? diag->error : r == SPV_SUCCESS ? "" : "invalid");
    why[strcspn(why, "\n")] = 0;
    spvDiagnosticDestroy(diag);
    spvContextDestroy(ctx);
    return r == SPV_SUCCESS;
}

Test(spv_idot, rewrite_adds_the_instructions_and_validates) {
    zarena *a = zarena_new();
    const char *src = kernel_src(a);
    mod plain = compile(a, src, false, true), dot = compile(a, src, true, true);
    cr_expect_eq(count(&plain, OP_SDOT, 0) + count(&plain, OP_SDOT_ACC_SAT, 0), 0);
    cr_expect_eq(count(&dot, OP_SDOT, 0), 1, "zdot4's body: one OpSDot");
    cr_expect_eq(count(&dot, OP_SDOT_ACC_SAT, 0), 1, "zdot4sat's body: one OpSDotAccSat");
    cr_expect_eq(count(&dot, OP_CAPABILITY, CAP_DOT), 1);
    cr_expect_eq(count(&dot, OP_CAPABILITY, CAP_4X8), 1);
    cr_expect(has_ext(&dot), "no OpExtension SPV_KHR_integer_dot_product");
    char why[512];
    cr_expect(validate(&plain, why, sizeof why), "fallback module: %s", why);
    cr_expect(validate(&dot, why, sizeof why), "rewritten module: %s", why);
    /* A second pass finds the same markers and adds no second capability. */
    uint32_t *w2;
    size_t n2;
    int k;
    zdiag d = {0};
    cr_assert_eq(zspv_int_dot(dot.w, dot.n, a, &w2, &n2, &k, &d), ZOK, "%s", d.msg);
    mod again = {w2, n2};
    cr_expect_eq(k, 2);
    cr_expect_eq(count(&again, OP_CAPABILITY, CAP_DOT), 1);
    cr_expect(validate(&again, why, sizeof why), "rewritten twice: %s", why);
    zarena_free(a);
}

Test(spv_idot, module_without_markers_comes_back_word_for_word) {
    zarena *a = zarena_new();
    static const char src[] =
        "#version 450\nlayout(local_size_x = 1) in;\n"
        "layout(std430, binding = 0) buffer B { uint b[]; };\nvoid main() { b[0] = 1u; }\n";
    mod m = compile(a, src, false, true);
    uint32_t *w;
    size_t n;
    int k = -1;
    zdiag d = {0};
    cr_assert_eq(zspv_int_dot(m.w, m.n, a, &w, &n, &k, &d), ZOK, "%s", d.msg);
    cr_expect_eq(k, 0);
    cr_assert_eq(n, m.n);
    cr_expect_eq(memcmp(w, m.w, 4 * n), 0);
    /* Asking for the rewrite of a kernel with no marker is a bug of the caller. */
    zvk_glsl_opts o = {.name = "nomark.comp", .int_dot = true};
    zvk_spirv sp;
    cr_expect_eq(zvk_glsl_compile(a, src, strlen(src), &o, &sp, &d), ZE_INTERNAL);
    cr_expect(strstr(d.msg, "no zdot4 marker"), "%s", d.msg);
    zarena_free(a);
}

Test(spv_idot, wrong_signature_and_hostile_modules_are_one_clear_error) {
    zarena *a = zarena_new();
    static const char src[] = "#version 450\nlayout(local_size_x = 1) in;\n"
                              "layout(std430, binding = 0) buffer B { int b[]; };\n"
                              "int zdot4(int x, float y, int acc) { return acc + x + int(y); }\n"
                              "void main() { b[0] = zdot4(b[1], 2.0, b[2]); }\n";
    zvk_glsl_opts o = {.name = "bad.comp", .int_dot = true};
    zvk_spirv sp;
    zdiag d = {0};
    cr_expect_eq(zvk_glsl_compile(a, src, strlen(src), &o, &sp, &d), ZE_UNSUPPORTED);
    cr_expect(strstr(d.msg, "expected int(uint, uint, int)") && !strchr(d.msg, '\n'), "%s", d.msg);

    mod good = compile(a, kernel_src(a), false, false);
    uint32_t *w;
    size_t n;
    int k;
    cr_expect_eq(zspv_int_dot(good.w, 3, a, &w, &n, &k, &d), ZE_FORMAT);
    cr_expect(strstr(d.msg, "header"), "%s", d.msg);
    uint32_t *bad = zarena_array(a, good.n, 4);
    memcpy(bad, good.w, 4 * good.n);
    bad[0] ^= 1;
    cr_expect_eq(zspv_int_dot(bad, good.n, a, &w, &n, &k, &d), ZE_FORMAT);
    cr_expect(strstr(d.msg, "magic"), "%s", d.msg);
    /* every truncation is refused or read safely; none crashes */
    for (size_t cut = 5; cut < good.n; cut += 7) {
        zstatus s = zspv_int_dot(good.w, cut, a, &w, &n, &k, &d);
        cr_expect(s == ZOK || s == ZE_FORMAT || s == ZE_UNSUPPORTED, "cut at %zu: %s", cut, d.msg);
    }
    /* an instruction claiming more words than the module has */
    memcpy(bad, good.w, 4 * good.n);
    bad[5] = (bad[5] & 0xffff) | 0xffffu << 16;
    cr_expect_eq(zspv_int_dot(bad, good.n, a, &w, &n, &k, &d), ZE_FORMAT);
    zarena_free(a);
}

/* ---- on the device ------------------------------------------------------- */

static int32_t sbyte(uint32_t w, int i) {
    return (int32_t)(int8_t)(uint8_t)(w >> (8 * i));
}
static int32_t dot4(uint32_t a, uint32_t b) {
    int32_t s = 0;
    for (int i = 0; i < 4; i++)
        s += sbyte(a, i) * sbyte(b, i);
    return s;
}
static int32_t sat_add(int32_t acc, int32_t s) {
    int64_t r = (int64_t)acc + s;
    return r > INT32_MAX ? INT32_MAX : r < INT32_MIN ? INT32_MIN : (int32_t)r;
}

/* Fresh data every run, from a seed that is logged (ZINC_TEST_SEED replays it). */
static uint64_t test_seed(void) {
    const char *s = getenv("ZINC_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    cr_log_info("seed %llu", (unsigned long long)seed);
    return seed;
}

typedef struct rig {
    zvk_instance inst;
    zvk_device dev;
} rig;

/* Runs module m over n elements; out gets 3n results. */
static void run(rig *g, const mod *m, const uint32_t *a, const uint32_t *b, const int32_t *c, uint32_t n,
                int32_t *out, uint32_t pad) {
    zdiag d = {0};
    zvk_pipeline p;
    zvk_pipeline_desc pd = {.name = "idot", .spirv = m->w, .n_words = m->n, .n_buffers = 4, .push_size = 4};
    cr_assert_eq(zvk_pipeline_create(&g->dev, &pd, &p, &d), ZOK, "%s", d.msg);
    zvk_buffer buf[4];
    size_t bytes[4] = {4ull * n, 4ull * n, 4ull * n, 4ull * (3 * n + pad)};
    const void *src[3] = {a, b, c};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(zvk_buffer_create(&g->dev, bytes[i], ZVK_MEM_DEVICE, "idot", &buf[i], &d), ZOK, "%s",
                     d.msg);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(zvk_upload(&g->dev, &buf[i], 0, src[i], bytes[i], &d), ZOK, "%s", d.msg);
    for (uint32_t i = 0; i < 3 * n + pad; i++)
        out[i] = 0x7badbeef; /* poison */
    cr_assert_eq(zvk_upload(&g->dev, &buf[3], 0, out, bytes[3], &d), ZOK, "%s", d.msg);
    VkDescriptorPool pool;
    VkDescriptorSet set;
    zvk_binding bind[4] = {{&buf[0], 0, 0}, {&buf[1], 0, 0}, {&buf[2], 0, 0}, {&buf[3], 0, 0}};
    cr_assert_eq(zvk_desc_pool_create(&g->dev, 1, 4, &pool, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_desc_set(&g->dev, pool, &p, bind, 4, &set, &d), ZOK, "%s", d.msg);
    zvk_cmd cmd;
    cr_assert_eq(zvk_cmd_begin(&g->dev, &cmd, &d), ZOK, "%s", d.msg);
    zvk_cmd_dispatch(&cmd, &p, set, &n, (n + 63) / 64, 1, 1);
    cr_assert_eq(zvk_cmd_run(&g->dev, &cmd, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_download(&g->dev, &buf[3], 0, out, bytes[3], &d), ZOK, "%s", d.msg);
    zvk_desc_pool_destroy(&g->dev, &pool);
    for (int i = 0; i < 4; i++)
        zvk_buffer_destroy(&g->dev, &buf[i]);
    zvk_pipeline_destroy(&g->dev, &p);
}

/* Fresh random words every run (bytes drawn to include -128 and 127), and
 * accumulators near both ends of the int range so that zdot4sat saturates
 * where zdot4 wraps. */
Test(spv_idot, runs_on_the_device_and_matches_the_fallback, .timeout = 120) {
    rig g = {0};
    zdiag d = {0};
    uint32_t idx;
    cr_assert_eq(zvk_instance_create(&g.inst, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_select_device(&g.inst, NULL, &idx, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_device_create(&g.inst, idx, &g.dev, &d), ZOK, "%s", d.msg);
    if (!g.dev.prof.int_dot) {
        cr_log_warn("%s has no shaderIntegerDotProduct: the rewritten kernel is not run", g.dev.prof.name);
        zvk_device_destroy(&g.dev);
        zvk_instance_destroy(&g.inst);
        return;
    }
    zarena *a = zarena_new();
    const char *src = kernel_src(a);
    mod plain = compile(a, src, false, true), dot = compile(a, src, true, true);
    enum { N = 4099, PAD = 29 };
    uint32_t *x = malloc(4 * N), *y = malloc(4 * N);
    int32_t *c = malloc(4 * N), *o1 = malloc(4 * (3 * N + PAD)), *o2 = malloc(4 * (3 * N + PAD));
    cr_assert(x && y && c && o1 && o2);
    uint64_t seed = test_seed();
    tu_rng r = tu_rng_seed(seed);
    for (uint32_t i = 0; i < N; i++) {
        x[i] = (uint32_t)tu_next(&r);
        y[i] = i % 7 == 0 ? 0x80808080u : i % 7 == 1 ? 0x7f7f7f7fu : (uint32_t)tu_next(&r);
        int64_t base = i % 3 == 0 ? INT32_MAX - 40000 : i % 3 == 1 ? INT32_MIN + 40000 : 0;
        c[i] = (int32_t)(base + (int64_t)(tu_next(&r) % 80001) - 40000);
    }
    run(&g, &dot, x, y, c, N, o1, PAD);
    run(&g, &plain, x, y, c, N, o2, PAD);
    int sat = 0;
    for (uint32_t i = 0; i < N; i++) {
        int32_t s = dot4(x[i], y[i]), wrap = (int32_t)(uint32_t)((uint32_t)c[i] + (uint32_t)s);
        int32_t want[3] = {wrap, sat_add(c[i], s), s};
        sat += want[1] != wrap;
        for (int k = 0; k < 3; k++) {
            cr_assert_eq(o1[3 * i + k], want[k], "seed %llu: element %u.%d: OpSDot kernel %d, expected %d",
                         (unsigned long long)seed, i, k, o1[3 * i + k], want[k]);
            cr_assert_eq(o2[3 * i + k], want[k], "seed %llu: element %u.%d: GLSL fallback %d, expected %d",
                         (unsigned long long)seed, i, k, o2[3 * i + k], want[k]);
        }
    }
    for (uint32_t i = 3 * N; i < 3 * N + PAD; i++)
        cr_assert(o1[i] == 0x7badbeef && o2[i] == 0x7badbeef, "written past the end at %u", i);
    cr_expect_gt(sat, 0, "no accumulator saturated: the test lost its point");
    free(x), free(y), free(c), free(o1), free(o2);
    zarena_free(a);
    zvk_device_destroy(&g.dev);
    cr_expect_eq(g.inst.validation_errors, 0, "validation: %s", g.inst.last_validation_error);
    zvk_instance_destroy(&g.inst);
}
