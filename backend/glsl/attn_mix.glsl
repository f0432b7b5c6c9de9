// attn_mix.glsl (staged attention, step 3): o[t, h, e] = sum_p pr[h, t, p] * v[p, h / (H/HKV), e].
// Workgroup (head, tile of QT queries); values and the matching block of
// probabilities pass through in blocks of BK positions, summed in position
// order (the interpreter's order).
// Defines: those of attn_tile.
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer PR { ACT_T pr[]; };
KV_BUFFER(2, V, v); // view of the cache: P rows
layout(std430, set = 0, binding = 3) writeonly buffer O { ACT_T o[]; };
#define TILE_V
