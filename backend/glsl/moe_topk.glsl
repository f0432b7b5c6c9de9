// moe_topk.glsl: the router's top-k, one subgroup per token, exactly as the
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
// Workgroup: TPW tokens, its subgroups taking them in turn (TPW subgroups
// when the device's subgroup is the target's). The early-out past T is per
// subgroup, so the reductions run in uniform control flow.
//
// Defines: E (experts), TOPK, WG, TPW (tokens a workgroup), NP (p values a
// lane keeps). Bindings: 1 logits [T, E] (B_LOGITS, moe_topk_lib.glsl's),
// 2 route [T, TOPK, 2].
layout(local_size_x = WG) in;
layout(std430, binding = 2) writeonly buffer Rt { ACT_T route[]; };

void token(uint t, uint lane, uint S) {
    uint id[TOPK];
    float w[TOPK];
    topk_route(t * uint(E), lane, S, id, w);
    for (uint k = lane; k < uint(TOPK); k += S) {
        route[(t * uint(TOPK) + k) * 2u] = ACT_T(float(id[k]));
        route[(t * uint(TOPK) + k) * 2u + 1u] = ACT_T(w[k]);
    }
}

void main() {
    // A workgroup narrower than the device's subgroup is one partial subgroup.
    uint S = min(gl_SubgroupSize, uint(WG));
    for (uint i = gl_SubgroupID; i < uint(TPW); i += gl_NumSubgroups) {
        uint t = gl_WorkGroupID.x * uint(TPW) + i;
        if (t >= step.T) break; // uniform in the subgroup
        token(t, gl_SubgroupInvocationID, S);
    }
}
