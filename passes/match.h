/* Helpers the fusion passes share to ask structural questions of a graph:
 * who consumes a value, and what a node (or a kernel's last body node) is. */
#ifndef ZINC_MATCH_H
#define ZINC_MATCH_H

#include "pass.h"

/* The one top-level node (a kernel counts as one) that holds every use of v;
 * NULL when v has no uses, several consuming nodes, or is the graph output. */
zir_node *zpass_sole_consumer(const zir_graph *g, const zir_value *v);

/* The top-level consumers of v, when there are 2..ZPASS_MAX_MATMULS of them
 * and each is a plain matmul reading v as its activation: 0 otherwise. */
enum { ZPASS_MAX_MATMULS = 8 };
int zpass_matmul_consumers(const zir_graph *g, const zir_value *v, zir_node **c);
/* How many of v's uses top-level node x makes in a way the caller takes (a
 * kernel's uses are its body's), or 0 when it takes none of x's. */
typedef uint32_t (*zpass_reader_uses)(const zir_node *x, const zir_value *v);
/* The readers of v when reads_as takes each of them, and they make all of
 * v's uses: at least two, at most ZPASS_MAX_MATMULS; 0 otherwise. */
int zpass_consumers_of(const zir_graph *g, const zir_value *v, zir_node **c, zpass_reader_uses reads_as);
/* A plain matmul reading v as its activation: 1 use. */
uint32_t zpass_plain_matmul_reads(const zir_node *x, const zir_value *v);

/* Gives consumer c of norm n a copy of n, placed just before c, and fuses
 * the two into a kernel (returned): a matmul kernel, or c's own template
 * when c is a kernel (its body's reads of n then read the copy). The copy
 * is named after c's output. */
zir_node *zpass_norm_copy_into(zir_graph *g, const zpass_opts *o, zir_node *n, zir_node *c, zdiag *d);

/* Number of distinct top-level nodes that use v. */
int zpass_consumer_count(const zir_graph *g, const zir_value *v);

/* The original node that computes a top-level node's output (itself, or a
 * kernel's last body node), and the first body node (or itself). */
const zir_node *zpass_tail(const zir_node *n);
const zir_node *zpass_head(const zir_node *n);

static inline zir_kind zpass_kind(const zir_node *n) {
    return zir_ops[n->op].kind;
}
static inline bool zpass_flag(const zir_node *n, uint32_t f) {
    return (zir_ops[n->op].flags & f) != 0;
}

/* The activations a matmul's epilogue computes (matmul_io.glsl's EPI_UNARY,
 * gemv_segs.glsl's per-segment S<s>_UNARY): fuse-epilogue's and fuse-qkv's. */
static inline bool zpass_epilogue_unary(const zir_node *u) {
    return u->op == ZOP_SIGMOID || u->op == ZOP_SOFTPLUS || u->op == ZOP_SILU;
}

/* Whether a top-level node is run by the GEMV templates (decode's GEMV, the
 * multi-row GEMV): a plain matmul, or a matmul, gate+up or rows kernel. */
static inline bool zpass_gemv_node(const zir_node *n) {
    return n->op == ZOP_MATMUL ||
           (n->op == ZOP_KERNEL && (n->kp.tmpl == ZKT_MATMUL || n->kp.tmpl == ZKT_GATE_UP_SWIGLU ||
                                    n->kp.tmpl == ZKT_MATMUL_ROWS));
}

/* Whether a node's matmul (or a kernel's matmuls) has fp16 operands (attr.mm_f16). */
static inline bool zpass_gemv_f16(const zir_node *n) {
    if (n->op == ZOP_MATMUL) return n->attr.mm_f16;
    for (int i = 0; n->op == ZOP_KERNEL && i < n->n_body; i++)
        if (n->body[i]->op == ZOP_MATMUL && n->body[i]->attr.mm_f16) return true;
    return false;
}

/* Whether a node's matmul (or a kernel's matmuls) has int8 x (attr.gemv_q8). */
static inline bool zpass_gemv_q8(const zir_node *n) {
    if (n->op == ZOP_MATMUL) return n->attr.gemv_q8;
    for (int i = 0; n->op == ZOP_KERNEL && i < n->n_body; i++)
        if (n->body[i]->op == ZOP_MATMUL && n->body[i]->attr.gemv_q8) return true;
    return false;
}

/* Elements per token of a value (T -> 1, P -> the assumed context, C -> 1). */
double zpass_elems_per_token(const zir_value *v, int64_t ctx);

/* Records a fusion at node `at` that keeps v (written then read: two
 * crossings) on chip, as `chosen`; the caller writes the reason. NULL when
 * there is no report. */
zpass_decision *zpass_record_kept(const zpass_opts *o, const zir_node *at, const zir_value *v,
                                  zir_ktemplate chosen);

/* A kernel of template t of p and its only reader u (the caller checked
 * that), recorded as keeping p's output on chip with the reason given;
 * NULL (d set) when the surgery fails. */
zir_node *zpass_fuse_pair(zir_graph *g, const zpass_opts *o, zir_node *p, zir_node *u, zir_ktemplate t,
                          const char *reason, zdiag *d);

/* Bytes of a weight as stored. */
static inline double zpass_weight_bytes(const zir_value *w) {
    return (double)w->nbytes;
}

#endif
