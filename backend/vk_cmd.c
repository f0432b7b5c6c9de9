/* Command buffers (record, submit, wait, replay) and timestamp queries. */
#include <string.h>

#include "vk_internal.h"

zstatus zvk_cmd_begin(zvk_device *dev, zvk_cmd *c, zdiag *d) {
    memset(c, 0, sizeof *c);
    if (dev->lost) return zdiag_set(d, ZE_VK, "recording commands: the device was lost earlier");
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = dev->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkResult r = vkAllocateCommandBuffers(dev->device, &ai, &c->cb);
    if (r != VK_SUCCESS) {
        c->cb = VK_NULL_HANDLE;
        return zvk_fail(dev, r, d, "vkAllocateCommandBuffers", "recording commands");
    }
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((r = vkCreateFence(dev->device, &fi, NULL, &c->fence)) != VK_SUCCESS) {
        c->fence = VK_NULL_HANDLE;
        zvk_cmd_release(dev, c);
        return zvk_fail(dev, r, d, "vkCreateFence", "recording commands");
    }
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if ((r = vkBeginCommandBuffer(c->cb, &bi)) != VK_SUCCESS) {
        zvk_cmd_release(dev, c);
        return zvk_fail(dev, r, d, "vkBeginCommandBuffer", "recording commands");
    }
    c->recording = true;
    return ZOK;
}

zstatus zvk_cmd_end(zvk_device *dev, zvk_cmd *c, zdiag *d) {
    if (!c->recording) return zdiag_set(d, ZE_INTERNAL, "zvk_cmd_end: the command buffer is not recording");
    /* Everything written becomes visible to later submissions and to the
     * host once the fence signals: callers never need a closing barrier. */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT |
                                           VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                         VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL,
                         0, NULL);
    c->recording = false;
    VkResult r = vkEndCommandBuffer(c->cb);
    return r == VK_SUCCESS ? ZOK : zvk_fail(dev, r, d, "vkEndCommandBuffer", "recording commands");
}

zstatus zvk_cmd_submit_wait(zvk_device *dev, zvk_cmd *c, zdiag *d) {
    if (c->recording) return zdiag_set(d, ZE_INTERNAL, "zvk_cmd_submit_wait: call zvk_cmd_end first");
    if (dev->lost) return zdiag_set(d, ZE_VK, "submitting commands: the device was lost earlier");
    VkResult r = vkResetFences(dev->device, 1, &c->fence);
    if (r != VK_SUCCESS) return zvk_fail(dev, r, d, "vkResetFences", "submitting commands");
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &c->cb};
    if ((r = vkQueueSubmit(dev->queue, 1, &si, c->fence)) != VK_SUCCESS)
        return zvk_fail(dev, r, d, "vkQueueSubmit", "submitting commands");
    c->pending = true;
    r = vkWaitForFences(dev->device, 1, &c->fence, VK_TRUE, dev->timeout_ns);
    if (r == VK_TIMEOUT)
        return zdiag_set(d, ZE_VK, "vkWaitForFences: VK_TIMEOUT (the GPU did not finish within %llu s)",
                         (unsigned long long)(dev->timeout_ns / 1000000000ull));
    if (r != VK_SUCCESS) return zvk_fail(dev, r, d, "vkWaitForFences", "waiting for the GPU");
    c->pending = false;
    return ZOK;
}

void zvk_cmd_release(zvk_device *dev, zvk_cmd *c) {
    if (!c || !dev->device) return;
    /* A command buffer still executing may not be freed; a lost device
     * makes the wait return at once. */
    if (c->pending) vkQueueWaitIdle(dev->queue);
    if (c->cb) vkFreeCommandBuffers(dev->device, dev->pool, 1, &c->cb);
    if (c->fence) vkDestroyFence(dev->device, c->fence, NULL);
    memset(c, 0, sizeof *c);
}

zstatus zvk_cmd_run(zvk_device *dev, zvk_cmd *c, zdiag *d) {
    zstatus s = c->recording ? zvk_cmd_end(dev, c, d) : ZOK;
    if (s == ZOK) s = zvk_cmd_submit_wait(dev, c, d);
    zvk_cmd_release(dev, c);
    return s;
}

void zvk_cmd_dispatch(const zvk_cmd *c, const zvk_pipeline *p, VkDescriptorSet set, const void *push,
                      uint32_t gx, uint32_t gy, uint32_t gz) {
    vkCmdBindPipeline(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    if (set) vkCmdBindDescriptorSets(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, NULL);
    if (p->push_size && push)
        vkCmdPushConstants(c->cb, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_size, push);
    vkCmdDispatch(c->cb, gx, gy, gz);
}

void zvk_cmd_barrier(const zvk_cmd *c) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(c->cb, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
}

zstatus zvk_timer_create(zvk_device *dev, uint32_t cap, zvk_timer *t, zdiag *d) {
    memset(t, 0, sizeof *t);
    if (!dev->prof.timestamps)
        return zdiag_set(d, ZE_UNSUPPORTED, "timestamps: %s has none on its compute queue (family %u)",
                         dev->prof.name, dev->prof.queue_family);
    if (cap == 0) return zdiag_set(d, ZE_INVALID, "timestamps: a timer of 0 marks");
    VkQueryPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = cap};
    VkResult r = vkCreateQueryPool(dev->device, &ci, NULL, &t->pool);
    if (r != VK_SUCCESS) {
        t->pool = VK_NULL_HANDLE;
        return zvk_fail(dev, r, d, "vkCreateQueryPool", "timestamps");
    }
    t->cap = cap;
    t->period_ns = dev->prof.timestamp_period;
    t->mask = dev->prof.timestamp_bits >= 64 ? ~0ull : (1ull << dev->prof.timestamp_bits) - 1;
    return ZOK;
}

void zvk_timer_destroy(zvk_device *dev, zvk_timer *t) {
    if (t && t->pool && dev->device) vkDestroyQueryPool(dev->device, t->pool, NULL);
    if (t) memset(t, 0, sizeof *t);
}

void zvk_timer_reset(const zvk_cmd *c, zvk_timer *t) {
    vkCmdResetQueryPool(c->cb, t->pool, 0, t->cap);
    t->n = 0;
}

zstatus zvk_timer_mark(const zvk_cmd *c, zvk_timer *t, zdiag *d) {
    if (t->n >= t->cap) return zdiag_set(d, ZE_INVALID, "timestamps: all %u marks used", t->cap);
    /* Bottom of pipe: the mark is taken when everything before it is done. */
    vkCmdWriteTimestamp(c->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, t->pool, t->n++);
    return ZOK;
}

zstatus zvk_timer_read(zvk_device *dev, const zvk_timer *t, double *ns, zdiag *d) {
    if (t->n == 0) return ZOK;
    zarena *a = zarena_new();
    uint64_t *raw = a ? zarena_array(a, t->n, sizeof *raw) : NULL;
    if (!raw) {
        zarena_free(a);
        return zdiag_set(d, ZE_NOMEM, "timestamps: out of host memory");
    }
    VkResult r = vkGetQueryPoolResults(dev->device, t->pool, 0, t->n, sizeof *raw * t->n, raw, sizeof *raw,
                                       VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (r == VK_SUCCESS)
        for (uint32_t i = 0; i < t->n; i++)
            ns[i] = (double)((raw[i] - raw[0]) & t->mask) * t->period_ns;
    zarena_free(a);
    return r == VK_SUCCESS ? ZOK : zvk_fail(dev, r, d, "vkGetQueryPoolResults", "reading timestamps");
}
