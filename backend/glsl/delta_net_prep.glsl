// delta_net_prep.glsl: the state-free half of the chunked delta rule
// (prefill), for every chunk of the step at once; delta_net_scan.glsl then
// walks the chunks in order with the state. Notation as in
// delta_net_chunk.glsl: per value head h, chunk tokens t, s < C, G_t the
// running sum of the chunk's gates, A[t][s] = beta_t e^(G_t-G_s) (k_t . k_s)
// (s < t), B[t][s] = e^(G_t-G_s) (q_t . k_s) (s <= t). The chunk's u solve
//   u_t + sum_{s<t} A[t][s] u_s = beta_t (v_t - e^G_t M0 k_t),
// which is linear in the state M0 before the chunk, so u = U - M0 W^T with
//   (I + A) U = diag(beta) V        (U [C, D] over the value rows j)
//   (I + A) W = diag(beta e^G) K    (W [C, D] over the key columns i)
// both by forward substitution, neither needing M0. That moves the
// substitution, the C x C products, the L2 norms and the staging of v out of
// the scan's serial chain: a workgroup here per (value head, chunk), all of
// them in parallel.
//
// Written to the scratch X (vec4 rows, then floats; offsets in the defines,
// chunk-padded: TP = the step's most chunks times C tokens), per token row
// r = c0 + t of the step:
//   XK, XQ  the normed keys and queries [TP, HK, D] (by value heads h < HK)
//   XW, XU  W and U [TP, HV, D]
//   XB      B [chunks, HV, C, C] (floats, zero above the diagonal)
//   XG      G [TP, HV] (floats)
// Rows past the step's last token are zeros (and G holds the last token's
// sum), so the scan runs every chunk whole without a branch.
// Defines: D, HK, HV, C, XK, XQ, XW, XU (vec4 offsets), XB, XG (float
// offsets), B_X; after delta_net_io.glsl.
layout(local_size_x = D) in;

layout(std430, set = 0, binding = B_X) writeonly buffer X { vec4 x4[]; };

#define D4 (D / 4u)

shared vec4 sk4[C * D4], sq4[C * D4]; // the chunk's keys and queries, row t at t * D4
shared float sa[C * C];               // A, [t][s] at t * C + s
shared float sgr[C], sg[C], sbeta[C]; // the gates, their running sums G_t, beta_t
#if defined(L2K_EPS) || defined(L2Q_EPS)
#define L2 1
shared float snorm[2 * C]; // fuse-delta: 1 / |k_t| at t, 1 / |q_t| at C + t
#endif

float hsum(vec4 a) { return (a.x + a.y) + (a.z + a.w); }

// One float of the scratch (a component of its vec4 rows).
void xs_set(uint i, float v) { x4[i >> 2u][i & 3u] = v; }

void main() {
    uint h = gl_WorkGroupID.x, c = gl_WorkGroupID.y, x = gl_LocalInvocationID.x, hk = h % HK;
    uint c0 = c * C, n = min(uint(C), step.T - c0);
    // this invocation's column of v, loaded first (used last)
    float vv[C];
    [[unroll]] for (uint t = 0u; t < C; t++) vv[t] = t < n ? float(V_AT(V_IDX(c0 + t, h, x))) : 0.0;
    for (uint e = x; e < C * D4; e += D) {
        uint t = e / D4;
        vec4 kv = vec4(0.0), qv = vec4(0.0);
        if (t < n) {
            uint b = K_IDX(c0 + t, hk, 4u * (e % D4)), a = Q_IDX(c0 + t, hk, 4u * (e % D4));
            kv = vec4(float(K_AT(b)), float(K_AT(b + 1u)), float(K_AT(b + 2u)), float(K_AT(b + 3u)));
            qv = vec4(float(Q_AT(a)), float(Q_AT(a + 1u)), float(Q_AT(a + 2u)), float(Q_AT(a + 3u)));
        }
        sk4[e] = kv;
        sq4[e] = qv;
    }
    for (uint t = x; t < C; t += D) { // C may exceed D; padded tokens have no gate and no beta
        sgr[t] = t < n ? float(g[(c0 + t) * HV + h]) : 0.0;
        sbeta[t] = t < n ? float(beta[(c0 + t) * HV + h]) : 0.0;
    }
    barrier();
    for (uint t = x; t < C; t += D) { // in token order, the rule's order of the decays
        float cg = 0.0;
        for (uint s = 0u; s <= t; s++) cg += sgr[s];
        sg[t] = cg;
    }
#ifdef L2
    for (uint r = x; r < 2u * n; r += D) {
        uint t = r < n ? r : r - n;
        vec4 ss = vec4(0.0);
        if (r < n)
            for (uint i = 0u; i < D4; i++) ss += sk4[t * D4 + i] * sk4[t * D4 + i];
        else
            for (uint i = 0u; i < D4; i++) ss += sq4[t * D4 + i] * sq4[t * D4 + i];
#ifdef L2K_EPS
        if (r < n) snorm[r] = l2_scale(hsum(ss), L2K_EPS);
#endif
#ifdef L2Q_EPS
        if (r >= n) snorm[C + t] = l2_scale(hsum(ss), L2Q_EPS);
#endif
    }
    barrier();
    for (uint e = x; e < n * D4; e += D) {
#ifdef L2K_EPS
        sk4[e] *= snorm[e / D4];
#endif
#ifdef L2Q_EPS
        sq4[e] *= snorm[C + e / D4];
#endif
    }
#endif
    barrier();
    // A into shared memory, B and G to the scratch; the normed rows of the
    // key head, by the first of its value heads
    for (uint e = x; e < C * C; e += D) {
        uint t = e / C, s = e % C;
        float a = 0.0, bq = 0.0;
        if (s <= t) {
            vec4 kk = vec4(0.0), qk = vec4(0.0);
            for (uint i = 0u; i < D4; i++) {
                vec4 ks = sk4[s * D4 + i];
                kk += sk4[t * D4 + i] * ks;
                qk += sq4[t * D4 + i] * ks;
            }
            float decay = exp(sg[t] - sg[s]);
            a = s < t ? sbeta[t] * decay * hsum(kk) : 0.0;
            bq = decay * hsum(qk);
        }
        sa[e] = a;
        xs_set(uint(XB) + (c * HV + h) * (C * C) + e, bq);
    }
    for (uint t = x; t < C; t += D) xs_set(uint(XG) + (c0 + t) * HV + h, sg[t]);
    if (h < HK)
        for (uint e = x; e < C * D4; e += D) {
            uint r = ((c0 + e / D4) * HK + hk) * D4 + e % D4;
            x4[uint(XK) + r] = sk4[e];
            x4[uint(XQ) + r] = sq4[e];
        }
    barrier();
    // column x of W and of U by forward substitution (independent chains)
    float w[C], u[C];
    [[unroll]] for (uint t = 0u; t < C; t++) {
        float wt = sbeta[t] * exp(sg[t]) * sk4[t * D4 + x / 4u][x % 4u], ut = sbeta[t] * vv[t];
        [[unroll]] for (uint s = 0u; s < t; s++) {
            float a = sa[t * C + s];
            wt -= a * w[s];
            ut -= a * u[s];
        }
        w[t] = wt;
        u[t] = ut;
        uint r = ((c0 + t) * HV + h) * D + x;
        xs_set(uint(XW) * 4u + r, wt);
        xs_set(uint(XU) * 4u + r, ut);
    }
}
