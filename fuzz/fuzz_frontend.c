/* libFuzzer harness: zincc's front half, as zincc runs it: gguf_parse ->
 * zir_build_from_gguf -> zir_verify -> the default pass pipeline with the
 * verifier after every pass, for one target and phase.
 *
 * Two kinds of input:
 *   - 64 bytes or more: a GGUF file as it is (seeds: tiny models from
 *     `zinc mkmodel`). The target and phase come from a hash of the input.
 *   - under 64 bytes: a recipe (see recipe_* below) for a well-formed model of
 *     odd shape — sizes, head counts, per-tensor weight types, training
 *     context, RoPE dimensions — written through the GGUF writer, and the
 *     target, phase, token tile and fusion threshold to compile it with.
 *     Byte-level mutations of a whole GGUF rarely keep a model valid; the
 *     recipes reach the builders' and passes' arithmetic on valid models.
 *
 * A builder or a pass may refuse a model (with one line); if it accepts one,
 * the verifier must accept every graph the passes make: a verifier failure
 * after a pass, or ZE_INTERNAL, is a bug and aborts. */
#include <stdlib.h>
#include <string.h>

#include "../frontend/arch.h"
#include "../frontend/mkmodel.h"
#include "../passes/pass.h"
#include "common.h"

static const char *const targets[] = {"llvmpipe", "h200", "rdna4", "generic"};

typedef struct how {
    const ztarget *target;
    zpass_phase phase;
    int tile;         /* 0: the target's */
    double threshold; /* < 0: the target's */
} how;

/* What zincc assumes: 4096 positions, or the training context if smaller. */
static int64_t context(const zir_graph *g) {
    int64_t n = g->hp.n_ctx_train;
    return n > 0 && n < 4096 ? n : 4096;
}

static void compile(const gguf_file *f, const how *h) {
    zir_graph *g = NULL;
    zdiag d = {0};
    zstatus s = zir_build_from_gguf(f, &g, &d);
    fz_check(s, &d, "zir_build_from_gguf");
    if (s) {
        if (g) fz_fail("zir_build_from_gguf failed but returned a graph");
        return;
    }
    s = zir_verify(g, &d);
    if (s) fz_fail("the builder made a graph the verifier rejects: %s", d.msg);
    const ztarget *t = h->target;
    zpass_opts o = {.target = t,
                    .phase = h->phase,
                    .token_tile = h->tile ? h->tile : t->prefill_tile,
                    .ctx = context(g),
                    .fuse_threshold = h->threshold >= 0 ? h->threshold : t->fuse_threshold,
                    .verify_each = true,
                    .print_to = fz_null()};
    s = zpass_run_pipeline(g, zpass_default_pipeline(), NULL, &o, &d);
    fz_check(s, &d, "zpass_run_pipeline");
    /* A model a pass cannot handle is refused with a reason; a graph a pass
     * broke (the verifier after it fails) or an internal error is a bug. */
    if (s == ZE_INTERNAL || strstr(d.msg, "IR invalid after pass")) fz_fail("pass pipeline: %s", d.msg);
    if (!s) zir_print(g, fz_null());
    if (!s && fz_debug()) fprintf(stderr, "fuzz: compiled for %s, %s\n", t->name, zpass_phase_name(o.phase));
    zir_graph_free(g);
}

/* ---- recipes ---------------------------------------------------------------
 * Byte i of the recipe (0 past its end) picks, each from a small table:
 *   0 architecture   1 layers (1-3)   2 hidden   3 heads   4 KV heads (mostly a divisor)
 *   5 head size      6 feed-forward   7-8 vocabulary (1-512)   9 tied
 *   10-26 weight type of each tensor kind (f32 where the row does not fit
 *   the type's blocks; norms and biases mostly f32)   27 training context   28 RoPE dimensions
 *   29 target   30 phase   31 token tile   32 fusion threshold
 *   qwen3moe: 33-36 weight type of the router and the three stacked experts,
 *   37 experts (1-8)   38 experts used (0-8: 0 and more than the experts are
 *   refused)   39 expert width */

static uint8_t at(const uint8_t *b, size_t n, size_t i) {
    return i < n ? b[i] : 0;
}

static zmk_opts recipe_opts(const uint8_t *b, size_t n) {
    static const uint32_t hidden[] = {32, 64, 96, 128, 256, 512, 48, 16};
    static const uint32_t head_dim[] = {0, 16, 32, 64, 128, 8, 24, 256};
    static const uint32_t ff[] = {64, 256, 96, 768, 32, 1, 512, 33};
    static const uint32_t ctx[] = {0, 1, 16, 4096, 32768, 1u << 20, 7, 100};
    zmk_opts o;
    zmk_defaults(&o);
    o.arch = (zmk_arch)(at(b, n, 0) % ZMK_ARCH_COUNT);
    o.layers = 1 + at(b, n, 1) % 3;
    o.hidden = hidden[at(b, n, 2) % 8];
    o.heads = 1 + at(b, n, 3) % 8;
    /* Mostly a divisor of the heads (grouped-query attention); any count when the top bit is set. */
    uint32_t group = 1 + at(b, n, 4) % 4;
    o.kv_heads = at(b, n, 4) & 0x80 ? 1 + at(b, n, 4) % 8 : o.heads % group ? o.heads : o.heads / group;
    o.head_dim = head_dim[at(b, n, 5) % 8];
    if (!o.head_dim) o.head_dim = o.hidden / o.heads ? o.hidden / o.heads : 1;
    o.ff = ff[at(b, n, 6) % 8];
    o.vocab = 1 + (at(b, n, 7) | at(b, n, 8) << 8) % 512;
    o.tied = at(b, n, 9) & 1;
    o.ctx = ctx[at(b, n, 27) % 8];
    o.experts = 1 + at(b, n, 37) % 8;
    o.experts_used = at(b, n, 38) % 9;
    o.expert_ff = ff[at(b, n, 39) % 8];
    return o;
}

/* Norms and biases (one dimension) stay f32 unless the byte is 0xff. */
static ztype recipe_type(const uint8_t *b, size_t n, zmk_kind k, uint32_t dims, int64_t row) {
    static const ztype types[] = {ZT_F32,  ZT_F16,  ZT_BF16, ZT_Q8_0, ZT_Q4_K,   ZT_Q5_K,  ZT_Q6_K,
                                  ZT_Q4_0, ZT_Q4_1, ZT_Q5_0, ZT_Q5_1, ZT_IQ4_NL, ZT_IQ4_XS};
    /* The dense kinds keep bytes 10-26; the MoE kinds, inserted before the
     * output norm in the enum, take 33-36. */
    size_t i = k <= ZMK_FFN_DOWN ? 10 + (size_t)k
               : k < ZMK_OUTPUT_NORM ? 33 + (size_t)(k - ZMK_FFN_GATE_INP)
                                     : 10 + (size_t)(k - (ZMK_OUTPUT_NORM - ZMK_FFN_DOWN - 1));
    uint8_t v = at(b, n, i);
    ztype t = dims == 1 && v != 0xff ? ZT_F32 : types[v % (sizeof types / sizeof types[0])];
    bool ok;
    ztype_row_bytes(t, (uint64_t)row, &ok);
    return ok ? t : ZT_F32;
}

static void recipe_hparams(gguf_writer *w, const zmk_opts *o, const uint8_t *b, size_t n) {
    const char *arch = zmk_arch_name(o->arch);
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    gguf_set_str(w, "general.architecture", arch);
    gguf_set_u32(w, KEY("context_length"), o->ctx);
    gguf_set_u32(w, KEY("embedding_length"), o->hidden);
    gguf_set_u32(w, KEY("block_count"), o->layers);
    gguf_set_u32(w, KEY("feed_forward_length"), o->ff);
    gguf_set_u32(w, KEY("attention.head_count"), o->heads);
    gguf_set_u32(w, KEY("attention.head_count_kv"), o->kv_heads);
    gguf_set_u32(w, KEY("attention.key_length"), o->head_dim);
    gguf_set_u32(w, KEY("attention.value_length"), o->head_dim);
    gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    gguf_set_f32(w, KEY("rope.freq_base"), 10000.0f);
    if (o->arch == ZMK_QWEN3MOE) {
        gguf_set_u32(w, KEY("expert_count"), o->experts);
        gguf_set_u32(w, KEY("expert_used_count"), o->experts_used);
        gguf_set_u32(w, KEY("expert_feed_forward_length"), o->expert_ff);
    }
    static const int rope[] = {-1, 0, 1, 2, 3, 4, -1, -1}; /* none, 0, d/2, d, 2d, d-1 */
    int r = rope[at(b, n, 28) % 8];
    if (r >= 0) {
        uint32_t d = o->head_dim, v[] = {0, d / 2, d, 2 * d, d - 1};
        gguf_set_u32(w, KEY("rope.dimension_count"), v[r]);
    }
#undef KEY
}

static void recipe_tensor(gguf_writer *w, const zmk_opts *o, zmk_kind k, int layer, const uint8_t *b,
                          size_t n) {
    int64_t ne[3];
    uint32_t nd = zmk_kind_shape(o, k, ne);
    ztype t = recipe_type(b, n, k, nd, ne[0]);
    bool ok;
    uint64_t bytes = ztype_row_bytes(t, (uint64_t)ne[0], &ok) * (uint64_t)ne[1] * (uint64_t)ne[2];
    void *zero = calloc(1, bytes ? bytes : 1);
    if (!zero) fz_fail("out of memory for %llu bytes", (unsigned long long)bytes);
    char name[96];
    if (layer < 0)
        snprintf(name, sizeof name, "%s", zmk_kind_name(k));
    else
        snprintf(name, sizeof name, "blk.%d.%s", layer, zmk_kind_name(k));
    gguf_add_tensor(w, name, t, nd, ne, zero, bytes);
    free(zero);
}

/* Writes the recipe's model; false if the writer refuses it. */
static bool recipe_write(const uint8_t *b, size_t n, const char *path) {
    zmk_opts o = recipe_opts(b, n);
    gguf_writer *w = gguf_writer_new();
    recipe_hparams(w, &o, b, n);
    recipe_tensor(w, &o, ZMK_TOKEN_EMBD, -1, b, n);
    for (int l = 0; l < (int)o.layers; l++)
        for (int k = ZMK_ATTN_NORM; k < ZMK_OUTPUT_NORM; k++)
            if (zmk_kind_present(&o, (zmk_kind)k)) recipe_tensor(w, &o, (zmk_kind)k, l, b, n);
    recipe_tensor(w, &o, ZMK_OUTPUT_NORM, -1, b, n);
    if (zmk_kind_present(&o, ZMK_OUTPUT)) recipe_tensor(w, &o, ZMK_OUTPUT, -1, b, n);
    zdiag d = {0};
    zstatus s = gguf_writer_write(w, path, &d);
    gguf_writer_free(w);
    fz_check(s, &d, "gguf_writer_write");
    return s == ZOK;
}

static how recipe_how(const uint8_t *b, size_t n) {
    static const int tiles[] = {0, 1, 2, 4, 8, 16, 64, 3};
    static const double thresholds[] = {-1, 0, 1, 1e12};
    return (how){.target = ztarget_find(targets[at(b, n, 29) % 4]),
                 .phase = at(b, n, 30) & 1 ? ZPH_DECODE : ZPH_PREFILL,
                 .tile = tiles[at(b, n, 31) % 8],
                 .threshold = thresholds[at(b, n, 32) % 4]};
}

static void run_recipe(const uint8_t *b, size_t n) {
    char path[256];
    snprintf(path, sizeof path, "%s/recipe.gguf", fz_tmpdir());
    if (!recipe_write(b, n, path)) return;
    gguf_file *f = NULL;
    zdiag d = {0};
    zstatus s = gguf_open(path, &f, &d);
    if (s) fz_fail("the GGUF writer wrote a file the reader refuses: %s", d.msg);
    how h = recipe_how(b, n);
    compile(f, &h);
    gguf_close(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 64) {
        run_recipe(data, size);
        return 0;
    }
    gguf_file *f = NULL;
    zdiag d = {0};
    zstatus s = gguf_parse(data, size, "fuzz.gguf", &f, &d);
    fz_check(s, &d, "gguf_parse");
    if (s) return 0;
    uint64_t hash = fz_fnv1a(data, 64) ^ size;
    how h = {.target = ztarget_find(targets[hash % 4]),
             .phase = (hash >> 8) & 1 ? ZPH_DECODE : ZPH_PREFILL,
             .threshold = -1};
    compile(f, &h);
    gguf_close(f);
    return 0;
}
