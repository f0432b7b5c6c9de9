// gemvn_xq.glsl: a batch step's x quantized once for the int8-x multi-row
// GEMV (matmul_gemvn.glsl, IDOT). The kernel's quantizing pass
// (gemvn_quant.glsl, dispatched just before it with the same bindings)
// writes it and every workgroup of the GEMV reads it, where each workgroup
// used to quantize every row into shared memory itself (run 31: 6144
// workgroups of gate+up each quantizing 8 x 4096 elements; run 32: the
// step of 8 rows 11.2 ms with the pass, 8 streams 511 tok/s against 238).
//
// Binding B_XQ (a scratch buffer), one region of XQ_ROW16 16-byte units
// per token row tt: its int8 x in element order (K bytes: 16 elements a
// unit); then, for each group g of gemv_groups.glsl (K/32 of them), the
// four floats a lane needs with the group's quants, so that it loads them
// at once: q4_K (GMODE 12), d of run 0's block and of run 1's, and d *
// sum(q) of run 0 and of run 1 (the mins); q6_K (14), d of each run's
// block; then the norm's 1/rms (HAS_NORM) in a unit of its own. One
// declaration, as uvec4 (llvmpipe was seen to mishandle a buffer read
// through two).
//
// Defines: XQ_ROW16 (K/16 + K/32 + 1), XQ_ACCESS (readonly or writeonly), K.

layout(std430, binding = B_XQ) XQ_ACCESS buffer XQb { uvec4 xq4[]; };

#ifndef XQ_T
#define XQ_T 0
#endif
#if XQ_T
// Slot-major (ZINC_GEMVN_XT=1, to measure): the same bytes ordered as the
// GEMV's lanes load them, so that the 32 lanes of a subgroup (groups g ..
// g+31) read one slot as 512 consecutive bytes, where in element order
// their 16-byte loads lie 64 bytes apart (16 L1 wavefronts a load, not
// 4; run 82: one token's x loads for all eight cut the 8-row step by a
// third). Row tt holds three slots of K/32 units: slot 0 and 1 the
// group's int8 x (q4_K: its two runs' 16 elements each; q6_K: its four
// runs' 8 elements, two a slot), slot 2 its four scales; then the norm.
#define XQ_SLOT(tt, j, g) xq4[(tt) * uint(XQ_ROW16) + (j) * (uint(K) / 32u) + (g)]
#define XQ_NORM(tt) xq4[(tt) * uint(XQ_ROW16) + 3u * (uint(K) / 32u)]
#else
// 16 elements of row tt's int8 x from its element k0 (k0 % 16 == 0).
#define XQ_Q16(tt, k0) xq4[(tt) * uint(XQ_ROW16) + ((k0) >> 4u)]
// Group g's four scales of row tt, as bits.
#define XQ_G(tt, g) xq4[(tt) * uint(XQ_ROW16) + uint(K) / 16u + (g)]
// Row tt's 1/rms, as bits (.x).
#define XQ_NORM(tt) xq4[(tt) * uint(XQ_ROW16) + uint(K) / 16u + uint(K) / 32u]
#endif
