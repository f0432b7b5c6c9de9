/* Unicode helpers and the Qwen2 / Llama 3 pre-tokenizer split. See unicode.h. */
#include "unicode.h"

int zrt_tok_ucat(uint32_t cp) {
    if (cp >= ZRT_UNI_MAX) return ZRT_UC_CN;
    /* The last range whose start is <= cp. */
    uint32_t lo = 0, hi = zrt_tok_ucd_n_ranges;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (zrt_tok_ucd_ranges[mid] >> 4 <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return (int)(zrt_tok_ucd_ranges[lo] & 15u);
}

bool zrt_tok_is_space(uint32_t cp) {
    /* PropList.txt's White_Space: stable since Unicode 6.3. */
    if (cp >= 0x09 && cp <= 0x0D) return true;
    if (cp >= 0x2000 && cp <= 0x200A) return true;
    switch (cp) {
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return false;
    }
}

size_t zrt_tok_utf8_len(uint8_t lead) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[lead >> 4];
}

static bool cont(const uint8_t *s, size_t n, size_t at) {
    return at < n && (s[at] & 0xC0) == 0x80;
}

uint32_t zrt_tok_utf8_next(const uint8_t *s, size_t n, size_t *i) {
    size_t at = *i;
    uint8_t b = s[at];
    size_t len = b < 0x80 ? 1 : b < 0xC0 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF8 ? 4 : 0;
    for (size_t k = 1; k < len; k++)
        if (!cont(s, n, at + k)) len = 0;
    if (len == 0) {
        *i = at + 1;
        return ZRT_UNI_REPLACE;
    }
    static const uint8_t lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t cp = b & lead_mask[len];
    for (size_t k = 1; k < len; k++)
        cp = cp << 6 | (s[at + k] & 0x3Fu);
    *i = at + len;
    return cp;
}

size_t zrt_tok_utf8_put(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp < ZRT_UNI_MAX) {
        out[0] = (uint8_t)(0xF0 | cp >> 18);
        out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        out[3] = (uint8_t)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

/* Strict well-formedness (RFC 3629): the second byte's range depends on the
 * lead, which excludes overlong forms, surrogates and values past U+10FFFF. */
static bool second_ok(uint8_t lead, uint8_t b) {
    uint8_t lo = 0x80, hi = 0xBF;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
    return b >= lo && b <= hi;
}

size_t zrt_tok_utf8_valid_prefix(const uint8_t *s, size_t n, bool *invalid) {
    size_t i = 0;
    *invalid = false;
    while (i < n) {
        uint8_t b = s[i];
        size_t len = b < 0x80 ? 1 : b < 0xC2 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF5 ? 4 : 0;
        if (len == 0) break;
        size_t k = 1;
        for (; k < len && i + k < n; k++) {
            uint8_t c = s[i + k];
            if (k == 1 ? !second_ok(b, c) : (c & 0xC0) != 0x80) break;
        }
        if (k < len) {
            /* Stopped early: at the end of the buffer the sequence may still complete. */
            *invalid = i + k < n;
            return i;
        }
        i += len;
    }
    if (i < n) *invalid = true;
    return i;
}

/* ---- the pre-tokenizer split -------------------------------------------- */

enum { F_L = 1, F_N = 2, F_WS = 4, F_IN = 8 }; /* F_IN: the position is inside the text */

typedef struct splitter {
    const uint32_t *cp;
    size_t n, prev; /* end of the last word */
    uint32_t *lens;
    size_t n_words;
} splitter;

static unsigned flags_at(const splitter *s, size_t pos) {
    if (pos >= s->n) return 0;
    uint32_t c = s->cp[pos];
    int cat = zrt_tok_ucat(c);
    return F_IN | (cat == ZRT_UC_L ? F_L : 0) | (cat == ZRT_UC_N ? F_N : 0) |
           (zrt_tok_is_space(c) ? F_WS : 0);
}

/* UINT32_MAX past the end, as llama.cpp's OUT_OF_RANGE. */
static uint32_t cp_at(const splitter *s, size_t pos) {
    return pos < s->n ? s->cp[pos] : UINT32_MAX;
}

static uint32_t ascii_lower(uint32_t c) {
    /* Only ASCII letters matter: no other code point lowercases to s t m d r v e l. */
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static size_t emit(splitter *s, size_t end) {
    size_t len = end - s->prev;
    if (len) s->lens[s->n_words++] = (uint32_t)len;
    s->prev = end;
    return len;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d): the end of the contraction at pos, or 0. */
static size_t contraction(const splitter *s, size_t pos) {
    if (cp_at(s, pos) != '\'' || pos + 1 >= s->n) return 0;
    uint32_t a = ascii_lower(s->cp[pos + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
    if (pos + 2 >= s->n) return 0;
    uint32_t b = ascii_lower(s->cp[pos + 2]);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return pos + 3;
    return 0;
}

/* \s*[\r\n]+ | \s+(?!\S) | \s+ at pos: the end of the match, or pos. */
static size_t whitespace(const splitter *s, size_t pos) {
    size_t nws = 0, last_rn = 0;
    while (flags_at(s, pos + nws) & F_WS) {
        uint32_t c = s->cp[pos + nws];
        if (c == '\r' || c == '\n') last_rn = pos + nws + 1;
        nws++;
    }
    if (last_rn) return last_rn;
    /* A run followed by a non-space leaves its last space to the next word. */
    if (nws > 1 && pos + nws < s->n) return pos + nws - 1;
    return pos + nws;
}

/* One word starting at pos; returns where the next one starts. */
static size_t split_one(splitter *s, size_t pos, int digits) {
    uint32_t c = s->cp[pos];
    unsigned f = flags_at(s, pos);
    size_t end = contraction(s, pos);
    if (end) return emit(s, end), end;
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (!(c == '\r' || c == '\n' || (f & F_N)) && ((f & F_L) || (flags_at(s, pos + 1) & F_L))) {
        pos++;
        while (flags_at(s, pos) & F_L)
            pos++;
        return emit(s, pos), pos;
    }
    /* \p{N}{1,digits} */
    if (f & F_N) {
        size_t start = pos;
        while (flags_at(s, pos) & F_N)
            if (++pos - start >= (size_t)digits) emit(s, pos), start = pos;
        return emit(s, pos), pos;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    unsigned f2 = c == ' ' ? flags_at(s, pos + 1) : f;
    if (!(f2 & (F_WS | F_L | F_N))) {
        pos += c == ' ';
        while ((f2 & F_IN) && !(f2 & (F_WS | F_L | F_N)))
            f2 = flags_at(s, ++pos);
        while (cp_at(s, pos) == '\r' || cp_at(s, pos) == '\n')
            pos++;
        return emit(s, pos), pos;
    }
    end = whitespace(s, pos);
    if (end == pos) end = pos + 1; /* nothing matched: one code point on its own */
    return emit(s, end), end;
}

size_t zrt_tok_split_words(const uint32_t *cp, size_t n, int digits, uint32_t *lens) {
    splitter s = {.cp = cp, .n = n, .lens = lens};
    for (size_t pos = 0; pos < n;)
        pos = split_one(&s, pos, digits < 1 ? 1 : digits);
    return s.n_words;
}
