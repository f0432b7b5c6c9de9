/* The materialization analysis, zincc --report (text and JSON) and
 * --emit=dot.
 *
 * 1. Materialization counts crossings on partitions made by hand with
 *    zir_fuse, so the expected numbers do not depend on the cost model: the
 *    staged MLP moves its ff-wide values 6 times per token (gate, up and act:
 *    one write and one read each), gate+up+SwiGLU as one kernel 2 times, the
 *    whole MLP 0 times. Bytes, views, the KV cache, weights and dispatches are
 *    checked against numbers worked out from the model's shapes.
 * 2. The real pipeline: whatever template fuse-mlp picks, the analysis of
 *    its output agrees with it.
 * 3. The zincc binary: --report=json parses (with jansson), has
 *    one object per layer x group x phase with the required keys, escapes
 *    strings; --emit=dot is accepted by graphviz; the text report differs
 *    between targets. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/arch.h"
#include "frontend/mkmodel.h"
#include "passes/cost.h"
#include "passes/report.h"
#include "testutil.h"

enum { HID = 256, FF = 768, HEADS = 4, KVH = 2, HD = 64, LAYERS = 2 };

static char *make_model(const char *name, uint32_t layers, uint32_t hidden, uint32_t ff, zmk_quant q) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = ZMK_QWEN3;
    o.quant = q;
    o.layers = layers;
    o.hidden = hidden;
    o.ff = ff;
    o.heads = hidden == HID ? HEADS : 8;
    o.kv_heads = hidden == HID ? KVH : 4;
    o.head_dim = HD;
    o.vocab = 512;
    o.seed = 1;
    zdiag d = {0};
    /* A copy: tu_tmp reuses its buffers. */
    static char path[4][512];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s", tu_tmp(name));
    cr_assert_eq(zmk_write(&o, p, NULL, &d), ZOK, "%s", d.msg);
    return p;
}

typedef struct fixture {
    gguf_file *f;
    zir_graph *g;
    zarena *a;
    zpass_opts o;
    zpass_mat m;
} fixture;

/* The model at path after `pipeline` (NULL: the default) for one phase on h200. */
static void load(fixture *x, const char *path, const char *pipeline, zpass_phase ph) {
    zdiag d = {0};
    cr_assert_eq(gguf_open(path, &x->f, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zir_build_from_gguf(x->f, &x->g, &d), ZOK, "%s", d.msg);
    const ztarget *t = ztarget_find("h200");
    x->o = (zpass_opts){.target = t, .phase = ph, .token_tile = 64, .ctx = 4096, .fuse_threshold = 1024};
    cr_assert_eq(zpass_run_pipeline(x->g, pipeline, NULL, &x->o, &d), ZOK, "%s", d.msg);
    x->a = zarena_new();
    cr_assert(x->a);
}

/* The staged partition of the small model for one phase on h200. */
static void staged(fixture *x, zpass_phase ph) {
    load(x, make_model("m.gguf", LAYERS, HID, FF, ZMK_Q4_K_M), "shape,width", ph);
}

static void analyse(fixture *x) {
    zdiag d = {0};
    cr_assert_eq(zpass_materialize(x->g, &x->o, x->a, &x->m, &d), ZOK, "%s", d.msg);
}

static void done(fixture *x) {
    zir_graph_free(x->g);
    zarena_free(x->a);
    gguf_close(x->f);
}

static zir_node *node(const zir_graph *g, const char *value) {
    zir_value *v = zir_find(g, value);
    cr_assert(v && v->producer, "no node computes %s", value);
    return v->producer;
}

static const zpass_mat_group *grp(const zpass_mat *m, int layer, zir_group g) {
    const zpass_mat_group *x = zpass_mat_group_find(m, layer, g);
    cr_assert(x, "no group %d/%s", layer, zir_group_name(g));
    return x;
}

/* Fuses gate, up, swiglu (and down when full) of a layer by hand. */
static void fuse_mlp(zir_graph *g, int layer, bool full) {
    char n[4][32];
    const char *names[4] = {"gate", "up", "act", "down"};
    zir_node *body[4];
    for (int i = 0; i < 4; i++) {
        snprintf(n[i], sizeof n[i], "l%d.%s", layer, names[i]);
        body[i] = node(g, n[i]);
    }
    zir_kparams kp = {full ? ZKT_MLP : ZKT_GATE_UP_SWIGLU, 1, 1};
    zdiag d = {0};
    cr_assert(zir_fuse(g, body, full ? 4 : 3, &kp, &d), "%s", d.msg);
}

static void expect_value(const zpass_mat *m, const char *name, int writes, int reads, double bytes) {
    const zpass_mat_value *v = zpass_mat_find(m, name);
    cr_assert(v, "%s does not cross VRAM", name);
    cr_expect_eq(v->writes, writes, "%s writes: expected %d, found %d", name, writes, v->writes);
    cr_expect_eq(v->reads, reads, "%s reads: expected %d, found %d", name, reads, v->reads);
    cr_expect_float_eq(v->write_b + v->read_b, bytes, 1e-9, "%s bytes: expected %g, found %g", name, bytes,
                       v->write_b + v->read_b);
}

Test(materialize, staged_mlp_moves_its_intermediate_six_times) {
    fixture x = {0};
    staged(&x, ZPH_DECODE);
    analyse(&x);
    for (int l = 0; l < LAYERS; l++) {
        const zpass_mat_group *m = grp(&x.m, l, ZG_MLP);
        cr_expect_eq(m->t.wide_crossings, 6, "layer %d: %d wide crossings", l, m->t.wide_crossings);
        cr_expect_float_eq(m->t.wide, 6.0 * FF * 2, 1e-9, "layer %d wide bytes %g", l, m->t.wide);
    }
    expect_value(&x.m, "l0.gate", 1, 1, 2.0 * FF * 2);
    expect_value(&x.m, "l0.up", 1, 1, 2.0 * FF * 2);
    expect_value(&x.m, "l0.act", 1, 1, 2.0 * FF * 2);
    /* ffn_in feeds gate and up: one write, two reads of a hidden-wide value. */
    expect_value(&x.m, "l0.ffn_in", 1, 2, 3.0 * HID * 2);
    cr_expect(zpass_mat_find(&x.m, "l0.gate")->wide);
    cr_expect(!zpass_mat_find(&x.m, "l0.ffn_in")->wide);
    done(&x);
}

Test(materialize, gate_up_swiglu_leaves_two_and_the_full_mlp_none) {
    fixture x = {0};
    staged(&x, ZPH_DECODE);
    fuse_mlp(x.g, 0, false);
    fuse_mlp(x.g, 1, true);
    analyse(&x);
    cr_expect_eq(grp(&x.m, 0, ZG_MLP)->t.wide_crossings, 2);
    cr_expect_float_eq(grp(&x.m, 0, ZG_MLP)->t.wide, 2.0 * FF * 2, 1e-9);
    expect_value(&x.m, "l0.act", 1, 1, 2.0 * FF * 2);
    cr_expect_null(zpass_mat_find(&x.m, "l0.gate"), "gate is on chip in the kernel");
    cr_expect_eq(grp(&x.m, 1, ZG_MLP)->t.wide_crossings, 0);
    cr_expect_float_eq(grp(&x.m, 1, ZG_MLP)->t.wide, 0, 1e-9);
    cr_expect_null(zpass_mat_find(&x.m, "l1.act"));
    /* The kernel's output still crosses: written once, read by the next norm and add. */
    expect_value(&x.m, "l1.down", 1, 1, 2.0 * HID * 2);
    /* Staged: ffn_norm gate up swiglu down add; gate+up+SwiGLU: 4; full: 3. */
    cr_expect_eq(grp(&x.m, 0, ZG_MLP)->t.dispatches, 4);
    cr_expect_eq(grp(&x.m, 1, ZG_MLP)->t.dispatches, 3);
    done(&x);
}

Test(materialize, views_alias_and_the_kv_cache_is_its_own_kind) {
    fixture x = {0};
    staged(&x, ZPH_DECODE);
    analyse(&x);
    cr_expect_null(zpass_mat_find(&x.m, "l0.q_heads"), "a reshape moves nothing");
    expect_value(&x.m, "l0.q", 1, 1, 2.0 * HID * 2); /* read through q_heads by the q norm */
    const zpass_mat_value *k = zpass_mat_find(&x.m, "l0.k_all");
    cr_assert(k);
    cr_expect_eq(k->kind, ZMAT_KV);
    /* The store writes one row per token; attention reads the 4096 cached rows. */
    cr_expect_float_eq(k->write_b, KVH * HD * 2.0, 1e-9);
    cr_expect_float_eq(k->read_b, 4096.0 * KVH * HD * 2, 1e-9);
    const zpass_mat_group *a = grp(&x.m, 0, ZG_ATTN);
    cr_expect_float_eq(a->t.kv, 2 * (KVH * HD * 2.0 + 4096.0 * KVH * HD * 2), 1e-9);
    cr_expect(!k->wide, "the cache is not an intermediate");
    /* Scores and probs: [H, T, P] at P = 4096, one write and one read each. */
    expect_value(&x.m, "l0.scores", 1, 1, 2.0 * HEADS * 4096 * 2);
    cr_expect_eq(a->t.wide_crossings, 4);
    done(&x);
}

/* A qwen35 delta-net layer reads its conv state ([K-1, C] floats) and its
 * delta-rule state ([Hv, D, D]) once per step and writes them once: per
 * token that is all of it in decode and 1/T of it in a prefill step of T;
 * a gated attention layer has none. The text report shows the row only for
 * models with states. */
Test(materialize, recurrent_state_once_per_step) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = ZMK_QWEN35, o.layers = 2, o.full_attn = 2, o.quant = ZMK_F32, o.vocab = 512;
    zdiag d = {0};
    const char *path = tu_tmp("q35-report.gguf");
    cr_assert_eq(zmk_write(&o, path, NULL, &d), ZOK, "%s", d.msg);
    double C = 2.0 * o.ssm_groups * o.ssm_state + (double)o.ssm_heads * o.ssm_state;
    double state = 4.0 * ((o.ssm_conv - 1) * C + (double)o.ssm_heads * o.ssm_state * o.ssm_state);
    for (int ph = 0; ph < ZPH_COUNT; ph++) {
        fixture x = {0};
        load(&x, path, NULL, (zpass_phase)ph);
        analyse(&x);
        double per = 2.0 * state / (double)x.m.step_tokens;
        cr_expect_float_eq(grp(&x.m, 0, ZG_ATTN)->t.state, per, 1e-9, "%s: %g B, expected %g",
                           zpass_phase_name((zpass_phase)ph), grp(&x.m, 0, ZG_ATTN)->t.state, per);
        cr_expect_eq(grp(&x.m, 1, ZG_ATTN)->t.state, 0.0);
        cr_expect_float_eq(x.m.total.state, per, 1e-9);
        done(&x);
    }
    char *out = NULL;
    int rc = tu_run(&out, ZINC_BINARY_DIR "/zincc %s --target h200 --report", path);
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "recurrent state (read + write per step)"), "%s", out);
    free(out);
    rc = tu_run(&out, ZINC_BINARY_DIR "/zincc %s --target h200 --report",
                make_model("m.gguf", 1, HID, FF, ZMK_Q4_K_M));
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect(!strstr(out, "recurrent state"), "a model without states has no state row: %s", out);
    free(out);
}

/* Decode reads every weight once per token; a staged quantized weight adds
 * its 2 B/weight copy, written and read back. */
Test(materialize, weights_scratch_and_dispatches) {
    fixture x = {0};
    staged(&x, ZPH_DECODE);
    analyse(&x);
    const char *w[4] = {"blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight",
                        "blk.0.ffn_down.weight"};
    double stored = 0, quant_elems = 0;
    for (int i = 0; i < 4; i++) {
        zir_value *v = zir_find(x.g, w[i]);
        cr_assert(v);
        stored += (double)v->nbytes;
        if (i) quant_elems += (double)v->shape[0] * (double)v->shape[1];
    }
    const zpass_mat_group *m = grp(&x.m, 0, ZG_MLP);
    cr_expect_float_eq(m->t.weight, stored, 1e-6, "weights %g, expected %g", m->t.weight, stored);
    cr_expect_float_eq(m->t.scratch, 4.0 * quant_elems, 1e-6);
    cr_expect_eq(m->t.dispatches, 6);
    cr_expect_eq(m->t.dequant_dispatches, 3);
    /* Per token in decode: per step, one token per step. */
    cr_expect_eq(x.m.step_tokens, 1);
    done(&x);

    fixture p = {0};
    staged(&p, ZPH_PREFILL);
    fuse_mlp(p.g, 0, false);
    for (int i = 0; i < node(p.g, "l0.gate")->parent->n_body; i++)
        node(p.g, "l0.gate")->parent->body[i]->dequant = ZDQ_FUSED;
    node(p.g, "l0.gate")->parent->kp.token_tile = 16;
    analyse(&p);
    double gate = (double)zir_find(p.g, "blk.0.ffn_gate.weight")->nbytes;
    double up = (double)zir_find(p.g, "blk.0.ffn_up.weight")->nbytes;
    zir_value *down = zir_find(p.g, "blk.0.ffn_down.weight");
    zir_value *norm = zir_find(p.g, "blk.0.ffn_norm.weight");
    double de = (double)down->shape[0] * (double)down->shape[1];
    /* Kernel tile 16 for gate and up; the staged down: its dequant once per
     * 512-token step, its copy re-read per 64-token tile; the norm per tile. */
    double expect = (gate + up) / 16 + (double)down->nbytes / 512 + (double)norm->nbytes / 64;
    cr_expect_float_eq(grp(&p.m, 0, ZG_MLP)->t.weight, expect, 1e-6, "prefill weights %g, expected %g",
                       grp(&p.m, 0, ZG_MLP)->t.weight, expect);
    cr_expect_float_eq(grp(&p.m, 0, ZG_MLP)->t.scratch, 2 * de / 512 + 2 * de / 64, 1e-6);
    cr_expect_eq(p.m.step_tokens, zcost_step_tokens(&p.o));
    /* Staged attention reads the cache once per 64-token tile. */
    cr_expect_float_eq(zpass_mat_find(&p.m, "l0.k_all")->read_b, 4096.0 * KVH * HD * 2 / 64, 1e-9);
    done(&p);
}

/* The cost model prices a weight by its bytes as stored: per type, ggml's
 * block size over its block length (ggml-common.h), whatever the type. In
 * decode every MLP weight is read once per token, dequantized in its kernel
 * (fuse-dequant: no scratch copy). */
Test(materialize, weight_bytes_per_type) {
    static const struct {
        zmk_quant q;
        double bytes_per_weight;
    } cases[] = {{ZMK_Q4_0, 18.0 / 32}, {ZMK_Q4_1, 20.0 / 32},   {ZMK_Q5_0, 22.0 / 32},
                 {ZMK_Q5_1, 24.0 / 32}, {ZMK_IQ4_NL, 18.0 / 32}, {ZMK_IQ4_XS, 136.0 / 256}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fixture x = {0};
        load(&x, make_model("types.gguf", 1, HID, FF, cases[i].q), NULL, ZPH_DECODE);
        analyse(&x);
        const zpass_mat_group *mlp = grp(&x.m, 0, ZG_MLP);
        double want = 3.0 * HID * FF * cases[i].bytes_per_weight + 4.0 * HID; /* + the f32 norm */
        cr_expect_float_eq(mlp->t.weight, want, 1e-9, "%s: MLP weights %g B per token, expected %g",
                           zmk_quant_name(cases[i].q), mlp->t.weight, want);
        cr_expect_eq(mlp->t.scratch, 0.0, "%s: dequantized in the kernels", zmk_quant_name(cases[i].q));
        done(&x);
    }
}

Test(materialize, needs_widths) {
    const char *path = make_model("w.gguf", 1, HID, FF, ZMK_Q8_0);
    zdiag d = {0};
    gguf_file *f = NULL;
    zir_graph *g = NULL;
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zir_build_from_gguf(f, &g, &d), ZOK, "%s", d.msg);
    zpass_opts o = {.target = ztarget_find("h200"), .phase = ZPH_DECODE, .token_tile = 64, .ctx = 4096};
    zarena *a = zarena_new();
    zpass_mat m;
    cr_expect_eq(zpass_materialize(g, &o, a, &m, &d), ZE_INVALID);
    cr_expect(strstr(d.msg, "width pass"), "%s", d.msg);
    zarena_free(a);
    zir_graph_free(g);
    gguf_close(f);
}

/* Whatever fuse-mlp picks on the real pipeline, the analysis agrees. On
 * h200 the 256-wide model takes the whole MLP in prefill (its tile shrinks
 * to 38) and gate+up+SwiGLU in decode (a split MLP of 12 slices would leave
 * most SMs idle). */
Test(materialize, agrees_with_the_pipeline) {
    const char *path = make_model("k.gguf", 1, 256, 768, ZMK_Q8_0);
    int seen[ZKT_COUNT] = {0};
    for (int ph = 0; ph < ZPH_COUNT; ph++) {
        zdiag d = {0};
        gguf_file *f = NULL;
        zir_graph *g = NULL;
        cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
        cr_assert_eq(zir_build_from_gguf(f, &g, &d), ZOK, "%s", d.msg);
        zpass_opts o = {.target = ztarget_find("h200"),
                        .phase = ph,
                        .token_tile = 64,
                        .ctx = 4096,
                        .fuse_threshold = 1024};
        cr_assert_eq(zpass_run_pipeline(g, NULL, NULL, &o, &d), ZOK, "%s", d.msg);
        zarena *a = zarena_new();
        zpass_mat m;
        cr_assert_eq(zpass_materialize(g, &o, a, &m, &d), ZOK, "%s", d.msg);
        zir_node *k = node(g, "l0.act");
        zir_ktemplate t = k->parent ? k->parent->kp.tmpl : k->op == ZOP_KERNEL ? k->kp.tmpl : ZKT_NONE;
        int expect = t == ZKT_MLP ? 0 : t == ZKT_GATE_UP_SWIGLU ? 2 : 6;
        cr_expect_eq(grp(&m, 0, ZG_MLP)->t.wide_crossings, expect, "%s with %s: %d crossings",
                     zpass_phase_name(ph), zir_ktemplate_name(t), grp(&m, 0, ZG_MLP)->t.wide_crossings);
        seen[t]++;
        zarena_free(a);
        zir_graph_free(g);
        gguf_close(f);
    }
    /* The model was chosen so that both fused templates occur. */
    cr_expect(seen[ZKT_MLP] && seen[ZKT_GATE_UP_SWIGLU], "mlp %d, gate_up_swiglu %d", seen[ZKT_MLP],
              seen[ZKT_GATE_UP_SWIGLU]);
}

/* ---- reading --report=json: jansson, like the writers ---------------------- */

/* o[key], which must exist and have the given type. */
static json_t *jreq(const json_t *o, const char *key, json_type type) {
    json_t *v = json_object_get(o, key);
    cr_assert(v, "missing key \"%s\"", key);
    cr_assert_eq(json_typeof(v), type, "\"%s\": expected JSON type %d, found %d", key, (int)type,
                 (int)json_typeof(v));
    return v;
}

/* The whole text as one JSON value (nothing after it). */
static json_t *jparse(const char *text) {
    json_error_t err;
    json_t *v = json_loads(text, 0, &err);
    cr_assert(v, "--report=json is not JSON (line %d: %s): %.200s", err.line, err.text, text);
    return v;
}

/* ---- the zincc binary ------------------------------------------------------- */

static char *run_to_file(const char *args, const char *out_name, char **log) {
    const char *out = tu_tmp(out_name);
    /* In a subshell: tu_run sends stderr to the log, stdout alone to the file. */
    int rc = tu_run(log, "(%s/zincc %s > '%s')", ZINC_BINARY_DIR, args, out);
    cr_assert_eq(rc, 0, "zincc %s: exit %d: %s", args, rc, *log ? *log : "");
    size_t n;
    char *text = tu_read_file(out, &n);
    cr_assert(text, "no output in %s", out);
    char *z = realloc(text, n + 1);
    cr_assert(z);
    z[n] = 0;
    return z;
}

static void check_group(const json_t *g, int seen[LAYERS][2][ZPH_COUNT]) {
    int layer = (int)json_integer_value(jreq(g, "layer", JSON_INTEGER));
    const char *group = json_string_value(jreq(g, "group", JSON_STRING));
    const char *phase = json_string_value(jreq(g, "phase", JSON_STRING));
    cr_assert(layer >= 0 && layer < LAYERS, "layer %d", layer);
    int gi = !strcmp(group, "attn") ? 0 : !strcmp(group, "mlp") ? 1 : -1;
    int pi = !strcmp(phase, "prefill") ? ZPH_PREFILL : !strcmp(phase, "decode") ? ZPH_DECODE : -1;
    cr_assert(gi >= 0 && pi >= 0, "group %s, phase %s", group, phase);
    seen[layer][gi][pi]++;
    double cb = json_number_value(json_object_get(g, "crossings_before"));
    double ca = json_number_value(json_object_get(g, "crossings_after"));
    double bb = json_number_value(json_object_get(g, "bytes_per_token_before"));
    double ba = json_number_value(json_object_get(g, "bytes_per_token_after"));
    cr_assert(json_is_number(json_object_get(g, "crossings_before")) &&
                  json_is_number(json_object_get(g, "bytes_per_token_after")),
              "%d/%s: crossings and bytes are numbers", layer, group);
    bool fused = json_is_true(json_object_get(g, "fused"));
    cr_assert(json_is_boolean(json_object_get(g, "fused")), "%d/%s: fused is a boolean", layer, group);
    cr_expect(strlen(json_string_value(jreq(g, "reason", JSON_STRING))) > 10, "reason of %d/%s", layer, group);
    cr_expect(cb >= ca && bb >= ba, "%d/%s/%s: before %g/%g, after %g/%g", layer, group, phase, cb, bb, ca,
              ba);
    if (gi == 1) {
        cr_expect_eq(cb, 6, "%d/mlp/%s: %g crossings before", layer, phase, cb);
        cr_expect_float_eq(bb, 6.0 * FF * 2, 1e-9);
        cr_expect(fused, "the small model's MLP is fused on h200");
    }
    jreq(g, "decisions", JSON_ARRAY);
}

Test(zincc, report_json_parses_and_has_every_layer) {
    const char *path = make_model("we\"ird\\name.gguf", LAYERS, HID, FF, ZMK_Q4_K_M);
    char *log = NULL, args[700];
    snprintf(args, sizeof args, "'%s' --target h200 --report=json --print-after=fuse-mlp", path);
    char *text = run_to_file(args, "r.json", &log);
    cr_expect(strstr(log, "# after fuse-mlp"), "IR dumps go to stderr when stdout is JSON");
    json_t *v = jparse(text);
    cr_expect_str_eq(json_string_value(jreq(v, "model", JSON_STRING)), path, "escaped path round-trips");
    cr_expect_str_eq(json_string_value(jreq(jreq(v, "target", JSON_OBJECT), "name", JSON_STRING)), "h200");
    const json_t *groups = jreq(v, "groups", JSON_ARRAY);
    cr_assert_eq(json_array_size(groups), LAYERS * 2 * ZPH_COUNT, "%zu groups", json_array_size(groups));
    int seen[LAYERS][2][ZPH_COUNT] = {{{0}}};
    for (size_t i = 0; i < json_array_size(groups); i++)
        check_group(json_array_get(groups, i), seen);
    for (int l = 0; l < LAYERS; l++)
        for (int g = 0; g < 2; g++)
            for (int p = 0; p < ZPH_COUNT; p++)
                cr_expect_eq(seen[l][g][p], 1, "layer %d group %d phase %d: %d objects", l, g, p,
                             seen[l][g][p]);
    const json_t *tot = jreq(v, "totals", JSON_OBJECT);
    for (int p = 0; p < ZPH_COUNT; p++) {
        const json_t *ph = jreq(tot, zpass_phase_name(p), JSON_OBJECT);
        double b = json_number_value(json_object_get(jreq(ph, "before", JSON_OBJECT), "dispatches_per_token"));
        double a = json_number_value(json_object_get(jreq(ph, "after", JSON_OBJECT), "dispatches_per_token"));
        cr_expect(a < b, "%s: dispatches %g -> %g", zpass_phase_name(p), b, a);
    }
    json_decref(v);
    free(text);
    free(log);
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static void check_dot(const char *model, const char *flags, const char *name, int red_edges) {
    char args[700], *log = NULL;
    snprintf(args, sizeof args, "'%s' --target h200 %s", model, flags);
    char *text = run_to_file(args, name, &log);
    cr_expect(!strncmp(text, "digraph", 7), "%s: %.60s", flags, text);
    cr_expect_eq(count(text, "penwidth=2.2"), red_edges, "%s: red edges", flags);
    free(log);
    log = NULL;
    int rc = tu_run(&log, "dot -Tsvg '%s' -o '%s'", tu_tmp(name), tu_tmp("out.svg"));
    cr_expect_eq(rc, 0, "graphviz rejects the %s drawing: %s", flags, log ? log : "");
    free(log);
    free(text);
}

Test(zincc, emit_dot_is_valid_graphviz) {
    char *log = NULL;
    cr_assert_eq(tu_run(&log, "dot -V"), 0, "graphviz (dot) is needed: %s", log ? log : "");
    free(log);
    const char *m = make_model("d.gguf", LAYERS, HID, FF, ZMK_Q4_K_M);
    /* decode: gate+up+SwiGLU writes act, down reads it: one wide crossing a layer */
    check_dot(m, "--emit=dot", "a.dot", LAYERS);
    check_dot(m, "--emit=dot --phase prefill --dot-weights", "b.dot", 0);
    /* A staged MLP: gate and up read by SwiGLU, act read by down, per layer. */
    check_dot(m, "--emit=dot --disable-pass=fuse-mlp", "c.dot", 3 * LAYERS);
    check_dot(m, "--emit=dot --passes=shape,width", "d.dot", 5 * LAYERS);
}

/* The table of one phase, between its heading and the next. */
static char *phase_text(const char *text) {
    const char *a = strstr(text, "== prefill"), *b = strstr(text, "== totals");
    cr_assert(a && b && b > a, "no phase tables in: %.300s", text);
    char *s = strndup(a, (size_t)(b - a));
    cr_assert(s);
    return s;
}

Test(zincc, report_differs_between_targets) {
    const char *m = make_model("t.gguf", LAYERS, HID, FF, ZMK_Q4_K_M);
    const char *targets[3] = {"llvmpipe", "h200", "rdna4"};
    const char *thresholds[3] = {"threshold 256", "threshold 1024", "threshold 512"};
    char *tables[3];
    for (int i = 0; i < 3; i++) {
        char args[600], name[32], *log = NULL;
        snprintf(args, sizeof args, "'%s' --target %s --report", m, targets[i]);
        snprintf(name, sizeof name, "%s.txt", targets[i]);
        char *text = run_to_file(args, name, &log);
        tables[i] = phase_text(text);
        cr_expect(strstr(tables[i], thresholds[i]), "%s: the reasons quote its threshold", targets[i]);
        cr_expect(strstr(text, "\n0-1     attn"), "%s: identical layers fold: %s", targets[i], text);
        cr_expect(strstr(text, "gate+up+act"), "%s", targets[i]);
        cr_expect(strstr(text, "dispatches per token"), "%s", targets[i]);
        free(text);
        free(log);
    }
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            cr_expect(strcmp(tables[i], tables[j]), "%s and %s print the same decisions", targets[i],
                      targets[j]);
    for (int i = 0; i < 3; i++)
        free(tables[i]);
}

/* 36 layers of Q4_K_M: llama.cpp's use_more_bits(i, 36) gives ffn_down Q6_K in
 * layers i < 4, i >= 31 and (i - 4) % 3 == 2, so the decode MLP rows fold into
 * two layer sets, too long for the column and printed as notes. attn_v follows
 * the same rule, and fuse-qkv fuses v with q and k only where they share a
 * type, so the attention rows fold into the same two sets. The JSON still
 * lists all 36 layers. */
Test(zincc, report_folds_layers) {
    const char *m = make_model("l36.gguf", 36, HID, FF, ZMK_Q4_K_M);
    char args[600], *log = NULL;
    snprintf(args, sizeof args, "'%s' --target h200 --report --phase decode", m);
    char *text = run_to_file(args, "l36.txt", &log);
    cr_expect(strstr(text, "\n[a] 18 layers  attn"), "attention folds into two blocks: %s", text);
    cr_expect(strstr(text, "\n[a] layers 0-3,6,9,12,15,18,21,24,27,30-35\n"), "%s", text);
    cr_expect(strstr(text, "\n[c] layers 4-5,7-8,10-11,13-14,16-17,19-20,22-23,25-26,28-29\n"), "%s", text);
    cr_expect(strstr(text, "\n[b] 18 layers  mlp"), "%s", text);
    cr_expect(strstr(text, "3 of its 3 matmuls as one GEMV") &&
                  strstr(text, "2 of its 3 matmuls as one GEMV"),
              "q, k, v where they share a type, q and k elsewhere: %s", text);
    cr_expect_eq(count(text, "scores+probs"), 2, "an attention block per attn_v type");
    free(text);
    free(log);
    log = NULL;
    snprintf(args, sizeof args, "'%s' --target h200 --report=json --phase decode", m);
    text = run_to_file(args, "l36.json", &log);
    json_t *v = jparse(text);
    cr_expect_eq(json_array_size(jreq(v, "groups", JSON_ARRAY)), 36 * 2);
    cr_expect(!json_object_get(jreq(v, "totals", JSON_OBJECT), "prefill"), "only the compiled phase");
    json_decref(v);
    free(text);
    free(log);
}
