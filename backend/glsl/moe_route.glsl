// moe_route.glsl: the step's (token, slot) pairs sorted by expert, then
// token, then slot (a stable counting sort): out[p] = (id, expert, token,
// slot) where id is pair p's expert (matmul_id's route) and (expert,
// token, slot) the pair of rank p. The grouped GEMMs (moe_gemm.glsl) find
// each expert's run of ranks in it.
//
// Workgroup e places expert e's pairs: each thread counts, over one
// contiguous run of pairs, those of experts below e and those of e; a
// subgroup and a workgroup exclusive scan give expert e's first rank (the
// pairs below it) and each run's first rank within e, and the threads
// write their pairs in order. Every workgroup also copies a share of the
// route's ids.
//
// Defines: WG, E, U, B_IN (route [T,U,2]), B_OUT ([T,U,4]).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x = WG) in;
layout(std430, binding = B_IN) readonly buffer Rt { ACT_T route[]; };
layout(std430, binding = B_OUT) writeonly buffer Ot { ACT_T sorted[]; };

shared uint mine_s[WG];  // pairs of expert e per subgroup
shared uint below_s[WG]; // pairs of experts below e per subgroup

// As moe_gemv.glsl: an id the router cannot produce is clamped.
uint expert_of(uint p) { return min(uint(float(route[2u * p])), uint(E) - 1u); }

void main() {
    uint tid = gl_LocalInvocationIndex, e = gl_WorkGroupID.x, P = step.T * uint(U);
    for (uint p = e * uint(WG) + tid; p < P; p += uint(E * WG)) {
        sorted[4u * p] = route[2u * p];
    }
    uint per = (P + uint(WG) - 1u) / uint(WG), p0 = min(tid * per, P), p1 = min(p0 + per, P);
    uint below = 0u, mine = 0u;
    for (uint p = p0; p < p1; p++) {
        uint x = expert_of(p);
        below += x < e ? 1u : 0u;
        mine += x == e ? 1u : 0u;
    }
    uint rank = subgroupExclusiveAdd(mine), m_sg = subgroupAdd(mine), b_sg = subgroupAdd(below);
    if (subgroupElect()) {
        mine_s[gl_SubgroupID] = m_sg;
        below_s[gl_SubgroupID] = b_sg;
    }
    barrier();
    for (uint s = 0u; s < gl_NumSubgroups; s++) rank += below_s[s] + (s < gl_SubgroupID ? mine_s[s] : 0u);
    for (uint p = p0; p < p1 && mine > 0u; p++) {
        if (expert_of(p) != e) continue;
        sorted[4u * rank + 1u] = ACT_T(e);
        sorted[4u * rank + 2u] = ACT_T(p / uint(U));
        sorted[4u * rank + 3u] = ACT_T(p % uint(U));
        rank++;
    }
}
