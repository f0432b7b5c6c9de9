/* zinc info: what a plan file holds, after the reader has checked every
 * byte of it: the GGUF it was compiled from, the model, the target, the
 * buffers, the kernels and the two schedules. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../backend/plan.h"
#include "cli.h"

static const char *prog = "zinc info";

static void usage(FILE *to) {
    fprintf(to,
            "usage: zinc info PLAN [--verbose]\n\n"
            "Reads and validates a plan compiled by zincc and prints it: format version, the GGUF it was\n"
            "compiled from (size and identity hash), the model, the target and the device features it\n"
            "requires, every buffer (kind, size in MiB, totals for weights, activations and KV caches),\n"
            "every kernel (SPIR-V size) and both schedules (dispatches, barriers, kernels per phase).\n"
            "A plan that fails validation is reported in one line, with the byte offset of the fault.\n\n"
            "options:\n"
            "  -v, --verbose  also list every dispatch: kernel, IR node, bindings, and workgroup counts\n"
            "                 at T=1 and at the phase's max_tokens\n"
            "  -h, --help     this text\n\n"
            "The format is described in docs/plan-format.md.\n");
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v")) {
            verbose = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error(prog, "unknown option '%s'", argv[i]);
        } else if (path) {
            return cli_usage_error(prog, "one plan at a time: found '%s' after '%s'", argv[i], path);
        } else {
            path = argv[i];
        }
    }
    if (!path) return cli_usage_error(prog, "expected a plan file");
    zplan *p;
    zdiag d = {0};
    if (zplan_read(path, &p, &d)) return cli_fail(prog, &d);
    struct stat sb;
    if (stat(path, &sb) == 0) printf("file:      %s (%" PRIu64 " bytes)\n", path, (uint64_t)sb.st_size);
    zplan_print(p, stdout, verbose);
    zplan_free(p);
    return 0;
}
