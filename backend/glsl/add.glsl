// add.glsl: y = BINOP(a, b) per element, with b broadcast over the leading
// dimensions: a residual of a's shape, or a bias of B_N elements repeating.
// The same template serves add ((a) + (b)), SwiGLU (silu(a) * (b)) and mul.
// Grid: gl_WorkGroupID.y is the token, x covers PER_T elements of it.
// Defines: PER_T (output elements per token), WG, BINOP(a, b); B_WEIGHT when
// b is an f32 weight bound as raw words; B_FULL when b has a's shape, B_ROW
// when b is one value per token ([T, 1]: qwen35moe's shared-expert gate), else B_N.
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer A { ACT_T a[]; };
#ifdef B_WEIGHT
layout(std430, set = 0, binding = 2) readonly buffer B { uint b[]; };
#define LOAD_B(i) uintBitsToFloat(b[i])
#else
layout(std430, set = 0, binding = 2) readonly buffer B { ACT_T b[]; };
#define LOAD_B(i) float(b[i])
#endif
layout(std430, set = 0, binding = 3) writeonly buffer Y { ACT_T y[]; };

void main() {
    uint t = gl_WorkGroupID.y, j = gl_GlobalInvocationID.x;
    if (t >= step.T || j >= PER_T) return;
    uint i = t * PER_T + j;
#if defined(B_FULL)
    uint bi = i;
#elif defined(B_ROW)
    uint bi = t;
#else
    uint bi = i % B_N;
#endif
    y[i] = ACT_T(BINOP(float(a[i]), LOAD_B(bi)));
}
