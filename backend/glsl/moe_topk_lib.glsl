// moe_topk_lib.glsl: the router's top-k of one token in one subgroup, exactly as the
// interpreter (ir/interp.c op_moe_topk) and llama.cpp's build_moe_ffn for
// qwen3moe: p = softmax(logits) with the max subtracted, the TOPK largest p
// in descending order (the lower id first on a tie), each weight
// p / max(sum of the chosen p, 2^-14).
//
// Why a subgroup: with a thread per token, decode's single token was one
// thread walking all E experts TOPK + 2 times (123 us for 4 layers of 128
// experts on the H200, as slow as attention). Here lane i of S (the
// device's subgroup size, read at run time: any power of two) owns experts
// i, i + S, i + 2S, ...; the first NP of them keep p = exp(l - mx) in
// registers, computed once, and any past NP * S (a device whose subgroup is
// narrower than the target's) recompute the same expression each round. The
// max and the sum are subgroupMax / subgroupAdd (so the sum is added in
// another order than the interpreter's), and each round is one walk of a
// lane's experts and two reductions: the largest p (subgroupMax), then the
// lowest id among the lanes that hold it (subgroupMin). No taken-mask: the
// picks come in the strict order (p descending, id ascending), so round k's
// candidates are the experts after round k-1's pick in that order.
//
// Two kernels call topk_route: moe_topk.glsl (a subgroup a token) and the
// expert gate+up GEMV with the top-k in its prologue (matmul_gemv.glsl's
// TOPK_IN, the fuse-topk pass), so that both rank the experts alike, bit for
// bit.
//
// Defines: E (experts), TOPK, NP (p values a lane keeps), B_LOGITS (the
// binding of the logits [T, E]).
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_basic : require
layout(std430, binding = B_LOGITS) readonly buffer Lg { ACT_T logits[]; };

// Expert e (of this lane) is still a candidate after the pick (lp, lid).
bool after(float p, uint e, float lp, uint lid) {
    return p < lp || (p == lp && e > lid);
}

// The route of the token whose logits start at lo, in every lane of the
// subgroup (in uniform control flow): the TOPK expert ids in pick order and
// their renormalized weights.
void topk_route(uint lo, uint lane, uint S, out uint id[TOPK], out float wn[TOPK]) {
    uint rest = lane + uint(NP) * S; // first expert not in registers
    float p[NP];
    float mx = -1.0 / 0.0;
    [[unroll]] for (uint j = 0u; j < uint(NP); j++) {
        uint e = lane + j * S;
        p[j] = -1.0 / 0.0;
        if (e < uint(E)) p[j] = float(logits[lo + e]);
        mx = max(mx, p[j]);
    }
    for (uint e = rest; e < uint(E); e += S)
        mx = max(mx, float(logits[lo + e]));
    mx = subgroupMax(mx);
    float sum = 0.0;
    [[unroll]] for (uint j = 0u; j < uint(NP); j++) {
        uint e = lane + j * S;
        p[j] = e < uint(E) ? exp(p[j] - mx) : -1.0; // -1: no expert, never picked
        if (e < uint(E)) sum += p[j];
    }
    for (uint e = rest; e < uint(E); e += S)
        sum += exp(float(logits[lo + e]) - mx);
    float inv = 1.0 / subgroupAdd(sum);
    float w[TOPK];
    float wsum = 0.0, lp = 1.0 / 0.0; // the last pick (lp, lid)
    uint lid = 0u;
    for (uint k = 0u; k < uint(TOPK); k++) {
        float bp = -1.0;
        uint bid = 0xffffffffu;
        [[unroll]] for (uint j = 0u; j < uint(NP); j++) { // ascending e: the lower id keeps a tie
            uint e = lane + j * S;
            if (p[j] > bp && after(p[j], e, lp, lid)) bp = p[j], bid = e;
        }
        for (uint e = rest; e < uint(E); e += S) {
            float q = exp(float(logits[lo + e]) - mx);
            if (q > bp && after(q, e, lp, lid)) bp = q, bid = e;
        }
        lp = subgroupMax(bp);
        lid = subgroupMin(bp == lp ? bid : 0xffffffffu);
        id[k] = lid;
        w[k] = lp * inv;
        wsum += w[k];
    }
    float div = max(wsum, 6.103515625e-5);
    [[unroll]] for (uint k = 0u; k < uint(TOPK); k++) wn[k] = w[k] / div;
}
