/* zvk on a real Vulkan device (llvmpipe in CI): profiles, shaderc, buffers,
 * pipelines with push and specialization constants, timestamps, limits. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/calib.h"
#include "backend/shaderc.h"
#include "backend/vk.h"
#include "testutil.h"

/* ---------------------------------------------------------------- helpers */

typedef struct env {
    zvk_instance inst;
    zvk_device dev;
    zarena *arena;
} env;

static void env_open(env *e) {
    zdiag d = {0};
    memset(e, 0, sizeof *e);
    e->arena = zarena_new();
    cr_assert_not_null(e->arena);
    cr_assert_eq(zvk_instance_create(&e->inst, &d), ZOK, "instance: %s", d.msg);
    uint32_t idx;
    cr_assert_eq(zvk_select_device(&e->inst, NULL, &idx, &d), ZOK, "select: %s", d.msg);
    cr_assert_eq(zvk_device_create(&e->inst, idx, &e->dev, &d), ZOK, "device: %s", d.msg);
}

static void env_close(env *e) {
    zvk_device_destroy(&e->dev);
    cr_expect_eq(e->inst.validation_errors, 0, "validation: %s", e->inst.last_validation_error);
    zvk_instance_destroy(&e->inst);
    zarena_free(e->arena);
}

/* Fresh data every run, from a seed that is logged (set ZINC_TEST_SEED to
 * replay a failure). */
static uint64_t test_seed(void) {
    const char *s = getenv("ZINC_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    cr_log_info("seed %llu", (unsigned long long)seed);
    return seed;
}

/* y = a*x + B + BIAS: a is a push constant, B a specialization constant,
 * BIAS a macro, the workgroup size another specialization constant. The
 * first invocation reports what reached the kernel in info[]. */
static const char saxpy_src[] = "#version 450\n"
                                "layout(local_size_x_id = 0) in;\n"
                                "layout(constant_id = 1) const float B = 0.0;\n"
                                "layout(std430, binding = 0) readonly buffer X { float x[]; };\n"
                                "layout(std430, binding = 1) writeonly buffer Y { float y[]; };\n"
                                "layout(std430, binding = 2) writeonly buffer I { uint info[]; };\n"
                                "layout(push_constant) uniform P { uint n; float a; } p;\n"
                                "void main() {\n"
                                "    uint i = gl_GlobalInvocationID.x;\n"
                                "    if (i == 0u) {\n"
                                "        info[0] = p.n;\n"
                                "        info[1] = floatBitsToUint(p.a);\n"
                                "        info[2] = floatBitsToUint(B);\n"
                                "        info[3] = gl_WorkGroupSize.x;\n"
                                "        info[4] = gl_NumWorkGroups.x;\n"
                                "        info[5] = floatBitsToUint(float(BIAS));\n"
                                "    }\n"
                                "    if (i < p.n) y[i] = p.a * x[i] + B + BIAS;\n"
                                "}\n";

static zvk_spirv compile_saxpy(zarena *a, const char *bias) {
    zvk_define defs[] = {{"BIAS", bias}};
    zvk_glsl_opts o = {.name = "saxpy.comp", .defines = defs, .n_defines = 1};
    zvk_spirv sp;
    zdiag d = {0};
    cr_assert_eq(zvk_glsl_compile(a, saxpy_src, strlen(saxpy_src), &o, &sp, &d), ZOK, "%s", d.msg);
    return sp;
}

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The saxpy pipeline and its three buffers (x: nx floats, y: ny floats,
 * info: 8 words, host-visible), bound in one descriptor set. */
typedef struct rig {
    zvk_pipeline p;
    zvk_buffer bx, by, bi;
    VkDescriptorPool pool;
    VkDescriptorSet set;
} rig;

static void rig_open(env *e, rig *g, const zvk_spirv *sp, uint32_t wg, float b, uint32_t nx, uint32_t ny) {
    zdiag d = {0};
    zvk_spec spec[] = {{0, wg}, {1, f2u(b)}};
    zvk_pipeline_desc pd = {.name = "saxpy",
                            .spirv = sp->words,
                            .n_words = sp->n_words,
                            .n_buffers = 3,
                            .push_size = 8,
                            .spec = spec,
                            .n_spec = 2};
    cr_assert_eq(zvk_pipeline_create(&e->dev, &pd, &g->p, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_buffer_create(&e->dev, 4ull * nx, ZVK_MEM_DEVICE, "x", &g->bx, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_buffer_create(&e->dev, 4ull * ny, ZVK_MEM_DEVICE, "y", &g->by, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_buffer_create(&e->dev, 32, ZVK_MEM_HOST, "info", &g->bi, &d), ZOK, "%s", d.msg);
    zvk_binding bind[] = {{&g->bx, 0, 0}, {&g->by, 0, 0}, {&g->bi, 0, 0}};
    cr_assert_eq(zvk_desc_pool_create(&e->dev, 1, 3, &g->pool, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_desc_set(&e->dev, g->pool, &g->p, bind, 3, &g->set, &d), ZOK, "%s", d.msg);
}

static void rig_close(env *e, rig *g) {
    zvk_desc_pool_destroy(&e->dev, &g->pool);
    zvk_buffer_destroy(&e->dev, &g->bx);
    zvk_buffer_destroy(&e->dev, &g->by);
    zvk_buffer_destroy(&e->dev, &g->bi);
    zvk_pipeline_destroy(&e->dev, &g->p);
}

typedef struct push {
    uint32_t n;
    float a;
} push;

/* Checks y against the CPU, the poisoned tail past n, and what the first
 * invocation saw (info). */
static void check_saxpy(const float *x, const float *y, const uint32_t *info, uint32_t n, uint32_t pad,
                        float a, float b, float bias, uint32_t wg) {
    cr_assert_eq(info[0], n, "push constant n: kernel saw %u", info[0]);
    cr_assert_eq(info[1], f2u(a), "push constant a did not reach the kernel");
    cr_assert_eq(info[2], f2u(b), "specialization constant B did not reach the kernel");
    cr_assert_eq(info[3], wg, "workgroup size: kernel saw %u, specialised %u", info[3], wg);
    cr_assert_eq(info[4], (n + wg - 1) / wg);
    cr_assert_eq(info[5], f2u(bias), "macro BIAS did not reach the kernel");
    for (uint32_t i = 0; i < n; i++) {
        double want = (double)a * x[i] + b + bias;
        double tol = 4 * 1.1920929e-7 * (fabs((double)a * x[i]) + fabs(b) + fabs(bias));
        cr_assert(fabs(y[i] - want) <= tol, "n=%u wg=%u: y[%u] = %.9g, expected %.9g (x=%.9g a=%.9g b=%.9g)",
                  n, wg, i, y[i], want, x[i], a, b);
    }
    for (uint32_t i = n; i < n + pad; i++)
        cr_assert(isnan(y[i]), "n=%u: y[%u] written past the end", n, i);
}

/* One dispatch of saxpy over n elements with workgroup size wg, fresh
 * random a, B and x, y poisoned with NaN first. */
static void run_saxpy(env *e, const zvk_spirv *sp, float bias, uint32_t n, uint32_t wg, tu_rng *r) {
    zdiag d = {0};
    const uint32_t pad = 37; /* elements past n that must stay poisoned */
    float a = tu_uniform(r, -3.0f, 3.0f), b = tu_uniform(r, -2.0f, 2.0f);
    rig g;
    rig_open(e, &g, sp, wg, b, n, n + pad);
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * (n + pad));
    uint32_t info[8];
    cr_assert(x && y);
    for (uint32_t i = 0; i < n; i++)
        x[i] = tu_uniform(r, -100.0f, 100.0f);
    for (uint32_t i = 0; i < n + pad; i++)
        y[i] = NAN;
    memset(info, 0xff, sizeof info);
    cr_assert_eq(zvk_upload(&e->dev, &g.bx, 0, x, 4ull * n, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_upload(&e->dev, &g.by, 0, y, 4ull * (n + pad), &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_upload(&e->dev, &g.bi, 0, info, sizeof info, &d), ZOK, "%s", d.msg);

    push pc = {n, a};
    zvk_cmd c;
    cr_assert_eq(zvk_cmd_begin(&e->dev, &c, &d), ZOK, "%s", d.msg);
    zvk_cmd_dispatch(&c, &g.p, g.set, &pc, (n + wg - 1) / wg, 1, 1);
    cr_assert_eq(zvk_cmd_run(&e->dev, &c, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_download(&e->dev, &g.by, 0, y, 4ull * (n + pad), &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_download(&e->dev, &g.bi, 0, info, sizeof info, &d), ZOK, "%s", d.msg);
    check_saxpy(x, y, info, n, pad, a, b, bias, wg);
    rig_close(e, &g);
    free(x);
    free(y);
}

/* ------------------------------------------------------------------ tests */

Test(vk, saxpy_odd_sizes_push_and_spec_constants) {
    env e;
    env_open(&e);
    tu_rng r = tu_rng_seed(test_seed());
    zvk_spirv sp = compile_saxpy(e.arena, "0.5");
    const uint32_t sizes[] = {1, 31, 33, 1000003};
    uint32_t big = e.dev.prof.max_wg_size[0] < 256 ? e.dev.prof.max_wg_size[0] : 256;
    const uint32_t wgs[] = {64, 32, 1, big};
    for (size_t i = 0; i < 4; i++)
        run_saxpy(&e, &sp, 0.5f, sizes[i], wgs[i], &r);
    env_close(&e);
}

Test(vk, profile_is_sane_and_matches_the_driver) {
    env e;
    env_open(&e);
    const zvk_profile *p = &e.dev.prof;
    VkPhysicalDeviceProperties raw;
    vkGetPhysicalDeviceProperties(e.dev.phys, &raw);
    cr_log_info("device %u: %s, subgroup %u [%u, %u], shared %u", p->index, p->name, p->subgroup_size,
                p->subgroup_min, p->subgroup_max, p->max_shared_memory);
    cr_assert_str_eq(p->name, raw.deviceName);
    cr_assert_eq(p->vendor_id, raw.vendorID);
    cr_assert_eq(p->type, raw.deviceType);
    cr_assert_geq(p->api_version, VK_API_VERSION_1_1);
    cr_assert_eq(p->max_shared_memory, raw.limits.maxComputeSharedMemorySize);
    cr_assert_geq(p->max_shared_memory, 16384u, "below the Vulkan minimum");
    cr_assert_geq(p->max_wg_invocations, 128u);
    cr_assert_geq(p->max_wg_size[0], 128u);
    cr_assert_geq(p->max_wg_count[0], 65535u);
    cr_assert_geq(p->max_push_constants, 128u);
    cr_assert_geq(p->max_storage_buffer_range, 1ull << 27);
    uint32_t sg = p->subgroup_size;
    cr_assert(sg >= 1 && sg <= 128 && (sg & (sg - 1)) == 0, "subgroup size %u", sg);
    cr_assert(p->subgroup_min <= sg && sg <= p->subgroup_max);
    uint64_t al = p->storage_offset_align;
    cr_assert(al >= 1 && al <= 256 && (al & (al - 1)) == 0, "offset alignment %llu", (unsigned long long)al);
    cr_assert_gt(p->vram, 0);
    cr_assert_gt(p->max_alloc_size, 0);
    cr_assert_geq(p->max_buffer_size, 1);
    if (p->has_budget) cr_assert_gt(p->vram_budget, 0);
    if (p->api_version >= VK_API_VERSION_1_2) cr_assert_neq(p->driver_name[0], 0, "no driver name");
    if (p->timestamps) cr_assert_gt(p->timestamp_period, 0.0f);
    cr_assert_leq(p->n_coopmat_khr, ZVK_MAX_COOPMAT);
    cr_assert_leq(p->n_coopmat_nv, ZVK_MAX_COOPMAT);
    if (!p->coopmat_khr) cr_assert_eq(p->n_coopmat_khr, 0);
    if (!p->coopmat_nv) cr_assert_eq(p->n_coopmat_nv, 0);
    for (uint32_t i = 0; i < p->n_coopmat_nv; i++)
        cr_assert(p->coopmat_nv_shapes[i].m && p->coopmat_nv_shapes[i].n && p->coopmat_nv_shapes[i].k);
    for (uint32_t i = 0; i < p->n_coopmat_khr; i++)
        cr_assert(p->coopmat_khr_shapes[i].m && p->coopmat_khr_shapes[i].n && p->coopmat_khr_shapes[i].k);
    cr_assert_eq(p->disabled, 0, "no override is set in this test");
    env_close(&e);
}

Test(vk, overrides_clear_profile_bits) {
    zvk_instance inst;
    zdiag d = {0};
    cr_assert_eq(zvk_instance_create(&inst, &d), ZOK, "%s", d.msg);
    uint32_t idx;
    cr_assert_eq(zvk_select_device(&inst, NULL, &idx, &d), ZOK, "%s", d.msg);
    zvk_profile before, after;
    cr_assert_eq(zvk_profile_query(&inst, idx, &before, &d), ZOK, "%s", d.msg);
    setenv("ZINC_DISABLE_COOPMAT", "1", 1);
    setenv("ZINC_DISABLE_FP16", "1", 1);
    setenv("ZINC_DISABLE_INT_DOT", "yes", 1);
    cr_assert_eq(zvk_profile_query(&inst, idx, &after, &d), ZOK, "%s", d.msg);
    cr_assert(!after.fp16 && !after.int_dot && !after.int_dot_accel && !after.coopmat_khr &&
              !after.coopmat_nv);
    cr_assert_eq(after.n_coopmat_khr + after.n_coopmat_nv, 0);
    cr_assert_eq(!!(after.disabled & ZVK_OFF_FP16), before.fp16);
    cr_assert_eq(!!(after.disabled & ZVK_OFF_INT_DOT), before.int_dot);
    cr_assert_eq(!!(after.disabled & ZVK_OFF_COOPMAT), before.coopmat_khr || before.coopmat_nv);
    cr_assert_eq(after.storage16, before.storage16, "an override touched an unrelated feature");
    /* "0" means off: the switch is not set. */
    setenv("ZINC_DISABLE_FP16", "0", 1);
    cr_assert_eq(zvk_profile_query(&inst, idx, &after, &d), ZOK, "%s", d.msg);
    cr_assert_eq(after.fp16, before.fp16);
    /* A device created under the overrides works (it enables only what is left). */
    zvk_device dev;
    cr_assert_eq(zvk_device_create(&inst, idx, &dev, &d), ZOK, "%s", d.msg);
    cr_assert(!dev.prof.int_dot);
    zvk_device_destroy(&dev);
    zvk_instance_destroy(&inst);
}

Test(vk, default_device_order) {
    VkPhysicalDeviceType a[] = {VK_PHYSICAL_DEVICE_TYPE_CPU, VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU,
                                VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU};
    cr_assert_eq(zvk_default_device(a, 4), 2, "first discrete");
    cr_assert_eq(zvk_default_device(a, 2), 1, "integrated before cpu");
    VkPhysicalDeviceType b[] = {VK_PHYSICAL_DEVICE_TYPE_CPU, VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU};
    cr_assert_eq(zvk_default_device(b, 2), 1, "virtual before cpu");
    cr_assert_eq(zvk_default_device(b, 1), 0, "cpu when alone");
    VkPhysicalDeviceType c[] = {VK_PHYSICAL_DEVICE_TYPE_OTHER, VK_PHYSICAL_DEVICE_TYPE_CPU};
    cr_assert_eq(zvk_default_device(c, 2), 1);
}

Test(vk, device_selection_from_cli_and_env) {
    zvk_instance inst;
    zdiag d = {0};
    cr_assert_eq(zvk_instance_create(&inst, &d), ZOK, "%s", d.msg);
    uint32_t idx = 77, n = inst.n_devices;
    cr_assert_geq(n, 1);
    unsetenv("ZINC_DEVICE");
    cr_assert_eq(zvk_select_device(&inst, "0", &idx, &d), ZOK, "%s", d.msg);
    cr_assert_eq(idx, 0);
    char big[16];
    snprintf(big, sizeof big, "%u", n);
    cr_assert_eq(zvk_select_device(&inst, big, &idx, &d), ZE_INVALID);
    cr_assert(strstr(d.msg, "--device") && strstr(d.msg, "no such device"), "%s", d.msg);
    cr_assert_eq(zvk_select_device(&inst, "1x", &idx, &d), ZE_INVALID);
    cr_assert_eq(zvk_select_device(&inst, "-1", &idx, &d), ZE_INVALID);
    cr_assert_eq(zvk_select_device(&inst, "", &idx, &d), ZE_INVALID);
    setenv("ZINC_DEVICE", "99", 1);
    cr_assert_eq(zvk_select_device(&inst, NULL, &idx, &d), ZE_INVALID);
    cr_assert(strstr(d.msg, "ZINC_DEVICE=99"), "%s", d.msg);
    cr_assert_eq(zvk_select_device(&inst, "0", &idx, &d), ZOK, "the CLI wins over the environment");
    setenv("ZINC_DEVICE", "0", 1);
    idx = 77;
    cr_assert_eq(zvk_select_device(&inst, NULL, &idx, &d), ZOK, "%s", d.msg);
    cr_assert_eq(idx, 0);
    zvk_instance_destroy(&inst);
}

Test(vk, shaderc_syntax_error_is_one_clear_line) {
    zarena *a = zarena_new();
    const char *src = "#version 450\n"
                      "layout(local_size_x = 1) in;\n"
                      "void main() {\n"
                      "    undeclared_thing = 1;\n"
                      "}\n";
    zvk_glsl_opts o = {.name = "bad.comp"};
    zvk_spirv sp;
    zdiag d = {0};
    cr_assert_eq(zvk_glsl_compile(a, src, strlen(src), &o, &sp, &d), ZE_INVALID);
    cr_log_info("%s", d.msg);
    cr_assert(strstr(d.msg, "bad.comp:4:"), "no file:line in: %s", d.msg);
    cr_assert(strstr(d.msg, "error"), "%s", d.msg);
    cr_assert(strstr(d.msg, "undeclared_thing"), "the offending name is missing: %s", d.msg);
    cr_assert_null(strchr(d.msg, '\n'), "more than one line: %s", d.msg);
    cr_assert(strstr(sp.log, "undeclared_thing"), "the full log is kept");
    cr_assert_null(sp.words);
    /* A missing macro is an error too (the define is what would supply it). */
    cr_assert_eq(zvk_glsl_compile(a, saxpy_src, strlen(saxpy_src), NULL, &sp, &d), ZE_INVALID);
    cr_assert(strstr(d.msg, "BIAS"), "%s", d.msg);
    zvk_define nameless[] = {{"", "1"}};
    zvk_glsl_opts o2 = {.defines = nameless, .n_defines = 1};
    cr_assert_eq(zvk_glsl_compile(a, saxpy_src, strlen(saxpy_src), &o2, &sp, &d), ZE_INVALID);
    zarena_free(a);
}

Test(vk, shaderc_targets_and_toolchain_probe) {
    zarena *a = zarena_new();
    zvk_spirv sp;
    zdiag d = {0};
    zvk_define defs[] = {{"BIAS", "1.0"}};
    const uint32_t want[] = {0x00010500, 0x00010300, 0x00010500, 0x00010600}; /* per zvk_target */
    for (int t = ZVK_TARGET_DEFAULT; t <= ZVK_TARGET_VK13; t++) {
        zvk_glsl_opts o = {.name = "saxpy.comp", .defines = defs, .n_defines = 1, .target = (zvk_target)t};
        cr_assert_eq(zvk_glsl_compile(a, saxpy_src, strlen(saxpy_src), &o, &sp, &d), ZOK, "%s", d.msg);
        cr_assert_eq(sp.words[0], 0x07230203u);
        cr_assert_eq(sp.words[1], want[t], "target %d: SPIR-V version 0x%08x", t, sp.words[1]);
    }
    zvk_toolchain tc;
    cr_assert_eq(zvk_toolchain_probe(&tc, &d), ZOK, "%s", d.msg);
    cr_log_info("%s; coopmat NV %d KHR %d (%s)", tc.version, tc.coopmat_nv, tc.coopmat_khr,
                tc.coopmat_khr_error);
    cr_assert(!strncmp(tc.version, "shaderc ", 8), "%s", tc.version);
    /* SPIR-V registry tool ids: 8 glslang, 13 shaderc over glslang. */
    cr_assert(tc.generator >> 16 == 8 || tc.generator >> 16 == 13, "generator 0x%08x", tc.generator);
    cr_assert_geq(tc.spirv_max, 0x00010500u);
    /* Every shaderc since 2019 has the NV extension; KHR arrived in 2023. */
    cr_assert(tc.coopmat_nv, "GL_NV_cooperative_matrix: %s", tc.coopmat_nv_error);
    if (!tc.coopmat_khr)
        cr_assert(strstr(tc.coopmat_khr_error, "error"), "%s", tc.coopmat_khr_error);
    else
        cr_assert_eq(tc.coopmat_khr_error[0], 0);
    zarena_free(a);
}

/* zincc links shaderc's code with glslang's libraries of another release
 * (docs/vulkan.md); glslc is a self-contained build of the same shaderc.
 * Identical words mean the mix compiles as shaderc itself does. */
Test(vk, shaderc_matches_glslc) {
    zarena *a = zarena_new();
    const char *src_path = tu_tmp("saxpy.comp"), *spv_path = tu_tmp("saxpy.spv");
    cr_assert_eq(tu_write_file(src_path, saxpy_src, strlen(saxpy_src)), 0);
    for (int opt = 0; opt < 2; opt++) {
        char *out = NULL;
        int rc = tu_run(
            &out,
            "glslc -DBIAS=0.5 --target-env=vulkan1.2 --target-spv=spv1.5 %s -fshader-stage=comp %s -o %s",
            opt ? "-O" : "-O0", src_path, spv_path);
        cr_assert_eq(rc, 0, "glslc (from the glslc package): %s", out ? out : "");
        free(out);
        size_t n = 0;
        uint32_t *want = tu_read_file(spv_path, &n);
        cr_assert_not_null(want);
        zvk_define defs[] = {{"BIAS", "0.5"}};
        zvk_glsl_opts o = {.name = "saxpy.comp", .defines = defs, .n_defines = 1, .optimize = opt};
        zvk_spirv sp;
        zdiag d = {0};
        cr_assert_eq(zvk_glsl_compile(a, saxpy_src, strlen(saxpy_src), &o, &sp, &d), ZOK, "%s", d.msg);
        cr_assert_eq(sp.n_words * 4, n, "-O%s: %zu words, glslc %zu", opt ? "" : "0", sp.n_words, n / 4);
        cr_assert_eq(memcmp(sp.words, want, n), 0, "-O%s: SPIR-V differs from glslc's", opt ? "" : "0");
        free(want);
    }
    zarena_free(a);
}

Test(vk, upload_download_through_small_staging_chunks) {
    env e;
    env_open(&e);
    tu_rng r = tu_rng_seed(test_seed());
    zdiag d = {0};
    const size_t n = 100003;
    unsigned char *src = malloc(n), *back = malloc(n + 64);
    cr_assert(src && back);
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)tu_next(&r);
    e.dev.staging_chunk = 1000; /* many chunks, and a short last one */
    zvk_buffer b;
    cr_assert_eq(zvk_buffer_create(&e.dev, n + 13, ZVK_MEM_DEVICE, "bytes", &b, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_upload(&e.dev, &b, 13, src, n, &d), ZOK, "%s", d.msg);
    memset(back, 0xAA, n + 64);
    cr_assert_eq(zvk_download(&e.dev, &b, 13, back, n, &d), ZOK, "%s", d.msg);
    cr_assert_eq(memcmp(src, back, n), 0);
    cr_assert_eq(back[n], 0xAA, "download wrote past its length");
    cr_assert_eq(zvk_download(&e.dev, &b, 13 + 4097, back, 777, &d), ZOK, "%s", d.msg);
    cr_assert_eq(memcmp(src + 4097, back, 777), 0);
    cr_assert_eq(zvk_upload(&e.dev, &b, 14, src, n, &d), ZE_INVALID, "one byte past the end");
    cr_assert(strstr(d.msg, "outside the buffer"), "%s", d.msg);
    cr_assert_eq(zvk_download(&e.dev, &b, (VkDeviceSize)-1, back, 1, &d), ZE_INVALID);
    zvk_buffer_destroy(&e.dev, &b);
    zvk_buffer_destroy(&e.dev, &b); /* twice is harmless */
    free(src);
    free(back);
    env_close(&e);
}

Test(vk, allocation_limits_and_oom_message) {
    env e;
    env_open(&e);
    zdiag d = {0};
    zvk_buffer b;
    uint32_t heap = e.dev.prof.vram_heap;
    uint64_t too_big = e.dev.mem.memoryHeaps[heap].size + (1ull << 20);
    cr_assert_eq(zvk_buffer_create(&e.dev, too_big, ZVK_MEM_DEVICE, "the test tensor", &b, &d), ZE_NOMEM);
    cr_log_info("%s", d.msg);
    cr_assert(!strncmp(d.msg, "out of device memory: need ", 27), "%s", d.msg);
    cr_assert(strstr(d.msg, " MiB for the test tensor, device-local heap has "), "%s", d.msg);
    cr_assert(strstr(d.msg, " MiB free)"), "%s", d.msg);
    cr_assert_null(b.buffer);

    /* A driver limit below the heap: the buffer is refused before Vulkan sees it. */
    e.dev.prof.max_alloc_size = 1u << 20;
    cr_assert_eq(zvk_buffer_create(&e.dev, (1u << 20) + 4, ZVK_MEM_DEVICE, "blk.0.ffn_up", &b, &d), ZE_NOMEM);
    cr_assert(strstr(d.msg, "maxMemoryAllocationSize") && strstr(d.msg, "blk.0.ffn_up"), "%s", d.msg);
    cr_assert_eq(zvk_buffer_create(&e.dev, 1u << 20, ZVK_MEM_DEVICE, "exactly the limit", &b, &d), ZOK, "%s",
                 d.msg);
    cr_assert_geq(e.dev.heap_used[b.heap], 1u << 20);
    zvk_buffer_destroy(&e.dev, &b);
    cr_assert_eq(e.dev.heap_used[heap], 0, "accounting returns to zero");
    cr_assert_eq(zvk_buffer_create(&e.dev, 0, ZVK_MEM_HOST, "nothing", &b, &d), ZE_INVALID);
    env_close(&e);
}

Test(vk, timestamps_are_monotonic) {
    env e;
    env_open(&e);
    zdiag d = {0};
    zvk_timer t;
    if (!e.dev.prof.timestamps) {
        cr_assert_eq(zvk_timer_create(&e.dev, 4, &t, &d), ZE_UNSUPPORTED);
        env_close(&e);
        cr_skip_test("the device has no timestamps");
    }
    zvk_spirv sp = compile_saxpy(e.arena, "0.0");
    const uint32_t n = 1 << 20;
    rig g;
    rig_open(&e, &g, &sp, 64, 0.0f, n, n);
    cr_assert_eq(zvk_timer_create(&e.dev, 3, &t, &d), ZOK, "%s", d.msg);
    push pc = {n, 2.0f};
    zvk_cmd c;
    cr_assert_eq(zvk_cmd_begin(&e.dev, &c, &d), ZOK, "%s", d.msg);
    zvk_timer_reset(&c, &t);
    cr_assert_eq(zvk_timer_mark(&c, &t, &d), ZOK);
    zvk_cmd_dispatch(&c, &g.p, g.set, &pc, n / 64, 1, 1);
    cr_assert_eq(zvk_timer_mark(&c, &t, &d), ZOK);
    zvk_cmd_barrier(&c);
    zvk_cmd_dispatch(&c, &g.p, g.set, &pc, n / 64, 1, 1);
    cr_assert_eq(zvk_timer_mark(&c, &t, &d), ZOK);
    cr_assert_eq(zvk_timer_mark(&c, &t, &d), ZE_INVALID, "a fourth mark in a timer of three");
    cr_assert_eq(zvk_cmd_end(&e.dev, &c, &d), ZOK, "%s", d.msg);
    /* Replay: the same command buffer twice, as the executor will. */
    for (int rep = 0; rep < 2; rep++) {
        cr_assert_eq(zvk_cmd_submit_wait(&e.dev, &c, &d), ZOK, "%s", d.msg);
        double ns[3];
        cr_assert_eq(zvk_timer_read(&e.dev, &t, ns, &d), ZOK, "%s", d.msg);
        cr_log_info("dispatches: %.0f ns, %.0f ns", ns[1] - ns[0], ns[2] - ns[1]);
        cr_assert_eq(ns[0], 0.0);
        cr_assert(ns[1] >= ns[0] && ns[2] >= ns[1], "not monotonic: %g %g %g", ns[0], ns[1], ns[2]);
        cr_assert_gt(ns[2], 0.0, "two dispatches over 4 MiB took no time");
    }
    zvk_cmd_release(&e.dev, &c);
    zvk_timer_destroy(&e.dev, &t);
    rig_close(&e, &g);
    env_close(&e);
}

/* zinc bench --profile's dispatch costs: three positive medians, the
 * device-wide kind no cheaper than one workgroup behind the same barrier
 * (it does that work and more), and no validation error on the way. */
Test(vk, calibration_times_three_kinds_of_dispatch) {
    env e;
    env_open(&e);
    zdiag d = {0};
    zvk_calib c;
    if (!e.dev.prof.timestamps) {
        cr_assert_eq(zvk_calibrate(&e.dev, 64, &c, &d), ZE_UNSUPPORTED);
        env_close(&e);
        cr_skip_test("the device has no timestamps");
    }
    cr_assert_eq(zvk_calibrate(&e.dev, 64, &c, &d), ZOK, "%s", d.msg);
    cr_log_info("dispatch %.2f us, behind a barrier %.2f us, 64 workgroups %.2f us", c.dispatch_us, c.barrier_us,
                c.wide_us);
    cr_assert(c.dispatch_us > 0 && c.barrier_us > 0 && c.wide_us > 0, "%g %g %g", c.dispatch_us, c.barrier_us,
              c.wide_us);
    cr_assert(c.wide_us > 0.9 * c.barrier_us, "64 workgroups %.2f us, one %.2f us", c.wide_us, c.barrier_us);
    cr_assert_eq(c.wide_groups, 64u);
    cr_assert(c.n > 0 && c.reps > 0);
    env_close(&e);
}

Test(vk, pipeline_errors_and_statistics) {
    env e;
    env_open(&e);
    zdiag d = {0};
    zvk_spirv sp = compile_saxpy(e.arena, "0.0");
    zvk_pipeline p;
    uint32_t junk[8] = {0xdeadbeef, 1, 2, 3, 4, 5, 6, 7};
    zvk_pipeline_desc bad = {.name = "junk", .spirv = junk, .n_words = 8, .n_buffers = 3};
    cr_assert_eq(zvk_pipeline_create(&e.dev, &bad, &p, &d), ZE_INVALID);
    cr_assert(strstr(d.msg, "not SPIR-V") && strstr(d.msg, "junk"), "%s", d.msg);
    zvk_pipeline_desc pd = {
        .name = "saxpy", .spirv = sp.words, .n_words = sp.n_words, .n_buffers = 3, .push_size = 6};
    cr_assert_eq(zvk_pipeline_create(&e.dev, &pd, &p, &d), ZE_INVALID, "push size not a multiple of 4");
    pd.push_size = e.dev.prof.max_push_constants + 4;
    cr_assert_eq(zvk_pipeline_create(&e.dev, &pd, &p, &d), ZE_INVALID);
    pd.push_size = 8;
    pd.subgroup_size = e.dev.prof.subgroup_max * 2;
    cr_assert_eq(zvk_pipeline_create(&e.dev, &pd, &p, &d), ZE_UNSUPPORTED, "subgroup size above the maximum");
    pd.subgroup_size = 0;
    cr_assert_eq(zvk_pipeline_create(&e.dev, &pd, &p, &d), ZOK, "%s", d.msg);
    /* Statistics exactly when the driver offers them. */
    cr_assert_eq(p.stats.valid, e.dev.prof.pipeline_stats);
    if (p.stats.valid) {
        cr_assert_gt(p.stats.n_raw, 0);
        for (uint32_t i = 0; i < p.stats.n_raw; i++)
            cr_log_info("%s = %g", p.stats.raw[i].name, p.stats.raw[i].value);
    } else {
        cr_assert_eq(p.stats.registers, -1);
        cr_assert_eq(p.stats.shared_bytes, -1);
    }
    /* Descriptor sets check what they bind. */
    VkDescriptorPool pool;
    VkDescriptorSet set;
    zvk_buffer b;
    cr_assert_eq(zvk_buffer_create(&e.dev, 4096, ZVK_MEM_DEVICE, "b", &b, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zvk_desc_pool_create(&e.dev, 1, 3, &pool, &d), ZOK, "%s", d.msg);
    zvk_binding two[] = {{&b, 0, 0}, {&b, 0, 0}};
    cr_assert_eq(zvk_desc_set(&e.dev, pool, &p, two, 2, &set, &d), ZE_INVALID, "2 buffers for 3 bindings");
    zvk_binding outside[] = {{&b, 0, 0}, {&b, 0, 4097}, {&b, 0, 0}};
    cr_assert_eq(zvk_desc_set(&e.dev, pool, &p, outside, 3, &set, &d), ZE_INVALID);
    if (e.dev.prof.storage_offset_align > 1) {
        zvk_binding odd[] = {{&b, 0, 0}, {&b, 1, 16}, {&b, 0, 0}};
        cr_assert_eq(zvk_desc_set(&e.dev, pool, &p, odd, 3, &set, &d), ZE_INVALID);
        cr_assert(strstr(d.msg, "minStorageBufferOffsetAlignment"), "%s", d.msg);
    }
    zvk_binding ok[] = {{&b, 0, 0}, {&b, e.dev.prof.storage_offset_align, 64}, {&b, 0, 0}};
    cr_assert_eq(zvk_desc_set(&e.dev, pool, &p, ok, 3, &set, &d), ZOK, "%s", d.msg);
    zvk_desc_pool_destroy(&e.dev, &pool);
    zvk_buffer_destroy(&e.dev, &b);
    zvk_pipeline_destroy(&e.dev, &p);
    env_close(&e);
}

Test(vk, required_subgroup_size_reaches_the_kernel) {
    env e;
    env_open(&e);
    zdiag d = {0};
    const zvk_profile *pr = &e.dev.prof;
    if (!pr->subgroup_size_control) {
        env_close(&e);
        cr_skip_test("%s has no subgroup size control", pr->name);
    }
    const char *src = "#version 450\n"
                      "#extension GL_KHR_shader_subgroup_basic : require\n"
                      "layout(local_size_x = 128) in;\n"
                      "layout(std430, binding = 0) buffer O { uint o[]; };\n"
                      "void main() { if (gl_GlobalInvocationID.x == 0u) o[0] = gl_SubgroupSize; }\n";
    zvk_spirv sp;
    zvk_glsl_opts o = {.name = "sgsize.comp"};
    cr_assert_eq(zvk_glsl_compile(e.arena, src, strlen(src), &o, &sp, &d), ZOK, "%s", d.msg);
    zvk_buffer b;
    cr_assert_eq(zvk_buffer_create(&e.dev, 16, ZVK_MEM_HOST, "out", &b, &d), ZOK, "%s", d.msg);
    for (uint32_t sg = pr->subgroup_min; sg <= pr->subgroup_max; sg *= 2) {
        zvk_pipeline_desc pd = {
            .name = "sgsize", .spirv = sp.words, .n_words = sp.n_words, .n_buffers = 1, .subgroup_size = sg};
        zvk_pipeline p;
        cr_assert_eq(zvk_pipeline_create(&e.dev, &pd, &p, &d), ZOK, "%s", d.msg);
        VkDescriptorPool pool;
        VkDescriptorSet set;
        zvk_binding bind = {&b, 0, 0};
        cr_assert_eq(zvk_desc_pool_create(&e.dev, 1, 1, &pool, &d), ZOK, "%s", d.msg);
        cr_assert_eq(zvk_desc_set(&e.dev, pool, &p, &bind, 1, &set, &d), ZOK, "%s", d.msg);
        ((uint32_t *)b.map)[0] = 0;
        zvk_cmd c;
        cr_assert_eq(zvk_cmd_begin(&e.dev, &c, &d), ZOK, "%s", d.msg);
        zvk_cmd_dispatch(&c, &p, set, NULL, 1, 1, 1);
        cr_assert_eq(zvk_cmd_run(&e.dev, &c, &d), ZOK, "%s", d.msg);
        cr_assert_eq(((uint32_t *)b.map)[0], sg, "required %u, kernel ran with %u", sg,
                     ((uint32_t *)b.map)[0]);
        zvk_desc_pool_destroy(&e.dev, &pool);
        zvk_pipeline_destroy(&e.dev, &p);
    }
    zvk_buffer_destroy(&e.dev, &b);
    env_close(&e);
}

Test(vk, result_names_and_device_lost) {
    env e;
    env_open(&e);
    zdiag d = {0};
    cr_assert_str_eq(zvk_result_name(VK_ERROR_DEVICE_LOST), "VK_ERROR_DEVICE_LOST");
    cr_assert_str_eq(zvk_result_name((VkResult)-12345), "VkResult(-12345)");
    cr_assert_eq(zvk_fail(&e.dev, VK_ERROR_OUT_OF_DEVICE_MEMORY, &d, "vkAllocateMemory", "x"), ZE_NOMEM);
    cr_assert(strstr(d.msg, "VK_ERROR_OUT_OF_DEVICE_MEMORY"), "%s", d.msg);
    cr_assert_eq(zvk_fail(&e.dev, VK_ERROR_INITIALIZATION_FAILED, &d, "vkCreateDevice", "x"), ZE_VK);
    cr_assert(!e.dev.lost);
    cr_assert_eq(zvk_fail(&e.dev, VK_ERROR_DEVICE_LOST, &d, "vkQueueSubmit", "decode step 3"), ZE_VK);
    cr_assert(strstr(d.msg, "vkQueueSubmit failed: VK_ERROR_DEVICE_LOST (decode step 3)"), "%s", d.msg);
    /* Once lost, work is refused up front instead of hanging in the driver. */
    cr_assert(e.dev.lost);
    zvk_cmd c;
    zvk_buffer b;
    cr_assert_eq(zvk_cmd_begin(&e.dev, &c, &d), ZE_VK);
    cr_assert_eq(zvk_buffer_create(&e.dev, 64, ZVK_MEM_DEVICE, "b", &b, &d), ZE_VK);
    env_close(&e);
}

Test(vk, validation_switch) {
    setenv("ZINC_VK_VALIDATION", "1", 1);
    bool present = false;
    uint32_t n = 0;
    vkEnumerateInstanceLayerProperties(&n, NULL);
    VkLayerProperties *l = calloc(n ? n : 1, sizeof *l);
    vkEnumerateInstanceLayerProperties(&n, l);
    for (uint32_t i = 0; i < n; i++)
        present |= !strcmp(l[i].layerName, "VK_LAYER_KHRONOS_validation");
    free(l);
    env e;
    env_open(&e);
    cr_assert(e.inst.validation_requested);
    cr_assert_eq(e.inst.validation, present, "validation enabled exactly when the layer is installed");
    /* Under the layer, real work must raise no error (env_close checks). */
    tu_rng r = tu_rng_seed(test_seed());
    zvk_spirv sp = compile_saxpy(e.arena, "0.25");
    run_saxpy(&e, &sp, 0.25f, 1000, 64, &r);
    env_close(&e);
}

/* Runs the built zinc; its output lands in buf (no heap: a failed assert
 * must leak nothing under LeakSanitizer). */
static int run_zinc(char *buf, size_t n, const char *env_vars, const char *args) {
    char *out = NULL;
    int rc = tu_run(&out, "%s %s/zinc %s", env_vars, ZINC_BINARY_DIR, args);
    snprintf(buf, n, "%s", out ? out : "(no output)");
    free(out);
    return rc;
}

Test(vk, zinc_devices_lists_and_marks_the_default) {
    zvk_instance inst;
    zdiag d = {0};
    cr_assert_eq(zvk_instance_create(&inst, &d), ZOK, "%s", d.msg);
    uint32_t idx;
    unsetenv("ZINC_DEVICE");
    cr_assert_eq(zvk_select_device(&inst, NULL, &idx, &d), ZOK, "%s", d.msg);
    zvk_profile p;
    cr_assert_eq(zvk_profile_query(&inst, idx, &p, &d), ZOK, "%s", d.msg);
    uint32_t n = inst.n_devices;
    zvk_instance_destroy(&inst);

    static char out[16384];
    int rc = run_zinc(out, sizeof out, "", "devices");
    cr_assert_eq(rc, 0, "zinc devices: %s", out);
    char line[512];
    snprintf(line, sizeof line, "* %u  %s", idx, p.name);
    cr_assert(strstr(out, line), "no default line '%s' in:\n%s", line, out);
    char args[64];
    snprintf(args, sizeof args, "devices --device %u", n);
    cr_assert_neq(run_zinc(out, sizeof out, "", args), 0);
    cr_assert(strstr(out, "no such device"), "%s", out);
    rc = run_zinc(out, sizeof out, "ZINC_DISABLE_COOPMAT=1", "devices --verbose");
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "subgroup") && strstr(out, "shaderc"), "%s", out);
}
