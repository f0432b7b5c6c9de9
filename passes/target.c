/* Named target profiles for the cost model. Numbers come from vendor data
 * and from what we measured (docs/cost-model.md says which). */
#include <string.h>

#include "pass.h"

static const ztarget targets[] = {
    /* Mesa llvmpipe on a 2-core CI machine: 8-wide "subgroups" (AVX2), 32 KiB
     * shared memory, one CPU thread per workgroup in flight, DRAM-class
     * bandwidth, and a dispatch costs tens of microseconds of thread wake-ups. */
    {.name = "llvmpipe",
     .subgroup = 8,
     .smem_bytes = 32768,
     .regs_per_sm = 65536,
     .n_cu = 2,
     .bandwidth_gbs = 20,
     .dispatch_us = 40,
     .prefill_tile = 16,
     .fuse_threshold = 256,
     .coopmat = false,
     .int_dot = true, /* functional, not accelerated: it lets CI run the int-dot kernels */
     .act_bytes = 4,
     .gemv_eff = 1,
     .mlp_split_eff = 1},
    /* NVIDIA H200 under Vulkan: 132 SMs, 48 KiB shared memory per workgroup
     * (the Vulkan limit), 4.0 TB/s measured copy bandwidth (read + write). */
    {.name = "h200",
     .subgroup = 32,
     .smem_bytes = 49152,
     .regs_per_sm = 65536,
     .n_cu = 132,
     .bandwidth_gbs = 4000,
     .dispatch_us = 3,
     /* run 52 (docs/performance.md, session 20): the 9B's delta layers'
      * four GEMVs of one normed x (independent: no barrier between them)
      * as one rows GEMV took the profile's step 4248 -> 3726 us, as
      * dispatch_us predicted, but tg128 did not move (286.7 / 285.8
      * against 289.9 / 284.3): the profile times each dispatch alone, the
      * step overlaps them. zinc bench's dispatch costs: 0.16 us back to
      * back, 1.90 behind a barrier. */
     .concurrent_dispatch_us = 0.16,
     .prefill_tile = 64,
     .fuse_threshold = 1024,
     .coopmat = true,
     .int_dot = true, /* DP4A */
     /* run 23: the 2-layer 8B-wide decode step 600.6 -> 491.1 us, gate+up
      * GEMV 90.0 -> 57.3 us (docs/performance.md) */
     .gemv_int8 = true,
     /* run 32, the 8B at 1, 4, 8 rows, x quantized once a step (the
      * multi-row GEMV's quantizing pass): 152.6, 396.6, 510.9 tok/s in all
      * with int8 x against 120.8, 259.0, 312.4 with fp32 x, same call (run
      * 31, every workgroup quantizing every row: 94.4, 197.0, 237.8) */
     .batch_gemv_int8 = true,
     /* run 34, the 8B at 16 rows: the multi-row GEMV (int8 x, quantized
      * once a step) 697.9 tok/s in all against the GEMMs' 555.8 (run 25,
      * before it: the GEMMs ahead at 16 rows, 2100 against 1668 for the
      * 2-layer model) */
     .batch_gemv_rows = 16,
     /* run 60 (H100), the 8B's --parallel 16 plan, tok/s in all at 1, 8
      * and 16 streams: 150.1, 603.1, 758.7 with the int8-x multi-row GEMV,
      * 83.9, 603.2, 1121.4 with the GEMVs on the matrix units (the same
      * 16-column products at any row count) */
     .batch_gemv_cm_rows = 16,
     /* NVIDIA's driver 580 (H100 and H200, run 62) */
     .frag_right = 1,
     .frag_down = 2,
     /* run 75 (H100, driver 580.159): kernels_matmul/fragment_layout
      * checks it on the device against this profile */
     .frag_b = 1,
     /* run 68 (H100, the 8B's pp512, two rounds of one call): 7066 and
      * 7053 tok/s with the staged weight tiles, 8074 and 8094 with K
      * permuted (fp32 decode, 128-token tiles); llama.cpp 10597 and 10590 */
     .cm_perm = 2,
     .act_bytes = 2,
     /* run 39, zinc bench --profile of the Qwen3-8B shape's decode step
      * (docs/performance.md, session 12): its GEMVs took 2975 us for the
      * 4.66 GB of their weights (the embedding table is gathered, not
      * read) in 162 dispatches. Less the 162 x dispatch_us the model adds
      * on its own, 2489 us: 1.87 TB/s, 0.47 of bandwidth_gbs. 0.3 (run 12's
      * ~1.2-1.3 TB/s) priced those GEMVs at 4366 us, 47 % over. The split
      * MLP: 85-98 MB a layer in 133-152 us (~650 GB/s, run 12) */
     .gemv_eff = 0.47,
     .mlp_split_eff = 0.16,
     /* Decode attention a layer (f16 cache, D 128), zinc bench --profile:
      * the Qwen3-8B shape (4 q heads a workgroup) 16.7 us at position ~512
      * and 25.4 at 4096 (run 42); 30B-A3B's (8 a workgroup) 29.2 (run 45).
      * The two give 3.1 us a query head and 4.3 besides, of which the
      * model's dispatch_us (3, priced apart) is the dispatch and its
      * barrier: 1.3 us of chain a call. The 8.7 us that 16.8 MB more of K
      * and V took at depth 4096 are 1.93 TB/s, 0.48 of bandwidth_gbs. */
     .attn_chain_us = 1.3,
     .attn_q_us = 3.1,
     .attn_eff = 0.48,
     /* run 51, the Qwen3.5-9B prefill profile (512 tokens): the delta
      * layers' beta and alpha GEMMs (N 32, K 4096: 8 tiles, 64 K steps)
      * ~64 us a call, the k and v ones (N 1024: 128 tiles, one wave) 68 */
     .cm_step_us = 1.0,
     /* run 34, the 8B at 16 streams: 697.9 tok/s, 16 rows x 16.4 GFLOP a
      * token in 22.9 ms, ~11.5 TFLOP/s through the multi-row GEMVs (int8
      * x there; the prefill GEMV takes fp32 x, with which run 32's 8-row
      * batch step was ~1.6x slower: 312.4 against 510.9 tok/s) */
     .gemvn_tflops = 11.5},
    /* AMD RDNA4 (RX 9070 XT): 64 CUs, 64 KiB LDS, 640 GB/s, wave32/64. */
    {.name = "rdna4",
     .subgroup = 32,
     .smem_bytes = 65536,
     .regs_per_sm = 98304,
     .n_cu = 64,
     .bandwidth_gbs = 640,
     .dispatch_us = 5,
     .prefill_tile = 64,
     .fuse_threshold = 512,
     .coopmat = true,
     .act_bytes = 2},
    /* A conservative mid-range discrete GPU. */
    {.name = "generic",
     .subgroup = 32,
     .smem_bytes = 32768,
     .regs_per_sm = 65536,
     .n_cu = 16,
     .bandwidth_gbs = 256,
     .dispatch_us = 10,
     .prefill_tile = 32,
     .fuse_threshold = 512,
     .coopmat = false,
     .act_bytes = 2},
};

const ztarget *ztarget_find(const char *name) {
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (!strcmp(targets[i].name, name)) return &targets[i];
    return NULL;
}

const char *ztarget_names(void) {
    return "llvmpipe, h200, rdna4, generic";
}
