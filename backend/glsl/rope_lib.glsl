// rope_lib.glsl: rotary position embedding as ggml computes it, shared by
// rope.glsl and head.glsl.
// Pair j (0 <= j < NR/2) is (2j, 2j+1) in normal mode and (j, j+NR/2) in
// NeoX mode; it turns by the angle (pos + t) * c_j, where
// c_j = freq_scale * theta^(-2j/NR) [/ factor_j]. Dimensions NR..D-1 pass
// through.
//
// Why the angle is computed in exact pieces: at position 30000 an fp32
// angle pos * c is off by up to 1e-3 rad (half an ulp of the product, and c
// itself rounded), and so are cos and sin; the interpreter takes it in
// double. Here c_j / 2pi (turns per position, frequency factor included)
// arrives from the C side as U1 + U2 + U3: U1 and U2 hold 12 significant
// bits each, U3 the rest. pos splits into a multiple of 4096 and a
// remainder, each of at most 12 significant bits, so the four products
// p_hi*U1 ... p_lo*U2 are exact in fp32 (no fma needed: some drivers,
// llvmpipe among them, lower fma to a multiply and an add). Each exact
// product drops its whole turns exactly (x - round(x)), and only the small
// fractional sum is rounded: ~1e-6 rad at any position below 2^24.
// imrope (Qwen3.5) pairs like NeoX; MOVES (uint[NPAIR]) says which pairs
// turn: for text the others see position 0, an angle of exactly 0.
// Defines: D, NR, NPAIR (= NR/2), NEOX (0/1), WG, U1, U2, U3 (float[NPAIR]
// initializers), MOVES (imrope only).
const float u1[NPAIR] = U1;
const float u2[NPAIR] = U2;
const float u3[NPAIR] = U3;
const uint ROW_THREADS = NPAIR + (D - NR);
const float TWO_PI = 6.28318530717958648;

float turns(precise float v) { return v - round(v); } // exact in [-0.5, 0.5] for |v| < 2^23

#ifdef MOVES
const uint moves[NPAIR] = MOVES;
#endif

void rope_cos_sin(uint pos, uint j, out float cs, out float sn) {
#ifdef MOVES
    if (moves[j] == 0u) pos = 0u;
#endif
    precise float ph = float(pos & ~0xfffu), pl = float(pos & 0xfffu);
    precise float f = turns(ph * u1[j]) + turns(pl * u1[j]);
    f += turns(ph * u2[j]) + turns(pl * u2[j]) + turns(float(pos) * u3[j]);
    precise float r = turns(f) * TWO_PI;
    cs = cos(r);
    sn = sin(r);
}

