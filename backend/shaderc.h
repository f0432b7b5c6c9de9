/* GLSL compute shaders to SPIR-V with libshaderc, inside zincc (no glslc
 * process), and a probe of what the installed toolchain can compile.
 *
 * Debian 12's shaderc (2023.2) compiles GL_NV_cooperative_matrix but not
 * GL_KHR_cooperative_matrix; kernel templates pick what both the toolchain
 * (zvk_toolchain) and the device (zvk_profile) offer. */
#ifndef ZINC_SHADERC_H
#define ZINC_SHADERC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../ir/arena.h"
#include "../ir/zstatus.h"

/* A macro definition, as -Dname=value; value NULL defines it empty. */
typedef struct zvk_define {
    const char *name, *value;
} zvk_define;

/* The Vulkan environment to compile for, which fixes the SPIR-V version. */
typedef enum zvk_target {
    ZVK_TARGET_DEFAULT = 0, /* Vulkan 1.2, SPIR-V 1.5 */
    ZVK_TARGET_VK11,        /* SPIR-V 1.3 */
    ZVK_TARGET_VK12,        /* SPIR-V 1.5 */
    ZVK_TARGET_VK13,        /* SPIR-V 1.6 */
} zvk_target;

typedef struct zvk_glsl_opts {
    const char *name; /* file name in messages, e.g. "matmul_q4k.comp" */
    const zvk_define *defines;
    uint32_t n_defines;
    zvk_target target;
    bool optimize;   /* shaderc's performance passes (spirv-opt) */
    bool debug_info; /* keep names and lines in the SPIR-V */
    /* The source calls the integer dot-product markers (glsl/idot.glsl):
     * compile without spirv-opt (its inliner would dissolve them; the
     * driver optimizes anyway) and rewrite them (spv_idot.h). A module
     * with no marker left to rewrite is ZE_INTERNAL. */
    bool int_dot;
} zvk_glsl_opts;

typedef struct zvk_spirv {
    uint32_t *words; /* arena-owned */
    size_t n_words;
    const char *log; /* the compiler's full output (warnings or errors), "" if none; arena-owned */
} zvk_spirv;

/* Compiles one compute shader (entry point "main"). On a compile error it
 * returns ZE_INVALID with the first error line of the log in d, e.g.
 * "shaderc: saxpy.comp:3: error: 'x' : undeclared identifier (1 error;
 * target Vulkan 1.2)", and still sets out->log to the whole log. opts may
 * be NULL. */
zstatus zvk_glsl_compile(zarena *a, const char *src, size_t len, const zvk_glsl_opts *opts, zvk_spirv *out,
                         zdiag *d);

typedef struct zvk_toolchain {
    char version[128];  /* "shaderc 2023.2.1 (shaderc over glslang, generator 13.11; SPIR-V up to 1.6)" */
    uint32_t generator; /* SPIR-V header word 2: tool id << 16 | tool version */
    uint32_t spirv_max; /* highest SPIR-V version shaderc emits, 0x00010600 for 1.6 */
    bool coopmat_nv;    /* compiles a GL_NV_cooperative_matrix kernel (Vulkan 1.2 target) */
    bool coopmat_khr;   /* compiles a GL_KHR_cooperative_matrix kernel (Vulkan 1.3 target) */
    char coopmat_nv_error[256], coopmat_khr_error[256]; /* first error line when not */
} zvk_toolchain;

/* Compiles small probe kernels to find out what the toolchain supports. A
 * failing probe is an answer, not an error; errors are for a broken
 * shaderc (ZE_INTERNAL). */
zstatus zvk_toolchain_probe(zvk_toolchain *t, zdiag *d);

#endif
