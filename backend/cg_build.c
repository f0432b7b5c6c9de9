/* The kernel builder the weight-reading generators share (cg_build.h). */
#include "cg_build.h"

void zcg_def_s(zcg_builder *b, const char *name, const char *val) {
    if (b->nd >= ZCG_MAX_DEFS) return; /* caught in zcg_build() */
    b->defs[2 * b->nd] = name;
    b->defs[2 * b->nd + 1] = val;
    b->nd++;
}

void zcg_def_i(zcg_builder *b, const char *name, int64_t v) {
    zcg_def_s(b, name, zcg_i64(b->a, v));
}

void zcg_def_f(zcg_builder *b, const char *name, float v) {
    zcg_def_s(b, name, zarena_printf(b->a, "float(%.9g)", (double)v));
}

void zcg_def_gemm_tile(zcg_builder *b, int64_t bm) {
    zcg_def_i(b, "BM", bm);
    zcg_def_i(b, "BN", GEMM_BN);
    zcg_def_i(b, "BK", GEMM_BK);
    zcg_def_i(b, "TM", bm / (GEMM_WG / (GEMM_BN / GEMM_TN)));
    zcg_def_i(b, "TN", GEMM_TN);
    zcg_def_i(b, "WG", GEMM_WG);
}

int zcg_bind(zcg_builder *b, const char *macro, const zir_value *v, bool written, uint64_t bytes) {
    zcg_kernel *k = b->k;
    int i = 0;
    while (v && i < k->n_bind && k->bind[i].value != v)
        i++;
    if (!v || i == k->n_bind) {
        if (k->n_bind == ZCG_MAX_BIND) { /* caught in zcg_build() */
            b->too_many_bindings = true;
            return 0;
        }
        i = k->n_bind++;
        k->bind[i] = (zcg_binding){v, v ? 0 : bytes, written};
    }
    k->bind[i].written |= written;
    if (macro) zcg_def_i(b, macro, i + 1); /* binding 0 is the step buffer */
    return i + 1;
}

zstatus zcg_build(zcg_builder *b, const char *const *files, const zir_node *n, zdiag *d) {
    if (b->nd >= ZCG_MAX_DEFS)
        return zdiag_set(d, ZE_INTERNAL, "codegen: '%s' needs more than %d defines", n->out->name,
                         ZCG_MAX_DEFS);
    if (b->too_many_bindings)
        return zdiag_set(d, ZE_INTERNAL, "codegen: '%s' needs more than %d bindings", n->out->name,
                         ZCG_MAX_BIND);
    b->defs[2 * b->nd] = NULL;
    b->k->glsl = zcg_compose(b->a, b->defs, files, b->o);
    if (!b->k->glsl)
        return zdiag_set(d, ZE_NOMEM, "codegen: cannot compose the kernel of '%s'", n->out->name);
    return ZOK;
}

/* Every type the interpreter dequantizes (ZTF_COMPUTE) has a decoder in
 * dequant.glsl (dq8_t<id>); test_kernels_matmul runs each one. */
static bool type_supported(ztype t) {
    const ztype_info *ti = ztype_get((uint32_t)t);
    return ti && (ti->flags & ZTF_COMPUTE);
}

zstatus zcg_weight(zcg_builder *b, const zir_node *n, const char *slot, const zir_value *w, int64_t k,
                   zdiag *d) {
    bool ok;
    uint64_t rb = ztype_row_bytes(w->dtype, (uint64_t)k, &ok);
    if (w->role != ZR_WEIGHT || !w->data)
        return zdiag_set(d, ZE_UNSUPPORTED, "codegen: '%s': operand '%s' is not a weight with data",
                         n->out->name, w->name);
    if (!type_supported(w->dtype)) {
        char types[256];
        ztype_list(ZTF_COMPUTE, types, sizeof types);
        return zdiag_set(d, ZE_UNSUPPORTED, "codegen: '%s': weight '%s' has type %s; the kernels read %s",
                         n->out->name, w->name, ztype_name(w->dtype), types);
    }
    /* The epilogue reads a bias and a product's weight one element at a time
     * (DQ1; a rows kernel's segments S<s>_BIAS, S<s>_EMUL as floats): any
     * length will do (qwen35's ssm_dt.bias and ssm_a have one per delta-net
     * head). */
    size_t sl = strlen(slot);
    bool by_element = sl >= 4 && (!strcmp(slot + sl - 4, "BIAS") || !strcmp(slot + sl - 4, "EMUL"));
    if (!ok || (k % 8 && !by_element) || w->shape[w->rank - 1] != k)
        return zdiag_set(
            d, ZE_UNSUPPORTED,
            "codegen: '%s': weight '%s' rows of %lld elements: expected %lld, a multiple of 8 and of "
            "the %s block",
            n->out->name, w->name, (long long)w->shape[w->rank - 1], (long long)k, ztype_name(w->dtype));
    uint64_t rows = 1;
    for (int i = 0; i + 1 < w->rank; i++)
        rows *= (uint64_t)w->shape[i];
    if (rb * rows > UINT32_MAX)
        return zdiag_set(d, ZE_UNSUPPORTED,
                         "codegen: '%s': weight '%s' has %llu bytes; kernels address 4 GiB", n->out->name,
                         w->name, (unsigned long long)w->nbytes);
    zcg_def_i(b, zarena_printf(b->a, "%s_TYPE", slot), (int64_t)w->dtype);
    zcg_def_i(b, zarena_printf(b->a, "%s_ROWB", slot), (int64_t)rb);
    /* the weight-layout pass's q6_K planes: dequant.glsl's accessors read them */
    if (w->layout == ZWL_Q6_PLANES) {
        if (w->dtype != ZT_Q6_K || k % 1024)
            return zdiag_set(d, ZE_INTERNAL, "codegen: '%s': weight '%s' in q6_K planes: expected q6_K rows of a multiple of 1024, found %s rows of %lld",
                             n->out->name, w->name, ztype_name(w->dtype), (long long)k);
        zcg_def_i(b, zarena_printf(b->a, "%s_Q6P", slot), 1);
    }
    zcg_bind(b, zarena_printf(b->a, "B_%s", slot), w, false, 0);
    return ZOK;
}

int64_t zcg_fill_workgroups(const zcg_opts *o) {
    return ZCG_FILL_DEEP * (o->target && o->target->n_cu > 0 ? o->target->n_cu : 1);
}
