/* llama.cpp as an external oracle for zincc.
 *
 * Loads a GGUF with llama.cpp's CPU backend only (no GPU offload) and:
 *   eval      teacher-forced evaluation of a token list; writes the logits as
 *             little-endian float32, row-major [n_tokens][n_vocab], one row per
 *             input position: the format of `zinc ref --logits-out`.
 *             --mode prefill (alias batch): one llama_decode of all tokens;
 *             --mode decode  (alias single): one llama_decode per token.
 *   tokenize  prints the ids of a text, comma-separated (the --tokens format).
 *   chat      prints a sample conversation formatted with the model's template.
 *   info      prints what llama.cpp understood of the model.
 *   dequant   writes OUT.gguf: the same model with every tensor dequantized to
 *             F32 by ggml's own to_float (and general.file_type 0). Running
 *             llama.cpp on that twin in f32 gives logits of the quantized
 *             weights without llama.cpp's activation rounding: an fp32 oracle
 *             for a reference that dequantizes weights, checked by ggml's
 *             dequantizers rather than ours.
 *   requant   SRC.gguf requant Q.gguf: every tensor of Q.gguf of a quantized
 *             type is quantized again from SRC.gguf's F32 tensor of the same
 *             name by ggml's quantizer (ggml_quantize_chunk, no importance
 *             matrix: what llama-quantize writes) and compared byte for byte.
 *             One line per type; exits 1 on any difference.
 *
 * Numerics: the KV cache is F32 and flash attention is off by default, so that
 * the only rounding llama.cpp adds over an fp32 reference is the one its
 * matmuls do (activations to Q8_K/Q8_0 for quantized weights, to F16 for F16
 * weights). --kv f16 / --flash-attn on give llama.cpp's defaults instead.
 *
 * Built by build.sh against the libraries fetch.sh downloads. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#ifndef LLAMACPP_LIBDIR
#error "build with -DLLAMACPP_LIBDIR=\"<dir of the llama.cpp libraries>\""
#endif

typedef struct opts {
    const char *model, *cmd, *tokens, *text, *out, *cpu_variant;
    int decode, threads, kv_f16, flash_attn, verbose, add_special, parse_special;
} opts;

static int g_verbose;
static enum ggml_log_level g_last = GGML_LOG_LEVEL_INFO;

/* llama.cpp is chatty; keep its warnings and errors, drop the rest unless -v. */
static void on_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level != GGML_LOG_LEVEL_CONT) g_last = level;
    if (g_verbose || g_last >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

static int usage(FILE *to) {
    fprintf(to, "usage: harness MODEL.gguf eval --tokens 1,2,3 --logits-out OUT.f32 [--mode prefill|decode]\n"
                "       harness MODEL.gguf tokenize --text TEXT [--add-special] [--parse-special]\n"
                "       harness MODEL.gguf chat\n"
                "       harness MODEL.gguf info\n"
                "       harness MODEL.gguf dequant OUT.gguf\n"
                "       harness SRC.gguf requant Q.gguf\n"
                "options: --threads N (2)  --kv f32|f16 (f32)  --flash-attn on|off (off)\n"
                "         --cpu-variant NAME (best-scoring libggml-cpu-NAME.so)  -v (llama.cpp's log)\n");
    return to == stdout ? 0 : 2;
}

static int parse_args(int argc, char **argv, opts *o) {
    *o = (opts){.threads = 2};
    if (argc < 3) return usage(stderr);
    o->model = argv[1];
    o->cmd = argv[2];
    if (!strcmp(o->cmd, "dequant") || !strcmp(o->cmd, "requant")) {
        if (argc != 4) return usage(stderr);
        o->out = argv[3];
        return -1;
    }
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (!strcmp(a, "--tokens") && v)
            o->tokens = v;
        else if (!strcmp(a, "--text") && v)
            o->text = v;
        else if ((!strcmp(a, "--logits-out") || !strcmp(a, "-o")) && v)
            o->out = v;
        else if (!strcmp(a, "--mode") && v) {
            if (!strcmp(v, "decode") || !strcmp(v, "single"))
                o->decode = 1;
            else if (strcmp(v, "prefill") && strcmp(v, "batch"))
                return usage(stderr);
        } else if (!strcmp(a, "--threads") && v)
            o->threads = atoi(v);
        else if (!strcmp(a, "--kv") && v)
            o->kv_f16 = !strcmp(v, "f16");
        else if (!strcmp(a, "--flash-attn") && v)
            o->flash_attn = !strcmp(v, "on");
        else if (!strcmp(a, "--cpu-variant") && v)
            o->cpu_variant = v;
        else {
            takes = 0;
            if (!strcmp(a, "-v"))
                o->verbose = 1;
            else if (!strcmp(a, "--add-special"))
                o->add_special = 1;
            else if (!strcmp(a, "--parse-special"))
                o->parse_special = 1;
            else {
                fprintf(stderr, "harness: unknown or incomplete option '%s'\n", a);
                return usage(stderr);
            }
        }
        i += takes;
    }
    if (o->threads < 1) o->threads = 1;
    return -1; /* go on */
}

/* The CPU backend comes in one library per instruction-set level; like
 * ggml_backend_load_best, pick the one whose ggml_backend_score is highest. */
static ggml_backend_dev_t load_cpu_backend(const char *variant) {
    char best[4096] = "";
    int best_score = 0;
    DIR *dir = opendir(LLAMACPP_LIBDIR);
    if (!dir) {
        fprintf(stderr, "harness: cannot open %s: %s\n", LLAMACPP_LIBDIR, strerror(errno));
        return NULL;
    }
    for (struct dirent *e; (e = readdir(dir));) {
        if (strncmp(e->d_name, "libggml-cpu-", 12) || !strstr(e->d_name, ".so")) continue;
        if (variant &&
            (strncmp(e->d_name + 12, variant, strlen(variant)) || e->d_name[12 + strlen(variant)] != '.'))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", LLAMACPP_LIBDIR, e->d_name);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) continue;
        int (*score)(void) = (int (*)(void))dlsym(h, "ggml_backend_score");
        int s = score ? score() : 0;
        if (s > best_score) best_score = s, snprintf(best, sizeof best, "%s", path);
        dlclose(h);
    }
    closedir(dir);
    if (!best[0]) {
        fprintf(stderr, "harness: no usable libggml-cpu-%s*.so in %s\n", variant ? variant : "",
                LLAMACPP_LIBDIR);
        return NULL;
    }
    ggml_backend_reg_t reg = ggml_backend_load(best);
    if (!reg || ggml_backend_reg_dev_count(reg) < 1) {
        fprintf(stderr, "harness: cannot load the CPU backend %s\n", best);
        return NULL;
    }
    if (g_verbose) fprintf(stderr, "harness: CPU backend %s\n", best);
    return ggml_backend_reg_dev_get(reg, 0);
}

static struct llama_model *load_model(const opts *o, ggml_backend_dev_t cpu) {
    static ggml_backend_dev_t devices[2];
    devices[0] = cpu;
    struct llama_model_params mp = llama_model_default_params();
    mp.devices = devices;
    mp.n_gpu_layers = 0;
    struct llama_model *m = llama_model_load_from_file(o->model, mp);
    if (!m) fprintf(stderr, "harness: llama.cpp cannot load %s (its log above says why)\n", o->model);
    return m;
}

static struct llama_context *make_context(const opts *o, struct llama_model *m, int n_tokens) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_tokens < 16 ? 16 : n_tokens);
    cp.n_batch = cp.n_ubatch = (uint32_t)(o->decode || n_tokens < 1 ? 1 : n_tokens);
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = o->threads;
    cp.type_k = cp.type_v = o->kv_f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    cp.flash_attn_type = o->flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    struct llama_context *c = llama_init_from_model(m, cp);
    if (!c) fprintf(stderr, "harness: cannot create a llama.cpp context\n");
    return c;
}

static int parse_tokens(const char *s, llama_token **out, int *n) {
    int cap = 16, len = 0;
    llama_token *v = malloc(sizeof *v * cap);
    for (const char *p = s; v && *p;) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX || (*end && *end != ',')) break;
        if (len == cap && !(v = realloc(v, sizeof *v * (cap *= 2)))) break;
        v[len++] = (llama_token)x;
        p = *end ? end + 1 : end;
        if (!*p) {
            *out = v, *n = len;
            return *end == ',' ? -1 : 0;
        }
    }
    free(v);
    return -1;
}

/* Decodes tokens [first, first + n) at their positions, asking for every logit. */
static int decode_span(struct llama_context *c, const llama_token *t, int first, int n) {
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = t[first + i];
        b.pos[i] = first + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    int rc = llama_decode(c, b);
    llama_batch_free(b);
    if (rc) fprintf(stderr, "harness: llama_decode failed (%d) at token %d\n", rc, first);
    return rc;
}

static int write_row(FILE *f, const float *row, int n_vocab, int pos, long *nonfinite) {
    for (int j = 0; j < n_vocab; j++)
        if (!isfinite(row[j])) ++*nonfinite;
    if (fwrite(row, sizeof *row, (size_t)n_vocab, f) != (size_t)n_vocab) {
        fprintf(stderr, "harness: write failed at row %d\n", pos);
        return 1;
    }
    return 0;
}

static int cmd_eval(const opts *o, struct llama_model *m) {
    llama_token *t;
    int n;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m));
    if (!o->tokens || !o->out || parse_tokens(o->tokens, &t, &n)) {
        fprintf(stderr, "harness: eval needs --tokens 1,2,3 (ids >= 0) and --logits-out FILE\n");
        return 2;
    }
    for (int i = 0; i < n; i++)
        if (t[i] >= n_vocab) {
            fprintf(stderr, "harness: token %d at position %d: expected < n_vocab %d\n", t[i], i, n_vocab);
            return free(t), 2;
        }
    struct llama_context *c = make_context(o, m, n);
    FILE *f = c ? fopen(o->out, "wb") : NULL;
    long nonfinite = 0;
    int rc = !f;
    if (c && !f) fprintf(stderr, "harness: cannot write %s: %s\n", o->out, strerror(errno));
    if (!rc && !o->decode && !(rc = decode_span(c, t, 0, n)))
        for (int i = 0; i < n && !rc; i++)
            rc = write_row(f, llama_get_logits_ith(c, i), n_vocab, i, &nonfinite);
    for (int i = 0; o->decode && i < n && !rc; i++)
        if (!(rc = decode_span(c, t, i, 1)))
            rc = write_row(f, llama_get_logits_ith(c, 0), n_vocab, i, &nonfinite);
    if (f && fclose(f)) rc = 1;
    if (!rc && nonfinite) {
        fprintf(stderr, "harness: %ld non-finite logits\n", nonfinite);
        rc = 3;
    }
    if (c) llama_free(c);
    free(t);
    return rc;
}

static int cmd_tokenize(const opts *o, struct llama_model *m) {
    if (!o->text) return usage(stderr);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    int len = (int)strlen(o->text), cap = len + 8;
    llama_token *t = malloc(sizeof *t * cap);
    int n = t ? llama_tokenize(v, o->text, len, t, cap, o->add_special, o->parse_special) : -1;
    if (n < 0) {
        fprintf(stderr, "harness: llama_tokenize failed (%d)\n", n);
        return free(t), 1;
    }
    for (int i = 0; i < n; i++)
        printf(i ? ",%d" : "%d", t[i]);
    printf("\n");
    free(t);
    return 0;
}

static int cmd_chat(struct llama_model *m) {
    const char *tmpl = llama_model_chat_template(m, NULL);
    if (!tmpl) return fprintf(stderr, "harness: the model has no chat template\n"), 1;
    const llama_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Hello!"}};
    char buf[4096];
    int n = llama_chat_apply_template(tmpl, msgs, 2, true, buf, sizeof buf);
    if (n < 0 || n >= (int)sizeof buf)
        return fprintf(stderr, "harness: llama.cpp does not recognise the chat template (%d)\n", n), 1;
    fwrite(buf, 1, (size_t)n, stdout);
    return 0;
}

static int dequant_tensors(struct gguf_context *src, struct ggml_context *in, struct gguf_context *dst,
                           struct ggml_context *out) {
    for (int64_t i = 0; i < gguf_get_n_tensors(src); i++) {
        const char *name = gguf_get_tensor_name(src, i);
        struct ggml_tensor *t = ggml_get_tensor(in, name);
        struct ggml_tensor *f = t ? ggml_new_tensor(out, GGML_TYPE_F32, ggml_n_dims(t), t->ne) : NULL;
        const struct ggml_type_traits *tt = t ? ggml_get_type_traits(t->type) : NULL;
        if (!f || (t->type != GGML_TYPE_F32 && (!tt || !tt->to_float))) {
            fprintf(stderr, "harness: cannot dequantize %s\n", name);
            return 1;
        }
        ggml_set_name(f, name);
        if (t->type == GGML_TYPE_F32)
            memcpy(f->data, t->data, ggml_nbytes(t));
        else
            tt->to_float(t->data, f->data, ggml_nelements(t));
        gguf_add_tensor(dst, f);
    }
    return 0;
}

/* Needs no backend: ggml's GGUF reader and type traits live in libggml-base. */
static int cmd_dequant(const opts *o) {
    struct ggml_context *in = NULL;
    struct gguf_init_params ip = {.no_alloc = false, .ctx = &in};
    struct gguf_context *src = gguf_init_from_file(o->model, ip);
    if (!src) return fprintf(stderr, "harness: ggml cannot read %s\n", o->model), 1;
    size_t bytes = 0;
    for (struct ggml_tensor *t = ggml_get_first_tensor(in); t; t = ggml_get_next_tensor(in, t))
        bytes += ggml_tensor_overhead() + (size_t)ggml_nelements(t) * sizeof(float);
    struct ggml_init_params cp = {
        .mem_size = bytes + ggml_tensor_overhead(), .mem_buffer = NULL, .no_alloc = false};
    struct ggml_context *out = ggml_init(cp);
    struct gguf_context *dst = gguf_init_empty();
    gguf_set_kv(dst, src);
    gguf_set_val_u32(dst, "general.file_type", 0); /* LLAMA_FTYPE_ALL_F32 */
    int rc = !out || dequant_tensors(src, in, dst, out);
    if (!rc && !gguf_write_to_file(dst, o->out, false)) {
        fprintf(stderr, "harness: cannot write %s\n", o->out);
        rc = 1;
    }
    gguf_free(dst);
    gguf_free(src);
    if (out) ggml_free(out);
    ggml_free(in);
    return rc;
}

/* Quantizes src's F32 data for tensor q again and counts the blocks whose
 * bytes differ from q's. */
static int requant_tensor(struct ggml_tensor *src, struct ggml_tensor *q, long *blocks, long *differ) {
    const int64_t n = q->ne[0], rows = ggml_nrows(q);
    const size_t rb = ggml_row_size(q->type, n), bb = ggml_type_size(q->type);
    if (!src || src->type != GGML_TYPE_F32 || ggml_nelements(src) != ggml_nelements(q)) {
        fprintf(stderr, "harness: no F32 source of %lld elements for %s\n", (long long)ggml_nelements(q),
                q->name);
        return 2;
    }
    unsigned char *buf = malloc(rb * (size_t)rows);
    if (!buf) return fprintf(stderr, "harness: out of memory\n"), 2;
    ggml_quantize_chunk(q->type, src->data, buf, 0, rows, n, NULL);
    for (size_t b = 0; b < rb * (size_t)rows / bb; b++) {
        if (memcmp(buf + b * bb, (unsigned char *)q->data + b * bb, bb) && !(*differ)++)
            fprintf(stderr, "harness: %s %s: block %zu differs from ggml's\n", ggml_type_name(q->type),
                    q->name, b);
        ++*blocks;
    }
    free(buf);
    return 0;
}

static int cmd_requant(const opts *o) {
    struct ggml_context *sc = NULL, *qc = NULL;
    struct gguf_context *s = gguf_init_from_file(o->model, (struct gguf_init_params){false, &sc});
    struct gguf_context *q = s ? gguf_init_from_file(o->out, (struct gguf_init_params){false, &qc}) : NULL;
    if (!s || !q) return fprintf(stderr, "harness: ggml cannot read %s\n", s ? o->out : o->model), 2;
    long tensors[GGML_TYPE_COUNT] = {0}, blocks[GGML_TYPE_COUNT] = {0}, differ[GGML_TYPE_COUNT] = {0};
    int rc = 0;
    for (struct ggml_tensor *t = ggml_get_first_tensor(qc); t && !rc; t = ggml_get_next_tensor(qc, t)) {
        if (!ggml_is_quantized(t->type)) continue;
        rc = requant_tensor(ggml_get_tensor(sc, t->name), t, &blocks[t->type], &differ[t->type]);
        tensors[t->type]++;
    }
    for (int k = 0; k < GGML_TYPE_COUNT && !rc; k++)
        if (tensors[k])
            printf("%s %s quantization zincc-vs-ggml: %ld tensors, %ld blocks, %ld differ\n",
                   differ[k] ? "FAIL" : "PASS", ggml_type_name((enum ggml_type)k), tensors[k], blocks[k],
                   differ[k]);
    for (int k = 0; k < GGML_TYPE_COUNT && !rc; k++)
        if (differ[k]) rc = 1;
    gguf_free(q);
    gguf_free(s);
    ggml_free(qc);
    ggml_free(sc);
    return rc;
}

static int cmd_info(struct llama_model *m) {
    const struct llama_vocab *v = llama_model_get_vocab(m);
    char desc[256];
    llama_model_desc(m, desc, sizeof desc);
    printf("desc=%s n_vocab=%d n_layer=%d n_embd=%d bos=%d eos=%d pad=%d add_bos=%d vocab_type=%d\n", desc,
           llama_vocab_n_tokens(v), llama_model_n_layer(m), llama_model_n_embd(m), llama_vocab_bos(v),
           llama_vocab_eos(v), llama_vocab_pad(v), llama_vocab_get_add_bos(v), (int)llama_vocab_type(v));
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) return usage(stdout);
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    g_verbose = o.verbose;
    llama_log_set(on_log, NULL);
    if (!strcmp(o.cmd, "dequant")) return cmd_dequant(&o);
    if (!strcmp(o.cmd, "requant")) return cmd_requant(&o);
    ggml_backend_dev_t cpu = load_cpu_backend(o.cpu_variant);
    if (!cpu) return 1;
    llama_backend_init();
    struct llama_model *m = load_model(&o, cpu);
    if (!m) return 1;
    if (!strcmp(o.cmd, "eval"))
        rc = cmd_eval(&o, m);
    else if (!strcmp(o.cmd, "tokenize"))
        rc = cmd_tokenize(&o, m);
    else if (!strcmp(o.cmd, "chat"))
        rc = cmd_chat(m);
    else if (!strcmp(o.cmd, "info"))
        rc = cmd_info(m);
    else
        rc = usage(stderr);
    llama_model_free(m);
    llama_backend_free();
    return rc;
}
