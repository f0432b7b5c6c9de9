// head.glsl: the per-head preparation of q or k in one pass over each head
// row of x[T, H, D]: [RMSNorm over D] then [RoPE] (rope_lib.glsl), written
// either as [T, H, D] or straight into rows pos .. pos+T-1 of the
// [C, H, D] KV cache. Staged, that is up to three dispatches, each writing
// the row for the next to read, with a barrier between each pair.
// One workgroup per (head, token): gl_WorkGroupID.x = head, .y = token. The
// normalized row waits in shared memory, since RoPE pairs element j with
// j + NR/2 (NeoX) and those belong to different threads.
// Defines: H, D, WG, HAS_NORM (EPS, B_NW), HAS_ROPE (rope_lib's defines),
// HAS_STORE, B_Y.
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer X { ACT_T x[]; };
#if HAS_NORM
layout(std430, set = 0, binding = B_NW) readonly buffer W { uint w[]; }; // f32 as raw words
#endif
#if HAS_STORE
#define Y_T KV_T // the cache's storage
#else
#define Y_T ACT_T
#endif
layout(std430, set = 0, binding = B_Y) writeonly buffer Y { Y_T y[]; };

shared float row[D];

void main() {
    uint t = gl_WorkGroupID.y, h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    if (t >= step.T) return; // uniform across the workgroup
    uint base = (t * H + h) * D;
#if HAS_NORM
    float ss = 0.0;
    for (uint i = tid; i < D; i += WG) {
        float v = float(x[base + i]);
        ss += v * v;
    }
    float tot = wg_sum(ss); // attn_reduce.glsl
    float scale = 1.0 / sqrt(tot / float(D) + EPS);
    // (x * scale) * w, in the interpreter's order.
    for (uint i = tid; i < D; i += WG) row[i] = float(x[base + i]) * scale * uintBitsToFloat(w[i]);
#else
    for (uint i = tid; i < D; i += WG) row[i] = float(x[base + i]);
#endif
    barrier();
#if HAS_STORE
    if (ROW_POS(t) >= step.ctx) return; // past the cache: nothing to keep (no barrier follows)
    uint ob = (ROW_KV(t) * H + h) * D;
#else
    uint ob = base;
#endif
#if HAS_ROPE
    for (uint j = tid; j < ROW_THREADS; j += WG) {
        if (j >= NPAIR) {
            uint e = NR + (j - NPAIR);
            y[ob + e] = Y_T(row[e]);
            continue;
        }
        uint i0 = NEOX != 0 ? j : 2u * j, i1 = NEOX != 0 ? j + NPAIR : 2u * j + 1u;
        float cs, sn;
        rope_cos_sin(ROW_POS(t), j, cs, sn);
        float a = row[i0], b = row[i1];
        y[ob + i0] = Y_T(a * cs - b * sn);
        y[ob + i1] = Y_T(a * sn + b * cs);
    }
#else
    for (uint i = tid; i < D; i += WG) y[ob + i] = Y_T(row[i]);
#endif
}
