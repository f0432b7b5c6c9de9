/* The plan cache: `zinc run MODEL.gguf` compiles a plan for the device on
 * first use and keeps it under $XDG_CACHE_HOME/zinc (else ~/.cache/zinc).
 * An entry is named by a hash of everything that changes the plan: the
 * GGUF's identity (size and header hash, as the plan records it), the
 * device (vendor, device id, name), the compiler (version, plan format and
 * the build of this executable) and the options (context, chunk). An entry
 * that cannot be read, or whose header disagrees with its key, is compiled
 * again and replaced, never trusted. Entries are written atomically. */
#ifndef ZINC_PLAN_CACHE_H
#define ZINC_PLAN_CACHE_H

#include <stdbool.h>

#include "../backend/plan.h"
#include "../frontend/gguf.h"

typedef struct plan_cache_opts {
    const char *device; /* --device, or NULL: $ZINC_DEVICE or the default */
    int64_t ctx;        /* 0: zincc's default for the model */
    int64_t parallel;   /* zincc --parallel: sequence slots and a batch schedule (0: none) */
    bool no_cache;      /* compile in memory only */
    bool progress;
} plan_cache_opts;

/* The plan for f on the chosen device: from the cache, or compiled (and
 * stored) with a line on stderr that says so and where it went. */
zstatus plan_cache_get(const char *prog, const gguf_file *f, const plan_cache_opts *o, zplan **out, zdiag *d);

/* The cache directory ($XDG_CACHE_HOME/zinc or $HOME/.cache/zinc) into buf. */
zstatus plan_cache_dir(char *buf, size_t n, zdiag *d);

#endif
