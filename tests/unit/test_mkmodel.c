/* Tests for frontend/mkmodel: generated files parse with the GGUF reader and
 * carry the types, shapes and metadata llama.cpp expects; the tokenizer is
 * consistent; output is deterministic; bad options fail clearly.
 * Expected values are written out by hand from llama.cpp's rules (e.g. the
 * use_more_bits layers of a 10-layer model), not computed through mkmodel. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/gguf.h"
#include "frontend/mkmodel.h"
#include "testutil.h"

static gguf_file *make(const zmk_opts *o, const char *name, zmk_report *rep) {
    const char *path = tu_tmp(name);
    zdiag d = {0};
    zstatus s = zmk_write(o, path, rep, &d);
    cr_assert_eq(s, ZOK, "zmk_write: %s", d.msg);
    gguf_file *f = NULL;
    s = gguf_open(path, &f, &d);
    cr_assert_eq(s, ZOK, "gguf_open: %s", d.msg);
    return f;
}

static const gguf_tensor *tensor(const gguf_file *f, const char *fmt, int layer) {
    char name[96];
    snprintf(name, sizeof name, fmt, layer);
    const gguf_tensor *t = gguf_find_tensor(f, name);
    cr_assert(t, "missing tensor %s", name);
    return t;
}

static void expect_shape(const gguf_tensor *t, int64_t ne0, int64_t ne1) {
    cr_expect_eq(t->ne[0], ne0, "%s ne[0]: expected %lld, found %lld", t->name, (long long)ne0,
                 (long long)t->ne[0]);
    cr_expect_eq(t->ne[1], ne1, "%s ne[1]: expected %lld, found %lld", t->name, (long long)ne1,
                 (long long)t->ne[1]);
    cr_expect_eq(t->n_dims, ne1 == 1 ? 1u : 2u, "%s n_dims", t->name);
}

static uint32_t u32(const gguf_file *f, const char *key) {
    uint32_t v = 0;
    zdiag d = {0};
    cr_assert_eq(gguf_get_u32(f, key, &v, &d), ZOK, "%s", d.msg);
    return v;
}

static const char *str(const gguf_file *f, const char *key) {
    const char *v = NULL;
    zdiag d = {0};
    cr_assert_eq(gguf_get_str(f, key, &v, &d), ZOK, "%s", d.msg);
    return v;
}

static const gguf_value *arr(const gguf_file *f, const char *key, gguf_vtype elem) {
    const gguf_value *v = NULL;
    zdiag d = {0};
    cr_assert_eq(gguf_get_arr(f, key, elem, &v, &d), ZOK, "%s", d.msg);
    return v;
}

/* ---- tensor types ------------------------------------------------------- */

Test(mkmodel, q4_k_m_types_follow_llama_quantize) {
    zmk_opts o;
    zmk_defaults(&o);
    o.layers = 10, o.hidden = 256, o.ff = 512, o.vocab = 300;
    gguf_file *f = make(&o, "q4km10.gguf", NULL);
    /* use_more_bits(i, 10): i < 1 || i >= 8 || (i - 1) % 3 == 2  ->  0, 3, 6, 8, 9 */
    const bool more[10] = {1, 0, 0, 1, 0, 0, 1, 0, 1, 1};
    for (int i = 0; i < 10; i++) {
        cr_expect_eq(zmk_use_more_bits(i, 10), more[i], "use_more_bits(%d, 10)", i);
        ztype want = more[i] ? ZT_Q6_K : ZT_Q4_K;
        cr_expect_eq(tensor(f, "blk.%d.attn_v.weight", i)->type, want, "layer %d attn_v", i);
        cr_expect_eq(tensor(f, "blk.%d.ffn_down.weight", i)->type, want, "layer %d ffn_down", i);
        const char *q4[] = {"blk.%d.attn_q.weight", "blk.%d.attn_k.weight", "blk.%d.attn_output.weight",
                            "blk.%d.ffn_gate.weight", "blk.%d.ffn_up.weight"};
        for (size_t k = 0; k < 5; k++)
            cr_expect_eq(tensor(f, q4[k], i)->type, ZT_Q4_K, "%s (layer %d)", q4[k], i);
        const char *f32[] = {"blk.%d.attn_norm.weight", "blk.%d.ffn_norm.weight", "blk.%d.attn_q_norm.weight",
                             "blk.%d.attn_k_norm.weight"};
        for (size_t k = 0; k < 4; k++)
            cr_expect_eq(tensor(f, f32[k], i)->type, ZT_F32, "%s (layer %d)", f32[k], i);
    }
    cr_expect_eq(tensor(f, "token_embd.weight", 0)->type, ZT_Q4_K);
    cr_expect_eq(tensor(f, "output.weight", 0)->type, ZT_Q6_K);
    cr_expect_eq(tensor(f, "output_norm.weight", 0)->type, ZT_F32);
    cr_expect_eq(u32(f, "general.file_type"), 15u);
    cr_expect_eq(u32(f, "general.quantization_version"), 2u);
    gguf_close(f);
}

Test(mkmodel, use_more_bits_small_and_large) {
    /* n = 4: n/8 = 0, 7n/8 = 3 -> layers 2 (by the modulo) and 3. */
    const bool four[4] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++)
        cr_expect_eq(zmk_use_more_bits(i, 4), four[i], "i=%d", i);
    /* n = 36 (Qwen3-8B): n/8 = 4, 7n/8 = 31 -> 0..3, 6, 9, ..., 30, 31..35. */
    int count = 0;
    for (int i = 0; i < 36; i++)
        count += zmk_use_more_bits(i, 36);
    cr_expect_eq(count, 4 + 9 + 5, "36 layers: expected 18 use_more_bits layers, found %d", count);
}

Test(mkmodel, tied_embeddings_take_the_output_type) {
    zmk_opts o;
    zmk_defaults(&o);
    o.tied = true;
    gguf_file *f = make(&o, "tied.gguf", NULL);
    cr_expect_null(gguf_find_tensor(f, "output.weight"));
    cr_expect_eq(tensor(f, "token_embd.weight", 0)->type, ZT_Q6_K);
    gguf_close(f);
}

Test(mkmodel, plain_file_types) {
    const struct {
        zmk_quant q;
        ztype matrix;
        uint32_t ftype;
    } cases[] = {{ZMK_F32, ZT_F32, 0},   {ZMK_F16, ZT_F16, 1},        {ZMK_Q8_0, ZT_Q8_0, 7},
                 {ZMK_Q4_0, ZT_Q4_0, 2}, {ZMK_Q4_1, ZT_Q4_1, 3},      {ZMK_Q5_0, ZT_Q5_0, 8},
                 {ZMK_Q5_1, ZT_Q5_1, 9}, {ZMK_IQ4_NL, ZT_IQ4_NL, 25}, {ZMK_IQ4_XS, ZT_IQ4_XS, 30}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        zmk_opts o;
        zmk_defaults(&o);
        o.quant = cases[c].q;
        gguf_file *f = make(&o, "plain.gguf", NULL);
        cr_expect_eq(u32(f, "general.file_type"), cases[c].ftype);
        cr_expect_eq(tensor(f, "token_embd.weight", 0)->type, cases[c].matrix);
        cr_expect_eq(tensor(f, "output.weight", 0)->type, cases[c].matrix);
        cr_expect_eq(tensor(f, "blk.%d.ffn_down.weight", 1)->type, cases[c].matrix);
        cr_expect_eq(tensor(f, "blk.%d.attn_norm.weight", 1)->type, ZT_F32);
        /* the name round-trips through the parser, and the usage message lists it */
        zmk_quant back;
        cr_expect(zmk_parse_quant(zmk_quant_name(cases[c].q), &back) && back == cases[c].q, "%s",
                  zmk_quant_name(cases[c].q));
        cr_expect(strstr(zmk_quant_names, zmk_quant_name(cases[c].q)), "%s", zmk_quant_name(cases[c].q));
        gguf_close(f);
    }
}

/* llama-quantize's tensor_type_fallback for the one-type files: IQ4_XS rows
 * that are not a multiple of 256 take IQ4_NL; a 32-element type keeps rows
 * that 32 divides and gives F16 to the rest. */
Test(mkmodel, pure_file_types_fall_back_like_llama_quantize) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = ZMK_LLAMA, o.hidden = 320, o.heads = 5, o.kv_heads = 1, o.ff = 300, o.quant = ZMK_IQ4_XS;
    zmk_report rep;
    gguf_file *f = make(&o, "odd-iq4xs.gguf", &rep);
    cr_expect_eq(tensor(f, "blk.%d.attn_q.weight", 0)->type, ZT_IQ4_NL);
    cr_expect_eq(tensor(f, "output.weight", 0)->type, ZT_IQ4_NL);
    cr_expect_eq(tensor(f, "blk.%d.ffn_down.weight", 0)->type, ZT_F16, "300 is not a multiple of 32 either");
    cr_expect_eq(rep.n_notes, 9u, "expected 9 notes, found %u", rep.n_notes);
    gguf_close(f);
    o.quant = ZMK_Q5_1;
    f = make(&o, "odd-q51.gguf", &rep);
    cr_expect_eq(tensor(f, "blk.%d.attn_q.weight", 0)->type, ZT_Q5_1);
    cr_expect_eq(tensor(f, "blk.%d.ffn_down.weight", 0)->type, ZT_F16);
    cr_expect_eq(rep.n_notes, 1u, "only ffn_down falls back: %u notes", rep.n_notes);
    gguf_close(f);
}

Test(mkmodel, rows_that_k_quants_cannot_hold_fall_back) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = ZMK_LLAMA, o.hidden = 320, o.heads = 5, o.kv_heads = 1, o.ff = 300;
    zmk_report rep;
    gguf_file *f = make(&o, "odd.gguf", &rep);
    cr_expect_eq(tensor(f, "blk.%d.attn_q.weight", 0)->type, ZT_Q5_0, "Q4_K falls back to Q5_0");
    cr_expect_eq(tensor(f, "output.weight", 0)->type, ZT_Q8_0, "Q6_K falls back to Q8_0");
    cr_expect_eq(tensor(f, "blk.%d.ffn_down.weight", 0)->type, ZT_F16, "300 is not a multiple of 32 either");
    /* One note per tensor kind: token_embd, q, k, v, output, gate, up, down, attn_output. */
    cr_expect_eq(rep.n_notes, 9u, "expected 9 notes, found %u", rep.n_notes);
    for (uint32_t i = 0; i < rep.n_notes; i++)
        cr_expect(strstr(rep.notes[i], "not a multiple of"), "%s", rep.notes[i]);
    gguf_close(f);
}

/* ---- shapes and metadata ------------------------------------------------ */

Test(mkmodel, qwen3_shapes_and_hparams) {
    zmk_opts o;
    zmk_defaults(&o);
    o.layers = 3, o.hidden = 512, o.ff = 1536, o.heads = 8, o.kv_heads = 2, o.head_dim = 128, o.vocab = 700;
    o.ctx = 8192;
    gguf_file *f = make(&o, "shapes.gguf", NULL);
    expect_shape(tensor(f, "token_embd.weight", 0), 512, 700);
    expect_shape(tensor(f, "output.weight", 0), 512, 700);
    expect_shape(tensor(f, "blk.%d.attn_q.weight", 2), 512, 8 * 128); /* A*D != H is legal for qwen3 */
    expect_shape(tensor(f, "blk.%d.attn_k.weight", 2), 512, 2 * 128);
    expect_shape(tensor(f, "blk.%d.attn_v.weight", 2), 512, 2 * 128);
    expect_shape(tensor(f, "blk.%d.attn_output.weight", 2), 8 * 128, 512);
    expect_shape(tensor(f, "blk.%d.ffn_gate.weight", 0), 512, 1536);
    expect_shape(tensor(f, "blk.%d.ffn_up.weight", 0), 512, 1536);
    expect_shape(tensor(f, "blk.%d.ffn_down.weight", 0), 1536, 512);
    expect_shape(tensor(f, "blk.%d.attn_q_norm.weight", 1), 128, 1);
    expect_shape(tensor(f, "blk.%d.attn_k_norm.weight", 1), 128, 1);
    cr_expect_null(gguf_find_tensor(f, "blk.0.attn_q.bias"));
    cr_expect_null(gguf_find_tensor(f, "blk.3.attn_norm.weight"));
    cr_expect_eq(f->n_tensors, 2 + 3 * 11 + 1);
    cr_expect_str_eq(str(f, "general.architecture"), "qwen3");
    cr_expect_eq(u32(f, "qwen3.context_length"), 8192u);
    cr_expect_eq(u32(f, "qwen3.embedding_length"), 512u);
    cr_expect_eq(u32(f, "qwen3.block_count"), 3u);
    cr_expect_eq(u32(f, "qwen3.feed_forward_length"), 1536u);
    cr_expect_eq(u32(f, "qwen3.attention.head_count"), 8u);
    cr_expect_eq(u32(f, "qwen3.attention.head_count_kv"), 2u);
    cr_expect_eq(u32(f, "qwen3.attention.key_length"), 128u);
    cr_expect_eq(u32(f, "qwen3.attention.value_length"), 128u);
    float eps = 0, base = 0;
    zdiag d = {0};
    cr_assert_eq(gguf_get_f32(f, "qwen3.attention.layer_norm_rms_epsilon", &eps, &d), ZOK, "%s", d.msg);
    cr_assert_eq(gguf_get_f32(f, "qwen3.rope.freq_base", &base, &d), ZOK, "%s", d.msg);
    cr_expect_float_eq(eps, 1e-6f, 1e-12f);
    cr_expect_float_eq(base, 1e6f, 1.0f);
    cr_expect_null(gguf_find_kv(f, "qwen3.rope.dimension_count"));
    cr_expect(strstr(str(f, "general.name"), "qwen3"));
    gguf_close(f);
}

/* qwen35moe: attention tensors on every 2nd layer only, the delta-net's on the
 * others, llama.cpp's keys, Q4_K_M's rules (attn_qkv like attn_v with the
 * 8-expert bump, ssm_conv1d f32, ffn_down_shexp like ffn_down). */
Test(mkmodel, qwen35moe_tensors_keys_and_q4_k_m_types) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = ZMK_QWEN35MOE, o.layers = 4, o.full_attn = 2, o.vocab = 300, o.experts = 8, o.shared_ff = 512;
    gguf_file *f = make(&o, "q35moe.gguf", NULL);
    for (int i = 0; i < 4; i++) {
        bool rec = i % 2 == 0;
        char absent[64];
        snprintf(absent, sizeof absent, "blk.%d.%s", i, rec ? "attn_k.weight" : "ssm_out.weight");
        cr_expect_null(gguf_find_tensor(f, absent), "%s", absent);
        snprintf(absent, sizeof absent, "blk.%d.ffn_norm.weight", i);
        cr_expect_null(gguf_find_tensor(f, absent), "%s", absent);
        ztype more = zmk_use_more_bits(i, 4) ? ZT_Q6_K : ZT_Q4_K;
        if (rec) {
            expect_shape(tensor(f, "blk.%d.attn_qkv.weight", i), 256, 2 * 64 + 4 * 32);
            expect_shape(tensor(f, "blk.%d.ssm_conv1d.weight", i), 4, 2 * 64 + 4 * 32);
            cr_expect_eq(tensor(f, "blk.%d.attn_qkv.weight", i)->type, ZT_Q8_0, "layer %d attn_qkv", i);
            cr_expect_eq(tensor(f, "blk.%d.ssm_conv1d.weight", i)->type, ZT_F32, "layer %d conv", i);
            cr_expect_eq(tensor(f, "blk.%d.ssm_a", i)->ne[0], 4);
        } else {
            expect_shape(tensor(f, "blk.%d.attn_q.weight", i), 256, 2 * 4 * 64);
            cr_expect_eq(tensor(f, "blk.%d.attn_v.weight", i)->type, ZT_Q8_0, "layer %d attn_v", i);
        }
        expect_shape(tensor(f, "blk.%d.ffn_up_shexp.weight", i), 256, 512);
        cr_expect_eq(tensor(f, "blk.%d.ffn_down_shexp.weight", i)->type, more, "layer %d ffn_down_shexp", i);
        cr_expect_eq(tensor(f, "blk.%d.ffn_gate_inp_shexp.weight", i)->n_dims, 1u);
    }
    cr_expect_eq(u32(f, "qwen35moe.ssm.conv_kernel"), 4u);
    cr_expect_eq(u32(f, "qwen35moe.ssm.inner_size"), 128u);
    cr_expect_eq(u32(f, "qwen35moe.full_attention_interval"), 2u);
    cr_expect_eq(u32(f, "qwen35moe.rope.dimension_count"), 16u);
    const gguf_value *sec = arr(f, "qwen35moe.rope.dimension_sections", GGUF_I32);
    cr_expect(sec->arr.n == 4 && sec->arr.items[0].i == 3 && sec->arr.items[1].i == 3 &&
                  sec->arr.items[2].i == 2 && sec->arr.items[3].i == 0,
              "sections");
    gguf_close(f);
    o.ssm_heads = 3; /* not a multiple of 2 key heads */
    zdiag d = {0};
    cr_expect_neq(zmk_write(&o, tu_tmp("bad.gguf"), NULL, &d), ZOK);
    cr_expect(strstr(d.msg, "--ssm-heads 3 must be a multiple of --ssm-groups 2"), "%s", d.msg);
}

/* qwen3moe: the router and the stacked experts as llama.cpp names and shapes
 * them, the expert keys, and Q4_K_M's rules for them (ffn_gate_inp never
 * quantized, ffn_down_exps like ffn_down, the n_expert == 8 bumps). */
Test(mkmodel, qwen3moe_tensors_keys_and_q4_k_m_types) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = ZMK_QWEN3MOE, o.layers = 4, o.vocab = 300, o.experts = 8, o.experts_used = 2, o.expert_ff = 256;
    gguf_file *f = make(&o, "moe8.gguf", NULL);
    const gguf_tensor *t = tensor(f, "blk.%d.ffn_gate_exps.weight", 1);
    cr_expect(t->n_dims == 3 && t->ne[0] == 256 && t->ne[1] == 256 && t->ne[2] == 8, "ffn_gate_exps shape");
    t = tensor(f, "blk.%d.ffn_down_exps.weight", 1);
    cr_expect(t->n_dims == 3 && t->ne[0] == 256 && t->ne[1] == 256 && t->ne[2] == 8, "ffn_down_exps shape");
    expect_shape(tensor(f, "blk.%d.ffn_gate_inp.weight", 0), 256, 8);
    cr_expect_null(gguf_find_tensor(f, "blk.0.ffn_up.weight"));
    cr_expect_eq(u32(f, "qwen3moe.expert_count"), 8u);
    cr_expect_eq(u32(f, "qwen3moe.expert_used_count"), 2u);
    cr_expect_eq(u32(f, "qwen3moe.expert_feed_forward_length"), 256u);
    for (int i = 0; i < 4; i++) { /* use_more_bits(i, 4): layers 2 and 3 */
        ztype more = zmk_use_more_bits(i, 4) ? ZT_Q6_K : ZT_Q4_K;
        cr_expect_eq(tensor(f, "blk.%d.ffn_gate_inp.weight", i)->type, ZT_F32, "layer %d router", i);
        cr_expect_eq(tensor(f, "blk.%d.ffn_down_exps.weight", i)->type, more, "layer %d ffn_down_exps", i);
        cr_expect_eq(tensor(f, "blk.%d.ffn_gate_exps.weight", i)->type, ZT_Q4_K, "layer %d gate_exps", i);
        cr_expect_eq(tensor(f, "blk.%d.ffn_up_exps.weight", i)->type, ZT_Q4_K, "layer %d up_exps", i);
        cr_expect_eq(tensor(f, "blk.%d.attn_v.weight", i)->type, ZT_Q8_0, "layer %d attn_v (8 experts)", i);
        cr_expect_eq(tensor(f, "blk.%d.attn_k.weight", i)->type, ZT_Q8_0, "layer %d attn_k (8 experts)", i);
        cr_expect_eq(tensor(f, "blk.%d.attn_output.weight", i)->type, ZT_Q5_K, "layer %d attn_output", i);
        cr_expect_eq(tensor(f, "blk.%d.attn_q_norm.weight", i)->type, ZT_F32, "layer %d q norm", i);
    }
    gguf_close(f);
    o.experts = 4, o.expert_ff = 64, o.quant = ZMK_Q4_K_M; /* no n_expert == 8 rule; 64 falls back to q5_0 */
    f = make(&o, "moe4.gguf", NULL);
    for (int i = 0; i < 4; i++) {
        ztype more = zmk_use_more_bits(i, 4) ? ZT_Q6_K : ZT_Q4_K;
        cr_expect_eq(tensor(f, "blk.%d.attn_v.weight", i)->type, more, "layer %d attn_v (4 experts)", i);
        cr_expect_eq(tensor(f, "blk.%d.attn_k.weight", i)->type, ZT_Q4_K, "layer %d attn_k (4 experts)", i);
        cr_expect_eq(tensor(f, "blk.%d.attn_output.weight", i)->type, ZT_Q4_K, "layer %d attn_output", i);
        cr_expect_eq(tensor(f, "blk.%d.ffn_down_exps.weight", i)->type,
                     zmk_use_more_bits(i, 4) ? ZT_Q8_0 : ZT_Q5_0, "layer %d ffn_down_exps (rows of 64)", i);
    }
    gguf_close(f);
    zdiag d = {0};
    o.experts_used = 5;
    cr_expect_eq(zmk_validate(&o, &d), ZE_INVALID);
    cr_expect(strstr(d.msg, "--experts-used: expected 1..4, found 5"), "%s", d.msg);
}

Test(mkmodel, qwen2_biases_and_llama_rope) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = ZMK_QWEN2;
    gguf_file *f = make(&o, "qwen2.gguf", NULL);
    const gguf_tensor *qb = tensor(f, "blk.%d.attn_q.bias", 1), *kb = tensor(f, "blk.%d.attn_k.bias", 1);
    expect_shape(qb, 4 * 64, 1);
    expect_shape(kb, 2 * 64, 1);
    expect_shape(tensor(f, "blk.%d.attn_v.bias", 1), 2 * 64, 1);
    cr_expect_eq(qb->type, ZT_F32);
    cr_expect_null(gguf_find_tensor(f, "blk.0.attn_q_norm.weight"));
    cr_expect_str_eq(str(f, "tokenizer.ggml.pre"), "qwen2");
    gguf_close(f);

    o.arch = ZMK_LLAMA;
    f = make(&o, "llama.gguf", NULL);
    cr_expect_eq(u32(f, "llama.rope.dimension_count"), 64u);
    cr_expect_eq(u32(f, "llama.vocab_size"), o.vocab);
    cr_expect_null(gguf_find_tensor(f, "blk.0.attn_q.bias"));
    cr_expect_null(gguf_find_tensor(f, "blk.0.attn_k_norm.weight"));
    cr_expect_str_eq(str(f, "tokenizer.ggml.pre"), "llama-bpe");
    gguf_close(f);
}

/* ---- tokenizer ---------------------------------------------------------- */

Test(mkmodel, byte_symbols_match_gpt2) {
    /* GPT-2's vocab.json: "!" is 0, "Ġ" (space) is 220, "Ċ" (newline) is 198. */
    cr_expect_eq(zmk_byte_id('!'), 0u);
    cr_expect_eq(zmk_byte_id(' '), 220u);
    cr_expect_eq(zmk_byte_id('\n'), 198u);
    char s[3];
    zmk_byte_symbol(' ', s);
    cr_expect_str_eq(s, "\xC4\xA0");
    zmk_byte_symbol('\n', s);
    cr_expect_str_eq(s, "\xC4\x8A");
    zmk_byte_symbol('a', s);
    cr_expect_str_eq(s, "a");
    bool seen[256] = {0};
    for (int b = 0; b < 256; b++) {
        uint32_t id = zmk_byte_id((uint8_t)b);
        cr_assert_lt(id, 256u);
        cr_expect_not(seen[id], "byte %d reuses id %u", b, id);
        seen[id] = true;
    }
}

static bool has_token(const gguf_value *toks, const char *s, size_t n) {
    for (uint64_t i = 0; i < toks->arr.n; i++)
        if (toks->arr.items[i].s.len == n && !memcmp(toks->arr.items[i].s.ptr, s, n)) return true;
    return false;
}

/* Every merge "l r" names two tokens, l+r is a token too, and no merge repeats. */
static void check_merges(const gguf_value *toks, const gguf_value *merges) {
    for (uint64_t m = 0; m < merges->arr.n; m++) {
        const char *s = merges->arr.items[m].s.ptr, *sp = strchr(s + 1, ' ');
        cr_assert(sp, "merge %llu '%s' has no separating space", (unsigned long long)m, s);
        size_t l = (size_t)(sp - s), r = strlen(sp + 1);
        char joined[256];
        cr_assert_lt(l + r, sizeof joined);
        memcpy(joined, s, l), memcpy(joined + l, sp + 1, r + 1);
        cr_expect(has_token(toks, s, l), "merge '%s': left part not a token", s);
        cr_expect(has_token(toks, sp + 1, r), "merge '%s': right part not a token", s);
        cr_expect(has_token(toks, joined, l + r), "merge '%s': result not a token", s);
        for (uint64_t k = 0; k < m; k++) /* a rank is a pair's only rank */
            cr_expect_str_neq(merges->arr.items[k].s.ptr, s, "merge '%s' appears twice", s);
    }
}

static void check_vocab(zmk_arch arch, uint32_t vocab, const char *const *specials, int n_sp) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = arch, o.vocab = vocab;
    gguf_file *f = make(&o, "vocab.gguf", NULL);
    const gguf_value *toks = arr(f, "tokenizer.ggml.tokens", GGUF_STRING);
    const gguf_value *types = arr(f, "tokenizer.ggml.token_type", GGUF_I32);
    const gguf_value *merges = arr(f, "tokenizer.ggml.merges", GGUF_STRING);
    cr_assert_eq(toks->arr.n, vocab);
    cr_assert_eq(types->arr.n, vocab);
    cr_expect_str_eq(str(f, "tokenizer.ggml.model"), "gpt2");
    cr_expect_gt(merges->arr.n, 100u, "the text should give more than 100 merges");
    check_merges(toks, merges);
    uint32_t bos = u32(f, "tokenizer.ggml.bos_token_id"), eos = u32(f, "tokenizer.ggml.eos_token_id");
    uint32_t pad = u32(f, "tokenizer.ggml.padding_token_id");
    int first = -1;
    for (uint64_t i = 0; i < toks->arr.n; i++)
        if (!strcmp(toks->arr.items[i].s.ptr, specials[0])) first = (int)i;
    cr_assert_geq(first, 256);
    for (int i = 0; i < n_sp; i++) {
        cr_expect_str_eq(toks->arr.items[first + i].s.ptr, specials[i]);
        cr_expect_eq(types->arr.items[first + i].i, 3, "%s must be CONTROL", specials[i]);
    }
    for (int i = 0; i < first; i++)
        cr_expect_eq(types->arr.items[i].i, 1, "token %d must be NORMAL", i);
    for (uint64_t i = (uint64_t)first + n_sp; i < vocab; i++) {
        char want[32];
        snprintf(want, sizeof want, "[PAD%llu]", (unsigned long long)i);
        cr_expect_str_eq(toks->arr.items[i].s.ptr, want);
        cr_expect_eq(types->arr.items[i].i, 5, "padding must be UNUSED");
    }
    bool add_bos = true;
    zdiag d = {0};
    cr_assert_eq(gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos, &d), ZOK, "%s", d.msg);
    const char *tmpl = str(f, "tokenizer.chat_template");
    if (arch == ZMK_LLAMA) {
        cr_expect_eq(bos, (uint32_t)first, "bos = <|begin_of_text|>");
        cr_expect_eq(eos, (uint32_t)first + 2, "eos = <|eot_id|>");
        cr_expect_eq(pad, (uint32_t)first + 1, "pad = <|end_of_text|>");
        cr_expect(add_bos);
        cr_expect(strstr(tmpl, "<|start_header_id|>") && strstr(tmpl, "<|end_header_id|>"));
    } else {
        cr_expect_eq(bos, (uint32_t)first, "bos = <|endoftext|>");
        cr_expect_eq(eos, (uint32_t)first + 2, "eos = <|im_end|>");
        cr_expect_eq(pad, (uint32_t)first, "pad = <|endoftext|>");
        cr_expect_not(add_bos);
        cr_expect(strstr(tmpl, "<|im_start|>") && strstr(tmpl, "<|im_end|>"));
    }
    gguf_close(f);
}

Test(mkmodel, qwen_vocabulary) {
    const char *const sp[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    check_vocab(ZMK_QWEN3, 400, sp, 3);
    check_vocab(ZMK_QWEN2, 2000, sp, 3); /* more than the text has merges for: padded */
}

Test(mkmodel, llama3_vocabulary) {
    const char *const sp[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
                              "<|end_header_id|>"};
    check_vocab(ZMK_LLAMA, 600, sp, 5);
}

Test(mkmodel, smallest_vocabulary_has_no_merges) {
    zarena *a = zarena_new();
    zmk_vocab v;
    zdiag d = {0};
    cr_assert_eq(zmk_build_vocab(ZMK_QWEN3, 259, a, &v, &d), ZOK, "%s", d.msg);
    cr_expect_eq(v.n_merges, 0u);
    cr_expect_eq(v.first_special, 256u);
    cr_expect_eq(zmk_build_vocab(ZMK_LLAMA, 260, a, &v, &d), ZE_INVALID);
    zarena_free(a);
}

Test(mkmodel, bpe_merges_frequent_pairs_first) {
    zarena *a = zarena_new();
    zmk_bpe b;
    zdiag d = {0};
    /* Words "abc", " abc", " ab", " ab": a+b occurs 4 times, then Ġ+ab 3 times; after
     * that no pair occurs twice ("ab"+"c" and "Ġab"+"c" once each). */
    cr_assert_eq(zmk_bpe_train("abc abc ab ab", 1, 10, a, &b, &d), ZOK, "%s", d.msg);
    cr_assert_eq(b.n_merges, 2u);
    cr_expect_str_eq(b.merges[0], "a b");
    cr_expect_str_eq(b.tokens[256], "ab");
    cr_expect_str_eq(b.merges[1], "\xC4\xA0 ab");
    zarena_free(a);
}

/* ---- weights ------------------------------------------------------------ */

static void stats(const gguf_tensor *t, double *mean, double *rms) {
    const float *x = (const float *)t->data;
    double s = 0, s2 = 0;
    for (uint64_t i = 0; i < t->n_elems; i++)
        s += x[i], s2 += (double)x[i] * x[i];
    *mean = s / t->n_elems;
    *rms = sqrt(s2 / t->n_elems);
}

Test(mkmodel, weight_scales) {
    zmk_opts o;
    zmk_defaults(&o);
    o.quant = ZMK_F32, o.layers = 4;
    gguf_file *f = make(&o, "scales.gguf", NULL);
    double mean, rms;
    stats(tensor(f, "blk.%d.attn_q.weight", 0), &mean, &rms); /* N(0,1)/sqrt(256) */
    cr_expect(fabs(rms - 1.0 / 16) < 0.05 / 16, "attn_q rms %g", rms);
    cr_expect(fabs(mean) < 0.01 / 16, "attn_q mean %g", mean);
    stats(tensor(f, "blk.%d.ffn_down.weight", 0), &mean, &rms); /* N(0,1)/sqrt(768 * 2 * 4) */
    cr_expect(fabs(rms - 1.0 / sqrt(768.0 * 8)) < 0.05 / sqrt(768.0 * 8), "ffn_down rms %g", rms);
    stats(tensor(f, "blk.%d.ffn_norm.weight", 3), &mean, &rms); /* 1 + 0.1 N(0,1) */
    cr_expect(fabs(mean - 1) < 0.03, "norm mean %g", mean);
    gguf_close(f);
}

/* ---- determinism -------------------------------------------------------- */

Test(mkmodel, same_seed_same_bytes) {
    zmk_opts o;
    zmk_defaults(&o);
    zdiag d = {0};
    const char *p1 = tu_tmp("det1.gguf"), *p2 = tu_tmp("det2.gguf"), *p3 = tu_tmp("det3.gguf");
    cr_assert_eq(zmk_write(&o, p1, NULL, &d), ZOK, "%s", d.msg);
    cr_assert_eq(zmk_write(&o, p2, NULL, &d), ZOK, "%s", d.msg);
    o.seed = 2;
    cr_assert_eq(zmk_write(&o, p3, NULL, &d), ZOK, "%s", d.msg);
    size_t n1, n2, n3;
    uint8_t *b1 = tu_read_file(p1, &n1), *b2 = tu_read_file(p2, &n2), *b3 = tu_read_file(p3, &n3);
    cr_assert(b1 && b2 && b3);
    cr_expect(n1 == n2 && !memcmp(b1, b2, n1), "same options, different bytes");
    cr_assert_eq(n1, n3, "a seed must not change the layout");
    /* The weights differ, not just the description string. */
    size_t diff = 0;
    for (size_t i = n1 / 2; i < n1; i++)
        diff += b1[i] != b3[i];
    cr_expect_gt(diff, n1 / 4, "seed 2 changed only %zu of the last %zu bytes", diff, n1 - n1 / 2);
    free(b1), free(b2), free(b3);
}

/* ---- errors ------------------------------------------------------------- */

static void expect_invalid(const zmk_opts *o, const char *needle) {
    zdiag d = {0};
    cr_expect_eq(zmk_validate(o, &d), ZE_INVALID, "expected ZE_INVALID for '%s'", needle);
    cr_expect(strstr(d.msg, needle), "message '%s' lacks '%s'", d.msg, needle);
}

Test(mkmodel, bad_options) {
    zmk_opts o;
    zmk_defaults(&o);
    zdiag d = {0};
    cr_assert_eq(zmk_validate(&o, &d), ZOK, "%s", d.msg);
    o.vocab = 258;
    expect_invalid(&o, "at least 259");
    zmk_defaults(&o), o.arch = ZMK_LLAMA, o.vocab = 260;
    expect_invalid(&o, "at least 261");
    zmk_defaults(&o), o.kv_heads = 3;
    expect_invalid(&o, "multiple of --kv-heads");
    zmk_defaults(&o), o.head_dim = 63;
    expect_invalid(&o, "even");
    zmk_defaults(&o), o.arch = ZMK_QWEN2, o.head_dim = 32;
    expect_invalid(&o, "heads * head-dim == hidden");
    zmk_defaults(&o), o.layers = 0;
    expect_invalid(&o, "--layers");
    zmk_defaults(&o), o.hidden = 1u << 30;
    expect_invalid(&o, "--hidden");
    /* zmk_write validates too and writes nothing. */
    const char *p = tu_tmp("never.gguf");
    remove(p);
    zmk_defaults(&o), o.ff = 0;
    cr_expect_eq(zmk_write(&o, p, NULL, &d), ZE_INVALID);
    size_t n;
    cr_expect_null(tu_read_file(p, &n));
}

Test(mkmodel, command_line) {
    char *out = NULL;
    const char *p = tu_tmp("cli.gguf");
    int rc = tu_run(&out, "%s/zinc mkmodel --arch llama --layers 1 --vocab 300 --quant q8_0 -o %s",
                    ZINC_BINARY_DIR, p);
    cr_expect_eq(rc, 0, "%s", out);
    free(out);
    rc = tu_run(&out, "%s/zinc mkmodel --help", ZINC_BINARY_DIR);
    cr_expect_eq(rc, 0);
    const char *flags[] = {"--arch",
                           "--layers",
                           "--hidden",
                           "--ff",
                           "--heads",
                           "--kv-heads",
                           "--head-dim",
                           "--vocab",
                           "--quant",
                           "--seed",
                           "--ctx",
                           "--tied",
                           "-o",
                           "--experts",
                           "--experts-used",
                           "--expert-ff",
                           "--full-attn-interval",
                           "--ssm-conv",
                           "--ssm-state",
                           "--ssm-groups",
                           "--ssm-heads",
                           "--rope-dim",
                           "--rope-sections",
                           "--shared-ff"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        cr_expect(strstr(out, flags[i]), "--help does not explain %s", flags[i]);
    free(out);
    const struct {
        const char *args, *needle;
    } bad[] = {{"--arch gpt5 -o x.gguf", "--arch"},
               {"--quant q3_k -o x.gguf", "--quant"},
               {"--layers two -o x.gguf", "--layers"},
               {"--layers 2", "-o"},
               {"--bogus -o x.gguf", "unknown option"},
               {"--vocab 10 -o x.gguf", "too small"},
               {"--arch qwen35 --rope-sections 1,2 -o x.gguf", "--rope-sections"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = tu_run(&out, "cd %s && %s/zinc mkmodel %s", tu_tmp("."), ZINC_BINARY_DIR, bad[i].args);
        cr_expect_neq(rc, 0, "'%s' should fail", bad[i].args);
        cr_expect(out && strstr(out, bad[i].needle), "'%s': output '%s' lacks '%s'", bad[i].args, out,
                  bad[i].needle);
        free(out);
    }
}
