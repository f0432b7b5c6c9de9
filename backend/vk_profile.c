/* Device profiles: what a physical device offers for compute, read once
 * into a plain struct that the cost model, the kernel templates and the
 * plan file can use without touching Vulkan. */
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"

zstatus zvki_device_exts(zarena *a, VkPhysicalDevice phys, zvki_exts *out, zdiag *d) {
    out->v = NULL;
    out->n = 0;
    uint32_t n = 0;
    VkResult r = vkEnumerateDeviceExtensionProperties(phys, NULL, &n, NULL);
    if (r != VK_SUCCESS)
        return zvk_fail(NULL, r, d, "vkEnumerateDeviceExtensionProperties", "listing extensions");
    if (n == 0) return ZOK;
    out->v = zarena_array(a, n, sizeof *out->v);
    if (!out->v) return zdiag_set(d, ZE_NOMEM, "out of host memory listing %u device extensions", n);
    r = vkEnumerateDeviceExtensionProperties(phys, NULL, &n, out->v);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return zvk_fail(NULL, r, d, "vkEnumerateDeviceExtensionProperties", "listing extensions");
    out->n = n;
    return ZOK;
}

bool zvki_has_ext(const zvki_exts *e, const char *name) {
    for (uint32_t i = 0; i < e->n; i++)
        if (!strcmp(e->v[i].extensionName, name)) return true;
    return false;
}

static bool available(uint32_t api, uint32_t core, const zvki_exts *x, const char *ext) {
    return (core && api >= core) || (ext && zvki_has_ext(x, ext));
}

static void add_feat(zvki_features *f, void *s, VkStructureType type, size_t size, uint32_t core,
                     const char *ext) {
    VkBaseOutStructure *b = s;
    b->sType = type;
    f->e[f->n++] = (zvki_feat){.s = b, .size = size, .core = core, .ext = ext};
}

void zvki_features_relink(zvki_features *f) {
    VkBaseOutStructure *tail = (VkBaseOutStructure *)&f->f2;
    tail->pNext = NULL;
    for (uint32_t i = 0; i < f->n; i++) {
        zvki_feat *e = &f->e[i];
        if (!e->on) continue;
        /* Feature structures are a header followed by VkBool32 members. */
        const VkBool32 *b = (const VkBool32 *)((const char *)e->s + sizeof(VkBaseOutStructure));
        size_t nb = (e->size - sizeof(VkBaseOutStructure)) / sizeof(VkBool32);
        bool any = false;
        for (size_t k = 0; k < nb; k++)
            any |= b[k] != VK_FALSE;
        e->on = any;
        if (!any) continue;
        e->s->pNext = NULL;
        tail->pNext = e->s;
        tail = e->s;
    }
}

void zvki_features_query(zvki_features *f, VkPhysicalDevice phys, uint32_t api, const zvki_exts *x) {
    memset(f, 0, sizeof *f);
    f->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
#define F(field, st, core, ext) add_feat(f, &f->field, st, sizeof f->field, core, ext)
    F(s16, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, VK_API_VERSION_1_1,
      VK_KHR_16BIT_STORAGE_EXTENSION_NAME);
    F(s8, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES, VK_API_VERSION_1_2,
      VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
    F(f16, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, VK_API_VERSION_1_2,
      VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    F(dot, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES, VK_API_VERSION_1_3,
      VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    F(ssc, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES, VK_API_VERSION_1_3,
      VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    F(vmm, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES, VK_API_VERSION_1_2,
      VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);
    F(cm_nv, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV, 0,
      VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    F(cm_khr, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, 0,
      VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    F(cm2, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, 0,
      VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
    F(pe, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR, 0,
      VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
#undef F
    VkBaseOutStructure *tail = (VkBaseOutStructure *)&f->f2;
    for (uint32_t i = 0; i < f->n; i++) {
        zvki_feat *e = &f->e[i];
        e->on = available(api, e->core, x, e->ext);
        if (!e->on) continue;
        tail->pNext = e->s;
        tail = e->s;
    }
    vkGetPhysicalDeviceFeatures2(phys, &f->f2);
}

/* ------------------------------------------------------------- properties */

typedef struct props {
    VkPhysicalDeviceProperties2 p2;
    VkPhysicalDeviceIDProperties id;
    VkPhysicalDeviceSubgroupProperties sg;
    VkPhysicalDeviceMaintenance3Properties m3;
    VkPhysicalDeviceMaintenance4Properties m4;
    VkPhysicalDeviceDriverProperties drv;
    VkPhysicalDeviceSubgroupSizeControlProperties ssc;
    VkPhysicalDeviceShaderIntegerDotProductProperties dot;
    VkPhysicalDeviceCooperativeMatrix2PropertiesNV cm2;
    bool has_m4, has_drv, has_ssc, has_dot, has_cm2;
} props;

static void link(VkBaseOutStructure **tail, void *s, VkStructureType type) {
    VkBaseOutStructure *b = s;
    b->sType = type;
    (*tail)->pNext = b;
    *tail = b;
}

static void query_props(VkPhysicalDevice phys, uint32_t api, const zvki_exts *x, props *q) {
    memset(q, 0, sizeof *q);
    q->p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    VkBaseOutStructure *tail = (VkBaseOutStructure *)&q->p2;
    if (api >= VK_API_VERSION_1_1) {
        link(&tail, &q->id, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES);
        link(&tail, &q->sg, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
        link(&tail, &q->m3, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
    }
    if ((q->has_m4 = available(api, VK_API_VERSION_1_3, x, VK_KHR_MAINTENANCE_4_EXTENSION_NAME)))
        link(&tail, &q->m4, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES);
    if ((q->has_drv = available(api, VK_API_VERSION_1_2, x, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME)))
        link(&tail, &q->drv, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES);
    if ((q->has_ssc = available(api, VK_API_VERSION_1_3, x, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME)))
        link(&tail, &q->ssc, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES);
    if ((q->has_dot =
             available(api, VK_API_VERSION_1_3, x, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME)))
        link(&tail, &q->dot, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES);
    if ((q->has_cm2 = available(api, 0, x, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME)))
        link(&tail, &q->cm2, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV);
    vkGetPhysicalDeviceProperties2(phys, &q->p2);
}

static void fill_props(zvk_profile *p, const props *q) {
    const VkPhysicalDeviceProperties *b = &q->p2.properties;
    const VkPhysicalDeviceLimits *l = &b->limits;
    snprintf(p->name, sizeof p->name, "%s", b->deviceName);
    p->vendor_id = b->vendorID;
    p->device_id = b->deviceID;
    p->type = b->deviceType;
    p->api_version = b->apiVersion;
    p->driver_version = b->driverVersion;
    memcpy(p->cache_uuid, b->pipelineCacheUUID, VK_UUID_SIZE);
    memcpy(p->device_uuid, q->id.deviceUUID, VK_UUID_SIZE);
    if (q->has_drv) {
        p->driver_id = q->drv.driverID;
        snprintf(p->driver_name, sizeof p->driver_name, "%s", q->drv.driverName);
        snprintf(p->driver_info, sizeof p->driver_info, "%s", q->drv.driverInfo);
    }
    p->subgroup_size = p->subgroup_min = p->subgroup_max = q->sg.subgroupSize;
    if (q->sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) p->subgroup_ops = q->sg.supportedOperations;
    if (q->has_ssc && (q->ssc.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT)) {
        p->subgroup_min = q->ssc.minSubgroupSize;
        p->subgroup_max = q->ssc.maxSubgroupSize;
    }
    p->max_shared_memory = l->maxComputeSharedMemorySize;
    p->max_wg_invocations = l->maxComputeWorkGroupInvocations;
    memcpy(p->max_wg_size, l->maxComputeWorkGroupSize, sizeof p->max_wg_size);
    memcpy(p->max_wg_count, l->maxComputeWorkGroupCount, sizeof p->max_wg_count);
    p->max_push_constants = l->maxPushConstantsSize;
    p->max_storage_buffers = l->maxPerStageDescriptorStorageBuffers;
    p->max_storage_buffer_range = l->maxStorageBufferRange;
    p->storage_offset_align = l->minStorageBufferOffsetAlignment;
    /* Without maintenance3 the spec promises nothing beyond the heap; 1 GiB
     * is the floor that 1.1 drivers must meet, so use it. */
    p->max_alloc_size = q->m3.maxMemoryAllocationSize ? q->m3.maxMemoryAllocationSize : (1ull << 30);
    p->max_buffer_size = q->has_m4 && q->m4.maxBufferSize ? q->m4.maxBufferSize : p->max_alloc_size;
    p->int_dot_accel = q->has_dot && q->dot.integerDotProduct4x8BitPackedSignedAccelerated;
    p->timestamp_period = l->timestampPeriod;
    if (q->has_cm2) {
        p->coopmat_wg_max_invocations = q->cm2.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
        p->coopmat_wg_max_dim = q->cm2.cooperativeMatrixFlexibleDimensionsMaxDimension;
        p->coopmat_wg_reserved_smem = q->cm2.cooperativeMatrixWorkgroupScopeReservedSharedMemory;
    }
}

/* Whether a feature structure was chained (so its bits mean something). */
static bool chained(const zvki_features *f, const void *s) {
    for (uint32_t i = 0; i < f->n; i++)
        if ((const void *)f->e[i].s == s) return f->e[i].on;
    return false;
}

static void fill_features(zvk_profile *p, const zvki_features *f) {
    const VkPhysicalDeviceFeatures *c = &f->f2.features;
    p->int16 = c->shaderInt16;
    p->int64 = c->shaderInt64;
    p->storage16 = chained(f, &f->s16) && f->s16.storageBuffer16BitAccess;
    p->storage8 = chained(f, &f->s8) && f->s8.storageBuffer8BitAccess;
    p->fp16 = chained(f, &f->f16) && f->f16.shaderFloat16;
    p->int8 = chained(f, &f->f16) && f->f16.shaderInt8;
    p->int_dot = chained(f, &f->dot) && f->dot.shaderIntegerDotProduct;
    p->subgroup_size_control = chained(f, &f->ssc) && f->ssc.subgroupSizeControl;
    p->full_subgroups = chained(f, &f->ssc) && f->ssc.computeFullSubgroups;
    p->memory_model = chained(f, &f->vmm) && f->vmm.vulkanMemoryModel;
    p->coopmat_nv = chained(f, &f->cm_nv) && f->cm_nv.cooperativeMatrix;
    p->coopmat_khr = chained(f, &f->cm_khr) && f->cm_khr.cooperativeMatrix;
    p->pipeline_stats = chained(f, &f->pe) && f->pe.pipelineExecutableInfo;
    /* workgroup-scope matrices are used with flexible dimensions only (the
     * shapes come from the flexible-dimension list) */
    p->coopmat_wg = p->coopmat_khr && chained(f, &f->cm2) && f->cm2.cooperativeMatrixWorkgroupScope &&
                    f->cm2.cooperativeMatrixFlexibleDimensions;
    p->coopmat_tensor = p->coopmat_wg && f->cm2.cooperativeMatrixTensorAddressing;
    if (!p->int_dot) p->int_dot_accel = false;
    if (!p->subgroup_size_control) p->subgroup_min = p->subgroup_max = p->subgroup_size;
}

static void fill_memory(VkPhysicalDevice phys, const zvki_exts *x, zvk_profile *p) {
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 m2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
    p->has_budget = zvki_has_ext(x, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    if (p->has_budget) m2.pNext = &budget;
    vkGetPhysicalDeviceMemoryProperties2(phys, &m2);
    const VkPhysicalDeviceMemoryProperties *m = &m2.memoryProperties;
    uint32_t best = 0;
    bool found = false;
    for (uint32_t h = 0; h < m->memoryHeapCount; h++) {
        if (!(m->memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
        if (!found || m->memoryHeaps[h].size > m->memoryHeaps[best].size) best = h;
        found = true;
    }
    p->vram_heap = best;
    p->vram = m->memoryHeapCount ? m->memoryHeaps[best].size : 0;
    if (p->has_budget) {
        p->vram_budget = budget.heapBudget[best];
        p->vram_usage = budget.heapUsage[best];
    }
}

/* A family that computes and can take timestamps; a compute-only family
 * (async compute on NVIDIA and AMD) is preferred over the graphics one. */
static void fill_queue(VkPhysicalDevice phys, zvk_profile *p) {
    VkQueueFamilyProperties q[32];
    uint32_t n = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(phys, &n, q);
    int best = -1, best_score = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || q[i].queueCount == 0) continue;
        int score = (q[i].timestampValidBits ? 2 : 0) + (q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT ? 0 : 1);
        if (score > best_score) best = (int)i, best_score = score;
    }
    if (best < 0) return; /* no compute queue: zvk_device_create refuses */
    p->queue_family = (uint32_t)best;
    p->timestamp_bits = q[best].timestampValidBits;
    p->timestamps = p->timestamp_bits > 0 && p->timestamp_period > 0;
}

static void copy_nv(zvk_profile *p, const VkCooperativeMatrixPropertiesNV *v, uint32_t n) {
    p->n_coopmat_nv_total = n;
    p->n_coopmat_nv = n < ZVK_MAX_COOPMAT ? n : ZVK_MAX_COOPMAT;
    for (uint32_t i = 0; i < p->n_coopmat_nv; i++)
        p->coopmat_nv_shapes[i] = (zvk_coopmat){v[i].MSize, v[i].NSize, v[i].KSize, v[i].AType, v[i].BType,
                                                v[i].CType, v[i].DType, v[i].scope, false};
}

static void copy_khr(zvk_profile *p, const VkCooperativeMatrixPropertiesKHR *v, uint32_t n) {
    p->n_coopmat_khr_total = n;
    p->n_coopmat_khr = n < ZVK_MAX_COOPMAT ? n : ZVK_MAX_COOPMAT;
    for (uint32_t i = 0; i < p->n_coopmat_khr; i++)
        p->coopmat_khr_shapes[i] =
            (zvk_coopmat){v[i].MSize,      v[i].NSize, v[i].KSize,
                          v[i].AType,      v[i].BType, v[i].CType,
                          v[i].ResultType, v[i].scope, v[i].saturatingAccumulation != VK_FALSE};
}

/* The three cooperative-matrix listings share one signature shape: a
 * count, then an array of structures whose sType must be set. */
typedef VkResult(VKAPI_PTR *list_fn)(VkPhysicalDevice, uint32_t *, void *);

static zstatus list_props(const zvk_instance *inst, VkPhysicalDevice phys, zarena *a, const char *entry,
                          VkStructureType st, size_t size, const zvk_profile *p, void **out, uint32_t *count,
                          zdiag *d) {
    list_fn fn = (list_fn)vkGetInstanceProcAddr(inst->instance, entry);
    uint32_t n = 0;
    VkResult r = fn ? fn(phys, &n, NULL) : VK_ERROR_EXTENSION_NOT_PRESENT;
    char *v = n ? zarena_array(a, n, size) : NULL;
    if (n && !v) return zdiag_set(d, ZE_NOMEM, "out of host memory listing cooperative matrix shapes");
    for (uint32_t i = 0; i < n; i++)
        ((VkBaseOutStructure *)(v + i * size))->sType = st;
    if (r == VK_SUCCESS && n) r = fn(phys, &n, v);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return zvk_fail(NULL, r, d, entry, p->name);
    *out = v, *count = n;
    return ZOK;
}

static void copy_flex(zvk_profile *p, const VkCooperativeMatrixFlexibleDimensionsPropertiesNV *v,
                      uint32_t n) {
    p->n_coopmat_flex_total = n;
    p->n_coopmat_flex = n < ZVK_MAX_COOPMAT ? n : ZVK_MAX_COOPMAT;
    for (uint32_t i = 0; i < p->n_coopmat_flex; i++)
        p->coopmat_flex_shapes[i] = (zvk_coopmat){v[i].MGranularity,
                                                  v[i].NGranularity,
                                                  v[i].KGranularity,
                                                  v[i].AType,
                                                  v[i].BType,
                                                  v[i].CType,
                                                  v[i].ResultType,
                                                  v[i].scope,
                                                  v[i].saturatingAccumulation != VK_FALSE,
                                                  v[i].workgroupInvocations};
}

/* Lists the shapes of both extensions, and cooperative_matrix2's flexible
 * dimensions where workgroup scope is used. */
static zstatus fill_coopmat(const zvk_instance *inst, VkPhysicalDevice phys, zarena *a, zvk_profile *p,
                            zdiag *d) {
    void *v;
    uint32_t n;
    zstatus s;
    if (p->coopmat_nv) {
        s = list_props(inst, phys, a, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV",
                       VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV,
                       sizeof(VkCooperativeMatrixPropertiesNV), p, &v, &n, d);
        if (s) return s;
        copy_nv(p, v, n);
    }
    if (p->coopmat_khr) {
        s = list_props(inst, phys, a, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR",
                       VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR,
                       sizeof(VkCooperativeMatrixPropertiesKHR), p, &v, &n, d);
        if (s) return s;
        copy_khr(p, v, n);
    }
    if (p->coopmat_wg) {
        s = list_props(inst, phys, a, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV",
                       VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV,
                       sizeof(VkCooperativeMatrixFlexibleDimensionsPropertiesNV), p, &v, &n, d);
        if (s) return s;
        copy_flex(p, v, n);
    }
    return ZOK;
}

/* Keeps the shapes that need no float16 arithmetic. */
static uint32_t drop_fp16_shapes(zvk_coopmat *s, uint32_t n) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (s[i].a != VK_COMPONENT_TYPE_FLOAT16_NV && s[i].b != VK_COMPONENT_TYPE_FLOAT16_NV &&
            s[i].c != VK_COMPONENT_TYPE_FLOAT16_NV && s[i].result != VK_COMPONENT_TYPE_FLOAT16_NV)
            s[k++] = s[i];
    return k;
}

/* The ZINC_DISABLE_* switches, for drivers that give wrong answers. */
static void apply_overrides(zvk_profile *p) {
    if (zvki_env_on("ZINC_DISABLE_COOPMAT") && (p->coopmat_khr || p->coopmat_nv)) {
        p->coopmat_khr = p->coopmat_nv = p->coopmat_wg = p->coopmat_tensor = false;
        p->n_coopmat_khr = p->n_coopmat_nv = p->n_coopmat_flex = 0;
        p->disabled |= ZVK_OFF_COOPMAT;
    }
    if (zvki_env_on("ZINC_DISABLE_FP16") && p->fp16) {
        /* float16 operands need shaderFloat16: such shapes go too. */
        p->fp16 = false;
        p->n_coopmat_khr = drop_fp16_shapes(p->coopmat_khr_shapes, p->n_coopmat_khr);
        p->n_coopmat_nv = drop_fp16_shapes(p->coopmat_nv_shapes, p->n_coopmat_nv);
        p->n_coopmat_flex = drop_fp16_shapes(p->coopmat_flex_shapes, p->n_coopmat_flex);
        p->coopmat_khr = p->coopmat_khr && p->n_coopmat_khr > 0;
        p->coopmat_nv = p->coopmat_nv && p->n_coopmat_nv > 0;
        p->coopmat_wg = p->coopmat_wg && p->coopmat_khr && p->n_coopmat_flex > 0;
        p->coopmat_tensor = p->coopmat_tensor && p->coopmat_wg;
        p->disabled |= ZVK_OFF_FP16;
    }
    if (zvki_env_on("ZINC_DISABLE_INT_DOT") && p->int_dot) {
        p->int_dot = p->int_dot_accel = false;
        p->disabled |= ZVK_OFF_INT_DOT;
    }
}

zstatus zvk_profile_query(const zvk_instance *inst, uint32_t index, zvk_profile *p, zdiag *d) {
    memset(p, 0, sizeof *p);
    if (index >= inst->n_devices)
        return zdiag_set(d, ZE_INVALID, "device %u does not exist (%u devices)", index, inst->n_devices);
    VkPhysicalDevice phys = inst->devices[index];
    p->index = index;
    zarena *a = zarena_new();
    if (!a) return zdiag_set(d, ZE_NOMEM, "out of host memory reading a device profile");
    zvki_exts x;
    zstatus s = zvki_device_exts(a, phys, &x, d);
    if (s == ZOK) {
        VkPhysicalDeviceProperties base;
        vkGetPhysicalDeviceProperties(phys, &base);
        uint32_t api = zvki_effective_api(inst, base.apiVersion);
        props q;
        query_props(phys, api, &x, &q);
        fill_props(p, &q);
        zvki_features f;
        zvki_features_query(&f, phys, api, &x);
        fill_features(p, &f);
        fill_memory(phys, &x, p);
        fill_queue(phys, p);
        s = fill_coopmat(inst, phys, a, p, d);
        apply_overrides(p);
    }
    zarena_free(a);
    return s;
}

/* ------------------------------------------------------------------ names */

const char *zvk_device_type_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

const char *zvk_component_name(uint32_t t, char buf[16]) {
    static const char *const names[] = {"float16", "float32", "float64", "sint8",  "sint16", "sint32",
                                        "sint64",  "uint8",   "uint16",  "uint32", "uint64"};
    if (t < sizeof names / sizeof names[0]) return names[t];
    switch (t) {
    case ZVK_COMPONENT_TYPE_BFLOAT16: return "bfloat16";
    case ZVK_COMPONENT_TYPE_SINT8_PACK: return "sint8x4";
    case ZVK_COMPONENT_TYPE_UINT8_PACK: return "uint8x4";
    case ZVK_COMPONENT_TYPE_FP8_E4M3: return "fp8e4m3";
    case ZVK_COMPONENT_TYPE_FP8_E5M2: return "fp8e5m2";
    default: snprintf(buf, 16, "type%u", t); return buf;
    }
}

void zvk_driver_version(const zvk_profile *p, char *buf, size_t n) {
    uint32_t v = p->driver_version;
    if (p->vendor_id == 0x10DE) /* NVIDIA: 10.8.8.6 bits */
        snprintf(buf, n, "%u.%u.%u", v >> 22, (v >> 14) & 0xff, (v >> 6) & 0xff);
    else
        snprintf(buf, n, "%u.%u.%u", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v),
                 VK_API_VERSION_PATCH(v));
}
