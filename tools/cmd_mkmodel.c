/* zinc mkmodel: writes a random-weight test model (see frontend/mkmodel.h). */
#include <stdio.h>
#include <string.h>

#include "../frontend/mkmodel.h"
#include "cli.h"

static void usage(FILE *to) {
    zmk_opts d;
    zmk_defaults(&d);
    fprintf(to,
            "usage: zinc mkmodel [options] -o MODEL.gguf\n\n"
            "Writes a random-weight model, laid out and labelled like a real llama.cpp GGUF of the\n"
            "architecture (tensor names, shapes, metadata, a byte-level BPE tokenizer, a chat template),\n"
            "so that zincc and llama.cpp both load it. The same options give the same bytes.\n\n"
            "options (default in brackets):\n"
            "  --arch NAME       qwen3, llama, qwen2, qwen3moe, qwen35 or qwen35moe [%s]\n"
            "  --layers N        transformer blocks [%u]\n"
            "  --hidden H        embedding width [%u]\n"
            "  --ff F            feed-forward (SwiGLU) width [%u]\n"
            "  --heads A         query heads [%u]\n"
            "  --kv-heads B      key/value heads; A must be a multiple of B [%u]\n"
            "  --head-dim D      width of one head, even; qwen2 needs A*D == H [%u]\n"
            "  --vocab V         exact vocabulary size, at least 256 bytes + the family's special\n"
            "                    tokens (259 for Qwen, 261 for Llama 3) [%u]\n"
            "  --quant Q         file type as llama-quantize means it: q4_k_m, q8_0, q4_0, q4_1, q5_0,\n"
            "                    q5_1, iq4_nl, iq4_xs, f16 or f32 [%s]\n"
            "                    (q4_k_m: Q6_K output and, on use_more_bits layers, attn_v and ffn_down;\n"
            "                    Q4_K elsewhere. The others put every matrix in that one type, like\n"
            "                    llama-quantize --pure. Norms and biases stay f32. Rows a type cannot\n"
            "                    hold fall back as llama-quantize does: q4_K to q5_0, q6_K to q8_0,\n"
            "                    iq4_xs to iq4_nl, and to f16 when 32 does not divide them)\n"
            "  --seed S          seed of the weights [%llu]\n"
            "  --ctx C           context_length written in the metadata [%u]\n"
            "  --experts E       qwen3moe: experts per layer (expert_count) [%u]\n"
            "  --experts-used U  qwen3moe: experts each token uses, at most E [%u]\n"
            "  --expert-ff X     qwen3moe: one expert's feed-forward width [%u]\n"
            "                    (q4_k_m: ffn_gate_inp stays f32, ffn_down_exps follows ffn_down;\n"
            "                    with exactly 8 experts attn_k and attn_v are q8_0, attn_output q5_K)\n"
            "  --full-attn-interval N  qwen35/qwen35moe: every N-th layer is gated full attention,\n"
            "                    the others gated delta-net [%u]\n"
            "  --ssm-conv K      delta-net causal conv taps (ssm.conv_kernel) [%u]\n"
            "  --ssm-state S     delta-net head dimension (ssm.state_size) [%u]\n"
            "  --ssm-groups G    delta-net key heads (ssm.group_count) [%u]\n"
            "  --ssm-heads V     delta-net value heads, a multiple of G (ssm.time_step_rank) [%u]\n"
            "  --rope-dim R      rotated dimensions of full attention [head-dim / 4]\n"
            "  --rope-sections A,B,C,D  rope.dimension_sections [the 11:11:10 split of R / 2]\n"
            "  --shared-ff X     qwen35moe: the shared expert's width [%u]\n"
            "                    (q4_k_m: attn_qkv follows attn_v, ssm_conv1d stays f32)\n"
            "  --tied            no output.weight: the output projection reuses token_embd [off]\n"
            "  -o, --output FILE where to write the model (required)\n"
            "  -h, --help        this text\n",
            zmk_arch_name(d.arch), d.layers, d.hidden, d.ff, d.heads, d.kv_heads, d.head_dim, d.vocab,
            zmk_quant_name(d.quant), (unsigned long long)d.seed, d.ctx, d.experts, d.experts_used,
            d.expert_ff, d.full_attn, d.ssm_conv, d.ssm_state, d.ssm_groups, d.ssm_heads, d.shared_ff);
}

/* "A,B,C,D": four non-negative integers. */
static bool parse_sections(const char *val, int32_t out[4]) {
    int n = 0, used = 0;
    int a, b, c, e;
    n = sscanf(val, "%d,%d,%d,%d%n", &a, &b, &c, &e, &used);
    if (n != 4 || val[used] || a < 0 || b < 0 || c < 0 || e < 0 || a + b + c == 0) return false;
    out[0] = a, out[1] = b, out[2] = c, out[3] = e;
    return true;
}

/* The numeric options, in one table so that parsing is one loop. */
typedef struct num_opt {
    const char *name;
    uint32_t *dst;
} num_opt;

static int parse_num(const char *prog, const char *name, const char *val, uint32_t *dst) {
    int64_t v;
    if (!cli_parse_i64(val, 1, UINT32_MAX, &v))
        return cli_usage_error(prog, "%s: expected a positive integer, found '%s'", name, val);
    *dst = (uint32_t)v;
    return 0;
}

static int parse_args(int argc, char **argv, zmk_opts *o, const char **out) {
    const char *prog = "zinc mkmodel";
    num_opt nums[] = {{"--layers", &o->layers},
                      {"--hidden", &o->hidden},
                      {"--ff", &o->ff},
                      {"--heads", &o->heads},
                      {"--kv-heads", &o->kv_heads},
                      {"--head-dim", &o->head_dim},
                      {"--vocab", &o->vocab},
                      {"--ctx", &o->ctx},
                      {"--experts", &o->experts},
                      {"--experts-used", &o->experts_used},
                      {"--expert-ff", &o->expert_ff},
                      {"--full-attn-interval", &o->full_attn},
                      {"--ssm-conv", &o->ssm_conv},
                      {"--ssm-state", &o->ssm_state},
                      {"--ssm-groups", &o->ssm_groups},
                      {"--ssm-heads", &o->ssm_heads},
                      {"--rope-dim", &o->rope_dim},
                      {"--shared-ff", &o->shared_ff}};
    for (int i = 1; i < argc; i++) {
        const char *val = NULL;
        bool missing = false, done = false;
        if (!strcmp(argv[i], "--tied")) {
            o->tied = true;
            continue;
        }
        for (size_t k = 0; k < sizeof nums / sizeof nums[0] && !done; k++) {
            if (!cli_opt(argc, argv, &i, nums[k].name, &val, &missing)) continue;
            if (missing) return cli_usage_error(prog, "%s needs a value", nums[k].name);
            if (parse_num(prog, nums[k].name, val, nums[k].dst)) return CLI_EXIT_USAGE;
            done = true;
        }
        if (done) continue;
        if (cli_opt(argc, argv, &i, "--arch", &val, &missing)) {
            if (missing || !zmk_parse_arch(val, &o->arch))
                return cli_usage_error(
                    prog, "--arch: expected qwen3, llama, qwen2, qwen3moe, qwen35 or qwen35moe, found '%s'",
                    val ? val : "");
        } else if (cli_opt(argc, argv, &i, "--rope-sections", &val, &missing)) {
            if (missing || !parse_sections(val, o->rope_sections))
                return cli_usage_error(
                    prog,
                    "--rope-sections: expected four non-negative integers A,B,C,D, the first "
                    "three not all 0, found '%s'",
                    val ? val : "");
        } else if (cli_opt(argc, argv, &i, "--quant", &val, &missing)) {
            if (missing || !zmk_parse_quant(val, &o->quant))
                return cli_usage_error(prog, "--quant: expected %s, found '%s'", zmk_quant_names,
                                       val ? val : "");
        } else if (cli_opt(argc, argv, &i, "--seed", &val, &missing)) {
            int64_t v;
            if (missing || !cli_parse_i64(val, 0, INT64_MAX, &v))
                return cli_usage_error(prog, "--seed: expected a non-negative integer, found '%s'",
                                       val ? val : "");
            o->seed = (uint64_t)v;
        } else if (cli_opt(argc, argv, &i, "-o", &val, &missing) ||
                   cli_opt(argc, argv, &i, "--output", &val, &missing)) {
            if (missing) return cli_usage_error(prog, "-o needs a file name");
            *out = val;
        } else {
            return cli_usage_error(prog, "unknown option '%s'", argv[i]);
        }
    }
    if (!*out) return cli_usage_error(prog, "no output file: give -o MODEL.gguf");
    return 0;
}

int cmd_mkmodel(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    zmk_opts o;
    zmk_defaults(&o);
    const char *out = NULL;
    int rc = parse_args(argc, argv, &o, &out);
    if (rc) return rc;
    zmk_report rep;
    zdiag d = {0};
    zstatus s = zmk_write(&o, out, &rep, &d);
    if (s) return cli_fail("zinc mkmodel", &d);
    for (uint32_t i = 0; i < rep.n_notes; i++)
        fprintf(stderr, "zinc mkmodel: note: %s\n", rep.notes[i]);
    fprintf(stderr,
            "zinc mkmodel: wrote %s: %s %s, %u tensors, %llu parameters, %u tokens (%u merges, %u pad)\n",
            out, zmk_arch_name(o.arch), zmk_quant_name(o.quant), rep.n_tensors,
            (unsigned long long)rep.n_params, o.vocab, rep.n_merges, rep.n_pad);
    return 0;
}
