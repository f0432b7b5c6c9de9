// delta_net_chunk.glsl: the gated delta rule over a step's tokens in chunks
// of C (prefill). The rule and the state layout are delta_net.glsl's: per
// value head h (key head h % HK), M[j][i], j over values, i over keys, and
// per token M <- e^g M + u k^T with u = beta (v - e^g M k), o = M q SCALE.
// Within a chunk, with M0 the state before it and G_t the sum of the gates
// of its tokens up to t (G_t - G_s <= 0: the gates are log decays):
//   M_t = e^G_t M0 + sum_{s<=t} e^(G_t-G_s) u_s k_s^T
// so the chunk's u are the solution of a unit lower-triangular system (the
// WY / UT form of the rule),
//   u_t + sum_{s<t} A[t][s] u_s = beta_t (v_t - e^G_t M0 k_t),
//   A[t][s] = beta_t e^(G_t-G_s) (k_t . k_s),
// and the outputs and the state after the chunk are
//   o_t = (e^G_t M0 q_t + sum_{s<=t} B[t][s] u_s) SCALE,
//   B[t][s] = e^(G_t-G_s) (q_t . k_s),
//   M <- e^G_n M0 + sum_s e^(G_n-G_s) u_s k_s^T   (n: the chunk's last token).
// A and B (the chunk's attention-like C x C products) are shared by the
// head's D rows; the rows never meet otherwise, so thread j keeps row j of M
// in registers and solves for its own component u_t[j] by forward
// substitution, with no barrier between tokens: the serial dependency on the
// state is once per chunk instead of once per token. At position 0 the state
// reads as zeros; it is stored once at the end of the step.
// Defines: D, HK, HV, C, SCALE; after delta_net_io.glsl.
layout(local_size_x = D) in;

shared float sk[C * D], sq[C * D]; // the chunk's keys and queries, row t at t * D
shared float su[C * D];            // u_t[j] at t * D + j: column j is thread j's alone
shared float sa[C * C], sb[C * C]; // A and B above, [t][s] at t * C + s
shared float sg[C], sbeta[C];      // G_t and beta_t

// Stages the chunk's n tokens from c0: keys, queries, the running sum of
// the gates and beta.
void stage(uint c0, uint n, uint hk, uint h, uint j) {
    for (uint e = j; e < n * D; e += D) {
        uint t = e / D, i = e % D;
        sk[e] = float(k[((c0 + t) * HK + hk) * D + i]);
        sq[e] = float(q[((c0 + t) * HK + hk) * D + i]);
    }
    for (uint t = j; t < n; t += D) { // C may exceed D
        float cg = 0.0;
        for (uint s = 0; s <= t; s++) cg += float(g[(c0 + s) * HV + h]);
        sg[t] = cg;
        sbeta[t] = float(beta[(c0 + t) * HV + h]);
    }
}

// A and B of the staged chunk: n x n dot products of D, spread over the
// workgroup (entries above the diagonal are never read).
void products(uint n, uint j) {
    for (uint e = j; e < n * n; e += D) {
        uint t = e / n, s = e % n;
        if (s > t) continue;
        float kk = 0.0, qk = 0.0;
        for (uint i = 0; i < D; i++) {
            kk += sk[t * D + i] * sk[s * D + i];
            qk += sq[t * D + i] * sk[s * D + i];
        }
        float decay = exp(sg[t] - sg[s]);
        sa[t * C + s] = sbeta[t] * decay * kk;
        sb[t * C + s] = decay * qk;
    }
}

void main() {
    uint h = gl_WorkGroupID.x, j = gl_LocalInvocationID.x, hk = h % HK;
    uint row = (h * D + j) * D;
    float m[D];
    load_row(row, m);
    for (uint c0 = 0; c0 < step.T; c0 += C) {
        uint n = min(uint(C), step.T - c0);
        barrier(); // the previous chunk's keys are read
        stage(c0, n, hk, h, j);
        barrier();
        products(n, j);
        barrier();
        for (uint t = 0; t < n; t++) {
            float mk = 0.0, mq = 0.0;
            for (uint i = 0; i < D; i++) {
                mk += m[i] * sk[t * D + i];
                mq += m[i] * sq[t * D + i];
            }
            float decay = exp(sg[t]);
            float u = sbeta[t] * (float(v[((c0 + t) * HV + h) * D + j]) - decay * mk);
            for (uint s = 0; s < t; s++) u -= sa[t * C + s] * su[s * D + j];
            su[t * D + j] = u;
            float o = decay * mq;
            for (uint s = 0; s <= t; s++) o += sb[t * C + s] * su[s * D + j];
            y[((c0 + t) * HV + h) * D + j] = ACT_T(o * SCALE);
        }
        float last = sg[n - 1u], decay = exp(last);
        for (uint i = 0; i < D; i++) m[i] *= decay;
        for (uint s = 0; s < n; s++) {
            float us = exp(last - sg[s]) * su[s * D + j];
            for (uint i = 0; i < D; i++) m[i] += us * sk[s * D + i];
        }
    }
    for (uint i = 0; i < D; i++) st[row + i] = m[i];
}
