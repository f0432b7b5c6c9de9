#include "zincc_plan.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "../frontend/arch.h"
#include "../passes/pass.h"

static void progress(void *ctx, int done, int total) {
    (void)ctx, (void)total;
    fprintf(stderr, "\rzincc: compiled %d kernels", done);
}

int64_t zincc_default_ctx(const gguf_file *f) {
    zir_hparams hp;
    zdiag ignore = {0};
    if (zir_read_hparams(f, &hp, &ignore) || hp.n_ctx_train <= 0) return 4096;
    return hp.n_ctx_train < 4096 ? hp.n_ctx_train : 4096;
}

void zincc_check_ctx(const char *prog, const gguf_file *f, int64_t ctx) {
    zir_hparams hp;
    zdiag ignore = {0};
    if (zir_read_hparams(f, &hp, &ignore) || hp.n_ctx_train <= 0 || ctx <= hp.n_ctx_train) return;
    fprintf(stderr,
            "%s: warning: a context of %lld tokens is more than the %lld the model was trained for; "
            "expect worse text past it\n",
            prog, (long long)ctx, (long long)hp.n_ctx_train);
}

int64_t zincc_default_chunk(int64_t ctx) {
    return ctx < 512 ? ctx : 512;
}

zstatus zincc_batch_graph(const gguf_file *f, const zpass_opts *prefill, int64_t parallel, const char *passes,
                          const char *disabled, zir_graph **out, zdiag *d) {
    zpass_opts po = *prefill;
    po.phase = ZPH_PREFILL;
    po.batch_rows = parallel;
    po.report = NULL;
    po.print_after = NULL;
    zstatus s = zir_build_from_gguf(f, out, d);
    if (!s) s = zpass_run_pipeline(*out, passes, disabled, &po, d);
    if (s) zdiag_prefix(d, "batch schedule (--parallel %lld)", (long long)parallel);
    return s;
}

zstatus zincc_lower_plan(const gguf_file *f, zir_graph *const g[ZPLAN_PHASES], const zincc_plan_opts *o,
                         zplan **out, zdiag *d) {
    /* The executor finds the weights from any directory: record an absolute path. */
    char abs[PATH_MAX];
    const char *path = realpath(f->path, abs) ? abs : f->path;
    zlower_opts lo = {.target = o->target,
                      .max_tokens = o->chunk,
                      .ctx = o->ctx,
                      /* ZINC_ACT_F16=1: every activation stored as fp16, a measurement of
                       * what halving the activations' bytes buys (the executor reads logits
                       * as fp32, so its tokens are noise); never a plan's default. */
                      .act_f16 = getenv("ZINC_ACT_F16") && !strcmp(getenv("ZINC_ACT_F16"), "1"),
                      .parallel = o->parallel,
                      .gguf_path = path,
                      .gguf_base = f->base,
                      .gguf_size = f->size,
                      .gguf_hash = gguf_identity_hash(f),
                      .device_name = o->device ? o->device->name : "",
                      .vendor_id = o->device ? o->device->vendor_id : 0,
                      .device_id = o->device ? o->device->device_id : 0,
                      .tuning = o->tuning,
                      .batch = o->batch,
                      .progress = o->progress ? progress : NULL};
    *out = NULL;
    zstatus s = zlower(g, &lo, out, d);
    if (o->progress) fputc('\n', stderr);
    return s;
}

void zincc_print_summary(const char *prog, const char *verb, const char *path, const zplan *p) {
    fprintf(stderr, "%s: %s %s: %u kernels, %u + %u dispatches (prefill + decode), ctx %u", prog, verb, path,
            p->n_kernels, p->sched[ZPLAN_PREFILL].count, p->sched[ZPLAN_DECODE].count, p->ctx);
    if (p->sched[ZPLAN_BATCH].count)
        fprintf(stderr, ", %u sequence slots, batch of %u: %u dispatches", p->n_seqs,
                p->sched[ZPLAN_BATCH].max_tokens, p->sched[ZPLAN_BATCH].count);
    fputc('\n', stderr);
}

zstatus zincc_write_plan(const gguf_file *f, zir_graph *const g[ZPLAN_PHASES], const zincc_plan_opts *o,
                         zdiag *d) {
    zplan *p = NULL;
    zstatus s = zincc_lower_plan(f, g, o, &p, d);
    if (!s) s = zplan_write(p, o->out, d);
    if (!s) zincc_print_summary(o->prog ? o->prog : "zincc", "wrote", o->out, p);
    zplan_free(p);
    return s;
}

zstatus zincc_compile(const gguf_file *f, const zincc_plan_opts *o, zplan **out, zdiag *d) {
    zir_graph *g[ZPLAN_PHASES] = {0}, *batch = NULL;
    const zpass_phase phase[ZPLAN_PHASES] = {[ZPLAN_PREFILL] = ZPH_PREFILL, [ZPLAN_DECODE] = ZPH_DECODE};
    zstatus s = ZOK;
    zpass_opts po[ZPLAN_PHASES];
    for (int i = 0; i < ZPLAN_PHASES && !s; i++) {
        po[i] = (zpass_opts){.target = o->target,
                             .phase = phase[i],
                             .token_tile = o->target->prefill_tile,
                             .ctx = o->ctx,
                             .fuse_threshold = o->target->fuse_threshold,
                             .print_to = stderr,
                             .step_tokens = o->chunk};
        s = zir_build_from_gguf(f, &g[i], d);
        if (!s) s = zpass_run_pipeline(g[i], NULL, NULL, &po[i], d);
    }
    if (!s && o->parallel) s = zincc_batch_graph(f, &po[ZPLAN_PREFILL], o->parallel, NULL, NULL, &batch, d);
    zincc_plan_opts with = *o;
    with.batch = batch;
    if (!s) s = zincc_lower_plan(f, g, &with, out, d);
    for (int i = 0; i < ZPLAN_PHASES; i++)
        zir_graph_free(g[i]);
    zir_graph_free(batch);
    return s;
}
