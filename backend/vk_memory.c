/* Buffers: memory-type choice, size limits with messages a user can act
 * on, and host<->device copies through staging buffers. */
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"

#define MIB (1024.0 * 1024.0)

/* Property bits that rule a memory type out: protected memory cannot be
 * mapped or copied normally, lazily allocated memory is for attachments,
 * and AMD's device-coherent memory is uncached (slow for everything). */
#define UNWANTED_BITS                                                                                        \
    (VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT |                            \
     VK_MEMORY_PROPERTY_DEVICE_COHERENT_BIT_AMD)

uint64_t zvk_heap_free(const zvk_device *dev, uint32_t heap) {
    if (heap >= dev->mem.memoryHeapCount) return 0;
    if (dev->prof.has_budget) {
        VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
        VkPhysicalDeviceMemoryProperties2 m2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, &b};
        vkGetPhysicalDeviceMemoryProperties2(dev->phys, &m2);
        return b.heapBudget[heap] > b.heapUsage[heap] ? b.heapBudget[heap] - b.heapUsage[heap] : 0;
    }
    uint64_t size = dev->mem.memoryHeaps[heap].size;
    return size > dev->heap_used[heap] ? size - dev->heap_used[heap] : 0;
}

/* Score of a memory type for a kind, or -1 if it does not qualify. Device
 * buffers avoid host-visible types (on a discrete GPU that is the small
 * BAR window); host buffers avoid device-local ones for the same reason
 * and prefer cached memory, which reads back fast. */
static int type_score(VkMemoryPropertyFlags f, zvk_memkind kind) {
    if (f & UNWANTED_BITS) return -1;
    if (kind == ZVK_MEM_DEVICE) {
        if (!(f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) return -1;
        return f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT ? 1 : 2;
    }
    const VkMemoryPropertyFlags need =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    if ((f & need) != need) return -1;
    return 1 + (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT ? 2 : 0) +
           (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT ? 0 : 1);
}

/* The best type allowed by bits whose heap can hold size; -1 if none. */
static int pick_type(const zvk_device *dev, uint32_t bits, zvk_memkind kind, VkDeviceSize size) {
    int best = -1, best_score = 0;
    for (uint32_t i = 0; i < dev->mem.memoryTypeCount; i++) {
        if (!(bits & (1u << i))) continue;
        const VkMemoryType *t = &dev->mem.memoryTypes[i];
        int score = type_score(t->propertyFlags, kind);
        if (score < 0 || dev->mem.memoryHeaps[t->heapIndex].size < size) continue;
        if (score > best_score) best = (int)i, best_score = score;
    }
    return best;
}

static const char *kind_label(zvk_memkind kind) {
    return kind == ZVK_MEM_DEVICE ? "device-local" : "host-visible";
}

/* Whole MiB for big numbers, one decimal for small ones (a 0.3 MiB buffer
 * should not read "need 0 MiB"). */
static void fmt_mib(char *buf, size_t n, uint64_t bytes) {
    double m = (double)bytes / MIB;
    if (m >= 100.0)
        snprintf(buf, n, "%.0f", m);
    else
        snprintf(buf, n, "%.1f", m);
}

static zstatus oom(const zvk_device *dev, zvk_memkind kind, uint32_t heap, VkDeviceSize size,
                   const char *what, zdiag *d) {
    char need[32], has[32], avail[32];
    fmt_mib(need, sizeof need, size);
    fmt_mib(has, sizeof has, heap < dev->mem.memoryHeapCount ? dev->mem.memoryHeaps[heap].size : 0);
    fmt_mib(avail, sizeof avail, zvk_heap_free(dev, heap));
    return zdiag_set(d, ZE_NOMEM, "out of %s memory: need %s MiB for %s, %s heap has %s MiB (%s MiB free)",
                     kind == ZVK_MEM_DEVICE ? "device" : "host-visible", need, what, kind_label(kind), has,
                     avail);
}

/* The heap a kind would come from, for messages before any type is chosen. */
static uint32_t kind_heap(const zvk_device *dev, zvk_memkind kind) {
    int t = pick_type(dev, ~0u, kind, 0);
    return t < 0 ? dev->prof.vram_heap : dev->mem.memoryTypes[t].heapIndex;
}

static zstatus check_size(const zvk_device *dev, VkDeviceSize size, zvk_memkind kind, const char *what,
                          zdiag *d) {
    if (size == 0) return zdiag_set(d, ZE_INVALID, "buffer for %s: size 0 (expected at least 1 byte)", what);
    uint32_t heap = kind_heap(dev, kind);
    if (heap < dev->mem.memoryHeapCount && size > dev->mem.memoryHeaps[heap].size)
        return oom(dev, kind, heap, size, what, d);
    bool by_alloc = dev->prof.max_alloc_size <= dev->prof.max_buffer_size;
    uint64_t limit = by_alloc ? dev->prof.max_alloc_size : dev->prof.max_buffer_size;
    if (size > limit) {
        char need[32], lim[32];
        fmt_mib(need, sizeof need, size);
        fmt_mib(lim, sizeof lim, limit);
        return zdiag_set(
            d, ZE_NOMEM,
            "allocation too large: need %s MiB for %s in one buffer, but %s allows at most %s MiB "
            "(%s); split it",
            need, what, dev->prof.name, lim, by_alloc ? "maxMemoryAllocationSize" : "maxBufferSize");
    }
    return ZOK;
}

static zstatus alloc_memory(zvk_device *dev, zvk_buffer *b, zvk_memkind kind, const char *what, zdiag *d) {
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev->device, b->buffer, &req);
    int type = pick_type(dev, req.memoryTypeBits, kind, req.size);
    if (type < 0) {
        if (pick_type(dev, req.memoryTypeBits, kind, 0) < 0)
            return zdiag_set(d, ZE_UNSUPPORTED, "buffer for %s: %s has no %s memory type for storage buffers",
                             what, dev->prof.name, kind_label(kind));
        return oom(dev, kind, kind_heap(dev, kind), req.size, what, d);
    }
    uint32_t heap = dev->mem.memoryTypes[type].heapIndex;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = (uint32_t)type};
    VkResult r = vkAllocateMemory(dev->device, &ai, NULL, &b->memory);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
        b->memory = VK_NULL_HANDLE;
        return oom(dev, kind, heap, req.size, what, d);
    }
    if (r != VK_SUCCESS) {
        b->memory = VK_NULL_HANDLE;
        return zvk_fail(dev, r, d, "vkAllocateMemory", what);
    }
    b->heap = heap;
    b->alloc = req.size;
    dev->heap_used[heap] += req.size;
    return ZOK;
}

zstatus zvk_buffer_create(zvk_device *dev, VkDeviceSize size, zvk_memkind kind, const char *what,
                          zvk_buffer *b, zdiag *d) {
    memset(b, 0, sizeof *b);
    b->kind = kind;
    if (dev->lost) return zdiag_set(d, ZE_VK, "buffer for %s: the device was lost earlier", what);
    zstatus s = check_size(dev, size, kind, what, d);
    if (s != ZOK) return s;
    VkBufferCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = size,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = vkCreateBuffer(dev->device, &ci, NULL, &b->buffer);
    if (r != VK_SUCCESS) {
        b->buffer = VK_NULL_HANDLE;
        return r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? oom(dev, kind, kind_heap(dev, kind), size, what, d)
                                                  : zvk_fail(dev, r, d, "vkCreateBuffer", what);
    }
    b->size = size;
    if ((s = alloc_memory(dev, b, kind, what, d)) == ZOK) {
        if ((r = vkBindBufferMemory(dev->device, b->buffer, b->memory, 0)) != VK_SUCCESS)
            s = zvk_fail(dev, r, d, "vkBindBufferMemory", what);
        else if (kind == ZVK_MEM_HOST &&
                 (r = vkMapMemory(dev->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->map)) != VK_SUCCESS)
            s = zvk_fail(dev, r, d, "vkMapMemory", what);
    }
    if (s != ZOK) zvk_buffer_destroy(dev, b);
    return s;
}

void zvk_buffer_destroy(zvk_device *dev, zvk_buffer *b) {
    if (!b || !dev->device) return;
    if (b->buffer) vkDestroyBuffer(dev->device, b->buffer, NULL);
    if (b->memory) {
        vkFreeMemory(dev->device, b->memory, NULL); /* unmaps too */
        dev->heap_used[b->heap] -= b->alloc <= dev->heap_used[b->heap] ? b->alloc : dev->heap_used[b->heap];
    }
    memset(b, 0, sizeof *b);
}

static zstatus check_range(const zvk_buffer *b, VkDeviceSize off, size_t n, const char *op, zdiag *d) {
    if (off > b->size || n > b->size - off)
        return zdiag_set(d, ZE_INVALID, "%s of %zu bytes at offset %llu: outside the buffer of %llu bytes",
                         op, n, (unsigned long long)off, (unsigned long long)b->size);
    return ZOK;
}

/* One staged copy: src -> dst regions, then a barrier so that later work
 * (and the host, for downloads) sees the bytes. */
static zstatus copy_once(zvk_device *dev, VkBuffer src, VkDeviceSize src_off, VkBuffer dst,
                         VkDeviceSize dst_off, VkDeviceSize n, zdiag *d) {
    zvk_cmd c;
    zstatus s = zvk_cmd_begin(dev, &c, d);
    if (s != ZOK) return s;
    VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    vkCmdPipelineBarrier(c.cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                         &before, 0, NULL, 0, NULL);
    VkBufferCopy region = {.srcOffset = src_off, .dstOffset = dst_off, .size = n};
    vkCmdCopyBuffer(c.cb, src, dst, 1, &region);
    return zvk_cmd_run(dev, &c, d);
}

zstatus zvk_upload(zvk_device *dev, zvk_buffer *b, VkDeviceSize off, const void *src, size_t n, zdiag *d) {
    zstatus s = check_range(b, off, n, "upload", d);
    if (s != ZOK || n == 0) return s;
    if (b->map) {
        memcpy((char *)b->map + off, src, n);
        return ZOK;
    }
    VkDeviceSize chunk = n < dev->staging_chunk ? n : dev->staging_chunk;
    zvk_buffer st;
    if ((s = zvk_buffer_create(dev, chunk, ZVK_MEM_HOST, "an upload staging buffer", &st, d)) != ZOK)
        return s;
    for (size_t done = 0; done < n && s == ZOK;) {
        size_t k = n - done < chunk ? n - done : (size_t)chunk;
        memcpy(st.map, (const char *)src + done, k);
        s = copy_once(dev, st.buffer, 0, b->buffer, off + done, k, d);
        done += k;
    }
    zvk_buffer_destroy(dev, &st);
    return s;
}

zstatus zvk_download(zvk_device *dev, const zvk_buffer *b, VkDeviceSize off, void *dst, size_t n, zdiag *d) {
    zstatus s = check_range(b, off, n, "download", d);
    if (s != ZOK || n == 0) return s;
    if (b->map) {
        memcpy(dst, (const char *)b->map + off, n);
        return ZOK;
    }
    VkDeviceSize chunk = n < dev->staging_chunk ? n : dev->staging_chunk;
    zvk_buffer st;
    if ((s = zvk_buffer_create(dev, chunk, ZVK_MEM_HOST, "a download staging buffer", &st, d)) != ZOK)
        return s;
    for (size_t done = 0; done < n && s == ZOK;) {
        size_t k = n - done < chunk ? n - done : (size_t)chunk;
        s = copy_once(dev, b->buffer, off + done, st.buffer, 0, k, d);
        if (s == ZOK) memcpy((char *)dst + done, st.map, k);
        done += k;
    }
    zvk_buffer_destroy(dev, &st);
    return s;
}
