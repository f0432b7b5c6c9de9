/* vk_internal: helpers shared by the vk_*.c files; not part of the zvk API. */
#ifndef ZINC_VK_INTERNAL_H
#define ZINC_VK_INTERNAL_H

#include <string.h>

#include "../ir/arena.h"
#include "vk.h"

/* A device's extension list (arena-owned). */
typedef struct zvki_exts {
    VkExtensionProperties *v;
    uint32_t n;
} zvki_exts;

zstatus zvki_device_exts(zarena *a, VkPhysicalDevice phys, zvki_exts *out, zdiag *d);
bool zvki_has_ext(const zvki_exts *e, const char *name);

/* The optional feature structures zincc reads and enables, chained behind
 * f2. Each entry says which core version or extension provides it; an
 * entry is chained only when available ("on"). The struct points into
 * itself: never copy it. */
typedef struct zvki_feat {
    VkBaseOutStructure *s;
    size_t size;
    uint32_t core;   /* API version that made it core, 0 if never */
    const char *ext; /* extension that provides it otherwise */
    bool on;
} zvki_feat;

typedef struct zvki_features {
    VkPhysicalDeviceFeatures2 f2;
    VkPhysicalDevice16BitStorageFeatures s16;
    VkPhysicalDevice8BitStorageFeatures s8;
    VkPhysicalDeviceShaderFloat16Int8Features f16;
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot;
    VkPhysicalDeviceSubgroupSizeControlFeatures ssc;
    VkPhysicalDeviceVulkanMemoryModelFeatures vmm;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cm_nv;
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm_khr;
    VkPhysicalDeviceCooperativeMatrix2FeaturesNV cm2;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pe;
    zvki_feat e[10];
    uint32_t n;
} zvki_features;

/* Fills f for a device of (effective) version api with extensions x, and
 * queries the supported bits. */
void zvki_features_query(zvki_features *f, VkPhysicalDevice phys, uint32_t api, const zvki_exts *x);
/* Drops from the chain every entry whose feature bits are all clear (so
 * that device creation names no structure it does not need). */
void zvki_features_relink(zvki_features *f);

/* The version zincc may use on a device: the lower of the device's and the
 * instance's, without the patch number. */
uint32_t zvki_effective_api(const zvk_instance *inst, uint32_t device_api);

/* Copies a string, cut to fit n bytes (driver strings can be long). */
static inline void zvki_copy(char *dst, size_t n, const char *src) {
    size_t k = strnlen(src, n - 1);
    memcpy(dst, src, k);
    dst[k] = 0;
}

/* Whether an environment switch is on: set, non-empty and not "0". */
bool zvki_env_on(const char *name);

#endif
