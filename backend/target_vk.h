/* The cost model's view (ztarget) of a live Vulkan device. */
#ifndef ZINC_TARGET_VK_H
#define ZINC_TARGET_VK_H

#include "../passes/pass.h"
#include "vk.h"

/* Fills t from the device's profile: facts Vulkan reports (subgroup size,
 * shared memory, cooperative matrix) over the closest named profile for what
 * it cannot (bandwidth, compute units, dispatch cost). t->name points into
 * name_buf ("device: <name>"). */
void zvk_target_from_profile(const zvk_profile *p, ztarget *t, char *name_buf, size_t n);

/* Opens the instance, selects the device (request: an index as text, or
 * NULL for $ZINC_DEVICE or the default), reads its profile and fills t. */
zstatus zvk_target_from_device(const char *request, ztarget *t, zvk_profile *prof, char *name_buf, size_t n,
                               zdiag *d);

/* Where t has matrix units, probes the device's fragment order
 * (zvk_probe_frag_order) into t->frag_right and frag_down: 0 where A's
 * fragments are not in mma's quads, so that no kernel that writes their
 * elements itself is compiled. It creates a device and runs a kernel:
 * for compiling a plan, not for looking one up. */
void zvk_target_probe_frags(const char *request, ztarget *t);

#endif
