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
