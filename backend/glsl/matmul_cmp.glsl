// matmul_cmp.glsl: prefill y[T, N] = x[T, K] . W[N, K]^T for Q4_K weights
// (or Q6_K planes, one matrix) on the matrix units, with K permuted inside
// each step of BK = 64 (Q6_K 128; perm_k.glsl): the weights are the A side
// of the products, decoded by each lane from the bytes it loaded straight
// into its fragments, and never pass through shared memory. (matmul_cm.glsl, the general prefill
// GEMM, stages a decoded weight tile in shared memory a step: run 29
// measured that staging at 1094 of gate+up's 1735 us.)
//
// A workgroup owns BM tokens and NSG x 16 weight rows (of each matrix:
// gate and up with GLU). Subgroup s owns 16 of the rows and all BM
// tokens: its sums are NMAT x (BM / 16) fragments of 16 rows x 16 tokens.
// Each step, every invocation stages its share of x's BM x BK tile
// in the permuted order (PK_STAGE_X: normalized on the way with HAS_NORM)
// into one of two buffers, one workgroup barrier, then each subgroup
// loads its rows' raw bytes of the next step (and x's next chunks) while
// it decodes this step's A fragments and multiplies them by the tile's B
// fragments. Two buffers: the barrier of step s + 1 comes after every
// subgroup's products of step s - 1 (the buffer step s + 1 overwrites).
// XBUFS 1 (where two buffers of BM tokens overflow shared memory): one
// buffer, and a second barrier a step before it is restaged.
//
// The sums are W . x^T (rows by tokens): the epilogue stores each
// subgroup's fragments column-major in shared memory (the x tiles', free
// after a barrier), so that a token's 16 rows are contiguous, and each
// lane finishes elements: the SwiGLU of gate and up with GLU, then
// matmul_io.glsl's epilogue (residual, bias, unary).
//
// Measured (run 68, H100; cg_matmul.c's cm_perm): the 2-layer 8B-wide
// prefill step's gate+up 1101.7 us (2 calls) at BM 128, against 1734.3
// with the staged tiles; the 8B's pp512 7066 and 7053 -> 8074 and 8094
// tok/s in two rounds (llama.cpp 10597 and 10590 in the same call).
// 250-255 registers a lane at BM 128.
//
// Operands fp16, sums fp32, as matmul_cm.glsl (the mm-f16 pass marks the
// matmuls; the interpreter rounds the same way). PERM_F32 decodes the
// weights in fp32 (bit for bit dequant.glsl's value, then rounded: the
// default); without it in fp16 arithmetic (perm_k.glsl says what rounds:
// past the fp16 tolerance for Q4_K in run 67, a measurement only).
//
// Defines: BM (a multiple of 16), NSG, SG, WG = NSG * SG, XBUFS, GLU, W0_TYPE
// (12, or 14 in planes without GLU), W0_ROWB (and W1_ROWB, Q4_K),
// HAS_NORM, MFIRST (token tiles along x, so the workgroups that read one
// weight tile run together), PERM_F32, XH_IN (a batch step: x from B_XH),
// FRAG_RIGHT, FRAG_DOWN (zvk_probe_fragmap's layout); ABLATE (timing
// only, the values wrong: ZINC_CMP_ABLATE, a bit mask): 1 no decode (each
// A fragment filled with one value of the lane's loaded bytes), 2 no
// products with x (one product with a constant B a slice, no B loads), 4
// no x fetch and staging: what each part of a step costs (run 73).
//
// Removed (session 31), measured slower: x staged four chunks an invocation
// with one 16-byte store a vector (XQUAD: pp512 -5 %, run 78), x's next
// chunks fetched after a step's products (XLATE: every GEMM slower, run 75).

layout(local_size_x = WG) in;

#if GLU
#define NMAT 2u
#else
#define NMAT 1u
#endif
#define CM_C fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#if W0_TYPE == 14
#define Q6 1
#define BK 128
#define PKW PK6
#else
#define Q6 0
#define BK 64
#define PKW PK4
#endif
#if Q6 && GLU
#error "Q6_K planes take one matrix"
#endif
#define NSL (BK / 16)      /* a step's slices of 16 */
#define BK8 (BK / 8)       /* a step's 16-byte vectors of a token row */
#define BKP8 (BK8 + 1)     /* padded */
#define FT (BM / 16)       /* token fragments */
#define XV (BM * BK8)      /* the x tile's 16-byte vectors a step */
#define XPT ((XV + WG - 1) / WG)
#define XS_LEN (BM * BKP8)
#define EPI_LEN (NSG * int(NMAT) * 64) /* a 16 x 16 float fragment per subgroup and matrix */
#ifndef XBUFS
#define XBUFS 2 /* x buffers: with one, a second barrier a step before it is restaged */
#endif
#define SH_LEN (XBUFS * XS_LEN > EPI_LEN ? XBUFS * XS_LEN : EPI_LEN)
shared uvec4 xs8[SH_LEN]; // [buffer][token][k / 8] in the permuted order; then the epilogue's sums
#if HAS_NORM
shared float sc_s[BM];
#endif
#ifndef MFIRST
#define MFIRST 0
#endif
#ifndef ABLATE
#define ABLATE 0
#endif

#ifndef XH_IN
#define XH_IN 0
#endif
#if XH_IN
// A batch step's rows (cg_matmul.c's gen_gemm_cmp with rows): x as the x
// pass (gemvn_xh.glsl) wrote it, fp16 and normalized, K / 8 vectors a row.
layout(std430, binding = B_XH) readonly buffer XHb { uvec4 xh8[]; };
#define XP_RAW 1
uvec4 xr[XPT];
#else
#define XP_RAW X_RAW
X_REGS(XPT); // x as fetched (matmul_io.glsl: X_RAW)
#endif

void fetch_x(uint m0, uint k0, uint T) {
    [[unroll]] for (uint r = 0u; r < uint(XPT); r++) {
        uint i = gl_LocalInvocationIndex + r * uint(WG);
        uint t = m0 + i / uint(BK8), kk = k0 + (i % uint(BK8)) * 8u;
        bool in_t = i < uint(XV) && t < T;
#if XH_IN
        xr[r] = in_t ? xh8[(t * uint(K) + kk) >> 3u] : uvec4(0u);
#elif X_RAW
        xr[r] = in_t ? x8_halves(t * uint(K) + kk) : uvec4(0u);
#else
        [[unroll]] for (uint h = 0u; h < 2u; h++)
            xr[r][h] = in_t ? vec4(xin4[(t * uint(K) + kk + 4u * h) >> 2u]) : vec4(0.0);
#endif
    }
}

// The fetched x chunks into buffer buf, K permuted (PK_STAGE_X).
void stage_x(uint buf, uint k0) {
    [[unroll]] for (uint r = 0u; r < uint(XPT); r++) {
        uint i = gl_LocalInvocationIndex + r * uint(WG);
        if (i >= uint(XV)) continue;
        uint m = i / uint(BK8), kc = i % uint(BK8);
#if XP_RAW
        uvec4 v = xr[r];
#else
        vec4 v0 = xr[r][0], v1 = xr[r][1];
#if HAS_NORM
        v0 = x4_normed(v0, sc_s[m], k0 + kc * 8u);
        v1 = x4_normed(v1, sc_s[m], k0 + kc * 8u + 4u);
#endif
        uvec4 v = uvec4(packHalf2x16(v0.xy), packHalf2x16(v0.zw), packHalf2x16(v1.xy), packHalf2x16(v1.zw));
#endif
        PK_STAGE_X(xs8, buf * uint(XS_LEN) + m * uint(BKP8), kc, v)
    }
}

// The step's raw bytes of the lane's two rows (l / 4 and l / 4 + 8 of the
// subgroup's 16), each matrix; a row past N repeats the last one.
void fetch_w(uint r0, uint k0, out PKW r[NMAT][2]) {
    uint g = gl_SubgroupInvocationID >> 2u;
    [[unroll]] for (uint h = 0u; h < 2u; h++) {
        uint row = min(r0 + g + 8u * h, uint(N) - 1u);
#if Q6
        PK6_FETCH(WQ_W0, 14, W0_ROWB, row, k0, r[0][h]);
#else
        PK_FETCH(WQ_W0, 12, W0_ROWB, row, k0, r[0][h]);
#endif
#if GLU
        PK_FETCH(WQ_W1, 12, W1_ROWB, row, k0, r[1][h]);
#endif
    }
}

void main() {
#if MFIRST
    uint m0 = gl_WorkGroupID.x * uint(BM), n0 = gl_WorkGroupID.y * uint(NSG * 16);
#else
    uint n0 = gl_WorkGroupID.x * uint(NSG * 16), m0 = gl_WorkGroupID.y * uint(BM);
#endif
    uint T = step.T;
    if (m0 >= T) return; // uniform across the workgroup
    uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID, r0 = n0 + sg * 16u;
#if HAS_NORM && !XH_IN
    for (uint m = sg; m < uint(BM); m += uint(NSG)) {
        float s = 0.0;
        if (m0 + m < T) s = subgroup_inv_rms((m0 + m) * uint(K), uint(K), NORM_EPS);
        if (subgroupElect()) sc_s[m] = s;
    }
    barrier();
#endif
    CM_C acc[NMAT][FT];
    [[unroll]] for (uint m = 0u; m < NMAT; m++)
        [[unroll]] for (uint u = 0u; u < uint(FT); u++) acc[m][u] = CM_C(0.0);
    PKW wr[NMAT][2];
    fetch_w(r0, 0u, wr);
    fetch_x(m0, 0u, T);
    uint KS = uint(K) / uint(BK);
    for (uint ks = 0u; ks < KS; ks++) {
        uint k0 = ks * uint(BK), buf = XBUFS == 2 ? ks & 1u : 0u;
#if XBUFS == 1
        if (ks > 0u) barrier(); // every subgroup's products of the last step are done with the buffer
#endif
#if (ABLATE & 4) == 0
        stage_x(buf, k0);
#endif
        PKW cur[NMAT][2] = wr;
        barrier();
        if (ks + 1u < KS) { // the next step's loads, in flight while this one multiplies
            fetch_w(r0, k0 + uint(BK), wr);
#if (ABLATE & 4) == 0
            fetch_x(m0, k0 + uint(BK), T);
#endif
        }
        CM_A a[NMAT][NSL];
#if ABLATE & 1
        [[unroll]] for (uint m = 0u; m < NMAT; m++)
            [[unroll]] for (uint kk = 0u; kk < uint(NSL); kk++) {
#if Q6
                uint v = cur[m][0].ql0.x ^ cur[m][1].qh.y ^ kk;
#else
                uint v = cur[m][0].qv.x ^ cur[m][1].qv.y ^ kk;
#endif
                a[m][kk] = CM_A(float16_t(unpackHalf2x16(v & 0x3bffu).x));
            }
#elif Q6
        pk6_frags(cur[0], k0 >> 8u, a[0]);
#else
        [[unroll]] for (uint m = 0u; m < NMAT; m++) pk_frags(cur[m], (k0 & 255u) >> 5u, a[m]);
#endif
#if ABLATE & 2
        // (a B of its own: the KHR rewrite gives A and B types of their own)
        CM_A bq = CM_A(float16_t(0.5));
        [[unroll]] for (uint kk = 0u; kk < uint(NSL); kk++)
            [[unroll]] for (uint m = 0u; m < NMAT; m++) acc[m][0] = coopMatMulAddNV(a[m][kk], bq, acc[m][0]);
        if (false)
#endif
        [[unroll]] for (uint kk = 0u; kk < uint(NSL); kk++)
            [[unroll]] for (uint u = 0u; u < uint(FT); u++) {
                CM_A b; // x's 16 K x 16 tokens, column-major: a token's K contiguous
                coopMatLoadNV(b, xs8, buf * uint(XS_LEN) + 16u * u * uint(BKP8) + 2u * kk, uint(BKP8), true);
                [[unroll]] for (uint m = 0u; m < NMAT; m++) acc[m][u] = coopMatMulAddNV(a[m][kk], b, acc[m][u]);
            }
    }
    // Epilogue: a token fragment at a time, the subgroup's sums (16 rows x
    // 16 tokens, each matrix) column-major in shared memory, then 16 lanes
    // to a token.
    barrier();
    uint cb = sg * NMAT * 64u;
    [[unroll]] for (uint u = 0u; u < uint(FT); u++) {
        [[unroll]] for (uint m = 0u; m < NMAT; m++) coopMatStoreNV(acc[m][u], xs8, cb + m * 64u, 4u, true);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        for (uint e = lane; e < 256u; e += uint(SG)) {
            uint t = m0 + u * 16u + e / 16u, n = r0 + e % 16u;
            float v = uintBitsToFloat(xs8[cb + e / 4u][e % 4u]);
#if GLU
            v = silu(v) * uintBitsToFloat(xs8[cb + 64u + e / 4u][e % 4u]);
#endif
            if (t < T && n < uint(N)) store_y(t, n, epilogue(t, n, v));
        }
        subgroupBarrier();
    }
}
