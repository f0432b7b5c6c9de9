/* zinc devices: the Vulkan devices of this machine, what each offers for
 * compute, and which one zinc would use. */
#include <stdio.h>
#include <string.h>

#include "../backend/shaderc.h"
#include "../backend/vk.h"
#include "cli.h"

static const char *prog = "zinc devices";

static void usage(FILE *to) {
    fprintf(to,
            "usage: zinc devices [--device N] [--verbose] [--stats]\n\n"
            "Lists the Vulkan devices: index, name, type, driver, VRAM, subgroup size, shared memory per\n"
            "workgroup and cooperative matrix support. '*' marks the device zinc uses: the first discrete\n"
            "GPU, else integrated, else virtual, else CPU; --device N or ZINC_DEVICE=N picks another.\n\n"
            "options:\n"
            "  --device N   mark device N as the one in use (checks that it exists)\n"
            "  -v, --verbose  the full profile of each device, and what shaderc can compile\n"
            "  --stats      compile a probe kernel on each device and print the driver's pipeline\n"
            "               statistics (VK_KHR_pipeline_executable_properties)\n"
            "  -h, --help   this text\n\n"
            "environment: ZINC_DEVICE, ZINC_VK_VALIDATION=1, and ZINC_DISABLE_COOPMAT=1,\n"
            "ZINC_DISABLE_FP16=1, ZINC_DISABLE_INT_DOT=1 (see docs/vulkan.md)\n");
}

static void fmt_bytes(char *buf, size_t n, uint64_t b) {
    if (b >= (1ull << 30))
        snprintf(buf, n, "%.1f GiB", (double)b / (1ull << 30));
    else
        snprintf(buf, n, "%llu MiB", (unsigned long long)(b >> 20));
}

static const char *coopmat_word(const zvk_profile *p) {
    if (p->disabled & ZVK_OFF_COOPMAT) return "off (env)";
    if (p->coopmat_khr && p->coopmat_nv) return "KHR+NV";
    if (p->coopmat_khr) return "KHR";
    return p->coopmat_nv ? "NV" : "no";
}

static void driver_str(const zvk_profile *p, char *buf, size_t n) {
    char ver[32];
    zvk_driver_version(p, ver, sizeof ver);
    if (p->driver_name[0])
        snprintf(buf, n, "%.60s %.80s", p->driver_name, p->driver_info[0] ? p->driver_info : ver);
    else
        snprintf(buf, n, "%s", ver);
}

static void print_row(const zvk_profile *p, bool chosen, int name_w, int drv_w) {
    char drv[160], vram[32], sg[24];
    driver_str(p, drv, sizeof drv);
    fmt_bytes(vram, sizeof vram, p->vram);
    if (p->subgroup_min != p->subgroup_max)
        snprintf(sg, sizeof sg, "%u-%u", p->subgroup_min, p->subgroup_max);
    else
        snprintf(sg, sizeof sg, "%u", p->subgroup_size);
    printf("%c %u  %-*s  %-10s  %-*s  %9s  %-8s  %3u KiB  %s\n", chosen ? '*' : ' ', p->index, name_w,
           p->name, zvk_device_type_name(p->type), drv_w, drv, vram, sg, p->max_shared_memory / 1024,
           coopmat_word(p));
}

static void print_shapes(const char *ext, const zvk_coopmat *s, uint32_t n, uint32_t total) {
    char a[16], b[16], c[16], r[16];
    printf("    coopmat %s shapes (%u):\n", ext, total);
    for (uint32_t i = 0; i < n; i++)
        printf("      %ux%ux%u  %s x %s + %s -> %s%s%s\n", s[i].m, s[i].n, s[i].k,
               zvk_component_name(s[i].a, a), zvk_component_name(s[i].b, b), zvk_component_name(s[i].c, c),
               zvk_component_name(s[i].result, r), s[i].scope == 3 ? "" : "  (not subgroup scope)",
               s[i].saturating ? "  saturating" : "");
    if (total > n) printf("      ... %u more\n", total - n);
}

static void print_verbose(const zvk_profile *p) {
    char ver[32], heap[32], budget[32];
    zvk_driver_version(p, ver, sizeof ver);
    fmt_bytes(heap, sizeof heap, p->vram);
    printf("  device %u: %s\n", p->index, p->name);
    printf("    vendor 0x%04x device 0x%04x, Vulkan %u.%u.%u, driver %s (id %u) version %s\n", p->vendor_id,
           p->device_id, VK_API_VERSION_MAJOR(p->api_version), VK_API_VERSION_MINOR(p->api_version),
           VK_API_VERSION_PATCH(p->api_version), p->driver_name[0] ? p->driver_name : "?", p->driver_id, ver);
    printf("    subgroup %u (min %u, max %u, size control %s, full subgroups %s), ops 0x%x\n",
           p->subgroup_size, p->subgroup_min, p->subgroup_max, p->subgroup_size_control ? "yes" : "no",
           p->full_subgroups ? "yes" : "no", p->subgroup_ops);
    printf("    shared memory %u B, workgroup %u invocations (%u x %u x %u), groups %u x %u x %u\n",
           p->max_shared_memory, p->max_wg_invocations, p->max_wg_size[0], p->max_wg_size[1],
           p->max_wg_size[2], p->max_wg_count[0], p->max_wg_count[1], p->max_wg_count[2]);
    printf("    push constants %u B, storage buffers %u per stage, range %llu B, offset alignment %llu\n",
           p->max_push_constants, p->max_storage_buffers, (unsigned long long)p->max_storage_buffer_range,
           (unsigned long long)p->storage_offset_align);
    printf("    max allocation %llu MiB, max buffer %llu MiB, VRAM heap %u: %s",
           (unsigned long long)(p->max_alloc_size >> 20), (unsigned long long)(p->max_buffer_size >> 20),
           p->vram_heap, heap);
    if (p->has_budget) {
        fmt_bytes(budget, sizeof budget, p->vram_budget);
        printf(", budget %s, used %llu MiB", budget, (unsigned long long)(p->vram_usage >> 20));
    }
    printf("\n    features: fp16 %d, int8 %d, int16 %d, int64 %d, storage16 %d, storage8 %d, int-dot %d "
           "(accelerated %d), memory model %d, pipeline stats %d\n",
           p->fp16, p->int8, p->int16, p->int64, p->storage16, p->storage8, p->int_dot, p->int_dot_accel,
           p->memory_model, p->pipeline_stats);
    printf("    timestamps: %s (%u bits, %.3f ns per tick, queue family %u)\n", p->timestamps ? "yes" : "no",
           p->timestamp_bits, p->timestamp_period, p->queue_family);
    if (p->disabled)
        printf("    disabled by environment:%s%s%s\n", p->disabled & ZVK_OFF_COOPMAT ? " coopmat" : "",
               p->disabled & ZVK_OFF_FP16 ? " fp16" : "", p->disabled & ZVK_OFF_INT_DOT ? " int-dot" : "");
    if (p->coopmat_nv) print_shapes("NV", p->coopmat_nv_shapes, p->n_coopmat_nv, p->n_coopmat_nv_total);
    if (p->coopmat_khr) print_shapes("KHR", p->coopmat_khr_shapes, p->n_coopmat_khr, p->n_coopmat_khr_total);
    if (p->coopmat_wg) {
        printf("    coopmat workgroup scope (NV2): workgroups up to %u, dimensions up to %u, %u B of shared "
               "memory kept by the driver%s; flexible dimensions (%u):\n",
               p->coopmat_wg_max_invocations, p->coopmat_wg_max_dim, p->coopmat_wg_reserved_smem,
               p->coopmat_tensor ? ", tensor-addressed loads" : "", p->n_coopmat_flex_total);
        const zvk_coopmat *s = p->coopmat_flex_shapes;
        for (uint32_t i = 0; i < p->n_coopmat_flex; i++) {
            char a[16], b[16], c[16], r[16];
            printf("      multiples of %ux%ux%u  %s x %s + %s -> %s  %s scope, %u invocations%s\n", s[i].m,
                   s[i].n, s[i].k, zvk_component_name(s[i].a, a), zvk_component_name(s[i].b, b),
                   zvk_component_name(s[i].c, c), zvk_component_name(s[i].result, r),
                   s[i].scope == 2   ? "workgroup"
                   : s[i].scope == 3 ? "subgroup"
                                     : "other",
                   s[i].invocations, s[i].saturating ? "  saturating" : "");
        }
    }
}

/* A reduction through shared memory: enough to make drivers report
 * registers and shared memory. */
static const char stats_src[] = "#version 450\n"
                                "layout(local_size_x = 256) in;\n"
                                "layout(std430, binding = 0) buffer B { float b[]; };\n"
                                "shared float s[256];\n"
                                "void main() {\n"
                                "    uint i = gl_LocalInvocationID.x;\n"
                                "    s[i] = b[gl_GlobalInvocationID.x];\n"
                                "    barrier();\n"
                                "    for (uint k = 128u; k > 0u; k >>= 1) {\n"
                                "        if (i < k) s[i] += s[i + k];\n"
                                "        barrier();\n"
                                "    }\n"
                                "    if (i == 0u) b[gl_WorkGroupID.x] = s[0];\n"
                                "}\n";

static zstatus print_stats(zvk_instance *inst, uint32_t index, zdiag *d) {
    zarena *a = zarena_new();
    if (!a) return zdiag_set(d, ZE_NOMEM, "out of host memory");
    zvk_spirv sp;
    zvk_glsl_opts o = {.name = "stats_probe.comp"};
    zvk_device dev;
    zvk_pipeline p = {0};
    zstatus s = zvk_glsl_compile(a, stats_src, strlen(stats_src), &o, &sp, d);
    if (s == ZOK && (s = zvk_device_create(inst, index, &dev, d)) == ZOK) {
        zvk_pipeline_desc pd = {
            .name = "stats_probe", .spirv = sp.words, .n_words = sp.n_words, .n_buffers = 1};
        if ((s = zvk_pipeline_create(&dev, &pd, &p, d)) == ZOK) {
            printf("  device %u pipeline statistics%s\n", index,
                   p.stats.valid ? ":" : ": none (not offered)");
            for (uint32_t i = 0; i < p.stats.n_raw; i++)
                printf("    %-32s %g\n", p.stats.raw[i].name, p.stats.raw[i].value);
            if (p.stats.valid)
                printf("    -> registers %lld, shared %lld B, spills %lld, occupancy %lld\n",
                       (long long)p.stats.registers, (long long)p.stats.shared_bytes,
                       (long long)p.stats.spills, (long long)p.stats.occupancy);
        }
        zvk_pipeline_destroy(&dev, &p);
        zvk_device_destroy(&dev);
    }
    zarena_free(a);
    return s;
}

static void print_toolchain(void) {
    zvk_toolchain t;
    zdiag d = {0};
    if (zvk_toolchain_probe(&t, &d) != ZOK) {
        printf("shaderc: broken: %s\n", d.msg);
        return;
    }
    printf("shaderc: %s\n  GL_NV_cooperative_matrix: %s\n  GL_KHR_cooperative_matrix: %s%s%s\n", t.version,
           t.coopmat_nv ? "yes" : "no", t.coopmat_khr ? "yes" : "no", t.coopmat_khr ? "" : " -- ",
           t.coopmat_khr_error);
}

typedef struct opts {
    const char *device;
    bool verbose, stats;
} opts;

static int parse(int argc, char **argv, opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        bool missing = false;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) {
            o->verbose = true;
        } else if (!strcmp(argv[i], "--stats")) {
            o->stats = true;
        } else if (cli_opt(argc, argv, &i, "--device", &v, &missing)) {
            if (missing) return cli_usage_error(prog, "--device needs a device index");
            o->device = v;
        } else {
            return cli_usage_error(prog, "unknown option '%s'", argv[i]);
        }
    }
    return -1;
}

int cmd_devices(int argc, char **argv) {
    opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    zvk_instance inst;
    zdiag d = {0};
    if (zvk_instance_create(&inst, &d) != ZOK) return cli_fail(prog, &d);
    uint32_t chosen;
    zvk_profile p[ZVK_MAX_DEVICES];
    zstatus s = zvk_select_device(&inst, o.device, &chosen, &d);
    int name_w = 4, drv_w = 6;
    for (uint32_t i = 0; s == ZOK && i < inst.n_devices; i++) {
        if ((s = zvk_profile_query(&inst, i, &p[i], &d)) != ZOK) break;
        char drv[160];
        driver_str(&p[i], drv, sizeof drv);
        if ((int)strlen(p[i].name) > name_w) name_w = (int)strlen(p[i].name);
        if ((int)strlen(drv) > drv_w) drv_w = (int)strlen(drv);
    }
    if (s == ZOK) {
        printf("  #  %-*s  %-10s  %-*s  %9s  %-8s  %7s  %s\n", name_w, "name", "type", drv_w, "driver",
               "VRAM", "subgroup", "shared", "coopmat");
        for (uint32_t i = 0; i < inst.n_devices; i++)
            print_row(&p[i], i == chosen, name_w, drv_w);
        printf("* = the device zinc uses (change it with --device N or ZINC_DEVICE=N)\n");
        if (inst.validation_requested)
            printf("validation: %s\n", inst.validation ? "on"
                                                       : "requested, but VK_LAYER_KHRONOS_validation "
                                                         "is not installed");
    }
    if (s == ZOK && o.verbose) {
        print_toolchain();
        for (uint32_t i = 0; i < inst.n_devices; i++)
            print_verbose(&p[i]);
    }
    for (uint32_t i = 0; s == ZOK && o.stats && i < inst.n_devices; i++)
        s = print_stats(&inst, i, &d);
    zvk_instance_destroy(&inst);
    return s == ZOK ? 0 : cli_fail(prog, &d);
}
