// q6_planes.glsl: the load schedule's rewrite of a q6_K matrix into the
// weight-layout pass's planes (passes/weight_layout.c), in place. Each row
// of NB blocks (210 NB bytes, NB % 4 == 0) becomes its blocks' 128 quant
// bytes, then their 64 high-bit bytes, their 16 scales and their d's, in
// block order: the same bytes, the same row, so a workgroup owns whole rows
// and no row is read after another workgroup wrote it. A workgroup reads a
// row into shared memory, then writes the planes over it, one word a lane.
//
// Defines: WG (threads), NB (blocks a row), ROWS (of the matrix).

layout(local_size_x = WG) in;

layout(std430, binding = 1) buffer Wb { uint w[]; };

#define ROW_WORDS (NB * 210 / 4)
shared uint s_row[ROW_WORDS];

// The 4 bytes of the row at an even byte offset o.
uint row_u32(uint o) {
    uint i = o >> 2u;
    return (o & 2u) == 0u ? s_row[i] : (s_row[i] >> 16u) | (s_row[i + 1u] << 16u);
}
// The 2 bytes at an even offset o, in the low half.
uint row_u16(uint o) { return (s_row[o >> 2u] >> ((o & 2u) * 8u)) & 0xffffu; }

void main() {
    for (uint row = gl_WorkGroupID.x; row < uint(ROWS); row += gl_NumWorkGroups.x) {
        uint base = row * uint(ROW_WORDS);
        for (uint i = gl_LocalInvocationID.x; i < uint(ROW_WORDS); i += WG) s_row[i] = w[base + i];
        barrier();
        for (uint i = gl_LocalInvocationID.x; i < uint(ROW_WORDS); i += WG) {
            uint o = 4u * i, v;
            if (o < 128u * NB) { // quant nibbles: block o / 128, its bytes 0..127
                v = row_u32(210u * (o >> 7u) + (o & 127u));
            } else if (o < 192u * NB) { // high bits: bytes 128..191
                uint r = o - 128u * NB;
                v = row_u32(210u * (r >> 6u) + 128u + (r & 63u));
            } else if (o < 208u * NB) { // scales: bytes 192..207
                uint r = o - 192u * NB;
                v = row_u32(210u * (r >> 4u) + 192u + (r & 15u));
            } else { // d of blocks j and j + 1
                uint j = (o - 208u * NB) >> 1u;
                v = row_u16(210u * j + 208u) | (row_u16(210u * (j + 1u) + 208u) << 16u);
            }
            w[base + i] = v;
        }
        barrier();
    }
}
