/* Checks one generated GPU kernel against the CPU reference interpreter.
 *
 * The caller runs the interpreter over a step of a (fused) graph; the
 * harness then takes the kernel zcg_node generates for one top-level node,
 * binds the interpreter's values of that step as its inputs (weights are the
 * GGUF bytes), poisons every output with NaN, runs it on the default Vulkan
 * device (llvmpipe in CI), and compares every element it wrote with the
 * interpreter's. */
#ifndef ZINC_KERNEL_HARNESS_H
#define ZINC_KERNEL_HARNESS_H

#include "backend/codegen.h"
#include "backend/shaderc.h"
#include "backend/vk.h"
#include "frontend/gguf.h"
#include "ir/interp.h"

typedef struct kh_ctx {
    zvk_instance inst;
    zvk_device dev;
    bool ready;
    /* The token ids of the step being checked, for ZR_INPUT bindings (the
     * interpreter does not keep them); set by the caller before
     * kh_check_node of an embedding. */
    const int32_t *tokens;
    /* > 1: run the kernel this many times on the same buffers, outputs
     * poisoned again before each run and compared after each. A kernel that
     * keeps state in a scratch binding (split-K counters) must leave it
     * ready for the next replay of a recorded command buffer. */
    int replays;
    /* A recurrent state the kernel reads past position 0, and its contents
     * before the step (the interpreter keeps only those after it): bound in
     * place of the poison, and the result compared with the interpreter's.
     * Without them a state binding is poisoned like any output, which a
     * kernel at position 0 (a fresh state) must not read. */
    const zir_value *state;
    const float *state_in;
} kh_ctx;

/* Opens the default device (ZINC_DEVICE respected). false with err on failure. */
bool kh_open(kh_ctx *k, char *err, size_t errsz);
void kh_close(kh_ctx *k);

typedef struct kh_result {
    double max_err;  /* max |got - want| / (rms(want) + 1e-30) over written elements; a KV
                      * cache's rms is that of the step's rows */
    int64_t checked; /* elements compared */
    char kernel[128]; /* the kernel's name */
    int relaid;       /* weights first rewritten on the device into their layout (q6_K planes) */
} kh_result;

/* Runs node n (a top-level node of g) for the step the interpreter just ran
 * (T tokens at position pos, KV capacity ctx). Returns ZOK and fills r, or an
 * error (compile failure, Vulkan failure, a NaN left in the output, ...). */
zstatus kh_check_node(kh_ctx *k, const zir_graph *g, const zir_node *n, const zcg_opts *o,
                      const zir_interp *it, zir_step step, kh_result *r, zdiag *d);

/* The pass options the kernel tests compile with: target t's token tile and
 * fusion threshold, a 4096 context, the verifier after every pass. */
zpass_opts kh_pass_opts(const ztarget *t, zpass_phase ph);

/* The graph of f after pipeline (NULL: the default) for target t and
 * phase, the verifier after every pass, the target's tile and threshold. */
zstatus kh_compile(const gguf_file *f, const ztarget *t, zpass_phase ph, const char *pipeline,
                   zir_graph **out, zdiag *d);

/* Steps of T = 1, 7 and 17 random tokens (from seed), each at position 0
 * and again at position T, through the interpreter (KV capacity ctx); after
 * each, fn checks the step's kernels against the interpreter's values. A
 * schedule of one-token steps (max_tokens 1: decode, whose kernels may rely
 * on it) gets six single tokens instead, at positions 0 to 5. */
typedef void (*kh_step_fn)(const zir_graph *g, const zir_interp *it, zir_step st, void *arg);
zstatus kh_run_steps(const zir_graph *g, int64_t ctx, int64_t max_tokens, uint64_t seed, kh_step_fn fn,
                     void *arg, zdiag *d);

#endif
