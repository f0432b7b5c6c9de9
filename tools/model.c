#include "model.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "plan_cache.h"

const char model_flags_help[] =
    "  -m, --model FILE     the plan or GGUF (instead of the first argument)\n"
    "  -c, --ctx-size N     context: for a GGUF, the plan's (default 4096, or the model's training\n"
    "                       context if smaller); for a plan, 1 up to the context it was compiled for\n"
    "  --no-cache           with a GGUF: compile in memory, neither read nor write the plan cache\n"
    "                       ($XDG_CACHE_HOME/zinc, else ~/.cache/zinc)\n"
    "  --device N           Vulkan device index (see 'zinc devices'; default: $ZINC_DEVICE, else the\n"
    "                       first discrete GPU, else integrated, else CPU)\n"
    "  --gguf FILE          with a plan: the model's GGUF, when it moved since compilation\n";

int model_parse_arg(model_opts *o, int argc, char **argv, int *i, zdiag *d) {
    const char *v = NULL;
    bool miss = false;
    if (cli_opt(argc, argv, i, "-m", &v, &miss) || cli_opt(argc, argv, i, "--model", &v, &miss))
        o->path = v;
    else if (cli_opt(argc, argv, i, "--gguf", &v, &miss))
        o->gguf = v;
    else if (cli_opt(argc, argv, i, "--device", &v, &miss))
        o->device = v;
    else if (cli_opt(argc, argv, i, "-c", &v, &miss) || cli_opt(argc, argv, i, "--ctx-size", &v, &miss) ||
             cli_opt(argc, argv, i, "--ctx", &v, &miss)) {
        if (!miss && !cli_parse_i64(v, 1, 1 << 24, &o->ctx))
            return zdiag_set(d, ZE_INVALID, "-c expects 1..16777216 tokens, not '%s'", v), -1;
    } else if (!strcmp(argv[*i], "--no-cache"))
        o->no_cache = true;
    else
        return 0;
    if (miss) return zdiag_set(d, ZE_INVALID, "%s needs a value", argv[*i]), -1;
    return 1;
}

bool model_is_gguf(const char *path) {
    char magic[4] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t got = fread(magic, 1, 4, f);
    fclose(f);
    return got == 4 && !memcmp(magic, "GGUF", 4);
}

/* A GGUF: the plan from the cache, or compiled now. */
static zstatus open_gguf(const char *prog, const model_opts *o, zrt **r, zdiag *d) {
    if (o->gguf) return zdiag_set(d, ZE_INVALID, "--gguf goes with a plan; %s is a GGUF already", o->path);
    gguf_file *f = NULL;
    zplan *p = NULL;
    plan_cache_opts co = {
        .device = o->device,
        .ctx = o->ctx,
        .parallel = o->parallel,
        .no_cache = o->no_cache,
        .progress = cli_stderr_tty()};
    zstatus s = gguf_open(o->path, &f, d);
    if (!s) s = plan_cache_get(prog, f, &co, &p, d);
    gguf_close(f);
    if (s) return s;
    zrt_opts ro = {.gguf_path = o->path, .device = o->device, .progress = cli_stderr_tty()};
    return zrt_open_plan(p, &ro, r, d);
}

/* A plan's recorded GGUF must still be where it was, or be named. */
static zstatus check_recorded(const model_opts *o, const zplan *p, zdiag *d) {
    const char *rec = zplan_str(p, p->gguf_path);
    if (o->gguf || !access(rec, R_OK)) return ZOK;
    return zdiag_set(d, ZE_IO,
                     "%s: cannot open %s, the GGUF this plan was compiled from: %s (if it moved, "
                     "give its new place with --gguf FILE)",
                     o->path, rec, strerror(errno));
}

/* Reads a plan and checks that its GGUF can be found. */
static zstatus read_plan(const model_opts *o, zplan **p, zdiag *d) {
    zstatus s = zplan_read(o->path, p, d);
    if (s && strstr(d->msg, "bad magic"))
        zdiag_set(d, s, "%s is neither a plan nor a GGUF (give MODEL.gguf, or a plan that zincc wrote)",
                  o->path);
    if (!s && (s = check_recorded(o, *p, d))) {
        zplan_free(*p);
        *p = NULL;
    }
    return s;
}

zstatus model_tokenizer(const model_opts *o, zrt_tok **t, zdiag *d) {
    *t = NULL;
    if (access(o->path, R_OK)) return zdiag_set(d, ZE_IO, "cannot open %s: %s", o->path, strerror(errno));
    if (model_is_gguf(o->path)) return zrt_tok_open(o->path, t, d);
    zplan *p = NULL;
    zstatus s = read_plan(o, &p, d);
    if (!s) s = zrt_tok_open(o->gguf ? o->gguf : zplan_str(p, p->gguf_path), t, d);
    zplan_free(p);
    return s;
}

/* A plan, with its recorded GGUF or --gguf. */
static zstatus open_plan(const model_opts *o, zrt **r, zdiag *d) {
    zplan *p = NULL;
    zstatus s = read_plan(o, &p, d);
    if (s) return s;
    if (o->ctx > p->ctx) {
        s = zdiag_set(d, ZE_INVALID,
                      "-c %lld is more than the %u tokens %s was compiled for (recompile with "
                      "zincc --ctx %lld, or run the GGUF)",
                      (long long)o->ctx, p->ctx, o->path, (long long)o->ctx);
        zplan_free(p);
        return s;
    }
    zrt_opts ro = {.gguf_path = o->gguf, .device = o->device, .progress = cli_stderr_tty()};
    return zrt_open_plan(p, &ro, r, d);
}

zstatus model_open(const char *prog, const model_opts *o, zrt **r, zdiag *d) {
    *r = NULL;
    if (access(o->path, R_OK)) return zdiag_set(d, ZE_IO, "cannot open %s: %s", o->path, strerror(errno));
    return model_is_gguf(o->path) ? open_gguf(prog, o, r, d) : open_plan(o, r, d);
}

uint32_t model_ctx(const model_opts *o, const zrt *r) {
    uint32_t plan = zrt_plan(r)->ctx;
    return o->ctx > 0 && o->ctx < plan ? (uint32_t)o->ctx : plan;
}
