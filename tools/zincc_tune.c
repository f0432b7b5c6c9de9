#include "zincc_tune.h"

#include <stdio.h>
#include <string.h>

#include "../backend/tune.h"

typedef struct table {
    double default_us;
    char key[96];
} table;

/* One line per layout, then the winner against codegen's default. */
static void row(void *ctx, const zvk_tune_row *r) {
    table *t = ctx;
    if (r->best) {
        double gain = t->default_us > 0 ? 100 * (t->default_us / r->us - 1) : 0;
        fprintf(stderr, "  -> %s: %.1f us, %.0f GB/s (%+.0f%% against the default)\n", r->name, r->us, r->gbs,
                gain);
        t->default_us = 0;
        return;
    }
    if (strcmp(t->key, r->key)) fprintf(stderr, "  %s\n", r->key);
    snprintf(t->key, sizeof t->key, "%s", r->key);
    if (r->is_default) t->default_us = r->us;
    char regs[32] = "";
    if (r->regs >= 0) snprintf(regs, sizeof regs, "%lld regs", (long long)r->regs);
    if (r->is_default)
        fprintf(stderr, "     %-36s %9.1f us %7.0f GB/s %9s  (default)\n", r->name, r->us, r->gbs, regs);
    else if (r->layout.bm)
        fprintf(stderr, "     tokens %d, subgroups %d%-22s %9.1f us %7.0f GB/s %9s\n", r->layout.bm, r->layout.nsg, "",
                r->us, r->gbs, regs);
    else
        fprintf(stderr, "     rows %d, groups %d, subgroups %d%-10s%-9s %9.1f us %7.0f GB/s %9s\n", r->layout.rs,
                r->layout.unroll, r->layout.nsg, r->layout.restrict_w ? ", restrict" : "",
                r->layout.x_shared < 0 ? ", x in L1" : "", r->us, r->gbs, regs);
}

zstatus zincc_tune(const char *device, const zir_graph *decode, const zir_graph *prefill, int64_t chunk,
                   const ztarget *t, int64_t ctx, zarena *a, zcg_tuning *out, zdiag *d) {
    zvk_instance inst = {0};
    zvk_device dev = {0};
    uint32_t idx;
    table tab = {0};
    /* Copies of each kernel's weights that add up to 256 MiB, more than any
     * GPU's L2, so that every dispatch streams its weights from VRAM as in a
     * decode step; 0.3 s of each candidate first, as zinc bench warms. */
    zvk_tune_opts o = {.target = t,
                       .ctx = ctx,
                       .ring_bytes = 256u << 20,
                       .warm_s = 0.3,
                       .report = row,
                       .report_ctx = &tab};
    zstatus s = zvk_instance_create(&inst, d);
    if (!s) s = zvk_select_device(&inst, device, &idx, d);
    if (!s) s = zvk_device_create(&inst, idx, &dev, d);
    /* A CPU device (llvmpipe) says nothing about any GPU: three layouts keep
     * --tune quick there, where it only shows that the path works. */
    static const zcg_gemv few[] = {{1, 1, 4, 0}, {2, 1, 1, 0}, {4, 1, 4, 1}};
    if (!s && dev.prof.type == VK_PHYSICAL_DEVICE_TYPE_CPU)
        o.candidates = few, o.n_candidates = 3, o.ring_bytes = 1u << 20, o.warm_s = 0;
    if (!s)
        fprintf(stderr,
                "zincc: tuning the %s on %s (%s; each warmed %.1f s, then the median of 15 runs of "
                "dispatches behind barriers, round copies of its weights of %u MiB in all)\n",
                decode && prefill ? "decode GEMVs and the prefill GEMMs" : decode ? "decode GEMVs" : "prefill GEMMs",
                dev.prof.name, o.candidates && decode ? "3 layouts on a CPU device" : "every layout", o.warm_s,
                (unsigned)(o.ring_bytes >> 20));
    memset(out, 0, sizeof *out);
    if (!s && decode) s = zvk_tune_gemv(&dev, decode, &o, a, out, d);
    /* The prefill GEMMs on the matrix units (none on a device without
     * them), their own candidates, at the plan's chunk. */
    int before = out->n;
    o.candidates = NULL, o.n_candidates = 0;
    if (!s && prefill) s = zvk_tune_gemm(&dev, prefill, chunk, &o, a, out, d);
    if (!s && prefill)
        fprintf(stderr, "zincc: %d prefill GEMM%s on the matrix units tuned at %lld tokens a step\n", out->n - before,
                out->n - before == 1 ? "" : "s", (long long)chunk);
    if (dev.device) zvk_device_destroy(&dev);
    zvk_instance_destroy(&inst);
    if (s) zdiag_prefix(d, "--tune");
    return s;
}
