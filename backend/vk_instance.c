/* The Vulkan instance: loader version, optional validation, the device
 * list, device selection, and VkResult names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define ZVK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZVK_ASAN 1
#endif
#endif

#ifdef ZVK_ASAN
#include <dlfcn.h>

/* Under AddressSanitizer only. The loader dlcloses the drivers at
 * vkDestroyInstance; whatever a driver keeps in its globals then looks
 * leaked, from "<unknown module>", which no suppression can name. Marking
 * the loaded drivers and layers RTLD_NODELETE keeps them mapped until exit,
 * so that LeakSanitizer sees through their globals and can name them. */
static void keep_drivers_mapped(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *path = strchr(line, '/');
        if (!path) continue;
        path[strcspn(path, "\n")] = 0;
        if (strstr(path, "/libvulkan_") || strstr(path, "/libVkLayer_"))
            (void)dlopen(path, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    }
    fclose(f);
}
#else
static void keep_drivers_mapped(void) {}
#endif

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

bool zvki_env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

uint32_t zvki_effective_api(const zvk_instance *inst, uint32_t device_api) {
    uint32_t a =
        VK_MAKE_API_VERSION(0, VK_API_VERSION_MAJOR(device_api), VK_API_VERSION_MINOR(device_api), 0);
    return a < inst->api_version ? a : inst->api_version;
}

/* Counts what the validation layer says and hands it to inst->log; the
 * library itself never prints. */
static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                    VkDebugUtilsMessageTypeFlagsEXT type,
                                                    const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                    void *user) {
    (void)type;
    zvk_instance *inst = user;
    const char *msg = data && data->pMessage ? data->pMessage : "(no message)";
    if (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        inst->validation_errors++;
        zvki_copy(inst->last_validation_error, sizeof inst->last_validation_error, msg);
    } else {
        inst->validation_warnings++;
    }
    if (inst->log) inst->log(inst->log_ctx, msg);
    return VK_FALSE;
}

static bool layer_present(const char *name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return false;
    zarena *a = zarena_new();
    VkLayerProperties *v = a ? zarena_array(a, n, sizeof *v) : NULL;
    bool found = false;
    if (v && vkEnumerateInstanceLayerProperties(&n, v) >= VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(v[i].layerName, name) == 0;
    zarena_free(a);
    return found;
}

/* Whether the loader (or, with layer set, that layer) offers an instance extension. */
static bool instance_ext_present(const char *layer, const char *name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(layer, &n, NULL) != VK_SUCCESS || n == 0) return false;
    zarena *a = zarena_new();
    VkExtensionProperties *v = a ? zarena_array(a, n, sizeof *v) : NULL;
    bool found = false;
    if (v && vkEnumerateInstanceExtensionProperties(layer, &n, v) >= VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(v[i].extensionName, name) == 0;
    zarena_free(a);
    return found;
}

static uint32_t loader_version(void) {
    /* vkEnumerateInstanceVersion is absent from 1.0 loaders: look it up. */
    PFN_vkEnumerateInstanceVersion fn =
        (PFN_vkEnumerateInstanceVersion)vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
    uint32_t v = VK_API_VERSION_1_0;
    if (fn && fn(&v) != VK_SUCCESS) v = VK_API_VERSION_1_0;
    return v;
}

static zstatus list_devices(zvk_instance *inst, zdiag *d) {
    uint32_t n = 0;
    VkResult r = vkEnumeratePhysicalDevices(inst->instance, &n, NULL);
    if (r != VK_SUCCESS) return zvk_fail(NULL, r, d, "vkEnumeratePhysicalDevices", "listing devices");
    if (n == 0)
        return zdiag_set(d, ZE_UNSUPPORTED,
                         "no Vulkan device found: the loader has no driver with a device (install a GPU "
                         "driver, or Mesa's llvmpipe from mesa-vulkan-drivers)");
    if (n > ZVK_MAX_DEVICES) n = ZVK_MAX_DEVICES;
    r = vkEnumeratePhysicalDevices(inst->instance, &n, inst->devices);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return zvk_fail(NULL, r, d, "vkEnumeratePhysicalDevices", "listing devices");
    inst->n_devices = n;
    return ZOK;
}

static void messenger_info(zvk_instance *inst, VkDebugUtilsMessengerCreateInfoEXT *mi) {
    *mi = (VkDebugUtilsMessengerCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity =
            VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_validation,
        .pUserData = inst,
    };
}

/* The validation layer and debug messenger when asked for and installed,
 * and portability enumeration where the loader has it. Returns whether the
 * debug utils extension is among exts. */
static bool choose_layers(zvk_instance *inst, const char **layers, uint32_t *n_layers, const char **exts,
                          uint32_t *n_exts, VkInstanceCreateFlags *flags) {
    bool debug_utils = false;
    inst->validation_requested = zvki_env_on("ZINC_VK_VALIDATION");
    if (inst->validation_requested && layer_present(VALIDATION_LAYER)) {
        layers[(*n_layers)++] = VALIDATION_LAYER;
        inst->validation = true;
        if (instance_ext_present(NULL, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) ||
            instance_ext_present(VALIDATION_LAYER, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
            exts[(*n_exts)++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
            debug_utils = true;
        }
    }
    /* Portability drivers (MoltenVK) are listed only when asked for. */
    if (instance_ext_present(NULL, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
        exts[(*n_exts)++] = VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME;
        *flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
    return debug_utils;
}

zstatus zvk_instance_create(zvk_instance *inst, zdiag *d) {
    memset(inst, 0, sizeof *inst);
    uint32_t loader = loader_version();
    if (loader < VK_API_VERSION_1_1)
        return zdiag_set(d, ZE_UNSUPPORTED, "the Vulkan loader is version %u.%u; zincc needs 1.1 or newer",
                         VK_API_VERSION_MAJOR(loader), VK_API_VERSION_MINOR(loader));
    /* Ask for the newest version our headers describe; a 1.4 driver serves
     * a 1.3 application unchanged. */
    inst->api_version = loader < VK_API_VERSION_1_3
                            ? VK_MAKE_API_VERSION(0, 1, VK_API_VERSION_MINOR(loader), 0)
                            : VK_API_VERSION_1_3;

    const char *layers[1], *exts[2];
    uint32_t n_layers = 0, n_exts = 0;
    VkInstanceCreateFlags flags = 0;
    bool debug_utils = choose_layers(inst, layers, &n_layers, exts, &n_exts, &flags);

    VkDebugUtilsMessengerCreateInfoEXT mi;
    messenger_info(inst, &mi);
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "zincc",
                             .pEngineName = "zincc",
                             .apiVersion = inst->api_version};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pNext = debug_utils ? &mi : NULL, /* also catches creation messages */
                               .flags = flags,
                               .pApplicationInfo = &app,
                               .enabledLayerCount = n_layers,
                               .ppEnabledLayerNames = layers,
                               .enabledExtensionCount = n_exts,
                               .ppEnabledExtensionNames = exts};
    VkResult r = vkCreateInstance(&ci, NULL, &inst->instance);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
        return zdiag_set(
            d, ZE_UNSUPPORTED,
            "no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER): install a GPU "
            "driver, or Mesa's llvmpipe from mesa-vulkan-drivers");
    if (r != VK_SUCCESS) {
        inst->instance = VK_NULL_HANDLE;
        return zvk_fail(NULL, r, d, "vkCreateInstance", "creating the Vulkan instance");
    }
    if (debug_utils) {
        PFN_vkCreateDebugUtilsMessengerEXT mk = (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
            inst->instance, "vkCreateDebugUtilsMessengerEXT");
        if (mk && mk(inst->instance, &mi, NULL, &inst->messenger) != VK_SUCCESS)
            inst->messenger = VK_NULL_HANDLE;
    }
    keep_drivers_mapped();
    zstatus s = list_devices(inst, d);
    if (s != ZOK) zvk_instance_destroy(inst);
    return s;
}

void zvk_instance_destroy(zvk_instance *inst) {
    if (!inst || !inst->instance) return;
    if (inst->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT rm = (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
            inst->instance, "vkDestroyDebugUtilsMessengerEXT");
        if (rm) rm(inst->instance, inst->messenger, NULL);
    }
    vkDestroyInstance(inst->instance, NULL);
    inst->instance = VK_NULL_HANDLE;
    inst->messenger = VK_NULL_HANDLE;
    inst->n_devices = 0;
}

/* Lower is preferred: what a user with one real GPU expects to get. */
static int type_rank(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
    }
}

uint32_t zvk_default_device(const VkPhysicalDeviceType *types, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (type_rank(types[i]) < type_rank(types[best])) best = i;
    return best;
}

zstatus zvk_select_device(const zvk_instance *inst, const char *request, uint32_t *index, zdiag *d) {
    const char *v = request, *from = "--device", *sep = " ";
    if (!v) {
        v = getenv("ZINC_DEVICE");
        from = "ZINC_DEVICE";
        sep = "=";
        if (v && !*v) v = NULL;
    }
    uint32_t n = inst->n_devices;
    if (!v) {
        VkPhysicalDeviceType types[ZVK_MAX_DEVICES];
        for (uint32_t i = 0; i < n; i++) {
            VkPhysicalDeviceProperties p;
            vkGetPhysicalDeviceProperties(inst->devices[i], &p);
            types[i] = p.deviceType;
        }
        *index = zvk_default_device(types, n);
        return ZOK;
    }
    char *end = NULL;
    unsigned long k = strtoul(v, &end, 10);
    if (!*v || *end || v[0] == '-' || v[0] == '+' || v[0] == ' ')
        return zdiag_set(d, ZE_INVALID, "%s%s'%s': expected a device index from 0 to %u (see 'zinc devices')",
                         from, sep, v, n - 1);
    if (k >= n)
        return zdiag_set(
            d, ZE_INVALID,
            "%s%s%s: no such device; this machine has %u Vulkan device%s, 0 to %u (see 'zinc devices')", from,
            sep, v, n, n == 1 ? "" : "s", n - 1);
    *index = (uint32_t)k;
    return ZOK;
}

const char *zvk_result_name(VkResult r) {
    switch (r) {
#define R(x)                                                                                                 \
    case x: return #x;
        R(VK_SUCCESS)
        R(VK_NOT_READY)
        R(VK_TIMEOUT)
        R(VK_EVENT_SET)
        R(VK_EVENT_RESET)
        R(VK_INCOMPLETE)
        R(VK_ERROR_OUT_OF_HOST_MEMORY)
        R(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        R(VK_ERROR_INITIALIZATION_FAILED)
        R(VK_ERROR_DEVICE_LOST)
        R(VK_ERROR_MEMORY_MAP_FAILED)
        R(VK_ERROR_LAYER_NOT_PRESENT)
        R(VK_ERROR_EXTENSION_NOT_PRESENT)
        R(VK_ERROR_FEATURE_NOT_PRESENT)
        R(VK_ERROR_INCOMPATIBLE_DRIVER)
        R(VK_ERROR_TOO_MANY_OBJECTS)
        R(VK_ERROR_FORMAT_NOT_SUPPORTED)
        R(VK_ERROR_FRAGMENTED_POOL)
        R(VK_ERROR_UNKNOWN)
        R(VK_ERROR_OUT_OF_POOL_MEMORY)
        R(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        R(VK_ERROR_FRAGMENTATION)
        R(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
        R(VK_PIPELINE_COMPILE_REQUIRED)
        R(VK_ERROR_INVALID_SHADER_NV)
        R(VK_ERROR_NOT_PERMITTED_KHR)
        R(VK_THREAD_IDLE_KHR)
        R(VK_THREAD_DONE_KHR)
        R(VK_OPERATION_DEFERRED_KHR)
        R(VK_OPERATION_NOT_DEFERRED_KHR)
#undef R
    default: break;
    }
    static _Thread_local char buf[32];
    snprintf(buf, sizeof buf, "VkResult(%d)", (int)r);
    return buf;
}

zstatus zvk_fail(zvk_device *dev, VkResult r, zdiag *d, const char *call, const char *what) {
    if (r == VK_ERROR_DEVICE_LOST) {
        if (dev) dev->lost = true;
        return zdiag_set(d, ZE_VK,
                         "%s failed: VK_ERROR_DEVICE_LOST (%s): the GPU reset or the driver crashed; work in "
                         "flight is lost and the device must be recreated",
                         call, what);
    }
    zstatus s = r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? ZE_NOMEM : ZE_VK;
    return zdiag_set(d, s, "%s failed: %s (%s)", call, zvk_result_name(r), what);
}
