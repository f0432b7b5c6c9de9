/* shrink_plan: writes a copy of a plan whose kernels keep only the five
 * header words of their SPIR-V, for the plan fuzzer's seed corpus.
 *
 *   shrink_plan IN.zplan OUT.zplan
 *
 * SPIR-V is most of a plan's bytes and the loader checks only its header, so
 * a full plan (hundreds of KB) spends the fuzzer's time hashing shader
 * words. The shrunk plan is still one zplan_validate accepts, so mutations
 * start from the loader's deep paths. Not a runnable plan. */
#include <stdio.h>
#include <string.h>

#include "../backend/plan.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: shrink_plan IN.zplan OUT.zplan\n");
        return 2;
    }
    zplan *p;
    zdiag d = {0};
    zstatus s = zplan_read(argv[1], &p, &d);
    if (s) {
        fprintf(stderr, "shrink_plan: error: %s\n", d.msg);
        return 1;
    }
    enum { KEEP = 5 };
    uint32_t *words = zarena_array(p->arena, (size_t)p->n_kernels * KEEP + 1, sizeof *words);
    if (!words) {
        zplan_free(p);
        fprintf(stderr, "shrink_plan: error: out of memory\n");
        return 1;
    }
    for (uint32_t i = 0; i < p->n_kernels; i++) {
        memcpy(words + (size_t)i * KEEP, p->spirv + p->kernels[i].code, KEEP * sizeof *words);
        p->kernels[i].code = i * KEEP;
        p->kernels[i].n_words = KEEP;
    }
    p->spirv = words;
    p->n_spirv_words = p->n_kernels * KEEP;
    s = zplan_write(p, argv[2], &d);
    zplan_free(p);
    if (s) fprintf(stderr, "shrink_plan: error: %s\n", d.msg);
    return s ? 1 : 0;
}
