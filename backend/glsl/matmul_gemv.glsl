// matmul_gemv.glsl: y[t, n] = x[t] . W[n] for decode (one token per
// workgroup row of the grid: gl_WorkGroupID.y = t), with the optional
// RMSNorm prologue, gate/up SwiGLU (GLU) and add epilogue.
//
// Decode reads every weight byte once, so the kernel is a stream: what
// matters is how many bytes each lane keeps in flight and how little else
// it loads. A subgroup owns RS consecutive rows. Its lanes walk K in
// groups of GE elements; each lane loads the x of a group once (x is read
// from L1/L2, and with one row per subgroup it was 8 bytes of x per weight
// byte of q4_K) and applies it to all RS rows, whose loads are then in
// flight together. UNROLL groups per trip would add more, but on the H200
// one (the default) measured fastest.
//
// GMODE picks the group layout from the weight type (gemv_groups.glsl):
// 12 q4_K, 14 q6_K, 0 any type in groups of 8. With q4_K the mins become
// dmin * m * sum(x) with sum(x) computed once per group.
// The norm needs no extra pass: the lanes sum x^2 over the same groups
// (together they cover the row) and the scale multiplies the finished dot
// product, (x . (w * nw)) * s.
//
// IDOT (with GMODE 12 and X_SHARED; the matmul's attr.gemv_q8): x is
// quantized once per workgroup as llama.cpp's q8_1, per 32-element block
// d = amax/127 and q = round(x/d) to the nearest even, and each group's
// products are packed 4x8-bit integer dot products (zdot4, glsl/idot.glsl):
// the 4-bit quants of four bytes masked into one word meet four int8 x in
// one instruction, where the float path spends about three per weight.
// The group's sums are then d_w*sc*d_x*isum - dmin*m*(d_x*sum(q)). The
// interpreter quantizes the same way (ir/interp.c), so the kernel is still
// checked element by element.
//
// Defines: WG (threads), RS (rows per subgroup), ROWS_WG (rows per workgroup), GMODE, X_SHARED (with
// SWZ_SHIFT, SWZ_MASK: x staged in shared memory), GLU (W1 is the up
// projection: y = silu(x.W0) * (x.W1)), W0_TYPE/W0_ROWB, W1_TYPE/W1_ROWB;
// SEGS, N0..N3, WG_SEG0..3, B_Y0..B_Y2, W2_TYPE/W2_ROWB, W3_TYPE/W3_ROWB
// and each segment's epilogue for the segments of a matmul_rows kernel
// (gemv_segs.glsl).
//
// MOE (backend/cg_moe.c: the expert GEMVs of a mixture of experts, whose
// stacked weights are [E, N, K] and whose route names TOPK = U experts a
// token; E, U, X3, ROUTE_FL, B_ROUTE):
//   1  gl_WorkGroupID.y is a (token, slot) pair tu: x row tu (X3: x is
//      [T, U, K]) or tu / U, the weight rows those of expert e(tu), output
//      row tu ([T, U, N]); plain or GLU, as above.
//      TOPK_IN (the fuse-topk pass): the route is not read but ranked here,
//      from the router's logits (moe_topk_lib.glsl, as the moe_topk kernel
//      ranks them): subgroup 0 ranks the token's E logits into shared
//      memory while the others stage x, and the workgroup of the token's
//      first slot and first rows writes the route for the down projection.
//   2  the down projection summed over the slots: gl_WorkGroupID.y is the
//      token t, its U x rows (X3) are staged together, and the lanes walk
//      the U x K/GE (slot, group) pairs, each product weighted by its slot's
//      route weight, so all slots' loads are in flight at once; the
//      residual add is the epilogue. The [T, U, N] products never leave the
//      chip. The slots' sums meet in another order than the interpreter's
//      sum of weighted dot products (a few ulps of the RMS).

layout(local_size_x = WG) in;

#ifndef MOE
#define MOE 0
#endif
#if MOE == 2
#define XROWS U /* x rows staged: a token's slots */
#else
#define XROWS 1
#endif
#if MOE
#if IDOT || SEGS || ((HAS_NORM || TOPK_IN) && MOE == 2)
#error "the expert GEMV takes float x in one segment, normed and routed here only in gate+up"
#endif
#if TOPK_IN
layout(std430, binding = B_ROUTE) writeonly buffer Rt { ACT_T route[]; };
shared uint s_eid[TOPK]; // the token's experts, in pick order
uint expert_of(uint tu) { return min(s_eid[tu % uint(U)], uint(E) - 1u); }

// Subgroup 0 ranks token t's experts (every lane of it calls this).
void rank_route(uint t, uint tu) {
    uint id[TOPK];
    float w[TOPK];
    uint lane = gl_SubgroupInvocationID, S = gl_SubgroupSize;
    topk_route(t * uint(E), lane, S, id, w);
    bool writer = gl_WorkGroupID.x == 0u && tu % uint(U) == 0u;
    for (uint k = lane; k < uint(TOPK); k += S) {
        s_eid[k] = id[k];
        if (writer) {
            route[(t * uint(TOPK) + k) * 2u] = ACT_T(float(id[k]));
            route[(t * uint(TOPK) + k) * 2u + 1u] = ACT_T(w[k]);
        }
    }
}
#else
layout(std430, binding = B_ROUTE) readonly buffer Rt { ACT_T route[]; };
// The expert of slot tu; an id the router cannot produce is clamped, so a
// corrupt route reads a wrong expert rather than out of bounds.
uint expert_of(uint tu) { return min(uint(float(route[uint(ROUTE_FL) * tu])), uint(E) - 1u); }
#endif
#endif
// The first weight row of the rows this workgroup reads (MOE 1: its
// expert's), and the x row of its token (MOE 2: the first of its slots').
uint row_base = 0u, x_row = 0u;

#ifndef UNROLL
#define UNROLL 1u
#endif
#ifndef IDOT
#define IDOT 0
#endif

// Weights without an int-to-float conversion (a quarter-rate instruction
// on NVIDIA, and the q4_K GEMV did one per weight): a field q at bit s
// (s + 6 <= 23) of a word w, masked in place and ORed into the mantissa
// of 2^23, is the float 2^23 + q * 2^s; subtracting 2^23 leaves q * 2^s
// exactly. The x it multiplies was scaled by 2^-s when loaded (exact, and
// shared by every row of the group), so each product is q * x as before.
// One LOP3 and one FADD per weight instead of a shift, an AND and an I2F.
const float MAGIC = 8388608.0;
float wfield(uint w, uint mask) { return uintBitsToFloat(0x4b000000u | (w & mask)) - MAGIC; }

// 2^-s for element e of run i, s the bit at which its weight field sits.
float x_prescale(uint i, uint e) {
#if GMODE == 12
    // bytes alternate between bit 0 and 8 of a 16-bit half; high nibbles 4 more
    return ((e & 1u) != 0u ? 1.0 / 256.0 : 1.0) * (i != 0u ? 1.0 / 16.0 : 1.0);
#elif GMODE == 14
    return (e & 1u) != 0u ? 1.0 / 256.0 : 1.0;
#else
    return 1.0;
#endif
}

#if IDOT
// x as int8 in element order (GMODE 12: 16 per uvec4, a q4_K run; 14: 8
// per uvec2, a q6_K run), the sum of each run's q (12: times d, as a float;
// 14: the integer, which meets the weights' -32), and d of each block.
#if GMODE == 12
shared uvec4 sq[K / 16];
shared float sqs[K / 16];
#else
shared uvec2 sq[K / 8];
shared int sqi[K / 8];
#endif
shared float sqd[K / 32];
float x_norm_scale; // 1 / rms of the token's x (HAS_NORM), in every invocation

// Every invocation calls it (it holds barriers). One invocation per block:
// x times the norm weight, its amax, then the quantized values packed.
void stage_x(uint t) {
    uint tid = gl_LocalInvocationID.x;
    float ss = 0.0;
    for (uint r = tid; r < uint(K) / 32u; r += WG) {
        float v[32], unused = 0.0;
        [[unroll]] for (uint c = 0u; c < 4u; c++) {
            float v8[8];
            x8_normed(t * uint(K), 32u * r + 8u * c, v8, ss, unused);
            [[unroll]] for (uint e = 0u; e < 8u; e++) v[8u * c + e] = v8[e];
        }
        uint w[8];
        int s[4]; // per 8 elements
        float d = q8_1_block(v, w, s);
#if GMODE == 12
        sq[2u * r] = uvec4(w[0], w[1], w[2], w[3]);
        sq[2u * r + 1u] = uvec4(w[4], w[5], w[6], w[7]);
        sqs[2u * r] = d * float(s[0] + s[1]);
        sqs[2u * r + 1u] = d * float(s[2] + s[3]);
#else
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            sq[4u * r + j] = uvec2(w[2u * j], w[2u * j + 1u]);
            sqi[4u * r + j] = s[j];
        }
#endif
        sqd[r] = d;
    }
#if HAS_NORM
    x_norm_scale = inversesqrt(wg_sum(ss) / float(K) + NORM_EPS); // attn_reduce.glsl; its barriers publish sq
#else
    barrier();
#endif
}

#if GMODE == 12
// A group's x: its two runs' int8 (q0: sub-block 2p, q1: 2p+1) and
// ds = (d of run 0's block, d of run 1's, d*sum(q) of run 0, of run 1).
struct XG {
    uvec4 q0, q1;
    vec4 ds;
};

XG load_group_q8(uint g) {
    uint k0 = run_start(g, 0u), u = k0 >> 4u, blk = k0 >> 5u;
    XG x;
    x.q0 = sq[u];
    x.q1 = sq[u + 2u];
    x.ds = vec4(sqd[blk], sqd[blk + 1u], sqs[u], sqs[u + 2u]);
    return x;
}
#else
// A group's x: its four runs' int8, each run's sum(q) and its block's d.
struct XG {
    uvec2 q[4];
    ivec4 qs;
    vec4 dx;
};

XG load_group_q8(uint g) {
    XG x;
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        uint k0 = run_start(g, k);
        x.q[k] = sq[k0 >> 3u];
        x.qs[k] = sqi[k0 >> 3u];
        x.dx[k] = sqd[k0 >> 5u];
    }
    return x;
}
#endif
#elif X_SHARED
// x staged once per workgroup in shared memory (X_SHARED, when K fits):
// read from VRAM in 16-byte loads by consecutive invocations, multiplied
// by the norm weight and by the prescale of the weight field it meets
// (both fixed per element), and each run's sum kept beside it. Each lane
// then reads its group's x as 16-byte shared loads. Read straight from
// global memory instead, a warp's x load touches 16 cache lines for 512
// bytes (the lanes of a q4_K block read 64 elements apart), so x, not the
// weights, bounded the GEMV on the H200 (o projection 770 GB/s, the same
// shape with the norm weight also read per lane 516 GB/s).
// The 16-byte units of a 128-byte row are stored permuted (SWZ): the 8
// lanes of a block that read together then hit 8 different bank groups.
shared vec4 sx[XROWS * K / 4];
shared float sxs[XROWS * K / RUNLEN];
float x_norm_scale; // 1 / rms of the token's x (HAS_NORM), in every invocation

uint swz(uint u) { return u ^ ((u >> SWZ_SHIFT) & SWZ_MASK); }

// x_prescale of the four elements of 16-byte unit u (runs start at multiples
// of 16 elements, so the unit's run within its group is bit 3 of u).
vec4 prescale4(uint u) {
    uint i = (u >> 3u) & 1u;
    return vec4(x_prescale(i, 0u), x_prescale(i, 1u), x_prescale(i, 2u), x_prescale(i, 3u));
}

// Every invocation calls it (it holds barriers). XROWS consecutive rows
// from row t, one after the other (K % 256 == 0 where GMODE is 12 or 14,
// so a run never straddles two rows).
void stage_x(uint t) {
    uint tid = gl_LocalInvocationID.x;
    float ss = 0.0;
    for (uint r = tid; r < uint(XROWS * K) / RUNLEN; r += WG) {
        float sum = 0.0;
        [[unroll]] for (uint c = 0u; c < RUNLEN / 8u; c++) {
            uint k0 = r * RUNLEN + 8u * c;
            float v[8];
            x8_normed(t * uint(K), k0, v, ss, sum);
            uint u = k0 >> 2u;
            sx[swz(u)] = vec4(v[0], v[1], v[2], v[3]) * prescale4(u);
            sx[swz(u + 1u)] = vec4(v[4], v[5], v[6], v[7]) * prescale4(u + 1u);
        }
        sxs[r] = sum;
    }
#if HAS_NORM
    x_norm_scale = inversesqrt(wg_sum(ss) / float(K) + NORM_EPS); // attn_reduce.glsl; its barriers publish sx
#else
    barrier();
#endif
}

void load_group(uint xo, uint g, out float xv[GE], out float xs[NRUN], inout float ss) {
    [[unroll]] for (uint i = 0u; i < NRUN; i++) {
        uint k0 = run_start(g, i);
        xs[i] = sxs[k0 / RUNLEN];
        [[unroll]] for (uint c = 0u; c < RUNLEN / 4u; c++) {
            vec4 v = sx[swz((k0 >> 2u) + c)];
            [[unroll]] for (uint e = 0u; e < 4u; e++) xv[i * RUNLEN + 4u * c + e] = v[e];
        }
    }
}
#else
// x of group g (normalized by nw when HAS_NORM, prescaled for wfield), the
// sum of each run (unscaled), and ss += x.x of the raw values.
void load_group(uint xo, uint g, out float xv[GE], out float xs[NRUN], inout float ss) {
    [[unroll]] for (uint i = 0u; i < NRUN; i++) {
        xs[i] = 0.0;
        [[unroll]] for (uint c = 0u; c < RUNLEN / 8u; c++) {
            uint k0 = run_start(g, i) + 8u * c;
            float v[8];
            x8_normed(xo, k0, v, ss, xs[i]);
            [[unroll]] for (uint e = 0u; e < 8u; e++) xv[i * RUNLEN + 8u * c + e] = v[e] * x_prescale(i, 8u * c + e);
        }
    }
}
#endif

#if GMODE == 12
// x . row over group g of a q4_K weight.
float dot_group(const uint which, uint rowb, uint row, uint g, float xv[GE], float xs[NRUN]) {
    Q4G x = q4_group(which, rowb, row, g);
    float s0 = 0.0, s1 = 0.0;
    [[unroll]] for (uint w = 0u; w < 4u; w++)
        [[unroll]] for (uint h = 0u; h < 2u; h++) {
            uint hw = x.qs[w] >> (16u * h); // bytes 2h, 2h+1 at bits 0 and 8
            [[unroll]] for (uint j = 0u; j < 2u; j++) {
                uint e = 4u * w + 2u * h + j;
                s0 += wfield(hw, 0xfu << (8u * j)) * xv[e];
                s1 += wfield(hw, 0xf0u << (8u * j)) * xv[16u + e];
            }
        }
    return x.dm.x * (x.sc0 * s0 + x.sc1 * s1) - x.dm.y * (x.m0 * xs[0] + x.m1 * xs[1]);
}

#if IDOT
// The same over int8 x: one zdot4 per four weights of each run.
float dot_group_q8(const uint which, uint rowb, uint row, uint g, XG x) {
    Q4G q = q4_group(which, rowb, row, g);
    int i0 = 0, i1 = 0;
    [[unroll]] for (uint w = 0u; w < 4u; w++) {
        i0 = zdot4(q.qs[w] & 0x0f0f0f0fu, x.q0[w], i0);
        i1 = zdot4((q.qs[w] >> 4u) & 0x0f0f0f0fu, x.q1[w], i1);
    }
    return q.dm.x * (q.sc0 * x.ds.x * zi2f(i0) + q.sc1 * x.ds.y * zi2f(i1)) -
           q.dm.y * (q.m0 * x.ds.z + q.m1 * x.ds.w);
}
#endif
#elif GMODE == 14
float dot_group(const uint which, uint rowb, uint row, uint g, float xv[GE], float xs[NRUN]) {
    Q6G q = q6_group(which, rowb, row, g);
    float acc = 0.0;
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        uvec2 ql = (k & 1u) != 0u ? q.qb : q.qa;
        uint nsh = (k >> 1u) * 4u, sbyte = q.sl + 2u * k;
        float s = 0.0;
        [[unroll]] for (uint w = 0u; w < 2u; w++)
            [[unroll]] for (uint h = 0u; h < 2u; h++) {
                // the 6-bit values of bytes 2h, 2h+1 at bits 0 and 8 of one word
                uint lo = (ql[w] >> (16u * h + nsh)) & 0x0f0fu;
                uint hi = (q.qh[w] >> (16u * h + 2u * k)) & 0x0303u;
                uint v = lo | (hi << 4u);
                [[unroll]] for (uint j = 0u; j < 2u; j++)
                    s += wfield(v, 0x3fu << (8u * j)) * xv[8u * k + 4u * w + 2u * h + j];
            }
        int s8 = bitfieldExtract(int(q.sc[sbyte >> 2u]), int(8u * (sbyte & 3u)), 8);
        acc += float(s8) * (s - 32.0 * xs[k]);
    }
    return q.d * acc;
}

#if IDOT
// The same over int8 x: the 6-bit values of four bytes in one word (0..63,
// so positive as signed bytes), one zdot4 per four weights, and the -32 as
// -32 * sum(q) of the run, all in integers.
float dot_group_q8(const uint which, uint rowb, uint row, uint g, XG x) {
    Q6G q = q6_group(which, rowb, row, g);
    float acc = 0.0;
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        uvec2 ql = (k & 1u) != 0u ? q.qb : q.qa;
        uint nsh = (k >> 1u) * 4u, sbyte = q.sl + 2u * k;
        int is = -32 * x.qs[k];
        [[unroll]] for (uint w = 0u; w < 2u; w++) {
            uint v = ((ql[w] >> nsh) & 0x0f0f0f0fu) | (((q.qh[w] >> (2u * k)) & 0x03030303u) << 4u);
            is = zdot4(v, x.q[k][w], is);
        }
        int s8 = bitfieldExtract(int(q.sc[sbyte >> 2u]), int(8u * (sbyte & 3u)), 8);
        acc += float(s8) * x.dx[k] * zi2f(is);
    }
    return q.d * acc;
}
#endif
#endif

// acc += x . row over group g, for weight `which` of type ty.
#if GMODE == 0
#define ROW_DOT(which, ty, rowb, row, g, xv, xs, acc)                                                       \
    {                                                                                                      \
        float wv_[8];                                                                                      \
        DQ8(which, ty, rowb, row, 8u * (g), wv_);                                                          \
        [[unroll]] for (uint e_ = 0u; e_ < 8u; e_++) acc += xv[e_] * wv_[e_];                              \
    }
#elif IDOT
#define ROW_DOT(which, ty, rowb, row, g, xv, xs, acc) acc += dot_group_q8(which, rowb, row, g, xv)
#else
#define ROW_DOT(which, ty, rowb, row, g, xv, xs, acc) acc += dot_group(which, rowb, row, g, xv, xs)
#endif

float a0[RS], a1[RS];
uint rows[RS];

void group(uint xo, uint g, inout float ss, const uint seg) {
#if IDOT
    XG xv = load_group_q8(g);
    float xs[NRUN]; // unused
#else
    float xv[GE], xs[NRUN];
    load_group(xo, g, xv, xs, ss);
#endif
    [[unroll]] for (uint r = 0u; r < RS; r++) {
#if SEGS
        if (seg == 0u) {
            ROW_DOT(WQ_W0, W0_TYPE, W0_ROWB, rows[r], g, xv, xs, a0[r]);
        } else if (SEGS == 2 || seg == 1u) {
            ROW_DOT(WQ_W1, W1_TYPE, W1_ROWB, rows[r], g, xv, xs, a0[r]);
#if SEGS > 2
        } else if (SEGS == 3 || seg == 2u) {
            ROW_DOT(WQ_W2, W2_TYPE, W2_ROWB, rows[r], g, xv, xs, a0[r]);
#endif
#if SEGS > 3
        } else {
            ROW_DOT(WQ_W3, W3_TYPE, W3_ROWB, rows[r], g, xv, xs, a0[r]);
#endif
        }
#else
        ROW_DOT(WQ_W0, W0_TYPE, W0_ROWB, rows[r], g, xv, xs, a0[r]);
#if GLU
        ROW_DOT(WQ_W1, W1_TYPE, W1_ROWB, rows[r], g, xv, xs, a1[r]);
#endif
#endif
    }
}

// Rows n0 .. n0+RS-1 (those below the segment's rows) of token t: one subgroup.
#if MOE == 2
// (slot, group) pair p of token t: x from the slot's staged row (p counts
// groups across the U rows, which lie one after the other), the weights
// from row `rows[r]` of the slot's expert, the product times its weight.
void group_sum(uint xo, uint t, uint p, inout float ss) {
    uint NG = uint(K) / GE, u = p / NG, g = p - u * NG, tu = t * uint(U) + u;
    float w = float(route[uint(ROUTE_FL) * tu + 1u]);
    uint base = expert_of(tu) * uint(N);
    float xv[GE], xs[NRUN];
    load_group(xo, p, xv, xs, ss);
    [[unroll]] for (uint r = 0u; r < RS; r++) {
        float acc = 0.0;
        ROW_DOT(WQ_W0, W0_TYPE, W0_ROWB, base + rows[r], g, xv, xs, acc);
        a0[r] += w * acc;
    }
}
#endif

void rows_of(uint t, uint n0, const uint seg) {
    uint xo = x_row * uint(K), NG = uint(K) / GE, S = gl_SubgroupSize, lane = gl_SubgroupInvocationID;
    uint NS = seg_rows(seg);
    [[unroll]] for (uint r = 0u; r < RS; r++) {
        a0[r] = 0.0;
        a1[r] = 0.0;
        rows[r] = row_base + min(n0 + r, NS - 1u); // a tail row repeats the last one; not written
    }
    float ss = 0.0;
#if MOE == 2
    uint p = lane;
    for (; p + (UNROLL - 1u) * S < uint(U) * NG; p += UNROLL * S)
        [[unroll]] for (uint u = 0u; u < UNROLL; u++) group_sum(xo, t, p + u * S, ss);
    for (; p < uint(U) * NG; p += S) group_sum(xo, t, p, ss);
#else
    uint g = lane;
    for (; g + (UNROLL - 1u) * S < NG; g += UNROLL * S)
        [[unroll]] for (uint u = 0u; u < UNROLL; u++) group(xo, g + u * S, ss, seg);
    for (; g < NG; g += S) group(xo, g, ss, seg);
#endif
#if HAS_NORM && X_SHARED
    float sc = x_norm_scale;
#elif HAS_NORM
    float sc = inversesqrt(subgroupAdd(ss) / float(K) + NORM_EPS);
#endif
    [[unroll]] for (uint r = 0u; r < RS; r++) {
        float s0 = subgroupAdd(a0[r]);
#if GLU
        float s1 = subgroupAdd(a1[r]);
#endif
#if HAS_NORM
        s0 *= sc;
#if GLU
        s1 *= sc;
#endif
#endif
        uint n = n0 + r;
        if (lane == r % S && n < NS) {
#if GLU
            float v = silu(s0) * s1;
#else
            float v = s0;
#endif
            store_seg(seg, t, n, v);
        }
    }
}

// A workgroup owns ROWS_WG rows of one segment (codegen sized the grid for
// that). Its subgroups take RS of them at a time: on a device whose
// subgroups are larger than the target's there are fewer subgroups, and
// each takes more.
void rows_wg(uint t, uint wg, const uint seg) {
    for (uint r = gl_SubgroupID * uint(RS); r < uint(ROWS_WG); r += gl_NumSubgroups * uint(RS)) {
        uint n0 = wg * uint(ROWS_WG) + r;
        if (n0 >= seg_rows(seg)) break; // uniform in the subgroup, which uses no barrier
        rows_of(t, n0, seg);
    }
}

void main() {
    uint t = gl_WorkGroupID.y, wg = gl_WorkGroupID.x;
#if MOE == 1
    if (t >= step.T * uint(U)) return; // t is a (token, slot) pair; uniform across the workgroup
#if X3
    x_row = t;
#else
    x_row = t / uint(U);
#endif
#if TOPK_IN
    if (gl_SubgroupID == 0u) rank_route(t / uint(U), t);
#if !X_SHARED
    barrier(); // publishes s_eid (stage_x's barriers do otherwise)
#endif
#else
    row_base = expert_of(t) * uint(N);
#endif
#elif MOE == 2
    if (t >= step.T) return;
    x_row = t * uint(U);
#else
    if (t >= step.T) return; // uniform across the workgroup
    x_row = t;
#endif
#if X_SHARED
    stage_x(x_row);
#endif
#if MOE == 1 && TOPK_IN
    row_base = expert_of(t) * uint(N);
#endif
#define ROWS_OF_WG(w, seg) rows_wg(t, w, seg)
    SEG_DISPATCH(wg, ROWS_OF_WG)
}
