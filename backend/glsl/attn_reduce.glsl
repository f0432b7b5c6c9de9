// attn_reduce.glsl: workgroup-wide max and sum, through subgroup operations
// and one shared slot per subgroup. Correct for any subgroup size (a kernel
// tuned for one device may run on another). Every invocation must call them.
// Needs WG.
#extension GL_KHR_shader_subgroup_arithmetic : require

shared float wg_red[WG];

float wg_max(float v) {
    v = subgroupMax(v);
    if (subgroupElect()) wg_red[gl_SubgroupID] = v;
    barrier();
    float r = wg_red[0];
    for (uint i = 1; i < gl_NumSubgroups; i++) r = max(r, wg_red[i]);
    barrier(); // wg_red is reused by the next call
    return r;
}

float wg_sum(float v) {
    v = subgroupAdd(v);
    if (subgroupElect()) wg_red[gl_SubgroupID] = v;
    barrier();
    float r = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; i++) r += wg_red[i];
    barrier();
    return r;
}
