/* The executor. Reading order: zrt_open_plan (checks, buffers, pipelines,
 * descriptor sets, the recorded decode step), then zrt_run. */
#include "zrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <spirv-tools/libspirv.h>
#include <string.h>

#include "../frontend/gguf.h"

/* A sequence: a KV cache (and the recurrent states of a hybrid model) and
 * where it stands. The zrt's own sequence binds the plan's KV and state
 * buffers (slot 0 of the KV buffers where the plan has sequence slots); each
 * one zrt_seq_new adds binds the next free slot of them, or copies of its
 * per-sequence buffers where the plan has one slot, and shares everything
 * else (weights, activations, step I/O): steps run one at a time, so
 * sequences interleave step by step, and a batch step runs one row of each
 * of several slotted sequences. */
struct zrt_seq {
    zvk_buffer *kv; /* one per plan buffer, created for per_seq() kinds only; NULL: the zrt's own or a slot */
    uint32_t slot;  /* its KV slot (plans with n_seqs > 1) */
    bool has_slot;  /* it took slot (zrt_seq_new), to give back */
    VkDescriptorPool pool;
    VkDescriptorSet *sets; /* one per dispatch */
    zvk_cmd decode;        /* recorded once, replayed per token */
    bool decode_recorded;
    int64_t pos;
    int last_T;   /* tokens of the last step: its logits rows */
    int last_row; /* the row of the logits buffer holding its last logits */
    uint64_t top_step; /* the step (zrt.steps) whose top-k record top_rec holds its last row; 0: none */
    uint32_t top_rec;
};

struct zrt {
    zplan *plan;
    gguf_file *gguf;
    zvk_instance inst;
    zvk_device dev;
    zvk_buffer *bufs;    /* one per plan buffer */
    zvk_pipeline *pipes; /* one per kernel */
    zrt_seq main;        /* the sequence of zrt_open */
    zrt_seq *cur;        /* the one steps run on (zrt_seq_use) */
    uint64_t steps;      /* steps run: a sequence's top-k record is current while its top_step is this */
    bool *slot_used;     /* [n_seqs] */
    zvk_cmd *batch;      /* [n_seqs + 1]: the batch step of n rows, recorded on first use */
    bool *batch_recorded;
    bool progress;
};

/* Bytes of one sequence's slot of KV buffer i. */
static uint64_t slot_bytes(const zplan *p, uint32_t i) {
    return p->buffers[i].size / p->n_seqs;
}

/* Buffers each sequence has its own copy of: the KV caches and the
 * recurrent states. A state's kernels read it as zeros in a step at
 * position 0, so zrt_reset needs no device work for either. */
static bool per_seq(uint32_t kind) {
    return kind == ZPB_KV || kind == ZPB_STATE;
}

static bool host_visible(uint32_t kind) {
    return kind == ZPB_STEP || kind == ZPB_TOKENS || kind == ZPB_TOPK;
}

/* Whether a validated module has the entry point the executor calls: a
 * GLCompute OpEntryPoint named "main". A driver asked for an entry point the
 * module lacks may do anything (llvmpipe fails and leaks). */
static bool has_main(const uint32_t *w, uint32_t n) {
    enum { OP_ENTRY_POINT = 15, GL_COMPUTE = 5 };
    for (uint32_t j = 5, wc; j < n && (wc = w[j] >> 16) != 0; j += wc)
        if ((w[j] & 0xffff) == OP_ENTRY_POINT && wc >= 4 && j + wc <= n && w[j + 1] == GL_COMPUTE &&
            !strncmp((const char *)&w[j + 3], "main", 4 * (wc - 3)))
            return true;
    return false;
}

/* A plan's checksums say only that its bytes are what a writer wrote: a
 * forged plan can carry any SPIR-V words, and drivers need not survive
 * invalid SPIR-V (llvmpipe crashes on an OpStore of an undefined id). So each
 * kernel is validated before any driver sees it, by the rules of the Vulkan
 * version its SPIR-V version implies. Layouts are checked by the most
 * permissive rules: the aim is a well-formed module; features are checked
 * against the device separately (check_device). */
static zstatus check_spirv(const zplan *p, zdiag *d) {
    for (uint32_t i = 0; i < p->n_kernels; i++) {
        const zplan_kernel *k = &p->kernels[i];
        uint32_t ver = p->spirv[k->code + 1];
        spv_target_env env = ver >= 0x10600   ? SPV_ENV_VULKAN_1_3
                             : ver >= 0x10400 ? SPV_ENV_VULKAN_1_2
                             : ver >= 0x10300 ? SPV_ENV_VULKAN_1_1
                                              : SPV_ENV_VULKAN_1_0;
        spv_context ctx = spvContextCreate(env);
        spv_validator_options vo = spvValidatorOptionsCreate();
        if (!ctx || !vo) {
            spvValidatorOptionsDestroy(vo);
            spvContextDestroy(ctx);
            return zdiag_set(d, ZE_NOMEM, "out of memory validating SPIR-V");
        }
        spvValidatorOptionsSetScalarBlockLayout(vo, true);
        spvValidatorOptionsSetWorkgroupScalarBlockLayout(vo, true);
        spvValidatorOptionsSetUniformBufferStandardLayout(vo, true);
        spv_const_binary_t bin = {p->spirv + k->code, k->n_words};
        spv_diagnostic diag = NULL;
        spv_result_t res = spvValidateWithOptions(ctx, vo, &bin, &diag);
        char why[200] = "";
        for (size_t j = 0;
             diag && diag->error && diag->error[j] && diag->error[j] != '\n' && j + 1 < sizeof why; j++)
            why[j] = diag->error[j] >= 0x20 && diag->error[j] < 0x7f ? diag->error[j] : '?';
        if (!why[0]) snprintf(why, sizeof why, "validator result %d", (int)res);
        spvDiagnosticDestroy(diag);
        spvValidatorOptionsDestroy(vo);
        spvContextDestroy(ctx);
        if (res != SPV_SUCCESS)
            return zdiag_set(
                d, ZE_FORMAT,
                "kernel %u '%s': invalid SPIR-V: expected a module valid for Vulkan (SPIRV-Tools), "
                "found: %s",
                i, zplan_str(p, k->name), why);
        if (!has_main(p->spirv + k->code, k->n_words))
            return zdiag_set(d, ZE_FORMAT,
                             "kernel %u '%s': SPIR-V entry point: expected a GLCompute entry point named "
                             "'main', found none",
                             i, zplan_str(p, k->name));
    }
    return ZOK;
}

static zstatus check_gguf(zrt *r, const char *path, zdiag *d) {
    const zplan *p = r->plan;
    zstatus s = gguf_open(path, &r->gguf, d);
    if (s) return s;
    if (r->gguf->size != p->gguf_size || gguf_identity_hash(r->gguf) != p->gguf_hash)
        return zdiag_set(
            d, ZE_INVALID,
            "%s is not the GGUF this plan was compiled from: expected %llu bytes with identity %016llx, "
            "found %llu bytes with identity %016llx (recompile with zincc)",
            path, (unsigned long long)p->gguf_size, (unsigned long long)p->gguf_hash,
            (unsigned long long)r->gguf->size, (unsigned long long)gguf_identity_hash(r->gguf));
    return ZOK;
}

/* The first ZPLAN_NEED_* feature the device lacks, or NULL. A plan's bits
 * may be forged (the checksums only say the writer wrote them), and a
 * driver handed a kernel that uses a feature it lacks may fail in any way. */
static const char *missing_feature(const zvk_profile *pr, uint32_t need) {
    if ((need & ZPLAN_NEED_FP16 && !pr->fp16) || (need & ZPLAN_NEED_STORAGE16 && !pr->storage16))
        return "16-bit float support";
    if (need & ZPLAN_NEED_STORAGE8 && !pr->storage8) return "8-bit storage buffers";
    if (need & ZPLAN_NEED_INT_DOT && !pr->int_dot) return "integer dot products";
    /* NV-form kernels run on either extension (zvk_pipeline_create rewrites them). */
    if (need & ZPLAN_NEED_COOPMAT_NV && !pr->coopmat_nv && !pr->coopmat_khr) return "cooperative matrix (NV or KHR)";
    if (need & ZPLAN_NEED_COOPMAT_KHR && !pr->coopmat_khr) return "KHR cooperative matrix";
    if (need & ZPLAN_NEED_COOPMAT_WG && !pr->coopmat_wg) return "workgroup-scope cooperative matrix (VK_NV_cooperative_matrix2)";
    return NULL;
}

static zstatus check_device(zrt *r, const char *request, zdiag *d) {
    uint32_t idx;
    zstatus s = zvk_instance_create(&r->inst, d);
    if (!s) s = zvk_select_device(&r->inst, request, &idx, d);
    if (!s) s = zvk_device_create(&r->inst, idx, &r->dev, d);
    if (s) return s;
    const zvk_profile *pr = &r->dev.prof;
    const char *missing = missing_feature(pr, r->plan->required);
    if (missing)
        return zdiag_set(d, ZE_UNSUPPORTED,
                         "device '%s' lacks %s, which this plan needs: expected a plan compiled "
                         "for it (zincc MODEL.gguf --target device -o PLAN)",
                         pr->name, missing);
    /* Pipelines are created at the driver's default subgroup size. */
    if ((r->plan->required & ZPLAN_NEED_SUBGROUP_SIZE) && r->plan->subgroup_size != pr->subgroup_size)
        return zdiag_set(d, ZE_UNSUPPORTED,
                         "device '%s' runs subgroups of %u; this plan's kernels assume subgroups of %u: "
                         "expected a plan compiled for it (zincc MODEL.gguf --target device -o PLAN)",
                         pr->name, pr->subgroup_size, r->plan->subgroup_size);
    for (uint32_t i = 0; r->plan->n_seqs > 1 && i < r->plan->n_buffers; i++)
        if (r->plan->buffers[i].kind == ZPB_KV && pr->storage_offset_align &&
            slot_bytes(r->plan, i) % pr->storage_offset_align)
            return zdiag_set(d, ZE_UNSUPPORTED,
                             "device '%s' binds storage at multiples of %llu bytes; this plan's KV slots are %llu "
                             "bytes: recompile with zincc --parallel and another --ctx",
                             pr->name, (unsigned long long)pr->storage_offset_align,
                             (unsigned long long)slot_bytes(r->plan, i));
    if (r->plan->shared_bytes > pr->max_shared_memory)
        return zdiag_set(
            d, ZE_UNSUPPORTED,
            "device '%s' has %u bytes of shared memory; this plan's kernels were sized for %u (target "
            "'%s'): recompile with --target device",
            pr->name, pr->max_shared_memory, r->plan->shared_bytes, zplan_str(r->plan, r->plan->target));
    return ZOK;
}

/* Refuses before allocating anything when the device cannot hold the plan. */
static zstatus check_memory(zrt *r, zdiag *d) {
    uint64_t need = 0;
    for (uint32_t i = 0; i < r->plan->n_buffers; i++)
        if (!host_visible(r->plan->buffers[i].kind)) need += r->plan->buffers[i].size;
    uint64_t avail = zvk_heap_free(&r->dev, r->dev.prof.vram_heap);
    if (need > avail)
        return zdiag_set(
            d, ZE_NOMEM,
            "not enough device memory on '%s': the plan needs %.1f MiB (weights, activations, KV cache), "
            "%.1f MiB are free: recompile with a smaller --ctx",
            r->dev.prof.name, need / 1048576.0, avail / 1048576.0);
    return ZOK;
}

/* Redraws only when the bar moves by a percent, and once at the end. */
static void draw_progress(uint64_t done, uint64_t total, int *shown) {
    int w = 40, pct = total ? (int)(100.0 * (double)done / (double)total) : 100;
    if (pct == *shown && done != total) return;
    *shown = pct;
    int filled = pct * w / 100;
    fprintf(stderr, "\rzinc: loading weights [%.*s%*s] %3d%% %8.1f MiB", filled,
            "########################################", w - filled, "", pct, done / 1048576.0);
    if (done == total) fputc('\n', stderr);
}

/* Weights come from the mapped GGUF; bytes past its end (padding) are zero. */
static zstatus upload_weights(zrt *r, uint32_t i, uint64_t *done, uint64_t total, int *shown, zdiag *d) {
    const zplan_buffer *b = &r->plan->buffers[i];
    uint64_t n = b->size, avail = b->src_offset < r->gguf->size ? r->gguf->size - b->src_offset : 0;
    if (avail < n) n = avail;
    zstatus s = zvk_upload(&r->dev, &r->bufs[i], 0, r->gguf->base + b->src_offset, (size_t)n, d);
    *done += b->size;
    if (r->progress) draw_progress(*done, total, shown);
    return s;
}

static zstatus fill_zero(zrt *r, zdiag *d) {
    zvk_cmd c = {0};
    zstatus s = zvk_cmd_begin(&r->dev, &c, d);
    for (uint32_t i = 0; !s && i < r->plan->n_buffers; i++) {
        uint32_t k = r->plan->buffers[i].kind;
        if (per_seq(k) || k == ZPB_SCRATCH || k == ZPB_ACT)
            vkCmdFillBuffer(c.cb, r->bufs[i].buffer, 0, VK_WHOLE_SIZE, 0);
    }
    if (!s)
        s = zvk_cmd_run(&r->dev, &c, d);
    else
        zvk_cmd_release(&r->dev, &c);
    return s;
}

static zstatus create_buffers(zrt *r, zdiag *d) {
    const zplan *p = r->plan;
    uint64_t total = 0, done = 0;
    int shown = -1;
    for (uint32_t i = 0; i < p->n_buffers; i++)
        if (p->buffers[i].kind == ZPB_WEIGHTS) total += p->buffers[i].size;
    for (uint32_t i = 0; i < p->n_buffers; i++) {
        const zplan_buffer *b = &p->buffers[i];
        zstatus s = zvk_buffer_create(&r->dev, b->size, host_visible(b->kind) ? ZVK_MEM_HOST : ZVK_MEM_DEVICE,
                                      zplan_str(p, b->name), &r->bufs[i], d);
        if (!s && b->kind == ZPB_WEIGHTS) s = upload_weights(r, i, &done, total, &shown, d);
        if (s) return s;
    }
    return fill_zero(r, d);
}

static zstatus create_pipelines(zrt *r, zdiag *d) {
    const zplan *p = r->plan;
    for (uint32_t i = 0; i < p->n_kernels; i++) {
        const zplan_kernel *k = &p->kernels[i];
        zvk_pipeline_desc pd = {.name = zplan_str(p, k->name),
                                .spirv = p->spirv + k->code,
                                .n_words = k->n_words,
                                .n_buffers = k->n_bindings};
        zstatus s = zvk_pipeline_create(&r->dev, &pd, &r->pipes[i], d);
        if (s) return s;
    }
    return ZOK;
}

/* Whether dispatch i belongs to the batch schedule (whose bindings cover
 * every slot of the caches, and which runs from the zrt's own sets). */
static bool in_batch(const zplan *p, uint32_t i) {
    const zplan_schedule *b = &p->sched[ZPLAN_BATCH];
    return i >= b->first && i - b->first < b->count;
}

/* A sequence's descriptor sets: its KV buffers (or its slot of the plan's),
 * the zrt's others. */
static zstatus create_sets(zrt *r, zrt_seq *q, zdiag *d) {
    const zplan *p = r->plan;
    zstatus s = zvk_desc_pool_create(&r->dev, p->n_dispatches ? p->n_dispatches : 1,
                                     p->n_bindings ? p->n_bindings : 1, &q->pool, d);
    for (uint32_t i = 0; !s && i < p->n_dispatches; i++) {
        const zplan_dispatch *dp = &p->dispatches[i];
        zvk_binding b[ZPLAN_MAX_BINDINGS];
        for (uint32_t j = 0; j < dp->n_bindings; j++) {
            const zplan_binding *pb = &p->bindings[dp->first_binding + j];
            bool kv = p->buffers[pb->buffer].kind == ZPB_KV, own = q->kv && per_seq(p->buffers[pb->buffer].kind);
            uint64_t at = kv && !q->kv && !in_batch(p, i) ? q->slot * slot_bytes(p, pb->buffer) : 0;
            b[j] = (zvk_binding){own ? &q->kv[pb->buffer] : &r->bufs[pb->buffer], pb->offset + at, pb->range};
        }
        s = zvk_desc_set(&r->dev, q->pool, &r->pipes[dp->kernel], b, dp->n_bindings, &q->sets[i], d);
        if (s) zdiag_prefix(d, "dispatch %u (%s)", i, zplan_str(p, dp->node));
    }
    return s;
}

/* Records one phase's dispatches for a step of T tokens; with a timer, a
 * timestamp before the first dispatch and after each one. */
static zstatus record(zrt *r, zplan_phase ph, int64_t T, zvk_cmd *c, zvk_timer *tm, zdiag *d) {
    const zplan *p = r->plan;
    zstatus s = zvk_cmd_begin(&r->dev, c, d);
    const zplan_schedule *sc = &p->sched[ph];
    if (!s && tm) {
        zvk_timer_reset(c, tm);
        s = zvk_timer_mark(c, tm, d);
    }
    for (uint32_t i = sc->first; !s && i < sc->first + sc->count; i++) {
        const zplan_dispatch *dp = &p->dispatches[i];
        uint32_t g[3];
        for (int a = 0; a < 3; a++) {
            int64_t x = dp->groups[a].a * T + dp->groups[a].b;
            g[a] = x <= 0 ? 0 : (uint32_t)((x + dp->groups[a].div - 1) / dp->groups[a].div);
        }
        if (dp->flags & ZPLAN_BARRIER) zvk_cmd_barrier(c);
        if (g[0] && g[1] && g[2])
            zvk_cmd_dispatch(c, &r->pipes[dp->kernel], r->cur->sets[i], NULL, g[0], g[1], g[2]);
        if (tm) s = zvk_timer_mark(c, tm, d);
    }
    if (!s) s = zvk_cmd_end(&r->dev, c, d);
    return s;
}

/* The load schedule, once: weights into the layouts the plan chose for the
 * device (the weight-layout pass), in place, before any step reads them. */
static zstatus run_load(zrt *r, zdiag *d) {
    if (!r->plan->sched[ZPLAN_LOAD].count) return ZOK;
    zvk_cmd c = {0};
    zstatus s = record(r, ZPLAN_LOAD, 1, &c, NULL, d);
    if (!s)
        s = zvk_cmd_submit_wait(&r->dev, &c, d);
    zvk_cmd_release(&r->dev, &c);
    if (s) zdiag_prefix(d, "the load schedule (weights into their device layouts)");
    return s;
}

static zstatus record_decode(zrt *r, zrt_seq *q, zdiag *d) {
    if (!r->plan->sched[ZPLAN_DECODE].count) return ZOK;
    zrt_seq *was = r->cur;
    r->cur = q;
    zstatus s = record(r, ZPLAN_DECODE, 1, &q->decode, NULL, d);
    r->cur = was;
    q->decode_recorded = !s;
    return s;
}

zstatus zrt_open_plan(zplan *p, const zrt_opts *o, zrt **out, zdiag *d) {
    *out = NULL;
    zrt *r = calloc(1, sizeof *r);
    if (!r) {
        zplan_free(p);
        return zdiag_set(d, ZE_NOMEM, "out of memory");
    }
    r->plan = p;
    r->progress = o && o->progress;
    r->bufs = calloc(p->n_buffers ? p->n_buffers : 1, sizeof *r->bufs);
    r->pipes = calloc(p->n_kernels ? p->n_kernels : 1, sizeof *r->pipes);
    r->main.sets = calloc(p->n_dispatches ? p->n_dispatches : 1, sizeof *r->main.sets);
    r->slot_used = calloc(p->n_seqs, sizeof *r->slot_used);
    r->batch = calloc(p->n_seqs + 1, sizeof *r->batch);
    r->batch_recorded = calloc(p->n_seqs + 1, sizeof *r->batch_recorded);
    r->cur = &r->main;
    zstatus s = r->bufs && r->pipes && r->main.sets && r->slot_used && r->batch && r->batch_recorded
                    ? ZOK
                    : zdiag_set(d, ZE_NOMEM, "out of memory");
    if (!s) r->slot_used[0] = true; /* the zrt's own sequence */
    if (!s) s = check_spirv(p, d);
    if (!s) s = check_gguf(r, o && o->gguf_path ? o->gguf_path : zplan_str(p, p->gguf_path), d);
    if (!s) s = check_device(r, o ? o->device : NULL, d);
    if (!s) s = check_memory(r, d);
    if (!s) s = create_buffers(r, d);
    if (!s) s = create_pipelines(r, d);
    if (!s) s = create_sets(r, &r->main, d);
    if (!s) s = run_load(r, d);
    if (!s) s = record_decode(r, &r->main, d);
    if (s) {
        zrt_close(r);
        return s;
    }
    *out = r;
    return ZOK;
}

zstatus zrt_open(const char *plan_path, const zrt_opts *o, zrt **out, zdiag *d) {
    zplan *p;
    *out = NULL;
    zstatus s = zplan_read(plan_path, &p, d);
    return s ? s : zrt_open_plan(p, o, out, d);
}

void zrt_close(zrt *r) {
    if (!r) return;
    if (r->dev.device) vkDeviceWaitIdle(r->dev.device);
    zvk_cmd_release(&r->dev, &r->main.decode);
    for (uint32_t n = 0; r->batch_recorded && n <= r->plan->n_seqs; n++)
        if (r->batch_recorded[n]) zvk_cmd_release(&r->dev, &r->batch[n]);
    zvk_desc_pool_destroy(&r->dev, &r->main.pool);
    for (uint32_t i = 0; r->pipes && i < r->plan->n_kernels; i++)
        zvk_pipeline_destroy(&r->dev, &r->pipes[i]);
    for (uint32_t i = 0; r->bufs && i < r->plan->n_buffers; i++)
        zvk_buffer_destroy(&r->dev, &r->bufs[i]);
    zvk_device_destroy(&r->dev);
    zvk_instance_destroy(&r->inst);
    gguf_close(r->gguf);
    zplan_free(r->plan);
    free(r->bufs);
    free(r->pipes);
    free(r->main.sets);
    free(r->slot_used);
    free(r->batch);
    free(r->batch_recorded);
    free(r);
}

const zvk_pipeline_stats *zrt_kernel_stats(const zrt *r, uint32_t kernel) {
    static const zvk_pipeline_stats none = {0};
    return kernel < r->plan->n_kernels && r->pipes ? &r->pipes[kernel].stats : &none;
}

const zplan *zrt_plan(const zrt *r) {
    return r->plan;
}
const gguf_file *zrt_gguf(const zrt *r) {
    return r->gguf;
}
const zvk_profile *zrt_device(const zrt *r) {
    return &r->dev.prof;
}
zstatus zrt_calibrate(zrt *r, uint32_t wide_groups, zvk_calib *out, zdiag *d) {
    return zvk_calibrate(&r->dev, wide_groups, out, d);
}
int64_t zrt_pos(const zrt *r) {
    return r->cur->pos;
}
void zrt_reset(zrt *r) {
    r->cur->pos = 0;
    r->cur->last_T = 0;
    r->cur->top_step = 0;
}

/* Refuses before allocating when the device cannot hold another cache. */
static zstatus check_seq_memory(zrt *r, uint64_t *need, zdiag *d) {
    *need = 0;
    for (uint32_t i = 0; i < r->plan->n_buffers; i++)
        if (per_seq(r->plan->buffers[i].kind)) *need += r->plan->buffers[i].size;
    uint64_t avail = zvk_heap_free(&r->dev, r->dev.prof.vram_heap);
    if (*need > avail)
        return zdiag_set(d, ZE_NOMEM,
                         "not enough device memory on '%s' for another sequence: its KV cache needs %.1f "
                         "MiB, %.1f MiB are free: use fewer sequences or a smaller context",
                         r->dev.prof.name, *need / 1048576.0, avail / 1048576.0);
    return ZOK;
}

static zstatus create_seq_kv(zrt *r, zrt_seq *q, zdiag *d) {
    const zplan *p = r->plan;
    zvk_cmd c = {0};
    zstatus s = ZOK;
    for (uint32_t i = 0; !s && i < p->n_buffers; i++)
        if (per_seq(p->buffers[i].kind))
            s = zvk_buffer_create(&r->dev, p->buffers[i].size, ZVK_MEM_DEVICE, zplan_str(p, p->buffers[i].name),
                                  &q->kv[i], d);
    if (!s) s = zvk_cmd_begin(&r->dev, &c, d);
    if (s) return s;
    for (uint32_t i = 0; i < p->n_buffers; i++)
        if (per_seq(p->buffers[i].kind)) vkCmdFillBuffer(c.cb, q->kv[i].buffer, 0, VK_WHOLE_SIZE, 0);
    return zvk_cmd_run(&r->dev, &c, d);
}

/* A slotted sequence's cache: its slot of the plan's KV buffers, zeroed. */
static zstatus take_slot(zrt *r, zrt_seq *q, zdiag *d) {
    const zplan *p = r->plan;
    uint32_t i = 0;
    while (i < p->n_seqs && r->slot_used[i])
        i++;
    if (i == p->n_seqs)
        return zdiag_set(d, ZE_INVALID,
                         "all %u sequence slots of the plan are in use: expected at most %u sequences "
                         "(recompile with zincc --parallel N for more)",
                         p->n_seqs, p->n_seqs);
    zvk_cmd c = {0};
    zstatus s = zvk_cmd_begin(&r->dev, &c, d);
    if (s) return s;
    for (uint32_t b = 0; b < p->n_buffers; b++)
        if (p->buffers[b].kind == ZPB_KV)
            vkCmdFillBuffer(c.cb, r->bufs[b].buffer, i * slot_bytes(p, b), slot_bytes(p, b), 0);
    s = zvk_cmd_run(&r->dev, &c, d);
    if (!s) q->slot = i, q->has_slot = r->slot_used[i] = true;
    return s;
}

zstatus zrt_seq_new(zrt *r, zrt_seq **out, zdiag *d) {
    uint64_t need;
    *out = NULL;
    bool slotted = r->plan->n_seqs > 1;
    zstatus s = slotted ? ZOK : check_seq_memory(r, &need, d);
    if (s) return s;
    zrt_seq *q = calloc(1, sizeof *q);
    if (q && !slotted) q->kv = calloc(r->plan->n_buffers, sizeof *q->kv);
    if (q && (q->kv || slotted)) q->sets = calloc(r->plan->n_dispatches ? r->plan->n_dispatches : 1, sizeof *q->sets);
    s = q && q->sets ? ZOK : zdiag_set(d, ZE_NOMEM, "out of memory");
    if (!s) s = slotted ? take_slot(r, q, d) : create_seq_kv(r, q, d);
    if (!s) s = create_sets(r, q, d);
    if (!s) s = record_decode(r, q, d);
    if (s) {
        zrt_seq_free(r, q);
        return s;
    }
    *out = q;
    return ZOK;
}

void zrt_seq_free(zrt *r, zrt_seq *q) {
    if (!q || q == &r->main) return;
    if (r->cur == q) r->cur = &r->main;
    if (q->has_slot) r->slot_used[q->slot] = false;
    vkDeviceWaitIdle(r->dev.device);
    zvk_cmd_release(&r->dev, &q->decode);
    zvk_desc_pool_destroy(&r->dev, &q->pool);
    for (uint32_t i = 0; q->kv && i < r->plan->n_buffers; i++)
        if (q->kv[i].buffer) zvk_buffer_destroy(&r->dev, &q->kv[i]);
    free(q->kv);
    free(q->sets);
    free(q);
}

void zrt_seq_use(zrt *r, zrt_seq *q) {
    r->cur = q ? q : &r->main;
}

static zstatus check_step(const zrt *r, zplan_phase ph, const int32_t *tokens, int n, zdiag *d) {
    const zplan *p = r->plan;
    if (ph != ZPLAN_PREFILL && ph != ZPLAN_DECODE)
        return zdiag_set(d, ZE_INVALID, "schedule %d: expected prefill or decode (a batch runs with zrt_run_batch)",
                         (int)ph);
    const zplan_schedule *sc = &p->sched[ph];
    if (n < 1 || (uint32_t)n > sc->max_tokens || (ph == ZPLAN_DECODE && n != 1))
        return zdiag_set(d, ZE_INVALID, "%s step of %d tokens: expected 1..%u",
                         ph == ZPLAN_DECODE ? "decode" : "prefill", n, sc->max_tokens);
    if (r->cur->pos + n > p->ctx)
        return zdiag_set(d, ZE_INVALID,
                         "context full: %lld cached + %d new tokens exceed the plan's context of %u",
                         (long long)r->cur->pos, n, p->ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= p->n_vocab)
            return zdiag_set(d, ZE_INVALID, "token %d at index %d: expected an id below %u", tokens[i], i,
                             p->n_vocab);
    return ZOK;
}

/* The fourth word: how many of the step's last rows need logits (0: all).
 * Only the last is sampled; all of them when the caller reads them back.
 * The prefill logits GEMM skips the tiles of rows nobody reads. */
static void write_step(zrt *r, const int32_t *tokens, int n, bool all_logits) {
    const zplan *p = r->plan;
    uint32_t step[4] = {(uint32_t)n, (uint32_t)r->cur->pos, p->ctx, all_logits ? 0u : 1u};
    memcpy(r->bufs[p->step_buffer].map, step, sizeof step);
    memcpy(r->bufs[p->tokens_buffer].map, tokens, sizeof *tokens * (size_t)n);
}

zstatus zrt_run(zrt *r, zplan_phase ph, const int32_t *tokens, int n, float *logits, zdiag *d) {
    const zplan *p = r->plan;
    zstatus s = check_step(r, ph, tokens, n, d);
    if (s) return s;
    write_step(r, tokens, n, logits != NULL);
    r->steps++; /* whatever the top-k buffer held is stale from here, even if the step fails */
    zvk_cmd c = {0};
    if (ph == ZPLAN_DECODE && r->cur->decode_recorded)
        s = zvk_cmd_submit_wait(&r->dev, &r->cur->decode, d);
    else {
        s = record(r, ph, n, &c, NULL, d);
        if (!s) s = zvk_cmd_submit_wait(&r->dev, &c, d);
        zvk_cmd_release(&r->dev, &c);
    }
    /* Logits stay on the device unless asked for: sampling reads the top-k. */
    if (!s && logits)
        s = zvk_download(&r->dev, &r->bufs[p->logits_buffer], 0, logits,
                         sizeof(float) * (size_t)n * p->n_vocab, d);
    if (s) return s;
    r->cur->pos += n;
    r->cur->last_T = n;
    r->cur->last_row = n - 1;
    r->cur->top_step = p->topk_buffer ? r->steps : 0;
    r->cur->top_rec = 0;
    return ZOK;
}

/* A batch step's rows: one token each of distinct slotted sequences, inside
 * their contexts. */
static zstatus check_batch(const zrt *r, zrt_seq *const *seqs, const int32_t *tokens, int n, zdiag *d) {
    const zplan *p = r->plan;
    const zplan_schedule *sc = &p->sched[ZPLAN_BATCH];
    if (!sc->count)
        return zdiag_set(d, ZE_UNSUPPORTED,
                         "the plan has no batch decode schedule: recompile it with zincc --parallel N");
    if (n < 1 || (uint32_t)n > sc->max_tokens)
        return zdiag_set(d, ZE_INVALID, "batch step of %d rows: expected 1..%u (zincc --parallel)", n,
                         sc->max_tokens);
    for (int i = 0; i < n; i++) {
        const zrt_seq *q = seqs[i] ? seqs[i] : &r->main;
        for (int j = 0; j < i; j++)
            if ((seqs[j] ? seqs[j] : &r->main) == q)
                return zdiag_set(d, ZE_INVALID, "batch rows %d and %d: expected distinct sequences, found one twice",
                                 j, i);
        if (q->pos + 1 > p->ctx)
            return zdiag_set(d, ZE_INVALID, "batch row %d: context full: %lld cached + 1 exceed the context of %u",
                             i, (long long)q->pos, p->ctx);
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= p->n_vocab)
            return zdiag_set(d, ZE_INVALID, "token %d at batch row %d: expected an id below %u", tokens[i], i,
                             p->n_vocab);
    }
    return ZOK;
}

/* A batch step's rows: each row's (position, slot), and the tokens. */
static void write_batch_step(zrt *r, zrt_seq *const *seqs, const int32_t *tokens, int n) {
    const zplan *p = r->plan;
    uint32_t *step = r->bufs[p->step_buffer].map;
    step[0] = (uint32_t)n, step[1] = 0, step[2] = p->ctx, step[3] = 0;
    for (int i = 0; i < n; i++) {
        const zrt_seq *q = seqs[i] ? seqs[i] : &r->main;
        step[4 + 2 * i] = (uint32_t)q->pos;
        step[5 + 2 * i] = q->slot;
    }
    memcpy(r->bufs[p->tokens_buffer].map, tokens, sizeof *tokens * (size_t)n);
}

zstatus zrt_run_batch(zrt *r, zrt_seq *const *seqs, const int32_t *tokens, int n, float *logits, zdiag *d) {
    const zplan *p = r->plan;
    zstatus s = check_batch(r, seqs, tokens, n, d);
    if (s) return s;
    write_batch_step(r, seqs, tokens, n);
    r->steps++; /* as in zrt_run */
    if (!r->batch_recorded[n]) { /* the batch dispatches bind every slot: the zrt's own sets */
        zrt_seq *was = r->cur;
        r->cur = &r->main;
        s = record(r, ZPLAN_BATCH, n, &r->batch[n], NULL, d);
        r->cur = was;
        if (s) return s;
        r->batch_recorded[n] = true;
    }
    s = zvk_cmd_submit_wait(&r->dev, &r->batch[n], d);
    if (!s && logits)
        s = zvk_download(&r->dev, &r->bufs[p->logits_buffer], 0, logits, sizeof(float) * (size_t)n * p->n_vocab,
                         d);
    if (s) return s;
    /* Plans from 1.4 on select every row's top-k, row i into record i. */
    bool top = zplan_batch_top(p);
    for (int i = 0; i < n; i++) {
        zrt_seq *q = seqs[i] ? seqs[i] : &r->main;
        q->pos++;
        q->last_T = 1;
        q->last_row = i;
        q->top_step = top ? r->steps : 0;
        q->top_rec = (uint32_t)i;
    }
    return ZOK;
}

zstatus zrt_eval(zrt *r, const int32_t *tokens, int n, float *logits, zdiag *d) {
    if (n == 1 && r->plan->sched[ZPLAN_DECODE].count) return zrt_run(r, ZPLAN_DECODE, tokens, 1, logits, d);
    int chunk = (int)r->plan->sched[ZPLAN_PREFILL].max_tokens;
    for (int i = 0; i < n; i += chunk) {
        int m = n - i < chunk ? n - i : chunk;
        zstatus s = zrt_run(r, ZPLAN_PREFILL, tokens + i, m,
                            logits ? logits + (size_t)i * r->plan->n_vocab : NULL, d);
        if (s) return s;
    }
    return ZOK;
}

zstatus zrt_last_logits(zrt *r, float *last, zdiag *d) {
    const zplan *p = r->plan;
    if (!r->cur->last_T) return zdiag_set(d, ZE_INVALID, "no step has run: there are no logits to read");
    uint64_t row = sizeof(float) * p->n_vocab;
    return zvk_download(&r->dev, &r->bufs[p->logits_buffer], row * (uint64_t)r->cur->last_row, last, row, d);
}

zstatus zrt_top(const zrt *r, zrt_sample_cand *top, size_t *n, zdiag *d) {
    const zplan *p = r->plan;
    if (!p->topk_buffer)
        return zdiag_set(d, ZE_UNSUPPORTED, "the plan selects no top-k (compiled before plan 1.1)");
    if (!r->cur->top_step || r->cur->top_step != r->steps)
        return zdiag_set(d, ZE_UNSUPPORTED, "the top-k buffer holds another step's rows (another sequence's, or a "
                                            "batch step of a plan before 1.4): read the row instead");
    const uint32_t *t = (const uint32_t *)r->bufs[p->topk_buffer].map + r->cur->top_rec * (ZPLAN_TOPK_BYTES / 4);
    if (t[1] > t[0] || t[0] > ZPLAN_TOPK_CAP)
        return zdiag_set(d, ZE_UNSUPPORTED, "%u logits tie at the top-k threshold: more than the %d kept",
                         t[1], ZPLAN_TOPK_CAP);
    for (uint32_t i = 0; i < t[0]; i++) {
        uint32_t id = t[2 + 2 * i], bits = t[3 + 2 * i];
        float f;
        memcpy(&f, &bits, sizeof f);
        if (id >= p->n_vocab) return zdiag_set(d, ZE_INTERNAL, "top-k candidate %u out of range", id);
        top[i] = (zrt_sample_cand){(int32_t)id, f, 0};
    }
    *n = t[0];
    return ZOK;
}

/* Schedule ph's dispatches for a step of n rows (the step buffer written),
 * with a timestamp after each: ns[i] the time of dispatch i. */
static zstatus timed_run(zrt *r, zplan_phase ph, int n, double *ns, zdiag *d) {
    const zplan_schedule *sc = &r->plan->sched[ph];
    zvk_timer tm = {0};
    zvk_cmd c = {0};
    double *t = calloc(sc->count + 1, sizeof *t);
    r->steps++; /* its top-k rows are nobody's */
    zstatus s =
        t ? zvk_timer_create(&r->dev, sc->count + 1, &tm, d) : zdiag_set(d, ZE_NOMEM, "out of memory");
    if (!s) s = record(r, ph, n, &c, &tm, d);
    if (!s) s = zvk_cmd_submit_wait(&r->dev, &c, d);
    if (!s) s = zvk_timer_read(&r->dev, &tm, t, d);
    for (uint32_t i = 0; !s && i < sc->count; i++)
        ns[i] = t[i + 1] - t[i];
    zvk_cmd_release(&r->dev, &c);
    zvk_timer_destroy(&r->dev, &tm);
    free(t);
    return s;
}

zstatus zrt_profile(zrt *r, zplan_phase ph, const int32_t *tokens, int n, double *ns, zdiag *d) {
    zstatus s = check_step(r, ph, tokens, n, d);
    if (s) return s;
    if (!r->dev.prof.timestamps)
        return zdiag_set(d, ZE_UNSUPPORTED, "device '%s' has no timestamps", r->dev.prof.name);
    write_step(r, tokens, n, false);
    return timed_run(r, ph, n, ns, d);
}

zstatus zrt_profile_batch(zrt *r, zrt_seq *const *seqs, const int32_t *tokens, int n, double *ns, zdiag *d) {
    zstatus s = check_batch(r, seqs, tokens, n, d);
    if (s) return s;
    if (!r->dev.prof.timestamps)
        return zdiag_set(d, ZE_UNSUPPORTED, "device '%s' has no timestamps", r->dev.prof.name);
    write_batch_step(r, seqs, tokens, n);
    zrt_seq *was = r->cur; /* the batch dispatches bind every slot: the zrt's own sets */
    r->cur = &r->main;
    s = timed_run(r, ZPLAN_BATCH, n, ns, d);
    r->cur = was;
    return s;
}

int zrt_batch_rows(const zrt *r) {
    return r->plan->sched[ZPLAN_BATCH].count ? (int)r->plan->sched[ZPLAN_BATCH].max_tokens : 0;
}
