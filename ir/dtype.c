/* ztype: the ggml type table, f16/bf16 conversions, reference dequantization
 * (bit-exact with ggml's plain-C dequantize_row_*), and the quantizers that
 * write test fixtures.
 *
 * Blocks are read and written byte by byte at fixed offsets rather than
 * through packed structs: the offsets below are the whole layout contract,
 * they are checked against dtypes.def at compile time, and a source pointer
 * needs no alignment. */
#include "dtype.h"

#include <math.h>
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
};

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
