#include "target_vk.h"

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
