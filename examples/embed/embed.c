/* embed: the executor as a library. A program links zinc_vk and includes
 * runtime/zrt.h (plus the tokenizer and sampler headers) to run a plan that
 * zincc compiled: this one completes a prompt greedily and prints the text
 * as it comes, using only the public zrt_* / zrt_tok_* / zrt_sample_* API.
 *
 *     embed MODEL.zplan "prompt text" [n_tokens]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sampler.h"
#include "runtime/tokenizer.h"
#include "runtime/zrt.h"

static int fail(const zdiag *d) {
    fprintf(stderr, "embed: error: %s\n", d->msg);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: embed MODEL.zplan \"prompt\" [n_tokens]\n");
        return 2;
    }
    int n_gen = argc > 3 ? atoi(argv[3]) : 16;
    zdiag d = {0};
    zrt *r = NULL;
    zrt_tok *tok = NULL;
    zarena *a = zarena_new();
    zrt_opts ro = {0}; /* the GGUF recorded in the plan, the default device */
    if (zrt_open(argv[1], &ro, &r, &d) || zrt_tok_load(zrt_gguf(r), &tok, &d)) {
        zrt_close(r);
        zarena_free(a);
        return fail(&d);
    }
    int32_t *ids;
    size_t n;
    zrt_sample_params sp;
    zrt_sample_defaults(&sp);
    sp.temp = 0; /* greedy: the run is reproducible */
    zrt_sampler *smp;
    zstatus s = zrt_tok_encode(tok, argv[2], strlen(argv[2]), ZRT_TOK_ADD_SPECIAL, a, &ids, &n, &d);
    if (!s) s = zrt_sample_new(&sp, zrt_plan(r)->n_vocab, zrt_plan(r)->ctx, a, &smp, &d);
    if (!s) s = zrt_eval(r, ids, (int)n, NULL, &d); /* prefill the prompt */
    zrt_sample_cand top[ZPLAN_TOPK_CAP];
    zrt_tok_stream *ts = zrt_tok_stream_new(tok, 0, a);
    for (int i = 0; i < n_gen && !s; i++) {
        size_t nt, len;
        if ((s = zrt_top(r, top, &nt, &d))) break; /* the GPU's top candidates */
        int32_t id = zrt_sample_top(smp, top, nt);
        if (zrt_tok_is_eog(tok, id)) break;
        const char *text = zrt_tok_stream_push(ts, id, &len);
        fwrite(text, 1, len, stdout);
        fflush(stdout);
        s = zrt_eval(r, &id, 1, NULL, &d); /* the recorded decode step */
    }
    size_t len;
    const char *rest = zrt_tok_stream_flush(ts, &len); /* bytes of an unfinished character */
    fwrite(rest, 1, len, stdout);
    zrt_tok_free(tok);
    zrt_close(r);
    zarena_free(a);
    return s ? fail(&d) : 0;
}
