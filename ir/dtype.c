/* ztype: the ggml type table, f16/bf16 conversions, reference dequantization
 * (bit-exact with ggml's plain-C dequantize_row_*), and the quantizers that
 * write test fixtures.
 *
 * Blocks are read and written byte by byte at fixed offsets rather than
 * through packed structs: the offsets below are the whole layout contract,
 * they are checked against dtypes.def at compile time, and a source pointer
 * needs no alignment. */
#include "dtype.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "zincc reads F32 rows with memcpy and assumes a little-endian host"
#endif

#define QK_K 256

/* Byte offsets inside one block (all multi-byte fields are little-endian). */
enum {
    Q8_0_D = 0,    /* f16 d */
    Q8_0_QS = 2,   /* int8 qs[32] */
    Q4_K_D = 0,    /* f16 d: scale of the 6-bit sub-block scales */
    Q4_K_DMIN = 2, /* f16 dmin: scale of the 6-bit sub-block mins */
    Q4_K_SC = 4,   /* u8 scales[12]: 8 (scale, min) pairs of 6 bits */
    Q4_K_QS = 16,  /* u8 qs[128]: 4-bit quants, two per byte */
    Q5_K_QH = 16,  /* u8 qh[32]: 5th bits (Q5_K shares d, dmin, scales with Q4_K) */
    Q5_K_QS = 48,  /* u8 qs[128]: low 4 bits */
    Q6_K_QL = 0,   /* u8 ql[128]: low 4 bits */
    Q6_K_QH = 128, /* u8 qh[64]: high 2 bits, four per byte */
    Q6_K_SC = 192, /* int8 scales[16] */
    Q6_K_D = 208,  /* f16 d */
    /* 32-element blocks: byte j of qs holds element j (low nibble) and j + 16 (high) */
    Q4_0_D = 0,     /* f16 d */
    Q4_0_QS = 2,    /* u8 qs[16] */
    Q4_1_D = 0,     /* f16 d */
    Q4_1_M = 2,     /* f16 m: the block's minimum */
    Q4_1_QS = 4,    /* u8 qs[16] */
    Q5_0_QH = 2,    /* u32 qh: bit e is the 5th bit of element e (Q5_0 shares d with Q4_0) */
    Q5_0_QS = 6,    /* u8 qs[16]: low 4 bits */
    Q5_1_QH = 4,    /* u32 qh (Q5_1 shares d, m with Q4_1) */
    Q5_1_QS = 8,    /* u8 qs[16] */
    IQ4_NL_D = 0,   /* f16 d */
    IQ4_NL_QS = 2,  /* u8 qs[16]: indices into kvalues_iq4nl */
    IQ4_XS_D = 0,   /* f16 d: scale of the 6-bit sub-block scales */
    IQ4_XS_SCH = 2, /* u16 scales_h: top 2 bits of sub-block j's scale at bits 2j */
    IQ4_XS_SCL = 4, /* u8 scales_l[4]: low 4 bits, sub-block j in nibble j % 2 of byte j / 2 */
    IQ4_XS_QS = 8,  /* u8 qs[128]: 8 sub-blocks of 32, laid out as IQ4_NL's qs */
};

/* ggml's kvalues_iq4nl: the 16 levels of IQ4_NL and IQ4_XS, a non-uniform
 * grid denser near zero (ggml-common.h). */
static const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113};

/* The table, indexed by ggml id; the holes (removed ids) stay zero. An id of
 * ZT_ID_LIMIT or more in dtypes.def makes this initializer fail to compile. */
static const ztype_info ztype_table[ZT_ID_LIMIT] = {
#define ZT(NAME, name, id, be, bb, flags) [id] = {name, be, bb, flags},
#include "dtypes.def"
#undef ZT
};

enum {
#define ZT(NAME, name, id, be, bb, flags) ZTE_##NAME = be, ZTB_##NAME = bb,
#include "dtypes.def"
#undef ZT
};
_Static_assert(ZTE_Q8_0 == 32 && ZTB_Q8_0 == Q8_0_QS + 32, "q8_0 layout");
_Static_assert(ZTE_Q4_K == QK_K && ZTB_Q4_K == Q4_K_QS + QK_K / 2, "q4_K layout");
_Static_assert(ZTE_Q5_K == QK_K && ZTB_Q5_K == Q5_K_QS + QK_K / 2 && Q5_K_QH + QK_K / 8 == Q5_K_QS,
               "q5_K layout");
_Static_assert(ZTE_Q6_K == QK_K && ZTB_Q6_K == Q6_K_D + 2 && Q6_K_SC + QK_K / 16 == Q6_K_D, "q6_K layout");
_Static_assert(ZTE_Q4_0 == 32 && ZTB_Q4_0 == Q4_0_QS + 16, "q4_0 layout");
_Static_assert(ZTE_Q4_1 == 32 && ZTB_Q4_1 == Q4_1_QS + 16, "q4_1 layout");
_Static_assert(ZTE_Q5_0 == 32 && ZTB_Q5_0 == Q5_0_QS + 16 && Q5_0_QH + 4 == Q5_0_QS, "q5_0 layout");
_Static_assert(ZTE_Q5_1 == 32 && ZTB_Q5_1 == Q5_1_QS + 16 && Q5_1_QH + 4 == Q5_1_QS, "q5_1 layout");
_Static_assert(ZTE_IQ4_NL == 32 && ZTB_IQ4_NL == IQ4_NL_QS + 16, "iq4_nl layout");
_Static_assert(ZTE_IQ4_XS == QK_K && ZTB_IQ4_XS == IQ4_XS_QS + QK_K / 2 &&
                   IQ4_XS_SCL + QK_K / 64 == IQ4_XS_QS,
               "iq4_xs layout");

/* ---- the table ---------------------------------------------------------- */

const ztype_info *ztype_get(uint32_t id) {
    if (id >= ZT_ID_LIMIT || !ztype_table[id].name) return NULL;
    return &ztype_table[id];
}

bool ztype_valid(uint32_t id) {
    return ztype_get(id) != NULL;
}

const char *ztype_name(ztype t) {
    const ztype_info *ti = ztype_get((uint32_t)t);
    return ti ? ti->name : "?";
}

void ztype_list(uint32_t flags, char *buf, size_t cap) {
    size_t o = 0;
    if (cap) buf[0] = 0;
    for (uint32_t id = 0; id < ZT_ID_LIMIT && o + 1 < cap; id++) {
        const ztype_info *ti = ztype_get(id);
        if (!ti || (ti->flags & flags) != flags) continue;
        int k = snprintf(buf + o, cap - o, "%s%s", o ? ", " : "", ti->name);
        o = k < 0 ? cap : o + (size_t)k;
    }
}

uint64_t ztype_row_bytes(ztype t, uint64_t n, bool *ok) {
    const ztype_info *ti = ztype_get((uint32_t)t);
    bool good = ti && n % ti->block_elems == 0;
    uint64_t blocks = good ? n / ti->block_elems : 0;
    if (good && blocks > UINT64_MAX / ti->block_bytes) good = false;
    if (ok) *ok = good;
    return good ? blocks * ti->block_bytes : 0;
}

/* ---- f16 and bf16 ------------------------------------------------------- */

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t rd16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline void wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    /* Normal: rebias the exponent from 15 to 127 (add 112 << 23). */
    if (em >= 0x0400u && em < 0x7c00u) return bits_f32(sign | ((em << 13) + (112u << 23)));
    if (em >= 0x7c00u) return bits_f32(sign | 0x7f800000u | (em & 0x3ffu) << 13);
    /* Zero or subnormal: em * 2^-24, exact in f32. */
    return bits_f32(sign | f32_bits((float)em * 0x1p-24f));
}

static inline uint16_t f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    /* 65520 is halfway between 65504 (odd mantissa) and 2^16: ties go to Inf. */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal half: round the 13 dropped bits to even */
        a += 0x0fffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | (a - (112u << 23)) >> 13);
    }
    if (a <= 0x33000000u) return (uint16_t)sign; /* <= 2^-25: 2^-25 itself ties to even 0 */
    /* Subnormal half: the value in units of 2^-24 is m >> (126 - e), rounded to even. */
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - (a >> 23); /* 14..24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    q += rem > half || (rem == half && (q & 1u));
    return (uint16_t)(sign | q);
}

float zf16_to_f32(uint16_t h) {
    return f16_to_f32(h);
}
uint16_t zf32_to_f16(float f) {
    return f32_to_f16(f);
}
float zbf16_to_f32(uint16_t h) {
    return bits_f32((uint32_t)h << 16);
}

uint16_t zf32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ---- dequantization ----------------------------------------------------- *
 * One function per type, each looping over whole blocks: the type switch runs
 * once per row, never per element. The float expressions follow ggml's
 * (same operands, same order), so the results are bit-identical. That needs
 * a*b - c left uncontracted: the build is ISO C11 (-std=c11), where GCC keeps
 * -ffp-contract=off; a GNU-mode build with FMA could differ in the last bit. */

typedef void (*dq_fn)(const uint8_t *src, float *y, int64_t nblocks);

static void dq_f32(const uint8_t *s, float *y, int64_t n) {
    memcpy(y, s, (size_t)n * sizeof(float));
}

static void dq_f16(const uint8_t *s, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] = f16_to_f32(rd16(s + 2 * i));
}

static void dq_bf16(const uint8_t *s, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] = bits_f32((uint32_t)rd16(s + 2 * i) << 16);
}

static void dq_q8_0(const uint8_t *s, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, s += ZTB_Q8_0, y += 32) {
        const float d = f16_to_f32(rd16(s + Q8_0_D));
        const int8_t *q = (const int8_t *)(s + Q8_0_QS);
        for (int l = 0; l < 32; l++)
            y[l] = q[l] * d;
    }
}

static inline uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q4_0: x = d * (q - 8). */
static void dq_q4_0(const uint8_t *s, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, s += ZTB_Q4_0, y += 32) {
        const float d = f16_to_f32(rd16(s + Q4_0_D));
        const uint8_t *q = s + Q4_0_QS;
        for (int j = 0; j < 16; j++) {
            y[j] = ((q[j] & 0xF) - 8) * d;
            y[j + 16] = ((q[j] >> 4) - 8) * d;
        }
    }
}

/* Q4_1: x = d * q + m (two roundings, as ggml's plain C). */
static void dq_q4_1(const uint8_t *s, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, s += ZTB_Q4_1, y += 32) {
        const float d = f16_to_f32(rd16(s + Q4_1_D)), m = f16_to_f32(rd16(s + Q4_1_M));
        const uint8_t *q = s + Q4_1_QS;
        for (int j = 0; j < 16; j++) {
            y[j] = (q[j] & 0xF) * d + m;
            y[j + 16] = (q[j] >> 4) * d + m;
        }
    }
}

/* Q5_0: x = d * (q - 16), q's 5th bit from bit e of qh. */
static void dq_q5_0(const uint8_t *s, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, s += ZTB_Q5_0, y += 32) {
        const float d = f16_to_f32(rd16(s + Q4_0_D));
        const uint32_t qh = rd32(s + Q5_0_QH);
        const uint8_t *q = s + Q5_0_QS;
        for (int j = 0; j < 16; j++) {
            y[j] = ((int)((q[j] & 0xF) | (qh >> j & 1) << 4) - 16) * d;
            y[j + 16] = ((int)((q[j] >> 4) | (qh >> (j + 16) & 1) << 4) - 16) * d;
        }
    }
}

/* Q5_1: x = d * q + m, q's 5th bit from bit e of qh. */
static void dq_q5_1(const uint8_t *s, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, s += ZTB_Q5_1, y += 32) {
        const float d = f16_to_f32(rd16(s + Q4_1_D)), m = f16_to_f32(rd16(s + Q4_1_M));
        const uint32_t qh = rd32(s + Q5_1_QH);
        const uint8_t *q = s + Q5_1_QS;
        for (int j = 0; j < 16; j++) {
            y[j] = (int)((q[j] & 0xF) | (qh >> j & 1) << 4) * d + m;
            y[j + 16] = (int)((q[j] >> 4) | (qh >> (j + 16) & 1) << 4) * d + m;
        }
    }
}

/* IQ4_NL: x = d * kvalues_iq4nl[q]. */
static void dq_iq4_nl(const uint8_t *s, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, s += ZTB_IQ4_NL, y += 32) {
        const float d = f16_to_f32(rd16(s + IQ4_NL_D));
        const uint8_t *q = s + IQ4_NL_QS;
        for (int j = 0; j < 16; j++) {
            y[j] = d * kvalues_iq4nl[q[j] & 0xF];
            y[j + 16] = d * kvalues_iq4nl[q[j] >> 4];
        }
    }
}

/* IQ4_XS: sub-block j of 32 has the 6-bit scale ls (low 4 bits in scales_l,
 * top 2 in scales_h) and x = (d * (ls - 32)) * kvalues_iq4nl[q]. */
static void dq_iq4_xs(const uint8_t *s, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, s += ZTB_IQ4_XS) {
        const float d = f16_to_f32(rd16(s + IQ4_XS_D));
        const unsigned sh = rd16(s + IQ4_XS_SCH);
        const uint8_t *q = s + IQ4_XS_QS;
        for (int j = 0; j < 8; j++, q += 16, y += 32) {
            const int ls = (s[IQ4_XS_SCL + j / 2] >> 4 * (j % 2) & 0xF) | (int)(sh >> 2 * j & 3) << 4;
            const float dl = d * (ls - 32);
            for (int l = 0; l < 16; l++) {
                y[l] = dl * kvalues_iq4nl[q[l] & 0xF];
                y[l + 16] = dl * kvalues_iq4nl[q[l] >> 4];
            }
        }
    }
}

/* Scale and min of sub-block j from the 12 packed bytes (ggml's
 * get_scale_min_k4): j < 4 sit in the low 6 bits of bytes j and j+4; j >= 4
 * take their low 4 bits from byte j+4 and their top 2 bits from the top of
 * bytes j-4 (scale) and j (min). */
static inline void k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4);
        *m = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
    }
}

static void dq_q4_k(const uint8_t *s, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, s += ZTB_Q4_K) {
        const float d = f16_to_f32(rd16(s + Q4_K_D)), dmin = f16_to_f32(rd16(s + Q4_K_DMIN));
        const uint8_t *q = s + Q4_K_QS;
        for (int j = 0; j < 8; j += 2, q += 32, y += 64) {
            uint8_t sc, m;
            k4_scale_min(j, s + Q4_K_SC, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            k4_scale_min(j + 1, s + Q4_K_SC, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++)
                y[l] = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++)
                y[32 + l] = d2 * (q[l] >> 4) - m2;
        }
    }
}

static void dq_q5_k(const uint8_t *s, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, s += ZTB_Q5_K) {
        const float d = f16_to_f32(rd16(s + Q4_K_D)), dmin = f16_to_f32(rd16(s + Q4_K_DMIN));
        const uint8_t *ql = s + Q5_K_QS, *qh = s + Q5_K_QH;
        for (int j = 0; j < 8; j += 2, ql += 32, y += 64) {
            uint8_t sc, m;
            k4_scale_min(j, s + Q4_K_SC, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            k4_scale_min(j + 1, s + Q4_K_SC, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            const int lo_bit = j, hi_bit = j + 1; /* sub-block j's 5th bits are bit j of qh[] */
            for (int l = 0; l < 32; l++)
                y[l] = d1 * ((ql[l] & 0xF) + ((qh[l] >> lo_bit & 1) << 4)) - m1;
            for (int l = 0; l < 32; l++)
                y[32 + l] = d2 * ((ql[l] >> 4) + ((qh[l] >> hi_bit & 1) << 4)) - m2;
        }
    }
}

/* Q6_K: each 128-element half uses 64 bytes of ql, 32 of qh and 8 scales.
 * Element l + 32k (k = 0..3) of a half takes the low or high nibble of
 * ql[l + 32 (k & 1)], bits 2k..2k+1 of qh[l], and scale (l / 16) + 2k. */
static void dq_q6_k(const uint8_t *s, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, s += ZTB_Q6_K) {
        const float d = f16_to_f32(rd16(s + Q6_K_D));
        const uint8_t *ql = s + Q6_K_QL, *qh = s + Q6_K_QH;
        const int8_t *sc = (const int8_t *)(s + Q6_K_SC);
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, y += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

/* ---- argument checks and dispatch --------------------------------------- */

static zstatus check_row(ztype t, const void *src, const void *dst, int64_t n, uint32_t need,
                         const ztype_info **out) {
    const ztype_info *ti = ztype_get((uint32_t)t);
    if (!ti || !(ti->flags & need)) return ZE_UNSUPPORTED;
    if (n < 0 || n % ti->block_elems != 0) return ZE_INVALID;
    if (n > 0 && (!src || !dst)) return ZE_INVALID;
    *out = ti;
    return ZOK;
}

static dq_fn dequant_fn(ztype t) {
    switch (t) {
    case ZT_F32: return dq_f32;
    case ZT_F16: return dq_f16;
    case ZT_BF16: return dq_bf16;
    case ZT_Q8_0: return dq_q8_0;
    case ZT_Q4_K: return dq_q4_k;
    case ZT_Q5_K: return dq_q5_k;
    case ZT_Q6_K: return dq_q6_k;
    case ZT_Q4_0: return dq_q4_0;
    case ZT_Q4_1: return dq_q4_1;
    case ZT_Q5_0: return dq_q5_0;
    case ZT_Q5_1: return dq_q5_1;
    case ZT_IQ4_NL: return dq_iq4_nl;
    case ZT_IQ4_XS: return dq_iq4_xs;
    default: return NULL;
    }
}

zstatus ztype_dequant_row(ztype t, const void *src, float *dst, int64_t n) {
    const ztype_info *ti;
    zstatus st = check_row(t, src, dst, n, ZTF_COMPUTE, &ti);
    if (st != ZOK) return st;
    dq_fn fn = dequant_fn(t);
    if (!fn) return ZE_INTERNAL; /* a ZTF_COMPUTE row in dtypes.def without a function */
    if (n > 0) fn(src, dst, n / ti->block_elems);
    return ZOK;
}

/* ---- quantization helpers ----------------------------------------------- */

/* v rounded half-to-even and clamped to [lo, hi]; NaN gives lo. The clamps
 * are written as compares (maxss/minss) rather than fmaxf/fminf, which GCC
 * calls out of line unless NaNs are ruled out. The 1.5 * 2^23 trick rounds in
 * the FPU's default mode without a libm call; it is exact because |v| < 2^22
 * once clamped. */
static inline int round_clamp(float v, int lo, int hi) {
    v = v > (float)lo ? v : (float)lo;
    v = v < (float)hi ? v : (float)hi;
    return (int)((v + 0x1.8p23f) - 0x1.8p23f);
}

/* f16 of a non-negative block scale, saturated at the largest finite half. */
static inline uint16_t scale_f16(float v) {
    return f32_to_f16(fminf(v, 65504.0f));
}

/* ---- symmetric sub-blocks x = s*q (Q8_0, Q6_K) ---------------------------- */

/* Grid 1/inv for one sub-block: returns sxl^2/sll (the error is sum x^2 minus
 * this, so larger is better) and the least-squares scale sxl/sll in *s. */
static float sym_try(const float *x, int n, float inv, int qlo, int qhi, float *s) {
    float sxl = 0, sll = 0;
    for (int i = 0; i < n; i++) {
        const float q = (float)round_clamp(x[i] * inv, qlo, qhi);
        sxl += x[i] * q;
        sll += q * q;
    }
    if (!(sll > 0)) return -1;
    *s = sxl / sll;
    return sxl * sxl / sll;
}

/* Scale s of x ~ s*q, q in [qlo, qhi]. The grids put the largest magnitude on
 * qlo or qhi (when qlo = -qhi - 1, qlo is the level with no positive twin),
 * scaled by up to +-2.3 %, then assign/refit rounds polish the best. */
static float sym_search(const float *x, int n, int qlo, int qhi) {
    float amax = 0, xm = 0, best = -1, bs = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            xm = x[i];
        }
    }
    if (amax == 0) return 0;
    for (int k = -6; k <= 6; k++) {
        for (int dir = 0; dir < (qlo == -qhi ? 1 : 2); dir++) {
            const float inv = (float)(dir ? qhi : qlo) * (1.0f + (float)k / 256.0f) / xm;
            float cs = 0, sc = sym_try(x, n, inv, qlo, qhi, &cs);
            if (sc > best) {
                best = sc;
                bs = cs;
            }
        }
    }
    for (int it = 0; it < 4 && bs != 0; it++) {
        float cs = 0, sc = sym_try(x, n, 1.0f / bs, qlo, qhi, &cs);
        if (!(sc > best)) break;
        best = sc;
        bs = cs;
    }
    return bs;
}

/* ---- Q8_0 ---------------------------------------------------------------- */

/* The scale comes from sym_search over [-127, 127] (ggml's own quantizer
 * never writes -128), and the quants are rounded against the f16-rounded d
 * that the block stores. */
static void q_q8_0(const float *x, uint8_t *out, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, x += 32, out += ZTB_Q8_0) {
        const uint16_t dh = scale_f16(fabsf(sym_search(x, 32, -127, 127)));
        const float d = f16_to_f32(dh), inv = d > 0 ? 1.0f / d : 0.0f;
        wr16(out + Q8_0_D, dh);
        for (int l = 0; l < 32; l++)
            out[Q8_0_QS + l] = (uint8_t)round_clamp(x[l] * inv, -127, 127);
    }
}

/* ---- Q4_0, Q4_1, Q5_0, Q5_1: llama.cpp's reference quantizers ---------- *
 * Ports of ggml's quantize_row_q{4,5}_{0,1}_ref, which llama-quantize uses
 * when no importance matrix is given: the same float operations in the same
 * order, so the same bytes (tests/llamacpp checks it). The one departure:
 * a block scale or minimum beyond the f16 range saturates at +-65504 (where
 * ggml writes an infinity), as every zincc quantizer does. */

/* f16 of a signed block scale, saturated at +-65504 (-0 stays -0). */
static inline uint16_t sat_f16(float v) {
    return f32_to_f16(v > 65504.0f ? 65504.0f : v < -65504.0f ? -65504.0f : v);
}

/* The element of largest magnitude, with its sign (the first one on ties). */
static float signed_absmax(const float *x, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

/* Symmetric 4- or 5-bit (nmax 15 or 31): d = max / -(nmax + 1) / 2, so that
 * the largest magnitude lands on level 0, q = min(nmax, trunc(x/d + half)).
 * Writes d and returns the levels in L[32]. */
static uint16_t sym32_levels(const float *x, int nmax, uint8_t *L) {
    const float half = (float)(nmax + 1) / 2, d = signed_absmax(x, 32) / -half, id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) {
        const int8_t q = (int8_t)(x[j] * id + (half + 0.5f)); /* truncates, as ggml's cast */
        L[j] = (uint8_t)(q < nmax ? q : nmax);
    }
    return sat_f16(d);
}

/* Affine 4- or 5-bit: d = (max - min) / nmax, m = min, q = trunc((x - min)/d + 0.5)
 * (clamped to 15 for Q4_1; ggml's Q5_1 does not clamp, and cannot pass 31). */
static void aff32_levels(const float *x, int nmax, uint8_t *out_d, uint8_t *out_m, uint8_t *L) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        min = x[j] < min ? x[j] : min;
        max = x[j] > max ? x[j] : max;
    }
    const float d = (max - min) / (float)nmax, id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) {
        const float v = (x[j] - min) * id + 0.5f;
        if (nmax == 15) {
            const int8_t q = (int8_t)v;
            L[j] = (uint8_t)(q < 15 ? q : 15);
        } else {
            L[j] = (uint8_t)v;
        }
    }
    wr16(out_d, sat_f16(d));
    wr16(out_m, sat_f16(min));
}

/* Byte j of qs: element j in the low nibble, j + 16 in the high; for Q5_*,
 * the 5th bit of element e goes to bit e of qh. */
static void pack32(const uint8_t *L, uint8_t *qs, uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((L[j] & 0xF) | (L[j + 16] & 0xF) << 4);
        h |= (uint32_t)(L[j] >> 4 & 1) << j | (uint32_t)(L[j + 16] >> 4 & 1) << (j + 16);
    }
    if (!qh) return;
    for (int k = 0; k < 4; k++)
        qh[k] = (uint8_t)(h >> 8 * k);
}

static void q_q4_0(const float *x, uint8_t *out, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, x += 32, out += ZTB_Q4_0) {
        uint8_t L[32];
        wr16(out + Q4_0_D, sym32_levels(x, 15, L));
        pack32(L, out + Q4_0_QS, NULL);
    }
}

static void q_q5_0(const float *x, uint8_t *out, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, x += 32, out += ZTB_Q5_0) {
        uint8_t L[32];
        wr16(out + Q4_0_D, sym32_levels(x, 31, L));
        pack32(L, out + Q5_0_QS, out + Q5_0_QH);
    }
}

static void q_q4_1(const float *x, uint8_t *out, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, x += 32, out += ZTB_Q4_1) {
        uint8_t L[32];
        aff32_levels(x, 15, out + Q4_1_D, out + Q4_1_M, L);
        pack32(L, out + Q4_1_QS, NULL);
    }
}

static void q_q5_1(const float *x, uint8_t *out, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, x += 32, out += ZTB_Q5_1) {
        uint8_t L[32];
        aff32_levels(x, 31, out + Q4_1_D, out + Q4_1_M, L);
        pack32(L, out + Q5_1_QS, out + Q5_1_QH);
    }
}

/* ---- IQ4_NL and IQ4_XS: ggml's quantize_iq4_nl / quantize_iq4_xs --------- *
 * A port of quantize_row_iq4_nl_impl without an importance matrix (weights
 * x^2) and with ntry = 7: what llama-quantize writes through
 * ggml_quantize_chunk. (ggml's quantize_row_iq4_nl_ref passes ntry = -1 and
 * is not what files hold.) Same operations in the same order, same bytes,
 * scales saturated as above; a block beyond 2^16, where ggml's sums
 * overflow, is searched at a smaller scale (iq4_range). */

/* Index of the level of kvalues_iq4nl nearest to v (ggml's best_index_int8:
 * a bisection, then the nearer neighbour, the upper one on a tie). */
static int iq4_index(float v) {
    const int8_t *k = kvalues_iq4nl;
    if (v <= k[0]) return 0;
    if (v >= k[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < k[mid])
            hi = mid;
        else
            lo = mid;
    }
    return v - k[hi - 1] < k[hi] - v ? hi - 1 : hi;
}

/* sum w q x and sum w q^2 over one sub-block of 32 for the grid 1/id, w = x^2. */
static void iq4_sums(const float *x, float id, float *sqx, float *sq2, uint8_t *L) {
    float a = 0, c = 0;
    for (int j = 0; j < 32; j++) {
        const int l = iq4_index(id * x[j]);
        const float q = kvalues_iq4nl[l], w = x[j] * x[j];
        if (L) L[j] = (uint8_t)l;
        a += w * q * x[j];
        c += w * q * q;
    }
    *sqx = a;
    *sq2 = c;
}

/* The scale of one sub-block of 32: the grid that puts the largest magnitude
 * on the level -127, refit by least squares, then 15 grids around it. */
static float iq4_sub_scale(const float *x, uint8_t *L) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    if (amax < 1e-15f) return 0; /* ggml's GROUP_MAX_EPS */
    float d = -max / kvalues_iq4nl[0], sqx, sq2;
    iq4_sums(x, 1 / d, &sqx, &sq2, L);
    d = sq2 > 0 ? sqx / sq2 : 0.f;
    float best = d * sqx;
    for (int t = -7; t <= 7; t++) {
        iq4_sums(x, (t + kvalues_iq4nl[0]) / max, &sqx, &sq2, NULL);
        if (sq2 > 0 && sqx * sqx > best * sq2) {
            d = sqx / sq2;
            best = d * sqx;
        }
    }
    return d;
}

/* ggml's IQ4 search weighs elements by x^2, sums w q x and compares squares
 * of those sums: past |x| = 2^16 they overflow (ggml then skips the refits,
 * and past 2^32 writes NaN scales). Such a block is searched scaled down by a
 * power of two, which changes no rounding, and its scale scaled back up (then
 * saturated). Returns the factor (1 for any block below 2^16, which is left
 * as it is), with the block to search in *use. */
static float iq4_range(const float *x, int n, float *buf, const float **use) {
    float amax = 0;
    for (int j = 0; j < n; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    *use = x;
    int e;
    frexpf(amax, &e);
    if (e <= 16) return 1;
    const float up = ldexpf(1.0f, e - 16);
    for (int j = 0; j < n; j++)
        buf[j] = x[j] / up;
    *use = buf;
    return up;
}

/* Sub-blocks of 32: byte j of qs holds element j and j + 16. */
static void iq4_pack(const uint8_t *L, int n, uint8_t *qs) {
    for (int i = 0; i < n / 32; i++)
        for (int j = 0; j < 16; j++)
            qs[16 * i + j] = (uint8_t)(L[32 * i + j] | L[32 * i + 16 + j] << 4);
}

static void q_iq4_nl(const float *xb, uint8_t *out, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, xb += 32, out += ZTB_IQ4_NL) {
        uint8_t L[32];
        float buf[32];
        const float *x, up = iq4_range(xb, 32, buf, &x);
        const float d = iq4_sub_scale(x, L), id = d ? 1 / d : 0;
        wr16(out + IQ4_NL_D, sat_f16(d * up));
        for (int j = 0; j < 32; j++)
            L[j] = (uint8_t)iq4_index(id * x[j]);
        iq4_pack(L, 32, out + IQ4_NL_QS);
    }
}

/* The 8 sub-block scales become 6-bit codes ls - 32 against d = -max/32,
 * max the scale of largest magnitude; levels are refit against each code. */
static void q_iq4_xs(const float *xb, uint8_t *out, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, xb += QK_K, out += ZTB_IQ4_XS) {
        float sc[8], max_scale = 0, amax_scale = 0, buf[QK_K];
        const float *x, up = iq4_range(xb, QK_K, buf, &x);
        uint8_t L[QK_K];
        for (int j = 0; j < 8; j++) {
            sc[j] = iq4_sub_scale(x + 32 * j, L + 32 * j);
            if (fabsf(sc[j]) > amax_scale) {
                amax_scale = fabsf(sc[j]);
                max_scale = sc[j];
            }
        }
        const float d = -max_scale / 32, id = d ? 1 / d : 0.f;
        unsigned sh = 0;
        memset(out + IQ4_XS_SCL, 0, QK_K / 64);
        for (int j = 0; j < 8; j++) {
            const int l = round_clamp(id * sc[j], -32, 31) + 32;
            const float dl = d * (float)(l - 32), idl = dl ? 1 / dl : 0.f;
            for (int i = 0; i < 32; i++)
                L[32 * j + i] = (uint8_t)iq4_index(idl * x[32 * j + i]);
            out[IQ4_XS_SCL + j / 2] |= (uint8_t)((l & 0xF) << 4 * (j % 2));
            sh |= (unsigned)(l >> 4) << 2 * j;
        }
        wr16(out + IQ4_XS_D, sat_f16(d * up));
        wr16(out + IQ4_XS_SCH, (uint16_t)sh);
        iq4_pack(L, QK_K, out + IQ4_XS_QS);
    }
}

/* ---- Q6_K --------------------------------------------------------------- *
 * 16 sub-blocks of 16 with q in [-32, 31]; their scales s become int8 against
 * d = max|s| / 127, trying the neighbours of each rounded scale with the error
 * measured through the exact dequantization formula. */

/* Picks the int8 scale of one sub-block of 16 near s/d (returned), and its levels + 32. */
static int q6_pick(const float *x, float s, float d, uint8_t *L) {
    const int c0 = d > 0 ? round_clamp(s / d, -128, 127) : 0;
    float best = INFINITY;
    int sc = c0;
    for (int c = c0 - 1; c <= c0 + 1; c++) {
        if (c < -128 || c > 127) continue;
        const float ds = d * (float)c, inv = ds != 0 ? 1.0f / ds : 0.0f;
        uint8_t T[16];
        float e = 0;
        for (int i = 0; i < 16; i++) {
            const int q = round_clamp(x[i] * inv, -32, 31);
            const float r = ds * (float)q - x[i];
            T[i] = (uint8_t)(q + 32);
            e += r * r;
        }
        if (e < best) {
            best = e;
            sc = c;
            memcpy(L, T, sizeof T);
        }
    }
    return sc;
}

static void q6_pack(const uint8_t *L, uint8_t *out) {
    for (int h = 0; h < 2; h++) {
        const uint8_t *v = L + 128 * h;
        uint8_t *ql = out + Q6_K_QL + 64 * h, *qh = out + Q6_K_QH + 32 * h;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((v[l] & 0xF) | (v[l + 64] & 0xF) << 4);
            ql[l + 32] = (uint8_t)((v[l + 32] & 0xF) | (v[l + 96] & 0xF) << 4);
            qh[l] =
                (uint8_t)(v[l] >> 4 | (v[l + 32] >> 4) << 2 | (v[l + 64] >> 4) << 4 | (v[l + 96] >> 4) << 6);
        }
    }
}

static void q_q6_k(const float *x, uint8_t *out, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, x += QK_K, out += ZTB_Q6_K) {
        float s[16], smax = 0;
        for (int j = 0; j < 16; j++) {
            s[j] = sym_search(x + 16 * j, 16, -32, 31);
            smax = fmaxf(smax, fabsf(s[j]));
        }
        const uint16_t dh = scale_f16(smax / 127.0f);
        const float d = f16_to_f32(dh);
        uint8_t L[QK_K];
        for (int j = 0; j < 16; j++)
            out[Q6_K_SC + j] = (uint8_t)q6_pick(x + 16 * j, s[j], d, L + 16 * j);
        q6_pack(L, out);
        wr16(out + Q6_K_D, dh);
    }
}

/* ---- Q4_K and Q5_K: affine sub-blocks x = s*q + mn ------------------------ *
 * Each sub-block of 32 gets its own (s >= 0, mn <= 0): the format stores the
 * offset as -dmin*m with m >= 0. The search tries grids slightly narrower and
 * wider than [min, max] (clipping the extremes sometimes lowers the total
 * error), fits (s, mn) by least squares for each grid's levels, and polishes the
 * best with a few assign/refit rounds. Then s and -mn are quantized to 6 bits
 * against the super-block d and dmin, trying the neighbours of the rounded
 * pair, with the error measured through the exact dequantization formula. */

/* Least-squares (s, mn) for fixed levels L, with s >= 0 and mn <= 0; returns
 * the squared error. Sums of the integer levels are exact in float. */
static float affine_fit(const float *x, const uint8_t *L, int n, float *s, float *mn) {
    float sl = 0, sll = 0, sx = 0, slx = 0;
    for (int i = 0; i < n; i++) {
        const float l = L[i];
        sl += l;
        sll += l * l;
        sx += x[i];
        slx += l * x[i];
    }
    float a = 0, c = fminf(sx / (float)n, 0.0f);
    const float det = (float)n * sll - sl * sl;
    if (det <= 0 && sll > 0) { /* one level for all: a pure scale */
        a = fmaxf(slx / sll, 0.0f);
        c = 0;
    } else if (det > 0) {
        a = ((float)n * slx - sl * sx) / det;
        c = (sll * sx - sl * slx) / det;
        if (c > 0) {
            c = 0;
            a = slx / sll;
        }
        if (a < 0) {
            a = 0;
            c = fminf(sx / (float)n, 0.0f);
        }
    }
    float err = 0;
    for (int i = 0; i < n; i++) {
        const float e = a * L[i] + c - x[i];
        err += e * e;
    }
    *s = a;
    *mn = c;
    return err;
}

static void affine_search(const float *x, int n, int nmax, float *s, float *mn) {
    float lo = 0, hi = x[0];
    for (int i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    *s = 0;
    *mn = lo;
    if (!(hi > lo)) return; /* constant block at or below zero: the offset says it all */
    uint8_t L[32];
    float best = INFINITY;
    for (int k = -8; k <= 8; k++) {
        const float inv = ((float)nmax + 0.125f * (float)k) / (hi - lo);
        for (int i = 0; i < n; i++)
            L[i] = (uint8_t)round_clamp((x[i] - lo) * inv, 0, nmax);
        float cs, cm, e = affine_fit(x, L, n, &cs, &cm);
        if (e < best) {
            best = e;
            *s = cs;
            *mn = cm;
        }
    }
    for (int it = 0; it < 4 && *s > 0; it++) {
        const float inv = 1.0f / *s;
        for (int i = 0; i < n; i++)
            L[i] = (uint8_t)round_clamp((x[i] - *mn) * inv, 0, nmax);
        float cs, cm, e = affine_fit(x, L, n, &cs, &cm);
        if (!(e < best)) break;
        best = e;
        *s = cs;
        *mn = cm;
    }
}

/* Picks the 6-bit scale ls and min lm of one sub-block of 32 near (s/d, m/dmin),
 * and its levels L. */
static void k4_pick(const float *x, int nmax, float s, float m, float d, float dmin, uint8_t *ls, uint8_t *lm,
                    uint8_t *L) {
    const int ls0 = d > 0 ? round_clamp(s / d, 0, 63) : 0, lm0 = dmin > 0 ? round_clamp(m / dmin, 0, 63) : 0;
    float best = INFINITY;
    *ls = (uint8_t)ls0;
    *lm = (uint8_t)lm0;
    for (int a = ls0 - 1; a <= ls0 + 1; a++) {
        for (int c = lm0 - 1; c <= lm0 + 1; c++) {
            if (a < 0 || a > 63 || c < 0 || c > 63) continue;
            const float d1 = d * (float)a, m1 = dmin * (float)c, inv = d1 > 0 ? 1.0f / d1 : 0.0f;
            uint8_t T[32];
            float e = 0;
            for (int i = 0; i < 32; i++) {
                T[i] = (uint8_t)round_clamp((x[i] + m1) * inv, 0, nmax);
                const float r = d1 * T[i] - m1 - x[i];
                e += r * r;
            }
            if (e < best) {
                best = e;
                *ls = (uint8_t)a;
                *lm = (uint8_t)c;
                memcpy(L, T, sizeof T);
            }
        }
    }
}

/* Inverse of k4_scale_min. */
static void k4_pack_scales(const uint8_t ls[8], const uint8_t lm[8], uint8_t out[12]) {
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)(ls[j] | (ls[j + 4] >> 4) << 6);
        out[j + 4] = (uint8_t)(lm[j] | (lm[j + 4] >> 4) << 6);
        out[j + 8] = (uint8_t)((ls[j + 4] & 0xF) | (lm[j + 4] & 0xF) << 4);
    }
}

/* Fills d, dmin and scales of a Q4_K/Q5_K block and the levels L[256]. */
static void k4_block_head(const float *x, int nmax, uint8_t *out, uint8_t *L) {
    float s[8], m[8], smax = 0, mmax = 0;
    for (int j = 0; j < 8; j++) {
        float mn;
        affine_search(x + 32 * j, 32, nmax, &s[j], &mn);
        m[j] = -mn;
        smax = fmaxf(smax, s[j]);
        mmax = fmaxf(mmax, m[j]);
    }
    const uint16_t dh = scale_f16(smax / 63.0f), mh = scale_f16(mmax / 63.0f);
    const float d = f16_to_f32(dh), dmin = f16_to_f32(mh);
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++)
        k4_pick(x + 32 * j, nmax, s[j], m[j], d, dmin, &ls[j], &lm[j], L + 32 * j);
    wr16(out + Q4_K_D, dh);
    wr16(out + Q4_K_DMIN, mh);
    k4_pack_scales(ls, lm, out + Q4_K_SC);
}

static void q_q4_k(const float *x, uint8_t *out, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, x += QK_K, out += ZTB_Q4_K) {
        uint8_t L[QK_K];
        k4_block_head(x, 15, out, L);
        /* Byte l of each 32-byte group holds element l (low nibble) and l + 32 (high) of 64. */
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++)
                out[Q4_K_QS + 32 * p + l] = (uint8_t)(L[64 * p + l] | L[64 * p + 32 + l] << 4);
    }
}

static void q_q5_k(const float *x, uint8_t *out, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, x += QK_K, out += ZTB_Q5_K) {
        uint8_t L[QK_K];
        k4_block_head(x, 31, out, L);
        memset(out + Q5_K_QH, 0, QK_K / 8);
        for (int p = 0; p < 4; p++) {
            for (int l = 0; l < 32; l++) {
                const uint8_t a = L[64 * p + l], c = L[64 * p + 32 + l];
                out[Q5_K_QS + 32 * p + l] = (uint8_t)((a & 0xF) | (c & 0xF) << 4);
                out[Q5_K_QH + l] |= (uint8_t)((a >> 4) << (2 * p) | (c >> 4) << (2 * p + 1));
            }
        }
    }
}

/* ---- plain types and dispatch --------------------------------------------- */

typedef void (*q_fn)(const float *x, uint8_t *out, int64_t nblocks);

static void q_f32(const float *x, uint8_t *out, int64_t n) {
    memcpy(out, x, (size_t)n * sizeof(float));
}

static void q_f16(const float *x, uint8_t *out, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        wr16(out + 2 * i, f32_to_f16(x[i]));
}

static void q_bf16(const float *x, uint8_t *out, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        wr16(out + 2 * i, zf32_to_bf16(x[i]));
}

static q_fn quant_fn(ztype t) {
    switch (t) {
    case ZT_F32: return q_f32;
    case ZT_F16: return q_f16;
    case ZT_BF16: return q_bf16;
    case ZT_Q8_0: return q_q8_0;
    case ZT_Q4_K: return q_q4_k;
    case ZT_Q5_K: return q_q5_k;
    case ZT_Q6_K: return q_q6_k;
    case ZT_Q4_0: return q_q4_0;
    case ZT_Q4_1: return q_q4_1;
    case ZT_Q5_0: return q_q5_0;
    case ZT_Q5_1: return q_q5_1;
    case ZT_IQ4_NL: return q_iq4_nl;
    case ZT_IQ4_XS: return q_iq4_xs;
    default: return NULL;
    }
}

zstatus ztype_quantize_row(ztype t, const float *src, void *dst, int64_t n) {
    const ztype_info *ti;
    zstatus st = check_row(t, src, dst, n, ZTF_QUANTIZE, &ti);
    if (st != ZOK) return st;
    q_fn fn = quant_fn(t);
    if (!fn) return ZE_INTERNAL; /* a ZTF_QUANTIZE row in dtypes.def without a function */
    if (ti->flags & ZTF_QUANT) {
        /* Block scales are computed from the data: one NaN or Inf would poison its block. */
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(src[i])) return ZE_INVALID;
    }
    if (n > 0) fn(src, dst, n / ti->block_elems);
    return ZOK;
}

void ztype_q6_planes(const uint8_t *src, uint8_t *dst, uint64_t rows, uint64_t k) {
    static const struct {
        uint32_t at, len;
    } field[4] = {{0, 128}, {128, 64}, {192, 16}, {208, 2}}; /* ql, qh, scales, d */
    uint64_t nb = k / 256, rb = nb * 210;
    for (uint64_t r = 0; r < rows; r++) {
        const uint8_t *s = src + r * rb;
        uint8_t *o = dst + r * rb;
        for (int f = 0; f < 4; f++)
            for (uint64_t j = 0; j < nb; j++, o += field[f].len)
                memcpy(o, s + j * 210 + field[f].at, field[f].len);
    }
}
