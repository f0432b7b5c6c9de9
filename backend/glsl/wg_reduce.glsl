// wg_reduce.glsl: the sum of one float over a workgroup, for any subgroup
// size (the same kernel runs on devices other than the one it was tuned
// for): a subgroup sum, then one partial per subgroup in shared memory.
// Every invocation gets the total. Call it once per kernel, from uniform
// control flow. Defines: WG.
#extension GL_KHR_shader_subgroup_arithmetic : require

shared float wg_partial[WG];

float wg_sum(float v) {
    v = subgroupAdd(v);
    if (subgroupElect()) wg_partial[gl_SubgroupID] = v;
    barrier();
    float tot = 0.0;
    for (uint s = 0; s < gl_NumSubgroups; s++) tot += wg_partial[s];
    return tot;
}
