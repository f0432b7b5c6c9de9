/* SPIR-V rewrite of the packed integer dot-product markers to
 * SPV_KHR_integer_dot_product.
 *
 * Debian 12's glslang has no GL_EXT_integer_dot_product, so kernels call a
 * marker function written in plain GLSL (backend/glsl/idot.glsl), correct
 * on its own with bitfieldExtract, and the compiled module's marker bodies
 * are replaced by the instruction:
 *
 *   int zdot4(uint a, uint b, int acc)     acc + OpSDot(a, b)        (wraps)
 *   int zdot4sat(uint a, uint b, int acc)  OpSDotAccSat(a, b, acc)   (saturates)
 *
 * a and b are four signed bytes each (PackedVectorFormat4x8Bit). Markers are
 * found by their OpName ("zdot4(u1;u1;i1;" in glslang's mangling), so the
 * module must be compiled without spirv-opt, whose inliner would dissolve
 * them; zvk_glsl_compile does that when asked (zvk_glsl_opts.int_dot). The
 * capabilities DotProduct and DotProductInput4x8BitPacked and the extension
 * SPV_KHR_integer_dot_product are added when missing. docs/vulkan.md says
 * more. */
#ifndef ZINC_SPV_IDOT_H
#define ZINC_SPV_IDOT_H

#include <stddef.h>
#include <stdint.h>

#include "../ir/arena.h"
#include "../ir/zstatus.h"

/* Rewrites every marker function of the module; *out (arena-owned) gets the
 * new module and *n_markers how many were rewritten (0: the module comes
 * back word for word).
 *
 * Errors: ZE_FORMAT for a malformed module (header, word counts, ids past
 * the bound, a named marker that is no function), ZE_UNSUPPORTED for a
 * marker whose signature is not int(uint, uint, int) (by value or through
 * Function pointers, as glslang passes them unoptimised), ZE_NOMEM. */
zstatus zspv_int_dot(const uint32_t *in, size_t n_words, zarena *a, uint32_t **out, size_t *out_words,
                     int *n_markers, zdiag *d);

#endif
