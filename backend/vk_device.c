/* The logical device: the features the profile says are present (and not
 * switched off), one compute queue, and a command pool. */
#include <stddef.h>
#include <string.h>

#include "vk_internal.h"

#define STAGING_CHUNK (64ull << 20) /* large enough to stream, small enough to fit any heap */
#define TIMEOUT_NS    (300ull * 1000000000ull)

/* Keeps the supported bits zincc can use, minus what the overrides
 * cleared from the profile. Robust buffer access stays off: it costs
 * bounds checks in every kernel, and kernels check their own bounds. */
static void choose_features(zvki_features *f, const zvk_profile *p) {
    VkPhysicalDeviceFeatures have = f->f2.features;
    memset(&f->f2.features, 0, sizeof f->f2.features);
    f->f2.features.shaderInt16 = have.shaderInt16;
    f->f2.features.shaderInt64 = have.shaderInt64;
    f->f16.shaderFloat16 = p->fp16;
    f->f16.shaderInt8 = p->int8;
    f->dot.shaderIntegerDotProduct = p->int_dot;
    f->cm_nv.cooperativeMatrix = p->coopmat_nv;
    f->cm_nv.cooperativeMatrixRobustBufferAccess = VK_FALSE;
    f->cm_khr.cooperativeMatrix = p->coopmat_khr;
    f->cm_khr.cooperativeMatrixRobustBufferAccess = VK_FALSE;
    /* Of cooperative_matrix2, only workgroup scope with flexible dimensions,
     * and the tensor-addressed loads of ZINC_CM_TENSOR=1's measurement. */
    memset((char *)&f->cm2 +
               offsetof(VkPhysicalDeviceCooperativeMatrix2FeaturesNV, cooperativeMatrixWorkgroupScope),
           0,
           sizeof f->cm2 -
               offsetof(VkPhysicalDeviceCooperativeMatrix2FeaturesNV, cooperativeMatrixWorkgroupScope));
    f->cm2.cooperativeMatrixWorkgroupScope = p->coopmat_wg;
    f->cm2.cooperativeMatrixFlexibleDimensions = p->coopmat_wg;
    f->cm2.cooperativeMatrixTensorAddressing = p->coopmat_tensor;
    f->pe.pipelineExecutableInfo = p->pipeline_stats;
    zvki_features_relink(f);
}

/* The extensions behind the chained structures (those not core at api),
 * plus the ones zincc uses without a feature structure. */
static uint32_t choose_exts(const zvki_features *f, uint32_t api, const zvki_exts *x, const zvk_profile *p,
                            const char **out) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < f->n; i++)
        if (f->e[i].on && !(f->e[i].core && api >= f->e[i].core)) out[n++] = f->e[i].ext;
    if (p->has_budget) out[n++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
    /* Portability drivers (MoltenVK) require naming their subset. */
    if (zvki_has_ext(x, "VK_KHR_portability_subset")) out[n++] = "VK_KHR_portability_subset";
    return n;
}

static zstatus create_logical(zvk_device *dev, zdiag *d) {
    zarena *a = zarena_new();
    if (!a) return zdiag_set(d, ZE_NOMEM, "out of host memory creating the Vulkan device");
    zvki_exts x;
    zstatus s = zvki_device_exts(a, dev->phys, &x, d);
    if (s != ZOK) {
        zarena_free(a);
        return s;
    }
    uint32_t api = zvki_effective_api(dev->inst, dev->prof.api_version);
    zvki_features f;
    zvki_features_query(&f, dev->phys, api, &x);
    choose_features(&f, &dev->prof);
    const char *exts[16];
    uint32_t n_exts = choose_exts(&f, api, &x, &dev->prof, exts);

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = dev->prof.queue_family,
                                  .queueCount = 1,
                                  .pQueuePriorities = &prio};
    VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .pNext = &f.f2,
                             .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &qi,
                             .enabledExtensionCount = n_exts,
                             .ppEnabledExtensionNames = exts};
    VkResult r = vkCreateDevice(dev->phys, &ci, NULL, &dev->device);
    zarena_free(a);
    if (r != VK_SUCCESS) {
        dev->device = VK_NULL_HANDLE;
        return zvk_fail(dev, r, d, "vkCreateDevice", dev->prof.name);
    }
    return ZOK;
}

zstatus zvk_device_create(zvk_instance *inst, uint32_t index, zvk_device *dev, zdiag *d) {
    memset(dev, 0, sizeof *dev);
    dev->inst = inst;
    dev->staging_chunk = STAGING_CHUNK;
    dev->timeout_ns = TIMEOUT_NS;
    zstatus s = zvk_profile_query(inst, index, &dev->prof, d);
    if (s != ZOK) return s;
    dev->phys = inst->devices[index];
    if (dev->prof.api_version < VK_API_VERSION_1_1)
        return zdiag_set(d, ZE_UNSUPPORTED, "device %u (%s) offers Vulkan %u.%u; zincc needs 1.1 or newer",
                         index, dev->prof.name, VK_API_VERSION_MAJOR(dev->prof.api_version),
                         VK_API_VERSION_MINOR(dev->prof.api_version));
    VkQueueFamilyProperties q[32];
    uint32_t nq = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(dev->phys, &nq, q);
    if (dev->prof.queue_family >= nq || !(q[dev->prof.queue_family].queueFlags & VK_QUEUE_COMPUTE_BIT))
        return zdiag_set(d, ZE_UNSUPPORTED, "device %u (%s) has no compute queue", index, dev->prof.name);
    vkGetPhysicalDeviceMemoryProperties(dev->phys, &dev->mem);

    if ((s = create_logical(dev, d)) != ZOK) return s;
    vkGetDeviceQueue(dev->device, dev->prof.queue_family, 0, &dev->queue);
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = dev->prof.queue_family};
    VkResult r = vkCreateCommandPool(dev->device, &pi, NULL, &dev->pool);
    if (r != VK_SUCCESS) {
        dev->pool = VK_NULL_HANDLE;
        s = zvk_fail(dev, r, d, "vkCreateCommandPool", dev->prof.name);
        zvk_device_destroy(dev);
        return s;
    }
    if (dev->prof.pipeline_stats) {
        dev->exec_props = (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(
            dev->device, "vkGetPipelineExecutablePropertiesKHR");
        dev->exec_stats = (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(
            dev->device, "vkGetPipelineExecutableStatisticsKHR");
        dev->exec_ir = (PFN_vkGetPipelineExecutableInternalRepresentationsKHR)vkGetDeviceProcAddr(
            dev->device, "vkGetPipelineExecutableInternalRepresentationsKHR");
    }
    return ZOK;
}

void zvk_device_destroy(zvk_device *dev) {
    if (!dev || !dev->device) return;
    /* Nothing may be in flight when objects go; a lost device returns at once. */
    vkDeviceWaitIdle(dev->device);
    if (dev->pool) vkDestroyCommandPool(dev->device, dev->pool, NULL);
    vkDestroyDevice(dev->device, NULL);
    dev->pool = VK_NULL_HANDLE;
    dev->device = VK_NULL_HANDLE;
}
