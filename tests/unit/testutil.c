#include "testutil.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/sampler.h"

const char *tu_tmp(const char *name) {
    static char dir[256];
    static char path[8][512];
    static int next;
    if (!dir[0]) {
        /* a fresh directory: a PID is reused once pid_max (32768 here) wraps,
         * and a test that found an earlier process's files (zinc serve's
         * log saying "ready" on another port) would read them as its own */
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/zinc-test-%d-XXXXXX", base ? base : "/tmp", (int)getpid());
        if (!mkdtemp(dir)) {
            snprintf(dir, sizeof dir, "%s/zinc-test-%d", base ? base : "/tmp", (int)getpid());
            mkdir(dir, 0700);
        }
    }
    char *p = path[next++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

tu_rng tu_rng_seed(uint64_t seed) {
    tu_rng r = {seed * 0x9E3779B97F4A7C15ull + 1};
    return r;
}

uint64_t tu_next(tu_rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

float tu_uniform(tu_rng *r, float lo, float hi) {
    return lo + (hi - lo) * (float)((tu_next(r) >> 40) * (1.0 / 16777216.0));
}

float tu_normal(tu_rng *r) {
    float u1 = tu_uniform(r, 1e-7f, 1.0f), u2 = tu_uniform(r, 0.0f, 1.0f);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

int tu_run(char **out, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[4200];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
    }
    if (buf) buf[len] = 0;
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void *tu_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (size) *size = (size_t)n;
    return buf;
}

int tu_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, size, f);
    return (fclose(f) == 0 && w == size) ? 0 : -1;
}

static int cmp_float_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x > y ? -1 : x < y;
}

bool tu_top_matches(const zrt_sample_cand *top, size_t n, const float *row, int V, int k, char *why, size_t why_len) {
    float *sorted = malloc(sizeof(float) * (size_t)V);
    if (!sorted) return snprintf(why, why_len, "out of memory"), false;
    memcpy(sorted, row, sizeof(float) * (size_t)V);
    qsort(sorted, (size_t)V, sizeof(float), cmp_float_desc);
    float kth = sorted[(k < V ? k : V) - 1];
    free(sorted);
    int above = 0;
    for (int i = 0; i < V; i++)
        above += row[i] >= kth;
    if ((int)n != above)
        return snprintf(why, why_len, "%zu candidates, where %d logits are >= the %d-th largest", n, above, k),
               false;
    for (size_t i = 0; i < n; i++) {
        if (top[i].id < 0 || top[i].id >= V)
            return snprintf(why, why_len, "candidate %zu: token %d out of range", i, top[i].id), false;
        if (memcmp(&top[i].logit, &row[top[i].id], sizeof(float)))
            return snprintf(why, why_len, "candidate %d: logit %.9g, its row says %.9g", top[i].id, top[i].logit,
                            row[top[i].id]),
                   false;
        if (!(top[i].logit >= kth))
            return snprintf(why, why_len, "candidate %d: logit %.9g below the %d-th largest %.9g", top[i].id,
                            top[i].logit, k, kth),
                   false;
        for (size_t j = 0; j < i; j++)
            if (top[j].id == top[i].id)
                return snprintf(why, why_len, "token %d is a candidate twice", top[i].id), false;
    }
    return true;
}
