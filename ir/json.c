#include "json.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s[i], or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n, size_t i) {
    unsigned char b = s[i];
    size_t len = b < 0x80 ? 1 : b < 0xC2 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF5 ? 4 : 0;
    if (len <= 1 || i + len > n) return len == 1;
    uint32_t cp = b & (0x7F >> len);
    for (size_t k = 1; k < len; k++) {
        if ((s[i + k] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i + k] & 0x3Fu);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

json_t *zjson_strn(const char *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    size_t i = 0;
    while (i < n && utf8_seq(s, n, i))
        i += utf8_seq(s, n, i);
    if (i == n) return json_stringn(p, n);
    char *out = malloc(3 * n + 1); /* U+FFFD is 3 bytes, for 1 */
    if (!out) return NULL;
    size_t k = 0;
    for (i = 0; i < n;) {
        size_t len = utf8_seq(s, n, i);
        if (len) {
            for (size_t j = 0; j < len; j++)
                out[k++] = p[i + j];
            i += len;
        } else {
            out[k++] = '\xEF', out[k++] = '\xBF', out[k++] = '\xBD';
            i++;
        }
    }
    json_t *v = json_stringn(out, k);
    free(out);
    return v;
}

json_t *zjson_str(const char *s) {
    return s ? zjson_strn(s, strlen(s)) : json_string("");
}

json_t *zjson_num(double v) {
    return isfinite(v) ? json_real(v) : json_null();
}

zstatus zjson_write(json_t *v, FILE *out, size_t flags, zdiag *d) {
    int rc = v ? json_dumpf(v, out, flags) : -1;
    json_decref(v);
    if (!v) return zdiag_set(d, ZE_NOMEM, "out of memory while building JSON");
    if (rc || fputc('\n', out) == EOF) return zdiag_set(d, ZE_IO, "cannot write JSON output");
    return ZOK;
}
