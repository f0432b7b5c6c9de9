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

/* b: n_sets x n bindings, set by set. int_dot: the source calls the
 * integer dot-product markers (shaderc.h). On failure everything made so
 * far is released. */
zstatus zvk_rig_open(zvk_device *dev, const char *name, const char *glsl, bool int_dot, const zvk_binding *b,
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

#endif
