// attn_scores.glsl (staged attention, step 1): s[h, t, p] = q[t, h] . k[p, h / (H/HKV)] * SCALE
// for every cached position p < P = pos + T (no mask: the softmax masks).
// Workgroup (head, tile of QT queries); keys pass through in blocks of BK
// (attn_tile.glsl), since P is known only at run time.
// Defines: those of attn_tile.
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer Q { ACT_T q[]; };
KV_BUFFER(2, K, k); // view of the cache: P rows
layout(std430, set = 0, binding = 3) writeonly buffer S { ACT_T s[]; };
#define TILE_Q
#define TILE_K
