/* libFuzzer harness: the plan loader (backend/plan.h zplan_parse) on
 * arbitrary bytes.
 *
 * Every byte of a plan is checksummed, so most mutations stop at the
 * checksums. Each input is therefore parsed twice: as it is, and with the
 * checksums and the file size field recomputed ("re-sealed"), which lets
 * mutated sections reach the record decoder and zplan_validate. An accepted
 * plan must validate again, print, and survive a write/read round trip
 * byte for byte. Seeds: plans from `zincc -o` (scripts/fuzz.sh). */
#include <stdlib.h>
#include <string.h>

#include "../backend/plan.h"
#include "common.h"

enum { HDR = 64, ENTRY = 32 };

static uint64_t get64(const uint8_t *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}
static void put64(uint8_t *b, uint64_t v) {
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> 8 * i);
}
static uint32_t get32(const uint8_t *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Recomputes what a forger would: the file size, every section checksum whose
 * range lies in the file, the table checksum and the header checksum. */
static void reseal(uint8_t *b, size_t size) {
    if (size < HDR) return;
    uint64_t hsize = get32(b + 12), n = get32(b + 20), table = get64(b + 32);
    put64(b + 24, size);
    if (n <= 64 && table <= size && n * ENTRY <= size - table) {
        for (uint64_t i = 0; i < n; i++) {
            uint8_t *e = b + table + i * ENTRY;
            uint64_t off = get64(e + 8), len = get64(e + 16);
            if (off <= size && len <= size - off) put64(e + 24, fz_fnv1a(b + off, (size_t)len));
        }
        put64(b + 40, fz_fnv1a(b + table, (size_t)(n * ENTRY)));
    }
    if (hsize < HDR || hsize > size) return;
    memset(b + 56, 0, 8);
    put64(b + 56, fz_fnv1a(b, (size_t)hsize));
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) fz_fail("cannot read back %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) fz_fail("cannot read back %s", path);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

/* write(p) == write(read(write(p))), byte for byte. */
static void round_trip(const zplan *p) {
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/a.zplan", fz_tmpdir());
    snprintf(b, sizeof b, "%s/b.zplan", fz_tmpdir());
    zdiag d = {0};
    zstatus s = zplan_write(p, a, &d);
    fz_check(s, &d, "zplan_write");
    if (s) fz_fail("an accepted plan could not be written: %s", d.msg);
    zplan *q = NULL;
    s = zplan_read(a, &q, &d);
    if (s) fz_fail("a written plan could not be read: %s", d.msg);
    s = zplan_write(q, b, &d);
    if (s) fz_fail("a re-read plan could not be written: %s", d.msg);
    zplan_free(q);
    size_t na, nb;
    uint8_t *x = slurp(a, &na), *y = slurp(b, &nb);
    if (na != nb || memcmp(x, y, na)) fz_fail("plan round trip changed the bytes (%zu vs %zu)", na, nb);
    free(x);
    free(y);
}

static void parse_one(const uint8_t *data, size_t size) {
    zplan *p = NULL;
    zdiag d = {0};
    zstatus s = zplan_parse(data, size, "fuzz.zplan", &p, &d);
    fz_check(s, &d, "zplan_parse");
    if (s) {
        if (p) fz_fail("zplan_parse failed but returned a plan");
        return;
    }
    s = zplan_validate(p, "fuzz.zplan", &d);
    if (s) fz_fail("an accepted plan fails zplan_validate: %s", d.msg);
    zplan_print(p, fz_null(), true);
    round_trip(p);
    zplan_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    parse_one(data, size);
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    reseal(copy, size);
    parse_one(copy, size);
    free(copy);
    return 0;
}
