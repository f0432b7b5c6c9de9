/* zvk: the Vulkan device layer under the backend (kernel generation) and the
 * runtime (the executor).
 *
 * It enumerates devices, describes each one in a zvk_profile (the facts the
 * cost model and the kernel templates specialise on), creates a logical
 * device with one compute queue, and offers buffers, compute pipelines,
 * descriptor sets, command submission and timestamps. Everything returns a
 * zstatus and fills a zdiag; nothing prints. Callers own the structs (no heap
 * allocations behind the caller's back), and every *_destroy accepts a
 * zeroed or half-built struct, so error paths can destroy unconditionally.
 *
 * Environment (documented in docs/vulkan.md):
 *   ZINC_DEVICE=N            pick device N (the CLI's --device N wins)
 *   ZINC_VK_VALIDATION=1     enable VK_LAYER_KHRONOS_validation if installed
 *   ZINC_DISABLE_COOPMAT=1   clear cooperative matrix (KHR and NV) from profiles
 *   ZINC_DISABLE_FP16=1      clear shaderFloat16
 *   ZINC_DISABLE_INT_DOT=1   clear shaderIntegerDotProduct */
#ifndef ZINC_VK_H
#define ZINC_VK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../ir/zstatus.h"
#include "vk_compat.h"

#define ZVK_MAX_DEVICES 16
#define ZVK_MAX_COOPMAT 64 /* shapes kept per extension; more are counted in n_*_total */
#define ZVK_MAX_STATS   48 /* raw pipeline statistics kept per pipeline */

/* ---------------------------------------------------------------- profile */

/* One cooperative matrix configuration: D(MxN) = A(MxK) * B(KxN) + C(MxN).
 * Types are VkComponentType{KHR,NV} values (see zvk_component_name). */
typedef struct zvk_coopmat {
    uint32_t m, n, k;
    uint32_t a, b, c, result;
    uint32_t scope;       /* VkScope{KHR,NV}: 3 = subgroup, 2 = workgroup */
    bool saturating;      /* KHR only: integer accumulation saturates */
    uint32_t invocations; /* flexible dimensions at workgroup scope: the workgroup size they need
                             (m, n, k are then granularities) */
} zvk_coopmat;

/* Bits of zvk_profile.disabled: features present on the device that an
 * environment switch cleared (a workaround for a misbehaving driver). */
enum {
    ZVK_OFF_COOPMAT = 1u << 0, /* ZINC_DISABLE_COOPMAT */
    ZVK_OFF_FP16 = 1u << 1,    /* ZINC_DISABLE_FP16 */
    ZVK_OFF_INT_DOT = 1u << 2, /* ZINC_DISABLE_INT_DOT */
};

typedef struct zvk_profile {
    uint32_t index; /* position in the instance's device list */
    char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    uint32_t vendor_id, device_id;
    VkPhysicalDeviceType type;
    uint32_t api_version;    /* what the device reports (may exceed our headers) */
    uint32_t driver_id;      /* VkDriverId, 0 when the driver does not say */
    uint32_t driver_version; /* vendor-encoded: see zvk_driver_version */
    char driver_name[VK_MAX_DRIVER_NAME_SIZE];
    char driver_info[VK_MAX_DRIVER_INFO_SIZE];
    uint8_t device_uuid[VK_UUID_SIZE];
    uint8_t cache_uuid[VK_UUID_SIZE]; /* pipelineCacheUUID: changes with the driver build */

    /* Subgroups. min/max differ from subgroup_size only where the driver
     * can run several sizes (RDNA: 32 and 64) and says so through
     * VK_EXT_subgroup_size_control (core in 1.3). */
    uint32_t subgroup_size, subgroup_min, subgroup_max;
    uint32_t subgroup_ops; /* VkSubgroupFeatureFlags, when compute has subgroup ops */
    bool subgroup_size_control, full_subgroups;

    /* Compute limits. */
    uint32_t max_shared_memory; /* maxComputeSharedMemorySize, bytes */
    uint32_t max_wg_invocations, max_wg_size[3], max_wg_count[3];
    uint32_t max_push_constants;       /* bytes */
    uint32_t max_storage_buffers;      /* per stage */
    uint64_t max_storage_buffer_range; /* bytes one descriptor may cover */
    uint64_t storage_offset_align;     /* minStorageBufferOffsetAlignment */
    uint64_t max_alloc_size;           /* maxMemoryAllocationSize (maintenance3) */
    uint64_t max_buffer_size;          /* maxBufferSize (maintenance4), else max_alloc_size */

    /* Memory: the largest device-local heap, and its budget when the driver
     * has VK_EXT_memory_budget (budget = what zincc may use, usage = what
     * this process uses, both from the driver). */
    uint64_t vram;
    uint32_t vram_heap;
    bool has_budget;
    uint64_t vram_budget, vram_usage;

    /* Shader features. */
    bool fp16, int8, int16, int64;
    bool storage16, storage8; /* 16/8-bit types in storage buffers */
    bool int_dot;             /* shaderIntegerDotProduct */
    bool int_dot_accel;       /* 4x8-bit packed signed dot product is accelerated */
    bool memory_model;        /* vulkanMemoryModel (cooperative matrix shaders need it) */
    bool coopmat_khr, coopmat_nv;
    uint32_t n_coopmat_khr, n_coopmat_nv;             /* kept in the arrays */
    uint32_t n_coopmat_khr_total, n_coopmat_nv_total; /* reported by the driver */
    zvk_coopmat coopmat_khr_shapes[ZVK_MAX_COOPMAT];
    zvk_coopmat coopmat_nv_shapes[ZVK_MAX_COOPMAT];
    /* VK_NV_cooperative_matrix2: workgroup-scope matrices of flexible
     * dimensions (multiples of each entry's granularity, in workgroups of
     * its invocations), shared memory the driver keeps for them. */
    bool coopmat_wg;
    /* and its tensor-addressed loads (cooperativeMatrixTensorAddressing), for
     * ZINC_CM_TENSOR=1's measurement (backend/spv_tensor.c) */
    bool coopmat_tensor;
    uint32_t coopmat_wg_max_invocations, coopmat_wg_max_dim, coopmat_wg_reserved_smem;
    uint32_t n_coopmat_flex, n_coopmat_flex_total;
    zvk_coopmat coopmat_flex_shapes[ZVK_MAX_COOPMAT];
    bool pipeline_stats; /* VK_KHR_pipeline_executable_properties */

    /* Timestamps on the compute queue we use. */
    uint32_t queue_family;
    bool timestamps;
    float timestamp_period; /* nanoseconds per tick */
    uint32_t timestamp_bits;

    uint32_t disabled; /* ZVK_OFF_* */
} zvk_profile;

const char *zvk_device_type_name(VkPhysicalDeviceType t);
/* "float16", "sint8", ... or "type<N>" for a value we have no name for. */
const char *zvk_component_name(uint32_t component_type, char buf[16]);
/* The driver version in the vendor's own notation (NVIDIA 550.54.14). */
void zvk_driver_version(const zvk_profile *p, char *buf, size_t n);

/* --------------------------------------------------------------- instance */

typedef struct zvk_instance {
    VkInstance instance;
    uint32_t api_version; /* what zincc asked the loader for */
    uint32_t n_devices;
    VkPhysicalDevice devices[ZVK_MAX_DEVICES];
    /* Validation (ZINC_VK_VALIDATION=1): whether it was asked for, whether
     * the layer was found and enabled, and what it reported. The library
     * does not print; a program may set log to see each message. */
    bool validation_requested, validation;
    VkDebugUtilsMessengerEXT messenger;
    uint32_t validation_errors, validation_warnings;
    char last_validation_error[512];
    void (*log)(void *ctx, const char *msg);
    void *log_ctx;
} zvk_instance;

/* Creates the instance and lists the devices. *inst must not move while it
 * lives (the validation callback points at it). Fails with ZE_UNSUPPORTED
 * when there is no Vulkan driver or no device. */
zstatus zvk_instance_create(zvk_instance *inst, zdiag *d);
void zvk_instance_destroy(zvk_instance *inst);

/* Reads the profile of device `index`, with the ZINC_DISABLE_* overrides
 * applied. */
zstatus zvk_profile_query(const zvk_instance *inst, uint32_t index, zvk_profile *p, zdiag *d);

/* The default among n device types: the first discrete GPU, else the first
 * integrated, else virtual, else CPU (llvmpipe), else device 0. */
uint32_t zvk_default_device(const VkPhysicalDeviceType *types, uint32_t n);

/* Resolves the device to use: `request` (the CLI's --device value, or NULL),
 * else $ZINC_DEVICE, else the default. A bad or out-of-range index is
 * ZE_INVALID, naming where the index came from. */
zstatus zvk_select_device(const zvk_instance *inst, const char *request, uint32_t *index, zdiag *d);

/* ----------------------------------------------------------------- device */

typedef struct zvk_device {
    zvk_instance *inst;
    zvk_profile prof;
    VkPhysicalDevice phys;
    VkDevice device;
    VkQueue queue;
    VkCommandPool pool;
    VkPhysicalDeviceMemoryProperties mem;
    uint64_t heap_used[VK_MAX_MEMORY_HEAPS]; /* bytes zincc holds, per heap */
    VkDeviceSize staging_chunk;              /* bounce-buffer size for upload/download */
    uint64_t timeout_ns;                     /* how long a submission may take */
    bool lost;                               /* VK_ERROR_DEVICE_LOST was seen: refuse further work */
    PFN_vkGetPipelineExecutablePropertiesKHR exec_props;
    PFN_vkGetPipelineExecutableStatisticsKHR exec_stats;
    PFN_vkGetPipelineExecutableInternalRepresentationsKHR exec_ir;
} zvk_device;

/* Creates the logical device for device `index`, enabling what its profile
 * says is present (after the overrides), one compute queue and a command
 * pool. *dev must not move while it lives. */
zstatus zvk_device_create(zvk_instance *inst, uint32_t index, zvk_device *dev, zdiag *d);
void zvk_device_destroy(zvk_device *dev);

/* The name of a VkResult ("VK_ERROR_DEVICE_LOST"), or "VkResult(<n>)". */
const char *zvk_result_name(VkResult r);
/* For a failed call: ZE_NOMEM for the two out-of-memory results, ZE_VK for
 * the rest, with "<call> failed: <VkResult name> (<what>)". Marks a device
 * lost on VK_ERROR_DEVICE_LOST (dev may be NULL). */
zstatus zvk_fail(zvk_device *dev, VkResult r, zdiag *d, const char *call, const char *what);

/* ---------------------------------------------------------------- buffers */

typedef enum zvk_memkind {
    ZVK_MEM_DEVICE, /* device-local; reached through staging copies */
    ZVK_MEM_HOST,   /* host-visible and coherent, mapped for its lifetime */
} zvk_memkind;

typedef struct zvk_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceSize size;  /* what was asked for */
    VkDeviceSize alloc; /* what the heap gave (size rounded up by the driver) */
    zvk_memkind kind;
    uint32_t heap;
    void *map; /* ZVK_MEM_HOST only */
} zvk_buffer;

/* A storage buffer of `size` bytes with its own allocation. `what` names it
 * in messages ("weights of blk.3"). Refuses sizes above maxMemoryAllocationSize
 * (the memory planner must split them) and reports exhaustion as
 * "out of device memory: need X MiB for <what>, device-local heap has Y MiB
 * (Z MiB free)", both ZE_NOMEM. */
zstatus zvk_buffer_create(zvk_device *dev, VkDeviceSize size, zvk_memkind kind, const char *what,
                          zvk_buffer *b, zdiag *d);
void zvk_buffer_destroy(zvk_device *dev, zvk_buffer *b);

/* Copies host bytes into [off, off+n) of b, through staging chunks for a
 * device-local buffer; and back. Both wait for completion. */
zstatus zvk_upload(zvk_device *dev, zvk_buffer *b, VkDeviceSize off, const void *src, size_t n, zdiag *d);
zstatus zvk_download(zvk_device *dev, const zvk_buffer *b, VkDeviceSize off, void *dst, size_t n, zdiag *d);

/* Free bytes on a heap: the driver's budget minus usage where it reports one,
 * else the heap size minus what zincc holds. */
uint64_t zvk_heap_free(const zvk_device *dev, uint32_t heap);

/* -------------------------------------------------------------- pipelines */

/* A specialization constant: 4 bytes (int, uint, float bits or bool). */
typedef struct zvk_spec {
    uint32_t id;
    uint32_t value;
} zvk_spec;

typedef struct zvk_pipeline_desc {
    const char *name; /* for messages */
    const uint32_t *spirv;
    size_t n_words;
    uint32_t n_buffers;   /* storage buffers at set 0, bindings 0..n-1 */
    uint32_t push_size;   /* bytes of push constants (multiple of 4), 0 for none */
    const zvk_spec *spec; /* n_spec specialization constants */
    uint32_t n_spec;
    uint32_t subgroup_size; /* 0: the driver's choice; else required (subgroup size control) */
    bool keep_nv;           /* NV cooperative matrices stay NV where the device has them (no KHR rewrite) */
} zvk_pipeline_desc;

/* What the driver says about a compiled pipeline, for the cost model.
 * Fields are -1 where the driver reports no such statistic. Names differ
 * by driver: NVIDIA says "Register Count", RADV "VGPRs", "LDS size",
 * "Subgroups per SIMD"; raw keeps them all. */
typedef struct zvk_stat {
    char name[64];
    double value;
} zvk_stat;

typedef struct zvk_pipeline_stats {
    bool valid;            /* the driver reported statistics */
    int64_t registers;     /* per invocation (NVIDIA registers, AMD VGPRs) */
    int64_t sgprs;         /* AMD scalar registers */
    int64_t spills;        /* spilled registers */
    int64_t shared_bytes;  /* shared memory per workgroup */
    int64_t scratch_bytes; /* private/local memory */
    int64_t occupancy;     /* subgroups in flight per SIMD */
    int64_t code_bytes;
    int64_t subgroup_size;
    uint32_t n_raw;
    zvk_stat raw[ZVK_MAX_STATS];
} zvk_pipeline_stats;

typedef struct zvk_pipeline {
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline pipeline;
    uint32_t n_buffers, push_size;
    zvk_pipeline_stats stats;
} zvk_pipeline;

/* Creates a compute pipeline (entry point "main"). With
 * VK_KHR_pipeline_executable_properties it also reads p->stats. */
zstatus zvk_pipeline_create(zvk_device *dev, const zvk_pipeline_desc *desc, zvk_pipeline *p, zdiag *d);
void zvk_pipeline_destroy(zvk_device *dev, zvk_pipeline *p);

/* A buffer range bound to one binding; range 0 means "to the end". */
typedef struct zvk_binding {
    const zvk_buffer *buf;
    VkDeviceSize offset, range;
} zvk_binding;

/* A descriptor pool for max_sets sets of at most max_buffers buffers in all. */
zstatus zvk_desc_pool_create(zvk_device *dev, uint32_t max_sets, uint32_t max_buffers, VkDescriptorPool *pool,
                             zdiag *d);
void zvk_desc_pool_destroy(zvk_device *dev, VkDescriptorPool *pool);
/* Allocates a set for pipeline p from pool and writes its n bindings (n must
 * equal p->n_buffers). Offsets must respect minStorageBufferOffsetAlignment. */
zstatus zvk_desc_set(zvk_device *dev, VkDescriptorPool pool, const zvk_pipeline *p, const zvk_binding *b,
                     uint32_t n, VkDescriptorSet *set, zdiag *d);

/* --------------------------------------------------------------- commands */

/* A primary command buffer and the fence of its submissions. Record with
 * zvk_cmd_begin and the zvk_cmd_* helpers (or raw vkCmd* calls on cb), close
 * with zvk_cmd_end, then submit as often as wanted (the executor replays
 * one per decode step), and release. zvk_cmd_run does end+submit+release. */
typedef struct zvk_cmd {
    VkCommandBuffer cb;
    VkFence fence;
    bool recording; /* between begin and end */
    bool pending;   /* submitted and not yet seen complete */
} zvk_cmd;

zstatus zvk_cmd_begin(zvk_device *dev, zvk_cmd *c, zdiag *d);
/* Ends recording. Appends a barrier that makes every write visible to later
 * submissions and to the host, so that callers need none at the end. */
zstatus zvk_cmd_end(zvk_device *dev, zvk_cmd *c, zdiag *d);
/* Submits and waits (dev->timeout_ns). */
zstatus zvk_cmd_submit_wait(zvk_device *dev, zvk_cmd *c, zdiag *d);
void zvk_cmd_release(zvk_device *dev, zvk_cmd *c);
zstatus zvk_cmd_run(zvk_device *dev, zvk_cmd *c, zdiag *d);

void zvk_cmd_dispatch(const zvk_cmd *c, const zvk_pipeline *p, VkDescriptorSet set, const void *push,
                      uint32_t gx, uint32_t gy, uint32_t gz);
/* Makes shader and transfer writes before it visible to shaders and transfers after it. */
void zvk_cmd_barrier(const zvk_cmd *c);

/* Timestamps: a query pool of cap marks. Reset it in a command buffer, mark
 * points between commands (each mark is taken when all work before it has
 * finished), run, then read the marks in nanoseconds. */
typedef struct zvk_timer {
    VkQueryPool pool;
    uint32_t cap, n;
    double period_ns;
    uint64_t mask;
} zvk_timer;

zstatus zvk_timer_create(zvk_device *dev, uint32_t cap, zvk_timer *t, zdiag *d);
void zvk_timer_destroy(zvk_device *dev, zvk_timer *t);
void zvk_timer_reset(const zvk_cmd *c, zvk_timer *t);
zstatus zvk_timer_mark(const zvk_cmd *c, zvk_timer *t, zdiag *d);
/* ns[i] = time of mark i minus mark 0, for the t->n marks. */
zstatus zvk_timer_read(zvk_device *dev, const zvk_timer *t, double *ns, zdiag *d);

#endif
