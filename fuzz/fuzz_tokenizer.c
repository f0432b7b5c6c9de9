/* libFuzzer harness: the tokenizers (runtime/tokenizer.h) on arbitrary text
 * and arbitrary token ids.
 *
 * Three tokenizers are built once, from GGUFs generated at start-up: byte-level
 * BPE with the qwen2 pre-tokenizer and with llama-bpe (both from
 * `zinc mkmodel`'s vocabulary), and a SentencePiece vocabulary with byte
 * fallback written here. The first input byte picks the tokenizer, the flags
 * and the mode; the rest is the text, or the ids.
 *
 *   bits 0-1  tokenizer: 0 qwen2 BPE, 1 llama-bpe, 2 SentencePiece (3 = 0)
 *   bit  2    ZRT_TOK_ADD_SPECIAL      bit 3  ZRT_TOK_PARSE_SPECIAL
 *   bits 4-5  mode: 0-1 encode, 2 detokenize, 3 stream
 *   bit  6    ZRT_TOK_REMOVE_SPECIAL   bit 7  ZRT_TOK_UNPARSE_SPECIAL
 *
 * Promises checked: encoded ids are in the vocabulary; detokenizing them
 * succeeds; byte-level BPE (qwen2, no special handling) gives back valid UTF-8
 * text byte for byte; an id out of range is ZE_INVALID, never a read out of
 * bounds; the stream only ever returns valid UTF-8. */
#include <stdlib.h>
#include <string.h>

#include "../frontend/mkmodel.h"
#include "../runtime/tokenizer.h"
#include "../runtime/unicode.h"
#include "common.h"

enum { N_TOK = 3 };
static zrt_tok *toks[N_TOK];

static void must(zstatus s, const zdiag *d, const char *what) {
    if (s) fz_fail("start-up: %s: %s", what, d->msg);
}

static zrt_tok *bpe(zmk_arch arch, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s.gguf", fz_tmpdir(), name);
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = arch, o.layers = 1, o.hidden = 64, o.ff = 128, o.heads = 2, o.kv_heads = 1, o.head_dim = 32;
    o.vocab = 1024, o.quant = ZMK_F32, o.seed = 7;
    zdiag d = {0};
    must(zmk_write(&o, path, NULL, &d), &d, "zmk_write");
    zrt_tok *t;
    must(zrt_tok_open(path, &t, &d), &d, "zrt_tok_open");
    return t;
}

/* A SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens, one
 * user-defined token, then pieces scored longest first, so merges happen. */
static zrt_tok *spm(void) {
    static const char *const words[] = {"the", "Hello", "world", "ing", "er", "an", "in", "on", "at", "re",
                                        "he",  "lo",    "wor",   "ld",  "12", "é",  "中", "文", "ü"};
    enum { MAX = 512 };
    const char *tok[MAX];
    float score[MAX];
    int32_t type[MAX];
    char buf[MAX][16];
    uint32_t n = 0;
    tok[n] = "<unk>", score[n] = 0, type[n++] = 2;
    tok[n] = "<s>", score[n] = 0, type[n++] = 3;
    tok[n] = "</s>", score[n] = 0, type[n++] = 3;
    for (int b = 0; b < 256; b++, n++) {
        snprintf(buf[n], sizeof buf[n], "<0x%02X>", b);
        tok[n] = buf[n], score[n] = 0, type[n] = 6;
    }
    tok[n] = "<tool>", score[n] = 0, type[n++] = 4;
    tok[n] = "\xe2\x96\x81", score[n] = -1000, type[n++] = 1;
    for (int c = 0x21; c < 0x7f; c++, n++) {
        snprintf(buf[n], sizeof buf[n], "%c", c);
        tok[n] = buf[n], score[n] = -1000 - c, type[n] = 1;
    }
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        snprintf(buf[n], sizeof buf[n], "%s", words[i]);
        tok[n] = buf[n], score[n] = (float)strlen(words[i]) - 100, type[n++] = 1;
        snprintf(buf[n], sizeof buf[n], "\xe2\x96\x81%s", words[i]);
        tok[n] = buf[n], score[n] = (float)strlen(words[i]) - 99, type[n++] = 1;
    }
    gguf_writer *w = gguf_writer_new();
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", tok, n);
    gguf_set_arr_f32(w, "tokenizer.ggml.scores", score, n);
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", type, n);
    gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    char path[256];
    snprintf(path, sizeof path, "%s/spm.gguf", fz_tmpdir());
    zdiag d = {0};
    zstatus s = gguf_writer_write(w, path, &d);
    gguf_writer_free(w);
    must(s, &d, "gguf_writer_write");
    zrt_tok *t;
    must(zrt_tok_open(path, &t, &d), &d, "zrt_tok_open (SentencePiece)");
    return t;
}

static void free_all(void) {
    for (int i = 0; i < N_TOK; i++)
        zrt_tok_free(toks[i]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    toks[0] = bpe(ZMK_QWEN3, "qwen3");
    toks[1] = bpe(ZMK_LLAMA, "llama");
    toks[2] = spm();
    if (strcmp(zrt_tok_pre(toks[0]), "qwen2") || strcmp(zrt_tok_pre(toks[1]), "llama-bpe"))
        fz_fail("start-up: unexpected pre-tokenizers '%s' and '%s'", zrt_tok_pre(toks[0]),
                zrt_tok_pre(toks[1]));
    atexit(free_all);
    return 0;
}

static bool utf8_ok(const char *s, size_t n) {
    bool invalid = false;
    return zrt_tok_utf8_valid_prefix((const uint8_t *)s, n, &invalid) == n && !invalid;
}

static void encode(int k, unsigned flags, const char *text, size_t len, zarena *a) {
    const zrt_tok *t = toks[k];
    int32_t *ids;
    size_t n;
    zdiag d = {0};
    unsigned ef = flags & (ZRT_TOK_ADD_SPECIAL | ZRT_TOK_PARSE_SPECIAL);
    zstatus s = zrt_tok_encode(t, text, len, ef, a, &ids, &n, &d);
    fz_check(s, &d, "zrt_tok_encode");
    if (s) fz_fail("zrt_tok_encode refused %zu bytes of text: %s", len, d.msg);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= zrt_tok_n_vocab(t)) fz_fail("encode gave id %d", ids[i]);
    char *out;
    size_t out_len;
    s = zrt_tok_detokenize(t, ids, n, 0, a, &out, &out_len, &d);
    fz_check(s, &d, "zrt_tok_detokenize");
    if (s) fz_fail("detokenizing encoded ids failed: %s", d.msg);
    if (out[out_len]) fz_fail("detokenized text is not NUL-terminated");
    if (k == 0 && ef == 0 && utf8_ok(text, len) && (out_len != len || memcmp(out, text, len)))
        fz_fail("byte-level BPE round trip changed %zu bytes of valid UTF-8 into %zu", len, out_len);
}

/* Two bytes per id, spread over -8 .. n_vocab + 7 so that most are valid. */
static int32_t *ids_of(const zrt_tok *t, const uint8_t *b, size_t len, size_t *n, zarena *a) {
    *n = len / 2;
    int32_t *ids = zarena_array(a, *n ? *n : 1, sizeof *ids);
    if (!ids) fz_fail("out of memory");
    for (size_t i = 0; i < *n; i++)
        ids[i] = (int32_t)((b[2 * i] | b[2 * i + 1] << 8) % (zrt_tok_n_vocab(t) + 16)) - 8;
    return ids;
}

static void detokenize(int k, unsigned flags, const int32_t *ids, size_t n, zarena *a) {
    const zrt_tok *t = toks[k];
    bool bad = false;
    for (size_t i = 0; i < n; i++) {
        bad |= ids[i] < 0 || (uint32_t)ids[i] >= zrt_tok_n_vocab(t);
        const char *piece;
        size_t len = zrt_tok_piece(t, ids[i], flags & ZRT_TOK_UNPARSE_SPECIAL, &piece);
        if (len && !piece) fz_fail("piece of id %d has %zu bytes and no pointer", ids[i], len);
        (void)zrt_tok_is_eog(t, ids[i]), (void)zrt_tok_text(t, ids[i]), (void)zrt_tok_attr(t, ids[i]);
    }
    char *out;
    size_t len;
    zdiag d = {0};
    zstatus s = zrt_tok_detokenize(t, ids, n, flags, a, &out, &len, &d);
    fz_check(s, &d, "zrt_tok_detokenize");
    if (bad != (s == ZE_INVALID) || (s && s != ZE_INVALID))
        fz_fail("detokenize of %s ids returned %s", bad ? "out-of-range" : "valid", zstatus_name(s));
    if (!s && out[len]) fz_fail("detokenized text is not NUL-terminated");
}

static void stream(int k, unsigned flags, const int32_t *ids, size_t n, zarena *a) {
    zrt_tok_stream *st = zrt_tok_stream_new(toks[k], flags, a);
    if (!st) fz_fail("zrt_tok_stream_new failed");
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = zrt_tok_stream_push(st, ids[i], &len);
        if (len && (!s || !utf8_ok(s, len))) fz_fail("stream returned %zu bytes of invalid UTF-8", len);
    }
    size_t len;
    const char *s = zrt_tok_stream_flush(st, &len);
    if (len && (!s || !utf8_ok(s, len))) fz_fail("stream flush returned %zu bytes of invalid UTF-8", len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    unsigned c = data[0], mode = c >> 4 & 3;
    int k = (c & 3) % N_TOK;
    unsigned flags = (c & 4 ? ZRT_TOK_ADD_SPECIAL : 0) | (c & 8 ? ZRT_TOK_PARSE_SPECIAL : 0);
    unsigned dflags = (c & 64 ? ZRT_TOK_REMOVE_SPECIAL : 0) | (c & 128 ? ZRT_TOK_UNPARSE_SPECIAL : 0);
    zarena *a = zarena_new();
    if (!a) return 0;
    if (mode < 2) {
        encode(k, flags, (const char *)data + 1, size - 1, a);
    } else {
        size_t n;
        int32_t *ids = ids_of(toks[k], data + 1, size - 1, &n, a);
        if (mode == 2)
            detokenize(k, dflags, ids, n, a);
        else
            stream(k, dflags, ids, n, a);
    }
    zarena_free(a);
    return 0;
}
