/* The command-line programs end to end, as a user runs them: zincc -o, zinc
 * info, zinc run (logits against zinc ref, text generation), zinc chat in a
 * pseudo-terminal (with Ctrl-C), and the one-line errors for wrong input. */
#include <criterion/criterion.h>
#include <math.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define ZINC  ZINC_BINARY_DIR "/zinc"
#define ZINCC ZINC_BINARY_DIR "/zincc"

static const char *model(const char *arch, const char *quant, uint64_t seed, const char *name) {
    const char *path = tu_tmp(name);
    char *out = NULL;
    int rc = tu_run(
        &out,
        ZINC " mkmodel --arch %s --layers 2 --hidden 256 --ff 512 --heads 4 --kv-heads 2 --head-dim 64 "
             "--vocab 400 --quant %s --seed %llu -o %s",
        arch, quant, (unsigned long long)seed, path);
    cr_assert_eq(rc, 0, "mkmodel failed: %s", out);
    free(out);
    return path;
}

static const char *plan_for(const char *gguf, const char *name) {
    const char *plan = tu_tmp(name);
    char *out = NULL;
    int rc = tu_run(&out, ZINCC " %s -o %s --ctx 96 --chunk 8", gguf, plan);
    cr_assert_eq(rc, 0, "zincc failed: %s", out);
    cr_assert(strstr(out, "wrote"), "%s", out);
    free(out);
    return plan;
}

static float *read_f32(const char *path, size_t *n) {
    size_t bytes;
    float *v = tu_read_file(path, &bytes);
    cr_assert_not_null(v, "cannot read %s", path);
    *n = bytes / 4;
    return v;
}

/* zinc run --tokens against zinc ref: every logit within 1e-3 of the RMS
 * (fp32 both sides; see test_kernels_e2e for the bound). */
static void logits_match(const char *arch, const char *quant) {
    char name[64];
    snprintf(name, sizeof name, "%s-%s.gguf", arch, quant);
    const char *gguf = model(arch, quant, 4, name);
    snprintf(name, sizeof name, "%s-%s.zplan", arch, quant);
    const char *plan = plan_for(gguf, name);
    const char *toks = "5,17,99,3,250,42,7,8,300,11,12,13,14,15,16,399,0,1,2,3";
    const char *ref = tu_tmp("ref.f32"), *pre = tu_tmp("pre.f32"), *dec = tu_tmp("dec.f32");
    char *out = NULL;
    cr_assert_eq(tu_run(&out, ZINC " ref %s --tokens %s --logits-out %s", gguf, toks, ref), 0, "%s", out);
    free(out);
    cr_assert_eq(tu_run(&out, ZINC " run %s --tokens %s --logits-out %s", plan, toks, pre), 0, "%s", out);
    free(out);
    cr_assert_eq(tu_run(&out, ZINC " run %s --tokens %s --logits-out %s --mode decode", plan, toks, dec), 0,
                 "%s", out);
    free(out);
    size_t n, n1, n2;
    float *r = read_f32(ref, &n), *p = read_f32(pre, &n1), *q = read_f32(dec, &n2);
    cr_assert(n == n1 && n == n2 && n == 20 * 400, "sizes %zu %zu %zu", n, n1, n2);
    double ss = 0, e1 = 0, e2 = 0;
    for (size_t i = 0; i < n; i++)
        ss += (double)r[i] * r[i];
    double rms = sqrt(ss / n);
    for (size_t i = 0; i < n; i++) {
        e1 = fmax(e1, fabs(p[i] - r[i]) / rms);
        e2 = fmax(e2, fabs(q[i] - r[i]) / rms);
    }
    cr_expect(e1 < 1e-3 && e2 < 1e-3, "%s %s: prefill error %.3g, decode error %.3g of RMS", arch, quant, e1,
              e2);
    cr_log_info("%s %s: prefill %.2g, decode %.2g of RMS", arch, quant, e1, e2);
    char *cmp = NULL; /* the same verdict from zinc compare */
    cr_expect_eq(tu_run(&cmp, ZINC " compare %s %s --vocab 400", dec, ref), 0, "%s", cmp);
    cr_expect(strstr(cmp, "match: 20 rows") && strstr(cmp, "top-1 20/20"), "%s", cmp);
    free(cmp);
    free(r), free(p), free(q);
}

Test(cli, run_matches_ref_qwen3) {
    logits_match("qwen3", "q4_k_m");
}
Test(cli, run_matches_ref_llama) {
    logits_match("llama", "q8_0");
}
Test(cli, run_matches_ref_qwen2) {
    logits_match("qwen2", "q4_k_m");
}

/* Generated text may hold any byte (a NUL too): compare the files whole.
 * tu_run appends 2>&1, so each command is grouped to keep its own redirections. */
Test(cli, generation_is_deterministic) {
    const char *plan = plan_for(model("qwen3", "q4_k_m", 2, "gen.gguf"), "gen.zplan");
    const char *fa = tu_tmp("gen-a.txt"), *fb = tu_tmp("gen-b.txt");
    char *c = NULL;
    cr_assert_eq(
        tu_run(NULL, "{ " ZINC " run %s -p 'Hello there' -n 12 --temp 0 > %s 2>/dev/null; }", plan, fa), 0);
    cr_assert_eq(
        tu_run(NULL, "{ " ZINC " run %s -p 'Hello there' -n 12 --temp 0 > %s 2>/dev/null; }", plan, fb), 0);
    cr_assert_eq(
        tu_run(&c, "{ " ZINC " run %s -p 'Hello there' -n 12 --temp 0.8 --seed 7 >/dev/null; }", plan), 0,
        "%s", c);
    size_t na, nb;
    char *a = tu_read_file(fa, &na), *b = tu_read_file(fb, &nb);
    cr_assert(a && b);
    cr_expect(na > 0, "nothing generated");
    cr_expect(na == nb && !memcmp(a, b, na), "greedy generation differs between runs");
    cr_expect(strstr(c, "generation 12 tokens") || strstr(c, "stopped: end of text"), "%s", c);
    cr_expect(strstr(c, "tok/s"), "no closing line: %s", c);
    free(a), free(b), free(c);
}

Test(cli, bad_input_gets_one_clear_line) {
    const char *g1 = model("qwen3", "f32", 1, "a.gguf"), *g2 = model("qwen3", "f32", 2, "b.gguf");
    const char *plan = plan_for(g1, "a.zplan");
    char *out = NULL;
    cr_expect_neq(tu_run(&out, ZINC " run %s --gguf %s --tokens 1,2", plan, g2), 0);
    cr_expect(strstr(out, "not the GGUF this plan was compiled from"), "%s", out);
    free(out);
    cr_expect_neq(tu_run(&out, ZINC " run %s --tokens 1,400", plan), 0);
    cr_expect(strstr(out, "token 400"), "%s", out);
    free(out);
    cr_expect_neq(tu_run(&out, ZINC " run %s --tokens 1", g1), 0); /* a GGUF is not a plan */
    cr_expect(strstr(out, "zinc run: error:") && !strchr(strchr(out, '\n') + 1, '\n'), "not one line: %s",
              out);
    free(out);
    cr_expect_neq(tu_run(&out, ZINCC " %s -o /nonexistent/dir/x.zplan", g1), 0);
    cr_expect(strstr(out, "/nonexistent/dir/x.zplan"), "%s", out);
    free(out);
}

/* ---- zinc chat in a pseudo-terminal ------------------------------------ */

typedef struct term {
    int fd;
    pid_t pid;
    char buf[65536];
    size_t len;
} term;

static void term_start(term *t, const char *plan) {
    t->len = 0;
    t->pid = forkpty(&t->fd, NULL, NULL, NULL);
    cr_assert(t->pid >= 0, "forkpty failed");
    if (t->pid == 0) {
        execl(ZINC, "zinc", "chat", plan, "-n", "-1", "--temp", "0", (char *)NULL);
        _exit(127);
    }
}

/* Reads until needle appears after `from` (or 60 s pass). */
static bool term_wait(term *t, size_t from, const char *needle) {
    for (int waited = 0; waited < 600; waited++) {
        t->buf[t->len] = 0;
        if (strstr(t->buf + from, needle)) return true;
        struct pollfd p = {t->fd, POLLIN, 0};
        if (poll(&p, 1, 100) > 0) {
            ssize_t n = read(t->fd, t->buf + t->len, sizeof t->buf - 1 - t->len);
            if (n <= 0) return false;
            t->len += (size_t)n;
        }
    }
    return false;
}

static void term_send(term *t, const char *s) {
    cr_assert_eq(write(t->fd, s, strlen(s)), (ssize_t)strlen(s));
}

Test(cli, chat_in_a_terminal_with_ctrl_c) {
    const char *plan = plan_for(model("qwen3", "q4_k_m", 3, "chat.gguf"), "chat.zplan");
    term t;
    term_start(&t, plan);
    cr_assert(term_wait(&t, 0, "> "), "no prompt: %s", t.buf);
    size_t mark = t.len;
    term_send(&t, "Hello\r");
    /* -n -1 generates until the context is full; Ctrl-C must stop it. */
    usleep(300000);
    term_send(&t, "\x03");
    cr_assert(term_wait(&t, mark, "stopped:"), "no stats line: %s", t.buf + mark);
    cr_expect(strstr(t.buf + mark, "stopped: interrupted") || strstr(t.buf + mark, "stopped: end of text") ||
                  strstr(t.buf + mark, "stopped: context full"),
              "%s", t.buf + mark);
    cr_assert(term_wait(&t, mark, "> "), "no prompt after the reply: %s", t.buf + mark);
    mark = t.len;
    term_send(&t, "And again\r");
    usleep(300000);
    term_send(&t, "\x03");
    cr_assert(term_wait(&t, mark, "stopped:"), "second turn: %s", t.buf + mark);
    cr_assert(term_wait(&t, mark, "> "), "no prompt after the second reply: %s", t.buf + mark);
    term_send(&t, "/exit\r");
    int st = 0;
    waitpid(t.pid, &st, 0);
    close(t.fd);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "zinc chat exit status %d: %s", st, t.buf);
}

/* zincc MODEL.gguf with no -o writes MODEL.zplan beside the GGUF (a view such
 * as --dump-ir writes nothing); --version answers. */
Test(cli, zincc_without_o_writes_beside_the_gguf) {
    const char *gguf = model("qwen3", "f32", 5, "beside.gguf");
    const char *plan = tu_tmp("beside.zplan");
    char *out = NULL;
    cr_assert_eq(tu_run(&out, ZINCC " %s --dump-ir >/dev/null", gguf), 0, "%s", out);
    cr_expect_neq(access(plan, F_OK), 0, "--dump-ir wrote a plan");
    free(out);
    cr_assert_eq(tu_run(&out, ZINCC " %s --ctx 32 --chunk 8", gguf), 0, "%s", out);
    cr_expect(strstr(out, "wrote") && strstr(out, "beside.zplan"), "%s", out);
    free(out);
    cr_assert_eq(tu_run(&out, ZINC " info %s", plan), 0, "no usable plan beside the GGUF: %s", out);
    free(out);
    cr_assert_eq(tu_run(&out, ZINCC " --version"), 0, "%s", out);
    cr_expect(!strncmp(out, "zincc 0.", 8) && strstr(out, "plan format"), "%s", out);
    free(out);
}
