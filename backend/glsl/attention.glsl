// attention.glsl: scores -> causal softmax -> value mix as one kernel
// (flash attention): the [H, T, P] scores never leave the chip.
//
// Workgroup (x = h * SPLIT + s, y = query tile): the QT queries of the tile
// stay in shared memory while the keys and values they see stream through
// in blocks of BK rows (attn_tile.glsl). Per block: scores (masked
// causally: query t sees keys 0 ..= pos + t), then the online softmax:
// running max m, running sum l, and the accumulator rescaled by
// exp(m_old - m_new) before P V is added. The output is acc / l.
//
// Decode (SPLIT > 1): one query cannot fill a GPU with H workgroups, so the
// keys of a tile are split into SPLIT contiguous chunks, one workgroup each.
// Each writes its partial (m, l, acc) to scratch, then takes a ticket from
// an atomic counter; the last to arrive combines the partials and resets the
// counter to 0 for the next replay. Scratch holds MAX_QTILES tiles per head;
// a tile beyond (a step longer than the plan's max tokens) runs unsplit.
//
// Row statistics use L invocations per query row (L * QT <= WG), combined
// by a shared-memory tree, so nothing depends on the device's subgroup size.
// Defines: those of attn_tile, and L, SPLIT, MAX_QTILES.
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer Q { ACT_T q[]; };
KV_BUFFER(2, K, k);   // view of the cache: P rows
KV_BUFFER(3, V, v);
layout(std430, set = 0, binding = 4) writeonly buffer O { YACT_T o[]; }; // Y_F16: read only by fp16 matmuls
#if SPLIT > 1
layout(std430, set = 0, binding = 5) coherent buffer Part { float part[]; };
layout(std430, set = 0, binding = 6) coherent buffer Cnt { uint cnt[]; };
shared bool s_last;
#endif

shared float sred[QT * L];
shared float sm[QT], sl[QT], sa[QT];

#define TILE_Q
#define TILE_K
#define TILE_V
// (attn_tile.glsl follows this file's declarations: it is composed after.)
