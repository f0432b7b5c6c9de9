/* The stable text form of a graph. One declaration or node per line, in
 * graph order; golden tests compare it byte for byte, so change it only on
 * purpose. Example:
 *   weight %blk.0.ffn_up.weight : q4_K[768,256]
 *   %l0.up = matmul %l0.ffn_in, %blk.0.ffn_up.weight : f32[T,768]  ; L0 mlp */
#include "ir.h"

#include <inttypes.h>

static void print_dim(zdim d, FILE *out) {
    if (d == ZDIM_T)
        fputc('T', out);
    else if (d == ZDIM_P)
        fputc('P', out);
    else if (d == ZDIM_C)
        fputc('C', out);
    else
        fprintf(out, "%" PRId64, d);
}

void zir_print_type(const zir_value *v, FILE *out) {
    fprintf(out, "%s[", ztype_name(v->dtype));
    for (int i = 0; i < v->rank; i++) {
        if (i) fputc(',', out);
        print_dim(v->shape[i], out);
    }
    fputc(']', out);
}

static void print_attrs(const zir_node *n, FILE *out) {
    const zir_attrs *a = &n->attr;
    switch (n->op) {
    case ZOP_RMS_NORM: fprintf(out, " {eps=%g}", a->eps); break;
    case ZOP_L2_NORM: fprintf(out, " {eps=%g}", a->eps); break;
    case ZOP_ATTN_SCORES:
    case ZOP_DELTA_NET: fprintf(out, " {scale=%g}", a->scale); break;
    case ZOP_SLICE:
        fprintf(out, " {off=%lld len=%lld}", (long long)a->slice.off, (long long)a->slice.len);
        break;
    case ZOP_ROPE:
        fprintf(out, " {mode=%s n_rot=%d theta=%g freq_scale=%g",
                a->rope.mode == ZROPE_NEOX     ? "neox"
                : a->rope.mode == ZROPE_IMROPE ? "imrope"
                                               : "normal",
                a->rope.n_rot, a->rope.theta, a->rope.freq_scale);
        if (a->rope.mode == ZROPE_IMROPE)
            fprintf(out, " sections=%d,%d,%d,%d", a->rope.sections[0], a->rope.sections[1],
                    a->rope.sections[2], a->rope.sections[3]);
        fputc('}', out);
        break;
    case ZOP_MOE_TOPK: fprintf(out, " {topk=%d}", a->topk); break;
    case ZOP_MATMUL:
        if (a->mm_f16) fprintf(out, " {f16 operands}");
        if (a->gemv_q8) fprintf(out, " {q8 x}");
        if (a->mm_gemv) fprintf(out, " {gemv}");
        break;
    default: break;
    }
}

static void print_node(const zir_node *n, FILE *out, int indent) {
    fprintf(out, "%*s%%%s = %s", indent, "", n->out->name, zir_ops[n->op].name);
    if (n->op == ZOP_KERNEL) fprintf(out, " %s", zir_ktemplate_name(n->kp.tmpl));
    fputc(' ', out);
    for (int i = 0; i < n->n_in; i++) {
        if (i) fputs(", ", out);
        if (n->in[i])
            fprintf(out, "%%%s", n->in[i]->name);
        else
            fputs("none", out);
    }
    print_attrs(n, out);
    if (n->dequant == ZDQ_FUSED) fputs(" {dequant=fused}", out);
    if (n->op == ZOP_KERNEL) fprintf(out, " {tile=%d split=%d}", n->kp.token_tile, n->kp.split);
    if (n->exported) fputs(" {exported}", out);
    fputs(" : ", out);
    zir_print_type(n->out, out);
    if (n->layer >= 0)
        fprintf(out, "  ; L%d %s", (int)n->layer, zir_group_name(n->group));
    else
        fprintf(out, "  ; %s", zir_group_name(n->group));
    fputc('\n', out);
    for (int i = 0; i < n->n_body; i++)
        print_node(n->body[i], out, indent + 4);
}

void zir_print_node(const zir_node *n, FILE *out) {
    print_node(n, out, 0);
}

void zir_print(const zir_graph *g, FILE *out) {
    const zir_hparams *h = &g->hp;
    fprintf(
        out,
        "# zincc IR: %s, %d layers, hidden %d, ff %d, heads %d/%d x %d, vocab %d, rope %s n_rot=%d theta=%g, "
        "eps %g%s\n",
        h->arch ? h->arch : "?", h->n_layer, h->n_embd, h->n_ff, h->n_head, h->n_head_kv, h->head_dim,
        h->n_vocab, h->rope_mode == ZROPE_NEOX ? "neox" : "normal", h->n_rot, h->rope_theta, h->rms_eps,
        h->tied_output ? ", tied output" : "");
    for (uint32_t i = 0; i < g->n_values; i++) {
        const zir_value *v = g->values[i];
        if (v->role == ZR_ACTIVATION) continue;
        fprintf(out, "%-6s %%%s : ", zir_role_name(v->role), v->name);
        zir_print_type(v, out);
        fputc('\n', out);
    }
    for (uint32_t i = 0; i < g->n_nodes; i++)
        zir_print_node(g->nodes[i], out);
    if (g->logits) fprintf(out, "output %%%s\n", g->logits->name);
}
