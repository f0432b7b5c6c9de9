/* dl_iterate_phdr (the build id of this executable) is a GNU extension. */
#define _GNU_SOURCE
#include "plan_cache.h"

#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../backend/target_vk.h"
#include "version.h"
#include "zincc_plan.h"

/* ---- the key ------------------------------------------------------------ */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The GNU build id of the running executable: a rebuilt compiler (new
 * kernels, a fixed pass) must not reuse the plans of the old one, and the
 * version string does not change between development builds. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    uint64_t *h = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const char *desc = p + sizeof *nh + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && desc + nh->n_descsz <= end) *h = fnv(*h, desc, nh->n_descsz);
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 1; /* the first object is the executable itself */
}

typedef struct cache_key {
    uint64_t gguf_size, gguf_hash;
    uint32_t vendor_id, device_id;
    const char *device_name, *target_name;
    int64_t ctx, chunk, parallel;
} cache_key;

static uint64_t key_hash(const cache_key *k) {
    char text[1024];
    int n = snprintf(text, sizeof text, "zinc plan cache 1|%s|%d.%d|%llu|%016llx|%04x:%04x|%s|%s|%lld|%lld|%lld",
                     ZINC_VERSION, ZPLAN_VERSION_MAJOR, ZPLAN_VERSION_MINOR, (unsigned long long)k->gguf_size,
                     (unsigned long long)k->gguf_hash, k->vendor_id, k->device_id, k->device_name,
                     k->target_name, (long long)k->ctx, (long long)k->chunk, (long long)k->parallel);
    uint64_t h = fnv(0xcbf29ce484222325ull, text, (size_t)n < sizeof text ? (size_t)n : sizeof text);
    dl_iterate_phdr(find_build_id, &h);
    return h;
}

/* Whether a plan read from the cache is the one its key describes. */
static bool matches(const zplan *p, const cache_key *k) {
    return p->gguf_size == k->gguf_size && p->gguf_hash == k->gguf_hash && p->vendor_id == k->vendor_id &&
           p->device_id == k->device_id && !strcmp(zplan_str(p, p->device_name), k->device_name) &&
           p->ctx == (uint64_t)k->ctx && p->n_seqs == (k->parallel > 1 ? (uint64_t)k->parallel : 1u) &&
           (p->sched[ZPLAN_BATCH].count != 0) == (k->parallel != 0);
}

/* ---- the directory ------------------------------------------------------ */

static zstatus make_dir(const char *path, zdiag *d) {
    if (!mkdir(path, 0700) || errno == EEXIST) return ZOK;
    return zdiag_set(d, ZE_IO,
                     "plan cache: cannot create %s: %s (set XDG_CACHE_HOME, or run with --no-cache)", path,
                     strerror(errno));
}

zstatus plan_cache_dir(char *buf, size_t n, zdiag *d) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int len;
    if (xdg && xdg[0] == '/') /* the XDG spec ignores a relative path */
        len = snprintf(buf, n, "%s/zinc", xdg);
    else if (home && home[0] == '/')
        len = snprintf(buf, n, "%s/.cache/zinc", home);
    else
        return zdiag_set(d, ZE_IO,
                         "plan cache: neither XDG_CACHE_HOME nor HOME is an absolute path "
                         "(set one, or run with --no-cache)");
    if (len < 0 || (size_t)len >= n)
        return zdiag_set(d, ZE_IO, "plan cache: the directory's path is too long");
    for (char *p = buf + 1; *p; p++) { /* mkdir -p */
        if (*p != '/') continue;
        *p = 0;
        zstatus s = make_dir(buf, d);
        *p = '/';
        if (s) return s;
    }
    return make_dir(buf, d);
}

/* DIR/STEM-KEY.zplan, STEM being the GGUF's name without .gguf. */
static zstatus entry_path(const gguf_file *f, uint64_t key, char *buf, size_t n, zdiag *d) {
    zstatus s = plan_cache_dir(buf, n, d);
    if (s) return s;
    const char *base = strrchr(f->path, '/') ? strrchr(f->path, '/') + 1 : f->path;
    size_t stem = strlen(base), at = strlen(buf);
    if (stem > 5 && !strcmp(base + stem - 5, ".gguf")) stem -= 5;
    if (stem > 100) stem = 100;
    int len = snprintf(buf + at, n - at, "/%.*s-%016llx.zplan", (int)stem, base, (unsigned long long)key);
    if (len < 0 || (size_t)len >= n - at)
        return zdiag_set(d, ZE_IO, "plan cache: the entry's path is too long");
    return ZOK;
}

/* ---- lookup and compile ------------------------------------------------- */

/* The cached plan, or NULL (with the reason on stderr when there was an
 * entry that could not be trusted). */
static zplan *lookup(const char *prog, const char *path, const cache_key *k) {
    zplan *p = NULL;
    zdiag d = {0};
    struct stat st;
    if (stat(path, &st)) return NULL;
    if (zplan_read(path, &p, &d)) {
        fprintf(stderr, "%s: the cached plan is unusable (%s): compiling it again\n", prog, d.msg);
        return NULL;
    }
    if (matches(p, k)) return p;
    fprintf(stderr,
            "%s: the cached plan %s is stale (another model, device or context): compiling it again\n", prog,
            path);
    zplan_free(p);
    return NULL;
}

static zstatus compile(const char *prog, const gguf_file *f, const ztarget *t, const zvk_profile *prof,
                       const cache_key *k, const plan_cache_opts *o, zplan **out, zdiag *d) {
    ztarget probed = *t; /* the fragment order, probed only for a compile */
    zvk_target_probe_frags(o->device, &probed);
    zincc_plan_opts po = {
        .target = &probed, .device = prof, .ctx = k->ctx, .chunk = k->chunk, .parallel = k->parallel,
        .progress = o->progress};
    fprintf(stderr, "%s: compiling %s for %s%s\n", prog, f->path, prof->name,
            o->no_cache ? " (--no-cache: not kept)" : " (once: the plan is cached)");
    zstatus s = zincc_compile(f, &po, out, d);
    if (s) zdiag_prefix(d, "compiling %s", f->path);
    return s;
}

zstatus plan_cache_get(const char *prog, const gguf_file *f, const plan_cache_opts *o, zplan **out,
                       zdiag *d) {
    ztarget t;
    zvk_profile prof;
    char tname[300], path[PATH_MAX];
    *out = NULL;
    zstatus s = zvk_target_from_device(o->device, &t, &prof, tname, sizeof tname, d);
    if (s) return s;
    if (o->ctx) zincc_check_ctx(prog, f, o->ctx);
    int64_t ctx = o->ctx ? o->ctx : zincc_default_ctx(f);
    cache_key k = {.gguf_size = f->size,
                   .gguf_hash = gguf_identity_hash(f),
                   .vendor_id = prof.vendor_id,
                   .device_id = prof.device_id,
                   .device_name = prof.name,
                   .target_name = t.name,
                   .ctx = ctx,
                   .chunk = zincc_default_chunk(ctx),
                   .parallel = o->parallel};
    if (o->no_cache) return compile(prog, f, &t, &prof, &k, o, out, d);
    /* A cache that cannot be used costs a compile, not the run. */
    zdiag why = {0};
    bool usable = !entry_path(f, key_hash(&k), path, sizeof path, &why);
    if (usable && (*out = lookup(prog, path, &k))) return ZOK;
    s = compile(prog, f, &t, &prof, &k, o, out, d);
    if (!s && usable) usable = !zplan_write(*out, path, &why);
    if (s || !usable) {
        if (!s) fprintf(stderr, "%s: warning: %s: the plan is not cached\n", prog, why.msg);
        return s;
    }
    zincc_print_summary(prog, "cached the plan in", path, *out);
    return ZOK;
}
