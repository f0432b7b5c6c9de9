/* zrt: the executor, as a C API. It loads a plan and the GGUF it was compiled
 * from, uploads the weights, creates the pipelines, records the decode step
 * once and replays it, and runs prefill in token chunks. All intelligence is
 * in the compiler; this is the part that stays small. */
#ifndef ZINC_ZRT_H
#define ZINC_ZRT_H

#include <stdbool.h>
#include <stdint.h>

#include "../backend/plan.h"
#include "../backend/calib.h"
#include "../backend/vk.h"
#include "../frontend/gguf.h"
#include "sampler.h"
#include "../ir/zstatus.h"

typedef struct zrt zrt;
typedef struct zrt_seq zrt_seq;

typedef struct zrt_opts {
    const char *gguf_path; /* NULL: the path recorded in the plan */
    const char *device;    /* device index as text (--device), or NULL: $ZINC_DEVICE or the default */
    bool progress;         /* draw a progress bar on stderr while uploading weights */
} zrt_opts;

/* Reads and validates the plan, then opens it. */
zstatus zrt_open(const char *plan_path, const zrt_opts *o, zrt **out, zdiag *d);
/* Opens an in-memory plan; takes ownership of p (freed by zrt_close or on failure). */
zstatus zrt_open_plan(zplan *p, const zrt_opts *o, zrt **out, zdiag *d);
void zrt_close(zrt *r);

const zplan *zrt_plan(const zrt *r);
/* What the driver said of kernel i's pipeline (registers, spills, ...);
 * stats.valid is false where VK_KHR_pipeline_executable_properties is absent. */
const zvk_pipeline_stats *zrt_kernel_stats(const zrt *r, uint32_t kernel);
const gguf_file *zrt_gguf(const zrt *r); /* the weights' file, for its tokenizer metadata */
const zvk_profile *zrt_device(const zrt *r);
/* The device's per-dispatch costs, timed now (backend/calib.h). */
zstatus zrt_calibrate(zrt *r, uint32_t wide_groups, zvk_calib *out, zdiag *d);
int64_t zrt_pos(const zrt *r);
/* Forgets the KV cache and the recurrent states: the next token is at
 * position 0, where the state kernels read their states as zeros. */
void zrt_reset(zrt *r);

/* Sequences: each has its own KV cache (its slot of the plan's KV buffers
 * where the plan has slots, zincc --parallel; else a copy of them), its
 * recurrent states (copies of the plan's state buffers; plans with states
 * have one slot) and position, and shares the weights and everything else, so that one
 * executor serves several conversations (zinc serve's slots): select one with
 * zrt_seq_use, then zrt_run/eval/pos/reset/top/last_logits act on it. Steps
 * run one at a time, so a sequence gives the same logits alone as
 * interleaved with others. zrt_seq_use(r, NULL) selects the zrt's own. Free
 * sequences before zrt_close. Not thread-safe: one thread drives a zrt. */
zstatus zrt_seq_new(zrt *r, zrt_seq **out, zdiag *d);
void zrt_seq_free(zrt *r, zrt_seq *q);
void zrt_seq_use(zrt *r, zrt_seq *q);

/* Runs n tokens at the current position with one phase's schedule: prefill
 * takes 1..max_tokens tokens, decode exactly 1. logits (may be NULL)
 * receives [n][n_vocab]. */
zstatus zrt_run(zrt *r, zplan_phase ph, const int32_t *tokens, int n, float *logits, zdiag *d);

/* The largest logits of the current sequence's last row, as the GPU
 * selected them in the last step (at least ZPLAN_TOPK_K of them, unordered;
 * top holds ZPLAN_TOPK_CAP): its prefill or decode step's, or its row of a
 * batch step (plans 1.4 on). ZE_UNSUPPORTED when the plan has no top-k,
 * another step ran since, or ties overflowed it: read the row instead
 * (zrt_last_logits). */
zstatus zrt_top(const zrt *r, zrt_sample_cand *top, size_t *n, zdiag *d);

/* Runs one step like zrt_run, with a GPU timestamp after every dispatch, and
 * stores each dispatch's time (ns[0 .. schedule count)); the position does
 * not advance, but a hybrid model's recurrent states do: reset afterwards.
 * For profiles, not for speed: timestamps serialize the work. */
zstatus zrt_profile(zrt *r, zplan_phase ph, const int32_t *tokens, int n, double *ns, zdiag *d);

/* Advances n sequences (seqs[i] NULL: the zrt's own) by one token each,
 * tokens[i] at sequence i's position, in one step of the plan's batch
 * schedule (zincc --parallel N: n from 1 to N, distinct sequences). Each row
 * reads and writes only its own sequence's cache, and its arithmetic does not
 * depend on the other rows: a sequence gets the same logits in a batch of one
 * as among others. logits (may be NULL) receives [n][n_vocab]; afterwards
 * zrt_last_logits and zrt_top on sequence i read row i (its logits, its
 * top-k: with plans from 1.4 on, the step selects every row's). */
zstatus zrt_run_batch(zrt *r, zrt_seq *const *seqs, const int32_t *tokens, int n, float *logits, zdiag *d);
/* Runs one batch step like zrt_run_batch, timed like zrt_profile: no
 * sequence advances, and no logits are read back. */
zstatus zrt_profile_batch(zrt *r, zrt_seq *const *seqs, const int32_t *tokens, int n, double *ns, zdiag *d);
/* The rows a batch step takes: 0 where the plan has no batch schedule. */
int zrt_batch_rows(const zrt *r);

/* Runs any number of tokens: prefill in chunks, or decode when n == 1. */
zstatus zrt_eval(zrt *r, const int32_t *tokens, int n, float *logits, zdiag *d);
/* The logits of the last token of the last step (last: [n_vocab]), read
 * back from the device. */
zstatus zrt_last_logits(zrt *r, float *last, zdiag *d);

#endif
