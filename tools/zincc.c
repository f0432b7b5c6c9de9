/* zincc: the compiler driver. Reads a GGUF, builds the tensor IR once per
 * phase (prefill and decode), runs the pass pipeline on each and reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../frontend/arch.h"
#include "../passes/pass.h"
#include "cli.h"

static const char *const usage =
    "usage: zincc MODEL.gguf [options]\n"
    "\n"
    "zincc compiles a GGUF model into a plan for one Vulkan device. The model is\n"
    "compiled twice, for prefill (token tiles) and for decode (one token).\n"
    "\n"
    "  --dump-ir              print the tensor IR as built from the GGUF, before any pass, and stop\n"
    "  --target NAME          cost-model profile: llvmpipe, h200, rdna4, generic (default: generic)\n"
    "  --phase prefill|decode compile only this phase (default: both)\n"
    "  --passes=a,b,c         run exactly these passes in this order (default: the standard pipeline)\n"
    "  --disable-pass=a,b     skip these passes\n"
    "  --print-after=a,b|all  print the IR after these passes\n"
    "  --verify-each          run the IR verifier after every pass\n"
    "  --fuse-threshold=B     bytes per token per layer a fusion must save (default: the target's)\n"
    "  --tile=N               prefill token tile (default: the target's)\n"
    "  --ctx=N                context length the analyses assume (default: 4096 or the model's)\n"
    "  --list-passes          list the registered passes\n"
    "  --help                 this text\n"
    "\n"
    "Supported architectures: qwen3, qwen2, llama. Weights: f32, f16, bf16, q8_0, q4_K, q5_K, q6_K.\n";

typedef struct zincc_opts {
    const char *model, *target, *passes, *disabled, *print_after, *phase;
    bool dump_ir, verify_each, list;
    double threshold;
    int64_t tile, ctx;
} zincc_opts;

static int parse_value(int argc, char **argv, int *i, zincc_opts *o, bool *matched) {
    const char *v = NULL;
    bool miss = false;
    *matched = true;
    if (cli_opt(argc, argv, i, "--target", &v, &miss))
        o->target = v;
    else if (cli_opt(argc, argv, i, "--passes", &v, &miss))
        o->passes = v;
    else if (cli_opt(argc, argv, i, "--disable-pass", &v, &miss))
        o->disabled = v;
    else if (cli_opt(argc, argv, i, "--print-after", &v, &miss))
        o->print_after = v;
    else if (cli_opt(argc, argv, i, "--phase", &v, &miss)) {
        if (!miss && strcmp(v, "prefill") && strcmp(v, "decode"))
            return cli_usage_error("zincc", "--phase expects prefill or decode");
        o->phase = v;
    } else if (cli_opt(argc, argv, i, "--fuse-threshold", &v, &miss)) {
        float f;
        if (!miss && (!cli_parse_f32(v, &f) || f < 0))
            return cli_usage_error("zincc", "--fuse-threshold expects a number of bytes");
        o->threshold = miss ? 0 : f;
    } else if (cli_opt(argc, argv, i, "--tile", &v, &miss)) {
        if (!miss && !cli_parse_i64(v, 1, 4096, &o->tile))
            return cli_usage_error("zincc", "--tile expects 1..4096");
    } else if (cli_opt(argc, argv, i, "--ctx", &v, &miss)) {
        if (!miss && !cli_parse_i64(v, 1, 1 << 24, &o->ctx))
            return cli_usage_error("zincc", "--ctx expects 1..16777216");
    } else
        *matched = false;
    if (miss) return cli_usage_error("zincc", "%s needs a value", argv[*i]);
    return 0;
}

static int parse(int argc, char **argv, zincc_opts *o) {
    for (int i = 1; i < argc; i++) {
        bool matched;
        int rc = parse_value(argc, argv, &i, o, &matched);
        if (rc) return rc;
        if (matched) continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            exit(0);
        } else if (!strcmp(argv[i], "--dump-ir"))
            o->dump_ir = true;
        else if (!strcmp(argv[i], "--verify-each"))
            o->verify_each = true;
        else if (!strcmp(argv[i], "--list-passes"))
            o->list = true;
        else if (argv[i][0] == '-' || o->model)
            return cli_usage_error("zincc", "unexpected argument '%s'", argv[i]);
        else
            o->model = argv[i];
    }
    if (!o->model && !o->list) return cli_usage_error("zincc", "no model given");
    return 0;
}

static void list_passes(void) {
    for (int i = 0; i < zpass_count(); i++) {
        const zpass_info *p = zpass_at(i);
        printf("%-14s %-9s %s%s\n", p->name, p->kind == ZPK_ANALYSIS ? "analysis" : "transform", p->summary,
               p->in_default ? "" : " (not in the default pipeline)");
    }
}

/* Builds and compiles one phase; the graph is returned for the report. */
static zstatus compile_phase(const gguf_file *f, const zincc_opts *z, zpass_opts *po, zir_graph **out,
                             zdiag *d) {
    zstatus s = zir_build_from_gguf(f, out, d);
    if (!s) s = zpass_run_pipeline(*out, z->passes, z->disabled, po, d);
    return s;
}

int main(int argc, char **argv) {
    zincc_opts z = {.target = "generic", .threshold = -1};
    int rc = parse(argc, argv, &z);
    if (rc) return rc;
    if (z.list) {
        list_passes();
        return 0;
    }
    const ztarget *t = ztarget_find(z.target);
    if (!t)
        return cli_usage_error("zincc", "unknown target '%s': expected one of %s", z.target, ztarget_names());
    zdiag d = {0};
    gguf_file *f = NULL;
    zir_graph *g[ZPH_COUNT] = {0};
    zpass_report rep = {.arena = zarena_new()};
    zstatus s = rep.arena ? gguf_open(z.model, &f, &d) : zdiag_set(&d, ZE_NOMEM, "out of memory");
    if (!s && z.dump_ir) {
        s = zir_build_from_gguf(f, &g[0], &d);
        if (!s) zir_print(g[0], stdout);
    }
    for (int ph = 0; ph < ZPH_COUNT && !s && !z.dump_ir; ph++) {
        if (z.phase && strcmp(z.phase, zpass_phase_name((zpass_phase)ph))) continue;
        zpass_opts po = {.target = t,
                         .phase = (zpass_phase)ph,
                         .token_tile = z.tile ? (int)z.tile : t->prefill_tile,
                         .ctx = z.ctx ? z.ctx : 4096,
                         .fuse_threshold = z.threshold >= 0 ? z.threshold : t->fuse_threshold,
                         .verify_each = z.verify_each,
                         .print_after = z.print_after,
                         .print_to = stdout,
                         .report = &rep};
        s = compile_phase(f, &z, &po, &g[ph], &d);
    }
    for (int ph = 0; ph < ZPH_COUNT; ph++)
        zir_graph_free(g[ph]);
    zarena_free(rep.arena);
    gguf_close(f);
    return s ? cli_fail("zincc", &d) : 0;
}
