// gemm_tile.glsl: the scalar GEMM's tile, shared by matmul_gemm.glsl (a tile
// of tokens) and moe_gemm.glsl (a tile of one expert's (token, slot) pairs):
// the thread grid, the staged x and weight tiles in shared memory, and the
// products of one staged step into each thread's TM x TN sums.
//
// Defines: BM, BN, BK, TM, TN, WG = (BM/TM)*(BN/TN), GLU.

layout(local_size_x = WG) in;

#define GX (BN / TN) /* thread grid columns */
#define GY (BM / TM) /* thread grid rows */
#define BMP (BM + 1) /* padded strides: conflict-free column writes */
#define BNP (BN + 1)
#if GLU
#define ON (BN / 2) /* outputs per tile */
#define JN (TN / 2) /* a thread's outputs: its gate columns, their up columns TN / 2 later */
#else
#define ON BN
#define JN TN
#endif

shared float xs[BK * BMP]; // [k][row of the tile: token or pair]
shared float ws[BK * BNP]; // [k][tile column]

// Thread (tx, ty)'s sums over the staged step: rows ty + i GY, columns
// tx + j GX of the tile.
void tile_products(uint tx, uint ty, inout float acc[TM][TN]) {
    for (uint k = 0u; k < uint(BK); k++) {
        float a[TM], b[TN];
        [[unroll]] for (uint i = 0u; i < uint(TM); i++) a[i] = xs[k * uint(BMP) + ty + i * uint(GY)];
        [[unroll]] for (uint j = 0u; j < uint(TN); j++) b[j] = ws[k * uint(BNP) + tx + j * uint(GX)];
        [[unroll]] for (uint i = 0u; i < uint(TM); i++)
            [[unroll]] for (uint j = 0u; j < uint(TN); j++) acc[i][j] += a[i] * b[j];
    }
}
