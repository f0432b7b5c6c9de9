// embed.glsl: y[t, :] = row tok[t] of the (quantized) table W0[V, H].
// One thread dequantizes 8 consecutive elements of one row; a token id
// outside the table gives a zero row rather than a read past the weights
// (the executor validates ids; the kernel only stays in bounds).
//
// Defines: H (row length, a multiple of 8), V (rows), WG, B_TOK, B_W0, B_Y.

layout(local_size_x = WG) in;

layout(std430, binding = B_TOK) readonly buffer Tokb { int tok[]; };
layout(std430, binding = B_Y) writeonly buffer Yb { ACT_T yout[]; };

void main() {
    uint g = gl_GlobalInvocationID.x, t = g / uint(H / 8), k0 = (g % uint(H / 8)) * 8u;
    if (t >= step.T) return;
    uint row = uint(tok[t]);
    float v[8];
    if (row < uint(V)) DQ8(WQ_W0, W0_TYPE, W0_ROWB, row, k0, v);
    [[unroll]] for (uint i = 0u; i < 8u; i++) yout[t * uint(H) + k0 + i] = ACT_T(row < uint(V) ? v[i] : 0.0);
}
