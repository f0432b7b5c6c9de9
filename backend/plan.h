/* The compiled plan: everything the executor needs besides the GGUF weights.
 *
 * In memory a plan is plain arrays that index each other; on disk it is a
 * versioned, checksummed container (backend/plan_io.c, docs/plan-format.md).
 * The compiler builds one (backend/lower.c), the executor (runtime/) runs it.
 *
 * Buffers. Every binding of every dispatch names a buffer, an offset and a
 * range. Weight buffers each hold a contiguous run of the GGUF data section
 * (split so that none exceeds the device's maxMemoryAllocationSize); the
 * activation buffer is one arena whose regions the memory planner aliased by
 * liveness, sized for max_tokens; each KV cache is its own buffer, sized for
 * ctx; each recurrent state (a delta-net layer's conv window and its
 * delta-rule matrices) is its own buffer of constant size, kept per sequence
 * like a KV cache; its kernels read it as zeros in a step at position 0, so
 * a reset needs no device work. Scratch buffers are zero-filled at load.
 *
 * Schedules. A phase (prefill, decode) is a list of dispatches in order; a
 * dispatch flagged ZPLAN_BARRIER waits for all earlier ones (a global memory
 * barrier), others may overlap the dispatches since the last barrier.
 * Workgroup counts are affine in the step's token count T. */
#ifndef ZINC_PLAN_H
#define ZINC_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../ir/arena.h"
#include "../ir/zstatus.h"

#define ZPLAN_MAGIC         "ZINCPLAN" /* 8 bytes */
#define ZPLAN_VERSION_MAJOR 1
#define ZPLAN_VERSION_MINOR 4  /* 1.1: the top-k candidates buffer; 1.2: sequence slots, the batch schedule, recurrent state buffers; 1.3: the load schedule; 1.4: the batch schedule's top-k of every row */
#define ZPLAN_MAX_BINDINGS  16 /* per dispatch, the step buffer included */

typedef enum zplan_buf_kind {
    ZPB_WEIGHTS = 1, /* bytes [src_offset, src_offset + size) of the GGUF file */
    ZPB_ACT,         /* activations, aliased by liveness */
    ZPB_KV,          /* one KV cache: n_seqs slots of equal size, one per sequence */
    ZPB_STEP,        /* the step parameters {T, pos, ctx, rows, (pos, seq) x batch rows}: binding 0 */
    ZPB_TOKENS,      /* int32 token ids of a step, max_tokens of them */
    ZPB_LOGITS,      /* float logits [max_tokens][n_vocab] or [1][n_vocab] */
    ZPB_SCRATCH,     /* per-kernel scratch (partial sums, counters), zeroed at load */
    ZPB_TOPK,        /* the step's top candidates: {count, total, (id, logit bits) x ZPLAN_TOPK_CAP} */
    ZPB_STATE,       /* one recurrent state (conv, delta-net) of a sequence, f32; zero at load (1.2) */
    ZPB_KIND_LIMIT
} zplan_buf_kind;

typedef struct zplan_buffer {
    uint32_t kind;       /* zplan_buf_kind */
    uint32_t name;       /* string offset */
    uint64_t size;       /* bytes */
    uint64_t src_offset; /* ZPB_WEIGHTS: file offset in the GGUF */
} zplan_buffer;

/* The last dispatch of each schedule selects the largest logits of the
 * step's last row on the GPU: every logit at least the ZPLAN_TOPK_K-th
 * largest, at most ZPLAN_TOPK_CAP of them (ties can make more; `total` says
 * how many there were). Sampling then reads ~0.5 KiB instead of a row.
 * The batch schedule (1.4 on) selects every row of its step, row i into
 * the record at i * ZPLAN_TOPK_BYTES (zplan_topk_rows records in all). */
#define ZPLAN_TOPK_K     64
#define ZPLAN_TOPK_CAP   256
#define ZPLAN_TOPK_BYTES (8 + 8 * ZPLAN_TOPK_CAP)

/* Features a plan's kernels need from the device (zplan.required). */
enum {
    ZPLAN_NEED_FP16 = 1u << 0,      /* float16 arithmetic */
    ZPLAN_NEED_STORAGE16 = 1u << 1, /* 16-bit storage buffers */
    ZPLAN_NEED_STORAGE8 = 1u << 2,
    ZPLAN_NEED_INT_DOT = 1u << 3,
    ZPLAN_NEED_COOPMAT_NV = 1u << 4,
    ZPLAN_NEED_COOPMAT_KHR = 1u << 5,
    ZPLAN_NEED_SUBGROUP_SIZE = 1u << 6, /* kernels assume subgroup_size below */
    ZPLAN_NEED_COOPMAT_WG = 1u << 7,    /* workgroup-scope cooperative matrix (VK_NV_cooperative_matrix2) */
};

typedef struct zplan_kernel {
    uint32_t name; /* string offset */
    uint32_t code; /* index of the first SPIR-V word in zplan.spirv */
    uint32_t n_words;
    uint32_t n_bindings;   /* including binding 0, the step buffer */
    uint32_t shared_bytes; /* as the compiler planned it */
    uint32_t reserved;
} zplan_kernel;

typedef struct zplan_binding {
    uint32_t buffer;
    uint32_t reserved;
    uint64_t offset, range; /* bytes; range 0 = to the end */
} zplan_binding;

typedef struct zplan_affine {
    int64_t a, b, div; /* ceil((a*T + b) / div) */
} zplan_affine;

enum { ZPLAN_BARRIER = 1u << 0 };

typedef struct zplan_dispatch {
    uint32_t kernel;
    uint32_t first_binding, n_bindings; /* into zplan.bindings; [0] is the step buffer */
    uint32_t flags;                     /* ZPLAN_BARRIER */
    uint32_t node;                      /* string offset: the IR node, for profiles */
    uint32_t reserved;
    zplan_affine groups[3];
} zplan_dispatch;

/* The phases a graph is compiled for, and the schedules of a plan: the
 * batch schedule (1.2, zincc --parallel N) runs the prefill graph's kernels
 * over up to n_seqs rows, each one token of a different sequence, at its own
 * position and in its own slot of the KV caches (the step buffer's rows). */
/* The load schedule (1.3) runs once, after the weights are uploaded: it
 * rewrites weights into the layouts the weight-layout pass chose for the
 * device (q6_planes.glsl), each in place; the GGUF is never changed. */
typedef enum zplan_phase {
    ZPLAN_PREFILL = 0,
    ZPLAN_DECODE = 1,
    ZPLAN_PHASES = 2,
    ZPLAN_BATCH = 2,
    ZPLAN_LOAD = 3
} zplan_phase;
#define ZPLAN_SCHEDS    4   /* prefill, decode, batch, load */
#define ZPLAN_MAX_SEQS  256 /* sequence slots a plan may hold */
#define ZPLAN_SLOT_ALIGN 256 /* bytes: a KV slot's size is a multiple (Vulkan's largest storage offset alignment) */
#define ZPLAN_STEP_BYTES(rows) (16u + 8u * (uint32_t)(rows)) /* the step buffer for a batch of rows */

typedef struct zplan_schedule {
    uint32_t first, count; /* dispatches */
    uint32_t max_tokens;   /* most T this phase's buffers allow */
    uint32_t logits_rows;  /* rows of logits it writes: max_tokens (all positions) or 1 */
} zplan_schedule;

typedef struct zplan {
    zarena *arena; /* owns everything below */
    uint16_t major, minor;
    /* The GGUF this plan was compiled from. */
    uint32_t gguf_path;            /* string */
    uint64_t gguf_size, gguf_hash; /* gguf_identity_hash */
    /* The model. */
    uint32_t arch; /* string */
    uint32_t n_vocab, n_embd, n_layer, ctx;
    /* The target it was compiled for. */
    uint32_t target;      /* string: profile name */
    uint32_t device_name; /* string: "" when compiled for a named profile */
    uint32_t vendor_id, device_id;
    uint32_t subgroup_size, shared_bytes; /* what the kernels assume */
    uint32_t required;                    /* ZPLAN_NEED_* */
    uint32_t compiler;                    /* string: "zincc 0.1.0, shaderc ..." */
    /* I/O of a step. */
    uint32_t step_buffer, tokens_buffer, logits_buffer;
    uint32_t topk_buffer; /* a ZPB_TOPK buffer, or 0: none (plans before 1.1; buffer 0 is the step buffer) */
    /* Tables. */
    char *strings;
    uint32_t n_strings_bytes;
    zplan_buffer *buffers;
    uint32_t n_buffers;
    zplan_kernel *kernels;
    uint32_t n_kernels;
    uint32_t *spirv;
    uint32_t n_spirv_words;
    zplan_binding *bindings;
    uint32_t n_bindings;
    zplan_dispatch *dispatches;
    uint32_t n_dispatches;
    zplan_schedule sched[ZPLAN_SCHEDS]; /* sched[ZPLAN_BATCH].count 0: no batch schedule; LOAD likewise */
    uint32_t n_seqs;                    /* KV slots (1.2; 1 before): each KV buffer holds n_seqs caches */
} zplan;

/* The string at offset s (always NUL-terminated after validation). */
static inline const char *zplan_str(const zplan *p, uint32_t s) {
    return p->strings + s;
}

/* Whether the batch schedule selects every row's top-k (1.4 on), and the
 * top-k buffer's records: one a batch row then, else one. */
static inline bool zplan_batch_top(const zplan *p) {
    return (p->major > 1 || p->minor >= 4) && p->sched[ZPLAN_BATCH].count && p->sched[ZPLAN_BATCH].max_tokens;
}
static inline uint32_t zplan_topk_rows(const zplan *p) {
    return zplan_batch_top(p) ? p->sched[ZPLAN_BATCH].max_tokens : 1;
}

/* Writes p to path atomically (temporary file + rename). */
zstatus zplan_write(const zplan *p, const char *path, zdiag *d);
/* Reads and validates a plan; every index, offset and size is checked, so
 * the executor may trust the result. On failure *out is NULL and d says
 * what, where (byte offset) and what was expected. */
zstatus zplan_read(const char *path, zplan **out, zdiag *d);
zstatus zplan_parse(const void *buf, uint64_t size, const char *name, zplan **out, zdiag *d);
void zplan_free(zplan *p);

/* Semantic checks shared by the writer and the reader: indices in range,
 * bindings inside their buffers, schedules inside the dispatch table, ... */
zstatus zplan_validate(const zplan *p, const char *name, zdiag *d);

/* Prints a human-readable summary (zinc info). verbose lists every dispatch. */
void zplan_print(const zplan *p, FILE *out, bool verbose);

#endif
