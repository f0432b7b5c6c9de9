// moe_topk.glsl: the router's top-k, one thread per token, exactly as the
// interpreter (ir/interp.c op_moe_topk) and llama.cpp's build_moe_ffn for
// qwen3moe: p = softmax(logits) with the max subtracted, the TOPK largest p
// in descending order (the lower id first on a tie), each weight
// p / max(sum of the chosen p, 2^-14). A token's E logits are a few hundred
// bytes and TOPK x E comparisons; p is recomputed per round rather than
// kept in a private array of E floats.
//
// Defines: E (experts), TOPK, WG. Bindings: 1 logits [T, E], 2 route [T, TOPK, 2].
layout(local_size_x = WG) in;
layout(std430, binding = 1) readonly buffer Lg { ACT_T logits[]; };
layout(std430, binding = 2) writeonly buffer Rt { ACT_T route[]; };

#define NWORD ((E + 31) / 32)

void main() {
    uint t = gl_GlobalInvocationID.x;
    if (t >= step.T) return;
    uint lo = t * uint(E);
    float mx = -1.0 / 0.0;
    for (uint e = 0u; e < uint(E); e++)
        mx = max(mx, float(logits[lo + e]));
    float sum = 0.0;
    for (uint e = 0u; e < uint(E); e++)
        sum += exp(float(logits[lo + e]) - mx);
    float inv = 1.0 / sum;
    uint taken[NWORD];
    for (uint i = 0u; i < uint(NWORD); i++)
        taken[i] = 0u;
    uint id[TOPK];
    float w[TOPK];
    float wsum = 0.0;
    for (uint k = 0u; k < uint(TOPK); k++) {
        uint best = 0u;
        float bp = -1.0;
        for (uint e = 0u; e < uint(E); e++) {
            if ((taken[e >> 5u] & (1u << (e & 31u))) != 0u) continue;
            float p = exp(float(logits[lo + e]) - mx);
            if (p > bp) bp = p, best = e;
        }
        taken[best >> 5u] |= 1u << (best & 31u);
        id[k] = best;
        w[k] = bp * inv;
        wsum += w[k];
    }
    float div = max(wsum, 6.103515625e-5);
    for (uint k = 0u; k < uint(TOPK); k++) {
        route[(t * uint(TOPK) + k) * 2u] = ACT_T(float(id[k]));
        route[(t * uint(TOPK) + k) * 2u + 1u] = ACT_T(w[k] / div);
    }
}
