/* libshaderc wrapper: GLSL compute source + defines -> SPIR-V words. */
#include "shaderc.h"

#include "spv_idot.h"

#include <shaderc/shaderc.h>
#include <stdio.h>
#include <string.h>

/* The shaderc release is known only to the build (pkg-config); CMake
 * passes it as ZINC_SHADERC_VERSION. */
#ifndef ZINC_SHADERC_VERSION
#define ZINC_SHADERC_VERSION "release unknown"
#endif

static void set_target(shaderc_compile_options_t op, zvk_target t) {
    switch (t) {
    case ZVK_TARGET_VK11:
        shaderc_compile_options_set_target_env(op, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_1);
        shaderc_compile_options_set_target_spirv(op, shaderc_spirv_version_1_3);
        break;
    case ZVK_TARGET_VK13:
        shaderc_compile_options_set_target_env(op, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_3);
        shaderc_compile_options_set_target_spirv(op, shaderc_spirv_version_1_6);
        break;
    default:
        shaderc_compile_options_set_target_env(op, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
        shaderc_compile_options_set_target_spirv(op, shaderc_spirv_version_1_5);
        break;
    }
}

static const char *target_name(zvk_target t) {
    switch (t) {
    case ZVK_TARGET_VK11: return "Vulkan 1.1, SPIR-V 1.3";
    case ZVK_TARGET_VK13: return "Vulkan 1.3, SPIR-V 1.6";
    default: return "Vulkan 1.2, SPIR-V 1.5";
    }
}

/* The first line of the log that reports an error (glslang writes
 * "<file>:<line>: error: <what>"), or its first line. */
static void first_error(const char *log, char *buf, size_t n) {
    const char *p = strstr(log, "error:");
    const char *start = log;
    if (p) {
        start = p;
        while (start > log && start[-1] != '\n')
            start--;
    }
    size_t len = strcspn(start, "\r\n");
    if (len >= n) len = n - 1;
    memcpy(buf, start, len);
    buf[len] = 0;
}

static shaderc_compile_options_t make_options(const zvk_glsl_opts *o) {
    shaderc_compile_options_t op = shaderc_compile_options_initialize();
    if (!op) return NULL;
    set_target(op, o->target);
    shaderc_compile_options_set_source_language(op, shaderc_source_language_glsl);
    bool opt = o->optimize && !o->int_dot;
    shaderc_compile_options_set_optimization_level(op, opt ? shaderc_optimization_level_performance
                                                           : shaderc_optimization_level_zero);
    if (o->debug_info) shaderc_compile_options_set_generate_debug_info(op);
    for (uint32_t i = 0; i < o->n_defines; i++) {
        const char *v = o->defines[i].value ? o->defines[i].value : "";
        shaderc_compile_options_add_macro_definition(op, o->defines[i].name, strlen(o->defines[i].name), v,
                                                     strlen(v));
    }
    return op;
}

/* Copies a successful result's words into the arena. */
static zstatus take_words(zarena *a, shaderc_compilation_result_t r, const char *name, zvk_spirv *out,
                          zdiag *d) {
    size_t bytes = shaderc_result_get_length(r);
    if (bytes < 20 || bytes % 4)
        return zdiag_set(d, ZE_INTERNAL, "shaderc: %s: %zu bytes of output, not SPIR-V words", name, bytes);
    out->words = zarena_alloc(a, bytes);
    if (!out->words)
        return zdiag_set(d, ZE_NOMEM, "shaderc: %s: out of host memory for %zu bytes", name, bytes);
    memcpy(out->words, shaderc_result_get_bytes(r), bytes);
    out->n_words = bytes / 4;
    return ZOK;
}

/* The markers of an int_dot module to SPV_KHR_integer_dot_product. */
static zstatus rewrite_int_dot(zarena *a, const char *name, zvk_spirv *out, zdiag *d) {
    uint32_t *w;
    size_t n;
    int k;
    zstatus s = zspv_int_dot(out->words, out->n_words, a, &w, &n, &k, d);
    if (s) {
        zdiag_prefix(d, "shaderc: %s", name);
        return s;
    }
    if (!k)
        return zdiag_set(d, ZE_INTERNAL,
                         "shaderc: %s: compiled for integer dot products but calls no zdot4 marker", name);
    out->words = w;
    out->n_words = n;
    return ZOK;
}

zstatus zvk_glsl_compile(zarena *a, const char *src, size_t len, const zvk_glsl_opts *opts, zvk_spirv *out,
                         zdiag *d) {
    static const zvk_glsl_opts defaults;
    const zvk_glsl_opts *o = opts ? opts : &defaults;
    const char *name = o->name ? o->name : "kernel.comp";
    memset(out, 0, sizeof *out);
    out->log = "";
    for (uint32_t i = 0; i < o->n_defines; i++)
        if (!o->defines[i].name || !o->defines[i].name[0])
            return zdiag_set(d, ZE_INVALID, "shaderc: %s: define %u has no name", name, i);
    shaderc_compiler_t c = shaderc_compiler_initialize();
    shaderc_compile_options_t op = c ? make_options(o) : NULL;
    if (!op) {
        if (c) shaderc_compiler_release(c);
        return zdiag_set(d, ZE_INTERNAL, "shaderc: could not initialise the compiler");
    }
    shaderc_compilation_result_t r =
        shaderc_compile_into_spv(c, src, len, shaderc_glsl_compute_shader, name, "main", op);
    zstatus s = ZOK;
    if (!r) {
        s = zdiag_set(d, ZE_INTERNAL, "shaderc: %s: the compiler returned no result", name);
    } else {
        const char *log = shaderc_result_get_error_message(r);
        char *copy = zarena_strdup(a, log ? log : "");
        if (copy) out->log = copy;
        shaderc_compilation_status st = shaderc_result_get_compilation_status(r);
        if (st == shaderc_compilation_status_success) {
            s = take_words(a, r, name, out, d);
        } else {
            char line[512];
            first_error(log ? log : "", line, sizeof line);
            size_t ne = shaderc_result_get_num_errors(r);
            s = zdiag_set(d, st == shaderc_compilation_status_compilation_error ? ZE_INVALID : ZE_INTERNAL,
                          "shaderc: %s (%zu error%s; target %s)", line[0] ? line : "compilation failed", ne,
                          ne == 1 ? "" : "s", target_name(o->target));
        }
        shaderc_result_release(r);
    }
    shaderc_compile_options_release(op);
    shaderc_compiler_release(c);
    return s == ZOK && o->int_dot ? rewrite_int_dot(a, name, out, d) : s;
}

/* ------------------------------------------------------------------ probe */

static const char probe_plain[] = "#version 450\n"
                                  "layout(local_size_x = 1) in;\n"
                                  "layout(std430, binding = 0) buffer B { uint b[]; };\n"
                                  "void main() { b[0] = 1u; }\n";

/* One 16x16x16 fp16 multiply-add per extension: the smallest kernel that
 * uses the types, a load, the multiply-add and a store. */
static const char probe_nv[] =
    "#version 450\n"
    "#extension GL_NV_cooperative_matrix : require\n"
    "#extension GL_KHR_memory_scope_semantics : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
    "layout(local_size_x = 32) in;\n"
    "layout(std430, binding = 0) readonly buffer A { float16_t a[]; };\n"
    "layout(std430, binding = 1) buffer C { float c[]; };\n"
    "void main() {\n"
    "    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> ma;\n"
    "    coopMatLoadNV(ma, a, 0, 16, false);\n"
    "    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);\n"
    "    acc = coopMatMulAddNV(ma, ma, acc);\n"
    "    coopMatStoreNV(acc, c, 0, 16, false);\n"
    "}\n";

static const char probe_khr[] =
    "#version 450\n"
    "#extension GL_KHR_cooperative_matrix : require\n"
    "#extension GL_KHR_memory_scope_semantics : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
    "layout(local_size_x = 32) in;\n"
    "layout(std430, binding = 0) readonly buffer A { float16_t a[]; };\n"
    "layout(std430, binding = 1) buffer C { float c[]; };\n"
    "void main() {\n"
    "    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ma;\n"
    "    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> mb;\n"
    "    coopMatLoad(ma, a, 0, 16, gl_CooperativeMatrixLayoutRowMajor);\n"
    "    coopMatLoad(mb, a, 0, 16, gl_CooperativeMatrixLayoutRowMajor);\n"
    "    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc =\n"
    "        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);\n"
    "    acc = coopMatMulAdd(ma, mb, acc);\n"
    "    coopMatStore(acc, c, 0, 16, gl_CooperativeMatrixLayoutRowMajor);\n"
    "}\n";

/* Whether src compiles; the reason goes to why when it does not. A broken
 * compiler (anything but a compile error) is reported through d. */
static zstatus try_compile(zarena *a, const char *name, const char *src, zvk_target t, bool *ok, char *why,
                           size_t n, zdiag *d) {
    zvk_glsl_opts o = {.name = name, .target = t};
    zvk_spirv sp;
    zdiag local = {0};
    zstatus s = zvk_glsl_compile(a, src, strlen(src), &o, &sp, &local);
    *ok = s == ZOK;
    why[0] = 0;
    if (s == ZE_INVALID) {
        size_t k = strnlen(local.msg, n - 1); /* keep the start: it names the error */
        memcpy(why, local.msg, k);
        why[k] = 0;
        return ZOK;
    }
    if (s != ZOK) *d = local;
    return s;
}

zstatus zvk_toolchain_probe(zvk_toolchain *t, zdiag *d) {
    memset(t, 0, sizeof *t);
    unsigned ver = 0, rev = 0;
    shaderc_get_spv_version(&ver, &rev);
    t->spirv_max = ver;
    zarena *a = zarena_new();
    if (!a) return zdiag_set(d, ZE_NOMEM, "shaderc probe: out of host memory");
    zvk_glsl_opts o = {.name = "probe.comp"};
    zvk_spirv sp;
    zstatus s = zvk_glsl_compile(a, probe_plain, strlen(probe_plain), &o, &sp, d);
    if (s != ZOK) {
        zdiag_prefix(d, "shaderc cannot compile a trivial kernel");
        zarena_free(a);
        return s == ZE_INVALID ? ZE_INTERNAL : s;
    }
    /* The generator word names the front end and its version, which moves
     * when glslang's output changes: part of a plan's identity. */
    t->generator = sp.words[2];
    uint32_t tool = t->generator >> 16;
    const char *tool_name = tool == 13 ? "shaderc over glslang" : tool == 8 ? "glslang" : "SPIR-V tool";
    snprintf(t->version, sizeof t->version, "shaderc %s (%s, generator %u.%u; SPIR-V up to %u.%u)",
             ZINC_SHADERC_VERSION, tool_name, tool, t->generator & 0xffff, (ver >> 16) & 0xff,
             (ver >> 8) & 0xff);
    s = try_compile(a, "probe_coopmat_nv.comp", probe_nv, ZVK_TARGET_VK12, &t->coopmat_nv,
                    t->coopmat_nv_error, sizeof t->coopmat_nv_error, d);
    if (s == ZOK)
        s = try_compile(a, "probe_coopmat_khr.comp", probe_khr, ZVK_TARGET_VK13, &t->coopmat_khr,
                        t->coopmat_khr_error, sizeof t->coopmat_khr_error, d);
    zarena_free(a);
    return s;
}
