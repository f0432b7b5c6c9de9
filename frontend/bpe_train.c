/* A tiny byte-level BPE trainer, enough to give the test models a tokenizer
 * that behaves like a real GPT-2-style one (multi-byte tokens, ranked merges,
 * a pre-tokenizer that keeps merges inside words).
 *
 * Algorithm: split the text with the family's pre-tokenizer, count the
 * distinct words, then repeat: count adjacent symbol pairs weighted by word
 * frequency, merge the most frequent pair everywhere. Ties go to the smallest
 * (left id, right id), so the result depends on nothing but the text. A merge
 * whose result already exists (ab+c, then a+bc) reuses the token, as Hugging
 * Face's trainer does. Training stops at max_new new tokens or when no pair
 * occurs twice. */
#include <stdlib.h>
#include <string.h>

#include "../ir/zhash.h"
#include "mkmodel.h"

/* Original text written for this project (no third-party prose): a mix of
 * English and code so that both word pieces and punctuation runs get merged. */
const char zmk_corpus[] =
    "The quick brown fox jumps over the lazy dog. The dog does not care; it has seen the fox before.\n"
    "A compiler reads a program, builds a graph of the values it computes, and then rewrites that graph "
    "until it is cheap to run. Each pass does one thing and leaves the graph valid for the next one.\n"
    "When the weather is cold, the river freezes near the bank first, and the children wait for the ice "
    "to be thick enough to hold them. Their parents watch from the window of the kitchen.\n"
    "In the morning we made bread: flour, water, salt and a little yeast, mixed and left to rise for "
    "three hours. The kitchen was warm, and the dough doubled in size before noon.\n"
    "Large language models predict the next token of a text. They are trained on a great deal of "
    "writing, and at inference time they run the same layers again and again, once for every token.\n"
    "Memory bandwidth, not arithmetic, limits how fast a model can produce tokens on a single device. "
    "Reading the weights once per token sets the floor; everything else is overhead.\n"
    "She opened the letter, read the first line twice, and then put it back in the envelope. There "
    "would be time to answer it later, after the train had left the station.\n"
    "The station was quiet at that hour. A man with a brown coat sold tea from a cart, and the clock "
    "above the platform was five minutes slow, as it had been for years.\n"
    "int main(int argc, char **argv) {\n"
    "    if (argc < 2) {\n"
    "        fprintf(stderr, \"usage: %s FILE\\n\", argv[0]);\n"
    "        return 2;\n"
    "    }\n"
    "    for (int i = 1; i < argc; i++) {\n"
    "        const char *path = argv[i];\n"
    "        if (load_file(path) != 0) return 1;\n"
    "    }\n"
    "    return 0;\n"
    "}\n"
    "static float dot(const float *a, const float *b, int n) {\n"
    "    float sum = 0.0f;\n"
    "    for (int i = 0; i < n; i++) sum += a[i] * b[i];\n"
    "    return sum;\n"
    "}\n"
    "def softmax(values):\n"
    "    largest = max(values)\n"
    "    exps = [math.exp(v - largest) for v in values]\n"
    "    total = sum(exps)\n"
    "    return [e / total for e in exps]\n"
    "\n"
    "for token in tokens:\n"
    "    if token in vocab:\n"
    "        ids.append(vocab[token])\n"
    "    else:\n"
    "        ids.extend(encode_bytes(token))\n"
    "\n"
    "The garden behind the house had two apple trees and a row of beans. Every summer the beans grew "
    "taller than the fence, and every autumn the apples fell faster than anyone could pick them up.\n"
    "It is easy to write a program that works on the examples you tried; it is harder to write one that "
    "fails loudly on the examples you did not try. Good tests are the second kind of program.\n"
    "They walked along the road until the lights of the town were behind them and the only sound was "
    "the wind in the tall grass. Nobody spoke. There was nothing that needed to be said.\n"
    "The numbers were 12, 345, 6789 and 2024; the total came to 9170, which was not what the report "
    "said. Someone had added the rows twice, and the error was found on the third of May.\n"
    "Q: What does the cache hold? A: The keys and values of every token seen so far, for every layer, "
    "so that the next step only has to compute attention for one new row.\n"
    "Please read the instructions before you start, and ask if anything is unclear. You should not "
    "need more than an hour, but take the time you need; it is better to be right than to be fast.\n"
    "struct node {\n"
    "    int op;\n"
    "    struct node *left, *right;\n"
    "    double value;\n"
    "};\n"
    "\n"
    "while (node != NULL && node->op != OP_END) {\n"
    "    node = node->next;\n"
    "    count += 1;\n"
    "}\n"
    "The old library had more books than shelves, and the books that did not fit were kept in boxes "
    "under the stairs. On rainy days the children were allowed to open one box each and read whatever "
    "they found inside. Some found maps, some found poems, and one found a cookbook that nobody had "
    "ever used.\n"
    "We will meet at the corner of the market at seven o'clock. If you are late, we'll wait, but don't "
    "be too late: the boat leaves at half past seven, and it won't wait for anyone.\n";

/* ---- GPT-2's byte-to-unicode table -------------------------------------- */

/* GPT-2 lists the printable bytes first (33..126, 161..172, 174..255), in
 * order, then the rest, which it maps to U+0100 and up. Token id i is the
 * i-th byte of that list, which is also its position in real vocabularies. */
static bool byte_printable(uint8_t b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
}

static uint32_t byte_codepoint(uint8_t b) {
    if (byte_printable(b)) return b;
    uint32_t n = 0;
    for (uint32_t c = 0; c < b; c++)
        if (!byte_printable((uint8_t)c)) n++;
    return 256 + n;
}

uint32_t zmk_byte_id(uint8_t b) {
    if (byte_printable(b)) {
        uint32_t id = 0;
        for (uint32_t c = 0; c < b; c++)
            if (byte_printable((uint8_t)c)) id++;
        return id;
    }
    return 188 + (byte_codepoint(b) - 256); /* 188 printable bytes come first */
}

void zmk_byte_symbol(uint8_t b, char out[3]) {
    uint32_t cp = byte_codepoint(b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

/* ---- pre-tokenizer ------------------------------------------------------ */

/* An ASCII implementation of the Llama-3 / Qwen2 split regex
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,R}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with R = digit_run (1 for Qwen2, 3 for Llama 3). Returns the length of the
 * match at s[0]; alternatives are tried in order, as a regex engine does. */
static bool is_letter(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
static bool is_nl(char c) {
    return c == '\n' || c == '\r';
}
static bool is_punct(char c) {
    return c && !is_space(c) && !is_letter(c) && !is_digit(c);
}

static size_t run(const char *s, bool (*pred)(char)) {
    size_t n = 0;
    while (s[n] && pred(s[n]))
        n++;
    return n;
}

static size_t match_contraction(const char *s) {
    static const char *const tails[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    if (s[0] != '\'') return 0;
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        size_t n = strlen(tails[i]), k = 0;
        while (k < n && s[1 + k] && (s[1 + k] | 0x20) == tails[i][k])
            k++;
        if (k == n) return 1 + n;
    }
    return 0;
}

static size_t match_space(const char *s) {
    size_t w = run(s, is_space);
    if (w == 0) return 0;
    size_t last_nl = w;
    for (size_t k = 0; k < w; k++)
        if (is_nl(s[k])) last_nl = k;
    if (last_nl < w) return last_nl + 1; /* \s*[\r\n]+ */
    if (s[w] == 0 || w == 1) return w;   /* \s+(?!\S) at the end, or plain \s+ */
    return w - 1;                        /* \s+(?!\S): leave one space for the next word */
}

static size_t pretok_match(const char *s, int digit_run) {
    size_t n = match_contraction(s);
    if (n) return n;
    if (is_letter(s[0])) return run(s, is_letter);
    if (!is_nl(s[0]) && !is_digit(s[0]) && is_letter(s[1])) return 1 + run(s + 1, is_letter);
    if (is_digit(s[0])) {
        n = run(s, is_digit);
        return n < (size_t)digit_run ? n : (size_t)digit_run;
    }
    size_t sp = s[0] == ' ' ? 1 : 0;
    n = run(s + sp, is_punct);
    if (n) return sp + n + run(s + sp + n, is_nl);
    n = match_space(s);
    return n ? n : 1;
}

/* ---- training ----------------------------------------------------------- */

typedef struct bpe_word {
    const char *text; /* NUL-terminated copy of the word's bytes */
    uint32_t count;
    uint32_t n_sym;
    uint32_t *sym;
    UT_hash_handle hh;
} bpe_word;

typedef struct bpe_tok {
    const char *text;
    uint32_t id;
    UT_hash_handle hh;
} bpe_tok;

typedef struct bpe_state {
    zarena *a;
    bpe_word *words; /* uthash by text, iterated in insertion order */
    bpe_tok *by_text;
    const char **tokens;
    uint32_t n_tokens, cap;
    uint64_t *pair_key; /* open-addressing pair counts, cleared per round */
    uint32_t *pair_cnt;
    uint32_t pair_mask;
} bpe_state;

static zstatus oom(zdiag *d, const char *what) {
    return zdiag_set(d, ZE_NOMEM, "mkmodel: BPE training: out of memory (%s)", what);
}

static zstatus add_token(bpe_state *st, const char *text, uint32_t *id, zdiag *d) {
    bpe_tok *t;
    HASH_FIND_STR(st->by_text, text, t);
    if (t) {
        *id = t->id;
        return ZOK;
    }
    if (st->n_tokens == st->cap) return zdiag_set(d, ZE_INTERNAL, "mkmodel: BPE token table full");
    t = zarena_alloc(st->a, sizeof *t);
    if (!t) return oom(d, "token");
    t->text = text;
    t->id = st->n_tokens;
    zhash_arena = st->a;
    zhash_oom = 0;
    HASH_ADD_KEYPTR(hh, st->by_text, t->text, strlen(t->text), t);
    if (zhash_oom) return oom(d, "token index");
    st->tokens[st->n_tokens++] = text;
    *id = t->id;
    return ZOK;
}

static zstatus add_word(bpe_state *st, const char *s, size_t n, zdiag *d) {
    char *text = zarena_strndup(st->a, s, n);
    if (!text) return oom(d, "word");
    bpe_word *w;
    HASH_FIND_STR(st->words, text, w);
    if (w) {
        w->count++;
        return ZOK;
    }
    w = zarena_alloc(st->a, sizeof *w);
    uint32_t *sym = zarena_array(st->a, n, sizeof *sym);
    if (!w || !sym) return oom(d, "word");
    for (size_t i = 0; i < n; i++)
        sym[i] = zmk_byte_id((uint8_t)s[i]);
    *w = (bpe_word){.text = text, .count = 1, .n_sym = (uint32_t)n, .sym = sym};
    zhash_arena = st->a;
    zhash_oom = 0;
    HASH_ADD_KEYPTR(hh, st->words, w->text, n, w);
    return zhash_oom ? oom(d, "word index") : ZOK;
}

static zstatus split_text(bpe_state *st, const char *text, int digit_run, uint64_t *n_pairs, zdiag *d) {
    *n_pairs = 0;
    for (const char *p = text; *p;) {
        size_t n = pretok_match(p, digit_run);
        zstatus s = add_word(st, p, n, d);
        if (s) return s;
        *n_pairs += n;
        p += n;
    }
    return ZOK;
}

static void count_pair(bpe_state *st, uint64_t key, uint32_t w) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    for (uint32_t i = (uint32_t)(h >> 32) & st->pair_mask;; i = (i + 1) & st->pair_mask) {
        if (st->pair_cnt[i] == 0) st->pair_key[i] = key;
        if (st->pair_key[i] == key) {
            st->pair_cnt[i] += w;
            return;
        }
    }
}

/* The most frequent pair this round (ties: smallest key); 0 count if none. */
static uint32_t best_pair(bpe_state *st, uint64_t *key) {
    memset(st->pair_cnt, 0, sizeof *st->pair_cnt * ((size_t)st->pair_mask + 1));
    bpe_word *w, *tmp;
    HASH_ITER(hh, st->words, w, tmp) {
        for (uint32_t i = 0; i + 1 < w->n_sym; i++)
            count_pair(st, (uint64_t)w->sym[i] << 32 | w->sym[i + 1], w->count);
    }
    uint32_t best = 0;
    for (uint32_t i = 0; i <= st->pair_mask; i++) {
        uint32_t c = st->pair_cnt[i];
        if (c > best || (c == best && c && st->pair_key[i] < *key)) {
            best = c;
            *key = st->pair_key[i];
        }
    }
    return best;
}

static void apply_merge(bpe_state *st, uint32_t l, uint32_t r, uint32_t id) {
    bpe_word *w, *tmp;
    HASH_ITER(hh, st->words, w, tmp) {
        uint32_t o = 0;
        for (uint32_t i = 0; i < w->n_sym; i++) {
            if (i + 1 < w->n_sym && w->sym[i] == l && w->sym[i + 1] == r) {
                w->sym[o++] = id;
                i++;
            } else {
                w->sym[o++] = w->sym[i];
            }
        }
        w->n_sym = o;
    }
}

static zstatus init_state(bpe_state *st, zarena *a, uint32_t max_new, uint64_t n_pairs, zdiag *d) {
    st->cap = 256 + max_new;
    st->tokens = zarena_array(a, st->cap, sizeof *st->tokens);
    uint32_t size = 1024;
    while (size < 2 * n_pairs + 2)
        size *= 2;
    st->pair_mask = size - 1;
    st->pair_key = zarena_array(a, size, sizeof *st->pair_key);
    st->pair_cnt = zarena_array(a, size, sizeof *st->pair_cnt);
    if (!st->tokens || !st->pair_key || !st->pair_cnt) return oom(d, "tables");
    for (uint32_t i = 0; i < 256; i++) {
        uint8_t b = 0;
        while (zmk_byte_id(b) != i)
            b++;
        char sym[3], *text;
        zmk_byte_symbol(b, sym);
        uint32_t id;
        if (!(text = zarena_strdup(a, sym))) return oom(d, "byte token");
        zstatus s = add_token(st, text, &id, d);
        if (s) return s;
    }
    return ZOK;
}

zstatus zmk_bpe_train(const char *text, int digit_run, uint32_t max_new, zarena *a, zmk_bpe *out, zdiag *d) {
    bpe_state st = {.a = a};
    uint64_t n_pairs;
    zstatus s = split_text(&st, text, digit_run, &n_pairs, d);
    if (s || (s = init_state(&st, a, max_new, n_pairs, d))) return s;
    /* Each merge removes at least one symbol, so there are fewer merges than bytes. */
    const char **merges = zarena_array(a, n_pairs + 1, sizeof *merges);
    if (!merges) return oom(d, "merges");
    uint32_t n_merges = 0;
    while (st.n_tokens < st.cap) {
        uint64_t key = UINT64_MAX;
        if (best_pair(&st, &key) < 2) break;
        uint32_t l = (uint32_t)(key >> 32), r = (uint32_t)key, id;
        char *tok = zarena_printf(a, "%s%s", st.tokens[l], st.tokens[r]);
        char *merge = zarena_printf(a, "%s %s", st.tokens[l], st.tokens[r]);
        if (!tok || !merge) return oom(d, "merge");
        if ((s = add_token(&st, tok, &id, d))) return s;
        merges[n_merges++] = merge;
        apply_merge(&st, l, r, id);
    }
    *out = (zmk_bpe){.n_tokens = st.n_tokens, .tokens = st.tokens, .n_merges = n_merges, .merges = merges};
    return ZOK;
}
