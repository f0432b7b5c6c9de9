/* libFuzzer harness: zincc's front half on an arbitrary GGUF, as zincc runs
 * it: gguf_parse -> zir_build_from_gguf -> zir_verify -> the default pass
 * pipeline with the verifier after every pass, for one target and phase.
 *
 * The target (llvmpipe, h200, rdna4, generic) and the phase come from a
 * hash of the input, so each input always takes the same path. A builder or
 * a pass may refuse a model (with one line); if it accepts one, the verifier
 * must accept every graph the passes make: a verifier failure after a pass
 * is a bug of that pass, not of the input, and aborts. Seeds: tiny models
 * from `zinc mkmodel` (scripts/fuzz.sh). */
#include <string.h>

#include "../frontend/arch.h"
#include "../passes/pass.h"
#include "common.h"

static const char *const targets[] = {"llvmpipe", "h200", "rdna4", "generic"};

/* What zincc assumes: 4096 positions, or the training context if smaller. */
static int64_t context(const zir_graph *g) {
    int64_t n = g->hp.n_ctx_train;
    return n > 0 && n < 4096 ? n : 4096;
}

static void compile(const gguf_file *f, uint64_t h) {
    zir_graph *g = NULL;
    zdiag d = {0};
    zstatus s = zir_build_from_gguf(f, &g, &d);
    fz_check(s, &d, "zir_build_from_gguf");
    if (s) {
        if (g) fz_fail("zir_build_from_gguf failed but returned a graph");
        return;
    }
    s = zir_verify(g, &d);
    if (s) fz_fail("the builder made a graph the verifier rejects: %s", d.msg);
    const ztarget *t = ztarget_find(targets[h % 4]);
    if (!t) fz_fail("no target profile '%s'", targets[h % 4]);
    zpass_opts o = {.target = t,
                    .phase = (h >> 8) & 1 ? ZPH_DECODE : ZPH_PREFILL,
                    .token_tile = t->prefill_tile,
                    .ctx = context(g),
                    .fuse_threshold = t->fuse_threshold,
                    .verify_each = true,
                    .print_to = fz_null()};
    s = zpass_run_pipeline(g, zpass_default_pipeline(), NULL, &o, &d);
    fz_check(s, &d, "zpass_run_pipeline");
    /* A model a pass cannot handle is refused with a reason; a graph a pass
     * broke (the verifier after it fails) or an internal error is a bug. */
    if (s == ZE_INTERNAL || strstr(d.msg, "IR invalid after pass")) fz_fail("pass pipeline: %s", d.msg);
    if (!s) zir_print(g, fz_null());
    if (!s && fz_debug()) fprintf(stderr, "fuzz: compiled for %s, %s\n", t->name, zpass_phase_name(o.phase));
    zir_graph_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = NULL;
    zdiag d = {0};
    zstatus s = gguf_parse(data, size, "fuzz.gguf", &f, &d);
    fz_check(s, &d, "gguf_parse");
    if (s) return 0;
    compile(f, fz_fnv1a(data, size < 64 ? size : 64) ^ size);
    gguf_close(f);
    return 0;
}
