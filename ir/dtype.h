/* ztype: tensor element types, their block layouts (exactly ggml's), reference
 * dequantization and the quantizers used to write test fixtures.
 *
 * Layouts (QK_K = 256 elements per super-block, all little-endian):
 *   Q8_0: { f16 d; int8 qs[32]; }                                  x = d * q
 *   Q4_K: { f16 d, dmin; u8 scales[12]; u8 qs[128]; }              8 sub-blocks of 32,
 *         6-bit scale/min pairs packed in scales[], x = d*sc*q - dmin*m
 *   Q5_K: { f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]; }   as Q4_K with a 5th bit
 *   Q6_K: { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d; }         16 sub-blocks of 16,
 *         x = d * scale * (q - 32)
 * See ir/dtype.c for the bit-level details. */
#ifndef ZINC_DTYPE_H
#define ZINC_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zstatus.h"

enum {
    ZTF_FLOAT = 1 << 0,
    ZTF_INT = 1 << 1,
    ZTF_QUANT = 1 << 2,
    ZTF_COMPUTE = 1 << 3,  /* ztype_dequant_row handles it */
    ZTF_QUANTIZE = 1 << 4, /* ztype_quantize_row handles it */
};

typedef enum ztype {
#define ZT(NAME, name, id, be, bb, flags) ZT_##NAME = id,
#include "dtypes.def"
#undef ZT
    ZT_ID_LIMIT = 43 /* ids are < this; not every id below is a type */
} ztype;

typedef struct ztype_info {
    const char *name;
    uint32_t block_elems, block_bytes, flags;
} ztype_info;

/* NULL for an id that is not a (current) ggml type. */
const ztype_info *ztype_get(uint32_t id);
bool ztype_valid(uint32_t id);
const char *ztype_name(ztype t); /* "?" for an unknown id */

/* The names of the types with all of `flags`, in id order, comma-separated
 * ("f32, f16, q4_0, ..."), into buf (truncated to cap - 1 characters). */
void ztype_list(uint32_t flags, char *buf, size_t cap);

/* Bytes for a row of n elements; n must be a multiple of the block size
 * (returns 0 with *ok false otherwise, on overflow, or for an unknown type).
 * ok may be NULL. */
uint64_t ztype_row_bytes(ztype t, uint64_t n, bool *ok);
/* q6_K rows of k elements (k % 256 == 0) rewritten as the weight-layout
 * pass's planes (ir.h ZWL_Q6_PLANES): each row's blocks' 128 quant bytes,
 * then their 64 high-bit bytes, 16 scales and 2-byte d's. src and dst hold
 * rows * 210 k / 256 bytes and must not overlap. The device does the same in
 * place (backend/glsl/q6_planes.glsl); this is its reference. */
void ztype_q6_planes(const uint8_t *src, uint8_t *dst, uint64_t rows, uint64_t k);

/* Half and bfloat16 conversions, round-to-nearest-even, exact on Inf,
 * subnormals kept (never flushed). A NaN stays a NaN: it is made quiet and
 * keeps the top bits of its payload (as ggml's bf16 conversion and x86 F16C
 * do; ggml's portable f16 fallback returns 0x7e00 instead). */
float zf16_to_f32(uint16_t h);
uint16_t zf32_to_f16(float f);
float zbf16_to_f32(uint16_t h);
uint16_t zf32_to_bf16(float f);

/* Dequantize n elements (n a multiple of the block size) from src into dst,
 * bit-exact with ggml's dequantize_row_* (plain C reference, no FMA).
 * ZE_UNSUPPORTED for a type without ZTF_COMPUTE; ZE_INVALID for n < 0, n not
 * a multiple of the block size, or a NULL pointer with n > 0. */
zstatus ztype_dequant_row(ztype t, const void *src, float *dst, int64_t n);

/* Quantize n elements into dst (ztype_row_bytes(t, n) bytes).
 * ZE_UNSUPPORTED for a type without ZTF_QUANTIZE; ZE_INVALID as for
 * ztype_dequant_row, and for a NaN or Inf in src when t is block-quantized.
 * Deterministic: the same input gives the same bytes. Scales that exceed the
 * f16 range saturate at 65504. */
zstatus ztype_quantize_row(ztype t, const float *src, void *dst, int64_t n);

#endif
