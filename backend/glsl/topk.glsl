// topk.glsl: the largest logits of the step's last row, selected on the GPU so
// that sampling reads a few hundred bytes instead of a whole row.
//
// One workgroup runs a radix select over order-preserving 32-bit keys: four
// passes of an 8-bit histogram find the key of the TOPK_K-th largest logit
// (the threshold); a last pass writes every logit at or above it, at most
// TOPK_CAP of them (ties can add more: `total` counts them all).
// Defines: N_VOCAB, TOPK_K, TOPK_CAP, WG.

layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer Logits { float logits[]; };
layout(std430, set = 0, binding = 2) buffer Top {
    uint count;
    uint total;
    uvec2 cand[]; // (token id, float bits of the logit)
} top;

shared uint hist[256];
shared uint prefix, need, found;

// Larger float, larger key; -0.0 and +0.0 are neighbours, NaN sorts above +inf.
uint order_key(float f) {
    uint u = floatBitsToUint(f);
    return (u & 0x80000000u) != 0u ? ~u : u | 0x80000000u;
}

void main() {
    uint lid = gl_LocalInvocationIndex;
    uint row = (step.T - 1u) * uint(N_VOCAB);
    if (lid == 0u) {
        prefix = 0u;
        need = uint(TOPK_K);
    }
    for (int pass = 0; pass < 4; pass++) {
        uint shift = uint(24 - 8 * pass);
        uint mask = pass == 0 ? 0u : 0xffffffffu << (shift + 8u);
        for (uint b = lid; b < 256u; b += uint(WG)) hist[b] = 0u;
        barrier();
        uint pre = prefix;
        for (uint i = lid; i < uint(N_VOCAB); i += uint(WG)) {
            uint k = order_key(logits[row + i]);
            if ((k & mask) == pre) atomicAdd(hist[(k >> shift) & 255u], 1u);
        }
        barrier();
        if (lid == 0u) { // walk the bins from the top until `need` keys are covered
            uint acc = 0u, b = 255u;
            for (;; b--) {
                if (acc + hist[b] >= need || b == 0u) break;
                acc += hist[b];
            }
            need -= acc;
            prefix = pre | (b << shift);
        }
        barrier();
    }
    if (lid == 0u) found = 0u;
    barrier();
    uint threshold = prefix;
    for (uint i = lid; i < uint(N_VOCAB); i += uint(WG)) {
        float x = logits[row + i];
        if (order_key(x) >= threshold) {
            uint slot = atomicAdd(found, 1u);
            if (slot < uint(TOPK_CAP)) top.cand[slot] = uvec2(i, floatBitsToUint(x));
        }
    }
    barrier();
    if (lid == 0u) {
        top.total = found;
        top.count = min(found, uint(TOPK_CAP));
    }
}
