/* Tests for runtime/chat: template recognition and rendering. The golden
 * strings are what llama.cpp renders (tests/llamacpp/harness MODEL chat on
 * the mkmodel qwen3 and llama models prints the first conversation below,
 * byte for byte). */
#include <criterion/criterion.h>
#include <string.h>

#include "frontend/gguf.h"
#include "frontend/mkmodel.h"
#include "runtime/chat.h"
#include "testutil.h"

static const zrt_chat_msg CONV[] = {{"system", "Be brief."}, {"user", "Hello!"}};

static const char *render(zrt_chat_format f, const zrt_chat_msg *m, size_t n, bool gen, zarena *a) {
    char *text;
    size_t len;
    zdiag d = {0};
    zstatus s = zrt_chat_render(f, m, n, gen, a, &text, &len, &d);
    cr_assert_eq(s, ZOK, "%s", d.msg);
    cr_assert_eq(strlen(text), len);
    return text;
}

Test(chat, golden_chatml) {
    zarena *a = zarena_new();
    cr_expect_str_eq(render(ZRT_CHAT_CHATML, CONV, 2, true, a),
                     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
                     "<|im_start|>assistant\n");
    zrt_chat_msg turn[] = {{"user", "  2+2?\n"}, {"assistant", "4"}, {"user", "and 3+3?"}};
    cr_expect_str_eq(render(ZRT_CHAT_CHATML, turn, 3, false, a),
                     "<|im_start|>user\n  2+2?\n<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
                     "<|im_start|>user\nand 3+3?<|im_end|>\n",
                     "ChatML keeps content as is");
    cr_expect_str_eq(render(ZRT_CHAT_CHATML, NULL, 0, true, a), "<|im_start|>assistant\n");
    zarena_free(a);
}

Test(chat, golden_llama3) {
    zarena *a = zarena_new();
    cr_expect_str_eq(render(ZRT_CHAT_LLAMA3, CONV, 2, true, a),
                     "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                     "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
                     "<|start_header_id|>assistant<|end_header_id|>\n\n");
    zrt_chat_msg turn[] = {{"user", " \t 2+2?\n\n"}, {"assistant", "4"}};
    cr_expect_str_eq(render(ZRT_CHAT_LLAMA3, turn, 2, false, a),
                     "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
                     "<|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|>",
                     "Llama 3 trims content (the template's | trim)");
    cr_expect_str_eq(render(ZRT_CHAT_LLAMA3, NULL, 0, false, a), "");
    zarena_free(a);
}

Test(chat, bad_messages) {
    zarena *a = zarena_new();
    char *text;
    size_t len;
    zdiag d = {0};
    zrt_chat_msg m[] = {{"user", NULL}};
    cr_expect_eq(zrt_chat_render(ZRT_CHAT_CHATML, m, 1, true, a, &text, &len, &d), ZE_INVALID);
    cr_expect(strstr(d.msg, "message 0 has no content"), "%s", d.msg);
    zarena_free(a);
}

/* Recognition by markers, in llama.cpp's order. */
Test(chat, detect) {
    static const struct {
        const char *tmpl;
        int want; /* a format, or -1 for "not supported" */
        const char *msg;
    } cases[] = {
        {"chatml", ZRT_CHAT_CHATML, NULL},
        {"llama3", ZRT_CHAT_LLAMA3, NULL},
        {"{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>'}}",
         ZRT_CHAT_CHATML, NULL},
        {"{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}", ZRT_CHAT_LLAMA3, NULL},
        /* ChatML wins over other markers, as in llama.cpp. */
        {"<|im_start|> [INST] <|start_header_id|><|end_header_id|>", ZRT_CHAT_CHATML, NULL},
        {"<|im_start|>{{ m }}<|im_sep|>", -1, "phi4"},
        {"[INST] <|start_header_id|><|end_header_id|>", -1, "mistral / llama2"},
        {"<start_of_turn>user", -1, "gemma"},
        {"<|start_header_id|> only one marker", -1, "is not a template zinc recognises"},
        {"{{ messages }}", -1, "(\"{{ messages }}\")"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zrt_chat_format f = ZRT_CHAT_COUNT;
        zdiag d = {0};
        zstatus s = zrt_chat_detect(cases[i].tmpl, &f, &d);
        if (cases[i].want >= 0) {
            cr_expect_eq(s, ZOK, "case %zu: %s", i, d.msg);
            cr_expect_eq((int)f, cases[i].want, "case %zu: detected %s", i, zrt_chat_name(f));
        } else {
            cr_expect_eq(s, ZE_UNSUPPORTED, "case %zu", i);
            cr_expect(strstr(d.msg, cases[i].msg), "case %zu: expected '%s' in: %s", i, cases[i].msg, d.msg);
            cr_expect(strstr(d.msg, "--template chatml") && strstr(d.msg, "--template llama3"),
                      "case %zu: the error names the fix: %s", i, d.msg);
        }
    }
    zrt_chat_format f;
    zdiag d = {0};
    cr_expect(zrt_chat_parse("llama3", &f, &d) == ZOK && f == ZRT_CHAT_LLAMA3);
    cr_expect_eq(zrt_chat_parse("vicuna", &f, &d), ZE_INVALID);
    cr_expect(strstr(d.msg, "expected chatml or llama3"), "%s", d.msg);
}

/* The templates mkmodel writes (Qwen2-Instruct's, a ChatML one, Meta-Llama-3's)
 * read back from real files, and the override. */
Test(chat, from_gguf) {
    const zmk_arch archs[] = {ZMK_QWEN3, ZMK_QWEN2, ZMK_LLAMA};
    const zrt_chat_format want[] = {ZRT_CHAT_CHATML, ZRT_CHAT_CHATML, ZRT_CHAT_LLAMA3};
    for (int i = 0; i < 3; i++) {
        zmk_opts o;
        zmk_defaults(&o);
        o.arch = archs[i], o.layers = 1, o.hidden = 64, o.ff = 128, o.heads = 2, o.kv_heads = 1,
        o.head_dim = 32;
        o.quant = ZMK_F32;
        const char *p = tu_tmp("chat.gguf");
        zdiag d = {0};
        cr_assert_eq(zmk_write(&o, p, NULL, &d), ZOK, "%s", d.msg);
        gguf_file *f;
        cr_assert_eq(gguf_open(p, &f, &d), ZOK, "%s", d.msg);
        zrt_chat_format got = ZRT_CHAT_COUNT;
        cr_expect_eq(zrt_chat_for_gguf(f, NULL, &got, &d), ZOK, "%s", d.msg);
        cr_expect_eq(got, want[i], "%s: detected %s", zmk_arch_name(archs[i]), zrt_chat_name(got));
        cr_expect_eq(zrt_chat_for_gguf(f, "llama3", &got, &d), ZOK);
        cr_expect_eq(got, ZRT_CHAT_LLAMA3, "--template overrides the file");
        gguf_close(f);
    }
    /* No template at all. */
    gguf_writer *w = gguf_writer_new();
    gguf_set_str(w, "general.architecture", "llama");
    const char *p = tu_tmp("notmpl.gguf");
    zdiag d = {0};
    cr_assert_eq(gguf_writer_write(w, p, &d), ZOK, "%s", d.msg);
    gguf_writer_free(w);
    gguf_file *f;
    cr_assert_eq(gguf_open(p, &f, &d), ZOK, "%s", d.msg);
    zrt_chat_format got;
    cr_expect_eq(zrt_chat_for_gguf(f, NULL, &got, &d), ZE_INVALID);
    cr_expect(strstr(d.msg, "no tokenizer.chat_template") && strstr(d.msg, "--template chatml"), "%s", d.msg);
    gguf_close(f);
}
