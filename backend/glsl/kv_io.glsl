// kv_io.glsl: how the attention kernels declare and read KV-cache views.
// A KV-cache binding: rows of D elements. With D % 8 == 0 it is read eight
// elements at a time (one 16-byte load of halves, two of floats), the only
// declaration of the buffer: llvmpipe was seen to mishandle a buffer read
// through two. kv8(name, i) gives elements 8i .. 8i+7.
#if defined(D) && (D % 8 == 0)
#define KV_VEC8 1
#ifdef KV_F16
#define KV_BUFFER(b, blk, name) layout(std430, set = 0, binding = b) readonly buffer blk { uvec4 name##8[]; }
#define kv8(name, i) kv8_unpack(name##8[i])
float[8] kv8_unpack(uvec4 w) {
    vec2 a = unpackHalf2x16(w.x), b = unpackHalf2x16(w.y), c = unpackHalf2x16(w.z), e = unpackHalf2x16(w.w);
    return float[8](a.x, a.y, b.x, b.y, c.x, c.y, e.x, e.y);
}
#else
#define KV_BUFFER(b, blk, name) layout(std430, set = 0, binding = b) readonly buffer blk { vec4 name##4[]; }
#define kv8(name, i) kv8_join(name##4[2u * (i)], name##4[2u * (i) + 1u])
float[8] kv8_join(vec4 a, vec4 b) { return float[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w); }
#endif
#else
#define KV_BUFFER(b, blk, name) layout(std430, set = 0, binding = b) readonly buffer blk { KV_T name[]; }
#endif
