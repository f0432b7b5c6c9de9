/* zincc: the compiler driver. Reads a GGUF, builds the tensor IR and (as the
 * compiler grows) runs the passes and writes a plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../frontend/arch.h"
#include "cli.h"

static const char *const usage =
    "usage: zincc MODEL.gguf [--dump-ir]\n"
    "\n"
    "zincc compiles a GGUF model into a plan for one Vulkan device.\n"
    "\n"
    "  --dump-ir    print the tensor IR of the model (one line per value and node) and stop\n"
    "  --help       this text\n"
    "\n"
    "Supported architectures: qwen3, qwen2, llama. Weights: f32, f16, bf16, q8_0, q4_K, q5_K, q6_K.\n";

int main(int argc, char **argv) {
    const char *model = NULL;
    bool dump_ir = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--dump-ir")) {
            dump_ir = true;
        } else if (argv[i][0] == '-' || model) {
            return cli_usage_error("zincc", "unexpected argument '%s'", argv[i]);
        } else {
            model = argv[i];
        }
    }
    if (!model) return cli_usage_error("zincc", "no model given");
    zdiag d = {0};
    gguf_file *f = NULL;
    zir_graph *g = NULL;
    zstatus s = gguf_open(model, &f, &d);
    if (!s) s = zir_build_from_gguf(f, &g, &d);
    if (!s && dump_ir)
        zir_print(g, stdout);
    else if (!s)
        fprintf(stderr, "zincc: %s: %u values, %u nodes (plan output arrives with the backend)\n", model,
                g->n_values, g->n_nodes);
    zir_graph_free(g);
    gguf_close(f);
    return s ? cli_fail("zincc", &d) : 0;
}
