// gemv_groups.glsl: how the GEMVs (matmul_gemv.glsl for decode,
// matmul_gemvn.glsl for a batch step's few rows) walk a weight row: in
// groups of GE elements, NRUN runs of RUNLEN consecutive elements each,
// and the loads of one group of a q4_K or q6_K row.
//
// GMODE picks the group layout from the weight type (codegen chooses it
// when every matrix of the kernel has that type):
//   12  q4_K: a group is one 16-byte quad of a block's quants, i.e. 16
//       elements of sub-block 2p (low nibbles) and 16 of 2p+1 (high), plus
//       the block's 16-byte header (d, dmin, scales), read as two uvec4.
//   14  q6_K: 32 elements of one half of a block (4 runs of 8, one per
//       scale row k), from 8 bytes of each ql run, 8 of qh and the 8 scales
//       of the half; blocks are 210 bytes, so reads are 2-byte aligned.
//   0   any type: 8 consecutive elements through dequant.glsl's DQ8.

#if GMODE == 12
#define GE 32u
#define NRUN 2u
#define RUNLEN 16u
// First element of run i (0..NRUN-1) of group g.
uint run_start(uint g, uint i) {
    uint b = g >> 3u, p = (g >> 1u) & 3u, q = g & 1u;
    return 256u * b + 64u * p + 16u * q + 32u * i;
}
#elif GMODE == 14
#define GE 32u
#define NRUN 4u
#define RUNLEN 8u
uint run_start(uint g, uint i) {
    uint b = g >> 3u, h = (g >> 2u) & 1u, l0 = 8u * (g & 3u);
    return 256u * b + 128u * h + 32u * i + l0;
}
#else
#define GE 8u
#define NRUN 1u
#define RUNLEN 8u
uint run_start(uint g, uint i) { return 8u * g; }
#endif

#if GMODE == 12
// Group g of a q4_K row: the quad of quants (byte e holds element e of run
// 0 in its low nibble, of run 1 in its high), d and dmin, and the scales
// and mins of the group's two sub-blocks.
struct Q4G {
    uvec4 qs;
    vec2 dm;
    float sc0, m0, sc1, m1;
};
Q4G q4_group(const uint which, uint rowb, uint row, uint g) {
    uint b = g >> 3u, p = (g >> 1u) & 3u, q = g & 1u;
    uint qb = (row * rowb + b * 144u) >> 4u; /* rows and blocks are 16-byte aligned */
    uvec4 hd = wquad(which, qb);
    Q4G x;
    x.qs = wquad(which, qb + 1u + 2u * p + q);
    x.dm = unpackHalf2x16(hd.x);
    k4_scale_min(hd.y, hd.z, hd.w, 2u * p, x.sc0, x.m0);
    k4_scale_min(hd.y, hd.z, hd.w, 2u * p + 1u, x.sc1, x.m1);
    return x;
}
#elif GMODE == 14
// Eight bytes at an even offset: three words, the shift chosen without a
// branch (neighbouring lanes' blocks alternate between the two cases).
// Reads up to off + 11, which stays inside the block for the reads below.
uvec2 wu64(const uint which, uint off) {
    uint i = off >> 2u, a = wword(which, i), b = wword(which, i + 1u), c = wword(which, i + 2u);
    bool odd = (off & 2u) != 0u;
    return odd ? uvec2((a >> 16u) | (b << 16u), (b >> 16u) | (c << 16u)) : uvec2(a, b);
}

// The 8 scale bytes of half h, which end 2 bytes before the block's d:
// read backwards (from off - 2) so that no word past the block is touched.
uvec2 wu64_back(const uint which, uint off) {
    uint i = (off - 2u) >> 2u, a = wword(which, i), b = wword(which, i + 1u), c = wword(which, i + 2u);
    bool odd = (off & 2u) != 0u;
    return odd ? uvec2((a >> 16u) | (b << 16u), (b >> 16u) | (c << 16u)) : uvec2(b, c);
}

// Group g of a q6_K row (32 elements of one half of a block): the 8 bytes of
// each of its two ql runs, its 8 qh bytes, the half's 8 scales, d, and the
// first scale's index within them.
struct Q6G {
    uvec2 qa, qb, qh, sc;
    float d;
    uint sl;
};
Q6G q6_group(const uint which, uint rowb, uint row, uint g) {
    uint b = g >> 3u, h = (g >> 2u) & 1u, l0 = 8u * (g & 3u);
    Q6G q;
    if (q6p(which)) { // the weight-layout pass's planes: aligned pairs
        uint ro = row * rowb, nb = rowb / 210u;
        q.qa = wpair(which, (ro + 128u * b + 64u * h + l0) >> 3u);
        q.qb = wpair(which, (ro + 128u * b + 64u * h + 32u + l0) >> 3u);
        q.qh = wpair(which, (ro + 128u * nb + 64u * b + 32u * h + l0) >> 3u);
        q.sc = wpair(which, (ro + 192u * nb + 16u * b + 8u * h) >> 3u);
        q.d = wf16(which, ro + 208u * nb + 2u * b);
        q.sl = l0 >> 4u;
        return q;
    }
    uint off = row * rowb + b * 210u;
    q.qa = wu64(which, off + 64u * h + l0);
    q.qb = wu64(which, off + 64u * h + 32u + l0);
    q.qh = wu64(which, off + 128u + 32u * h + l0);
    q.sc = wu64_back(which, off + 192u + 8u * h);
    q.d = wf16(which, off + 208u);
    q.sl = l0 >> 4u;
    return q;
}
#endif
