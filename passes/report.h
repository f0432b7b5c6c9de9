/* Materialization analysis, the fusion report and the dot drawing.
 *
 * Materialization answers "what crosses VRAM, and how much, per token" for a
 * partitioned graph in one phase. A value crosses VRAM when a top-level node
 * (a kernel or a plain node) writes it and another top-level node reads it:
 * one write, plus one read per distinct reading node. Views (reshape) alias
 * their input and move nothing; values inside a kernel body stay on chip.
 * Bytes are per token of the step:
 *
 *   activation  elements per token x the target's act_bytes, per crossing
 *   KV cache    the store writes its T new rows (act_bytes each); attention
 *               reads the whole cache (P = ctx positions) once per token tile
 *   weight      bytes as stored / the consuming kernel's token tile (decode: 1);
 *               an embedding lookup reads its T rows only
 *   scratch     a STAGED dequant is a kernel of its own, once per step: it
 *               reads the quantized weight and writes a 2 B/weight copy, which
 *               the consumer reads back once per token tile
 *   dispatches  non-view top-level nodes (+ staged dequant kernels) per step,
 *               divided by the tokens per step (zcost_step_tokens)
 *
 * docs/report.md explains the report built from two of these (the staged
 * partition "before" and the fused one "after") and its JSON schema. */
#ifndef ZINC_REPORT_H
#define ZINC_REPORT_H

#include <stdio.h>

#include "pass.h"

typedef enum zpass_mat_kind {
    ZMAT_ACT,    /* an activation written by one kernel and read by others */
    ZMAT_KV,     /* a KV-cache store's output: the cache itself */
    ZMAT_OUTPUT, /* the graph output (written for the host; no node reads it) */
} zpass_mat_kind;

/* One stored value that crosses VRAM (views resolved to what they alias). */
typedef struct zpass_mat_value {
    const zir_value *v;
    int layer;
    zir_group group;
    zpass_mat_kind kind;
    double width;           /* v->width, from the width pass */
    bool wide;              /* an activation with width > 1.0 */
    int writes, reads;      /* crossings per token: 1 write, 1 read per reading kernel */
    double elems;           /* elements per token one crossing moves */
    double write_b, read_b; /* bytes per token */
} zpass_mat_value;

/* Traffic per token (bytes), and dispatches per step. */
typedef struct zpass_mat_traffic {
    double act;     /* every activation crossing, wide ones included */
    double wide;    /* wide intermediates only */
    double kv;      /* KV-cache writes and reads */
    double state;   /* recurrent states (delta-net conv and matrices): read and written once per step */
    double weight;  /* weights as stored */
    double scratch; /* staged dequant copies: written and read back */
    int crossings;  /* activation crossings (writes + reads) */
    int wide_crossings;
    int dispatches;         /* kernels and plain nodes, per step */
    int dequant_dispatches; /* staged dequant kernels, per step */
} zpass_mat_traffic;

typedef struct zpass_mat_group {
    int layer; /* -1 outside layers */
    zir_group group;
    zpass_mat_traffic t;
} zpass_mat_group;

typedef struct zpass_mat {
    zpass_phase phase;
    int64_t step_tokens; /* tokens per step: dispatches per token = dispatches / step_tokens */
    int act_bytes;
    zpass_mat_value *values; /* graph order of the producers */
    int n_values;
    zpass_mat_group *groups; /* graph order of first appearance */
    int n_groups;
    zpass_mat_traffic total;
} zpass_mat;

/* Analyses g (partitioned for o->phase; the width pass must have run) into
 * *out, allocated in a. ZE_INVALID when widths are missing. */
zstatus zpass_materialize(const zir_graph *g, const zpass_opts *o, zarena *a, zpass_mat *out, zdiag *d);

/* What a value stores into: itself, or the value a chain of views aliases. */
const zir_value *zpass_mat_storage(const zir_value *v);
/* The crossing record of a stored value by name, or NULL when it never crosses. */
const zpass_mat_value *zpass_mat_find(const zpass_mat *m, const char *name);
/* The group record, or NULL. */
const zpass_mat_group *zpass_mat_group_find(const zpass_mat *m, int layer, zir_group g);
/* Token tile of a top-level node: the kernel's, the phase's for a plain node. */
int zpass_mat_tile(const zir_node *n, const zpass_opts *o);
/* Bytes per token of all traffic, and the time the target needs for it plus
 * the dispatches, in microseconds. */
double zpass_mat_bytes(const zpass_mat_traffic *t);
double zpass_mat_est_us(const zpass_mat *m, const zpass_mat_traffic *t, const ztarget *tg);

/* ---- the report ---------------------------------------------------------- */

/* One phase: the staged partition (passes "shape,width") and the fused one. */
typedef struct zpass_rep_phase {
    bool present;
    const zir_graph *fused; /* decisions and kernel templates are looked up here */
    zpass_mat before, after;
    int token_tile;
} zpass_rep_phase;

typedef struct zpass_rep {
    const char *model;    /* path, for the header */
    const char *pipeline; /* the "after" pipeline */
    const ztarget *target;
    double fuse_threshold;
    int64_t ctx;
    const zpass_report *decisions; /* both phases */
    zpass_rep_phase ph[ZPH_COUNT];
} zpass_rep;

/* Aligned tables per phase (identical layers folded), then totals. */
zstatus zpass_rep_text(const zpass_rep *r, FILE *out, zdiag *d);
/* The same data as one JSON object, every layer listed (docs/report.md). */
zstatus zpass_rep_json(const zpass_rep *r, FILE *out, zdiag *d);

/* "512 B", "1.5 KiB", "12.0 MiB" */
void zpass_fmt_bytes(double b, char *buf, size_t n);

/* ---- graphviz ------------------------------------------------------------ */

/* Writes g (one phase, partitioned) as a dot graph: kernels as clusters,
 * edges labelled with bytes per token, wide intermediates crossing VRAM in
 * red, views and on-chip values grey; weights as boxes when asked. */
zstatus zpass_emit_dot(const zir_graph *g, const zpass_opts *o, const zpass_mat *m, bool weights, FILE *out,
                       zdiag *d);

#endif
