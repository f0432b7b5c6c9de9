// idot.glsl: packed 4x8-bit integer dot products, the markers that
// backend/spv_idot.c rewrites to SPV_KHR_integer_dot_product (Debian 12's
// glslang has no GL_EXT_integer_dot_product). Each body computes the same
// thing in plain GLSL, so a kernel is correct without the rewrite too; with
// it, the body is one OpSDot and an add (zdot4) or one OpSDotAccSat
// (zdot4sat). The rewrite finds the functions by name: keep the names and
// the signatures.

// The four signed bytes of a and of b, multiplied pairwise and summed, plus
// acc (wrapping, as int addition does).
int zdot4(uint a, uint b, int acc) {
    int ia = int(a), ib = int(b);
    return acc + bitfieldExtract(ia, 0, 8) * bitfieldExtract(ib, 0, 8) +
           bitfieldExtract(ia, 8, 8) * bitfieldExtract(ib, 8, 8) +
           bitfieldExtract(ia, 16, 8) * bitfieldExtract(ib, 16, 8) +
           bitfieldExtract(ia, 24, 8) * bitfieldExtract(ib, 24, 8);
}

// The same dot product added to acc with saturation at the int range.
int zdot4sat(uint a, uint b, int acc) {
    int ia = int(a), ib = int(b);
    int s = bitfieldExtract(ia, 0, 8) * bitfieldExtract(ib, 0, 8) +
            bitfieldExtract(ia, 8, 8) * bitfieldExtract(ib, 8, 8) +
            bitfieldExtract(ia, 16, 8) * bitfieldExtract(ib, 16, 8) +
            bitfieldExtract(ia, 24, 8) * bitfieldExtract(ib, 24, 8);
    int r = acc + s;
    if (s > 0 && r < acc) r = 0x7fffffff;
    if (s < 0 && r > acc) r = int(0x80000000u);
    return r;
}

// An integer sum of products as a float, exactly for |i| < 2^22, without
// the int-to-float conversion (a quarter-rate instruction on NVIDIA): i
// added to the mantissa of 1.5 * 2^23, then 1.5 * 2^23 subtracted.
float zi2f(int i) { return uintBitsToFloat(uint(i) + 0x4b400000u) - 12582912.0; }

#ifdef Q8_INV127
// A block of 32 activations quantized as q8_1 (ir/interp.c's zir_quantize_q8
// rounds the same way): w, its 32 signed bytes packed four a word; s, the
// sums of the quants per 8 elements; returns the scale d.
float q8_1_block(float v[32], out uint w[8], out int s[4]) {
    float amax = 0.0;
    [[unroll]] for (uint e = 0u; e < 32u; e++) amax = max(amax, abs(v[e]));
    float d = amax * Q8_INV127, id = d > 0.0 ? 1.0 / d : 0.0;
    s = int[4](0, 0, 0, 0);
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
        uint pk = 0u;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            int q = clamp(int(roundEven(v[4u * k + j] * id)), -127, 127);
            s[k >> 1u] += q;
            pk |= uint(q & 0xff) << (8u * j);
        }
        w[k] = pk;
    }
    return d;
}
#endif
