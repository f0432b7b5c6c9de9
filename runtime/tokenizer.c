/* The tokenizers: loading from GGUF metadata, encoding (special-token
 * partition, byte-level BPE, SentencePiece) and decoding. The rules follow
 * llama.cpp's llama-vocab.cpp, so that ids agree token for token; where its
 * behaviour is surprising, a comment says so. See tokenizer.h and
 * docs/tokenizer.md. */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unicode.h"

/* ---- hash tables -------------------------------------------------------- */

/* Open addressing over indices (slot = index + 1, 0 = empty): compact for
 * vocabularies of 150k tokens and as many merges. */
typedef struct itab {
    uint32_t *slot;
    uint32_t mask;
} itab;

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV0 0xcbf29ce484222325ull

static bool itab_init(itab *t, uint32_t n, zarena *a) {
    uint32_t cap = 16;
    while (cap < 2 * (uint64_t)n + 1)
        cap *= 2;
    t->mask = cap - 1;
    return (t->slot = zarena_array(a, cap, sizeof *t->slot)) != NULL;
}

/* A merge rule "left right", split at the first space after the first byte
 * as llama.cpp does. */
typedef struct merge {
    const char *left, *right;
    uint32_t left_len, right_len;
} merge;

/* The vocabulary and everything derived from it at load time. */
struct zrt_tok {
    zarena *arena;
    zrt_tok_model model;
    const char *pre;
    int digits;         /* longest digit run of a pre-tokenizer word */
    bool ignore_merges; /* a word that is a token is kept whole (Llama 3) */
    bool add_bos, add_eos, add_space_prefix, clean_spaces;
    uint32_t n_vocab;
    const char **text; /* vocabulary entries, NUL-terminated copies */
    uint32_t *text_len;
    float *score;
    uint8_t *attr;      /* ZRT_TOK_ATTR_* */
    const char **piece; /* what each token decodes to (control tokens as their text) */
    uint32_t *piece_len, max_piece;
    itab by_text;
    merge *merges;
    uint32_t n_merges;
    itab by_pair;
    int32_t bos, eos, eot, eom, unk;
    int32_t fim[6];    /* FIM prefix, suffix, middle, pad, repo, file separator */
    int32_t *specials; /* CONTROL / USER_DEFINED / UNKNOWN ids, longest text first */
    uint32_t n_specials;
    uint8_t *eog;          /* per id: ends generation */
    int32_t byte_tok[256]; /* SentencePiece byte fallback: id of <0xXX> (or of the byte itself) */
    uint8_t bsym[256][4];  /* GPT-2 alphabet: UTF-8 of the code point standing for each byte */
    uint8_t bsym_len[256];
    int16_t unbyte[324]; /* and back: the byte a code point < 324 stands for, or -1 */
};

int32_t zrt_tok_find(const zrt_tok *t, const char *s, size_t n) {
    for (uint64_t h = fnv(s, n, FNV0);; h++) {
        uint32_t v = t->by_text.slot[h & t->by_text.mask];
        if (!v) return ZRT_TOK_NULL;
        if (t->text_len[v - 1] == n && !memcmp(t->text[v - 1], s, n)) return (int32_t)(v - 1);
    }
}

/* Later duplicates win, as in llama.cpp's token_to_id map. */
static void add_text(zrt_tok *t, uint32_t id) {
    for (uint64_t h = fnv(t->text[id], t->text_len[id], FNV0);; h++) {
        uint32_t *s = &t->by_text.slot[h & t->by_text.mask];
        if (!*s || (t->text_len[*s - 1] == t->text_len[id] &&
                    !memcmp(t->text[*s - 1], t->text[id], t->text_len[id]))) {
            *s = id + 1;
            return;
        }
    }
}

static uint64_t pair_hash(const char *l, size_t ln, const char *r, size_t rn) {
    return fnv(r, rn, fnv(" ", 1, fnv(l, ln, FNV0)));
}

static bool pair_eq(const merge *m, const char *l, size_t ln, const char *r, size_t rn) {
    return m->left_len == ln && m->right_len == rn && !memcmp(m->left, l, ln) && !memcmp(m->right, r, rn);
}

/* The rank of merging l and r, or -1. */
static int32_t merge_rank(const zrt_tok *t, const char *l, size_t ln, const char *r, size_t rn) {
    for (uint64_t h = pair_hash(l, ln, r, rn);; h++) {
        uint32_t v = t->by_pair.slot[h & t->by_pair.mask];
        if (!v) return -1;
        if (pair_eq(&t->merges[v - 1], l, ln, r, rn)) return (int32_t)(v - 1);
    }
}

/* Earlier duplicates win (llama.cpp's bpe_ranks.emplace keeps the first). */
static void add_merge(zrt_tok *t, uint32_t rank) {
    const merge *m = &t->merges[rank];
    for (uint64_t h = pair_hash(m->left, m->left_len, m->right, m->right_len);; h++) {
        uint32_t *s = &t->by_pair.slot[h & t->by_pair.mask];
        if (*s && pair_eq(&t->merges[*s - 1], m->left, m->left_len, m->right, m->right_len)) return;
        if (!*s) {
            *s = rank + 1;
            return;
        }
    }
}

/* ---- the GPT-2 byte alphabet ------------------------------------------ */

/* GPT-2 maps each byte to a printable code point: '!'..'~', U+00A1..U+00AC
 * and U+00AE..U+00FF stand for themselves, the other 68 bytes take
 * U+0100.. in byte order. */
static void build_alphabet(zrt_tok *t) {
    uint32_t next = 256;
    for (int i = 0; i < 324; i++)
        t->unbyte[i] = -1;
    for (uint32_t b = 0; b < 256; b++) {
        bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        uint32_t cp = self ? b : next++;
        t->bsym_len[b] = (uint8_t)zrt_tok_utf8_put(cp, t->bsym[b]);
        t->unbyte[cp] = (int16_t)b;
    }
}

/* ---- loading ------------------------------------------------------------ */

static const char *const QWEN2_PRES[] = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", NULL};
static const char *const LLAMA3_PRES[] = {"llama3",  "llama-v3", "llama-bpe", "falcon3",      "falcon-h1",
                                          "pixtral", "midm-2.0", "lfm2",      "jina-v5-nano", NULL};

static bool in_list(const char *s, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(s, *list)) return true;
    return false;
}

/* The model and pre-tokenizer, with llama.cpp's per-family defaults. */
static zstatus load_kind(zrt_tok *t, const gguf_file *f, zdiag *d) {
    const char *model = NULL, *pre = "";
    zstatus s = gguf_get_str(f, "tokenizer.ggml.model", &model, d);
    if (s) return zdiag_prefix(d, "no tokenizer"), s;
    if (gguf_opt_str(f, "tokenizer.ggml.pre", &pre, d) < 0) return d ? d->code : ZE_FORMAT;
    if (!strcmp(model, "llama")) {
        t->model = ZRT_TOK_SPM;
        t->bos = 1, t->eos = 2, t->unk = 0;
        t->add_space_prefix = t->add_bos = true;
        t->pre = "";
        return ZOK;
    }
    if (strcmp(model, "gpt2"))
        return zdiag_set(
            d, ZE_UNSUPPORTED,
            "%s: tokenizer.ggml.model: expected gpt2 (byte-level BPE) or llama (SentencePiece), found "
            "'%s'",
            f->path, model);
    t->model = ZRT_TOK_BPE;
    t->bos = t->eos = 11; /* llama.cpp's defaults for gpt2 vocabularies */
    t->clean_spaces = true;
    t->pre = zarena_strdup(t->arena, pre);
    if (in_list(pre, QWEN2_PRES)) {
        t->digits = 1;
        t->clean_spaces = false;
    } else if (in_list(pre, LLAMA3_PRES)) {
        t->digits = 3;
        t->ignore_merges = t->add_bos = true;
    } else {
        return zdiag_set(
            d, ZE_UNSUPPORTED,
            "%s: tokenizer.ggml.pre: expected a pre-tokenizer zinc implements (qwen2, llama-bpe and "
            "their aliases), found '%s'",
            f->path, *pre ? pre : "(none)");
    }
    return t->pre ? ZOK : zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory");
}

/* llama_token_type -> attribute bits. */
static uint8_t type_attr(int64_t type) {
    switch (type) {
    case 1: return ZRT_TOK_ATTR_NORMAL;
    case 2: return ZRT_TOK_ATTR_UNKNOWN;
    case 3: return ZRT_TOK_ATTR_CONTROL;
    case 4: return ZRT_TOK_ATTR_USER_DEFINED;
    case 5: return ZRT_TOK_ATTR_UNUSED;
    case 6: return ZRT_TOK_ATTR_BYTE;
    default: return 0; /* UNDEFINED */
    }
}

static zstatus short_array(const gguf_file *f, const char *key, uint64_t n, uint32_t want, zdiag *d) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    return zdiag_set(d, ZE_FORMAT, "%s: offset %llu: %s has %llu entries: expected one per token (%u)",
                     f->path, (unsigned long long)(kv ? kv->offset : 0), key, (unsigned long long)n, want);
}

/* Scores (float or int arrays) and token types, both optional. */
static zstatus load_scores_types(zrt_tok *t, const gguf_file *f, zdiag *d) {
    const gguf_value *v;
    if (gguf_find_kv(f, "tokenizer.ggml.scores")) {
        zstatus s = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_VTYPE_COUNT, &v, d);
        if (s) return s;
        if (v->arr.elem != GGUF_F32 && v->arr.elem != GGUF_I32)
            return zdiag_set(d, ZE_FORMAT,
                             "%s: tokenizer.ggml.scores: expected an array of f32 or i32, found %s", f->path,
                             gguf_vtype_name(v->arr.elem));
        if (v->arr.n < t->n_vocab) return short_array(f, "tokenizer.ggml.scores", v->arr.n, t->n_vocab, d);
        for (uint32_t i = 0; i < t->n_vocab; i++)
            t->score[i] = v->arr.elem == GGUF_F32 ? (float)v->arr.items[i].f : (float)v->arr.items[i].i;
    }
    for (uint32_t i = 0; i < t->n_vocab; i++)
        t->attr[i] = ZRT_TOK_ATTR_NORMAL;
    if (gguf_find_kv(f, "tokenizer.ggml.token_type")) {
        zstatus s = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_I32, &v, d);
        if (s) return s;
        if (v->arr.n < t->n_vocab)
            return short_array(f, "tokenizer.ggml.token_type", v->arr.n, t->n_vocab, d);
        for (uint32_t i = 0; i < t->n_vocab; i++)
            t->attr[i] = type_attr(v->arr.items[i].i);
    }
    return ZOK;
}

static zstatus load_tokens(zrt_tok *t, const gguf_file *f, zdiag *d) {
    const gguf_value *v;
    zstatus s = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &v, d);
    if (s) return zdiag_prefix(d, "no vocabulary"), s;
    if (v->arr.n == 0 || v->arr.n > INT32_MAX / 2)
        return zdiag_set(d, ZE_FORMAT, "%s: tokenizer.ggml.tokens: expected 1 to %d tokens, found %llu",
                         f->path, INT32_MAX / 2, (unsigned long long)v->arr.n);
    zarena *a = t->arena;
    t->n_vocab = (uint32_t)v->arr.n;
    t->text = zarena_array(a, t->n_vocab, sizeof *t->text);
    t->text_len = zarena_array(a, t->n_vocab, sizeof *t->text_len);
    t->score = zarena_array(a, t->n_vocab, sizeof *t->score);
    t->attr = zarena_array(a, t->n_vocab, sizeof *t->attr);
    t->eog = zarena_array(a, t->n_vocab, sizeof *t->eog);
    if (!t->text || !t->text_len || !t->score || !t->attr || !t->eog ||
        !itab_init(&t->by_text, t->n_vocab, a))
        return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory for %u tokens", t->n_vocab);
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        const gguf_str *w = &v->arr.items[i].s;
        /* llama.cpp renames empty entries so that they cannot match anything. */
        t->text[i] = w->len ? zarena_strndup(a, w->ptr, w->len) : zarena_printf(a, "[EMPTY_%u]", i);
        if (!t->text[i]) return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory for %u tokens", t->n_vocab);
        t->text_len[i] = (uint32_t)strlen(t->text[i]);
        if (w->len && t->text_len[i] != w->len)
            return zdiag_set(d, ZE_UNSUPPORTED, "%s: tokenizer.ggml.tokens[%u] holds a NUL byte", f->path, i);
        add_text(t, i);
    }
    return load_scores_types(t, f, d);
}

static zstatus load_merges(zrt_tok *t, const gguf_file *f, zdiag *d) {
    const gguf_value *v;
    zstatus s = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_STRING, &v, d);
    if (s) return zdiag_prefix(d, "byte-level BPE needs merges"), s;
    if (v->arr.n > INT32_MAX / 2)
        return zdiag_set(d, ZE_FORMAT, "%s: tokenizer.ggml.merges: %llu merges is too many", f->path,
                         (unsigned long long)v->arr.n);
    t->n_merges = (uint32_t)v->arr.n;
    t->merges = zarena_array(t->arena, t->n_merges ? t->n_merges : 1, sizeof *t->merges);
    if (!t->merges || !itab_init(&t->by_pair, t->n_merges, t->arena))
        return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory for %u merges", t->n_merges);
    for (uint32_t i = 0; i < t->n_merges; i++) {
        const gguf_str *w = &v->arr.items[i].s;
        const char *sp = w->len > 1 ? memchr(w->ptr + 1, ' ', w->len - 1) : NULL;
        if (!sp) continue; /* llama.cpp ranks it as ("", ""), which nothing looks up */
        merge *m = &t->merges[i];
        m->left = w->ptr, m->left_len = (uint32_t)(sp - w->ptr);
        m->right = sp + 1, m->right_len = (uint32_t)(w->len - m->left_len - 1);
        /* The strings live in the GGUF mapping: copy them into our arena. */
        char *copy = zarena_strndup(t->arena, w->ptr, w->len);
        if (!copy) return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory for %u merges", t->n_merges);
        m->left = copy, m->right = copy + m->left_len + 1;
        add_merge(t, i);
    }
    return ZOK;
}

/* One special-token id from the metadata; out-of-range values are ignored, as
 * llama.cpp does (with a warning there). */
static zstatus load_id(zrt_tok *t, const gguf_file *f, const char *key, int32_t *id, zdiag *d) {
    if (*id >= (int32_t)t->n_vocab) *id = ZRT_TOK_NULL;
    uint32_t v;
    int r = gguf_opt_u32(f, key, &v, d);
    if (r < 0) return d ? d->code : ZE_FORMAT;
    if (r > 0 && v < t->n_vocab) *id = (int32_t)v;
    return ZOK;
}

static zstatus load_bool(const gguf_file *f, const char *key, bool *out, zdiag *d) {
    return gguf_find_kv(f, key) ? gguf_get_bool(f, key, out, d) : ZOK;
}

static zstatus load_specials(zrt_tok *t, const gguf_file *f, zdiag *d) {
    t->eot = t->eom = ZRT_TOK_NULL;
    if (t->model == ZRT_TOK_BPE) t->unk = ZRT_TOK_NULL;
    zstatus s = ZOK;
    if (!s) s = load_id(t, f, "tokenizer.ggml.bos_token_id", &t->bos, d);
    if (!s) s = load_id(t, f, "tokenizer.ggml.eos_token_id", &t->eos, d);
    if (!s) s = load_id(t, f, "tokenizer.ggml.eot_token_id", &t->eot, d);
    if (!s) s = load_id(t, f, "tokenizer.ggml.eom_token_id", &t->eom, d);
    if (!s) s = load_id(t, f, "tokenizer.ggml.unknown_token_id", &t->unk, d);
    if (!s) s = load_bool(f, "tokenizer.ggml.add_bos_token", &t->add_bos, d);
    if (!s) s = load_bool(f, "tokenizer.ggml.add_eos_token", &t->add_eos, d);
    if (!s) s = load_bool(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, d);
    if (s) return s;
    if (t->add_bos && t->bos == ZRT_TOK_NULL)
        return zdiag_set(d, ZE_INVALID, "%s: tokenizer.ggml.add_bos_token is set but there is no BOS token",
                         f->path);
    if (t->add_eos && t->eos == ZRT_TOK_NULL)
        return zdiag_set(d, ZE_INVALID, "%s: tokenizer.ggml.add_eos_token is set but there is no EOS token",
                         f->path);
    return ZOK;
}

/* Tokens llama.cpp finds by their text when the metadata does not name
 * them (llama-vocab.cpp, "auto-detect special tokens by text"): per role, the
 * first text of its list present in the vocabulary. A token found so is made
 * a control token whatever type the GGUF records ("control-looking token ...
 * its type will be overridden"), so that user text cannot produce it. */
#define DEEPSEEK(s) "<\xef\xbd\x9c" s "\xef\xbd\x9c>" /* <｜...｜> */
#define SPM_SPACE   "\xe2\x96\x81"                    /* ▁ */
static const char *const EOT_TEXTS[] = {"<|eot_id|>",
                                        "<|im_end|>",
                                        "<|end|>",
                                        "<end_of_turn>",
                                        "<|endoftext|>",
                                        "<|end_of_text|>",
                                        "<EOT>",
                                        "_<EOT>",
                                        "[EOT]",
                                        DEEPSEEK("end" SPM_SPACE "of" SPM_SPACE "sentence"),
                                        "<end_of_utterance>",
                                        NULL};
static const char *const EOM_TEXTS[] = {"<|eom_id|>", NULL};
static const char *const FIM_PRE[] = {"<|fim_prefix|>",
                                      "<fim-prefix>",
                                      "<fim_prefix>",
                                      DEEPSEEK("fim" SPM_SPACE "begin"),
                                      "<PRE>",
                                      SPM_SPACE "<PRE>",
                                      "<|code_prefix|>",
                                      "<|prefix|>",
                                      NULL};
static const char *const FIM_SUF[] = {"<|fim_suffix|>",
                                      "<fim-suffix>",
                                      "<fim_suffix>",
                                      DEEPSEEK("fim" SPM_SPACE "hole"),
                                      "<SUF>",
                                      SPM_SPACE "<SUF>",
                                      "<|code_suffix|>",
                                      "<|suffix|>",
                                      NULL};
static const char *const FIM_MID[] = {"<|fim_middle|>",
                                      "<fim-middle>",
                                      "<fim_middle>",
                                      DEEPSEEK("fim" SPM_SPACE "end"),
                                      "<MID>",
                                      SPM_SPACE "<MID>",
                                      "<|code_middle|>",
                                      "<|middle|>",
                                      NULL};
static const char *const FIM_PAD[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const FIM_REP[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                      "<REPO>",       "<reponame>",    NULL};
static const char *const FIM_SEP[] = {"<|file_sep|>", NULL};

/* Every token of these texts ends generation (and is made a control token). */
static const char *const EOG_TEXTS[] = {"<|eot_id|>",
                                        "<|im_end|>",
                                        "<|end|>",
                                        "<|return|>",
                                        "<|call|>",
                                        "<|flush|>",
                                        "<|calls|>",
                                        "<end_of_turn>",
                                        "<|endoftext|>",
                                        "</s>",
                                        "<|eom_id|>",
                                        "<EOT>",
                                        "_<EOT>",
                                        "[EOT]",
                                        "[EOS]",
                                        "<|end_of_text|>",
                                        "<end_of_utterance>",
                                        "<eos>",
                                        "<turn|>",
                                        "<|tool_response>",
                                        DEEPSEEK("end" SPM_SPACE "of" SPM_SPACE "sentence"),
                                        "[e~[",
                                        NULL};

static const char *const FIM_KEYS[6][2] = {
    {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
    {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
    {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
    {"tokenizer.ggml.fim_pad_token_id", NULL},
    {"tokenizer.ggml.fim_rep_token_id", NULL},
    {"tokenizer.ggml.fim_sep_token_id", NULL}};

static zstatus load_fim(zrt_tok *t, const gguf_file *f, zdiag *d) {
    zstatus s = ZOK;
    for (int i = 0; i < 6 && !s; i++) {
        t->fim[i] = ZRT_TOK_NULL;
        for (int k = 0; k < 2 && !s && FIM_KEYS[i][k]; k++) /* the deprecated key wins, as in llama.cpp */
            s = load_id(t, f, FIM_KEYS[i][k], &t->fim[i], d);
    }
    return s;
}

/* The role's token by text when the metadata gave none, made a control token. */
static void find_role(zrt_tok *t, int32_t *id, const char *const *texts) {
    for (; *id == ZRT_TOK_NULL && *texts; texts++)
        if ((*id = zrt_tok_find(t, *texts, strlen(*texts))) != ZRT_TOK_NULL)
            t->attr[*id] |= ZRT_TOK_ATTR_CONTROL;
}

/* llama.cpp's exceptions: with <|return|> and <|call|> (or <|calls|> and
 * <|flush|>) present, <|end|> ends a message, not the generation, and is
 * rendered; with <|tool_response>, </s> is ordinary text. */
static void eog_exceptions(zrt_tok *t) {
    int32_t end = zrt_tok_find(t, "<|end|>", 7), s = zrt_tok_find(t, "</s>", 4);
#define EOG_HAS(x) (zrt_tok_find(t, x, strlen(x)) != ZRT_TOK_NULL)
    bool call = EOG_HAS("<|call|>") || EOG_HAS("<|calls|>");
    if (end != ZRT_TOK_NULL && ((EOG_HAS("<|return|>") && call) || (call && EOG_HAS("<|flush|>")))) {
        t->eog[end] = 0;
        t->attr[end] = ZRT_TOK_ATTR_USER_DEFINED;
    }
    if (s != ZRT_TOK_NULL && EOG_HAS("<|tool_response>")) {
        t->eog[s] = 0;
        t->attr[s] = ZRT_TOK_ATTR_NORMAL;
    }
#undef EOG_HAS
}

static void find_eog(zrt_tok *t) {
    static const char *const *const FIM_TEXTS[6] = {FIM_PRE, FIM_SUF, FIM_MID, FIM_PAD, FIM_REP, FIM_SEP};
    find_role(t, &t->eot, EOT_TEXTS);
    find_role(t, &t->eom, EOM_TEXTS);
    for (int i = 0; i < 6; i++)
        find_role(t, &t->fim[i], FIM_TEXTS[i]);
    for (int i = 3; i < 6; i++) /* FIM pad, repo and file separator end generation */
        if (t->fim[i] != ZRT_TOK_NULL) t->eog[t->fim[i]] = 1;
    for (const char *const *x = EOG_TEXTS; *x; x++) {
        int32_t id = zrt_tok_find(t, *x, strlen(*x));
        if (id == ZRT_TOK_NULL) continue;
        t->attr[id] |= ZRT_TOK_ATTR_CONTROL;
        t->eog[id] = 1;
    }
    if (t->eos != ZRT_TOK_NULL) t->eog[t->eos] = 1;
    if (t->eot != ZRT_TOK_NULL) t->eog[t->eot] = 1;
    if (t->eom != ZRT_TOK_NULL) t->eog[t->eom] = 1;
    eog_exceptions(t);
}

static _Thread_local const zrt_tok *g_sort_tok; /* qsort has no context argument in C11 */

/* Longest text first; llama.cpp's std::sort leaves ties unordered, we order
 * them by id so that results never depend on the sort. */
static int by_len_desc(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = g_sort_tok->text_len[x], ly = g_sort_tok->text_len[y];
    return lx != ly ? (lx < ly ? 1 : -1) : (x > y) - (x < y);
}

static zstatus collect_specials(zrt_tok *t, zdiag *d) {
    const unsigned want = ZRT_TOK_ATTR_CONTROL | ZRT_TOK_ATTR_USER_DEFINED | ZRT_TOK_ATTR_UNKNOWN;
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++)
        n += (t->attr[i] & want) != 0;
    t->specials = zarena_array(t->arena, n ? n : 1, sizeof *t->specials);
    if (!t->specials) return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory");
    for (uint32_t i = 0; i < t->n_vocab; i++)
        if (t->attr[i] & want) t->specials[t->n_specials++] = (int32_t)i;
    g_sort_tok = t;
    qsort(t->specials, t->n_specials, sizeof *t->specials, by_len_desc);
    g_sort_tok = NULL;
    return ZOK;
}

/* SentencePiece's byte fallback: <0xXX>, else the byte as a one-character
 * token; ZRT_TOK_NULL when the vocabulary has neither. */
static void find_byte_tokens(zrt_tok *t) {
    for (int b = 0; b < 256; b++) {
        char hex[8], raw[1] = {(char)b};
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int32_t id = zrt_tok_find(t, hex, 6);
        t->byte_tok[b] = id != ZRT_TOK_NULL ? id : zrt_tok_find(t, raw, 1);
    }
}

static zstatus build_pieces(zrt_tok *t, zdiag *d);

zstatus zrt_tok_load(const gguf_file *f, zrt_tok **out, zdiag *d) {
    *out = NULL;
    zarena *a = zarena_new();
    zrt_tok *t = a ? zarena_alloc(a, sizeof *t) : NULL;
    if (!t) {
        zarena_free(a);
        return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory");
    }
    t->arena = a;
    zstatus s = load_kind(t, f, d);
    if (!s) s = load_tokens(t, f, d);
    if (!s && t->model == ZRT_TOK_BPE) s = load_merges(t, f, d);
    if (!s) s = load_specials(t, f, d);
    if (!s) s = load_fim(t, f, d);
    if (!s) {
        build_alphabet(t);
        find_eog(t);
        find_byte_tokens(t);
        s = collect_specials(t, d);
    }
    if (!s) s = build_pieces(t, d);
    if (s) {
        zarena_free(a);
        return s;
    }
    *out = t;
    return ZOK;
}

zstatus zrt_tok_open(const char *path, zrt_tok **out, zdiag *d) {
    gguf_file *f;
    *out = NULL;
    zstatus s = gguf_open(path, &f, d);
    if (s) return s;
    s = zrt_tok_load(f, out, d);
    gguf_close(f);
    return s;
}

void zrt_tok_free(zrt_tok *t) {
    if (t) zarena_free(t->arena);
}

zrt_tok_model zrt_tok_kind(const zrt_tok *t) {
    return t->model;
}
const char *zrt_tok_pre(const zrt_tok *t) {
    return t->pre;
}
uint32_t zrt_tok_n_vocab(const zrt_tok *t) {
    return t->n_vocab;
}
int32_t zrt_tok_bos(const zrt_tok *t) {
    return t->bos;
}
int32_t zrt_tok_eos(const zrt_tok *t) {
    return t->eos;
}
int32_t zrt_tok_eot(const zrt_tok *t) {
    return t->eot;
}
bool zrt_tok_add_bos(const zrt_tok *t) {
    return t->add_bos;
}
bool zrt_tok_add_eos(const zrt_tok *t) {
    return t->add_eos;
}

static bool valid_id(const zrt_tok *t, int32_t id) {
    return id >= 0 && (uint32_t)id < t->n_vocab;
}

bool zrt_tok_is_eog(const zrt_tok *t, int32_t id) {
    return valid_id(t, id) && t->eog[id];
}
const char *zrt_tok_text(const zrt_tok *t, int32_t id) {
    return valid_id(t, id) ? t->text[id] : NULL;
}
unsigned zrt_tok_attr(const zrt_tok *t, int32_t id) {
    return valid_id(t, id) ? t->attr[id] : 0;
}

/* ---- growable id lists (in a scratch arena) ----------------------------- */

typedef struct ivec {
    int32_t *v;
    size_t n, cap;
    zarena *a;
    bool oom;
} ivec;

static void ivec_push(ivec *x, int32_t id) {
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 64;
        int32_t *v = zarena_array(x->a, cap, sizeof *v);
        if (!v) {
            x->oom = true;
            return;
        }
        if (x->n) memcpy(v, x->v, x->n * sizeof *v);
        x->v = v, x->cap = cap;
    }
    x->v[x->n++] = id;
}

/* ---- merging: a binary min-heap of candidate pairs ---------------------- */

/* A pair of adjacent symbols and the key of merging them: the merge rank
 * (BPE) or minus the merged piece's score (SentencePiece). Ties go to the
 * leftmost pair, as in llama.cpp's priority queues. */
typedef struct bigram {
    double key;
    int32_t left, right;
    uint32_t size; /* bytes of the merged text: a pair is stale once its symbols changed */
} bigram;

typedef struct heap {
    bigram *v;
    size_t n, cap;
    zarena *a;
    bool oom;
} heap;

static bool before(const bigram *x, const bigram *y) {
    return x->key < y->key || (x->key == y->key && x->left < y->left);
}

static void heap_push(heap *h, bigram b) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        bigram *v = zarena_array(h->a, cap, sizeof *v);
        if (!v) {
            h->oom = true;
            return;
        }
        if (h->n) memcpy(v, h->v, h->n * sizeof *v);
        h->v = v, h->cap = cap;
    }
    size_t i = h->n++;
    for (; i > 0 && before(&b, &h->v[(i - 1) / 2]); i = (i - 1) / 2)
        h->v[i] = h->v[(i - 1) / 2];
    h->v[i] = b;
}

static bigram heap_pop(heap *h) {
    bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c])) c++;
        if (!before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

/* Symbols of one word: a doubly linked list over byte ranges of text. */
typedef struct sym {
    uint32_t off, n; /* n == 0: merged into its left neighbour */
    int32_t prev, next;
} sym;

typedef struct word {
    const char *text;
    sym *s;
    int32_t n;
    heap q;
} word;

/* Splits text into UTF-8 characters by their lead byte, as both llama.cpp
 * tokenizers do (without validating: a bad lead takes what it announces). */
static bool word_init(word *w, const char *text, size_t len, zarena *a) {
    w->text = text;
    w->n = 0;
    w->s = zarena_array(a, len ? len : 1, sizeof *w->s);
    w->q = (heap){.a = a};
    if (!w->s) return false;
    for (size_t off = 0; off < len;) {
        size_t n = zrt_tok_utf8_len((uint8_t)text[off]);
        if (n > len - off) n = len - off;
        w->s[w->n] = (sym){(uint32_t)off, (uint32_t)n, w->n - 1, off + n == len ? -1 : w->n + 1};
        w->n++;
        off += n;
    }
    return true;
}

/* Merges until no pair is left; add(w, t, left, right) queues a candidate. */
typedef void (*pair_fn)(word *w, const zrt_tok *t, int32_t left, int32_t right);

static void word_merge(word *w, const zrt_tok *t, pair_fn add) {
    for (int32_t i = 1; i < w->n; i++)
        add(w, t, i - 1, i);
    while (w->q.n && !w->q.oom) {
        bigram b = heap_pop(&w->q);
        sym *l = &w->s[b.left], *r = &w->s[b.right];
        if (!l->n || !r->n || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->s[r->next].prev = b.left;
        add(w, t, l->prev, b.left);
        add(w, t, b.left, l->next);
    }
}

static void bpe_pair(word *w, const zrt_tok *t, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const sym *l = &w->s[left], *r = &w->s[right];
    int32_t rank = merge_rank(t, w->text + l->off, l->n, w->text + r->off, r->n);
    if (rank >= 0) heap_push(&w->q, (bigram){rank, left, right, l->n + r->n});
}

static void spm_pair(word *w, const zrt_tok *t, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const sym *l = &w->s[left], *r = &w->s[right];
    int32_t id = zrt_tok_find(t, w->text + l->off, l->n + r->n);
    if (id != ZRT_TOK_NULL) heap_push(&w->q, (bigram){-(double)t->score[id], left, right, l->n + r->n});
}

/* ---- byte-level BPE ----------------------------------------------------- */

/* One pre-tokenizer word, already in the GPT-2 alphabet. */
static zstatus bpe_word(const zrt_tok *t, const char *text, size_t len, ivec *out, zdiag *d) {
    int32_t whole = t->ignore_merges ? zrt_tok_find(t, text, len) : ZRT_TOK_NULL;
    if (whole != ZRT_TOK_NULL) return ivec_push(out, whole), ZOK;
    word w;
    if (!word_init(&w, text, len, out->a)) return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory");
    word_merge(&w, t, bpe_pair);
    if (w.q.oom) return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory");
    for (int32_t i = 0; i >= 0 && w.n; i = w.s[i].next) {
        const sym *s = &w.s[i];
        int32_t id = zrt_tok_find(t, text + s->off, s->n);
        if (id != ZRT_TOK_NULL) {
            ivec_push(out, id);
            continue;
        }
        /* A merge produced something that is not a token: llama.cpp then
         * looks up each byte on its own and drops those it cannot find. */
        for (uint32_t k = 0; k < s->n; k++)
            if ((id = zrt_tok_find(t, text + s->off + k, 1)) != ZRT_TOK_NULL) ivec_push(out, id);
    }
    return ZOK;
}

/* Code points of a fragment, decoded as llama.cpp decodes (U+FFFD for bad bytes). */
static uint32_t *decode_cps(const char *text, size_t len, zarena *a, size_t *n) {
    uint32_t *cp = zarena_array(a, len ? len : 1, sizeof *cp);
    if (!cp) return NULL;
    *n = 0;
    for (size_t i = 0; i < len;)
        cp[(*n)++] = zrt_tok_utf8_next((const uint8_t *)text, len, &i);
    return cp;
}

/* Writes the GPT-2 alphabet form of code points cp[0..n) into out (at most
 * 8 bytes per code point); returns its length. */
static size_t byte_encode(const zrt_tok *t, const uint32_t *cp, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t raw[4];
        size_t k = zrt_tok_utf8_put(cp[i], raw);
        if (!k) k = zrt_tok_utf8_put(ZRT_UNI_REPLACE, raw); /* past U+10FFFF: see docs/tokenizer.md */
        for (size_t j = 0; j < k; j++) {
            memcpy(out + o, t->bsym[raw[j]], t->bsym_len[raw[j]]);
            o += t->bsym_len[raw[j]];
        }
    }
    return o;
}

static zstatus bpe_fragment(const zrt_tok *t, const char *text, size_t len, ivec *out, zdiag *d) {
    size_t n;
    uint32_t *cp = decode_cps(text, len, out->a, &n);
    uint32_t *lens = cp ? zarena_array(out->a, n ? n : 1, sizeof *lens) : NULL;
    char *buf = lens ? zarena_alloc(out->a, 8 * n + 1) : NULL;
    if (!buf) return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory for %zu bytes of text", len);
    size_t n_words = zrt_tok_split_words(cp, n, t->digits, lens);
    zstatus s = ZOK;
    for (size_t w = 0, at = 0; w < n_words && !s; at += lens[w++]) {
        size_t blen = byte_encode(t, cp + at, lens[w], buf);
        s = bpe_word(t, buf, blen, out, d);
    }
    return s;
}

/* ---- SentencePiece ------------------------------------------------------ */

static zstatus spm_fragment(const zrt_tok *t, const char *text, size_t len, bool prefix, ivec *out,
                            zdiag *d) {
    /* Spaces become U+2581 (3 bytes), and a space is prepended after BOS,
     * at the start and after special tokens when add_space_prefix is set. */
    char *buf = zarena_alloc(out->a, 3 * (len + 1) + 1);
    if (!buf) return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory for %zu bytes of text", len);
    size_t n = 0;
    for (size_t i = 0; i < len + prefix; i++) {
        char c = i < (size_t)prefix ? ' ' : text[i - prefix];
        if (c == ' ')
            memcpy(buf + n, "\xe2\x96\x81", 3), n += 3;
        else
            buf[n++] = c;
    }
    word w;
    if (!word_init(&w, buf, n, out->a)) return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory");
    word_merge(&w, t, spm_pair);
    if (w.q.oom) return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory");
    for (int32_t i = 0; i >= 0 && w.n; i = w.s[i].next) {
        const sym *s = &w.s[i];
        int32_t id = zrt_tok_find(t, buf + s->off, s->n);
        if (id != ZRT_TOK_NULL) {
            ivec_push(out, id);
            continue;
        }
        for (uint32_t k = 0; k < s->n; k++) {
            uint8_t b = (uint8_t)buf[s->off + k];
            if (t->byte_tok[b] == ZRT_TOK_NULL)
                return zdiag_set(
                    d, ZE_INVALID,
                    "tokenizer: byte 0x%02X has no token: expected <0x%02X> in the SentencePiece "
                    "vocabulary (byte fallback)",
                    b, b);
            ivec_push(out, t->byte_tok[b]);
        }
    }
    return ZOK;
}

/* ---- special tokens and the whole text ---------------------------------- */

/* A stretch of raw text, or a special token found in it. */
typedef struct frag {
    int32_t id; /* ZRT_TOK_NULL: raw text [off, off + len) */
    size_t off, len;
} frag;

static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t m) {
    if (m == 0 || m > n) return NULL;
    for (const char *p = hay, *end = hay + n - m + 1; p < end; p++) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p) return NULL;
        if (!memcmp(p, needle, m)) return p;
    }
    return NULL;
}

/* Where control tokens may be recognised: anywhere with parse_special,
 * except inside the literal spans (a chat's user messages); nowhere without. */
typedef struct special_scope {
    bool parse_special;
    const zrt_tok_span *lit;
    size_t n_lit;
} special_scope;

static bool may_match(const zrt_tok *t, const special_scope *sc, int32_t id, size_t at, size_t tl) {
    if (!(t->attr[id] & (ZRT_TOK_ATTR_CONTROL | ZRT_TOK_ATTR_UNKNOWN))) return true; /* user-defined */
    if (!sc->parse_special) return false;
    for (size_t i = 0; i < sc->n_lit; i++)
        if (at < sc->lit[i].at + sc->lit[i].len && sc->lit[i].at < at + tl) return false;
    return true;
}

/* The next occurrence of token id in [from, end) that may be matched. */
static const char *next_hit(const zrt_tok *t, const special_scope *sc, const char *text, size_t from,
                            size_t end, int32_t id) {
    const char *tok = t->text[id];
    size_t tl = t->text_len[id];
    for (const char *p; (p = find_bytes(text + from, end - from, tok, tl)); from = (size_t)(p - text) + 1)
        if (may_match(t, sc, id, (size_t)(p - text), tl)) return p;
    return NULL;
}

static size_t count_hits(const zrt_tok *t, const special_scope *sc, const char *text, const frag *f,
                         int32_t id) {
    size_t hits = 0, end = f->off + f->len;
    if (f->id != ZRT_TOK_NULL) return 0;
    for (const char *p = text + f->off; (p = next_hit(t, sc, text, (size_t)(p - text), end, id));
         p += t->text_len[id])
        hits++;
    return hits;
}

/* Splits raw fragment f at each occurrence of token id into next[*m..]. */
static void split_frag(const zrt_tok *t, const special_scope *sc, const char *text, const frag *f, int32_t id,
                       frag *next, size_t *m) {
    size_t at = f->off, end = f->off + f->len, tl = t->text_len[id];
    for (const char *p; (p = next_hit(t, sc, text, at, end, id)); at = (size_t)(p - text) + tl) {
        if ((size_t)(p - text) > at) next[(*m)++] = (frag){ZRT_TOK_NULL, at, (size_t)(p - text) - at};
        next[(*m)++] = (frag){id, 0, 0};
    }
    if (end > at) next[(*m)++] = (frag){ZRT_TOK_NULL, at, end - at};
}

/* Splits the raw fragments at every occurrence of each special token,
 * longest tokens first, as llama.cpp's tokenizer_st_partition. */
static frag *partition(const zrt_tok *t, const char *text, size_t len, const special_scope *sc, zarena *a,
                       size_t *n) {
    frag *cur = zarena_array(a, 1, sizeof *cur);
    if (!cur) return NULL;
    *n = 0;
    if (len) cur[(*n)++] = (frag){ZRT_TOK_NULL, 0, len};
    for (uint32_t k = 0; k < t->n_specials && *n; k++) {
        int32_t id = t->specials[k];
        if (!sc->parse_special && (t->attr[id] & (ZRT_TOK_ATTR_CONTROL | ZRT_TOK_ATTR_UNKNOWN))) continue;
        size_t hits = 0;
        for (size_t i = 0; i < *n; i++)
            hits += count_hits(t, sc, text, &cur[i], id);
        if (!hits) continue;
        frag *next = zarena_array(a, *n + 2 * hits, sizeof *next);
        if (!next) return NULL;
        size_t m = 0;
        for (size_t i = 0; i < *n; i++) {
            if (cur[i].id != ZRT_TOK_NULL)
                next[m++] = cur[i];
            else
                split_frag(t, sc, text, &cur[i], id, next, &m);
        }
        cur = next, *n = m;
    }
    return cur;
}

static zstatus encode_frags(const zrt_tok *t, const char *text, const frag *fr, size_t n, ivec *out,
                            zdiag *d) {
    bool prev_special = true; /* SentencePiece: a space prefix at the start */
    zstatus s = ZOK;
    for (size_t i = 0; i < n && !s; i++) {
        if (fr[i].id != ZRT_TOK_NULL) {
            ivec_push(out, fr[i].id);
            prev_special = true;
        } else if (t->model == ZRT_TOK_SPM) {
            s = spm_fragment(t, text + fr[i].off, fr[i].len, t->add_space_prefix && prev_special, out, d);
            prev_special = false;
        } else {
            s = bpe_fragment(t, text + fr[i].off, fr[i].len, out, d);
        }
    }
    return s;
}

zstatus zrt_tok_encode(const zrt_tok *t, const char *text, size_t len, unsigned flags, zarena *a,
                       int32_t **ids, size_t *n_ids, zdiag *d) {
    return zrt_tok_encode_guarded(t, text, len, flags, NULL, 0, a, ids, n_ids, d);
}

zstatus zrt_tok_encode_guarded(const zrt_tok *t, const char *text, size_t len, unsigned flags,
                               const zrt_tok_span *lit, size_t n_lit, zarena *a, int32_t **ids, size_t *n_ids,
                               zdiag *d) {
    *ids = NULL, *n_ids = 0;
    special_scope sc = {.parse_special = flags & ZRT_TOK_PARSE_SPECIAL, .lit = lit, .n_lit = n_lit};
    zarena *scratch = zarena_new();
    if (!scratch) return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory");
    ivec out = {.a = scratch};
    bool add = flags & ZRT_TOK_ADD_SPECIAL;
    if (add && t->add_bos) ivec_push(&out, t->bos);
    size_t n;
    frag *fr = partition(t, text, len, &sc, scratch, &n);
    zstatus s =
        fr ? encode_frags(t, text, fr, n, &out, d) : zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory");
    if (!s && add && t->add_eos) ivec_push(&out, t->eos);
    if (!s && out.oom) s = zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory for the token list");
    if (!s) {
        *ids = zarena_array(a, out.n ? out.n : 1, sizeof **ids);
        if (!*ids) s = zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory for %zu tokens", out.n);
    }
    if (!s) {
        if (out.n) memcpy(*ids, out.v, out.n * sizeof **ids);
        *n_ids = out.n;
    }
    zarena_free(scratch);
    return s;
}

/* ---- decoding ----------------------------------------------------------- */

/* A byte-level BPE entry back to bytes. A code point outside the GPT-2
 * alphabet becomes llama.cpp's marker "[UNK_BYTE_0x<its UTF-8 in hex><entry>]". */
static int unbyte(const zrt_tok *t, uint32_t cp) {
    return cp < 324 ? t->unbyte[cp] : -1;
}

static char *bpe_unmap(const zrt_tok *t, uint32_t id, uint32_t *len) {
    const uint8_t *s = (const uint8_t *)t->text[id];
    size_t n = t->text_len[id], cap = n + 1, o = 0;
    for (size_t i = 0; i < n;)
        cap += unbyte(t, zrt_tok_utf8_next(s, n, &i)) < 0 ? 24 + n : 0;
    char *out = zarena_alloc(t->arena, cap);
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        uint32_t cp = zrt_tok_utf8_next(s, n, &i);
        int b = unbyte(t, cp);
        if (b >= 0) {
            out[o++] = (char)b;
            continue;
        }
        uint8_t u[4];
        size_t k = zrt_tok_utf8_put(cp, u);
        o += (size_t)sprintf(out + o, "[UNK_BYTE_0x");
        for (size_t j = 0; j < k; j++)
            o += (size_t)sprintf(out + o, "%02x", u[j]);
        memcpy(out + o, s, n), o += n;
        out[o++] = ']';
    }
    *len = (uint32_t)o;
    return out;
}

/* A SentencePiece entry with U+2581 turned back into spaces. */
static char *spm_unescape(const zrt_tok *t, uint32_t id, uint32_t *len) {
    const char *s = t->text[id];
    size_t n = t->text_len[id], o = 0;
    char *out = zarena_alloc(t->arena, n + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        if (n - i >= 3 && !memcmp(s + i, "\xe2\x96\x81", 3))
            out[o++] = ' ', i += 3;
        else
            out[o++] = s[i++];
    }
    *len = (uint32_t)o;
    return out;
}

/* What each token decodes to, once, as llama.cpp's token_to_piece cache:
 * control, unknown and user-defined tokens as their text; normal tokens
 * decoded; byte tokens as their byte; unused and undefined ones as nothing. */
static zstatus build_pieces(zrt_tok *t, zdiag *d) {
    t->piece = zarena_array(t->arena, t->n_vocab, sizeof *t->piece);
    t->piece_len = zarena_array(t->arena, t->n_vocab, sizeof *t->piece_len);
    if (!t->piece || !t->piece_len) return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory");
    const unsigned verbatim = ZRT_TOK_ATTR_CONTROL | ZRT_TOK_ATTR_UNKNOWN | ZRT_TOK_ATTR_USER_DEFINED;
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        unsigned at = t->attr[i];
        const char *p = "";
        uint32_t n = 0;
        if (at & verbatim) {
            p = t->text[i], n = t->text_len[i];
        } else if (at & ZRT_TOK_ATTR_NORMAL) {
            p = t->model == ZRT_TOK_SPM ? spm_unescape(t, i, &n) : bpe_unmap(t, i, &n);
            if (!p) return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory");
        } else if ((at & ZRT_TOK_ATTR_BYTE) && t->text_len[i] == 6) {
            char *b = zarena_alloc(t->arena, 2);
            if (!b) return zdiag_set(d, ZE_NOMEM, "tokenizer: out of memory");
            b[0] = (char)strtol(t->text[i] + 3, NULL, 16); /* "<0xXX>" */
            p = b, n = 1;
        }
        t->piece[i] = p, t->piece_len[i] = n;
        if (n > t->max_piece) t->max_piece = n;
    }
    return ZOK;
}

size_t zrt_tok_piece(const zrt_tok *t, int32_t id, bool special, const char **piece) {
    *piece = "";
    if (!valid_id(t, id)) return 0;
    if (!special && (t->attr[id] & (ZRT_TOK_ATTR_CONTROL | ZRT_TOK_ATTR_UNKNOWN))) return 0;
    *piece = t->piece[id];
    return t->piece_len[id];
}

/* llama.cpp's clean_up_tokenization_spaces, in place: " ?" " !" " ." " ,"
 * lose their space, a lone " ' " loses both, and " 's" " 'm" " 're" " 've"
 * lose theirs (" 't" " 'd" " 'll" keep it). */
static size_t clean_spaces(char *s, size_t n) {
    size_t o = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) o--;
        s[o++] = x;
    }
    n = o, o = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (x == '\'' && i + 1 < n && s[i - 1] == ' ' && s[i + 1] == ' ') {
            o--;           /* the space before */
            s[++i] = '\0'; /* and the one after, skipped (llama.cpp also blanks it in place) */
        }
        s[o++] = x;
    }
    n = o, o = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = s[i + 1], x2 = i + 2 < n ? s[i + 2] : 0;
            if (x1 == 's' || x1 == 'm' || (x2 && ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')))) o--;
        }
        s[o++] = x;
    }
    return o;
}

zstatus zrt_tok_detokenize(const zrt_tok *t, const int32_t *ids, size_t n, unsigned flags, zarena *a,
                           char **text, size_t *len, zdiag *d) {
    *text = NULL, *len = 0;
    bool remove_space = t->add_space_prefix, special = flags & ZRT_TOK_UNPARSE_SPECIAL;
    if ((flags & ZRT_TOK_REMOVE_SPECIAL) && t->add_bos && n && ids[0] == t->bos) {
        remove_space = false; /* llama.cpp keeps the space when it drops the BOS */
        ids++, n--;
    }
    if ((flags & ZRT_TOK_REMOVE_SPECIAL) && t->add_eos && n && ids[n - 1] == t->eos) n--;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!valid_id(t, ids[i]))
            return zdiag_set(d, ZE_INVALID, "detokenize: token %d at position %zu: expected 0..%u", ids[i], i,
                             t->n_vocab - 1);
        total += t->piece_len[ids[i]];
    }
    char *out = zarena_alloc(a, total + 1);
    if (!out) return zdiag_set(d, ZE_NOMEM, "detokenize: out of memory for %zu bytes", total);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p;
        size_t pl = zrt_tok_piece(t, ids[i], special, &p);
        if (remove_space && pl && p[0] == ' ') p++, pl--; /* only the first token's */
        remove_space = false;
        memcpy(out + o, p, pl), o += pl;
    }
    if (t->clean_spaces) o = clean_spaces(out, o);
    out[o] = '\0';
    *text = out, *len = o;
    return ZOK;
}

/* ---- streaming ---------------------------------------------------------- */

struct zrt_tok_stream {
    const zrt_tok *tok;
    bool special;
    uint8_t *buf; /* the held bytes (the start of a character still coming), then the new piece */
    size_t n_held;
    char *out; /* room for every byte of buf as U+FFFD */
};

zrt_tok_stream *zrt_tok_stream_new(const zrt_tok *t, unsigned flags, zarena *a) {
    zrt_tok_stream *s = zarena_alloc(a, sizeof *s);
    if (!s) return NULL;
    s->tok = t;
    s->special = flags & ZRT_TOK_UNPARSE_SPECIAL;
    s->buf = zarena_alloc(a, (size_t)t->max_piece + 4);
    s->out = zarena_alloc(a, 3 * ((size_t)t->max_piece + 4) + 1);
    return s->buf && s->out ? s : NULL;
}

const char *zrt_tok_stream_push(zrt_tok_stream *s, int32_t id, size_t *len) {
    const char *p;
    size_t pl = zrt_tok_piece(s->tok, id, s->special, &p), n = s->n_held + pl, i = 0, o = 0;
    memcpy(s->buf + s->n_held, p, pl);
    while (i < n) {
        bool invalid;
        size_t k = zrt_tok_utf8_valid_prefix(s->buf + i, n - i, &invalid);
        memcpy(s->out + o, s->buf + i, k), o += k, i += k;
        if (!invalid) break; /* the rest (at most 3 bytes) may still complete */
        memcpy(s->out + o, "\xef\xbf\xbd", 3), o += 3, i++;
    }
    memmove(s->buf, s->buf + i, n - i);
    s->n_held = n - i;
    s->out[o] = '\0';
    *len = o;
    return s->out;
}

const char *zrt_tok_stream_flush(zrt_tok_stream *s, size_t *len) {
    size_t o = 0;
    for (size_t i = 0; i < s->n_held; i++)
        memcpy(s->out + o, "\xef\xbf\xbd", 3), o += 3;
    s->n_held = 0;
    s->out[o] = '\0';
    *len = o;
    return s->out;
}
