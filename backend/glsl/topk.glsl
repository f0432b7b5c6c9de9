// topk.glsl: the largest logits of the step's last row, selected on the GPU so
// that sampling reads a few hundred bytes instead of a whole row.
//
// One dispatch of NSLICE workgroups, in two stages that share one selection:
// a radix select over order-preserving 32-bit keys held in registers (REG a
// thread), four bits a pass, one barrier a pass and no atomics per key.
//  1. Workgroup g reads its slice of SLICE logits once and finds t_g, the key
//     of the slice's TOPK_K-th largest logit. It writes the logits above t_g,
//     then ties at t_g, at most TOPK_CAP in all, to its list in the scratch
//     binding, with t_g and c_g (how many of its logits are >= t_g).
//  2. The last workgroup to finish (an arrival counter, as in mlp.glsl) runs
//     the select again over the first TOPK_K entries of every list and writes
//     every logit >= the global threshold T to the top-k buffer.
// Why the union suffices: each slice has TOPK_K logits >= t_g, so T >= t_g
// for every g, and each logit >= T is one of its slice's c_g logits >= t_g.
// A list's first TOPK_K entries are its slice's TOPK_K largest, so their
// union holds the row's TOPK_K largest and its TOPK_K-th largest key is T;
// only entries >= t* = max t_g can reach it. The entries past TOPK_K all
// equal t_g: they matter only where t_g == T, and `total` counts every one of
// them, listed or not, so it is exact: ties beyond TOPK_CAP leave
// total > count and the sampler reads the row, as with one workgroup.
// BATCH (the batch schedule, zincc --parallel): every row of the step is
// selected, row gl_WorkGroupID.y by its own NSLICE workgroups, into its own
// record of the top-k buffer (TOPK_WORDS words a row) with its own scratch
// (SCR_WORDS a row: its arrival counter, headers and lists), so that the
// rows' selections never meet and each is the one a step of that row alone
// makes.
// Defines: N_VOCAB, TOPK_K (a power of two), TOPK_CAP, WG, PER (logits a
// thread in stage 1), SLICE = WG * PER, NSLICE, REG >= PER and
// >= NSLICE * TOPK_K / WG, all at most 15 (a nibble counts a digit); BATCH,
// TOPK_WORDS and SCR_WORDS (a row's record and scratch).

#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 1) readonly buffer Logits { float logits[]; };
// A row's record at tb: count, total, then (token id, float bits of the logit) pairs.
layout(std430, set = 0, binding = 2) buffer Top { uint topw[]; };
// [0] arrival counter (back to 0 after the merge, for the next replay);
// [HDR + 2g] t_g, c_g; [LIST + 2 * (g * TOPK_CAP + i)] id, bits of entry i.
// All at sb, the row's scratch.
layout(std430, set = 0, binding = 3) coherent buffer Scratch { uint scr[]; };
#ifndef BATCH
#define BATCH 0
#endif
uint tb, sb; // the row's top-k record and scratch
void put_cand(uint at, uint id, uint bits) {
    topw[tb + 2u + 2u * at] = id;
    topw[tb + 3u + 2u * at] = bits;
}

#define HDR 4u
#define LIST (4u + 2u * uint(NSLICE))

// 16 digit counts as 16-bit halves; three in rotation, so that a pass can
// clear the next one's before its own barrier and needs no second barrier.
shared uint hist[3][8];
shared uint s_ctr[2]; // slots claimed: [0] in the slice's list, [1] in the top-k buffer
shared uint s_extra, s_ovf, s_tstar, s_max;
shared bool s_last;
shared uint st[NSLICE], sc[NSLICE];

// Larger float, larger key; -0.0 and +0.0 are neighbours, NaN sorts above +inf.
uint order_key(uint u) { return (u & 0x80000000u) != 0u ? ~u : u | 0x80000000u; }
uint key_bits(uint k) { return (k & 0x80000000u) != 0u ? k & 0x7fffffffu : ~k; }

// Adds this thread's digit counts (nibble d & 7 of lo for d < 8, else of hi)
// to the histogram of pass q and narrows prefix to the digit of the need-th
// largest key: the largest digit d whose keys, with those of larger digits,
// number at least need (0 if none: fewer keys than need, all are kept).
// need becomes what is left to find inside that digit, eq its key count.
void pick_digit(uint lo, uint hi, uint q, uint shift, inout uint prefix, inout uint need, out uint eq) {
    uint b = q % 3u, lid = gl_LocalInvocationIndex;
    [[unroll]] for (uint j = 0u; j < 8u; j++) {
        uint x = (j < 4u ? lo : hi) >> (8u * (j & 3u));
        uint s = subgroupAdd((x & 0xfu) | ((x & 0xf0u) << 12u));
        if (subgroupElect() && s != 0u) atomicAdd(hist[b][j], s);
    }
    if (lid < 8u) hist[(q + 1u) % 3u][lid] = 0u;
    barrier();
    uint acc = 0u, d = 0u;
    bool found = false;
    [[unroll]] for (uint k = 15u; k >= 1u; k--) {
        uint c = (hist[b][k >> 1u] >> (16u * (k & 1u))) & 0xffffu;
        if (!found && acc + c >= need) {
            d = k;
            found = true;
        } else if (!found) {
            acc += c;
        }
    }
    eq = (hist[b][d >> 1u] >> (16u * (d & 1u))) & 0xffffu;
    need -= acc;
    prefix |= d << shift;
}

// Pass p of the select: digit bits 28-4p .. 31-4p of the keys in okm that
// match prefix above it; q counts passes for the histogram rotation.
void select_pass(uint key[REG], uint okm, uint p, uint q, inout uint prefix, inout uint need, out uint eq) {
    uint shift = 28u - 4u * p, hmask = p == 0u ? 0u : ~0u << (32u - 4u * p), lo = 0u, hi = 0u;
    [[unroll]] for (uint i = 0u; i < uint(REG); i++) {
        uint k = key[i], d = (k >> shift) & 15u;
        bool m = ((okm >> i) & 1u) != 0u && ((k ^ prefix) & hmask) == 0u;
        uint inc = m ? 1u << ((d & 7u) * 4u) : 0u;
        lo += d < 8u ? inc : 0u;
        hi += d < 8u ? 0u : inc;
    }
    pick_digit(lo, hi, q, shift, prefix, need, eq);
}

// Where this thread's selected keys go in list c: a running offset from an
// exclusive sum over the subgroup plus one shared atomic per subgroup. mine
// may pack two counts as 16-bit halves (their sums stay below 65536).
uint claim(uint mine, uint c) {
    uint before = subgroupExclusiveAdd(mine), sum = subgroupAdd(mine), at = 0u;
    if (subgroupElect() && sum != 0u) at = atomicAdd(s_ctr[c], sum);
    return subgroupMax(at) + before; // only the elected lane's is nonzero
}

// Stage 1's output: logits above t in slots from 0 (gt of them, < TOPK_K),
// ties at t from slot gt on, so that the first TOPK_K slots hold the slice's
// TOPK_K largest; then the header.
void publish(uint key[REG], uint okm, uint t, uint gt, uint eq, uint g, uint first) {
    uint lid = gl_LocalInvocationIndex, mine = 0u;
    [[unroll]] for (uint i = 0u; i < uint(REG); i++)
        if (((okm >> i) & 1u) != 0u) mine += key[i] > t ? 1u : key[i] == t ? 0x10000u : 0u;
    uint at = claim(mine, 0u), above = at & 0xffffu, tie = gt + (at >> 16u);
    [[unroll]] for (uint i = 0u; i < uint(REG); i++) {
        if (((okm >> i) & 1u) == 0u || key[i] < t) continue;
        uint slot = key[i] > t ? above++ : tie++, e = LIST + 2u * (g * uint(TOPK_CAP) + slot);
        if (slot >= uint(TOPK_CAP)) continue;
        scr[sb + e] = first + i * uint(WG) + lid;
        scr[sb + e + 1u] = key_bits(key[i]);
    }
    if (lid == 0u) {
        scr[sb + HDR + 2u * g] = t;
        scr[sb + HDR + 2u * g + 1u] = gt + eq;
    }
}

// Stage 2's input: the headers, and the first TOPK_K entries of each list as
// keys, those below t* dropped. Returns t*; kmax is the largest key.
uint gather(out uint key[REG], out uint okm, out uint kmax) {
    uint lid = gl_LocalInvocationIndex, tmax = 0u, m = 0u;
    for (uint g = lid; g < uint(NSLICE); g += uint(WG)) {
        st[g] = scr[sb + HDR + 2u * g];
        sc[g] = scr[sb + HDR + 2u * g + 1u];
        tmax = max(tmax, st[g]);
    }
    okm = 0u;
    [[unroll]] for (uint i = 0u; i < uint(REG); i++) {
        uint j = i * uint(WG) + lid, g = j / uint(TOPK_K), r = j % uint(TOPK_K);
        key[i] = 0u;
        if (j >= uint(NSLICE * TOPK_K) || r >= min(scr[sb + HDR + 2u * g + 1u], uint(TOPK_K))) continue;
        key[i] = order_key(scr[sb + LIST + 2u * (g * uint(TOPK_CAP) + r) + 1u]);
        okm |= 1u << i;
        m = max(m, key[i]);
    }
    tmax = subgroupMax(tmax);
    m = subgroupMax(m);
    if (subgroupElect()) {
        atomicMax(s_tstar, tmax);
        atomicMax(s_max, m);
    }
    barrier();
    [[unroll]] for (uint i = 0u; i < uint(REG); i++)
        if (key[i] < s_tstar) okm &= ~(1u << i);
    kmax = s_max;
    return s_tstar;
}

// Entries past the first TOPK_K of lists whose t_g is T (all ties at T),
// written after the `at` found so far, while room is left.
void write_ties(uint T, uint at) {
    uint lid = gl_LocalInvocationIndex;
    for (uint g = 0u; g < uint(NSLICE) && at < uint(TOPK_CAP); g++) {
        uint w = st[g] >= T ? min(sc[g], uint(TOPK_CAP)) : 0u, n = w > uint(TOPK_K) ? w - uint(TOPK_K) : 0u;
        for (uint r = lid; r < n && at + r < uint(TOPK_CAP); r += uint(WG)) {
            uint e = LIST + 2u * (g * uint(TOPK_CAP) + uint(TOPK_K) + r);
            put_cand(at + r, scr[sb + e], scr[sb + e + 1u]);
        }
        at += n;
    }
}

// Stage 2, in the last workgroup; q counts passes run so far.
void merge(uint q) {
    uint lid = gl_LocalInvocationIndex, key[REG], okm, hi, eq;
    uint tstar = gather(key, okm, hi);
    // Every key left lies in [t*, hi]: the digits they share need no pass.
    uint p0 = tstar == hi ? 8u : uint(31 - findMSB(tstar ^ hi)) / 4u;
    uint prefix = p0 == 0u ? 0u : hi & (~0u << (32u - 4u * p0)), need = uint(TOPK_K);
    for (uint p = p0; p < 8u; p++)
        select_pass(key, okm, p, q++, prefix, need, eq);
    uint T = prefix, mine = 0u;
    [[unroll]] for (uint i = 0u; i < uint(REG); i++)
        if (((okm >> i) & 1u) != 0u && key[i] >= T) mine++;
    uint at = claim(mine, 1u);
    [[unroll]] for (uint i = 0u; i < uint(REG); i++) {
        if (((okm >> i) & 1u) == 0u || key[i] < T) continue;
        uint j = i * uint(WG) + lid, e = LIST + 2u * ((j / uint(TOPK_K)) * uint(TOPK_CAP) + j % uint(TOPK_K));
        if (at < uint(TOPK_CAP)) put_cand(at, scr[sb + e], scr[sb + e + 1u]);
        at++;
    }
    // Logits >= T past the lists' first TOPK_K: listed ones (ovf), all (extra).
    uint extra = 0u, ovf = 0u;
    for (uint g = lid; g < uint(NSLICE); g += uint(WG)) {
        uint c = st[g] >= T ? sc[g] : 0u, w = min(c, uint(TOPK_CAP));
        extra += c - min(c, uint(TOPK_K));
        ovf += w - min(w, uint(TOPK_K));
    }
    extra = subgroupAdd(extra);
    ovf = subgroupAdd(ovf);
    if (subgroupElect()) {
        atomicAdd(s_extra, extra);
        atomicAdd(s_ovf, ovf);
    }
    barrier();
    if (s_ovf != 0u) write_ties(T, s_ctr[1]);
    if (lid == 0u) {
        topw[tb + 1u] = s_ctr[1] + s_extra;
        topw[tb] = min(s_ctr[1] + s_ovf, uint(TOPK_CAP));
        scr[sb] = 0u;
    }
}

void main() {
    uint lid = gl_LocalInvocationIndex, g = gl_WorkGroupID.x, first = g * uint(SLICE);
#if BATCH
    uint r = gl_WorkGroupID.y; // each row of the step
    if (r >= step.T) return;   // uniform across the workgroup
#else
    uint r = step.T - 1u; // the step's last row, into record 0
#endif
    tb = BATCH != 0 ? r * uint(TOPK_WORDS) : 0u;
    sb = BATCH != 0 ? r * uint(SCR_WORDS) : 0u;
    uint row = r * uint(N_VOCAB), key[REG], okm = 0u;
    if (lid < 8u) hist[0][lid] = 0u;
    if (lid == 0u) {
        s_ctr[0] = s_ctr[1] = s_extra = s_ovf = s_tstar = s_max = 0u;
    }
    [[unroll]] for (uint i = 0u; i < uint(REG); i++) {
        uint at = first + i * uint(WG) + lid;
        key[i] = 0u;
        if (i < uint(PER) && at < uint(N_VOCAB)) {
            key[i] = order_key(floatBitsToUint(logits[row + at]));
            okm |= 1u << i;
        }
    }
    barrier();
    uint prefix = 0u, need = uint(TOPK_K), eq = 0u;
    for (uint p = 0u; p < 8u; p++)
        select_pass(key, okm, p, p, prefix, need, eq);
    publish(key, okm, prefix, uint(TOPK_K) - need, eq, g, first);
    memoryBarrierBuffer();
    barrier();
    if (lid == 0u) s_last = atomicAdd(scr[sb], 1u) == uint(NSLICE) - 1u;
    barrier();
    if (!s_last) return;
    memoryBarrierBuffer();
    merge(8u);
}
