/* zincc: the compiler driver. Reads a GGUF, builds the tensor IR once per
 * phase (prefill and decode), runs the pass pipeline on each and reports. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../frontend/arch.h"
#include "../passes/cost.h"
#include "../passes/match.h"
#include "../passes/pass.h"
#include "../backend/target_vk.h"
#include "../ir/fileio.h"
#include "../passes/report.h"
#include "cli.h"
#include "zincc_tune.h"
#include "version.h"
#include "zincc_plan.h"

static const char *const usage =
    "usage: zincc MODEL.gguf [-o MODEL.zplan] [options]\n"
    "\n"
    "zincc compiles a GGUF model into a plan for one Vulkan device. The model is\n"
    "compiled twice, for prefill (token tiles) and for decode (one token). Without\n"
    "-o the plan goes beside the GGUF (model.gguf -> model.zplan), unless a view is\n"
    "asked for (--dump-ir, --report, --emit, --phase, --print-after, --list-passes).\n"
    "\n"
    "  -o FILE                write the plan here (run it with: zinc run FILE)\n"
    "  --device N             with --target device: the Vulkan device to compile for (see zinc devices)\n"
    "  --chunk N              most tokens in one prefill step (default: 512, at most the context)\n"
    "  --parallel N           N sequence slots in the KV cache (--ctx positions each) and a batch decode\n"
    "                         schedule that advances up to N sequences in one step, one token each\n"
    "                         (zinc serve --parallel, zinc bench --parallel; docs/server.md)\n"
    "  --kv-type f16|f32      KV-cache storage (default: f16 on GPUs, f32 on llvmpipe), like llama.cpp's "
    "-ctk/-ctv\n"
    "  --matmul f16|f32       prefill matmul operands (default: f16 where the target has matrix units,\n"
    "                         which multiply fp16 and sum fp32; f32 keeps fp32 math on the scalar units)\n"
    "  --gemv-x int8|f32      decode GEMV activations (default: int8 where the target's packed integer dot\n"
    "                         products are fast, as on the H200: x rounded to 8 bits per 32, as llama.cpp\n"
    "                         rounds them; f32 keeps fp32 math)\n"
    "  --tune[=prefill|decode]\n"
    "                         with -o and --target device: time the layouts of each decode GEMV and of\n"
    "                         each prefill GEMM on the matrix units on the device, and compile the\n"
    "                         fastest (a table on stderr); =prefill or =decode times one phase's. Each\n"
    "                         kernel is timed alone (run 74: the 8B-wide GEMMs' picks 6-13 % faster\n"
    "                         one by one); compare the plans with zinc bench (docs/performance.md)\n"
    "  --dump-ir              print the tensor IR as built from the GGUF, before any pass, and stop\n"
    "  --target NAME          device, or a named profile: llvmpipe, h200, rdna4, generic\n"
    "                         (default: device with -o, generic otherwise)\n"
    "  --phase prefill|decode compile only this phase (default: both)\n"
    "  --passes=a,b,c         run exactly these passes in this order (default: the standard pipeline)\n"
    "  --disable-pass=a,b     skip these passes\n"
    "  --print-after=a,b|all  print the IR after these passes\n"
    "  --verify-each          run the IR verifier after every pass\n"
    "  --fuse-threshold=B     bytes per token per layer a fusion must save (default: the target's)\n"
    "  --tile=N               prefill token tile (default: the target's)\n"
    "  --ctx=N                KV-cache capacity, also the context the analyses assume\n"
    "                         (default: 4096, or the model's training context if smaller)\n"
    "  --report [text|json]   per phase and layer: what crosses VRAM before and after fusion, the\n"
    "                         decisions and their arithmetic, then totals (docs/report.md)\n"
    "  --emit=dot             draw the fused graph of one phase (--phase, default decode) for graphviz\n"
    "  --emit-out FILE        write the drawing to FILE instead of stdout\n"
    "  --dot-weights          draw weights too (one box each: large graphs)\n"
    "  --list-passes          list the registered passes\n"
    "  --version              print zincc's version and the plan format it writes\n"
    "  --help                 this text\n"
    "\n"
    "Supported architectures: qwen3, qwen2, llama, qwen3moe, qwen35, qwen35moe. Weights: f32, f16, bf16,\n"
    "q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q4_K, q5_K, q6_K, iq4_xs.\n";

typedef struct zincc_opts {
    const char *model, *target, *passes, *disabled, *print_after, *phase;
    const char *report, *emit, *emit_out; /* report: "text" or "json"; emit: "dot" */
    const char *out, *device;
    bool dump_ir, verify_each, list, dot_weights;
    int tune; /* bits: 1 the prefill GEMMs, 2 the decode GEMVs */
    double threshold;
    int64_t tile, ctx, chunk, parallel;
    zpass_kv kv_type;
    zpass_mm mm_type;
    zpass_idot gemv_x;
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
    } else if (cli_opt(argc, argv, i, "--emit", &v, &miss)) {
        if (!miss && strcmp(v, "dot")) return cli_usage_error("zincc", "--emit expects dot");
        o->emit = v;
    } else if (cli_opt(argc, argv, i, "--emit-out", &v, &miss)) {
        o->emit_out = v;
    } else if (cli_opt(argc, argv, i, "-o", &v, &miss)) {
        o->out = v;
    } else if (cli_opt(argc, argv, i, "--kv-type", &v, &miss)) {
        if (!miss && strcmp(v, "f16") && strcmp(v, "f32"))
            return cli_usage_error("zincc", "--kv-type expects f16 or f32, not '%s'", v);
        if (!miss) o->kv_type = strcmp(v, "f16") ? ZKV_F32 : ZKV_F16;
    } else if (cli_opt(argc, argv, i, "--matmul", &v, &miss)) {
        if (!miss && strcmp(v, "f16") && strcmp(v, "f32"))
            return cli_usage_error("zincc", "--matmul expects f16 or f32, not '%s'", v);
        if (!miss) o->mm_type = strcmp(v, "f16") ? ZMM_F32 : ZMM_F16;
    } else if (cli_opt(argc, argv, i, "--gemv-x", &v, &miss)) {
        if (!miss && strcmp(v, "int8") && strcmp(v, "f32"))
            return cli_usage_error("zincc", "--gemv-x expects int8 or f32, not '%s'", v);
        if (!miss) o->gemv_x = strcmp(v, "int8") ? ZIDOT_OFF : ZIDOT_ON;
    } else if (cli_opt(argc, argv, i, "--device", &v, &miss)) {
        o->device = v;
    } else if (cli_opt(argc, argv, i, "--chunk", &v, &miss)) {
        if (!miss && !cli_parse_i64(v, 1, 65536, &o->chunk))
            return cli_usage_error("zincc", "--chunk expects 1..65536");
    } else if (cli_opt(argc, argv, i, "--parallel", &v, &miss)) {
        if (!miss && !cli_parse_i64(v, 1, ZPLAN_MAX_SEQS, &o->parallel))
            return cli_usage_error("zincc", "--parallel expects 1..%d sequences", ZPLAN_MAX_SEQS);
    } else if (cli_opt(argc, argv, i, "--ctx", &v, &miss)) {
        if (!miss && !cli_parse_i64(v, 1, 1 << 24, &o->ctx))
            return cli_usage_error("zincc", "--ctx expects 1..16777216");
    } else
        *matched = false;
    if (miss) return cli_usage_error("zincc", "%s needs a value", argv[*i]);
    return 0;
}

static bool is_view(const zincc_opts *o);

static int parse(int argc, char **argv, zincc_opts *o) {
    for (int i = 1; i < argc; i++) {
        bool matched;
        int rc = parse_value(argc, argv, &i, o, &matched);
        if (rc) return rc;
        if (matched) continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            exit(0);
        } else if (!strcmp(argv[i], "--version")) {
            printf("zincc %s (plan format %d.%d)\n", ZINC_VERSION, ZPLAN_VERSION_MAJOR, ZPLAN_VERSION_MINOR);
            exit(0);
        } else if (!strcmp(argv[i], "--dump-ir"))
            o->dump_ir = true;
        else if (!strcmp(argv[i], "--verify-each"))
            o->verify_each = true;
        else if (!strcmp(argv[i], "--list-passes"))
            o->list = true;
        else if (!strcmp(argv[i], "--dot-weights"))
            o->dot_weights = true;
        else if (!strcmp(argv[i], "--tune"))
            o->tune = 3;
        else if (!strncmp(argv[i], "--tune=", 7)) {
            /* one phase's kernels: prefill (the GEMMs), decode (the GEMVs) */
            o->tune = !strcmp(argv[i] + 7, "prefill") ? 1 : !strcmp(argv[i] + 7, "decode") ? 2 : 0;
            if (!o->tune) return cli_usage_error("zincc", "--tune= expects prefill or decode, not '%s'", argv[i] + 7);
        }
        else if (!strcmp(argv[i], "--report") || !strncmp(argv[i], "--report=", 9)) {
            o->report = argv[i][8] ? argv[i] + 9 : "text";
            /* --report json, spaced like --emit dot: the format is optional, so only these two words */
            if (!argv[i][8] && i + 1 < argc && (!strcmp(argv[i + 1], "json") || !strcmp(argv[i + 1], "text")))
                o->report = argv[++i];
            if (strcmp(o->report, "text") && strcmp(o->report, "json"))
                return cli_usage_error("zincc", "--report expects text or json, not '%s'", o->report);
        } else if (argv[i][0] == '-' || o->model)
            return cli_usage_error("zincc", "unexpected argument '%s'", argv[i]);
        else
            o->model = argv[i];
    }
    if (!o->model && !o->list) return cli_usage_error("zincc", "no model given");
    if (o->report && o->emit && !o->emit_out)
        return cli_usage_error("zincc", "--report and --emit both write to stdout: give --emit-out FILE");
    if (o->emit_out && !o->emit) return cli_usage_error("zincc", "--emit-out needs --emit=dot");
    if (o->out && (o->phase || o->dump_ir))
        return cli_usage_error("zincc", "-o compiles both phases: drop --phase and --dump-ir");
    if (o->tune && (o->phase || o->dump_ir || is_view(o) || (o->target && strcmp(o->target, "device"))))
        return cli_usage_error("zincc", "--tune times kernels on the device it compiles for: use it with -o "
                                        "(or no view) and --target device");
    return 0;
}

/* Without -o and without a view, the plan goes beside the GGUF, as
 * model.zplan: the invocation the design shows (zincc model.gguf). */
static bool is_view(const zincc_opts *o) {
    return o->dump_ir || o->report || o->emit || o->phase || o->print_after || o->list;
}

static char *default_out(const char *model) {
    size_t n = strlen(model);
    if (n > 5 && !strcmp(model + n - 5, ".gguf")) n -= 5;
    char *out = malloc(n + 7);
    if (out) memcpy(out, model, n), strcpy(out + n, ".zplan");
    return out;
}

static void list_passes(void) {
    for (int i = 0; i < zpass_count(); i++) {
        const zpass_info *p = zpass_at(i);
        printf("%-14s %-9s %s%s\n", p->name, p->kind == ZPK_ANALYSIS ? "analysis" : "transform", p->summary,
               p->in_default ? "" : " (not in the default pipeline)");
    }
}

/* What one phase leaves for the report and the drawing. */
typedef struct phase_out {
    zpass_opts po;
    zir_graph *fused, *staged;
    zpass_mat before, after;
} phase_out;

/* The phase --emit draws; the phases that are compiled. */
static const char *emit_phase(const zincc_opts *z) {
    return z->phase ? z->phase : "decode";
}
static bool compiles(const zincc_opts *z, zpass_phase ph) {
    const char *want = z->phase ? z->phase : z->emit && !z->report ? emit_phase(z) : NULL;
    return !want || !strcmp(want, zpass_phase_name(ph));
}

/* Builds and compiles one phase; for --report also the staged partition
 * (analyses only), and for --report/--emit the materialization of each. */
static zstatus compile_phase(const gguf_file *f, const zincc_opts *z, phase_out *p, zarena *a, zdiag *d) {
    zstatus s = zir_build_from_gguf(f, &p->fused, d);
    if (!s) s = zpass_run_pipeline(p->fused, z->passes, z->disabled, &p->po, d);
    if (!s && (z->report || z->emit)) s = zpass_materialize(p->fused, &p->po, a, &p->after, d);
    if (s || !z->report) return s;
    zpass_opts staged = p->po;
    staged.report = NULL;
    staged.print_after = NULL;
    s = zir_build_from_gguf(f, &p->staged, d);
    if (!s) s = zpass_run_pipeline(p->staged, "shape,width", NULL, &staged, d);
    if (!s) s = zpass_materialize(p->staged, &staged, a, &p->before, d);
    if (s) zdiag_prefix(d, "report: staged %s partition", zpass_phase_name(p->po.phase));
    return s;
}

static zstatus write_report(const zincc_opts *z, const phase_out *ph, const zpass_report *rep, zdiag *d) {
    const zpass_opts *po = ph[ZPH_PREFILL].fused ? &ph[ZPH_PREFILL].po : &ph[ZPH_DECODE].po;
    zpass_rep r = {.model = z->model,
                   .pipeline = z->passes,
                   .target = po->target,
                   .fuse_threshold = po->fuse_threshold,
                   .ctx = po->ctx,
                   .decisions = rep};
    for (int i = 0; i < ZPH_COUNT; i++)
        if (ph[i].fused)
            r.ph[i] = (zpass_rep_phase){.present = true,
                                        .fused = ph[i].fused,
                                        .before = ph[i].before,
                                        .after = ph[i].after,
                                        .token_tile = i == ZPH_DECODE ? 1 : ph[i].po.token_tile};
    return !strcmp(z->report, "json") ? zpass_rep_json(&r, stdout, d) : zpass_rep_text(&r, stdout, d);
}

/* What the batch graph fused, counted from it: the matmul kernels (those
 * with int8 x), the rows GEMVs (fuse-qkv), the norms in a prologue and
 * those left as kernels of their own. */
typedef struct batch_census {
    int matmuls, q8, f16, rows, segs, norm_in, norm_alone, layers;
} batch_census;

static batch_census count_batch(const zir_graph *g) {
    batch_census c = {.layers = (int)g->hp.n_layer};
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const zir_node *n = g->nodes[i];
        const zir_node *head = n->op == ZOP_KERNEL ? n->body[0] : n;
        bool norm = zir_ops[head->op].kind == ZK_NORM && (zir_ops[head->op].flags & ZF_W1);
        bool mm = zpass_gemv_node(n);
        c.matmuls += mm;
        c.q8 += mm && zpass_gemv_q8(n);
        c.f16 += mm && zpass_gemv_f16(n);
        bool rows = n->op == ZOP_KERNEL && n->kp.tmpl == ZKT_MATMUL_ROWS;
        c.rows += rows;
        for (int j = 0; rows && j < n->n_body; j++)
            c.segs += n->body[j]->op == ZOP_MATMUL;
        c.norm_in += norm && n->op == ZOP_KERNEL && n->kp.tmpl != ZKT_NONE && n->n_body > 1 &&
                     zir_ops[n->body[1]->op].kind == ZK_MATMUL;
        c.norm_alone += norm && n->op != ZOP_KERNEL && n->out->rank == 2;
    }
    return c;
}

/* The batch schedule's price (--parallel N): a decode step streams the
 * weights once whatever its rows, so each of N rows carries 1/N of them;
 * what grows with the rows is activations and attention over each row's
 * own cache. Then what its own graph fused. */
static void report_batch(const zincc_opts *z, const ztarget *t, const gguf_file *f, const zir_graph *batch) {
    double w = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        w += (double)f->tensors[i].nbytes;
    printf(
        "\nbatch decode (--parallel %lld): its own graph's kernels over 1..%lld rows, one token of its own "
        "sequence each\n",
        (long long)z->parallel, (long long)z->parallel);
    for (int64_t n = 1; n <= z->parallel; n *= 2)
        printf("  %3lld rows: weights %.2f MiB a step, %.2f MiB a token\n", (long long)n, w / 1048576.0,
               w / 1048576.0 / (double)n);
    char why[200];
    zcost_batch_gemv(t, z->parallel, why, sizeof why);
    printf("  matmuls: %s\n", why);
    if (!batch) return;
    batch_census c = count_batch(batch);
    printf("  q, k, v: %s\n",
           c.rows ? zarena_printf(batch->arena,
                                  "%d multi-row GEMVs over the rows of %d of their matmuls (fuse-qkv; %d layers), "
                                  "the others a kernel each",
                                  c.rows, c.segs, c.layers)
                  : "a matmul kernel each (fuse-qkv: only where the matmuls are multi-row GEMVs)");
    printf("  norms: %d in the prologue of a matmul kernel, %d kernels of their own\n", c.norm_in,
           c.norm_alone);
    printf("  matrix units: %d of %d matmul kernels (fp16 operands, fp32 sums; plans of %d rows or more on %s)\n",
           c.f16, c.matmuls, t->batch_gemv_cm_rows, t->name);
    printf("  x: int8 (q8_1, packed integer dot products) in %d of %d matmul kernels%s\n", c.q8, c.matmuls,
           c.q8 ? "" : " (multi-row GEMVs over q4_K or q6_K weights, where the target wants it or --gemv-x int8)");
}

static zstatus write_dot(const zincc_opts *z, const phase_out *ph, zdiag *d) {
    const phase_out *p = &ph[strcmp(emit_phase(z), "decode") ? ZPH_PREFILL : ZPH_DECODE];
    if (!z->emit_out) return zpass_emit_dot(p->fused, &p->po, &p->after, z->dot_weights, stdout, d);
    zfile_out o; /* a failure never leaves half a drawing */
    zstatus s = zfile_begin(&o, z->emit_out, d);
    if (s) return s;
    s = zpass_emit_dot(p->fused, &p->po, &p->after, z->dot_weights, o.fp, d);
    return zfile_end(&o, s, d);
}

/* The prefill chunk: --chunk, or 512, at most the context. */
static int64_t chunk_of(const zincc_opts *z, int64_t ctx) {
    int64_t c = z->chunk ? z->chunk : zincc_default_chunk(ctx);
    return c < ctx ? c : ctx;
}

static zpass_opts phase_opts(const zincc_opts *z, const ztarget *t, int ph, zpass_report *rep) {
    /* stdout carries the JSON or the drawing alone: IR dumps go to stderr. */
    bool quiet = (z->report && !strcmp(z->report, "json")) || (z->emit && !z->emit_out);
    return (zpass_opts){.target = t,
                        .phase = (zpass_phase)ph,
                        .token_tile = z->tile ? (int)z->tile : t->prefill_tile,
                        .ctx = z->ctx,
                        .fuse_threshold = z->threshold >= 0 ? z->threshold : t->fuse_threshold,
                        .verify_each = z->verify_each,
                        .print_after = z->print_after,
                        .print_to = quiet ? stderr : stdout,
                        .report = rep,
                        .kv_type = z->kv_type,
                        .mm_type = z->mm_type,
                        .gemv_idot = z->gemv_x,
                        .step_tokens = chunk_of(z, z->ctx)};
}

/* The target: a named profile, or the live device (the default with -o). */
static zstatus resolve_target(const zincc_opts *z, ztarget *t, zvk_profile *prof, bool *live, char *name,
                              size_t n, zdiag *d) {
    const char *want = z->target ? z->target : z->out ? "device" : "generic";
    *live = !strcmp(want, "device");
    if (*live) {
        zstatus s = zvk_target_from_device(z->device, t, prof, name, n, d);
        if (!s) zvk_target_probe_frags(z->device, t);
        if (s)
            zdiag_prefix(d, "--target device (name a profile with --target %s to compile without one)",
                         ztarget_names());
        return s;
    }
    const ztarget *named = ztarget_find(want);
    if (!named)
        return zdiag_set(d, ZE_INVALID, "unknown target '%s': expected device or one of %s", want,
                         ztarget_names());
    *t = *named;
    return ZOK;
}

static zstatus emit_plan(const zincc_opts *z, const gguf_file *f, phase_out *ph, const zir_graph *batch,
                         const ztarget *t, const zvk_profile *prof, const zcg_tuning *tuning, zdiag *d) {
    zir_graph *g[ZPLAN_PHASES] = {ph[ZPH_PREFILL].fused, ph[ZPH_DECODE].fused};
    int64_t ctx = ph[ZPH_PREFILL].po.ctx;
    zincc_plan_opts o = {.target = t,
                         .device = prof,
                         .ctx = ctx,
                         .chunk = chunk_of(z, ctx),
                         .parallel = z->parallel,
                         .out = z->out,
                         .tuning = tuning,
                         .batch = batch,
                         .progress = cli_stderr_tty()};
    return zincc_write_plan(f, g, &o, d);
}

int main(int argc, char **argv) {
    zincc_opts z = {.threshold = -1};
    int rc = parse(argc, argv, &z);
    if (rc) return rc;
    if (z.list) {
        list_passes();
        return 0;
    }
    char *out = NULL;
    if (!z.out && !is_view(&z) && !(z.out = out = default_out(z.model)))
        return fprintf(stderr, "zincc: error: out of memory\n"), zstatus_exit_code(ZE_NOMEM);
    zdiag d = {0};
    gguf_file *f = NULL;
    phase_out ph[ZPH_COUNT] = {0};
    zpass_report rep = {.arena = zarena_new()};
    ztarget t;
    zvk_profile prof;
    bool live = false;
    char tname[300];
    zstatus s = rep.arena ? gguf_open(z.model, &f, &d) : zdiag_set(&d, ZE_NOMEM, "out of memory");
    if (!s && z.ctx) zincc_check_ctx("zincc", f, z.ctx);
    if (!s && !z.ctx) z.ctx = zincc_default_ctx(f);
    if (!s && z.dump_ir) {
        s = zir_build_from_gguf(f, &ph[0].fused, &d);
        if (!s) zir_print(ph[0].fused, stdout);
    }
    if (!s && !z.dump_ir) s = resolve_target(&z, &t, &prof, &live, tname, sizeof tname, &d);
    for (int i = 0; i < ZPH_COUNT && !s && !z.dump_ir; i++) {
        if (!compiles(&z, (zpass_phase)i)) continue;
        ph[i].po = phase_opts(&z, &t, i, &rep);
        s = compile_phase(f, &z, &ph[i], rep.arena, &d);
    }
    zir_graph *batch = NULL; /* the batch schedule's own graph */
    if (!s && !z.dump_ir && z.parallel && ph[ZPH_PREFILL].fused && (z.out || z.report))
        s = zincc_batch_graph(f, &ph[ZPH_PREFILL].po, z.parallel, z.passes, z.disabled, &batch, &d);
    if (!s && !z.dump_ir && z.report) s = write_report(&z, ph, &rep, &d);
    if (!s && !z.dump_ir && z.report && z.parallel && strcmp(z.report, "json"))
        report_batch(&z, &t, f, batch);
    if (!s && !z.dump_ir && z.emit) s = write_dot(&z, ph, &d);
    zcg_tuning tuning = {0};
    if (!s && z.out && z.tune)
        s = zincc_tune(z.device, z.tune & 2 ? ph[ZPH_DECODE].fused : NULL, z.tune & 1 ? ph[ZPH_PREFILL].fused : NULL,
                       chunk_of(&z, ph[ZPH_PREFILL].po.ctx), &t, ph[ZPH_DECODE].po.ctx, rep.arena, &tuning, &d);
    if (!s && z.out) s = emit_plan(&z, f, ph, batch, &t, live ? &prof : NULL, &tuning, &d);
    zir_graph_free(batch);
    for (int i = 0; i < ZPH_COUNT; i++) {
        zir_graph_free(ph[i].fused);
        zir_graph_free(ph[i].staged);
    }
    zarena_free(rep.arena);
    gguf_close(f);
    free(out);
    return s ? cli_fail("zincc", &d) : 0;
}
