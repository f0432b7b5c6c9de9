#include "target_vk.h"

#include "calib.h"

#include <stdio.h>
#include <string.h>

static const ztarget *closest(const zvk_profile *p) {
    if (p->type == VK_PHYSICAL_DEVICE_TYPE_CPU) return ztarget_find("llvmpipe");
    if (p->vendor_id == 0x10de && (strstr(p->name, "H200") || strstr(p->name, "H100")))
        return ztarget_find("h200");
    if (p->vendor_id == 0x1002 && strstr(p->name, "RX 9")) return ztarget_find("rdna4");
    return ztarget_find("generic");
}

void zvk_target_from_profile(const zvk_profile *p, ztarget *t, char *name_buf, size_t n) {
    *t = *closest(p);
    snprintf(name_buf, n, "device: %s", p->name);
    t->name = name_buf;
    if (p->subgroup_size) t->subgroup = (int)p->subgroup_size;
    if (p->max_shared_memory) t->smem_bytes = p->max_shared_memory;
    t->coopmat = p->coopmat_khr || p->coopmat_nv;
    t->int_dot = p->int_dot;
    /* the flexible fp16 x fp16 + fp32 shape at workgroup scope, 256
     * invocations where there is a choice (the subgroup GEMM's size) */
    t->coopmat_wg = 0;
    for (uint32_t i = 0; p->coopmat_wg && i < p->n_coopmat_flex; i++) {
        const zvk_coopmat *s = &p->coopmat_flex_shapes[i];
        if (s->scope != 2 || s->a != 0 || s->b != 0 || s->c != 1 || s->result != 1) continue;
        if (t->coopmat_wg && (t->coopmat_wg == 256 || s->invocations != 256)) continue; /* the first, or 256 */
        t->coopmat_wg = s->invocations;
        t->coopmat_wg_m = s->m, t->coopmat_wg_n = s->n, t->coopmat_wg_k = s->k;
        t->coopmat_wg_smem = p->coopmat_wg_reserved_smem;
    }
    /* the profile's measured choice holds where the device says its packed
     * dot products are accelerated */
    t->gemv_int8 = t->gemv_int8 && p->int_dot && p->int_dot_accel;
}

zstatus zvk_target_from_device(const char *request, ztarget *t, zvk_profile *prof, char *name_buf, size_t n,
                               zdiag *d) {
    zvk_instance inst = {0};
    uint32_t idx;
    zstatus s = zvk_instance_create(&inst, d);
    if (!s) s = zvk_select_device(&inst, request, &idx, d);
    if (!s) s = zvk_profile_query(&inst, idx, prof, d);
    if (!s) zvk_target_from_profile(prof, t, name_buf, n);
    zvk_instance_destroy(&inst);
    return s;
}

void zvk_target_probe_frags(const char *request, ztarget *t) {
    int right = 0, down = 0, fb = 0;
    zvk_instance inst = {0};
    zvk_device dev;
    uint32_t idx;
    zdiag d = {0};
    if (t->coopmat && !zvk_instance_create(&inst, &d) && !zvk_select_device(&inst, request, &idx, &d) &&
        !zvk_device_create(&inst, idx, &dev, &d)) {
        zvk_probe_frag_order(&dev, &right, &down, &fb);
        zvk_device_destroy(&dev);
    }
    zvk_instance_destroy(&inst);
    t->frag_right = right, t->frag_down = down, t->frag_b = fb;
}
