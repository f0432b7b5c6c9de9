/* Compute pipelines from SPIR-V, the driver's statistics about them, and
 * descriptor sets that bind buffer ranges to them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "spv_coopmat.h"
#include "vk_internal.h"

#define SPIRV_MAGIC  0x07230203u
#define MAX_BINDINGS 32u /* more storage buffers than any zincc kernel binds */

static zstatus check_desc(const zvk_device *dev, const zvk_pipeline_desc *pd, const char *name, zdiag *d) {
    const zvk_profile *p = &dev->prof;
    if (!pd->spirv || pd->n_words < 5 || pd->spirv[0] != SPIRV_MAGIC)
        return zdiag_set(d, ZE_INVALID,
                         "pipeline %s: not SPIR-V (expected at least 5 words starting 0x%08x, found %zu "
                         "words starting 0x%08x)",
                         name, SPIRV_MAGIC, pd->n_words, pd->spirv && pd->n_words ? pd->spirv[0] : 0u);
    if (pd->n_buffers > MAX_BINDINGS || pd->n_buffers > p->max_storage_buffers)
        return zdiag_set(d, ZE_UNSUPPORTED, "pipeline %s: %u storage buffers, but at most %u are supported",
                         name, pd->n_buffers,
                         p->max_storage_buffers < MAX_BINDINGS ? p->max_storage_buffers : MAX_BINDINGS);
    if (pd->push_size % 4 || pd->push_size > p->max_push_constants)
        return zdiag_set(d, ZE_INVALID,
                         "pipeline %s: %u bytes of push constants (expected a multiple of 4, at most %u)",
                         name, pd->push_size, p->max_push_constants);
    if (pd->n_spec && !pd->spec)
        return zdiag_set(d, ZE_INVALID, "pipeline %s: %u specialization constants but no values", name,
                         pd->n_spec);
    uint32_t sg = pd->subgroup_size;
    if (sg && (!p->subgroup_size_control || sg < p->subgroup_min || sg > p->subgroup_max || (sg & (sg - 1))))
        return zdiag_set(d, ZE_UNSUPPORTED, "pipeline %s: subgroup size %u requested, but %s runs %u to %u%s",
                         name, sg, p->name, p->subgroup_min, p->subgroup_max,
                         p->subgroup_size_control ? "" : " without subgroup size control");
    return ZOK;
}

static zstatus make_layouts(zvk_device *dev, const zvk_pipeline_desc *pd, zvk_pipeline *p, const char *name,
                            zdiag *d) {
    VkDescriptorSetLayoutBinding b[MAX_BINDINGS];
    for (uint32_t i = 0; i < pd->n_buffers; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1,
                                              .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                          .bindingCount = pd->n_buffers,
                                          .pBindings = b};
    VkResult r = vkCreateDescriptorSetLayout(dev->device, &li, NULL, &p->set_layout);
    if (r != VK_SUCCESS) {
        p->set_layout = VK_NULL_HANDLE;
        return zvk_fail(dev, r, d, "vkCreateDescriptorSetLayout", name);
    }
    VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = pd->push_size};
    VkPipelineLayoutCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .setLayoutCount = 1,
                                     .pSetLayouts = &p->set_layout,
                                     .pushConstantRangeCount = pd->push_size ? 1 : 0,
                                     .pPushConstantRanges = &pr};
    r = vkCreatePipelineLayout(dev->device, &pi, NULL, &p->layout);
    if (r != VK_SUCCESS) {
        p->layout = VK_NULL_HANDLE;
        return zvk_fail(dev, r, d, "vkCreatePipelineLayout", name);
    }
    return ZOK;
}

/* ZINC_DUMP_IR=NAME (a substring of kernel names) asks the driver for its
 * internal representations of those pipelines (NVIDIA's or RADV's compiled
 * code, where the driver offers them) and writes each to stderr: what the
 * registers and the schedule of a kernel are, beyond the statistics.
 * A developer's diagnostic (docs/vulkan.md). */
static bool dump_ir_wanted(const zvk_device *dev, const zvk_pipeline_desc *pd) {
    const char *e = getenv("ZINC_DUMP_IR");
    return e && *e && dev->exec_ir && pd->name && strstr(pd->name, e);
}

static void dump_ir(zvk_device *dev, const zvk_pipeline_desc *pd, const zvk_pipeline *p) {
    if (!dump_ir_wanted(dev, pd)) return;
    VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                      .pipeline = p->pipeline};
    uint32_t n = 0;
    if (dev->exec_ir(dev->device, &ei, &n, NULL) != VK_SUCCESS || n == 0) {
        fprintf(stderr, "zinc: %s: the driver offers no internal representation\n", pd->name);
        return;
    }
    VkPipelineExecutableInternalRepresentationKHR *v = calloc(n, sizeof *v);
    for (uint32_t i = 0; v && i < n; i++)
        v[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR;
    if (!v || dev->exec_ir(dev->device, &ei, &n, v) < 0) n = 0;
    for (uint32_t i = 0; i < n; i++) { /* first the sizes, then the text */
        v[i].pData = v[i].dataSize ? malloc(v[i].dataSize + 1) : NULL;
        if (!v[i].pData) v[i].dataSize = 0;
    }
    if (n && dev->exec_ir(dev->device, &ei, &n, v) >= 0)
        for (uint32_t i = 0; i < n; i++) {
            fprintf(stderr, "==== %s: %s (%s)\n", pd->name, v[i].name, v[i].description);
            if (v[i].pData && v[i].isText) {
                ((char *)v[i].pData)[v[i].dataSize] = 0;
                fputs(v[i].pData, stderr);
            } else if (v[i].pData) {
                fprintf(stderr, "(%zu bytes of binary)\n", v[i].dataSize);
            }
        }
    for (uint32_t i = 0; v && i < n; i++)
        free(v[i].pData);
    free(v);
}

/* Builds the pipeline itself; the module and the specialization data only
 * need to live through this call. */
static zstatus make_pipeline(zvk_device *dev, const zvk_pipeline_desc *pd, zvk_pipeline *p,
                             VkShaderModule mod, const char *name, zdiag *d) {
    zarena *a = zarena_new();
    VkSpecializationMapEntry *map = a && pd->n_spec ? zarena_array(a, pd->n_spec, sizeof *map) : NULL;
    uint32_t *data = a && pd->n_spec ? zarena_array(a, pd->n_spec, sizeof *data) : NULL;
    if (!a || (pd->n_spec && (!map || !data))) {
        zarena_free(a);
        return zdiag_set(d, ZE_NOMEM, "pipeline %s: out of host memory", name);
    }
    for (uint32_t i = 0; i < pd->n_spec; i++) {
        map[i] = (VkSpecializationMapEntry){.constantID = pd->spec[i].id, .offset = 4 * i, .size = 4};
        data[i] = pd->spec[i].value;
    }
    VkSpecializationInfo si = {
        .mapEntryCount = pd->n_spec, .pMapEntries = map, .dataSize = 4u * pd->n_spec, .pData = data};
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rs = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
        .requiredSubgroupSize = pd->subgroup_size};
    VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                      .flags = (dev->exec_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0) |
                                               (dump_ir_wanted(dev, pd)
                                                    ? VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR
                                                    : 0),
                                      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                .pNext = pd->subgroup_size ? &rs : NULL,
                                                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                                                .module = mod,
                                                .pName = "main",
                                                .pSpecializationInfo = pd->n_spec ? &si : NULL},
                                      .layout = p->layout};
    VkResult r = vkCreateComputePipelines(dev->device, VK_NULL_HANDLE, 1, &ci, NULL, &p->pipeline);
    zarena_free(a);
    if (r != VK_SUCCESS) {
        p->pipeline = VK_NULL_HANDLE;
        return zvk_fail(dev, r, d, "vkCreateComputePipelines", name);
    }
    return ZOK;
}

static double stat_value(const VkPipelineExecutableStatisticKHR *s) {
    switch (s->format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: return s->value.b32 ? 1.0 : 0.0;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: return (double)s->value.i64;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: return (double)s->value.u64;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: return s->value.f64;
    default: return 0.0;
    }
}

/* Maps the drivers' statistic names onto the fields the cost model reads.
 * NVIDIA: "Register Count", "Binary Size"; RADV: "VGPRs", "SGPRs",
 * "Spilled VGPRs", "LDS size", "Scratch size", "Subgroups per SIMD",
 * "Code size". Unknown names stay in raw only. */
static bool contains(const char *s, const char *w) {
    for (size_t n = strlen(w); *s; s++)
        if (!strncasecmp(s, w, n)) return true;
    return false;
}

static void map_stat(zvk_pipeline_stats *st, const char *name, double v) {
    int64_t iv = (int64_t)v;
    if (contains(name, "spill"))
        st->spills = (st->spills < 0 ? 0 : st->spills) + iv;
    else if (!strcasecmp(name, "Register Count") || !strcasecmp(name, "VGPRs"))
        st->registers = iv;
    else if (!strcasecmp(name, "SGPRs"))
        st->sgprs = iv;
    else if (!strcasecmp(name, "LDS size") || contains(name, "shared memory"))
        st->shared_bytes = iv;
    else if (!strcasecmp(name, "Scratch size") || contains(name, "local memory"))
        st->scratch_bytes = iv;
    else if (!strcasecmp(name, "Subgroups per SIMD"))
        st->occupancy = iv;
    else if (!strcasecmp(name, "Code size") || !strcasecmp(name, "Binary Size"))
        st->code_bytes = iv;
    else if (!strcasecmp(name, "Subgroup size"))
        st->subgroup_size = iv;
}

static void read_stats(zvk_device *dev, zvk_pipeline *p) {
    zvk_pipeline_stats *st = &p->stats;
    memset(st, 0, sizeof *st);
    st->registers = st->sgprs = st->spills = st->shared_bytes = st->scratch_bytes = -1;
    st->occupancy = st->code_bytes = st->subgroup_size = -1;
    if (!dev->exec_props || !dev->exec_stats) return;
    /* A compute pipeline has one executable: the compute shader. */
    VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                      .pipeline = p->pipeline,
                                      .executableIndex = 0};
    uint32_t n = 0;
    if (dev->exec_stats(dev->device, &ei, &n, NULL) != VK_SUCCESS || n == 0) return;
    zarena *a = zarena_new();
    VkPipelineExecutableStatisticKHR *v = a ? zarena_array(a, n, sizeof *v) : NULL;
    for (uint32_t i = 0; v && i < n; i++)
        v[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
    VkResult r = v ? dev->exec_stats(dev->device, &ei, &n, v) : VK_ERROR_OUT_OF_HOST_MEMORY;
    if (r == VK_SUCCESS || r == VK_INCOMPLETE) {
        st->valid = true;
        for (uint32_t i = 0; i < n; i++) {
            double val = stat_value(&v[i]);
            map_stat(st, v[i].name, val);
            if (st->n_raw < ZVK_MAX_STATS) {
                zvk_stat *s = &st->raw[st->n_raw++];
                zvki_copy(s->name, sizeof s->name, v[i].name);
                s->value = val;
            }
        }
    }
    zarena_free(a);
}

/* Kernels are written with NV cooperative matrices (what Debian's shaderc
 * compiles) and rewritten to the KHR form wherever the device offers KHR:
 * on the H200, which has both, NVIDIA's driver compiles the KHR form of the
 * same module faster (run 29: the tensor-core GEMM's fragment loads and
 * products alone 876 -> 508 us, the 8B's pp512 5822 -> 6736 tok/s).
 * ZINC_COOPMAT=nv keeps the NV form where the device has it, to measure. */
static bool want_khr(const zvk_device *dev, const zvk_pipeline_desc *pd) {
    const char *e = getenv("ZINC_COOPMAT");
    bool nv = e && !strcasecmp(e, "nv") && dev->prof.coopmat_nv;
    bool wg = zspv_coopmat_workgroup_scope(pd->spirv, pd->n_words); /* NV2: KHR types only */
    nv = nv || (pd->keep_nv && dev->prof.coopmat_nv);
    return (dev->prof.coopmat_khr || !dev->prof.coopmat_nv) && (!nv || wg) &&
           zspv_uses_coopmat_nv(pd->spirv, pd->n_words);
}

zstatus zvk_pipeline_create(zvk_device *dev, const zvk_pipeline_desc *pd, zvk_pipeline *p, zdiag *d) {
    memset(p, 0, sizeof *p);
    const char *name = pd->name ? pd->name : "(unnamed kernel)";
    if (dev->lost) return zdiag_set(d, ZE_VK, "pipeline %s: the device was lost earlier", name);
    zstatus s = check_desc(dev, pd, name, d);
    if (s != ZOK) return s;
    p->n_buffers = pd->n_buffers;
    p->push_size = pd->push_size;
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = pd->n_words * 4,
                                   .pCode = pd->spirv};
    zarena *tmp = NULL;
    if (want_khr(dev, pd)) {
        uint32_t *w;
        size_t nw;
        tmp = zarena_new();
        if (!tmp) return zdiag_set(d, ZE_NOMEM, "pipeline %s: out of host memory", name);
        s = zspv_coopmat_nv_to_khr(pd->spirv, pd->n_words, tmp, &w, &nw, d);
        if (s != ZOK) {
            zarena_free(tmp);
            zdiag_prefix(d, "pipeline %s: NV to KHR cooperative matrix", name);
            return s;
        }
        /* workgroup-scope matrices (VK_NV_cooperative_matrix2) need its
         * extension declared */
        if (zspv_coopmat_workgroup_scope(w, nw)) {
            if (!dev->prof.coopmat_wg) {
                zarena_free(tmp);
                return zdiag_set(d, ZE_UNSUPPORTED,
                                 "pipeline %s: workgroup-scope cooperative matrices, which %s does not offer "
                                 "(VK_NV_cooperative_matrix2); compile the plan for this device",
                                 name, dev->prof.name);
            }
            s = zspv_add_coopmat2_extension(w, nw, tmp, &w, &nw, d);
            /* ZINC_CM_TENSOR=1: its loads from VRAM as tensor-addressed loads (a
             * measurement: docs/coopmat2-tensor-loads.md, step 1) */
            int n_tensor = 0;
            if (s == ZOK && dev->prof.coopmat_tensor && zvki_env_on("ZINC_CM_TENSOR"))
                s = zspv_coopmat_tensor_loads(w, nw, tmp, &w, &nw, &n_tensor, d);
            if (s != ZOK) {
                zarena_free(tmp);
                zdiag_prefix(d, "pipeline %s", name);
                return s;
            }
        }
        mi.codeSize = nw * 4;
        mi.pCode = w;
    }
    VkShaderModule mod;
    VkResult r = vkCreateShaderModule(dev->device, &mi, NULL, &mod);
    zarena_free(tmp);
    if (r != VK_SUCCESS) return zvk_fail(dev, r, d, "vkCreateShaderModule", name);
    s = make_layouts(dev, pd, p, name, d);
    if (s == ZOK) s = make_pipeline(dev, pd, p, mod, name, d);
    vkDestroyShaderModule(dev->device, mod, NULL);
    if (s != ZOK) {
        zvk_pipeline_destroy(dev, p);
        return s;
    }
    read_stats(dev, p);
    dump_ir(dev, pd, p);
    return ZOK;
}

void zvk_pipeline_destroy(zvk_device *dev, zvk_pipeline *p) {
    if (!p || !dev->device) return;
    if (p->pipeline) vkDestroyPipeline(dev->device, p->pipeline, NULL);
    if (p->layout) vkDestroyPipelineLayout(dev->device, p->layout, NULL);
    if (p->set_layout) vkDestroyDescriptorSetLayout(dev->device, p->set_layout, NULL);
    p->pipeline = VK_NULL_HANDLE;
    p->layout = VK_NULL_HANDLE;
    p->set_layout = VK_NULL_HANDLE;
}

zstatus zvk_desc_pool_create(zvk_device *dev, uint32_t max_sets, uint32_t max_buffers, VkDescriptorPool *pool,
                             zdiag *d) {
    *pool = VK_NULL_HANDLE;
    if (max_sets == 0 || max_buffers == 0)
        return zdiag_set(d, ZE_INVALID,
                         "descriptor pool of %u sets and %u buffers (expected at least 1 of each)", max_sets,
                         max_buffers);
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, max_buffers};
    VkDescriptorPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                     .maxSets = max_sets,
                                     .poolSizeCount = 1,
                                     .pPoolSizes = &ps};
    VkResult r = vkCreateDescriptorPool(dev->device, &ci, NULL, pool);
    if (r != VK_SUCCESS) {
        *pool = VK_NULL_HANDLE;
        return zvk_fail(dev, r, d, "vkCreateDescriptorPool", "descriptor pool");
    }
    return ZOK;
}

void zvk_desc_pool_destroy(zvk_device *dev, VkDescriptorPool *pool) {
    if (*pool && dev->device) vkDestroyDescriptorPool(dev->device, *pool, NULL); /* frees its sets */
    *pool = VK_NULL_HANDLE;
}

static zstatus check_binding(const zvk_device *dev, const zvk_binding *b, uint32_t i,
                             VkDescriptorBufferInfo *out, zdiag *d) {
    if (!b->buf || !b->buf->buffer) return zdiag_set(d, ZE_INVALID, "binding %u: no buffer", i);
    VkDeviceSize size = b->buf->size,
                 align = dev->prof.storage_offset_align ? dev->prof.storage_offset_align : 1;
    VkDeviceSize range = b->range ? b->range : size - (b->offset < size ? b->offset : size);
    if (b->offset % align)
        return zdiag_set(d, ZE_INVALID,
                         "binding %u: offset %llu is not a multiple of %llu "
                         "(minStorageBufferOffsetAlignment)",
                         i, (unsigned long long)b->offset, (unsigned long long)align);
    if (b->offset >= size || range == 0 || range > size - b->offset)
        return zdiag_set(d, ZE_INVALID, "binding %u: range [%llu, +%llu) outside the buffer of %llu bytes", i,
                         (unsigned long long)b->offset, (unsigned long long)range, (unsigned long long)size);
    if (range > dev->prof.max_storage_buffer_range)
        return zdiag_set(d, ZE_UNSUPPORTED,
                         "binding %u: %llu bytes, but one binding covers at most %llu "
                         "(maxStorageBufferRange)",
                         i, (unsigned long long)range,
                         (unsigned long long)dev->prof.max_storage_buffer_range);
    *out = (VkDescriptorBufferInfo){b->buf->buffer, b->offset, range};
    return ZOK;
}

zstatus zvk_desc_set(zvk_device *dev, VkDescriptorPool pool, const zvk_pipeline *p, const zvk_binding *b,
                     uint32_t n, VkDescriptorSet *set, zdiag *d) {
    *set = VK_NULL_HANDLE;
    if (n != p->n_buffers)
        return zdiag_set(d, ZE_INVALID, "descriptor set: %u buffers given, the pipeline has %u bindings", n,
                         p->n_buffers);
    VkDescriptorBufferInfo bi[MAX_BINDINGS];
    VkWriteDescriptorSet w[MAX_BINDINGS];
    for (uint32_t i = 0; i < n; i++) {
        zstatus s = check_binding(dev, &b[i], i, &bi[i], d);
        if (s != ZOK) return s;
    }
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = pool,
                                      .descriptorSetCount = 1,
                                      .pSetLayouts = &p->set_layout};
    VkResult r = vkAllocateDescriptorSets(dev->device, &ai, set);
    if (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL) {
        *set = VK_NULL_HANDLE;
        return zdiag_set(d, ZE_NOMEM,
                         "descriptor set: the pool is exhausted (%s); create it with more sets or "
                         "buffers",
                         zvk_result_name(r));
    }
    if (r != VK_SUCCESS) {
        *set = VK_NULL_HANDLE;
        return zvk_fail(dev, r, d, "vkAllocateDescriptorSets", "descriptor set");
    }
    for (uint32_t i = 0; i < n; i++)
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                      .dstSet = *set,
                                      .dstBinding = i,
                                      .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &bi[i]};
    if (n) vkUpdateDescriptorSets(dev->device, n, w, 0, NULL);
    return ZOK;
}
