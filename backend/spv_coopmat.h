/* SPIR-V rewrite from NV cooperative matrix (SPV_NV_cooperative_matrix) to
 * KHR cooperative matrix (SPV_KHR_cooperative_matrix).
 *
 * Debian 12's shaderc compiles GL_NV_cooperative_matrix but not
 * GL_KHR_cooperative_matrix, and AMD GPUs expose only
 * VK_KHR_cooperative_matrix: kernels are written with the NV extension and
 * their SPIR-V is rewritten to the KHR form when the device needs it.
 * docs/vulkan.md ("NV to KHR cooperative matrix") says how and what is
 * refused. */
#ifndef ZINC_SPV_COOPMAT_H
#define ZINC_SPV_COOPMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../ir/arena.h"
#include "../ir/zstatus.h"

/* Whether a module declares or uses the NV cooperative matrix (its
 * capability, extension or any of its instructions). A malformed module is
 * read up to its first bad instruction. */
bool zspv_uses_coopmat_nv(const uint32_t *words, size_t n_words);

/* Rewrites a module's NV cooperative-matrix capability, extension, types
 * and instructions to their KHR forms; *out (arena-owned) gets the new
 * module. A module without NV cooperative matrix comes back word for word.
 * Each matrix type gets the Use (A, B, accumulator) that its values have in
 * OpCooperativeMatrixMulAddNV; a type used in several roles is split into
 * one KHR type per role (new ids past the old bound).
 *
 * Errors: ZE_FORMAT for a malformed module (header, word counts, ids past
 * the bound, operand counts), ZE_UNSUPPORTED for what KHR cannot express or
 * the rewrite does not handle (one value in two roles, a split type inside
 * a struct or a function signature, the length of a split type, a layout
 * that is not a boolean constant), ZE_NOMEM. */
zstatus zspv_coopmat_nv_to_khr(const uint32_t *in, size_t n_words, zarena *a, uint32_t **out,
                               size_t *out_words, zdiag *d);

/* Whether a module has a cooperative matrix type (NV or KHR) of workgroup
 * scope (VK_NV_cooperative_matrix2: the whole workgroup holds the matrix;
 * glslang compiles gl_ScopeWorkgroup in the NV types). */
bool zspv_coopmat_workgroup_scope(const uint32_t *words, size_t n_words);

/* Adds OpExtension "SPV_NV_cooperative_matrix2" (which workgroup-scope
 * matrices need) after the module's last OpExtension or OpCapability,
 * unless it is there already; *out (arena-owned) gets the module. */
zstatus zspv_add_coopmat2_extension(const uint32_t *in, size_t n_words, zarena *a, uint32_t **out,
                                    size_t *out_words, zdiag *d);

/* ZINC_CM_TENSOR=1's measurement (backend/spv_tensor.c, step 1 of
 * docs/coopmat2-tensor-loads.md): a KHR module's workgroup-scope matrix
 * loads from storage buffers rewritten as tensor-addressed loads
 * (SPV_NV_tensor_addressing, SPV_NV_cooperative_matrix2; SPIR-V 1.6) of the
 * same elements. *rewritten counts them; a module with none comes back word
 * for word. ZE_UNSUPPORTED for such a load the rewrite cannot express
 * (a stride that is not a 32-bit integer, a pointee that is not whole
 * components, a layout other than row- or column-major). */
zstatus zspv_coopmat_tensor_loads(const uint32_t *in, size_t n_words, zarena *a, uint32_t **out,
                                  size_t *out_words, int *rewritten, zdiag *d);
#endif
