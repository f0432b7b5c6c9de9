/* Hostile and broken input, end to end: the real zincc and zinc programs on
 * files made broken on purpose, each of which must be answered with exactly
 * one line on stderr ("<program>: error: what, where, what was expected"), a
 * non-zero exit that is not a crash, no sanitizer report (under the ASan
 * build these are the sanitized programs), and no output file left behind.
 *
 * Every broken file is generated here from a model that `zinc mkmodel` writes
 * and a plan that `zincc -o` compiles, by patching bytes at offsets read from
 * the parsed file, by rewriting it through the GGUF writer, or by forging a
 * plan through zplan_read + zplan_write (which re-checksums it). Nothing
 * binary is committed. See docs/security.md. */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/plan.h"
#include "frontend/gguf.h"
#include "testutil.h"

#define ZINC  ZINC_BINARY_DIR "/zinc"
#define ZINCC ZINC_BINARY_DIR "/zincc"

/* ---- fixtures ------------------------------------------------------------
 * Made once per test run (Criterion's runner is every test's parent) in a
 * directory removed when the run ends. Writers rename into place, so two
 * tests making the same fixture at once do not see a partial file. */

static const char *fixture_dir(void) {
    static char dir[512];
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/zinc-hostile-%d", base ? base : "/tmp", (int)getppid());
        mkdir(dir, 0700);
    }
    return dir;
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats) {
    (void)stats;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/zinc-hostile-%d'", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    if (system(cmd) != 0) fprintf(stderr, "test_hostile: could not remove its fixtures\n");
}

static const char *fixture_path(const char *name) {
    static char path[4][600];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, 600, "%s/%s", fixture_dir(), name);
    return p;
}

/* A one-layer model; `wide` has rows of 256, which block-quantized types of
 * 256-element blocks (iq2_xs) need. */
static const char *model(const char *name, int seed, bool wide) {
    const char *path = fixture_path(name);
    if (access(path, R_OK) == 0) return path;
    char *out = NULL;
    int rc = tu_run(&out,
                    ZINC " mkmodel --arch qwen3 --layers 1 --hidden %d --ff %d --heads 2 --kv-heads 1 "
                         "--head-dim %d --vocab 270 --quant q8_0 --seed %d -o %s",
                    wide ? 256 : 32, wide ? 256 : 64, wide ? 128 : 16, seed, path);
    cr_assert_eq(rc, 0, "mkmodel: %s", out);
    free(out);
    return path;
}

static const char *base_model(void) {
    return model("base.gguf", 1, false);
}

/* The plan of base_model for the device here (llvmpipe in CI). */
static const char *base_plan(void) {
    const char *path = fixture_path("base.zplan");
    if (access(path, R_OK) == 0) return path;
    char *out = NULL;
    int rc = tu_run(&out, ZINCC " %s -o %s --ctx 16 --chunk 4", base_model(), path);
    cr_assert_eq(rc, 0, "zincc: %s", out);
    free(out);
    return path;
}

/* ---- bytes ---------------------------------------------------------------- */

typedef struct bytes {
    uint8_t *p;
    size_t n;
} bytes;

static bytes load(const char *path) {
    bytes b;
    b.p = tu_read_file(path, &b.n);
    cr_assert_not_null(b.p, "cannot read %s", path);
    return b;
}

static void save(const char *path, const void *p, size_t n) {
    cr_assert_eq(tu_write_file(path, p, n), 0, "cannot write %s", path);
}

static void put_le(uint8_t *p, uint64_t v, int width) {
    for (int i = 0; i < width; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

/* A fresh directory for one case: its listing before and after a run tells
 * whether the program left anything behind. */
static const char *case_dir(const char *label) {
    static char dir[4][600];
    static int next;
    char *d = dir[next++ % 4];
    snprintf(d, 600, "%s/case-%d-XXXXXX", fixture_dir(), (int)getpid());
    cr_assert_not_null(mkdtemp(d), "mkdtemp for %s", label);
    return d;
}

static int entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* ---- the check ------------------------------------------------------------ */

static const char *const SANITIZER_TEXT[] = {"AddressSanitizer",   "LeakSanitizer",
                                             "runtime error",      "UndefinedBehaviorSanitizer",
                                             "Segmentation fault", "Aborted"};

/* Runs the command (stdout discarded, stderr captured) in a case directory,
 * and expects: exit status 1..125 (not a signal, not a shell error), stderr
 * exactly one line that starts with "<prog>: error: " and holds every
 * '|'-separated part of want, no sanitizer report, and no new file in dir. */
static void expect_error(const char *label, const char *dir, const char *prog, const char *want,
                         const char *fmt, ...) {
    char cmd[3000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int before = dir ? entries(dir) : 0;
    char *err = NULL;
    int rc = tu_run(&err, "{ %s >/dev/null; }", cmd);
    cr_assert_not_null(err);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s: error: ", prog);
    const char *nl = strchr(err, '\n');
    cr_expect(rc > 0 && rc < 126, "%s: exit status %d (expected 1..125): %s", label, rc, err);
    cr_expect(!strncmp(err, prefix, strlen(prefix)), "%s: expected '%s...', found: %s", label, prefix, err);
    cr_expect(nl && nl[1] == 0, "%s: expected one line on stderr, found: %s", label, err);
    for (size_t i = 0; i < sizeof SANITIZER_TEXT / sizeof *SANITIZER_TEXT; i++)
        cr_expect(!strstr(err, SANITIZER_TEXT[i]), "%s: sanitizer or crash report: %s", label, err);
    for (const char *c = err; nl && c < nl; c++) /* names from a file must not smuggle in escapes */
        cr_expect((unsigned char)*c >= 0x20 && *c != 0x7f, "%s: control byte 0x%02x in: %s", label, *c, err);
    for (const char *w = want; w && *w;) {
        const char *bar = strchr(w, '|');
        size_t n = bar ? (size_t)(bar - w) : strlen(w);
        char part[256];
        snprintf(part, sizeof part, "%.*s", (int)n, w);
        cr_expect(strstr(err, part), "%s: expected the message to say '%s', found: %s", label, part, err);
        w += n + (bar != NULL);
    }
    const char *show = getenv("ZINC_HOSTILE_LOG"); /* a file to collect the messages in, for review */
    FILE *log = show ? fopen(show, "a") : NULL;
    if (log) fprintf(log, "%-40s %s", label, err), fclose(log);
    if (dir)
        cr_expect_eq(entries(dir), before, "%s: %d file(s) left behind in %s", label, entries(dir) - before,
                     dir);
    free(err);
}

/* zincc on a GGUF (named profile: no device needed), writing into its case
 * directory, which must stay without a plan. */
static void expect_zincc_error(const char *label, const char *dir, const char *gguf, const char *want) {
    expect_error(label, dir, "zincc", want, ZINCC " %s -o %s/out.zplan --target llvmpipe", gguf, dir);
}

/* ---- GGUF bytes patched at offsets read from the parsed file ------------- */

typedef enum anchor {
    AT_FILE,  /* from the start of the file (a negative delta: from its end) */
    AT_KEY,   /* the key's length field */
    AT_VALUE, /* the value's type tag */
    AT_TINFO, /* a tensor info's n_dims field (after its name) */
    AT_TNAME, /* the first byte of a tensor's name */
    AT_TDATA, /* the first byte of a tensor's data */
} anchor;

typedef struct patch {
    const char *label;
    anchor at;
    const char *name; /* key or tensor */
    int64_t delta;
    int width; /* bytes written little-endian; 0: truncate the file here */
    uint64_t value;
    const char *want;
} patch;

static uint64_t locate(const gguf_file *f, const patch *c) {
    if (c->at == AT_FILE) return c->delta < 0 ? f->size + c->delta : (uint64_t)c->delta;
    if (c->at == AT_KEY || c->at == AT_VALUE) {
        const gguf_kv *kv = gguf_find_kv(f, c->name);
        cr_assert_not_null(kv, "%s: no key %s in the fixture", c->label, c->name);
        return (c->at == AT_KEY ? kv->offset : kv->value_offset) + c->delta;
    }
    const gguf_tensor *t = gguf_find_tensor(f, c->name);
    cr_assert_not_null(t, "%s: no tensor %s in the fixture", c->label, c->name);
    if (c->at == AT_TDATA) return f->data_offset + t->offset + c->delta;
    uint64_t name_at = t->info_offset + 8;
    return (c->at == AT_TNAME ? name_at : name_at + strlen(t->name)) + c->delta;
}

static void run_patches(const patch *cases, size_t n, const char *src) {
    bytes b = load(src);
    gguf_file *f;
    zdiag d = {0};
    cr_assert_eq(gguf_parse(b.p, b.n, src, &f, &d), ZOK, "%s", d.msg);
    for (size_t i = 0; i < n; i++) {
        const patch *c = &cases[i];
        uint64_t at = locate(f, c);
        cr_assert(at + (uint64_t)c->width <= b.n, "%s: offset %llu outside the fixture", c->label,
                  (unsigned long long)at);
        uint8_t *copy = malloc(b.n);
        memcpy(copy, b.p, b.n);
        size_t size = b.n;
        if (c->width)
            put_le(copy + at, c->value, c->width);
        else
            size = (size_t)at;
        const char *dir = case_dir(c->label);
        char path[700];
        snprintf(path, sizeof path, "%s/in.gguf", dir);
        save(path, copy, size);
        free(copy);
        expect_zincc_error(c->label, dir, path, c->want);
    }
    gguf_close(f);
    free(b.p);
}

#define KEY0  "general.architecture"
#define TOKS  "tokenizer.ggml.tokens"
#define EMBD  "token_embd.weight"
#define NORM  "output_norm.weight"
#define LARGE (1ull << 63)

/* Truncated or bit-flipped GGUF: each must be refused with where it broke. */
static const patch gguf_damage[] = {
    {"empty file", AT_FILE, NULL, 0, 0, 0, "in.gguf: offset 0|truncated magic"},
    {"3 bytes", AT_FILE, NULL, 3, 0, 0, "truncated magic: expected 4 bytes, found 3"},
    {"truncated header", AT_FILE, NULL, 20, 0, 0, "offset 16|truncated"},
    {"truncated in the first key", AT_KEY, KEY0, 5, 0, 0,
     "offset 8|tensor count 14 is absurd|expected at most 0"},
    {"truncated in the vocabulary", AT_VALUE, TOKS, 40, 0, 0,
     "array length of key 'tokenizer.ggml.tokens' runs past the end"},
    {"truncated in a tensor info", AT_TINFO, EMBD, 2, 0, 0, "offset 8|tensor count 14 is absurd"},
    {"truncated in tensor data", AT_TDATA, EMBD, 1, 0, 0, "runs past the end of the file"},
    {"last 4 KiB missing", AT_FILE, NULL, -4096, 0, 0, "runs past the end of the file"},
    {"bad magic", AT_FILE, NULL, 0, 4, 0x4c4d4747, "offset 0|bad magic, not a GGUF file"},
    {"version 1", AT_FILE, NULL, 4, 4, 1, "offset 4|version 1"},
    {"version 4", AT_FILE, NULL, 4, 4, 4, "offset 4|expected 2 or 3, found 4"},
    {"big-endian", AT_FILE, NULL, 4, 4, 0x03000000, "offset 4|big-endian"},
    {"tensor count 2^63", AT_FILE, NULL, 8, 8, LARGE, "offset 8|tensor count 9223372036854775808 is absurd"},
    {"tensor count + 1", AT_FILE, NULL, 8, 1, 15, "tensor"},
    {"key-value count 2^40", AT_FILE, NULL, 16, 8, 1ull << 40, "offset 16|key-value count"},
    {"key length 4 GiB", AT_KEY, KEY0, 0, 8, 1ull << 32, "offset 24|runs past the end|4294967296"},
    {"key length 2^63", AT_KEY, KEY0, 0, 8, LARGE, "offset 24|runs past the end"},
    {"empty key", AT_KEY, KEY0, 0, 8, 0, "offset 24|empty key"},
    {"string value 4 GiB", AT_VALUE, KEY0, 4, 8, 1ull << 32, "runs past the end|4294967296"},
    {"unknown value type", AT_VALUE, KEY0, 0, 4, 13, "unknown value type|expected 0 to 12, found 13"},
    {"unknown array element type", AT_VALUE, TOKS, 4, 4, 0xffffffff, "unknown array element type"},
    {"array count 2^62", AT_VALUE, TOKS, 8, 8, 1ull << 62, "array length of key 'tokenizer.ggml.tokens'"},
    {"bool value 2", AT_VALUE, "tokenizer.ggml.add_bos_token", 4, 1, 2, "expected 0 or 1, found 2"},
    {"2^63-element tensor", AT_TINFO, EMBD, 4, 8, LARGE, EMBD},
    {"2^40 rows", AT_TINFO, EMBD, 12, 8, 1ull << 40, EMBD},
    {"2^62 rows (byte count overflows)", AT_TINFO, EMBD, 12, 8, 1ull << 62, EMBD},
    {"dimension 0", AT_TINFO, EMBD, 4, 8, 0, EMBD},
    {"dimension -1", AT_TINFO, EMBD, 4, 8, ~0ull, EMBD},
    {"5 dimensions", AT_TINFO, EMBD, 0, 4, 5, EMBD "|expected"},
    {"0 dimensions", AT_TINFO, EMBD, 0, 4, 0, EMBD},
    {"unknown tensor type 99", AT_TINFO, EMBD, 20, 4, 99, EMBD "|99"},
    {"removed tensor type 4", AT_TINFO, EMBD, 20, 4, 4, EMBD "|4"},
    {"row not a whole number of blocks", AT_TINFO, EMBD, 4, 8, 33, EMBD},
    {"tensor offset misaligned", AT_TINFO, NORM, 16, 8, 1, NORM},
    {"tensor offset 2^63", AT_TINFO, NORM, 16, 8, LARGE, NORM "|runs past the end"},
    {"duplicate tensor name", AT_TNAME, "blk.0.attn_k.weight", 11, 1, 'q', "blk.0.attn_q.weight"},
};

Test(hostile, gguf_truncated_or_flipped) {
    run_patches(gguf_damage, sizeof gguf_damage / sizeof *gguf_damage, base_model());
}

/* Random single-byte damage in the header, metadata and tensor infos: each
 * file is either compiled or refused with one clean line; never a crash. */
Test(hostile, gguf_random_damage_never_crashes) {
    bytes b = load(base_model());
    gguf_file *f;
    zdiag d = {0};
    cr_assert_eq(gguf_parse(b.p, b.n, "base", &f, &d), ZOK, "%s", d.msg);
    uint64_t header_end = f->header_end;
    gguf_close(f);
    tu_rng r = tu_rng_seed(20241130);
    for (int i = 0; i < 24; i++) {
        uint64_t at = tu_next(&r) % header_end;
        uint8_t old = b.p[at], v = (uint8_t)tu_next(&r);
        if (v == old) v ^= 0x80;
        b.p[at] = v;
        const char *dir = case_dir("random");
        char path[700], label[64];
        snprintf(path, sizeof path, "%s/in.gguf", dir);
        snprintf(label, sizeof label, "byte %llu: %02x -> %02x", (unsigned long long)at, old, v);
        save(path, b.p, b.n);
        b.p[at] = old;
        char *out = NULL;
        /* --phase compiles without writing: a damaged but valid model costs no shader compile. */
        int rc = tu_run(&out, "{ " ZINCC " %s --target llvmpipe --phase decode >/dev/null; }", path);
        for (size_t k = 0; k < sizeof SANITIZER_TEXT / sizeof *SANITIZER_TEXT; k++)
            cr_expect(!strstr(out, SANITIZER_TEXT[k]), "%s: crash: %s", label, out);
        const char *nl = strchr(out, '\n');
        cr_expect(rc == 0 || (rc > 0 && rc < 126 && !strncmp(out, "zincc: error: ", 14) && nl && !nl[1]),
                  "%s: exit %d, expected success or one error line, found: %s", label, rc, out);
        free(out);
    }
    free(b.p);
}

/* ---- well-formed GGUF, wrong model: rewritten through the GGUF writer ---- */

/* Copies src into dst through the writer, without the keys and tensors named
 * in skip (comma-separated), then lets edit add or replace entries. */
static void rewrite(const char *src, const char *dst, const char *skip,
                    void (*edit)(gguf_writer *, const gguf_file *)) {
    gguf_file *f;
    zdiag d = {0};
    cr_assert_eq(gguf_open(src, &f, &d), ZOK, "%s", d.msg);
    gguf_writer *w = gguf_writer_new();
    char list[512];
    snprintf(list, sizeof list, ",%s,", skip ? skip : "");
    for (uint64_t i = 0; i < f->n_kv; i++) {
        char key[300];
        snprintf(key, sizeof key, ",%s,", f->kvs[i].key);
        if (!strstr(list, key)) gguf_set_value(w, f->kvs[i].key, &f->kvs[i].val);
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        char name[300];
        snprintf(name, sizeof name, ",%s,", t->name);
        if (!strstr(list, name)) gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
    }
    if (edit) edit(w, f);
    zstatus s = gguf_writer_write(w, dst, &d);
    gguf_writer_free(w);
    gguf_close(f);
    cr_assert_eq(s, ZOK, "writing %s: %s", dst, d.msg);
}

/* A tensor of the given type and shape, zero bytes of the right size. */
static void add_zero_tensor(gguf_writer *w, const char *name, ztype type, int64_t ne0, int64_t ne1) {
    int64_t ne[2] = {ne0, ne1};
    bool ok;
    uint64_t n = ztype_row_bytes(type, (uint64_t)ne0, &ok) * (uint64_t)ne1;
    cr_assert(ok, "%s: %lld elements are not whole blocks", name, (long long)ne0);
    void *z = calloc(1, n);
    gguf_add_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne, z, n);
    free(z);
}

static void arch_mamba(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_str(w, "general.architecture", "mamba");
}
/* A name with a newline and a terminal escape: the message must stay one line. */
static void arch_escape(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_str(w, "general.architecture", "qwen3\n\x1b[31mred");
}
static void arch_number(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "general.architecture", 3);
}
static void k_transposed(gguf_writer *w, const gguf_file *f) {
    const gguf_tensor *t = gguf_find_tensor(f, "blk.0.attn_k.weight");
    add_zero_tensor(w, t->name, ZT_F32, t->ne[1], t->ne[0]); /* 16 is not whole q8_0 blocks */
}
static void q_one_row_short(gguf_writer *w, const gguf_file *f) {
    const gguf_tensor *t = gguf_find_tensor(f, "blk.0.attn_q.weight");
    add_zero_tensor(w, t->name, t->type, t->ne[0], t->ne[1] - 1);
}
static void embd_extra_token(gguf_writer *w, const gguf_file *f) {
    const gguf_tensor *t = gguf_find_tensor(f, EMBD);
    add_zero_tensor(w, t->name, t->type, t->ne[0], t->ne[1] + 1);
}
static void up_iq2_xs(gguf_writer *w, const gguf_file *f) {
    const gguf_tensor *t = gguf_find_tensor(f, "blk.0.ffn_up.weight");
    add_zero_tensor(w, t->name, ZT_IQ2_XS, t->ne[0], t->ne[1]);
}
static void up_mxfp4(gguf_writer *w, const gguf_file *f) {
    const gguf_tensor *t = gguf_find_tensor(f, "blk.0.ffn_up.weight");
    add_zero_tensor(w, t->name, ZT_MXFP4, t->ne[0], t->ne[1]);
}
static void norm_q8_0(gguf_writer *w, const gguf_file *f) {
    const gguf_tensor *t = gguf_find_tensor(f, NORM);
    add_zero_tensor(w, t->name, ZT_Q8_0, t->ne[0], 1);
}
static void embd_i32(gguf_writer *w, const gguf_file *f) {
    const gguf_tensor *t = gguf_find_tensor(f, EMBD);
    add_zero_tensor(w, t->name, ZT_I32, t->ne[0], t->ne[1]);
}
static void hidden_string(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_str(w, "qwen3.embedding_length", "thirty-two");
}
static void hidden_64(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3.embedding_length", 64);
}
static void heads_0(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3.attention.head_count", 0);
}
static void kv_heads_0(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3.attention.head_count_kv", 0);
}
static void kv_heads_3(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3.attention.head_count_kv", 3);
}
static void key_length_8(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3.attention.key_length", 8);
}
static void layers_2(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3.block_count", 2);
}
static void layers_huge(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3.block_count", 0x7fffffff);
}
static void layers_0(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3.block_count", 0);
}
static void ff_huge(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u64(w, "qwen3.feed_forward_length", 1ull << 40);
}

typedef struct model_case {
    const char *label;
    const char *skip;
    void (*edit)(gguf_writer *, const gguf_file *);
    bool wide;
    const char *want;
} model_case;

static const model_case model_cases[] = {
    {"wrong architecture", NULL, arch_mamba, false, "mamba|qwen3"},
    {"architecture with a newline and an escape", NULL, arch_escape, false, "architecture 'qwen3??[31mred'"},
    {"architecture of the wrong type", NULL, arch_number, false, "general.architecture"},
    {"no architecture", "general.architecture", NULL, false, "general.architecture"},
    {"missing tensor", "blk.0.attn_q.weight", NULL, false, "blk.0.attn_q.weight"},
    {"missing output norm", NORM, NULL, false, NORM},
    {"missing hyperparameter", "qwen3.block_count", NULL, false, "qwen3.block_count"},
    {"hyperparameter of the wrong type", "qwen3.embedding_length", hidden_string, false,
     "qwen3.embedding_length"},
    {"shape mismatch: transposed", "blk.0.attn_k.weight", k_transposed, false,
     "blk.0.attn_k.weight|has shape [16, 32]: expected [32, 16]"},
    {"shape mismatch: a row short", "blk.0.attn_q.weight", q_one_row_short, false,
     "blk.0.attn_q.weight|expected"},
    {"shape mismatch: vocabulary", EMBD, embd_extra_token, false, "output.weight|expected [32, 271]"},
    {"hidden size disagrees with the tensors", NULL, hidden_64, false, "expected"},
    {"unsupported quant iq2_xs", "blk.0.ffn_up.weight", up_iq2_xs, true,
     "iq2_xs|blk.0.ffn_up.weight|zinc reads f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K, iq4_nl, "
     "iq4_xs, bf16"},
    {"unsupported quant mxfp4", "blk.0.ffn_up.weight", up_mxfp4, false, "mxfp4|blk.0.ffn_up.weight"},
    {"integer weights", EMBD, embd_i32, false, "i32|" EMBD},
    {"quantized norm", NORM, norm_q8_0, false, NORM "|type q8_0: zinc reads 1-D tensors in f32"},
    {"zero heads", NULL, heads_0, false, "head_count"},
    {"zero KV heads (means: as many as heads)", NULL, kv_heads_0, false,
     "blk.0.attn_k.weight|expected [32, 32]"},
    {"KV heads do not divide heads", NULL, kv_heads_3, false,
     "kv_heads=3|expected heads divisible by kv_heads"},
    {"key and value sizes differ", NULL, key_length_8, false, "key_length=8 value_length=16|expected"},
    {"more layers than tensors", NULL, layers_2, false, "blk.1."},
    {"2^31 layers", NULL, layers_huge, false, "block_count"},
    {"zero layers", NULL, layers_0, false, "block_count"},
    {"feed-forward 2^40", "qwen3.feed_forward_length", ff_huge, false, "feed_forward_length"},
};

/* Each case rewrites src (NULL: the base model, or the wide one where the
 * case asks) and expects zincc's one-line error. */
static void expect_zincc_cases(const model_case *cases, size_t n, const char *src) {
    for (size_t i = 0; i < n; i++) {
        const model_case *c = &cases[i];
        const char *dir = case_dir(c->label);
        char path[700];
        snprintf(path, sizeof path, "%s/in.gguf", dir);
        rewrite(src ? src : c->wide ? model("wide.gguf", 1, true) : base_model(), path, c->skip, c->edit);
        expect_zincc_error(c->label, dir, path, c->want);
    }
}

Test(hostile, gguf_wrong_model) {
    expect_zincc_cases(model_cases, sizeof model_cases / sizeof *model_cases, NULL);
}

/* ---- mixture of experts (qwen3moe) ----------------------------------------- */

/* One layer, 4 experts of width 32, 2 used per token. */
static const char *moe_model(void) {
    const char *path = fixture_path("moe.gguf");
    if (access(path, R_OK) == 0) return path;
    char *out = NULL;
    int rc = tu_run(&out,
                    ZINC " mkmodel --arch qwen3moe --layers 1 --hidden 32 --ff 64 --heads 2 --kv-heads 1 "
                         "--head-dim 16 --vocab 270 --experts 4 --experts-used 2 --expert-ff 32 --quant q8_0 "
                         "-o %s",
                    path);
    cr_assert_eq(rc, 0, "mkmodel: %s", out);
    free(out);
    return path;
}

static void moe_used_5(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3moe.expert_used_count", 5);
}
static void moe_used_0(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3moe.expert_used_count", 0);
}
static void moe_experts_0(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3moe.expert_count", 0);
}
static void moe_experts_6(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3moe.expert_count", 6);
}
static void moe_experts_huge(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3moe.expert_count", 0x7fffffff);
}
static void moe_expert_ff_16(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_u32(w, "qwen3moe.expert_feed_forward_length", 16);
}
/* The stacked experts written as one 2-D matrix [32, 32 * 4]. */
static void moe_up_2d(gguf_writer *w, const gguf_file *f) {
    const gguf_tensor *t = gguf_find_tensor(f, "blk.0.ffn_up_exps.weight");
    add_zero_tensor(w, t->name, t->type, t->ne[0], t->ne[1] * t->ne[2]);
}

static const model_case moe_cases[] = {
    {"moe: missing expert tensor", "blk.0.ffn_down_exps.weight", NULL, false,
     "blk.0.ffn_down_exps.weight|is missing"},
    {"moe: missing router", "blk.0.ffn_gate_inp.weight", NULL, false, "blk.0.ffn_gate_inp.weight|is missing"},
    {"moe: missing expert_count", "qwen3moe.expert_count", NULL, false, "qwen3moe.expert_count|missing"},
    {"moe: more experts used than experts", NULL, moe_used_5, false,
     "qwen3moe.expert_used_count is 5: expected 1..4"},
    {"moe: zero experts used", NULL, moe_used_0, false, "expert_used_count is 0"},
    {"moe: zero experts", NULL, moe_experts_0, false, "expert_count is 0"},
    {"moe: 2^31 experts", NULL, moe_experts_huge, false, "expert_count"},
    {"moe: expert count disagrees with the tensors", NULL, moe_experts_6, false,
     "blk.0.ffn_gate_inp.weight|has shape [32, 4]: expected [32, 6]"},
    {"moe: expert width disagrees with the tensors", NULL, moe_expert_ff_16, false,
     "blk.0.ffn_gate_exps.weight|expected [32, 16, 4]"},
    {"moe: experts not stacked", "blk.0.ffn_up_exps.weight", moe_up_2d, false,
     "blk.0.ffn_up_exps.weight|has shape [32, 128]: expected [32, 32, 4]"},
};

Test(hostile, moe_wrong_model) {
    expect_zincc_cases(moe_cases, sizeof moe_cases / sizeof *moe_cases, moe_model());
}

/* A good qwen3moe model compiles for the GPU and runs in zinc ref
 * (test_kernels_e2e checks that the two agree). */
Test(hostile, moe_compiles_for_the_gpu_and_runs_in_zinc_ref) {
    const char *dir = case_dir("moe: good model");
    char *out = NULL;
    int rc = tu_run(&out, ZINCC " %s -o %s/moe.zplan", moe_model(), dir);
    cr_expect_eq(rc, 0, "zincc on a qwen3moe model: %s", out);
    free(out);
    rc = tu_run(&out, ZINC " ref %s --tokens 1,2,3 --logits-out %s/ref.f32", moe_model(), dir);
    cr_expect_eq(rc, 0, "zinc ref on a qwen3moe model: %s", out);
    free(out);
}

/* ---- tokenizer metadata ---------------------------------------------------- */

static void tok_model_bert(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_str(w, "tokenizer.ggml.model", "bert");
}
static void tok_pre_unknown(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_str(w, "tokenizer.ggml.pre", "falcon");
}
static void tok_pre_escape(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_str(w, "tokenizer.ggml.pre", "qwen2\r\n\x1b]0;title\x07");
}
static void tok_tokens_i32(gguf_writer *w, const gguf_file *f) {
    (void)f;
    int32_t v[3] = {1, 2, 3};
    gguf_set_arr_i32(w, TOKS, v, 3);
}
static void tok_tokens_empty(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_arr_str(w, TOKS, NULL, 0);
}
static void tok_types_short(gguf_writer *w, const gguf_file *f) {
    (void)f;
    int32_t v[3] = {1, 1, 1};
    gguf_set_arr_i32(w, "tokenizer.ggml.token_type", v, 3);
}
static void tok_scores_strings(gguf_writer *w, const gguf_file *f) {
    (void)f;
    const char *v[1] = {"x"};
    gguf_set_arr_str(w, "tokenizer.ggml.scores", v, 1);
}
static void tok_merges_i32(gguf_writer *w, const gguf_file *f) {
    (void)f;
    int32_t v[2] = {1, 2};
    gguf_set_arr_i32(w, "tokenizer.ggml.merges", v, 2);
}
static void tok_bos_string(gguf_writer *w, const gguf_file *f) {
    (void)f;
    gguf_set_str(w, "tokenizer.ggml.bos_token_id", "<s>");
}

static const model_case tok_cases[] = {
    {"no tokenizer model", "tokenizer.ggml.model", NULL, false, "tokenizer.ggml.model"},
    {"unknown tokenizer model", NULL, tok_model_bert, false, "tokenizer.ggml.model|bert"},
    {"unknown pre-tokenizer", NULL, tok_pre_unknown, false, "tokenizer.ggml.pre|falcon"},
    {"pre-tokenizer with control bytes", NULL, tok_pre_escape, false, "found 'qwen2???]0;title?'"},
    {"no vocabulary", TOKS, NULL, false, TOKS},
    {"vocabulary of integers", NULL, tok_tokens_i32, false, TOKS},
    {"empty vocabulary", NULL, tok_tokens_empty, false, TOKS},
    {"token types shorter than the vocabulary", NULL, tok_types_short, false, "tokenizer.ggml.token_type"},
    {"scores of strings", NULL, tok_scores_strings, false, "tokenizer.ggml.scores"},
    {"no merges", "tokenizer.ggml.merges", NULL, false, "tokenizer.ggml.merges"},
    {"merges of integers", NULL, tok_merges_i32, false, "tokenizer.ggml.merges"},
    {"BOS id of the wrong type", NULL, tok_bos_string, false, "tokenizer.ggml.bos_token_id"},
};

Test(hostile, tokenizer_metadata) {
    for (size_t i = 0; i < sizeof tok_cases / sizeof *tok_cases; i++) {
        const model_case *c = &tok_cases[i];
        const char *dir = case_dir(c->label);
        char path[700];
        snprintf(path, sizeof path, "%s/in.gguf", dir);
        rewrite(base_model(), path, c->skip, c->edit);
        expect_error(c->label, dir, "zinc tokenize", c->want, ZINC " tokenize %s 'Hello world'", path);
    }
}

/* ---- plans ----------------------------------------------------------------- */

/* Reads base_plan, lets forge change it, and writes it with valid checksums. */
static const char *forged_plan(const char *dir, void (*forge)(zplan *)) {
    static char path[700];
    zplan *p;
    zdiag d = {0};
    cr_assert_eq(zplan_read(base_plan(), &p, &d), ZOK, "%s", d.msg);
    forge(p);
    snprintf(path, sizeof path, "%s/forged.zplan", dir);
    zstatus s = zplan_write(p, path, &d);
    zplan_free(p);
    cr_assert_eq(s, ZOK, "forging: %s", d.msg);
    return path;
}

static void need_coopmat_nv(zplan *p) {
    p->required |= ZPLAN_NEED_COOPMAT_NV;
}
static void need_coopmat_khr(zplan *p) {
    p->required |= ZPLAN_NEED_COOPMAT_KHR;
}
static void need_coopmat_wg(zplan *p) {
    p->required |= ZPLAN_NEED_COOPMAT_WG;
}
static void need_subgroup_128(zplan *p) {
    p->required |= ZPLAN_NEED_SUBGROUP_SIZE;
    p->subgroup_size = 128;
}
static void shared_1gib(zplan *p) {
    p->shared_bytes = 1u << 30;
}
/* Buffers past any device: the activations grow to 1 TiB (the bindings stay inside). */
static void act_1tib(zplan *p) {
    for (uint32_t i = 0; i < p->n_buffers; i++)
        if (p->buffers[i].kind == ZPB_ACT) p->buffers[i].size = 1ull << 40;
}
/* Every kernel keeps only the five header words of its SPIR-V. */
static void spirv_header_only(zplan *p) {
    for (uint32_t i = 0; i < p->n_kernels; i++)
        p->kernels[i].n_words = 5;
}
/* Every kernel's first OpStore stores an id that nothing defines (the id
 * bound grows by one to make room): Mesa's llvmpipe dies of a segmentation
 * fault in vkCreateComputePipelines on this, so the executor must never hand
 * it to the driver. */
static void spirv_undefined_id(zplan *p) {
    enum { OP_STORE = 62 };
    for (uint32_t i = 0; i < p->n_kernels; i++) {
        uint32_t *w = p->spirv + p->kernels[i].code, n = p->kernels[i].n_words;
        uint32_t fresh = w[3]++;
        for (uint32_t j = 5; j < n && w[j] >> 16; j += w[j] >> 16)
            if ((w[j] & 0xffff) == OP_STORE) {
                w[j + 2] = fresh;
                break;
            }
    }
}
/* Every kernel's entry point is renamed "mbin": still valid SPIR-V, but the
 * executor asks for "main", and llvmpipe then fails and leaks. */
static void spirv_no_main(zplan *p) {
    enum { OP_ENTRY_POINT = 15 };
    for (uint32_t i = 0; i < p->n_kernels; i++) {
        uint32_t *w = p->spirv + p->kernels[i].code, n = p->kernels[i].n_words;
        for (uint32_t j = 5; j < n && w[j] >> 16; j += w[j] >> 16)
            if ((w[j] & 0xffff) == OP_ENTRY_POINT) ((char *)&w[j + 3])[1] = 'b';
    }
}
/* The last dispatch binds its last buffer 1 byte in: inside the buffer (the
 * plan is valid), but not at a multiple of any device's
 * minStorageBufferOffsetAlignment. Found when the descriptor sets are made,
 * after every buffer was allocated and filled and every pipeline created,
 * which must all be released (the ASan build checks for leaks). */
static void binding_misaligned(zplan *p) {
    const zplan_dispatch *dp = &p->dispatches[p->n_dispatches - 1];
    zplan_binding *b = &p->bindings[dp->first_binding + dp->n_bindings - 1];
    b->offset += 1;
    if (b->range) b->range -= 1;
}
/* One flipped bit in an instruction of every kernel: checksums are redone by
 * the writer, so only the driver or a SPIR-V check can notice. */
static void spirv_flipped(zplan *p) {
    tu_rng r = tu_rng_seed(28);
    for (uint32_t i = 0; i < p->n_kernels; i++) {
        const zplan_kernel *k = &p->kernels[i];
        p->spirv[k->code + 5 + tu_next(&r) % (k->n_words - 5)] ^= 1u << (tu_next(&r) % 32);
    }
}
static void gguf_elsewhere(zplan *p) {
    /* The recorded GGUF path is replaced by one that does not exist. */
    static const char missing[] = "/nonexistent/zinc-hostile/model.gguf";
    char *s = zarena_alloc(p->arena, p->n_strings_bytes + sizeof missing);
    memcpy(s, p->strings, p->n_strings_bytes);
    memcpy(s + p->n_strings_bytes, missing, sizeof missing);
    p->gguf_path = p->n_strings_bytes;
    p->strings = s;
    p->n_strings_bytes += sizeof missing;
}

typedef struct plan_case {
    const char *label;
    void (*forge)(zplan *);
    const char *want;
} plan_case;

static const plan_case plan_cases[] = {
    {"needs NV cooperative matrix", need_coopmat_nv,
     "lacks cooperative matrix (NV or KHR)|expected a plan compiled for it"},
    {"needs KHR cooperative matrix", need_coopmat_khr,
     "lacks KHR cooperative matrix|expected a plan compiled for it"},
    {"needs workgroup-scope cooperative matrix", need_coopmat_wg,
     "lacks workgroup-scope cooperative matrix|expected a plan compiled for it"},
    {"needs subgroup size 128", need_subgroup_128, "subgroups of 128|expected"},
    {"needs 1 GiB of shared memory", shared_1gib, "shared memory|1073741824"},
    {"does not fit in device memory", act_1tib, "not enough device memory|needs|free"},
    {"SPIR-V header only", spirv_header_only, "kernel 0|invalid SPIR-V|expected a module valid for Vulkan"},
    {"SPIR-V with flipped bits", spirv_flipped, "invalid SPIR-V|expected"},
    {"SPIR-V storing an undefined id", spirv_undefined_id, "kernel 0|invalid SPIR-V|has not been defined"},
    {"SPIR-V without the entry point main", spirv_no_main,
     "kernel 0|expected a GLCompute entry point named 'main', found none"},
    {"binding offset misaligned", binding_misaligned, "dispatch|binding|not a multiple of"},
    {"recorded GGUF missing", gguf_elsewhere, "/nonexistent/zinc-hostile/model.gguf"},
};

Test(hostile, plan_forged) {
    for (size_t i = 0; i < sizeof plan_cases / sizeof *plan_cases; i++) {
        const plan_case *c = &plan_cases[i];
        const char *dir = case_dir(c->label);
        const char *plan = forged_plan(dir, c->forge);
        char gguf[700] = "";
        if (c->forge != gguf_elsewhere) snprintf(gguf, sizeof gguf, "--gguf %s", base_model());
        expect_error(c->label, dir, "zinc run", c->want, ZINC " run %s %s --tokens 1,2", plan, gguf);
    }
}

static uint64_t fnv1a(const uint8_t *b, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The header checksum (docs/plan-format.md): bytes 0..63 with 56..63 as zeros. */
static void reseal_header(uint8_t *b) {
    memset(b + 56, 0, 8);
    put_le(b + 56, fnv1a(b, 64), 8);
}

Test(hostile, plan_damaged) {
    bytes b = load(base_plan());
    struct {
        const char *label;
        size_t size;   /* bytes kept */
        int64_t at;    /* byte to change, -1: none */
        uint8_t value; /* its new value */
        bool reseal;   /* recompute the header checksum */
        const char *want;
    } cases[] = {
        {"empty plan", 0, -1, 0, false, "offset 0|truncated header: expected at least 64 bytes, found 0"},
        {"7-byte plan", 7, -1, 0, false, "offset 7|truncated header"},
        {"header cut short", 40, -1, 0, false, "truncated header"},
        {"plan cut in half", b.n / 2, -1, 0, false, "expected"},
        {"plan missing its last byte", b.n - 1, -1, 0, false, "expected"},
        {"byte flipped in the header", b.n, 30, 0x5a, false, "offset 56|header checksum"},
        {"byte flipped in a section", b.n, (int64_t)(b.n / 3), (uint8_t)~b.p[b.n / 3], false, "checksum"},
        {"major version 2", b.n, 8, 2, true, "offset 8|expected major version 1, found 2"},
        {"must-understand flag", b.n, 16, 1, true, "offset 16|flags"},
        {"section count 0", b.n, 20, 0, true, "offset 20|section count"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *dir = case_dir(cases[i].label);
        uint8_t *copy = malloc(b.n);
        memcpy(copy, b.p, b.n);
        if (cases[i].at >= 0) copy[cases[i].at] = cases[i].value;
        if (cases[i].reseal) reseal_header(copy);
        char path[700];
        snprintf(path, sizeof path, "%s/in.zplan", dir);
        save(path, copy, cases[i].size);
        free(copy);
        expect_error(cases[i].label, dir, "zinc run", cases[i].want, ZINC " run %s --gguf %s --tokens 1,2",
                     path, base_model());
        expect_error(cases[i].label, dir, "zinc info", cases[i].want, ZINC " info %s", path);
    }
    free(b.p);
}

Test(hostile, plan_and_model_mixed_up) {
    const char *dir = case_dir("mix");
    expect_error("plan from another GGUF", dir, "zinc run",
                 "not the GGUF this plan was compiled from|expected", ZINC " run %s --gguf %s --tokens 1,2",
                 base_plan(), model("other.gguf", 2, false));
    const char *text = tu_tmp("not-a-model.txt"); /* a GGUF itself runs: it is compiled */
    cr_assert_eq(tu_write_file(text, "hello, world\n", 13), 0);
    expect_error("neither a plan nor a GGUF", dir, "zinc run", "neither a plan nor a GGUF",
                 ZINC " run %s --tokens 1,2", text);
    expect_error("a plan given as a GGUF", dir, "zincc", "bad magic, not a GGUF file",
                 ZINCC " %s -o %s/out.zplan --target llvmpipe", base_plan(), dir);
    expect_error("a plan given to zinc ref", dir, "zinc ref", "bad magic, not a GGUF file",
                 ZINC " ref %s --tokens 1,2", base_plan());
    expect_error("token id past the vocabulary", dir, "zinc run", "token 270|expected an id below 270",
                 ZINC " run %s --gguf %s --tokens 1,270", base_plan(), base_model());
}

/* ---- paths ----------------------------------------------------------------- */

Test(hostile, unwritable_or_missing_paths) {
    const char *dir = case_dir("paths");
    const char *m = base_model();
    expect_error("zincc -o /proc/x", dir, "zincc", "/proc/x", ZINCC " %s -o /proc/x --target llvmpipe", m);
    expect_error("zincc -o into a missing directory", dir, "zincc", "/nonexistent/dir/x.zplan",
                 ZINCC " %s -o /nonexistent/dir/x.zplan --target llvmpipe", m);
    char sub[700]; /* the temporary file would be beside it, in dir */
    snprintf(sub, sizeof sub, "%s/plan.zplan", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    expect_error("zincc -o onto a directory", dir, "zincc", sub, ZINCC " %s -o %s --target llvmpipe", m, sub);
    expect_error("zincc --emit-out /proc/x", dir, "zincc", "/proc/x",
                 ZINCC " %s --emit=dot --emit-out /proc/x --target llvmpipe", m);
    expect_error("zinc ref --logits-out into a missing directory", dir, "zinc ref", "/nonexistent/dir/l.f32",
                 ZINC " ref %s --tokens 1,2 --logits-out /nonexistent/dir/l.f32", m);
    expect_error("zinc run --logits-out into a missing directory", dir, "zinc run", "/nonexistent/dir/l.f32",
                 ZINC " run %s --gguf %s --tokens 1,2 --logits-out /nonexistent/dir/l.f32", base_plan(), m);
    expect_error("zinc mkmodel -o /proc/x", dir, "zinc mkmodel", "/proc/x",
                 ZINC
                 " mkmodel --layers 1 --hidden 32 --ff 64 --heads 2 --kv-heads 1 --head-dim 16 --vocab 270 "
                 "-o /proc/x");
    expect_error("missing model", dir, "zincc", "/nonexistent/m.gguf",
                 ZINCC " /nonexistent/m.gguf -o %s/out.zplan --target llvmpipe", dir);
    expect_error("a directory as the model", dir, "zincc", dir, ZINCC " %s -o %s/out.zplan --target llvmpipe",
                 dir, dir);
    expect_error("missing plan", dir, "zinc run", "/nonexistent/p.zplan",
                 ZINC " run /nonexistent/p.zplan --tokens 1");
    expect_error("zinc tokenize --file missing", dir, "zinc tokenize", "/nonexistent/t.txt",
                 ZINC " tokenize %s --file /nonexistent/t.txt", m);
}

/* What fuzz_gguf found first: a key holding a newline, read with a getter of
 * the wrong type, put the raw key into the message. */
Test(hostile, getter_message_with_hostile_key) {
    static const char key[] = "evil\nkey\x1b[2J";
    const char *path = tu_tmp("evil-key.gguf");
    gguf_writer *w = gguf_writer_new();
    gguf_set_u32(w, key, 7);
    zdiag d = {0};
    zstatus s = gguf_writer_write(w, path, &d);
    gguf_writer_free(w);
    cr_assert_eq(s, ZOK, "%s", d.msg);
    gguf_file *f;
    cr_assert_eq(gguf_open(path, &f, &d), ZOK, "%s", d.msg);
    float v;
    cr_expect_eq(gguf_get_f32(f, key, &v, &d), ZE_FORMAT);
    cr_expect(strstr(d.msg, "key 'evil?key?[2J' has the wrong type: expected f32 or f64, found u32"), "%s",
              d.msg);
    gguf_close(f);
    remove(path);
}
