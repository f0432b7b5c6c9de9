// delta_net_io.glsl: what the two delta-rule kernels share (delta_net.glsl,
// token by token; delta_net_chunk.glsl, in chunks): their bindings, where a
// token's q, k and v rows are, and the load of one row of a value head's
// state, M[j][i] of [HV, D, D].
//
// q, k and v are each a column range of rows: element i of head hk of
// token t of q is q[t * Q_RS + Q_OFF + hk * D + i] (K_ and V_ likewise).
// Unfused, each is its own [T, H, D] tensor (RS = H * D, OFF = 0); with
// fuse-delta they are the conv's [T, 2 Hk D + Hv D] rows, one buffer bound
// once (B_Q == B_K == B_V: one declaration, since llvmpipe was seen to
// mishandle a buffer read through two). L2Q_EPS / L2K_EPS: q / k arrive
// un-normed and the kernel L2-normalizes each head row it loads.
// Defines: D, HK, HV, Q_RS, Q_OFF, K_RS, K_OFF, V_RS, V_OFF; bindings B_Q,
// B_K, B_V, B_G, B_BETA, B_S, B_Y.
layout(std430, set = 0, binding = B_Q) readonly buffer Q { ACT_T q[]; };
#define Q_AT(i) q[i]
#if B_K == B_Q
#define K_AT(i) q[i]
#else
layout(std430, set = 0, binding = B_K) readonly buffer Kb { ACT_T k[]; };
#define K_AT(i) k[i]
#endif
#if B_V == B_Q
#define V_AT(i) q[i]
#elif B_V == B_K
#define V_AT(i) k[i]
#else
layout(std430, set = 0, binding = B_V) readonly buffer V { ACT_T v[]; };
#define V_AT(i) v[i]
#endif
#define Q_IDX(t, hk, i) ((t) * uint(Q_RS) + uint(Q_OFF) + (hk) * uint(D) + (i))
#define K_IDX(t, hk, i) ((t) * uint(K_RS) + uint(K_OFF) + (hk) * uint(D) + (i))
#define V_IDX(t, h, j) ((t) * uint(V_RS) + uint(V_OFF) + (h) * uint(D) + (j))
layout(std430, set = 0, binding = B_G) readonly buffer G { ACT_T g[]; };
layout(std430, set = 0, binding = B_BETA) readonly buffer Beta { ACT_T beta[]; };
layout(std430, set = 0, binding = B_S) buffer S { float st[]; };
layout(std430, set = 0, binding = B_Y) writeonly buffer Y { ACT_T y[]; };

// 1 / max(|x|, eps) of a row whose sum of squares is ss (ggml_l2_norm).
float l2_scale(float ss, float eps) { return 1.0 / max(sqrt(ss), eps); }
