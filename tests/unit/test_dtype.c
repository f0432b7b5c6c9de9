/* Tests for ir/dtype: the type table against ggml's numbers, f16/bf16
 * conversions, dequantization of blocks built byte by byte (expected values
 * worked out by hand or from the unpacked fields, never through dtype.c), and
 * quantize -> dequantize error bounds on seeded random data. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/dtype.h"
#include "testutil.h"

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v) {
    put16(p, (uint16_t)v);
    put16(p + 2, (uint16_t)(v >> 16));
}

/* ---- the table ---------------------------------------------------------- */

/* ggml_type ids, type_traits names, blck_size and sizeof(block_*) from
 * ggml.h / ggml.c / ggml-common.h. */
static const struct {
    uint32_t id;
    const char *name;
    uint32_t be, bb;
} ggml_types[] = {
    {0, "f32", 1, 4},         {1, "f16", 1, 2},         {2, "q4_0", 32, 18},      {3, "q4_1", 32, 20},
    {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},      {8, "q8_0", 32, 34},      {9, "q8_1", 32, 36},
    {10, "q2_K", 256, 84},    {11, "q3_K", 256, 110},   {12, "q4_K", 256, 144},   {13, "q5_K", 256, 176},
    {14, "q6_K", 256, 210},   {15, "q8_K", 256, 292},   {16, "iq2_xxs", 256, 66}, {17, "iq2_xs", 256, 74},
    {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},   {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110},
    {22, "iq2_s", 256, 82},   {23, "iq4_xs", 256, 136}, {24, "i8", 1, 1},         {25, "i16", 1, 2},
    {26, "i32", 1, 4},        {27, "i64", 1, 8},        {28, "f64", 1, 8},        {29, "iq1_m", 256, 56},
    {30, "bf16", 1, 2},       {34, "tq1_0", 256, 54},   {35, "tq2_0", 256, 66},   {39, "mxfp4", 32, 17},
    {40, "nvfp4", 64, 36},    {41, "q1_0", 128, 18},    {42, "q2_0", 64, 18},
};
#define N_GGML_TYPES (sizeof ggml_types / sizeof ggml_types[0])

Test(dtype, table_matches_ggml) {
    for (uint32_t id = 0; id < ZT_ID_LIMIT + 8; id++) {
        const ztype_info *ti = ztype_get(id);
        size_t k = 0;
        while (k < N_GGML_TYPES && ggml_types[k].id != id)
            k++;
        if (k == N_GGML_TYPES) {
            cr_expect_null(ti, "id %u is not a ggml type", id);
            cr_expect(!ztype_valid(id));
            cr_expect_str_eq(ztype_name((ztype)id), "?");
            continue;
        }
        cr_assert_not_null(ti, "id %u", id);
        cr_expect(ztype_valid(id));
        cr_expect_str_eq(ti->name, ggml_types[k].name);
        cr_expect_str_eq(ztype_name((ztype)id), ggml_types[k].name);
        cr_expect_eq(ti->block_elems, ggml_types[k].be, "%s block_elems", ti->name);
        cr_expect_eq(ti->block_bytes, ggml_types[k].bb, "%s block_bytes", ti->name);
    }
    cr_expect_null(ztype_get(UINT32_MAX));
    cr_expect_eq(ZT_Q4_K, 12);
    cr_expect_eq(ZT_BF16, 30);
}

Test(dtype, flags) {
    const ztype with[] = {ZT_F32,  ZT_F16,  ZT_BF16, ZT_Q8_0, ZT_Q4_K,   ZT_Q5_K,  ZT_Q6_K,
                          ZT_Q4_0, ZT_Q4_1, ZT_Q5_0, ZT_Q5_1, ZT_IQ4_NL, ZT_IQ4_XS};
    int ncompute = 0, nquantize = 0;
    for (uint32_t id = 0; id < ZT_ID_LIMIT; id++) {
        const ztype_info *ti = ztype_get(id);
        if (!ti) continue;
        ncompute += !!(ti->flags & ZTF_COMPUTE);
        nquantize += !!(ti->flags & ZTF_QUANTIZE);
        cr_expect(!!(ti->flags & ZTF_QUANT) == (ti->block_elems > 1), "%s", ti->name);
    }
    for (size_t i = 0; i < sizeof with / sizeof with[0]; i++) {
        cr_expect(ztype_get(with[i])->flags & ZTF_COMPUTE, "%s", ztype_name(with[i]));
        cr_expect(ztype_get(with[i])->flags & ZTF_QUANTIZE, "%s", ztype_name(with[i]));
    }
    cr_expect_eq(ncompute, 13);
    cr_expect_eq(nquantize, 13);
}

Test(dtype, list_by_flags) {
    char buf[256];
    ztype_list(ZTF_COMPUTE, buf, sizeof buf);
    cr_expect_str_eq(buf, "f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, bf16");
    ztype_list(ZTF_INT, buf, sizeof buf);
    cr_expect_str_eq(buf, "i8, i16, i32, i64");
    ztype_list(ZTF_INT | ZTF_QUANT, buf, sizeof buf);
    cr_expect_str_eq(buf, "", "no type is both");
    ztype_list(ZTF_COMPUTE, buf, 12);
    cr_expect_str_eq(buf, "f32, f16, q", "truncated to the buffer");
}

Test(dtype, row_bytes) {
    bool ok = false;
    cr_expect_eq(ztype_row_bytes(ZT_Q4_K, 4096, &ok), 16 * 144);
    cr_expect(ok);
    cr_expect_eq(ztype_row_bytes(ZT_Q8_0, 64, &ok), 68);
    cr_expect(ok);
    cr_expect_eq(ztype_row_bytes(ZT_Q6_K, 256, NULL), 210);
    cr_expect_eq(ztype_row_bytes(ZT_F16, 7, &ok), 14);
    cr_expect(ok);
    cr_expect_eq(ztype_row_bytes(ZT_MXFP4, 64, &ok), 34);
    cr_expect_eq(ztype_row_bytes(ZT_F32, 0, &ok), 0);
    cr_expect(ok, "an empty row is fine");

    /* n not a multiple of the block size */
    cr_expect_eq(ztype_row_bytes(ZT_Q4_K, 4095, &ok), 0);
    cr_expect(!ok);
    cr_expect_eq(ztype_row_bytes(ZT_Q8_0, 33, &ok), 0);
    cr_expect(!ok);
    /* unknown and removed ids */
    cr_expect_eq(ztype_row_bytes((ztype)4, 32, &ok), 0);
    cr_expect(!ok);
    cr_expect_eq(ztype_row_bytes((ztype)99, 32, &ok), 0);
    cr_expect(!ok);

    /* overflow: 2^62 f32 elements need 2^64 bytes; one fewer fits */
    cr_expect_eq(ztype_row_bytes(ZT_F32, 1ull << 62, &ok), 0);
    cr_expect(!ok);
    cr_expect_eq(ztype_row_bytes(ZT_F32, (1ull << 62) - 1, &ok), 4 * ((1ull << 62) - 1));
    cr_expect(ok);
    /* 2^56 - 1 super-blocks: 210 bytes each still fit in 64 bits, 292 (q8_K) do not */
    cr_expect_eq(ztype_row_bytes(ZT_Q6_K, UINT64_MAX - 255, &ok), 210 * ((1ull << 56) - 1));
    cr_expect(ok);
    cr_expect_eq(ztype_row_bytes(ZT_Q8_K, UINT64_MAX - 255, &ok), 0);
    cr_expect(!ok);
    /* q8_0: 34 bytes per 32, so n = 32 * (2^64 / 34 + 1) overflows, one block less fits */
    uint64_t nb = UINT64_MAX / 34;
    cr_expect_eq(ztype_row_bytes(ZT_Q8_0, 32 * nb, &ok), 34 * nb);
    cr_expect(ok);
    cr_expect_eq(ztype_row_bytes(ZT_Q8_0, 32 * (nb + 1), &ok), 0);
    cr_expect(!ok);
    cr_expect_eq(ztype_row_bytes(ZT_I64, UINT64_MAX / 8, &ok), (UINT64_MAX / 8) * 8);
    cr_expect(ok);
    cr_expect_eq(ztype_row_bytes(ZT_I64, UINT64_MAX / 8 + 1, &ok), 0);
    cr_expect(!ok);
}

/* ---- f16 and bf16 ------------------------------------------------------- */

Test(dtype, f16_every_half_round_trips) {
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = zf16_to_f32((uint16_t)h);
        bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        cr_assert_eq(isnan(f), nan, "h=%04x", h);
        if (nan) {
            uint16_t back = zf32_to_f16(f);
            cr_assert((back & 0x7c00) == 0x7c00 && (back & 0x200), "NaN %04x came back as %04x", h, back);
            cr_assert_eq(back & 0x8000, h & 0x8000, "NaN sign %04x", h);
        } else {
            cr_assert_eq(zf32_to_f16(f), h, "h=%04x f=%a", h, f);
        }
    }
}

Test(dtype, f16_decodes_exactly) {
    cr_expect_eq(zf16_to_f32(0x3c00), 1.0f);
    cr_expect_eq(zf16_to_f32(0xc000), -2.0f);
    cr_expect_eq(zf16_to_f32(0x7bff), 65504.0f);
    cr_expect_eq(zf16_to_f32(0x0400), 0x1p-14f, "smallest normal");
    cr_expect_eq(zf16_to_f32(0x0001), 0x1p-24f, "smallest subnormal");
    cr_expect_eq(zf16_to_f32(0x03ff), 1023 * 0x1p-24f, "largest subnormal");
    cr_expect_eq(zf16_to_f32(0x3555), 0x1.554p-2f);
    cr_expect_eq(fbits(zf16_to_f32(0x8000)), 0x80000000u, "-0");
    cr_expect(isinf(zf16_to_f32(0x7c00)) && zf16_to_f32(0x7c00) > 0);
    cr_expect(isinf(zf16_to_f32(0xfc00)) && zf16_to_f32(0xfc00) < 0);
    cr_expect(isnan(zf16_to_f32(0x7e00)));
    cr_expect(isnan(zf16_to_f32(0x7c01)), "signalling NaN");
}

Test(dtype, f16_rounds_to_nearest_even) {
    cr_expect_eq(zf32_to_f16(1.0f), 0x3c00);
    cr_expect_eq(zf32_to_f16(-0.0f), 0x8000);
    cr_expect_eq(zf32_to_f16(1.0f + 0x1p-11f), 0x3c00, "tie, even is 1.0");
    cr_expect_eq(zf32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02, "tie, odd neighbour rounds up");
    cr_expect_eq(zf32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01, "just above the tie");
    cr_expect_eq(zf32_to_f16(65504.0f), 0x7bff);
    cr_expect_eq(zf32_to_f16(65519.996f), 0x7bff, "below the tie to Inf");
    cr_expect_eq(zf32_to_f16(65520.0f), 0x7c00, "tie between 65504 and 2^16 goes to Inf");
    cr_expect_eq(zf32_to_f16(1e10f), 0x7c00);
    cr_expect_eq(zf32_to_f16(-1e10f), 0xfc00);
    cr_expect_eq(zf32_to_f16(INFINITY), 0x7c00);
    cr_expect_eq(zf32_to_f16(-INFINITY), 0xfc00);
    /* subnormals: units of 2^-24 */
    cr_expect_eq(zf32_to_f16(0x1p-25f), 0x0000, "half a unit ties to even 0");
    cr_expect_eq(zf32_to_f16(-0x1p-25f), 0x8000);
    cr_expect_eq(zf32_to_f16(0x1.000002p-25f), 0x0001, "just above half a unit");
    cr_expect_eq(zf32_to_f16(3 * 0x1p-25f), 0x0002, "1.5 units tie to 2");
    cr_expect_eq(zf32_to_f16(5 * 0x1p-25f), 0x0002, "2.5 units tie to 2");
    cr_expect_eq(zf32_to_f16(0x1p-30f), 0x0000);
    cr_expect_eq(zf32_to_f16(1023.5f * 0x1p-24f), 0x0400, "tie past the largest subnormal");
    cr_expect_eq(zf32_to_f16(0x1p-14f), 0x0400);
    cr_expect_eq(zf32_to_f16(bitsf(0x00000001)), 0x0000, "f32 subnormal");
    /* NaNs stay NaN, quiet, with the sign and the top payload bits */
    cr_expect_eq(zf32_to_f16(bitsf(0x7fc00000)), 0x7e00);
    cr_expect_eq(zf32_to_f16(bitsf(0xffc00000)), 0xfe00);
    cr_expect_eq(zf32_to_f16(bitsf(0x7f800001)), 0x7e00, "signalling NaN, payload below f16's bits");
    cr_expect_eq(zf32_to_f16(bitsf(0x7fa02000)), 0x7f01);
}

/* Nearest-even checked as a property against the decoder: no other half is
 * closer, and a tie picks the even mantissa. Computed in double (exact). */
static void expect_nearest_f16(float f) {
    uint16_t h = zf32_to_f16(f);
    double err = fabs((double)zf16_to_f32(h) - f);
    for (int dlt = -1; dlt <= 1; dlt += 2) {
        uint16_t o = (uint16_t)(h + dlt);
        if ((o & 0x7fff) > 0x7c00 || ((o ^ h) & 0x8000)) continue;
        double oerr = fabs((double)zf16_to_f32(o) - f);
        cr_assert(err < oerr || (err == oerr && !(h & 1)), "f=%a got %04x, %04x is at least as close", f, h,
                  o);
    }
}

Test(dtype, f16_nearest_property) {
    tu_rng r = tu_rng_seed(11);
    for (int i = 0; i < 200000; i++) {
        /* random sign, exponent across subnormal..overflow, random mantissa */
        uint32_t u = (uint32_t)tu_next(&r);
        uint32_t e = 100 + (uint32_t)(tu_next(&r) % 44); /* 2^-27 .. 2^16 */
        float f = bitsf((u & 0x807fffffu) | e << 23);
        if (fabsf(f) >= 65520.0f) continue;
        expect_nearest_f16(f);
    }
}

Test(dtype, bf16) {
    cr_expect_eq(zf32_to_bf16(1.0f), 0x3f80);
    cr_expect_eq(zbf16_to_f32(0x3f80), 1.0f);
    cr_expect_eq(zbf16_to_f32(0xc0a0), -5.0f);
    cr_expect_eq(zf32_to_bf16(bitsf(0x3f808000)), 0x3f80, "tie, even stays");
    cr_expect_eq(zf32_to_bf16(bitsf(0x3f818000)), 0x3f82, "tie, odd rounds up");
    cr_expect_eq(zf32_to_bf16(bitsf(0x3f808001)), 0x3f81, "above the tie");
    cr_expect_eq(zf32_to_bf16(bitsf(0x3f807fff)), 0x3f80, "below the tie");
    cr_expect_eq(zf32_to_bf16(bitsf(0x7f7fffff)), 0x7f80, "FLT_MAX rounds to Inf");
    cr_expect_eq(zf32_to_bf16(bitsf(0x7f7f7fff)), 0x7f7f);
    cr_expect_eq(zf32_to_bf16(INFINITY), 0x7f80);
    cr_expect_eq(zf32_to_bf16(-INFINITY), 0xff80);
    cr_expect_eq(zf32_to_bf16(-0.0f), 0x8000);
    /* subnormals are rounded, not flushed */
    cr_expect_eq(zf32_to_bf16(bitsf(0x00010000)), 0x0001);
    cr_expect_eq(zf32_to_bf16(bitsf(0x00008000)), 0x0000, "tie to even 0");
    cr_expect_eq(zf32_to_bf16(bitsf(0x00018000)), 0x0002, "tie to even 2");
    cr_expect_eq(zbf16_to_f32(0x0001), bitsf(0x00010000));
    /* NaN: quiet, payload top kept */
    cr_expect_eq(zf32_to_bf16(bitsf(0x7f800001)), 0x7fc0);
    cr_expect_eq(zf32_to_bf16(bitsf(0xff810000)), 0xffc1);
    cr_expect(isnan(zbf16_to_f32(0x7fc0)));
    /* every bf16 survives the round trip */
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = zbf16_to_f32((uint16_t)h);
        if (isnan(f))
            cr_assert(isnan(zbf16_to_f32(zf32_to_bf16(f))));
        else
            cr_assert_eq(zf32_to_bf16(f), h, "bf16 %04x", h);
    }
}

/* ---- dequantization of hand-built blocks -------------------------------- */

Test(dtype, dequant_plain_rows) {
    const uint8_t f16[] = {0x00, 0x3c, 0x00, 0xc0, 0x00, 0x7c, 0x01, 0x00, 0x00, 0x80, 0xff, 0x7b};
    float y[6];
    cr_assert_eq(ztype_dequant_row(ZT_F16, f16, y, 6), ZOK);
    cr_expect_eq(y[0], 1.0f);
    cr_expect_eq(y[1], -2.0f);
    cr_expect(isinf(y[2]) && y[2] > 0);
    cr_expect_eq(y[3], 0x1p-24f);
    cr_expect_eq(fbits(y[4]), 0x80000000u);
    cr_expect_eq(y[5], 65504.0f);

    const uint8_t bf16[] = {0x80, 0x3f, 0xa0, 0xc0, 0x49, 0x40};
    cr_assert_eq(ztype_dequant_row(ZT_BF16, bf16, y, 3), ZOK);
    cr_expect_eq(y[0], 1.0f);
    cr_expect_eq(y[1], -5.0f);
    cr_expect_eq(y[2], 3.140625f); /* 0x4049 = 1.5703125 * 2 */

    /* f32 from an odd address: no alignment is assumed */
    uint8_t raw[13];
    const float vals[3] = {1.5f, -0.25f, 1e30f};
    memcpy(raw + 1, vals, 12);
    cr_assert_eq(ztype_dequant_row(ZT_F32, raw + 1, y, 3), ZOK);
    cr_expect_eq(y[0], 1.5f);
    cr_expect_eq(y[1], -0.25f);
    cr_expect_eq(y[2], 1e30f);
}

Test(dtype, dequant_q8_0_by_hand) {
    /* two blocks: d = 0x2e66 = 1.599609375 * 2^-4 = 0.0999755859375, then d = 0xc000 = -2 */
    uint8_t b[2 * 34];
    put16(b, 0x2e66);
    put16(b + 34, 0xc000);
    const int8_t q0[8] = {-128, -127, -1, 0, 1, 2, 100, 127};
    for (int i = 0; i < 32; i++) {
        b[2 + i] = (uint8_t)q0[i % 8];
        b[36 + i] = (uint8_t)(int8_t)(i - 16);
    }
    float y[64];
    cr_assert_eq(ztype_dequant_row(ZT_Q8_0, b, y, 64), ZOK);
    cr_expect_eq(y[0], -12.796875f); /* -128 * 0.0999755859375 */
    cr_expect_eq(y[7], 12.6968994140625f);
    cr_expect_eq(y[3], 0.0f);
    for (int i = 0; i < 32; i++) {
        cr_expect_eq(y[i], (float)(q0[i % 8] * 0.0999755859375), "block 0 [%d]", i);
        cr_expect_eq(y[32 + i], (float)((i - 16) * -2.0), "block 1 [%d]", i);
    }
}

/* Q4_K/Q5_K scales for these tests: sub-blocks 4..7 use values >= 16 so that
 * their top two bits travel in the high bits of bytes 0..7. */
static const uint8_t k_sc[8] = {1, 2, 63, 10, 17, 33, 48, 63};
static const uint8_t k_m[8] = {0, 5, 7, 63, 20, 1, 62, 31};
/* Packed by hand:
 *   bytes 0..3 = sc[0..3] | (sc[4..7] >> 4) << 6: 1|1<<6, 2|2<<6, 63|3<<6, 10|3<<6
 *   bytes 4..7 = m[0..3]  | (m[4..7] >> 4) << 6:  0|1<<6, 5|0<<6, 7|3<<6, 63|1<<6
 *   bytes 8..11 = (sc[4..7] & 15) | (m[4..7] & 15) << 4: 1|4<<4, 1|1<<4, 0|14<<4, 15|15<<4 */
static const uint8_t k_packed[12] = {0x41, 0x82, 0xff, 0xca, 0x40, 0x05, 0xc7, 0x7f, 0x41, 0x11, 0xe0, 0xff};

Test(dtype, dequant_q4_k_by_hand) {
    /* block 0: d = 0x3400 = 0.25, dmin = 0x3000 = 0.125; block 1: d = 1, dmin = 0.5, same scales */
    uint8_t b[2 * 144];
    for (int k = 0; k < 2; k++) {
        uint8_t *p = b + 144 * k;
        put16(p, k ? 0x3c00 : 0x3400);
        put16(p + 2, k ? 0x3800 : 0x3000);
        memcpy(p + 4, k_packed, 12);
        for (int i = 0; i < 128; i++)
            p[16 + i] = (uint8_t)(i * 37 + 11 + k);
    }
    float y[512];
    cr_assert_eq(ztype_dequant_row(ZT_Q4_K, b, y, 512), ZOK);
    /* worked by hand (block 0):
     *   y[0]:   sub-block 0, low nibble of qs[0] = 11 (0x0b):       0.25*1*11 - 0.125*0   = 2.75
     *   y[32]:  sub-block 1, high nibble of qs[0] = 0:              0.25*2*0  - 0.125*5   = -0.625
     *   y[133]: sub-block 4, low nibble of qs[69] = 0x04:           0.25*17*4 - 0.125*20  = 14.5
     *   y[160]: sub-block 5, high nibble of qs[64] = 0x4b -> 4:     0.25*33*4 - 0.125*1   = 32.875
     *   y[255]: sub-block 7, high nibble of qs[127] = 0x66 -> 6:    0.25*63*6 - 0.125*31  = 90.625 */
    cr_expect_eq(y[0], 2.75f);
    cr_expect_eq(y[32], -0.625f);
    cr_expect_eq(y[133], 14.5f);
    cr_expect_eq(y[160], 32.875f);
    cr_expect_eq(y[255], 90.625f);
    /* every element from the unpacked fields: sub-block j = e / 32 reads byte
     * 32 * (e / 64) + e % 32, low nibble for even j, high for odd j */
    for (int k = 0; k < 2; k++) {
        const double d = k ? 1.0 : 0.25, dmin = k ? 0.5 : 0.125;
        for (int e = 0; e < 256; e++) {
            int j = e / 32, byte = b[144 * k + 16 + 32 * (e / 64) + e % 32];
            int q = (j & 1) ? byte >> 4 : byte & 15;
            cr_expect_eq(y[256 * k + e], (float)(d * k_sc[j] * q - dmin * k_m[j]), "block %d [%d]", k, e);
        }
    }
}

Test(dtype, dequant_q5_k_by_hand) {
    uint8_t b[176];
    put16(b, 0x3400);     /* d = 0.25 */
    put16(b + 2, 0x3000); /* dmin = 0.125 */
    memcpy(b + 4, k_packed, 12);
    for (int i = 0; i < 32; i++)
        b[16 + i] = (uint8_t)(i * 29 + 5); /* qh */
    for (int i = 0; i < 128; i++)
        b[48 + i] = (uint8_t)(i * 37 + 11); /* qs */
    float y[256];
    cr_assert_eq(ztype_dequant_row(ZT_Q5_K, b, y, 256), ZOK);
    /* by hand:
     *   y[0]:   qs[0] = 0x0b low 11, qh[0] = 5 bit 0 set -> 27:     0.25*1*27            = 6.75
     *   y[97]:  qs[33] = 0xd0 high 13, qh[1] = 34 bit 3 clear:       0.25*10*13 - 0.125*63 = 24.625
     *   y[128]: qs[64] = 0x4b low 11, qh[0] = 5 bit 4 clear:         0.25*17*11 - 0.125*20 = 44.25
     *   y[229]: qs[101] = 0xa4 high 10, qh[5] = 150 bit 7 set -> 26: 0.25*63*26 - 0.125*31 = 405.625 */
    cr_expect_eq(y[0], 6.75f);
    cr_expect_eq(y[97], 24.625f);
    cr_expect_eq(y[128], 44.25f);
    cr_expect_eq(y[229], 405.625f);
    for (int e = 0; e < 256; e++) {
        int j = e / 32, byte = b[48 + 32 * (e / 64) + e % 32], hb = (b[16 + e % 32] >> j) & 1;
        int q = ((j & 1) ? byte >> 4 : byte & 15) + 16 * hb;
        cr_expect_eq(y[e], (float)(0.25 * k_sc[j] * q - 0.125 * k_m[j]), "[%d]", e);
    }
}

Test(dtype, dequant_q6_k_by_hand) {
    static const int8_t sc[16] = {-128, -1, 127, 5, -7, 0, 64, -32, 1, 2, 3, -3, 100, -100, 9, -9};
    uint8_t b[210];
    for (int i = 0; i < 128; i++)
        b[i] = (uint8_t)(i * 53 + 7); /* ql */
    for (int i = 0; i < 64; i++)
        b[128 + i] = (uint8_t)(i * 19 + 3); /* qh */
    for (int i = 0; i < 16; i++)
        b[192 + i] = (uint8_t)sc[i];
    put16(b + 208, 0x3800); /* d = 0.5 */
    float y[256];
    cr_assert_eq(ztype_dequant_row(ZT_Q6_K, b, y, 256), ZOK);
    /* by hand:
     *   y[0]:   ql[0] = 7 low 7, qh[0] = 3 bits 0-1 = 3 -> 55 - 32 = 23, scale -128: 0.5*-128*23 = -1472
     *   y[16]:  ql[16] = 0x57 low 7, qh[16] = 51 bits 0-1 = 3 -> 23, scale[1] = -1:  -11.5
     *   y[67]:  ql[3] = 0xa6 high 10, qh[3] = 60 bits 4-5 = 3 -> 58 - 32 = 26, scale[4] = -7: -91
     *   y[244]: second half, ql[116] = 0x0b high 0, qh[52] = 223 bits 6-7 = 3 -> 48 - 32 = 16,
     *           scale[8 + 1 + 6] = -9: -72 */
    cr_expect_eq(y[0], -1472.0f);
    cr_expect_eq(y[16], -11.5f);
    cr_expect_eq(y[67], -91.0f);
    cr_expect_eq(y[244], -72.0f);
    /* element r of half h (r = l + 32k): nibble of ql[64h + l + 32 (k & 1)] (low for k < 2),
     * bits 2k..2k+1 of qh[32h + l], scale 8h + l / 16 + 2k */
    for (int e = 0; e < 256; e++) {
        int h = e / 128, k = (e % 128) / 32, l = e % 32;
        int lo = b[64 * h + l + 32 * (k & 1)], hi = b[128 + 32 * h + l];
        int q = ((k < 2 ? lo & 15 : lo >> 4) | ((hi >> (2 * k)) & 3) << 4) - 32;
        cr_expect_eq(y[e], (float)(0.5 * sc[8 * h + l / 16 + 2 * k] * q), "[%d]", e);
    }
}

/* 32-element blocks: byte l of qs holds element l (low nibble) and l + 16
 * (high). Builds the 16 quant bytes of block k. */
static void fill_qs(uint8_t *qs, int k) {
    for (int l = 0; l < 16; l++)
        qs[l] = (uint8_t)(l * 37 + 11 + 5 * k);
}

static int nibble(const uint8_t *qs, int e) {
    return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4;
}

Test(dtype, dequant_q4_0_by_hand) {
    /* block 0: d = 0x3800 = 0.5; block 1: d = 0xc000 = -2 */
    uint8_t b[2 * 18];
    put16(b, 0x3800);
    put16(b + 18, 0xc000);
    fill_qs(b + 2, 0);
    fill_qs(b + 20, 1);
    float y[64];
    cr_assert_eq(ztype_dequant_row(ZT_Q4_0, b, y, 64), ZOK);
    /* y[0]: qs[0] = 0x0b low 11 -> (11 - 8) * 0.5 = 1.5; y[16]: high 0 -> -4;
     * y[33]: block 1's qs[1] = 37 + 16 = 0x35, low 5 -> (5 - 8) * -2 = 6 */
    cr_expect_eq(y[0], 1.5f);
    cr_expect_eq(y[16], -4.0f);
    cr_expect_eq(y[33], 6.0f);
    for (int e = 0; e < 64; e++)
        cr_expect_eq(y[e], (float)((nibble(b + 2 + 18 * (e / 32), e % 32) - 8) * (e < 32 ? 0.5 : -2.0)),
                     "[%d]", e);
}

Test(dtype, dequant_q4_1_by_hand) {
    uint8_t b[20];
    put16(b, 0x3400);     /* d = 0.25 */
    put16(b + 2, 0xbe00); /* m = -1.5 */
    fill_qs(b + 4, 0);
    float y[32];
    cr_assert_eq(ztype_dequant_row(ZT_Q4_1, b, y, 32), ZOK);
    /* y[0]: 11 * 0.25 - 1.5 = 1.25; y[31]: qs[15] = 0x36 high 3 -> -0.75 */
    cr_expect_eq(y[0], 1.25f);
    cr_expect_eq(y[31], -0.75f);
    for (int e = 0; e < 32; e++)
        cr_expect_eq(y[e], (float)(nibble(b + 4, e) * 0.25 - 1.5), "[%d]", e);
}

/* The 5th bit of element e of a Q5 block is bit e of the little-endian qh. */
static const uint32_t q5_qh = 0xa5c3f00fu;

Test(dtype, dequant_q5_0_by_hand) {
    uint8_t b[22];
    put16(b, 0x3800); /* d = 0.5 */
    put32(b + 2, q5_qh);
    fill_qs(b + 6, 0);
    float y[32];
    cr_assert_eq(ztype_dequant_row(ZT_Q5_0, b, y, 32), ZOK);
    /* y[0]: 11 + 16 (bit 0 set) = 27 -> (27 - 16) * 0.5 = 5.5;
     * y[4]: qs[4] = 0x9f low 15, bit 4 clear -> -0.5;
     * y[20]: qs[4] high 9, bit 20 clear -> -3.5; y[31]: qs[15] high 3, bit 31 set -> 1.5 */
    cr_expect_eq(y[0], 5.5f);
    cr_expect_eq(y[4], -0.5f);
    cr_expect_eq(y[20], -3.5f);
    cr_expect_eq(y[31], 1.5f);
    for (int e = 0; e < 32; e++)
        cr_expect_eq(y[e], (float)((nibble(b + 6, e) + 16 * (int)(q5_qh >> e & 1) - 16) * 0.5), "[%d]", e);
}

Test(dtype, dequant_q5_1_by_hand) {
    uint8_t b[24];
    put16(b, 0x3400);     /* d = 0.25 */
    put16(b + 2, 0xbe00); /* m = -1.5 */
    put32(b + 4, q5_qh);
    fill_qs(b + 8, 0);
    float y[32];
    cr_assert_eq(ztype_dequant_row(ZT_Q5_1, b, y, 32), ZOK);
    /* y[0]: 27 * 0.25 - 1.5 = 5.25; y[31]: 3 + 16 = 19 -> 3.25 */
    cr_expect_eq(y[0], 5.25f);
    cr_expect_eq(y[31], 3.25f);
    for (int e = 0; e < 32; e++)
        cr_expect_eq(y[e], (float)((nibble(b + 8, e) + 16 * (int)(q5_qh >> e & 1)) * 0.25 - 1.5), "[%d]", e);
}

/* ggml-common.h's kvalues_iq4nl. */
static const int kv_iq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

Test(dtype, dequant_iq4_nl_by_hand) {
    uint8_t b[18];
    put16(b, 0x3000); /* d = 0.125 */
    fill_qs(b + 2, 0);
    float y[32];
    cr_assert_eq(ztype_dequant_row(ZT_IQ4_NL, b, y, 32), ZOK);
    /* y[0]: level 11 = 38 -> 4.75; y[16]: level 0 = -127 -> -15.875 */
    cr_expect_eq(y[0], 4.75f);
    cr_expect_eq(y[16], -15.875f);
    for (int e = 0; e < 32; e++)
        cr_expect_eq(y[e], (float)(0.125 * kv_iq4[nibble(b + 2, e)]), "[%d]", e);
}

Test(dtype, dequant_iq4_xs_by_hand) {
    /* 6-bit scales ls of the 8 sub-blocks (x = d * (ls - 32) * level): low 4
     * bits in scales_l (nibble j % 2 of byte j / 2), top 2 at bits 2j of scales_h. */
    static const int ls[8] = {0, 63, 32, 31, 33, 17, 48, 5};
    uint8_t b[136] = {0};
    put16(b, 0x2c00); /* d = 0.0625 */
    unsigned sh = 0;
    for (int j = 0; j < 8; j++) {
        b[4 + j / 2] |= (uint8_t)((ls[j] & 15) << 4 * (j % 2));
        sh |= (unsigned)(ls[j] >> 4) << 2 * j;
    }
    put16(b + 2, (uint16_t)sh);
    for (int j = 0; j < 8; j++)
        fill_qs(b + 8 + 16 * j, j);
    float y[256];
    cr_assert_eq(ztype_dequant_row(ZT_IQ4_XS, b, y, 256), ZOK);
    /* y[0]: ls 0 -> -32, level 11 = 38: 0.0625 * -32 * 38 = -76;
     * y[32]: sub-block 1, ls 63 -> 31, qs[16] = 0x0b + 5 = 0x10 low 0 = -127: -246.0625;
     * y[64 + 5]: ls 32 -> 0: 0 */
    cr_expect_eq(y[0], -76.0f);
    cr_expect_eq(y[32], -246.0625f);
    cr_expect_eq(y[69], 0.0f);
    for (int e = 0; e < 256; e++) {
        int j = e / 32;
        cr_expect_eq(y[e], (float)(0.0625 * (ls[j] - 32) * kv_iq4[nibble(b + 8 + 16 * j, e % 32)]), "[%d]",
                     e);
    }
}

/* ---- quantize -> dequantize --------------------------------------------- */

/* Quantizes x[n] as t, checks the block scales are finite halves (what
 * ggml_validate_row_data requires), dequantizes, and returns the relative RMS
 * error sqrt(sum (y - x)^2 / sum x^2). */
static double round_trip(ztype t, const float *x, int64_t n, float *y) {
    bool ok;
    uint64_t bytes = ztype_row_bytes(t, (uint64_t)n, &ok);
    cr_assert(ok);
    uint8_t *q = malloc(bytes);
    cr_assert_not_null(q);
    cr_assert_eq(ztype_quantize_row(t, x, q, n), ZOK, "%s", ztype_name(t));
    const ztype_info *ti = ztype_get(t);
    for (uint64_t b = 0; ti->block_elems > 1 && b < bytes / ti->block_bytes; b++) {
        const uint8_t *p = q + b * ti->block_bytes;
        size_t at = t == ZT_Q6_K ? 208 : 0;
        cr_assert(isfinite(zf16_to_f32((uint16_t)(p[at] | p[at + 1] << 8))), "%s block %lu d", ztype_name(t),
                  (unsigned long)b);
        if (t == ZT_Q4_K || t == ZT_Q5_K || t == ZT_Q4_1 || t == ZT_Q5_1)
            cr_assert(isfinite(zf16_to_f32((uint16_t)(p[2] | p[3] << 8))), "block %lu dmin",
                      (unsigned long)b);
    }
    cr_assert_eq(ztype_dequant_row(t, q, y, n), ZOK);
    free(q);
    double se = 0, sx = 0;
    for (int64_t i = 0; i < n; i++) {
        cr_assert(isfinite(y[i]), "%s [%ld]", ztype_name(t), (long)i);
        se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        sx += (double)x[i] * x[i];
    }
    return sx > 0 ? sqrt(se / sx) : sqrt(se);
}

#define RT_N (256 * 256)

static float *normal_data(uint64_t seed, float sigma) {
    float *x = malloc(RT_N * sizeof *x);
    cr_assert_not_null(x);
    tu_rng r = tu_rng_seed(seed);
    for (int i = 0; i < RT_N; i++)
        x[i] = sigma * tu_normal(&r);
    return x;
}

/* Measured on seed 42 (N(0, 1), 65536 values): f16 0.021 %, bf16 0.166 %,
 * q8_0 0.486 %, q6_K 1.70 %, q5_K 3.48 %, q4_K 7.02 %; with ggml's reference
 * quantizers q4_0 8.60 %, q4_1 7.85 %, q5_0 4.29 %, q5_1 3.79 %, iq4_nl
 * 7.65 %, iq4_xs 7.71 %; bounds ~10 % above.
 * For q4_K, the best affine 16-level fit of each sub-block of 32 (before the
 * 6-bit scale codes) already costs 6.93 %: its range of about 4.1 sigma over
 * 15 steps leaves step / sqrt(12) = 0.079 sigma, which clipping trims. */
Test(dtype, round_trip_error_normal) {
    static const struct {
        ztype t;
        double bound;
    } cases[] = {
        {ZT_F32, 0.0},    {ZT_F16, 0.00023},  {ZT_BF16, 0.0018},  {ZT_Q8_0, 0.0053}, {ZT_Q6_K, 0.0185},
        {ZT_Q5_K, 0.038}, {ZT_Q4_K, 0.076},   {ZT_Q4_0, 0.095},   {ZT_Q4_1, 0.087},  {ZT_Q5_0, 0.047},
        {ZT_Q5_1, 0.042}, {ZT_IQ4_NL, 0.084}, {ZT_IQ4_XS, 0.085},
    };
    float *x = normal_data(42, 1.0f), *y = malloc(RT_N * sizeof *y);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double e = round_trip(cases[i].t, x, RT_N, y);
        cr_log_info("%s: relative RMS error %.4f %%", ztype_name(cases[i].t), 100 * e);
        cr_expect(e <= cases[i].bound, "%s: relative RMS error %.5f above %.5f", ztype_name(cases[i].t), e,
                  cases[i].bound);
    }
    free(x);
    free(y);
}

/* Sub-blocks whose magnitudes differ by 10x: the 6-bit (Q4_K/Q5_K, IQ4_XS)
 * and 8-bit (Q6_K) scale codes must still give the small sub-blocks a step of
 * their own. Judged on the 0.1-sized sub-blocks alone, relative to their own
 * size (measured: q8_0 0.48 %, q6_K 1.93 %, q5_K 4.15 %, q4_K 8.18 %, q4_0
 * 8.53 %, q4_1 7.80 %, q5_0 4.27 %, q5_1 3.76 %, iq4_nl 7.57 %, iq4_xs
 * 9.24 %: its code ls - 32 of a 0.1 sub-block is about 3 of 31); one step
 * for the whole block would put them near 10x these. */
Test(dtype, round_trip_mixed_scales) {
    static const float factor[4] = {1.0f, 0.1f, 0.5f, 0.2f};
    static const struct {
        ztype t;
        double bound;
    } cases[] = {{ZT_Q8_0, 0.0053},  {ZT_Q6_K, 0.021},  {ZT_Q5_K, 0.045}, {ZT_Q4_K, 0.089},
                 {ZT_Q4_0, 0.094},   {ZT_Q4_1, 0.086},  {ZT_Q5_0, 0.047}, {ZT_Q5_1, 0.042},
                 {ZT_IQ4_NL, 0.084}, {ZT_IQ4_XS, 0.102}};
    float *x = normal_data(7, 1.0f), *y = malloc(RT_N * sizeof *y);
    for (int i = 0; i < RT_N; i++)
        x[i] *= factor[(i / 32) % 4];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        round_trip(cases[k].t, x, RT_N, y);
        double se = 0, sx = 0;
        for (int i = 0; i < RT_N; i++) {
            if ((i / 32) % 4 != 1) continue;
            se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
            sx += (double)x[i] * x[i];
        }
        double e = sqrt(se / sx);
        cr_log_info("%s, 10x smaller sub-blocks: relative RMS error %.3f %%", ztype_name(cases[k].t),
                    100 * e);
        cr_expect(e <= cases[k].bound, "%s: %.5f above %.5f", ztype_name(cases[k].t), e, cases[k].bound);
    }
    free(x);
    free(y);
}

/* Blocks a quantizer must not trip on: zeros, constants, one sign only, one
 * outlier, values too small or too large for a half scale. */
Test(dtype, quantize_edge_blocks) {
    const ztype types[] = {ZT_Q8_0, ZT_Q4_K, ZT_Q5_K, ZT_Q6_K,   ZT_Q4_0,
                           ZT_Q4_1, ZT_Q5_0, ZT_Q5_1, ZT_IQ4_NL, ZT_IQ4_XS};
    float x[256], y[256];
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        ztype t = types[k];
        for (int i = 0; i < 256; i++)
            x[i] = 0.0f;
        round_trip(t, x, 256, y);
        for (int i = 0; i < 256; i++)
            cr_assert_eq(y[i], 0.0f, "%s zeros", ztype_name(t));

        for (int i = 0; i < 256; i++)
            x[i] = 3.0f;
        cr_expect(round_trip(t, x, 256, y) < 0.01, "%s constant", ztype_name(t));
        for (int i = 0; i < 256; i++)
            x[i] = -3.0f;
        cr_expect(round_trip(t, x, 256, y) < 0.01, "%s negative constant", ztype_name(t));

        /* IQ4's 16 levels are not uniform: the 4 of one sign that [1, 2]
         * spans (53, 69, 89, 113 of 113) leave 5.7 % (measured), by design. */
        tu_rng r = tu_rng_seed(3);
        const double one_sign = t == ZT_IQ4_NL || t == ZT_IQ4_XS ? 0.065 : 0.05;
        for (int i = 0; i < 256; i++)
            x[i] = tu_uniform(&r, 1.0f, 2.0f);
        cr_expect(round_trip(t, x, 256, y) < one_sign, "%s positive only", ztype_name(t));
        for (int i = 0; i < 256; i++)
            x[i] = -tu_uniform(&r, 1.0f, 2.0f);
        cr_expect(round_trip(t, x, 256, y) < one_sign, "%s negative only", ztype_name(t));

        for (int i = 0; i < 256; i++)
            x[i] = 0.01f * tu_normal(&r);
        x[77] = 50.0f;
        cr_expect(round_trip(t, x, 256, y) < 0.05, "%s outlier", ztype_name(t));
        cr_expect(fabsf(y[77] - 50.0f) < 2.5f, "%s keeps the outlier: %g", ztype_name(t), y[77]);

        /* scales below the smallest half: zeros, not garbage */
        for (int i = 0; i < 256; i++)
            x[i] = 1e-12f * tu_normal(&r);
        round_trip(t, x, 256, y);
        for (int i = 0; i < 256; i++)
            cr_assert(fabsf(y[i]) < 1e-6f, "%s tiny [%d] = %g", ztype_name(t), i, y[i]);

        /* scales above 65504 saturate, still finite */
        for (int i = 0; i < 256; i++)
            x[i] = 1e30f * tu_normal(&r);
        round_trip(t, x, 256, y);
    }
}

Test(dtype, quantize_is_deterministic) {
    float *x = normal_data(5, 0.02f);
    const ztype types[] = {ZT_F16,  ZT_BF16, ZT_Q8_0, ZT_Q4_K, ZT_Q5_K,   ZT_Q6_K,
                           ZT_Q4_0, ZT_Q4_1, ZT_Q5_0, ZT_Q5_1, ZT_IQ4_NL, ZT_IQ4_XS};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        uint64_t bytes = ztype_row_bytes(types[k], 4096, NULL);
        uint8_t *a = malloc(bytes), *b = malloc(bytes);
        memset(a, 0xaa, bytes);
        memset(b, 0x55, bytes);
        cr_assert_eq(ztype_quantize_row(types[k], x, a, 4096), ZOK);
        cr_assert_eq(ztype_quantize_row(types[k], x, b, 4096), ZOK);
        cr_expect(memcmp(a, b, bytes) == 0, "%s differs between runs", ztype_name(types[k]));
        free(a);
        free(b);
    }
    free(x);
}

Test(dtype, f16_row_quantize_matches_scalar) {
    float x[64];
    uint8_t q[128];
    tu_rng r = tu_rng_seed(9);
    for (int i = 0; i < 64; i++)
        x[i] = 100.0f * tu_normal(&r);
    x[3] = NAN;
    x[4] = INFINITY;
    cr_assert_eq(ztype_quantize_row(ZT_F16, x, q, 64), ZOK, "NaN and Inf are values for f16");
    for (int i = 0; i < 64; i++)
        cr_expect_eq(q[2 * i] | q[2 * i + 1] << 8, zf32_to_f16(x[i]), "[%d]", i);
    cr_assert_eq(ztype_quantize_row(ZT_BF16, x, q, 64), ZOK);
    for (int i = 0; i < 64; i++)
        cr_expect_eq(q[2 * i] | q[2 * i + 1] << 8, zf32_to_bf16(x[i]), "[%d]", i);
}

/* ---- errors ------------------------------------------------------------- */

Test(dtype, unsupported_and_invalid) {
    uint8_t buf[512] = {0};
    float y[256] = {0};
    /* known types without a dequantizer or quantizer */
    const ztype no[] = {ZT_Q8_1,  ZT_Q2_K, ZT_Q3_K, ZT_Q8_K, ZT_IQ2_XXS, ZT_IQ3_S, ZT_IQ1_M,
                        ZT_TQ1_0, ZT_I8,   ZT_I32,  ZT_F64,  ZT_MXFP4,   ZT_NVFP4};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        cr_expect_eq(ztype_dequant_row(no[i], buf, y, 256), ZE_UNSUPPORTED, "%s", ztype_name(no[i]));
        cr_expect_eq(ztype_quantize_row(no[i], y, buf, 256), ZE_UNSUPPORTED, "%s", ztype_name(no[i]));
    }
    /* removed and out-of-range ids */
    cr_expect_eq(ztype_dequant_row((ztype)4, buf, y, 32), ZE_UNSUPPORTED);
    cr_expect_eq(ztype_dequant_row((ztype)33, buf, y, 32), ZE_UNSUPPORTED);
    cr_expect_eq(ztype_dequant_row((ztype)1000, buf, y, 32), ZE_UNSUPPORTED);
    cr_expect_eq(ztype_quantize_row((ztype)-1, y, buf, 32), ZE_UNSUPPORTED);

    /* bad n */
    cr_expect_eq(ztype_dequant_row(ZT_Q4_K, buf, y, 255), ZE_INVALID);
    cr_expect_eq(ztype_dequant_row(ZT_Q8_0, buf, y, 48), ZE_INVALID);
    cr_expect_eq(ztype_dequant_row(ZT_F32, buf, y, -1), ZE_INVALID);
    cr_expect_eq(ztype_quantize_row(ZT_Q6_K, y, buf, 128), ZE_INVALID);
    cr_expect_eq(ztype_quantize_row(ZT_F16, y, buf, -4), ZE_INVALID);
    /* NULL pointers, except for an empty row */
    cr_expect_eq(ztype_dequant_row(ZT_Q8_0, NULL, y, 32), ZE_INVALID);
    cr_expect_eq(ztype_dequant_row(ZT_Q8_0, buf, NULL, 32), ZE_INVALID);
    cr_expect_eq(ztype_quantize_row(ZT_Q8_0, NULL, buf, 32), ZE_INVALID);
    cr_expect_eq(ztype_dequant_row(ZT_Q8_0, NULL, NULL, 0), ZOK);
    cr_expect_eq(ztype_quantize_row(ZT_Q4_K, NULL, NULL, 0), ZOK);

    /* a NaN or Inf would poison a block scale */
    y[100] = NAN;
    cr_expect_eq(ztype_quantize_row(ZT_Q4_K, y, buf, 256), ZE_INVALID);
    cr_expect_eq(ztype_quantize_row(ZT_Q8_0, y, buf, 256), ZE_INVALID);
    y[100] = -INFINITY;
    cr_expect_eq(ztype_quantize_row(ZT_Q6_K, y, buf, 256), ZE_INVALID);
}
