/* The device's fixed costs per dispatch, measured with timestamps
 * (backend/calib.c): the facts behind the cost model's dispatch_us. */
#ifndef ZINC_CALIB_H
#define ZINC_CALIB_H

#include "vk.h"

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
