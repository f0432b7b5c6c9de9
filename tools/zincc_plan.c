#include "zincc_plan.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

static void progress(void *ctx, int done, int total) {
    (void)ctx, (void)total;
    fprintf(stderr, "\rzincc: compiled %d kernels", done);
}

zstatus zincc_write_plan(const gguf_file *f, zir_graph *const g[ZPLAN_PHASES], const zincc_plan_opts *o,
                         zdiag *d) {
    /* The executor finds the weights from any directory: record an absolute path. */
    char abs[PATH_MAX];
    const char *path = realpath(f->path, abs) ? abs : f->path;
    zlower_opts lo = {.target = o->target,
                      .max_tokens = o->chunk,
                      .ctx = o->ctx,
                      .act_f16 = false,
                      .gguf_path = path,
                      .gguf_base = f->base,
                      .gguf_size = f->size,
                      .gguf_hash = gguf_identity_hash(f),
                      .device_name = o->device ? o->device->name : "",
                      .vendor_id = o->device ? o->device->vendor_id : 0,
                      .device_id = o->device ? o->device->device_id : 0,
                      .progress = o->progress ? progress : NULL};
    zplan *p = NULL;
    zstatus s = zlower(g, &lo, &p, d);
    if (o->progress) fputc('\n', stderr);
    if (!s) s = zplan_write(p, o->out, d);
    if (!s)
        fprintf(stderr, "zincc: wrote %s: %u kernels, %u + %u dispatches (prefill + decode), ctx %u\n",
                o->out, p->n_kernels, p->sched[ZPLAN_PREFILL].count, p->sched[ZPLAN_DECODE].count, p->ctx);
    zplan_free(p);
    return s;
}
