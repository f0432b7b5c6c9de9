/* Tests for runtime/tokenizer and runtime/unicode.
 *
 * Fixtures: three small models whose vocabularies are real-format ones:
 *   qwen3  byte-level BPE, pre qwen2, ChatML specials (frontend/mkmodel);
 *   llama  byte-level BPE, pre llama-bpe, Llama 3 specials, BOS added;
 *   spm    SentencePiece (model "llama"): the llama model with its vocabulary
 *          replaced by pieces made from the BPE tokens (spaces as U+2581,
 *          scores by merge order), <0xXX> byte tokens, and a user-defined token.
 * Each also exists vocab-only (metadata, no tensors). The expected ids in
 * tests/data/tokenizer_ids.txt come from llama.cpp (tests/llamacpp/
 * tokenize_compare.sh --update runs its harness on these same fixtures, which
 * the "fixtures" test writes to $ZINC_TOK_FIXTURES when that is set). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/gguf.h"
#include "frontend/mkmodel.h"
#include "runtime/tokenizer.h"
#include "runtime/unicode.h"
#include "testutil.h"

/* ---- fixtures ----------------------------------------------------------- */

typedef enum fx { FX_QWEN3, FX_LLAMA, FX_SPM, FX_COUNT } fx;
static const char *const FX_NAMES[FX_COUNT] = {"qwen3", "llama", "spm"};

static zmk_opts fx_opts(zmk_arch arch) {
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = arch;
    o.layers = 1, o.hidden = 64, o.ff = 128, o.heads = 2, o.kv_heads = 1, o.head_dim = 32;
    o.vocab = 1024, o.quant = ZMK_F32, o.seed = 7;
    return o;
}

/* Copies f's metadata (all of it, or all but tokenizer.*) and, if tensors,
 * its tensors into w. */
static void copy_gguf(gguf_writer *w, const gguf_file *f, bool keep_tokenizer, bool tensors) {
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kvs[i];
        if (!keep_tokenizer && !strncmp(kv->key, "tokenizer.", 10)) continue;
        gguf_set_value(w, kv->key, &kv->val);
    }
    for (uint64_t i = 0; tensors && i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
    }
}

/* The raw bytes a GPT-2-alphabet token stands for; false if they are not
 * valid UTF-8 (a piece must be text) or hold a control character. */
static bool gpt2_decode(const char *tok, char *out, size_t *n) {
    char sym[256][3];
    for (int b = 0; b < 256; b++)
        zmk_byte_symbol((uint8_t)b, sym[b]);
    *n = 0;
    for (size_t i = 0; tok[i];) {
        int found = -1;
        for (int b = 0; b < 256 && found < 0; b++)
            if (!strncmp(tok + i, sym[b], strlen(sym[b]))) found = b;
        cr_assert(found >= 0, "mkmodel token '%s' is not in the GPT-2 alphabet", tok);
        if (found < 0x20 || found == 0x7F) return false;
        out[(*n)++] = (char)found;
        i += strlen(sym[found]);
    }
    bool invalid;
    return zrt_tok_utf8_valid_prefix((const uint8_t *)out, *n, &invalid) == *n;
}

typedef struct spm_vocab {
    const char *tok[1024];
    float score[1024];
    int32_t type[1024];
    uint32_t n;
} spm_vocab;

static void spm_add(spm_vocab *v, zarena *a, const char *text, float score, int32_t type) {
    for (uint32_t i = 0; i < v->n; i++)
        if (!strcmp(v->tok[i], text)) return;
    cr_assert_lt(v->n, 1024u);
    v->tok[v->n] = zarena_strdup(a, text), v->score[v->n] = score, v->type[v->n] = type;
    v->n++;
}

/* text with ' ' as U+2581. */
static char *spm_escape(zarena *a, const char *s, size_t n) {
    char *out = zarena_alloc(a, 3 * n + 1), *o = out;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ' ')
            memcpy(o, "\xe2\x96\x81", 3), o += 3;
        else
            *o++ = s[i];
    *o = 0;
    return out;
}

static void build_spm(spm_vocab *v, zarena *a) {
    zmk_vocab bpe;
    zdiag d = {0};
    cr_assert_eq(zmk_build_vocab(ZMK_LLAMA, 1024, a, &bpe, &d), ZOK, "%s", d.msg);
    v->n = 0;
    spm_add(v, a, "<unk>", 0, 2);
    spm_add(v, a, "<s>", 0, 3);
    spm_add(v, a, "</s>", 0, 3);
    for (int b = 0; b < 256; b++)
        spm_add(v, a, zarena_printf(a, "<0x%02X>", b), 0, 6);
    spm_add(v, a, "<tool>", 0, 4); /* user-defined: split out even without parse_special */
    spm_add(v, a, "\xe2\x96\x81", -1000, 1);
    for (int c = 0x21; c < 0x7F; c++)
        spm_add(v, a, (char[2]){(char)c, 0}, -1000 - c, 1);
    const char *extra[] = {"\xc3\xa9", "\xe4\xb8\xad", "\xe6\x96\x87", "\xc3\xbc"}; /* é 中 文 ü */
    for (int i = 0; i < 4; i++)
        spm_add(v, a, extra[i], -2000 - i, 1);
    for (uint32_t i = 256; i < 256 + bpe.n_learned; i++) {
        char raw[256];
        size_t n;
        if (gpt2_decode(bpe.tokens[i], raw, &n)) spm_add(v, a, spm_escape(a, raw, n), -(float)(i - 255), 1);
    }
    while (v->n < 1024)
        spm_add(v, a, zarena_printf(a, "[PAD%u]", v->n), 0, 5);
}

static void write_or_die(gguf_writer *w, const char *path) {
    zdiag d = {0};
    zstatus s = gguf_writer_write(w, path, &d);
    gguf_writer_free(w);
    cr_assert_eq(s, ZOK, "writing %s: %s", path, d.msg);
}

/* mkmodel's corpus teaches no digit merges and every word is reachable by
 * merges, which would hide the digit grouping and Llama 3's ignore_merges.
 * So the last padding entries become digit tokens with their merges, and a
 * whole word that no merge makes. */
static void augment_bpe(gguf_writer *w, const gguf_file *f, zarena *a) {
    static const char *const extra_tok[] = {"12", "123", "45", "456", "\xc4\xa0Zyzzyva"}; /* Ġ = space */
    static const char *const extra_merge[] = {"1 2", "12 3", "4 5", "45 6"};
    const gguf_value *tv, *yv, *mv;
    zdiag d = {0};
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &tv, &d), ZOK, "%s", d.msg);
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_I32, &yv, &d), ZOK, "%s", d.msg);
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_STRING, &mv, &d), ZOK, "%s", d.msg);
    size_t n = tv->arr.n, nm = mv->arr.n;
    const char **tok = zarena_array(a, n, sizeof *tok), **mer = zarena_array(a, nm + 4, sizeof *mer);
    int32_t *type = zarena_array(a, n, sizeof *type);
    for (size_t i = 0; i < n; i++)
        tok[i] = tv->arr.items[i].s.ptr, type[i] = (int32_t)yv->arr.items[i].i;
    for (size_t i = 0; i < nm; i++)
        mer[i] = mv->arr.items[i].s.ptr;
    for (size_t i = 0; i < 5; i++) {
        cr_assert_eq(type[n - 5 + i], ZMK_TOK_UNUSED, "the fixture should end with padding");
        tok[n - 5 + i] = extra_tok[i], type[n - 5 + i] = ZMK_TOK_NORMAL;
    }
    for (size_t i = 0; i < 4; i++)
        mer[nm + i] = extra_merge[i];
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", tok, n);
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", type, n);
    gguf_set_arr_str(w, "tokenizer.ggml.merges", mer, nm + 4);
}

/* Writes <dir>/<name>.gguf and <dir>/<name>-vocab.gguf. */
static void write_fixture(fx k, const char *dir) {
    char path[600], vpath[600];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, FX_NAMES[k]);
    snprintf(vpath, sizeof vpath, "%s/%s-vocab.gguf", dir, FX_NAMES[k]);
    zmk_opts o = fx_opts(k == FX_QWEN3 ? ZMK_QWEN3 : ZMK_LLAMA);
    zdiag d = {0};
    char base[600];
    snprintf(base, sizeof base, "%s/%s-base.gguf", dir, FX_NAMES[k]);
    cr_assert_eq(zmk_write(&o, base, NULL, &d), ZOK, "%s", d.msg);
    gguf_file *f;
    cr_assert_eq(gguf_open(base, &f, &d), ZOK, "%s", d.msg);
    zarena *a = zarena_new();
    spm_vocab v;
    for (int vocab_only = 0; vocab_only < 2; vocab_only++) {
        gguf_writer *w = gguf_writer_new();
        copy_gguf(w, f, k != FX_SPM, !vocab_only);
        if (k != FX_SPM) {
            augment_bpe(w, f, a);
        } else {
            build_spm(&v, a);
            gguf_set_str(w, "tokenizer.ggml.model", "llama");
            gguf_set_arr_str(w, "tokenizer.ggml.tokens", v.tok, v.n);
            gguf_set_arr_f32(w, "tokenizer.ggml.scores", v.score, v.n);
            gguf_set_arr_i32(w, "tokenizer.ggml.token_type", v.type, v.n);
            gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
            gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
            gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
        }
        write_or_die(w, vocab_only ? vpath : path);
    }
    zarena_free(a);
    gguf_close(f);
    remove(base);
}

static const char *fixture_path(fx k, bool vocab_only) {
    static char path[FX_COUNT][2][600];
    char *p = path[k][vocab_only];
    if (!p[0]) {
        write_fixture(k, tu_tmp("."));
        snprintf(path[k][0], 600, "%s", tu_tmp(FX_NAMES[k]));
        strcat(path[k][0], ".gguf");
        snprintf(path[k][1], 600, "%s-vocab.gguf", tu_tmp(FX_NAMES[k]));
    }
    return p;
}

static zrt_tok *load(fx k, bool vocab_only) {
    zrt_tok *t = NULL;
    zdiag d = {0};
    zstatus s = zrt_tok_open(fixture_path(k, vocab_only), &t, &d);
    cr_assert_eq(s, ZOK, "loading the %s fixture: %s", FX_NAMES[k], d.msg);
    return t;
}

/* Writes the fixtures where tokenize_compare.sh asks for them (and checks
 * that both forms of each load either way). */
Test(fixtures, write) {
    const char *dir = getenv("ZINC_TOK_FIXTURES");
    if (dir) mkdir(dir, 0755);
    for (int k = 0; k < FX_COUNT; k++) {
        if (dir) write_fixture((fx)k, dir);
        for (int vo = 0; vo < 2; vo++) {
            zrt_tok *t = load((fx)k, vo);
            cr_expect_eq(zrt_tok_n_vocab(t), 1024u);
            zrt_tok_free(t);
        }
    }
    gguf_file *f;
    zdiag d = {0};
    cr_assert_eq(gguf_open(fixture_path(FX_SPM, true), &f, &d), ZOK, "%s", d.msg);
    cr_expect_eq(f->n_tensors, 0u, "a vocab-only fixture holds no tensors");
    gguf_close(f);
}

/* ---- helpers ------------------------------------------------------------ */

typedef struct ids {
    int32_t *v;
    size_t n;
    zarena *a;
} ids;

static ids enc(const zrt_tok *t, const char *text, size_t len, unsigned flags) {
    ids r = {.a = zarena_new()};
    zdiag d = {0};
    zstatus s = zrt_tok_encode(t, text, len, flags, r.a, &r.v, &r.n, &d);
    cr_assert_eq(s, ZOK, "encode: %s", d.msg);
    return r;
}

static ids enc_s(const zrt_tok *t, const char *text, unsigned flags) {
    return enc(t, text, strlen(text), flags);
}

static void ids_str(const ids *x, char *out, size_t cap) {
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < x->n && o + 12 < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, i ? ",%d" : "%d", x->v[i]);
    if (!x->n) snprintf(out, cap, "-");
}

static int32_t id_of(const zrt_tok *t, const char *text) {
    int32_t id = zrt_tok_find(t, text, strlen(text));
    cr_assert_neq(id, ZRT_TOK_NULL, "'%s' is not in the vocabulary", text);
    return id;
}

/* printf %b's escapes, as tests/data/tokenizer_ids.txt uses them. */
static size_t unescape(const char *s, char *out) {
    size_t o = 0;
    for (size_t i = 0; s[i]; i++) {
        if (s[i] != '\\' || !s[i + 1]) {
            out[o++] = s[i];
            continue;
        }
        char c = s[++i];
        if (c == 'x') {
            unsigned v = 0;
            int k = 0;
            for (; k < 2 && strchr("0123456789abcdefABCDEF", s[i + 1]) && s[i + 1]; k++, i++)
                v = v * 16 + (unsigned)(s[i + 1] <= '9' ? s[i + 1] - '0' : (s[i + 1] | 32) - 'a' + 10);
            cr_assert(k > 0, "bad \\x escape in '%s'", s);
            out[o++] = (char)v;
        } else {
            out[o++] = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
            cr_assert(strchr("ntr\\", c), "unexpected escape \\%c in '%s'", c, s);
        }
    }
    out[o] = 0;
    return o;
}

/* ---- ids from llama.cpp ------------------------------------------------- */

/* Every stored row, on the full fixture and on its vocab-only twin. */
Test(llamacpp, stored_ids) {
    char path[600];
    snprintf(path, sizeof path, "%s/tests/data/tokenizer_ids.txt", ZINC_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    zrt_tok *tok[FX_COUNT][2] = {{0}};
    int rows[FX_COUNT][2] = {{0}}, bad = 0;
    char line[4096], text[4096], got[8192];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        char *fxname = strtok(line, "\t"), *special = strtok(NULL, "\t"), *esc = strtok(NULL, "\t"),
             *want = strtok(NULL, "\t");
        if (want == NULL) want = esc, esc = ""; /* the empty text */
        cr_assert(fxname && special && want, "malformed row in %s", path);
        int k = 0;
        while (k < FX_COUNT && strcmp(FX_NAMES[k], fxname))
            k++;
        cr_assert_lt(k, FX_COUNT, "unknown fixture '%s'", fxname);
        size_t len = unescape(esc, text);
        unsigned flags = ZRT_TOK_ADD_SPECIAL | (special[0] == '1' ? ZRT_TOK_PARSE_SPECIAL : 0);
        for (int vo = 0; vo < 2; vo++) {
            if (!tok[k][vo]) tok[k][vo] = load((fx)k, vo);
            ids x = enc(tok[k][vo], text, len, flags);
            ids_str(&x, got, sizeof got);
            zarena_free(x.a);
            rows[k][special[0] == '1']++;
            if (strcmp(got, want)) bad++;
            cr_expect_str_eq(got, want, "%s%s special=%s [%s]", fxname, vo ? " (vocab-only)" : "", special,
                             esc);
        }
    }
    fclose(f);
    for (int k = 0; k < FX_COUNT; k++) {
        cr_expect_geq(rows[k][0], 2 * 30, "%s: too few plain rows", FX_NAMES[k]);
        cr_expect_geq(rows[k][1], 2 * 5, "%s: too few rows with special tokens", FX_NAMES[k]);
        for (int vo = 0; vo < 2; vo++)
            zrt_tok_free(tok[k][vo]);
    }
    cr_expect_eq(bad, 0);
}

/* The same ids through the command line, both directions. */
Test(cli, tokenize_and_detok) {
    char *out = NULL;
    const char *m = fixture_path(FX_LLAMA, false);
    int rc = tu_run(&out, "%s/zinc tokenize %s 'Hello world'", ZINC_BINARY_DIR, m);
    cr_assert_eq(rc, 0, "%s", out);
    zrt_tok *t = load(FX_LLAMA, false);
    ids x = enc_s(t, "Hello world", ZRT_TOK_ADD_SPECIAL);
    char want[256];
    ids_str(&x, want, sizeof want);
    strcat(want, "\n");
    cr_expect_str_eq(out, want);
    free(out);
    rc = tu_run(&out, "%s/zinc tokenize %s --detok %s", ZINC_BINARY_DIR, m, want);
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect_str_eq(out, "Hello world\n", "the BOS renders as nothing without --special");
    free(out);
    rc = tu_run(&out, "%s/zinc tokenize %s --special --detok %d,%d", ZINC_BINARY_DIR, m, zrt_tok_bos(t),
                id_of(t, "<|eot_id|>"));
    cr_expect_str_eq(out, "<|begin_of_text|><|eot_id|>\n");
    free(out);
    /* Without --special the text of a control token is ordinary text. */
    rc = tu_run(&out, "%s/zinc tokenize %s '<|eot_id|>'", ZINC_BINARY_DIR, m);
    cr_expect(rc == 0 && strlen(out) > 12, "%s", out);
    free(out);
    rc = tu_run(&out, "%s/zinc tokenize %s --special '<|eot_id|>'", ZINC_BINARY_DIR, m);
    snprintf(want, sizeof want, "%d,%d\n", zrt_tok_bos(t), id_of(t, "<|eot_id|>"));
    cr_expect_str_eq(out, want);
    free(out);
    zarena_free(x.a);
    zrt_tok_free(t);
}

/* A compiled plan stands for the GGUF it was compiled from. */
Test(cli, plan_argument) {
    const char *plan = tu_tmp("qwen3.zplan");
    char *out = NULL;
    int rc = tu_run(&out, "%s/zincc %s -o %s --target llvmpipe --ctx=64 --chunk 16", ZINC_BINARY_DIR,
                    fixture_path(FX_QWEN3, false), plan);
    cr_assert_eq(rc, 0, "zincc: %s", out);
    free(out);
    rc = tu_run(&out, "%s/zinc tokenize %s 'Hello world 123'", ZINC_BINARY_DIR, plan);
    cr_assert_eq(rc, 0, "%s", out);
    zrt_tok *t = load(FX_QWEN3, false);
    ids x = enc_s(t, "Hello world 123", ZRT_TOK_ADD_SPECIAL);
    char want[256];
    ids_str(&x, want, sizeof want);
    strcat(want, "\n");
    cr_expect_str_eq(out, want);
    free(out);
    /* Once the GGUF is gone, the message says which file the plan wanted. */
    cr_assert_eq(remove(fixture_path(FX_QWEN3, false)), 0);
    rc = tu_run(&out, "%s/zinc tokenize %s x", ZINC_BINARY_DIR, plan);
    cr_expect_neq(rc, 0);
    cr_expect(strstr(out, "the GGUF this plan was compiled from") && strstr(out, "cannot open") &&
                  strstr(out, "qwen3.gguf") && strstr(out, "--gguf"),
              "%s", out);
    free(out);
    zarena_free(x.a);
    zrt_tok_free(t);
}

Test(cli, errors) {
    static const struct {
        const char *args, *msg;
    } cases[] = {
        {"", "no model given"},
        {"%s", "expected exactly one of TEXT, --file or --detok"},
        {"%s a b", "unexpected argument 'b'"},
        {"%s --detok 1,x", "--detok expects ids"},
        {"%s --detok 99999", "detokenize: token 99999 at position 0: expected 0..1023"},
        {"%s --bogus x", "unknown option '--bogus'"},
        {"/nonexistent.gguf x", "cannot open /nonexistent.gguf: No such file"},
    };
    const char *m = fixture_path(FX_QWEN3, true);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[700], *out = NULL;
        snprintf(args, sizeof args, cases[i].args, m);
        int rc = tu_run(&out, "%s/zinc tokenize %s", ZINC_BINARY_DIR, args);
        cr_expect_neq(rc, 0, "'%s' should fail", args);
        cr_expect(strstr(out, cases[i].msg), "'%s': expected '%s' in: %s", args, cases[i].msg, out);
        free(out);
    }
    /* A file that is neither a GGUF nor a plan. */
    const char *junk = tu_tmp("junk.bin");
    cr_assert_eq(tu_write_file(junk, "hello, not a model", 18), 0);
    char *out = NULL;
    int rc = tu_run(&out, "%s/zinc tokenize %s x", ZINC_BINARY_DIR, junk);
    cr_expect_neq(rc, 0);
    cr_expect(strstr(out, "neither a plan nor a GGUF"), "%s", out);
    free(out);
}

Test(cli, file_input) {
    const char *p = tu_tmp("input.txt");
    const char text[] = "line one\nline two\n\xff\x00 bytes"; /* a NUL cannot travel in argv */
    cr_assert_eq(tu_write_file(p, text, sizeof text - 1), 0);
    char *out = NULL;
    int rc = tu_run(&out, "%s/zinc tokenize %s --file %s", ZINC_BINARY_DIR, fixture_path(FX_SPM, true), p);
    cr_assert_eq(rc, 0, "%s", out);
    zrt_tok *t = load(FX_SPM, true);
    ids x = enc(t, text, sizeof text - 1, ZRT_TOK_ADD_SPECIAL);
    char want[2048];
    ids_str(&x, want, sizeof want);
    strcat(want, "\n");
    cr_expect_str_eq(out, want);
    free(out);
    zarena_free(x.a);
    zrt_tok_free(t);
}

/* ---- Unicode ------------------------------------------------------------ */

Test(unicode, categories) {
    static const struct {
        uint32_t cp;
        int cat;
    } cases[] = {
        {'A', ZRT_UC_L},       {'z', ZRT_UC_L},     {'5', ZRT_UC_N},    {' ', ZRT_UC_Z},
        {'\n', ZRT_UC_C},      {'$', ZRT_UC_S},     {'!', ZRT_UC_P},    {0xE9, ZRT_UC_L},
        {0x4E2D, ZRT_UC_L},    {0x0663, ZRT_UC_N},  {0x2163, ZRT_UC_N}, {0x0301, ZRT_UC_M},
        {0x1F600, ZRT_UC_S},   {0x3000, ZRT_UC_Z},  {0xE000, ZRT_UC_C}, {0xD800, ZRT_UC_C},
        {0x0378, ZRT_UC_CN},   {0x2EBF0, ZRT_UC_L}, {0x31EF, ZRT_UC_S}, {0x10FFFF, ZRT_UC_CN},
        {0x110000, ZRT_UC_CN}, {0xAC00, ZRT_UC_L},  {0xFF10, ZRT_UC_N}, {0x00B2, ZRT_UC_N},
        {0x200D, ZRT_UC_C},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_eq(zrt_tok_ucat(cases[i].cp), cases[i].cat, "U+%04X: expected %d, found %d", cases[i].cp,
                     cases[i].cat, zrt_tok_ucat(cases[i].cp));
    /* The table is sorted, starts at 0 and never repeats a category. */
    cr_expect_eq(zrt_tok_ucd_ranges[0] >> 4, 0u);
    for (uint32_t i = 1; i < zrt_tok_ucd_n_ranges; i++) {
        cr_expect_gt(zrt_tok_ucd_ranges[i] >> 4, zrt_tok_ucd_ranges[i - 1] >> 4);
        cr_expect_neq(zrt_tok_ucd_ranges[i] & 15, zrt_tok_ucd_ranges[i - 1] & 15);
    }
    uint32_t space[] = {9,      10,     11,     12,     13,     32,     0x85,   0xA0,
                        0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
    for (size_t i = 0; i < sizeof space / sizeof space[0]; i++)
        cr_expect(zrt_tok_is_space(space[i]), "U+%04X is White_Space", space[i]);
    uint32_t not_space[] = {0, 8, 14, 0x1C, 0x200B, 0x180E, 0xFEFF, 'a'};
    for (size_t i = 0; i < sizeof not_space / sizeof not_space[0]; i++)
        cr_expect(!zrt_tok_is_space(not_space[i]), "U+%04X is not White_Space", not_space[i]);
}

static void expect_decode(const char *s, size_t n, const uint32_t *want, size_t n_want) {
    size_t i = 0, k = 0;
    while (i < n) {
        uint32_t cp = zrt_tok_utf8_next((const uint8_t *)s, n, &i);
        cr_assert_lt(k, n_want, "too many code points");
        cr_expect_eq(cp, want[k], "code point %zu: expected U+%04X, found U+%04X", k, want[k], cp);
        k++;
    }
    cr_expect_eq(k, n_want);
}

Test(unicode, lenient_decoder) {
    expect_decode("a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", 10, (uint32_t[]){'a', 0xE9, 0x4E2D, 0x1F600}, 4);
    /* Each undecodable byte is one U+FFFD; the decoder moves on by one byte. */
    expect_decode("\xff\x80"
                  "a\xe4\xb8",
                  5, (uint32_t[]){0xFFFD, 0xFFFD, 'a', 0xFFFD, 0xFFFD}, 5);
    /* As llama.cpp: overlong forms, surrogates and values past U+10FFFF pass. */
    expect_decode("\xc0\x80\xed\xa0\x80\xf4\x90\x80\x80", 9, (uint32_t[]){0, 0xD800, 0x110000}, 3);
    uint8_t b[4];
    cr_expect_eq(zrt_tok_utf8_put(0x110000, b), 0u);
    cr_expect_eq(zrt_tok_utf8_put(0x10FFFF, b), 4u);
    bool inv;
    cr_expect_eq(zrt_tok_utf8_valid_prefix((const uint8_t *)"ab\xe4\xb8", 4, &inv), 2u);
    cr_expect(!inv, "an incomplete character at the end may still complete");
    cr_expect_eq(zrt_tok_utf8_valid_prefix((const uint8_t *)"ab\xe4x", 4, &inv), 2u);
    cr_expect(inv);
    cr_expect_eq(zrt_tok_utf8_valid_prefix((const uint8_t *)"\xc0\x80", 2, &inv), 0u);
    cr_expect(inv, "overlong forms are not valid output");
    cr_expect_eq(zrt_tok_utf8_valid_prefix((const uint8_t *)"\xed\xa0\x80", 3, &inv), 0u);
    cr_expect(inv, "surrogates are not valid output");
}

/* The words of a UTF-8 string, joined by '|'. */
static void split(const char *s, int digits, char *out) {
    size_t n = 0, len = strlen(s);
    uint32_t cp[256], lens[256];
    for (size_t i = 0; i < len;)
        cp[n++] = zrt_tok_utf8_next((const uint8_t *)s, len, &i);
    size_t nw = zrt_tok_split_words(cp, n, digits, lens), at = 0, o = 0;
    for (size_t w = 0; w < nw; w++) {
        if (w) out[o++] = '|';
        for (uint32_t k = 0; k < lens[w]; k++)
            o += zrt_tok_utf8_put(cp[at + k], (uint8_t *)out + o);
        at += lens[w];
    }
    out[o] = 0;
}

Test(unicode, pretokenizer_split) {
    static const struct {
        const char *in;
        int digits;
        const char *want;
    } cases[] = {
        {"Hello world", 1, "Hello| world"},
        {"1234567", 1, "1|2|3|4|5|6|7"},
        {"1234567", 3, "123|456|7"},
        {"x12345y", 3, "x|123|45|y"},
        {"I'm he'LL it'S", 3, "I|'m| he|'LL| it|'S"},
        {"'x'", 1, "'x|'"},
        {"a   b", 1, "a|  | b"},
        {"a   ", 1, "a|   "},
        {"a \n\n b", 1, "a| \n\n| b"},
        {"x\r\n\ty", 1, "x|\r\n|\ty"},
        {"foo()...\n\nbar", 1, "foo|()...\n\n|bar"},
        {" !!", 1, " !!"},
        {"中文，世界", 1, "中文|，世界"}, /* [^\r\n\p{L}\p{N}]? leads a letter run */
        {"é😀😀x", 1, "é|😀😀|x"},
        {"\xe3\x80\x80x", 1, "\xe3\x80\x80x"}, /* U+3000 is not \r or \n: it may lead a word */
        {"", 1, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char got[512];
        split(cases[i].in, cases[i].digits, got);
        cr_expect_str_eq(got, cases[i].want, "split(\"%s\", %d)", cases[i].in, cases[i].digits);
    }
}

/* ---- encoding rules ----------------------------------------------------- */

/* BOS as the metadata says: Llama 3 and SentencePiece add it, Qwen does not;
 * EOS never unless add_eos_token. Without ADD_SPECIAL, neither. */
Test(encode, bos_eos) {
    zrt_tok *q = load(FX_QWEN3, true), *l = load(FX_LLAMA, true), *s = load(FX_SPM, true);
    cr_expect(!zrt_tok_add_bos(q) && zrt_tok_add_bos(l) && zrt_tok_add_bos(s));
    cr_expect_eq(zrt_tok_bos(l), id_of(l, "<|begin_of_text|>"));
    cr_expect_eq(zrt_tok_bos(s), id_of(s, "<s>"));
    cr_expect_eq(zrt_tok_eos(q), id_of(q, "<|im_end|>"));
    cr_expect_eq(zrt_tok_eos(s), id_of(s, "</s>"));
    zrt_tok *all[] = {q, l, s};
    for (int k = 0; k < 3; k++) {
        ids with = enc_s(all[k], "hi there", ZRT_TOK_ADD_SPECIAL), without = enc_s(all[k], "hi there", 0);
        bool bos = zrt_tok_add_bos(all[k]);
        cr_expect_eq(with.n, without.n + bos, "%s", FX_NAMES[k]);
        if (bos) cr_expect_eq(with.v[0], zrt_tok_bos(all[k]));
        cr_expect(!memcmp(with.v + bos, without.v, without.n * sizeof *without.v));
        cr_expect_neq(with.v[with.n - 1], zrt_tok_eos(all[k]));
        zarena_free(with.a), zarena_free(without.a);
        /* The empty text: only what ADD_SPECIAL adds. */
        ids e = enc_s(all[k], "", ZRT_TOK_ADD_SPECIAL);
        cr_expect_eq(e.n, (size_t)bos);
        zarena_free(e.a);
    }
    zrt_tok_free(q), zrt_tok_free(l), zrt_tok_free(s);
}

/* Rewrites a fixture's vocab-only file with some metadata changed. */
static const char *variant(fx k, const char *name, void (*edit)(gguf_writer *)) {
    gguf_file *f;
    zdiag d = {0};
    cr_assert_eq(gguf_open(fixture_path(k, true), &f, &d), ZOK, "%s", d.msg);
    gguf_writer *w = gguf_writer_new();
    copy_gguf(w, f, true, false);
    edit(w);
    const char *path = tu_tmp(name);
    write_or_die(w, path);
    gguf_close(f);
    return path;
}

static void add_eos_no_bos(gguf_writer *w) {
    gguf_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    gguf_set_bool(w, "tokenizer.ggml.add_eos_token", true);
}

Test(encode, metadata_flags) {
    zrt_tok *t;
    zdiag d = {0};
    cr_assert_eq(zrt_tok_open(variant(FX_LLAMA, "eos.gguf", add_eos_no_bos), &t, &d), ZOK, "%s", d.msg);
    ids x = enc_s(t, "hi", ZRT_TOK_ADD_SPECIAL);
    cr_assert_geq(x.n, 2u);
    cr_expect_neq(x.v[0], zrt_tok_bos(t));
    cr_expect_eq(x.v[x.n - 1], zrt_tok_eos(t));
    zarena_free(x.a);
    zrt_tok_free(t);
}

/* Special-token text is split out only with PARSE_SPECIAL (control tokens)
 * but always for user-defined ones, longest first, at any position. */
Test(encode, special_tokens) {
    zrt_tok *q = load(FX_QWEN3, true), *s = load(FX_SPM, true);
    int32_t start = id_of(q, "<|im_start|>"), end = id_of(q, "<|im_end|>"), eot = id_of(q, "<|endoftext|>");
    ids a = enc_s(q, "<|im_start|>a<|im_end|><|endoftext|>", ZRT_TOK_PARSE_SPECIAL);
    cr_assert_geq(a.n, 4u);
    cr_expect(a.v[0] == start && a.v[a.n - 2] == end && a.v[a.n - 1] == eot);
    ids b = enc_s(q, "<|im_start|>a<|im_end|><|endoftext|>", 0);
    for (size_t i = 0; i < b.n; i++)
        cr_expect(b.v[i] != start && b.v[i] != end && b.v[i] != eot, "control token %d without PARSE_SPECIAL",
                  b.v[i]);
    int32_t tool = id_of(s, "<tool>");
    cr_expect_eq(zrt_tok_attr(s, tool), (unsigned)ZRT_TOK_ATTR_USER_DEFINED);
    ids c = enc_s(s, "a<tool>b", 0);
    size_t found = 0;
    for (size_t i = 0; i < c.n; i++)
        found += c.v[i] == tool;
    cr_expect_eq(found, 1u, "user-defined tokens are split out even without PARSE_SPECIAL");
    zarena_free(a.a), zarena_free(b.a), zarena_free(c.a);
    zrt_tok_free(q), zrt_tok_free(s);
}

/* A chat prompt: the template's markers become control tokens, the text a
 * user typed (a guarded span) stays text even where it spells a marker. */
Test(encode, guarded_spans) {
    zrt_tok *q = load(FX_QWEN3, true);
    int32_t start = id_of(q, "<|im_start|>"), end = id_of(q, "<|im_end|>");
    const char *text = "<|im_start|>user\nhi<|im_end|>x<|im_end|>\n";
    zrt_tok_span user = {strlen("<|im_start|>user\n"), strlen("hi<|im_end|>x")};
    ids g = {.a = zarena_new()};
    zdiag d = {0};
    cr_assert_eq(
        zrt_tok_encode_guarded(q, text, strlen(text), ZRT_TOK_PARSE_SPECIAL, &user, 1, g.a, &g.v, &g.n, &d),
        ZOK, "%s", d.msg);
    size_t starts = 0, ends = 0;
    for (size_t i = 0; i < g.n; i++)
        starts += g.v[i] == start, ends += g.v[i] == end;
    cr_expect(starts == 1 && ends == 1 && g.v[0] == start && g.v[g.n - 2] == end,
              "the user's <|im_end|> became a control token (%zu, %zu)", starts, ends);
    /* The same ids as the pieces between the markers, tokenized as text. */
    ids mid = enc_s(q, "user\nhi<|im_end|>x", 0), nl = enc_s(q, "\n", 0);
    cr_assert_eq(g.n, mid.n + nl.n + 2);
    cr_expect(!memcmp(g.v + 1, mid.v, mid.n * sizeof *g.v) &&
                  !memcmp(g.v + 2 + mid.n, nl.v, nl.n * sizeof *g.v),
              "the guarded text tokenizes as plain text");
    zarena_free(g.a), zarena_free(mid.a), zarena_free(nl.a);
    zrt_tok_free(q);
}

/* llama.cpp's load-time overrides: a FIM token the GGUF types as
 * user-defined is a control token (not split without PARSE_SPECIAL), FIM
 * pad / repo / file separator end generation, so does <eos>. */
static void fim_tokens(gguf_writer *w) {
    static const char *const extra[] = {"<|fim_prefix|>", "<|fim_pad|>", "<|file_sep|>", "<eos>"};
    gguf_file *f;
    zdiag d = {0};
    cr_assert_eq(gguf_open(fixture_path(FX_QWEN3, true), &f, &d), ZOK, "%s", d.msg);
    const gguf_value *tv, *yv;
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &tv, &d), ZOK, "%s", d.msg);
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_I32, &yv, &d), ZOK, "%s", d.msg);
    size_t n = tv->arr.n;
    const char **tok = malloc(n * sizeof *tok);
    int32_t *type = malloc(n * sizeof *type);
    for (size_t i = 0; i < n; i++)
        tok[i] = tv->arr.items[i].s.ptr, type[i] = (int32_t)yv->arr.items[i].i;
    size_t k = 0; /* in place of the last padding tokens */
    for (size_t i = n; i-- > 0 && k < 4;)
        if (type[i] == ZMK_TOK_UNUSED) tok[i] = extra[k++], type[i] = 4; /* llama_token_type USER_DEFINED */
    cr_assert_eq(k, 4u, "the fixture should have padding");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", tok, n);
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", type, n);
    free(tok), free(type);
    gguf_close(f);
}

Test(encode, control_looking_overrides) {
    zrt_tok *t;
    zdiag d = {0};
    cr_assert_eq(zrt_tok_open(variant(FX_QWEN3, "fim.gguf", fim_tokens), &t, &d), ZOK, "%s", d.msg);
    int32_t pre = id_of(t, "<|fim_prefix|>"), pad = id_of(t, "<|fim_pad|>"), sep = id_of(t, "<|file_sep|>");
    cr_expect(zrt_tok_attr(t, pre) & ZRT_TOK_ATTR_CONTROL, "<|fim_prefix|> is a control token");
    ids a = enc_s(t, "a<|fim_prefix|>b", 0), b = enc_s(t, "a<|fim_prefix|>b", ZRT_TOK_PARSE_SPECIAL);
    for (size_t i = 0; i < a.n; i++)
        cr_expect_neq(a.v[i], pre, "split on <|fim_prefix|> without PARSE_SPECIAL");
    cr_expect(b.n == 3 && b.v[1] == pre, "not split on <|fim_prefix|> with PARSE_SPECIAL");
    cr_expect(zrt_tok_is_eog(t, pad) && zrt_tok_is_eog(t, sep) && zrt_tok_is_eog(t, id_of(t, "<eos>")));
    cr_expect(!zrt_tok_is_eog(t, pre));
    zarena_free(a.a), zarena_free(b.a);
    zrt_tok_free(t);
}

/* End of generation: EOS, EOT and the ends llama.cpp knows by their text. */
Test(encode, end_of_generation) {
    zrt_tok *q = load(FX_QWEN3, true), *l = load(FX_LLAMA, true);
    cr_expect_eq(zrt_tok_eot(q), id_of(q, "<|im_end|>"));
    cr_expect(zrt_tok_is_eog(q, id_of(q, "<|im_end|>")) && zrt_tok_is_eog(q, id_of(q, "<|endoftext|>")));
    cr_expect(!zrt_tok_is_eog(q, id_of(q, "<|im_start|>")));
    cr_expect_eq(zrt_tok_eot(l), id_of(l, "<|eot_id|>"));
    cr_expect(zrt_tok_is_eog(l, id_of(l, "<|eot_id|>")) && zrt_tok_is_eog(l, id_of(l, "<|end_of_text|>")));
    cr_expect(!zrt_tok_is_eog(l, zrt_tok_bos(l)) && !zrt_tok_is_eog(l, -1) && !zrt_tok_is_eog(l, 1 << 20));
    zrt_tok_free(q), zrt_tok_free(l);
}

/* A four-byte form past U+10FFFF makes llama.cpp throw (it cannot encode the
 * code point again); zinc tokenizes it as U+FFFD, what the decoder gives for
 * other bad bytes. SentencePiece does not decode and takes the bytes. */
Test(encode, beyond_unicode) {
    zrt_tok *q = load(FX_QWEN3, true);
    ids a = enc_s(q, "x\xf4\x90\x80\x80y", 0), b = enc_s(q, "x\xef\xbf\xbdy", 0);
    cr_assert_eq(a.n, b.n);
    cr_expect(!memcmp(a.v, b.v, a.n * sizeof *a.v));
    zarena_free(a.a), zarena_free(b.a);
    zrt_tok_free(q);
}

/* The digit rules, at the token level (the fixtures have the tokens "12",
 * "123", "45", "456" and their merges): Qwen's pre-tokenizer splits digits
 * one by one, so they never merge; Llama 3's keeps runs of up to 3. */
static void expect_pieces(const zrt_tok *t, const char *text, const char *const *want, size_t n_want) {
    ids x = enc_s(t, text, 0);
    cr_assert_eq(x.n, n_want, "\"%s\": expected %zu tokens, found %zu", text, n_want, x.n);
    for (size_t i = 0; i < x.n; i++) {
        const char *p;
        size_t n = zrt_tok_piece(t, x.v[i], false, &p);
        cr_expect(n == strlen(want[i]) && !memcmp(p, want[i], n),
                  "\"%s\": token %zu is \"%.*s\", expected \"%s\"", text, i, (int)n, p, want[i]);
    }
    zarena_free(x.a);
}

Test(encode, digit_groups) {
    zrt_tok *q = load(FX_QWEN3, true), *l = load(FX_LLAMA, true);
    expect_pieces(q, "1234567", (const char *[]){"1", "2", "3", "4", "5", "6", "7"}, 7);
    expect_pieces(l, "1234567", (const char *[]){"123", "456", "7"}, 3);
    expect_pieces(l, "12 4567", (const char *[]){"12", " ", "456", "7"}, 4);
    /* Llama 3 keeps a word whole when it is a token, whatever the merges say. */
    expect_pieces(l, " Zyzzyva", (const char *[]){" Zyzzyva"}, 1);
    ids x = enc_s(q, " Zyzzyva", 0);
    cr_expect_gt(x.n, 1u, "Qwen goes by the merges, which do not make the word");
    zarena_free(x.a);
    zrt_tok_free(q), zrt_tok_free(l);
}

/* ---- decoding ----------------------------------------------------------- */

/* Random valid UTF-8 from a mix of scripts, spaces and digits (seeded). */
static size_t random_text(tu_rng *r, char *out, size_t max_parts) {
    static const char *const parts[] = {
        " ",   "  ",       "\n",           "\t",    "a",    "Z",  "the",      "'s",
        "'LL", "0",        "42",           "12345", ".",    ",",  "!",        "?",
        "(",   "中",       "文",           "é",     "ß",    "😀",  "👍🏽", "한",
        "Ω",   "\xc2\xa0", "\xe3\x80\x80", "<|",    "|>",   "<s", "x'",       "--",
        "\\",  "\r",       "..",           "ünï",   "naïve"};
    size_t n = 0, k = 1 + tu_next(r) % max_parts;
    for (size_t i = 0; i < k; i++) {
        const char *p = parts[tu_next(r) % (sizeof parts / sizeof parts[0])];
        memcpy(out + n, p, strlen(p)), n += strlen(p);
    }
    out[n] = 0;
    return n;
}

static char *detok(const zrt_tok *t, const ids *x, unsigned flags, size_t *len) {
    char *text;
    zdiag d = {0};
    zstatus s = zrt_tok_detokenize(t, x->v, x->n, flags, x->a, &text, len, &d);
    cr_assert_eq(s, ZOK, "%s", d.msg);
    return text;
}

/* Byte-level BPE loses nothing: the pieces of the ids are the text, for all
 * three fixtures, and detokenize gives it back where no clean-up applies
 * (Qwen; SentencePiece without BOS, where the added space is removed). */
Test(decode, round_trips) {
    tu_rng r = tu_rng_seed(42);
    zrt_tok *t[FX_COUNT];
    for (int k = 0; k < FX_COUNT; k++)
        t[k] = load((fx)k, true);
    char text[512];
    for (int iter = 0; iter < 300; iter++) {
        size_t n = random_text(&r, text, 16);
        for (int k = 0; k < FX_COUNT; k++) {
            ids x = enc(t[k], text, n, 0);
            char joined[2048];
            size_t o = 0;
            for (size_t i = 0; i < x.n; i++) {
                const char *p;
                size_t pl = zrt_tok_piece(t[k], x.v[i], false, &p);
                memcpy(joined + o, p, pl), o += pl;
            }
            size_t skip = k == FX_SPM ? 1 : 0; /* SentencePiece's added space */
            cr_expect(o == n + skip && !memcmp(joined + skip, text, n), "%s: pieces of \"%s\"", FX_NAMES[k],
                      text);
            if (k != FX_LLAMA) {
                size_t len;
                char *back = detok(t[k], &x, 0, &len);
                cr_expect(len == n && !memcmp(back, text, n), "%s: detokenize(\"%s\") = \"%s\"", FX_NAMES[k],
                          text, back);
            }
            zarena_free(x.a);
        }
    }
    for (int k = 0; k < FX_COUNT; k++)
        zrt_tok_free(t[k]);
}

Test(decode, special_and_cleanup) {
    zrt_tok *l = load(FX_LLAMA, true), *q = load(FX_QWEN3, true), *s = load(FX_SPM, true);
    size_t len;
    /* Llama 3 (clean_up_tokenization_spaces): spaces before , . ! ? go, and
     * before 's 'm 're 've, not 't 'd 'll. */
    ids a = enc_s(l, "Hello , world . Is it ? It 's I 'm we 're they 've don 't he 'd she 'll a ' b", 0);
    cr_expect_str_eq(detok(l, &a, 0, &len),
                     "Hello, world. Is it? It's I'm we're they've don 't he 'd she 'll a'b");
    ids b = enc_s(q, "Hello , world .", 0);
    cr_expect_str_eq(detok(q, &b, 0, &len), "Hello , world .", "Qwen keeps spaces");
    /* Control tokens: rendered only with UNPARSE_SPECIAL; REMOVE_SPECIAL drops the added BOS. */
    ids c = enc_s(l, "<|start_header_id|>hi", ZRT_TOK_ADD_SPECIAL | ZRT_TOK_PARSE_SPECIAL);
    cr_expect_str_eq(detok(l, &c, 0, &len), "hi");
    cr_expect_str_eq(detok(l, &c, ZRT_TOK_UNPARSE_SPECIAL, &len), "<|begin_of_text|><|start_header_id|>hi");
    cr_expect_str_eq(detok(l, &c, ZRT_TOK_UNPARSE_SPECIAL | ZRT_TOK_REMOVE_SPECIAL, &len),
                     "<|start_header_id|>hi");
    /* SentencePiece: the first piece's space is removed unless a BOS was dropped
     * before it (llama.cpp's rule, kept as is). */
    ids e = enc_s(s, "Hello world", ZRT_TOK_ADD_SPECIAL);
    cr_expect_str_eq(detok(s, &e, 0, &len), " Hello world");
    cr_expect_str_eq(detok(s, &e, ZRT_TOK_REMOVE_SPECIAL, &len), " Hello world");
    cr_expect_str_eq(detok(s, &e, ZRT_TOK_UNPARSE_SPECIAL, &len), "<s> Hello world");
    ids f = enc_s(s, "Hello world", 0);
    cr_expect_str_eq(detok(s, &f, 0, &len), "Hello world");
    zarena_free(a.a), zarena_free(b.a), zarena_free(c.a), zarena_free(e.a), zarena_free(f.a);
    zrt_tok_free(l), zrt_tok_free(q), zrt_tok_free(s);
}

/* Pushes ids through a stream; every chunk must be valid UTF-8. */
static size_t stream_all(zrt_tok_stream *st, const int32_t *v, size_t n, char *out, size_t *chunks_empty) {
    size_t o = 0;
    *chunks_empty = 0;
    for (size_t i = 0; i <= n; i++) {
        size_t len;
        const char *p = i < n ? zrt_tok_stream_push(st, v[i], &len) : zrt_tok_stream_flush(st, &len);
        bool inv;
        cr_expect_eq(zrt_tok_utf8_valid_prefix((const uint8_t *)p, len, &inv), len,
                     "chunk %zu is not valid UTF-8", i);
        *chunks_empty += len == 0;
        memcpy(out + o, p, len), o += len;
    }
    out[o] = 0;
    return o;
}

Test(decode, streaming) {
    zrt_tok *q = load(FX_QWEN3, true), *s = load(FX_SPM, true);
    zarena *a = zarena_new();
    /* Byte-level BPE: CJK and emoji arrive as byte tokens. */
    const char *text = "中文 😀👍🏽 naïve";
    ids x = enc_s(q, text, 0);
    cr_assert_gt(x.n, strlen("    naïve"), "multi-byte characters span several tokens");
    char out[256];
    size_t empty;
    size_t n = stream_all(zrt_tok_stream_new(q, 0, a), x.v, x.n, out, &empty);
    cr_expect(n == strlen(text) && !strcmp(out, text), "streamed \"%s\"", out);
    cr_expect_gt(empty, 0u, "some tokens end inside a character and give nothing yet");
    /* SentencePiece byte fallback: 한 is not a piece, its 3 bytes are 3 tokens. */
    ids y = enc_s(s, "한", 0);
    cr_assert_eq(y.n, 4u, "space + 3 byte tokens");
    zrt_tok_stream *st = zrt_tok_stream_new(s, 0, a);
    size_t len;
    cr_expect_str_eq(zrt_tok_stream_push(st, y.v[0], &len), " ");
    cr_expect_eq((zrt_tok_stream_push(st, y.v[1], &len), len), 0u);
    cr_expect_eq((zrt_tok_stream_push(st, y.v[2], &len), len), 0u);
    cr_expect_str_eq(zrt_tok_stream_push(st, y.v[3], &len), "한");
    /* A byte that can never be valid comes out as U+FFFD at once; an
     * unfinished character at the end as U+FFFD when flushed. */
    cr_expect_str_eq(zrt_tok_stream_push(st, id_of(s, "<0xFF>"), &len), "\xef\xbf\xbd");
    cr_expect_str_eq(zrt_tok_stream_push(st, id_of(s, "<0xE4>"), &len), "");
    cr_expect_str_eq(zrt_tok_stream_push(st, id_of(s, "a"), &len), "\xef\xbf\xbd"
                                                                   "a");
    cr_expect_str_eq(zrt_tok_stream_push(st, id_of(s, "<0xE4>"), &len), "");
    cr_expect_str_eq(zrt_tok_stream_push(st, id_of(s, "<0xB8>"), &len), "");
    cr_expect_str_eq(zrt_tok_stream_flush(st, &len), "\xef\xbf\xbd\xef\xbf\xbd");
    /* Control tokens: nothing, or their text with UNPARSE_SPECIAL. */
    cr_expect_str_eq(zrt_tok_stream_push(st, zrt_tok_eos(s), &len), "");
    st = zrt_tok_stream_new(s, ZRT_TOK_UNPARSE_SPECIAL, a);
    cr_expect_str_eq(zrt_tok_stream_push(st, zrt_tok_eos(s), &len), "</s>");
    zarena_free(x.a), zarena_free(y.a), zarena_free(a);
    zrt_tok_free(q), zrt_tok_free(s);
}

/* ---- loading errors ----------------------------------------------------- */

static void drop_model(gguf_writer *w) {
    gguf_set_str(w, "tokenizer.ggml.model", "bert");
}
static void bad_pre(gguf_writer *w) {
    gguf_set_str(w, "tokenizer.ggml.pre", "gpt-4o");
}
static void short_types(gguf_writer *w) {
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", (int32_t[]){1, 1}, 2);
}
static void bad_scores(gguf_writer *w) {
    gguf_set_arr_str(w, "tokenizer.ggml.scores", (const char *[]){"x"}, 1);
}
static void no_tokens(gguf_writer *w) {
    gguf_set_u32(w, "tokenizer.ggml.tokens", 3);
}
static void bos_null(gguf_writer *w) {
    gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 99999); /* out of range: ignored, as llama.cpp */
}

Test(load, errors) {
    static const struct {
        fx k;
        void (*edit)(gguf_writer *);
        zstatus code;
        const char *msg;
    } cases[] = {
        {FX_QWEN3, drop_model, ZE_UNSUPPORTED,
         "tokenizer.ggml.model: expected gpt2 (byte-level BPE) or llama"},
        {FX_QWEN3, bad_pre, ZE_UNSUPPORTED, "tokenizer.ggml.pre: expected a pre-tokenizer zinc implements"},
        {FX_LLAMA, short_types, ZE_FORMAT,
         "tokenizer.ggml.token_type has 2 entries: expected one per token (1024)"},
        {FX_SPM, bad_scores, ZE_FORMAT,
         "tokenizer.ggml.scores: expected an array of f32 or i32, found string"},
        {FX_SPM, no_tokens, ZE_FORMAT, "tokenizer.ggml.tokens"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad%zu.gguf", i);
        const char *p = variant(cases[i].k, name, cases[i].edit);
        zrt_tok *t = (zrt_tok *)1;
        zdiag d = {0};
        zstatus s = zrt_tok_open(p, &t, &d);
        cr_expect_eq(s, cases[i].code, "case %zu: %s", i, d.msg);
        cr_expect_null(t);
        cr_expect(strstr(d.msg, cases[i].msg), "case %zu: expected '%s' in: %s", i, cases[i].msg, d.msg);
        cr_expect(strstr(d.msg, name), "case %zu: the message names the file: %s", i, d.msg);
    }
    /* An out-of-range BOS id is ignored and the default stays (11 for gpt2
     * vocabularies), as llama.cpp does. */
    zrt_tok *t = NULL;
    zdiag d = {0};
    zstatus s = zrt_tok_open(variant(FX_LLAMA, "bos.gguf", bos_null), &t, &d);
    cr_expect_eq(s, ZOK, "%s", d.msg);
    cr_expect_eq(zrt_tok_bos(t), 11, "llama.cpp's gpt2 default");
    zrt_tok_free(t);
    /* A GGUF without any tokenizer. */
    gguf_writer *w = gguf_writer_new();
    gguf_set_str(w, "general.architecture", "llama");
    const char *p = tu_tmp("none.gguf");
    write_or_die(w, p);
    s = zrt_tok_open(p, &t, &d);
    cr_expect_eq(s, ZE_INVALID);
    cr_expect(strstr(d.msg, "no tokenizer") && strstr(d.msg, "tokenizer.ggml.model"), "%s", d.msg);
}
