/* Timing kernels on the device (backend/calib.c): a rig that holds one
 * kernel ready to record with a timer, which zincc --tune (tune.c) and the
 * dispatch-cost calibration share; and that calibration, the facts behind
 * the cost model's dispatch_us. */
#ifndef ZINC_CALIB_H
#define ZINC_CALIB_H

#include "vk.h"

enum { ZVK_RIG_MAX_SETS = 64 };

/* One compute kernel compiled from GLSL, with n_sets descriptor sets over
 * n buffers each (in binding order) and a timer of `marks` timestamps. */
typedef struct zvk_rig {
    zvk_pipeline p;
    VkDescriptorPool pool;
    VkDescriptorSet set; /* sets[0] */
    VkDescriptorSet sets[ZVK_RIG_MAX_SETS];
    uint32_t n_sets;
    zvk_timer tm;
} zvk_rig;

/* b: n_sets x n bindings, set by set. flags: ZVK_RIG_INT_DOT (the source
 * calls the integer dot-product markers, shaderc.h), ZVK_RIG_KEEP_NV (its
 * NV cooperative matrices stay NV where the device has them). On failure
 * everything made so far is released. */
enum { ZVK_RIG_INT_DOT = 1u << 0, ZVK_RIG_KEEP_NV = 1u << 1 };
zstatus zvk_rig_open(zvk_device *dev, const char *name, const char *glsl, unsigned flags, const zvk_binding *b,
                     uint32_t n, uint32_t n_sets, uint32_t marks, zvk_rig *r, zdiag *d);
void zvk_rig_close(zvk_device *dev, zvk_rig *r);

/* The median of v[0..n) (sorts v). */
double zvk_median(double *v, size_t n);

typedef struct zvk_calib {
    double dispatch_us; /* one workgroup, dispatches back to back (no barrier between) */
    double barrier_us;  /* one workgroup, each dispatch behind a barrier: a dependent chain */
    double wide_us;     /* wide_groups workgroups of 256, each dispatch behind a barrier */
    uint32_t wide_groups;
    int n, reps; /* dispatches per timed run, runs of each kind (medians kept) */
} zvk_calib;

/* Times the three kinds on dev. wide_groups: workgroups of the device-wide
 * kind (8 per compute unit fills a GPU; 0: 1024). */
zstatus zvk_calibrate(zvk_device *dev, uint32_t wide_groups, zvk_calib *out, zdiag *d);

/* Where a subgroup's cooperative matrices of the M16 N8 K16 fp16 product
 * keep their elements: the layout is the implementation's, and a kernel
 * that decodes weights straight into a fragment's registers, with no trip
 * through shared memory, must know it. For each use (ZVK_FRAG_A: 16 x 16,
 * M x K; _B: 16 x 8, K x N, both fp16; _C: the fp32 accumulator, 16 x 8,
 * M x N) the elements a lane holds, and lane l's element i's row and
 * column. Probed by loading matrices whose every element is its own index
 * r * 16 + c (exact in fp16), then reading each lane's elements. */
enum { ZVK_FRAG_A, ZVK_FRAG_B, ZVK_FRAG_C, ZVK_FRAG_USES };
typedef struct zvk_fragmap {
    uint32_t len[ZVK_FRAG_USES];
    uint8_t row[ZVK_FRAG_USES][32][16], col[ZVK_FRAG_USES][32][16];
} zvk_fragmap;
/* ZE_UNSUPPORTED without that product on subgroup matrices, or with
 * subgroups other than 32 lanes. */
zstatus zvk_probe_fragmap(zvk_device *dev, zvk_fragmap *m, zdiag *d);
/* Whether A's layout is in quads, as mma's m16n8k16 fragments are: lane l
 * holds rows l / 4 and l / 4 + 8, columns 2 (l % 4) + {0, 1} and + 8;
 * element i's bit 0 picks the pair's column, bit *right_bit 8 further
 * right, bit *down_bit 8 further down (NVIDIA's driver 580: 1 and 2, run
 * 62). What kernels that write fragment elements
 * themselves assume (ztarget.frag_right, frag_down). */
bool zvk_fragmap_a_quads(const zvk_fragmap *m, int *right_bit, int *down_bit);
/* Whether B's layout (16 x 8, K x N) is in quads: lane l holds rows (K) l
 * / 4 and l / 4 + 8, columns (N) 2 (l % 4) + {0, 1}, as the probe found on
 * NVIDIA's driver 580 (run 75; A's columns are the K its lane q holds, B's
 * rows here are not); gives 1 where element bit 0 picks the column of the
 * pair and bit 1 the row 8 below, 2 the other way round, 0 where it is not
 * in quads. */
int zvk_fragmap_b_quads(const zvk_fragmap *m);
/* Probes dev and gives A's element bits where its fragments are in quads;
 * false (right and down 0) where they are not, or the probe fails; and
 * B's order (zvk_fragmap_b_quads, 0 where the probe fails). */
bool zvk_probe_frag_order(zvk_device *dev, int *right_bit, int *down_bit, int *frag_b);

#endif
