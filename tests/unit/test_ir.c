/* The IR core: the verifier catches each broken invariant, and the printer's
 * text for a generated model matches its golden file. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/arch.h"
#include "frontend/mkmodel.h"
#include "testutil.h"

static gguf_file *file;

static zir_graph *build(zmk_arch arch, zmk_quant q, uint32_t layers, const char *name) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = arch;
    o.quant = q;
    o.layers = layers;
    o.hidden = 256;
    o.ff = 768;
    o.heads = 4;
    o.kv_heads = 2;
    o.head_dim = 64;
    o.vocab = 512;
    o.seed = 1;
    zdiag d = {0};
    const char *path = tu_tmp(name);
    cr_assert_eq(zmk_write(&o, path, NULL, &d), ZOK, "%s", d.msg);
    cr_assert_eq(gguf_open(path, &file, &d), ZOK, "%s", d.msg);
    zir_graph *g;
    cr_assert_eq(zir_build_from_gguf(file, &g, &d), ZOK, "%s", d.msg);
    return g;
}

static void fini(void) {
    gguf_close(file);
}

static zir_node *find_node(zir_graph *g, const char *out_name) {
    zir_value *v = zir_find(g, out_name);
    cr_assert(v && v->producer, "no node %s", out_name);
    return v->producer;
}

static void expect_verify_fails(zir_graph *g, const char *needle) {
    zdiag d = {0};
    cr_expect_neq(zir_verify(g, &d), ZOK, "verifier accepted a broken graph (%s)", needle);
    cr_expect(strstr(d.msg, needle) != NULL, "message '%s' lacks '%s'", d.msg, needle);
}

Test(ir, builds_and_verifies, .fini = fini) {
    zir_graph *g = build(ZMK_QWEN3, ZMK_Q4_K_M, 2, "v.gguf");
    zdiag d = {0};
    cr_expect_eq(zir_verify(g, &d), ZOK, "%s", d.msg);
    cr_expect_eq(g->logits->shape[0], ZDIM_T);
    cr_expect_eq(g->logits->shape[1], 512);
    zir_graph_free(g);
}

Test(ir, verifier_catches_wrong_order, .fini = fini) {
    zir_graph *g = build(ZMK_QWEN3, ZMK_F32, 1, "o.gguf");
    zir_node *a = find_node(g, "l0.gate"), *b = find_node(g, "l0.act");
    g->nodes[a->id] = b; /* swap producer and consumer */
    g->nodes[b->id] = a;
    uint32_t t = a->id;
    a->id = b->id;
    b->id = t;
    expect_verify_fails(g, "produced later");
    zir_graph_free(g);
}

Test(ir, verifier_catches_shape_and_uses, .fini = fini) {
    zir_graph *g = build(ZMK_QWEN3, ZMK_F32, 1, "s.gguf");
    zir_node *n = find_node(g, "l0.up");
    n->out->shape[1] = 767;
    expect_verify_fails(g, "recorded shape");
    n->out->shape[1] = 768;
    zdiag d = {0};
    cr_expect_eq(zir_verify(g, &d), ZOK, "%s", d.msg);
    n->in[0]->n_uses++;
    expect_verify_fails(g, "use count");
    n->in[0]->n_uses--;
    zir_value *w = n->in[1];
    n->in[1] = n->in[0]; /* an activation in the weight slot */
    expect_verify_fails(g, "must be a weight");
    n->in[1] = w;
    cr_expect_eq(zir_verify(g, &d), ZOK, "%s", d.msg);
    zir_graph_free(g);
}

Test(ir, shape_inference_rejects_mismatch, .fini = fini) {
    zir_graph *g = build(ZMK_LLAMA, ZMK_F32, 1, "m.gguf");
    zdiag d = {0};
    zir_value *in[2] = {zir_find(g, "l0.act"), zir_find(g, "blk.0.ffn_up.weight")};
    cr_assert(in[0] && in[1]);
    cr_expect_null(zir_node_add(g, ZOP_MATMUL, "bad", in, 2, NULL, 0, ZG_MLP, &d));
    cr_expect_eq(d.code, ZE_INVALID);
    cr_expect(strstr(d.msg, "input 1 axis 1: expected 768, found 256") != NULL, "%s", d.msg);
    zir_graph_free(g);
}

/* The printed IR of a fixed model is golden: regenerate with ZINC_UPDATE_GOLDEN=1. */
static void golden(zmk_arch arch, const char *file_name) {
    zir_graph *g = build(arch, ZMK_Q4_K_M, 2, "golden.gguf");
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    zir_print(g, mem);
    fclose(mem);
    char path[512];
    snprintf(path, sizeof path, "%s/tests/golden/%s", ZINC_SOURCE_DIR, file_name);
    if (getenv("ZINC_UPDATE_GOLDEN")) tu_write_file(path, text, len);
    size_t glen;
    char *want = tu_read_file(path, &glen);
    cr_assert_not_null(want, "missing golden file %s (run with ZINC_UPDATE_GOLDEN=1)", path);
    cr_expect(glen == len && !memcmp(want, text, len), "printed IR differs from %s", path);
    free(want);
    free(text);
    zir_graph_free(g);
}

Test(ir, golden_qwen3, .fini = fini) {
    golden(ZMK_QWEN3, "qwen3-2l-q4km.zir");
}
Test(ir, golden_qwen2, .fini = fini) {
    golden(ZMK_QWEN2, "qwen2-2l-q4km.zir");
}
Test(ir, golden_llama, .fini = fini) {
    golden(ZMK_LLAMA, "llama-2l-q4km.zir");
}
