/* Token sampling with llama.cpp's semantics (src/llama-sampling.cpp): see
 * sampler.h for the chain and docs/tokenizer.md for the details. */
#include "sampler.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct zrt_sampler {
    zrt_sample_params p;
    uint32_t n_vocab;
    uint32_t last_n; /* history length the repeat penalty sees */
    int32_t *ring;   /* the last last_n accepted tokens */
    uint32_t ring_len, ring_at;
    uint16_t *count;       /* per token: occurrences in the ring */
    zrt_sample_cand *cand; /* n_vocab */
    uint8_t *banned;       /* per token: never drawn (zrt_sample_ban) */
    uint32_t n_banned;
    uint64_t rng[4]; /* xoshiro256** state */
};

void zrt_sample_defaults(zrt_sample_params *p) {
    *p = (zrt_sample_params){.temp = 0.8f,
                             .top_k = 40,
                             .top_p = 0.95f,
                             .min_p = 0.05f,
                             .repeat_penalty = 1.0f,
                             .repeat_last_n = 64,
                             .seed = 0};
}

const char zrt_sample_flags_help[] =
    "  --temp T             temperature, any number; 0 or less picks the most likely token (greedy) (0.8)\n"
    "  --top-k K            keep the K most likely tokens, any integer; 0 or less keeps all (40)\n"
    "  --top-p P            keep the most likely tokens up to probability mass P, 0 or more; 1 or more\n"
    "                       keeps all (0.95)\n"
    "  --min-p P            drop tokens less likely than P times the most likely, at most 1; 0 or less\n"
    "                       keeps all (0.05)\n"
    "  --repeat-penalty R   more than 0; the logit of a recent token is divided by R when positive and\n"
    "                       multiplied by R when not, so R > 1 discourages repeats; 1 is off (1.0)\n"
    "  --repeat-last-n N    how many recent tokens the penalty looks at, -1 or more; 0 off, -1 the\n"
    "                       context (64)\n"
    "  --seed S             seed of the random draws, 0..9223372036854775807; the same seed gives the\n"
    "                       same tokens; -1 draws a seed and prints it (-1)\n";

/* ---- flags -------------------------------------------------------------- */

static const char *flag_value(int argc, char **argv, int *i, const char *name, bool *missing) {
    size_t n = strlen(name);
    const char *a = argv[*i];
    *missing = false;
    if (strncmp(a, name, n)) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n]) return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

static bool parse_f(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || *end || errno || !isfinite(v)) return false;
    *out = v;
    return true;
}

static bool parse_i(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* Parses v as flag k of FLAGS into q; false for a malformed or out-of-range value. */
static bool parse_flag(int k, const char *v, zrt_sample_params *q) {
    long long n = 0;
    switch (k) {
    case 0: return parse_f(v, &q->temp);
    case 1: return parse_i(v, INT32_MIN, INT32_MAX, &n) && (q->top_k = (int32_t)n, true);
    case 2: return parse_f(v, &q->top_p) && q->top_p >= 0;
    case 3: return parse_f(v, &q->min_p) && q->min_p <= 1;
    case 4: return parse_f(v, &q->repeat_penalty) && q->repeat_penalty > 0;
    case 5: return parse_i(v, -1, INT32_MAX, &n) && (q->repeat_last_n = (int32_t)n, true);
    default:
        if (!parse_i(v, -1, INT64_MAX, &n)) return false;
        q->seed = n < 0 ? ZRT_SAMPLE_SEED_RANDOM : (uint64_t)n;
        return true;
    }
}

int zrt_sample_parse_arg(zrt_sample_params *p, int argc, char **argv, int *i, zdiag *d) {
    static const char *const FLAGS[] = {"--temp",           "--top-k",         "--top-p", "--min-p",
                                        "--repeat-penalty", "--repeat-last-n", "--seed"};
    /* The ranges of the help text, for the error. */
    static const char *const RANGE[] = {"a number",
                                        "an integer",
                                        "a number, 0 or more",
                                        "a number, at most 1",
                                        "a number above 0",
                                        "an integer, -1 or more",
                                        "-1 (random) or 0..9223372036854775807"};
    for (int k = 0; k < (int)(sizeof FLAGS / sizeof FLAGS[0]); k++) {
        bool missing;
        const char *v = flag_value(argc, argv, i, FLAGS[k], &missing);
        if (missing) return zdiag_set(d, ZE_INVALID, "%s: expected a value", FLAGS[k]), -1;
        if (!v) continue;
        zrt_sample_params q = *p; /* p is left as it was on a bad value */
        if (!parse_flag(k, v, &q))
            return zdiag_set(d, ZE_INVALID, "%s: '%s' is not a valid value: expected %s", FLAGS[k], v,
                             RANGE[k]),
                   -1;
        *p = q;
        return 1;
    }
    return 0;
}

/* ---- random numbers ----------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform(uint64_t s[4]) {
    return (double)(xoshiro(s) >> 11) * 0x1.0p-53;
}

/* ---- the sampler -------------------------------------------------------- */

zstatus zrt_sample_new(const zrt_sample_params *p, uint32_t n_vocab, uint32_t ctx, zarena *a,
                       zrt_sampler **out, zdiag *d) {
    *out = NULL;
    if (n_vocab == 0) return zdiag_set(d, ZE_INVALID, "sampler: expected a vocabulary of at least 1 token");
    if (p->repeat_penalty <= 0 || !isfinite(p->repeat_penalty))
        return zdiag_set(d, ZE_INVALID, "sampler: --repeat-penalty %g: expected a positive number",
                         (double)p->repeat_penalty);
    zrt_sampler *s = zarena_alloc(a, sizeof *s);
    if (!s) return zdiag_set(d, ZE_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->last_n = p->repeat_last_n < 0 ? ctx : (uint32_t)p->repeat_last_n;
    s->ring = zarena_array(a, s->last_n ? s->last_n : 1, sizeof *s->ring);
    s->count = zarena_array(a, n_vocab, sizeof *s->count);
    s->cand = zarena_array(a, n_vocab, sizeof *s->cand);
    s->banned = zarena_array(a, n_vocab, sizeof *s->banned);
    if (!s->ring || !s->count || !s->cand || !s->banned)
        return zdiag_set(d, ZE_NOMEM, "sampler: out of memory for %u tokens", n_vocab);
    zrt_sample_reset(s);
    *out = s;
    return ZOK;
}

void zrt_sample_reset(zrt_sampler *s) {
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    memset(s->count, 0, s->n_vocab * sizeof *s->count);
    s->ring_len = s->ring_at = 0;
}

bool zrt_sample_ban(zrt_sampler *s, int32_t token) {
    if (token < 0 || (uint32_t)token >= s->n_vocab) return false;
    if (s->banned[token]) return true;
    if (s->n_banned + 1 == s->n_vocab) return false; /* one must remain */
    s->banned[token] = 1;
    s->n_banned++;
    return true;
}

void zrt_sample_accept(zrt_sampler *s, int32_t token) {
    if (!s->last_n || token < 0 || (uint32_t)token >= s->n_vocab) return;
    if (s->ring_len == s->last_n) {
        s->count[s->ring[s->ring_at]]--; /* the oldest leaves the window */
    } else {
        s->ring_len++;
    }
    s->ring[s->ring_at] = token;
    s->ring_at = (s->ring_at + 1) % s->last_n;
    if (s->count[token] < UINT16_MAX) s->count[token]++;
}

/* Descending logit, ties by id: a total order, so results never depend on
 * the sort algorithm. */
static int cand_cmp(const void *a, const void *b) {
    const zrt_sample_cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void sort_cands(zrt_sample_cand *c, size_t n) {
    qsort(c, n, sizeof *c, cand_cmp);
}

/* Heap of the k best seen so far, worst at the root: O(n log k). */
static void sift_down(zrt_sample_cand *h, size_t k, size_t i) {
    for (;;) {
        size_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < k && cand_cmp(&h[l], &h[w]) > 0) w = l;
        if (r < k && cand_cmp(&h[r], &h[w]) > 0) w = r;
        if (w == i) return;
        zrt_sample_cand t = h[i];
        h[i] = h[w], h[w] = t;
        i = w;
    }
}

size_t zrt_sample_top_k(zrt_sample_cand *c, size_t n, int32_t k) {
    if (k <= 0) return n;
    if ((size_t)k >= n) {
        sort_cands(c, n);
        return n;
    }
    size_t m = (size_t)k;
    for (size_t i = m / 2; i-- > 0;)
        sift_down(c, m, i);
    for (size_t i = m; i < n; i++)
        if (cand_cmp(&c[i], &c[0]) < 0) {
            c[0] = c[i];
            sift_down(c, m, 0);
        }
    sort_cands(c, m);
    return m;
}

void zrt_sample_softmax(zrt_sample_cand *c, size_t n) {
    float max = -INFINITY;
    for (size_t i = 0; i < n; i++)
        max = fmaxf(max, c[i].logit);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += c[i].p = expf(c[i].logit - max);
    for (size_t i = 0; i < n; i++)
        c[i].p = (float)(c[i].p / sum);
}

/* Whether c[0..n) is in cand_cmp order already (as top-k leaves it). */
static bool is_sorted(const zrt_sample_cand *c, size_t n) {
    for (size_t i = 1; i < n; i++)
        if (cand_cmp(&c[i - 1], &c[i]) > 0) return false;
    return true;
}

/* The smallest prefix (by probability) whose mass reaches p. */
size_t zrt_sample_top_p(zrt_sample_cand *c, size_t n, float p) {
    if (p >= 1.0f || n == 0) return n;
    if (!is_sorted(c, n)) sort_cands(c, n);
    zrt_sample_softmax(c, n);
    float cum = 0;
    for (size_t i = 0; i < n; i++)
        if ((cum += c[i].p) >= p) return i + 1;
    return n;
}

/* Tokens with probability >= p times the largest: logit >= max + log(p).
 * Keeps the order it is given (no sort needed). */
size_t zrt_sample_min_p(zrt_sample_cand *c, size_t n, float p) {
    if (p <= 0.0f || n == 0) return n;
    float max = c[0].logit;
    for (size_t i = 1; i < n; i++)
        max = fmaxf(max, c[i].logit);
    float min_logit = max + logf(p);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (c[i].logit >= min_logit) c[k++] = c[i];
    return k;
}

/* llama.cpp's repeat penalty: a recent token's logit is divided by the
 * penalty if positive, multiplied if not, once however often it occurred. */
static void penalize(zrt_sampler *s, size_t n) {
    float r = s->p.repeat_penalty;
    if (!s->last_n || r == 1.0f) return;
    for (size_t i = 0; i < n; i++) {
        float *l = &s->cand[i].logit;
        if (s->count[s->cand[i].id]) *l = *l <= 0 ? *l * r : *l / r;
    }
}

/* The first candidate reaching u of the cumulated mass, as llama.cpp's dist. */
static int32_t draw(zrt_sampler *s, zrt_sample_cand *c, size_t n) {
    zrt_sample_softmax(c, n);
    double target = uniform(s->rng), cum = 0;
    for (size_t i = 0; i < n; i++)
        if ((cum += c[i].p) >= target) return c[i].id;
    return c[n - 1].id; /* rounding left the sum just below target */
}

int32_t zrt_sample(zrt_sampler *s, const float *logits) {
    zrt_sample_cand *c = s->cand;
    size_t n = 0;
    for (uint32_t i = 0; i < s->n_vocab; i++)
        if (!s->banned[i]) c[n++] = (zrt_sample_cand){(int32_t)i, logits[i], 0};
    penalize(s, n);
    if (s->p.temp <= 0) {
        size_t best = 0;
        for (size_t i = 1; i < n; i++)
            if (c[i].logit > c[best].logit) best = i;
        return c[best].id;
    }
    n = zrt_sample_top_k(c, n, s->p.top_k);
    n = zrt_sample_top_p(c, n, s->p.top_p);
    n = zrt_sample_min_p(c, n, s->p.min_p);
    for (size_t i = 0; i < n; i++)
        c[i].logit /= s->p.temp;
    return draw(s, c, n);
}

bool zrt_sample_needs_only_top(const zrt_sampler *s, size_t n) {
    bool no_penalty = !s->last_n || s->p.repeat_penalty == 1.0f;
    if (n <= s->n_banned) return false; /* the banned could be all of them */
    n -= s->n_banned;
    return no_penalty && (s->p.temp <= 0 || (s->p.top_k > 0 && (size_t)s->p.top_k <= n));
}

int32_t zrt_sample_top(zrt_sampler *s, const zrt_sample_cand *top, size_t n) {
    zrt_sample_cand *c = s->cand;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (top[i].id < 0 || (uint32_t)top[i].id >= s->n_vocab || !s->banned[top[i].id])
            c[m++] = (zrt_sample_cand){top[i].id, top[i].logit, 0};
    n = m;
    sort_cands(c, n); /* the order zrt_sample's top-k leaves */
    if (s->p.temp <= 0) return c[0].id;
    n = zrt_sample_top_k(c, n, s->p.top_k);
    n = zrt_sample_top_p(c, n, s->p.top_p);
    n = zrt_sample_min_p(c, n, s->p.min_p);
    for (size_t i = 0; i < n; i++)
        c[i].logit /= s->p.temp;
    return draw(s, c, n);
}
