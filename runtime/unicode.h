/* unicode: the little of Unicode the tokenizers need, with llama.cpp's exact
 * behaviour where it matters for token ids:
 *   - general categories (L, N, ...) from a generated range table
 *     (runtime/unicode_data.c, Unicode 15.1, the version of llama.cpp's table);
 *   - White_Space;
 *   - a lenient UTF-8 decoder that turns each byte it cannot decode into
 *     U+FFFD and moves on by one byte, as llama.cpp's unicode_cpts_from_utf8;
 *   - the pre-tokenizer splits of Qwen2 and Llama 3 (regexes in llama.cpp,
 *     written here by hand over the category table). */
#ifndef ZINC_UNICODE_H
#define ZINC_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* General category, collapsed to its first letter; CN is "not assigned". */
enum { ZRT_UC_CN, ZRT_UC_L, ZRT_UC_N, ZRT_UC_Z, ZRT_UC_M, ZRT_UC_P, ZRT_UC_S, ZRT_UC_C };

extern const uint32_t zrt_tok_ucd_ranges[]; /* start << 4 | ZRT_UC_* */
extern const uint32_t zrt_tok_ucd_n_ranges;

#define ZRT_UNI_MAX     0x110000u /* first code point past Unicode */
#define ZRT_UNI_REPLACE 0xFFFDu

/* The category of cp; ZRT_UC_CN for anything past U+10FFFF. */
int zrt_tok_ucat(uint32_t cp);
/* Unicode's White_Space property (\s of the tokenizers' regexes). */
bool zrt_tok_is_space(uint32_t cp);

/* Bytes of the UTF-8 sequence a lead byte announces, from its high nibble
 * (1 for continuation and invalid bytes), as SentencePiece splits text. */
size_t zrt_tok_utf8_len(uint8_t lead);
/* Decodes the code point at s[*i] (i < n) and advances *i. A byte that does
 * not start a complete sequence gives U+FFFD and advances by one. Like
 * llama.cpp, it does not reject overlong forms or surrogates; four-byte
 * forms up to 0x1FFFFF are decoded as they are. */
uint32_t zrt_tok_utf8_next(const uint8_t *s, size_t n, size_t *i);
/* Encodes cp (< 0x110000) into out; returns the byte count (1..4), or 0 for
 * a value past Unicode. */
size_t zrt_tok_utf8_put(uint32_t cp, uint8_t out[4]);
/* The length of the longest prefix of s[0..n) that is valid UTF-8 and whose
 * last sequence is complete; *invalid is set when decoding stopped at a byte
 * that can never start or continue a valid sequence (rather than at the end). */
size_t zrt_tok_utf8_valid_prefix(const uint8_t *s, size_t n, bool *invalid);

/* The pre-tokenizer splits: the words of cp[0..n), as lengths in code
 * points written to lens (capacity n); returns the number of words.
 * digits is the longest run of \p{N} in one word: 1 for Qwen2, 3 for Llama 3:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,digits}|
 *    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
size_t zrt_tok_split_words(const uint32_t *cp, size_t n, int digits, uint32_t *lens);

#endif
