/* The command-line programs end to end, as a user runs them: zincc -o, zinc
 * info, zinc run (logits against zinc ref, text generation), zinc chat in a
 * pseudo-terminal (with Ctrl-C), and the one-line errors for wrong input. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define ZINC  ZINC_BINARY_DIR "/zinc"
#define ZINCC ZINC_BINARY_DIR "/zincc"

static const char *model(const char *arch, const char *quant, uint64_t seed, const char *name) {
    const char *path = tu_tmp(name);
    char *out = NULL;
    const char *interval =
        strncmp(arch, "qwen35", 6) ? "" : " --full-attn-interval 2"; /* delta-net, attention */
    int rc = tu_run(
        &out,
        ZINC " mkmodel --arch %s --layers 2 --hidden 256 --ff 512 --heads 4 --kv-heads 2 --head-dim 64 "
             "--vocab 400 --quant %s --seed %llu -o %s%s",
        arch, quant, (unsigned long long)seed, path, interval);
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
/* qwen35 with the delta rule's prefill in chunks of 3 (ZINC_DELTA_CHUNK,
 * which zincc reads): the steps of 8 tokens are chunks of 3, 3 and 2, and
 * the plan runs the chunked scan in prefill and the token kernel in decode,
 * as zinc info lists them. */
Test(cli, run_matches_ref_qwen35_chunked) {
    setenv("ZINC_DELTA_CHUNK", "3", 1);
    const char *plan = plan_for(model("qwen35", "f32", 4, "q35c.gguf"), "q35c.zplan");
    char *out = NULL;
    cr_assert_eq(tu_run(&out, ZINC " info %s", plan), 0, "%s", out);
    const char *pre = strstr(out, "  prefill: "), *dec = strstr(out, "  decode: ");
    cr_assert(pre && dec && pre < dec, "%s", out);
    const char *chunked = strstr(pre, "delta_net_chunk_hk2_hv4_d32_c3_l4+qkv+l2 "),
               *token = strstr(dec, "delta_net_hk");
    cr_expect(chunked && chunked < dec, "prefill: the chunked scan, chunks of 3: %s", pre);
    cr_expect(token && !strstr(dec, "delta_net_chunk"), "decode: the token kernel: %s", dec);
    free(out);
    logits_match("qwen35", "f32");
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
    free(c), c = NULL;
    /* --ignore-eos: a seed whose reply ends on an end-of-generation token
     * runs to -n with the flag */
    int seed = 0;
    for (int k = 1; k <= 24 && !seed; k++) {
        free(c), c = NULL;
        cr_assert_eq(tu_run(&c, "{ " ZINC " run %s -p 'Hello there' -n 40 --temp 1.5 --top-k 0 --seed %d >/dev/null; }",
                            plan, k),
                     0, "%s", c);
        if (strstr(c, "stopped: end of text")) seed = k;
    }
    cr_assert(seed, "no seed of 24 ended its reply within 40 tokens: pick another test");
    free(c), c = NULL;
    cr_assert_eq(
        tu_run(&c, "{ " ZINC " run %s -p 'Hello there' -n 40 --temp 1.5 --top-k 0 --seed %d --ignore-eos >/dev/null; }",
               plan, seed),
        0, "%s", c);
    cr_expect(strstr(c, "generation 40 tokens") && strstr(c, "stopped: token limit"), "seed %d: %s", seed, c);
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
    cr_expect_neq(tu_run(&out, ZINC " run %s --tokens 1", ZINC_SOURCE_DIR "/README.md"), 0);
    cr_expect(strstr(out, "zinc run: error:") && strstr(out, "neither a plan nor a GGUF") &&
                  !strchr(strchr(out, '\n') + 1, '\n'),
              "not one line: %s", out);
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

/* The terminal tests run one at a time, whatever --jobs says: under load,
 * two of them side by side once left libedit waiting for a key that never
 * came (the test then waited for ever). The lock goes with the process. */
static void term_lock(void) {
    static int fd = -1;
    if (fd >= 0) return;
    fd = open("/tmp/zinc-test-terminal.lock", O_RDWR | O_CREAT, 0600);
    cr_assert(fd >= 0 && flock(fd, LOCK_EX) == 0, "cannot lock /tmp/zinc-test-terminal.lock");
}

/* Starts zinc with argv (argv[0] "zinc") in a pseudo-terminal. */
static void term_exec(term *t, char *const argv[]) {
    term_lock();
    t->len = 0;
    t->pid = forkpty(&t->fd, NULL, NULL, NULL);
    cr_assert(t->pid >= 0, "forkpty failed");
    if (t->pid == 0) {
        execv(ZINC, argv);
        _exit(127);
    }
}

/* n more bytes have been read into the buffer. A model with random weights
 * can print a NUL byte, which would end the C string the waits search:
 * it is shown as '?'. */
static void term_took(term *t, size_t n) {
    for (size_t i = t->len; i < t->len + n; i++)
        if (!t->buf[i]) t->buf[i] = '?';
    t->len += n;
}

/* The child's exit status, waiting at most 60 s; a child still running
 * then is killed and the test fails with what the terminal showed. `again`
 * (or NULL) is typed again every second: a key that arrives while readline
 * switches the terminal between cooked and raw mode can be lost (a Ctrl-D
 * there is the cooked line discipline's end of file, which the switch
 * drops), and a person would press it again. */
static int term_exit(term *t, const char *again) {
    int st = 0;
    for (int ms = 0; ms < 60000; ms += 20) {
        if (waitpid(t->pid, &st, WNOHANG) == t->pid) return st;
        if (again && ms && ms % 1000 == 0 && write(t->fd, again, strlen(again)) < 0) {
            /* the child may be gone already: the next waitpid says so */
        }
        struct pollfd p = {t->fd, POLLIN, 0};
        ssize_t n = 0;
        if (poll(&p, 1, 0) > 0 && t->len < sizeof t->buf - 1)
            n = read(t->fd, t->buf + t->len, sizeof t->buf - 1 - t->len);
        if (n > 0)
            term_took(t, (size_t)n);
        else
            usleep(20000); /* nothing to read (or the slave side is closed): wait */
    }
    kill(t->pid, SIGKILL);
    waitpid(t->pid, &st, 0);
    t->buf[t->len] = 0;
    cr_assert_fail("zinc did not exit within 60 s; the terminal showed: %s", t->buf);
    return st;
}

/* Whether the child still runs, or how it ended (reaps it if it has), for
 * a failure message: once in ~40 runs CI saw zinc chat's terminal close
 * right after "Ctrl-C discarded the line" (docs/chat-ctrl-c.md). */
static const char *child_state(pid_t pid, char *buf, size_t n) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == 0)
        snprintf(buf, n, "still runs");
    else if (r != pid)
        snprintf(buf, n, "cannot be waited for");
    else if (WIFSIGNALED(st))
        snprintf(buf, n, "killed by signal %d", WTERMSIG(st));
    else
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(st));
    return buf;
}

static void term_start(term *t, const char *plan) {
    char *const argv[] = {"zinc", "chat", (char *)plan, "-n", "-1", "--temp", "0", NULL};
    term_exec(t, argv);
}

/* Reads what the terminal shows within 100 ms; false once it is closed. */
static bool term_read(term *t) {
    struct pollfd p = {t->fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) return true;
    ssize_t n = read(t->fd, t->buf + t->len, sizeof t->buf - 1 - t->len);
    if (n <= 0) return false;
    term_took(t, (size_t)n);
    return true;
}

/* Reads until a or b appears after `from` (or 60 s pass): the first of them,
 * or NULL. */
static const char *term_wait_either(term *t, size_t from, const char *a, const char *b) {
    for (int waited = 0; waited < 600; waited++) {
        t->buf[t->len] = 0;
        const char *x = strstr(t->buf + from, a), *y = strstr(t->buf + from, b);
        if (x || y) return x && (!y || x < y) ? x : y;
        if (!term_read(t)) return NULL;
    }
    return NULL;
}

/* Reads until needle appears after `from` (or 60 s pass). */
static bool term_wait(term *t, size_t from, const char *needle) {
    return term_wait_either(t, from, needle, needle) != NULL;
}

/* Reads until needle appears after `from`, then until the prompt "> " comes
 * after it (not the echo of the line that was typed at the last one). */
static bool term_wait_prompt(term *t, size_t from, const char *needle) {
    if (!term_wait(t, from, needle)) return false;
    size_t at = (size_t)(strstr(t->buf + from, needle) - t->buf) + strlen(needle);
    return term_wait(t, at, "\n> ");
}

static void term_send(term *t, const char *s) {
    cr_assert_eq(write(t->fd, s, strlen(s)), (ssize_t)strlen(s));
}

/* Types line (with Enter), waits for its echo (readline has the line and
 * leaves raw mode), then 300 ms more: a Ctrl-C typed while readline still
 * switches the terminal mode can be dropped (CI under load lost one typed
 * 300 ms after Enter, and the reply ran on to the end of the context). */
static void term_send_line(term *t, size_t from, const char *line) {
    char typed[64];
    snprintf(typed, sizeof typed, "%s\r", line);
    term_send(t, typed);
    cr_assert(term_wait(t, from, line), "no echo of '%s': %s", line, t->buf + from);
    size_t at = (size_t)(strstr(t->buf + from, line) - t->buf) + strlen(line);
    cr_assert(term_wait(t, at, "\n"), "no end of the line '%s': %s", line, t->buf + from);
    usleep(300000);
}

#define DISCARDED "Ctrl-C discarded the line"

/* Types line, then Ctrl-C during its reply, until a reply is stopped (at
 * most 5 tries): a line typed just as the prompt appears is echoed by the
 * terminal before libedit takes it, and when a loaded machine has not read
 * it 300 ms later the Ctrl-C flushes it; zinc chat then discards the line
 * and prompts again, as it would for a person, who types it again. */
static void term_turn(term *t, const char *line) {
    for (int try = 0; try < 5; try++) {
        size_t mark = t->len;
        term_send_line(t, mark, line);
        term_send(t, "\x03");
        const char *end = term_wait_either(t, mark, "stopped:", DISCARDED);
        cr_assert(end, "'%s': no stats line: %s", line, t->buf + mark);
        size_t at = (size_t)(end - t->buf);
        cr_assert(term_wait(t, at, "\n> "), "no prompt after '%s': %s", line, t->buf + mark);
        if (!strncmp(end, "stopped:", 8)) {
            cr_expect(strstr(end, "stopped: interrupted") || strstr(end, "stopped: end of text") ||
                          strstr(end, "stopped: context full"),
                      "%s", end);
            return;
        }
    }
    cr_assert_fail("five Ctrl-C discarded '%s' instead of stopping its reply: %s", line, t->buf);
}

Test(cli, chat_in_a_terminal_with_ctrl_c) {
    const char *plan = plan_for(model("qwen3", "q4_k_m", 3, "chat.gguf"), "chat.zplan");
    term t;
    term_start(&t, plan);
    cr_assert(term_wait(&t, 0, "> "), "no prompt: %s", t.buf);
    /* -n -1 generates until the context is full; Ctrl-C must stop it. */
    term_turn(&t, "Hello");
    term_turn(&t, "And again");
    /* A turn's reply can end (context full) before its Ctrl-C is taken; that
     * Ctrl-C then lands at the next prompt, as late as after the first key
     * of "/exit" on a loaded machine (CI: "/" echoed, the line discarded,
     * "exit" sent as a message). A person types /exit again; so does this. */
    term_send(&t, "/exit\r");
    int st = term_exit(&t, "/exit\r");
    close(t.fd);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "zinc chat exit status %d: %s", st, t.buf);
}

/* Ctrl-C never closes the chat (docs/chat-ctrl-c.md). Each round types a
 * line and Ctrl-C at one of three moments around the start of a turn:
 *   0  zinc stopped (SIGSTOP) at the prompt, as a loaded machine that has
 *      printed the prompt and not read the line yet: the Ctrl-C flushes the
 *      typed line and lands at the prompt, where it used to quit (CI saw
 *      the ASan build close its terminal so);
 *   1  0-20 ms after Enter, while libedit hands the line over;
 *   2  just after the first byte of the reply.
 * Every round must end at a new prompt, zinc alive; 12 rounds, each bounded. */
Test(cli, chat_ctrl_c_never_closes_the_session) {
    const char *plan = plan_for(model("qwen3", "q4_k_m", 3, "loop.gguf"), "loop.zplan");
    term t;
    term_start(&t, plan);
    cr_assert(term_wait(&t, 0, "> "), "no prompt: %s", t.buf);
    tu_rng rng = tu_rng_seed(12);
    for (int round = 0; round < 12; round++) {
        size_t mark = t.len;
        if (round % 3 == 0) kill(t.pid, SIGSTOP);
        term_send(&t, "Hello\r");
        if (round % 3 == 0) {
            usleep(300000);
            term_send(&t, "\x03");
            kill(t.pid, SIGCONT);
        } else if (round % 3 == 1) {
            usleep((useconds_t)(tu_next(&rng) % 20000));
            term_send(&t, "\x03");
        } else {
            cr_assert(term_wait(&t, mark, "Hello\r\n"), "round %d: no echo: %s", round, t.buf + mark);
            size_t at = (size_t)(strstr(t.buf + mark, "Hello\r\n") - t.buf) + 7;
            for (int w = 0; w < 600 && t.len <= at && term_read(&t); w++) {
            }
            term_send(&t, "\x03");
        }
        const char *end = term_wait_either(&t, mark, "stopped:", DISCARDED);
        cr_assert(end, "round %d: zinc chat neither stopped a reply nor discarded the line: %s", round,
                  t.buf + mark);
        bool prompt = term_wait(&t, (size_t)(end - t.buf), "\n> ");
        char why[64];
        cr_assert(prompt, "round %d: no prompt (zinc chat %s): %s", round, child_state(t.pid, why, sizeof why),
                  t.buf + mark);
        cr_assert_eq(waitpid(t.pid, NULL, WNOHANG), 0, "round %d: zinc chat exited: %s", round, t.buf + mark);
    }
    term_send(&t, "/exit\r");
    int st = term_exit(&t, "/exit\r");
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

/* ---- a GGUF run directly, through the plan cache ------------------------ */

/* The environment of a command that uses its own plan cache: XDG_CACHE_HOME
 * moves Mesa's shader cache too, so that one is kept where it was (a cold
 * llvmpipe cache costs seconds per run). */
#define CACHE_ENV(dir)                                                                                       \
    "MESA_SHADER_CACHE_DIR=\"${MESA_SHADER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}}\" "                   \
    "XDG_CACHE_HOME=" dir " "

static bool same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
    bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x), free(y);
    return same;
}

/* The entry the first run reports: "cached the plan in PATH: ...". */
static char *cached_path(const char *out) {
    const char *at = strstr(out, "cached the plan in ");
    cr_assert(at, "no cache entry reported: %s", out);
    at += strlen("cached the plan in ");
    return strndup(at, strcspn(at, ":"));
}

Test(cli, gguf_runs_directly_through_the_plan_cache) {
    const char *gguf = model("qwen3", "q8_0", 6, "direct.gguf"), *cache = tu_tmp("cache");
    const char *l1 = tu_tmp("l1.f32"), *l2 = tu_tmp("l2.f32"), *l3 = tu_tmp("l3.f32");
    char *out = NULL;
    const char *run = "{ " CACHE_ENV("%s") ZINC " run %s --tokens 1,2,3,4 -c 48 --logits-out %s; }";
    cr_assert_eq(tu_run(&out, run, cache, gguf, l1), 0, "%s", out);
    cr_expect(strstr(out, "compiling"), "the first run says it compiles: %s", out);
    char *entry = cached_path(out);
    cr_expect(!strncmp(entry, cache, strlen(cache)), "the entry %s is not under %s", entry, cache);
    free(out);
    cr_assert_eq(tu_run(&out, run, cache, gguf, l2), 0, "%s", out);
    cr_expect(!strstr(out, "compiling") && !strstr(out, "cached"), "the second run compiled: %s", out);
    cr_expect(same_file(l1, l2), "the cached plan computes other logits");
    free(out);
    cr_assert_eq(tu_write_file(entry, "not a plan at all", 17), 0);
    cr_assert_eq(tu_run(&out, run, cache, gguf, l3), 0, "%s", out);
    cr_expect(strstr(out, "unusable") && strstr(out, "compiling"), "a corrupt entry was trusted: %s", out);
    cr_expect(same_file(l1, l3), "the rebuilt plan computes other logits");
    free(out);
    cr_assert_eq(tu_run(&out, ZINC " info %s", entry), 0, "the entry was not rebuilt: %s", out);
    free(out);
    /* A valid plan that is not the one the key names (another context) is stale. */
    cr_assert_eq(tu_run(&out, ZINCC " %s -o %s --ctx 32", gguf, entry), 0, "%s", out);
    free(out);
    cr_assert_eq(tu_run(&out, run, cache, gguf, l3), 0, "%s", out);
    cr_expect(strstr(out, "stale") && strstr(out, "compiling"), "a stale entry was trusted: %s", out);
    cr_expect(same_file(l1, l3), "the rebuilt plan computes other logits");
    free(out);
    free(entry);
}

Test(cli, no_cache_compiles_in_memory) {
    const char *gguf = model("qwen3", "f32", 7, "nocache.gguf"), *cache = tu_tmp("nocache");
    char *out = NULL;
    cr_assert_eq(
        tu_run(&out, "{ " CACHE_ENV("%s") ZINC " run %s --tokens 1,2 -c 16 --no-cache; }", cache, gguf), 0,
        "%s", out);
    cr_expect(strstr(out, "not kept"), "%s", out);
    cr_expect_neq(access(tu_tmp("nocache/zinc"), F_OK), 0, "--no-cache touched the cache");
    free(out);
}

/* A plan whose GGUF moved names it as the plan's recorded GGUF and suggests
 * --gguf, in every command that loads a plan; an I/O failure and a usage
 * error have distinct exit statuses (docs/security.md). */
Test(cli, moved_gguf_and_exit_statuses) {
    const char *gguf = model("qwen3", "f32", 8, "moving.gguf"), *moved = tu_tmp("moved.gguf");
    const char *plan = plan_for(gguf, "moving.zplan");
    cr_assert_eq(rename(gguf, moved), 0);
    char *out = NULL;
    const char *cmds[] = {"run %s --tokens 1,2", "bench %s -p 4 -n 2 -r 1", "tokenize %s hello"};
    for (int i = 0; i < 3; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, cmds[i], plan);
        cr_expect_eq(tu_run(&out, ZINC " %s", cmd), 2, "zinc %s: %s", cmd, out);
        cr_expect(strstr(out, "the GGUF this plan was compiled from") && strstr(out, "--gguf") &&
                      strstr(out, "No such file"),
                  "zinc %s: %s", cmd, out);
        free(out);
    }
    cr_expect_eq(tu_run(&out, ZINC " tokenize %s --gguf %s hello", plan, moved), 0, "%s", out);
    free(out);
    cr_expect_eq(tu_run(&out, ZINC " run %s --gguf %s --tokens 1,2", plan, moved), 0, "%s", out);
    free(out);
    cr_expect_eq(tu_run(&out, ZINC " run %s --tokens 1 --bogus", plan), 64, "%s", out);
    free(out);
    cr_expect_eq(tu_run(&out, ZINC " tokenize %s --file /nonexistent/t.txt", moved), 2, "%s", out);
    cr_expect(strstr(out, "cannot open /nonexistent/t.txt: No such file"), "%s", out);
    free(out);
    cr_expect_eq(tu_run(&out, ZINC " compare /nonexistent/a.f32 /nonexistent/b.f32 --vocab 4"), 2, "%s", out);
    cr_expect(strstr(out, "cannot open /nonexistent/a.f32: No such file"), "%s", out);
    free(out);
}

/* ---- flags that mean what they say --------------------------------------- */

/* The number after "key " in out, or -1. */
static long long number_after(const char *out, const char *key) {
    const char *at = out ? strstr(out, key) : NULL;
    return at ? strtoll(at + strlen(key), NULL, 10) : -1;
}

Test(cli, options_a_mode_ignores_are_errors) {
    static const struct {
        const char *args, *want;
    } cases[] = {
        {"-p hi --system x", "--system goes with --chat"},
        {"-p hi --logits-out x.f32", "--logits-out goes with --tokens"},
        {"--tokens 1,2 -n 4", "-n goes with -p"},
        {"--tokens 1,2 --temp 0", "--temp goes with -p"},
        {"-p hi --mode decode", "--mode goes with --tokens"},
        {"-p hi -ngl 99", "-ngl is llama.cpp's: every layer runs on the GPU"},
        {"-p hi -t 4", "-t is llama.cpp's"},
        {"-p hi -fa", "-fa is llama.cpp's"},
        {"-p hi --seed -2", "expected -1 (random) or 0..9223372036854775807"},
        {"-p hi -f x.txt", "give the prompt once"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL;
        int rc = tu_run(&out, ZINC " run model.gguf %s", cases[i].args);
        cr_expect_eq(rc, 64, "%s: exit %d: %s", cases[i].args, rc, out);
        cr_expect(strstr(out, cases[i].want) && !strchr(strchr(out, '\n') + 1, '\n'), "%s: %s", cases[i].args,
                  out);
        free(out);
    }
    char *help = NULL; /* the help states the ranges the errors name */
    cr_assert_eq(tu_run(&help, ZINC " run --help"), 0);
    cr_expect(strstr(help, "-1..16777216") && strstr(help, "0..9223372036854775807") && strstr(help, "-sys"),
              "%s", help);
    free(help);
}

/* --seed -1 (the default) draws a seed and prints it; giving it repeats the text. */
Test(cli, seed_printed_and_reproducible) {
    const char *plan = plan_for(model("qwen3", "q4_k_m", 9, "seed.gguf"), "seed.zplan");
    const char *fa = tu_tmp("seed-a.txt"), *fb = tu_tmp("seed-b.txt");
    char *out = NULL;
    const char *run = "{ " ZINC " run %s -p 'Once upon' -n 12 --temp 1.5 --top-k 0 --quiet %s > %s; }";
    cr_assert_eq(tu_run(&out, run, plan, "", fa), 0, "%s", out);
    long long seed = number_after(out, "seed ");
    cr_expect(seed >= 0 && !strstr(out, "tok/s"), "no seed printed, or stats despite --quiet: %s", out);
    free(out);
    char arg[64];
    snprintf(arg, sizeof arg, "--seed %lld", seed);
    cr_assert_eq(tu_run(&out, run, plan, arg, fb), 0, "%s", out);
    cr_expect(!strstr(out, "seed "), "a given seed is not printed: %s", out);
    free(out);
    cr_expect(same_file(fa, fb), "--seed %lld did not repeat the text", seed);
}

/* The prompt from a file, from standard input, as -p: the same tokens; a
 * --template whose markers the vocabulary lacks is warned about. */
Test(cli, prompt_sources_and_template_warning) {
    const char *plan = plan_for(model("qwen3", "f32", 10, "src.gguf"), "src.zplan");
    const char *file = tu_tmp("prompt.txt");
    cr_assert_eq(tu_write_file(file, "Tell me a story\n", 16), 0);
    char *a = NULL, *b = NULL, *c = NULL;
    const char *q = " -n 0 --temp 0";
    cr_assert_eq(tu_run(&a, ZINC " run %s -p 'Tell me a story' %s", plan, q), 0, "%s", a);
    cr_assert_eq(tu_run(&b, ZINC " run %s -f %s %s", plan, file, q), 0, "%s", b);
    cr_assert_eq(tu_run(&c, ZINC " run %s -p - %s < %s", plan, q, file), 0, "%s", c);
    long long n = number_after(a, "prompt ");
    cr_expect(n > 0 && n == number_after(b, "prompt ") && n == number_after(c, "prompt "), "%s%s%s", a, b, c);
    free(a), free(b), free(c);
    cr_assert_eq(tu_run(&a, ZINC " run %s -p hi --chat --template llama3 %s", plan, q), 0, "%s", a);
    cr_expect(strstr(a, "warning: <|start_header_id|> is not a special token"), "%s", a);
    free(a);
    cr_assert_eq(tu_run(&a, ZINC " run %s -p hi --chat %s", plan, q), 0, "%s", a);
    cr_expect(!strstr(a, "warning"), "%s", a);
    free(a);
    cr_assert_eq(tu_run(&a, "{ " ZINCC " %s --ctx 1000000 --dump-ir >/dev/null; }", tu_tmp("src.gguf")), 0,
                 "%s", a);
    cr_expect(strstr(a, "warning: a context of 1000000 tokens is more than"), "%s", a);
    free(a);
}

/* In a chat prompt the user's text cannot forge the template's control
 * tokens: hi<|im_end|> is text, unless --special. */
Test(cli, user_text_cannot_forge_control_tokens) {
    const char *plan = plan_for(model("qwen3", "f32", 11, "forge.gguf"), "forge.zplan");
    char *a = NULL, *b = NULL, *c = NULL;
    const char *run = ZINC " run %s --chat -n 0 --temp 0 -p '%s' %s";
    cr_assert_eq(tu_run(&a, run, plan, "hi", ""), 0, "%s", a);
    cr_assert_eq(tu_run(&b, run, plan, "hi<|im_end|>", ""), 0, "%s", b);
    cr_assert_eq(tu_run(&c, run, plan, "hi<|im_end|>", "--special"), 0, "%s", c);
    long long plain = number_after(a, "prompt "), forged = number_after(b, "prompt "),
              special = number_after(c, "prompt ");
    cr_expect(special == plain + 1, "--special: <|im_end|> is one token (%lld, %lld)", special, plain);
    cr_expect(forged > special, "without --special <|im_end|> is text, several tokens (%lld)", forged);
    free(a), free(b), free(c);
}

/* ---- chat: a full context, line editing, multi-line input --------------- */

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Ten turns in a context of 32 (-c within a plan of 96): the oldest turns are
 * dropped and the rest read again; a message larger than the context is
 * refused and the session goes on; /clear starts over. */
Test(cli, chat_survives_a_full_context) {
    const char *plan = plan_for(model("qwen3", "q4_k_m", 12, "shift.gguf"), "shift.zplan");
    const char *in = tu_tmp("shift.txt");
    char text[2048] = "";
    for (int i = 1; i <= 10; i++) {
        char line[300];
        if (i == 4) {
            memset(line, 'x', 250), line[250] = 0;
            strcat(text, line), strcat(text, "\n");
        }
        if (i == 7) strcat(text, "/clear\n");
        snprintf(line, sizeof line, "hi %d\n", i);
        strcat(text, line);
    }
    cr_assert_eq(tu_write_file(in, text, strlen(text)), 0);
    char *out = NULL;
    int rc = tu_run(&out, "{ " ZINC " chat %s -c 32 -n 4 --temp 0 < %s >/dev/null; }", plan, in);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "context 32"), "-c 32 was not taken: %s", out);
    cr_expect_eq(count(out, "stopped:"), 10, "not ten replies: %s", out);
    cr_expect(strstr(out, "dropped the oldest"), "no context shift: %s", out);
    cr_expect(strstr(out, "not sent") && strstr(out, "a new conversation"), "%s", out);
    free(out);
    cr_expect_eq(tu_run(&out, ZINC " chat %s -c 97 < /dev/null", plan), 5, "-c beyond the plan: %s", out);
    free(out);
}

/* libedit: Up recalls the last line (it does not reach the model as an
 * escape sequence); a trailing backslash continues the message on the next
 * line; /exit quits. */
Test(cli, chat_line_editing_and_history) {
    const char *plan = plan_for(model("qwen3", "q4_k_m", 13, "edit.gguf"), "edit.zplan");
    char *ref = NULL; /* the prompt of one chat turn "alpha\nbeta", as zinc run --chat sees it */
    cr_assert_eq(tu_run(&ref, ZINC " run %s --chat -n 0 --temp 0 -p \"$(printf 'alpha\\nbeta')\"", plan), 0,
                 "%s", ref);
    long long want = number_after(ref, "prompt ");
    free(ref);
    term t;
    char *const argv[] = {"zinc", "chat", (char *)plan, "-n", "2", "--temp", "0", NULL};
    term_exec(&t, argv);
    cr_assert(term_wait(&t, 0, "> "), "no prompt: %s", t.buf);
    size_t mark = t.len;
    term_send(&t, "/clear\r");
    cr_assert(term_wait_prompt(&t, mark, "a new conversation"), "%s", t.buf + mark);
    mark = t.len;
    term_send(&t, "\x1b[A\r"); /* Up, Enter: /clear again */
    cr_expect(term_wait_prompt(&t, mark, "a new conversation"), "Up did not recall /clear: %s", t.buf + mark);
    mark = t.len;
    term_send(&t, "alpha\\\r");
    cr_assert(term_wait(&t, mark, "\n. "), "no continuation prompt: %s", t.buf + mark);
    term_send(&t, "beta\r");
    cr_assert(term_wait_prompt(&t, mark, "stopped:"), "%s", t.buf + mark);
    cr_expect_eq(number_after(t.buf + mark, "prompt "), want, "the message was not alpha\\nbeta: %s",
                 t.buf + mark);
    /* /exit, typed again each second: under ASan in CI a key typed as the
     * prompt appeared was lost (small_things checks Ctrl-D at the prompt). */
    term_send(&t, "/exit\r");
    int st = term_exit(&t, "/exit\r");
    close(t.fd);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d: %s", st, t.buf);
}

/* ---- zinc bench in llama-bench's form ------------------------------------ */

/* A whole file as a NUL-terminated string. */
static char *read_text(const char *path) {
    size_t n;
    char *b = tu_read_file(path, &n), *t = b ? realloc(b, n + 1) : NULL;
    cr_assert(t, "cannot read %s", path);
    t[n] = 0;
    return t;
}

/* Value lists and depths make one row each, mean ± sd, every row of the
 * table as wide as the header; -o json and csv hold the same tests; with
 * --profile and -d the profile (per depth) goes to stderr beside JSON. */
Test(cli, bench_like_llama_bench) {
    const char *plan = plan_for(model("qwen3", "q4_k_m", 14, "bench.gguf"), "bench.zplan");
    char *md = NULL, *js = NULL, *csv = NULL, *err = NULL;
    cr_assert_eq(tu_run(&md, "{ " ZINC " bench %s -p 8,16 -n 4 -d 0,8 -r 2 2>/dev/null; }", plan), 0, "%s",
                 md);
    cr_expect(strstr(md, "| model") && strstr(md, "pp8 ") && strstr(md, "pp16 @ d8") &&
                  strstr(md, "tg4 @ d8"),
              "%s", md);
    cr_expect_eq(count(md, " ± "), 6, "%s", md);
    size_t width = strcspn(md, "\n");
    for (const char *line = md; *line; line += strcspn(line, "\n") + 1) {
        size_t w = strcspn(line, "\n"), pm = strstr(line, "±") && strstr(line, "±") < line + w ? 1 : 0;
        cr_expect_eq(w - pm, width, "a row not aligned with the header: %.*s", (int)w, line);
    }
    const char *js_out = tu_tmp("bench.json"), *js_err = tu_tmp("bench.err");
    cr_assert_eq(tu_run(NULL, "{ " ZINC " bench %s -p 8 -n 4 -d 8 -r 2 -o json --profile > %s 2> %s; }", plan,
                        js_out, js_err),
                 0);
    js = read_text(js_out), err = read_text(js_err);
    cr_expect(js[0] == '[' && strstr(js, "]\n") && !strstr(js, "step of"), "stdout is not one JSON array: %s",
              js);
    cr_expect(count(js, "\"avg_ts\"") == 2 && count(js, "\"n_depth\": 8") == 2 &&
                  strstr(js, "\"samples_ts\": ["),
              "%s", js);
    cr_expect(strstr(err, "at depth 8") && strstr(err, "decode step of 1 token"), "no profile on stderr: %s",
              err);
    /* the device's dispatch costs, once, and each kernel beside its floor */
    cr_expect(count(err, "dispatch costs (median of 5 runs of 256): ") == 1 && strstr(err, "behind a barrier") &&
                  strstr(err, "floor: a kernel's weights at ") && strstr(err, "floor us      x  model us      x"),
              "no dispatch costs or floor in the profile: %s", err);
    /* the cost model's price beside the measured time: decode priced, prefill not */
    const char *dec = strstr(err, "decode step of 1 token");
    cr_expect(dec && strstr(dec, "the cost model: ") &&
                  strstr(dec, " us for the step's weights, attention and dispatches"),
              "no cost model line in the decode profile: %s", err);
    /* decode attention has a price too (its K and V rows, its chain) */
    const char *att = dec ? strstr(dec, "attn_decode_") : NULL;
    while (att && att > dec && att[-1] != '\n')
        att--;
    double f[7] = {0};
    int got = att ? sscanf(att, " %lf%% %lf %lf %lf %lf %lf %lf", &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6])
                  : 0;
    cr_expect(got == 7 && f[6] > 0, "decode attention is not priced: %s", dec ? dec : err);
    const char *pre = strstr(err, "prefill step of"), *priced = strstr(err, "the cost model: ");
    cr_expect(pre && dec && pre < dec && priced > dec, "the prefill profile is not priced in time: %s", err);
    cr_assert_eq(tu_run(&csv, "{ " ZINC " bench %s -p 8 -n 4 -r 1 -o csv 2>/dev/null; }", plan), 0, "%s",
                 csv);
    cr_expect(!strncmp(csv, "model,size,params,backend,device,test", 37) && count(csv, "\n") == 3, "%s", csv);
    free(md), free(js), free(csv), free(err);
    const char *bad[][2] = {
        {"-o xml", "md, json or csv"}, {"-p 8,x", "like 128,512"}, {"-p 64 -d 64", "smaller"}};
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(tu_run(&err, ZINC " bench %s %s", plan, bad[i][0]), i < 2 ? 64 : 5, "%s: %s", bad[i][0],
                     err);
        cr_expect(strstr(err, bad[i][1]), "%s: %s", bad[i][0], err);
        free(err);
    }
}

/* ---- mixture of experts ------------------------------------------------------ */

/* zincc --report says how the experts run in each phase and why, with the
 * bytes: prefill's grouped GEMMs against the GEMVs, decode's GEMVs, and
 * ZINC_MOE_GROUPED=0 keeping the GEMVs in prefill. */
Test(cli, moe_report) {
    const char *gguf = model("qwen3moe", "q4_k_m", 11, "moe.gguf");
    char *out = NULL;
    cr_expect_eq(tu_run(&out, ZINCC " %s --report --target h200 2>&1", gguf), 0, "%s", out);
    cr_expect(
        strstr(out, "(grouped GEMMs: moe_gate_up, moe_down by expert; moe_sum+add); experts: 2 of 8 read"),
        "%s", out);
    cr_expect(strstr(out, "B/token as grouped GEMMs (512-token step, 64-pair tiles) of the whole stacks'"),
              "%s", out);
    cr_expect(strstr(out, "(moe_gate_up + moe_down GEMVs); experts: 2 of 8 read"), "decode: %s", out);
    free(out);
    cr_expect_eq(tu_run(&out, "ZINC_MOE_GROUPED=0 " ZINCC " %s --report --target h200 2>&1", gguf), 0, "%s",
                 out);
    cr_expect(!strstr(out, "(grouped GEMMs:"), "%s", out);
    cr_expect(strstr(out, "B/token as GEMVs (ZINC_MOE_GROUPED=0 keeps the GEMVs)"), "%s", out);
    free(out);
}

/* ---- small things --------------------------------------------------------- */

/* zinc help CMD; zincc --report json spaced like --emit dot, and --report
 * with --parallel names the batch matmuls' kernels; on a terminal a
 * newline ends generated text; Ctrl-C at the chat prompt discards the line
 * and prompts again, Ctrl-D quits with a newline. */
Test(cli, small_things) {
    const char *gguf = model("qwen3", "f32", 15, "small.gguf");
    const char *plan = plan_for(gguf, "small.zplan");
    char *out = NULL;
    cr_expect_eq(tu_run(&out, ZINC " help bench"), 0, "%s", out);
    cr_expect(strstr(out, "usage: zinc bench"), "%s", out);
    free(out);
    cr_expect_eq(tu_run(&out, "{ " ZINCC " %s --report json --target generic 2>/dev/null; }", gguf), 0, "%s",
                 out);
    cr_expect(out[0] == '{', "not JSON: %.200s", out);
    free(out);
    /* the batch schedule's matmuls, as the cost model chose them */
    cr_expect_eq(tu_run(&out, ZINCC " %s --report --target h200 --parallel 4 2>&1", gguf), 0, "%s", out);
    cr_expect(strstr(out, "matmuls: multi-row GEMV, 4 rows a workgroup"), "%s", out);
    /* its own graph: decode's GEMV decisions where the GEMVs run, prefill's beyond */
    cr_expect(strstr(out, "multi-row GEMVs over the rows of 6 of their matmuls (fuse-qkv"), "%s", out);
    cr_expect(strstr(out, " 0 kernels of their own"), "%s", out);
    free(out);
    cr_expect_eq(tu_run(&out, ZINCC " %s --report --target h200 --parallel 24 2>&1", gguf), 0, "%s", out);
    cr_expect(strstr(out, "matmuls: GEMM tiles: 24 rows"), "%s", out);
    cr_expect(strstr(out, "q, k, v: a matmul kernel each"), "%s", out);
    free(out);
    term t;
    char *const run[] = {"zinc", "run", (char *)plan, "-p", "hi", "-n", "3", "--temp", "0", "--quiet", NULL};
    term_exec(&t, run);
    int st = 0;
    st = term_exit(&t, NULL);
    term_wait(&t, 0, "\x01"); /* reads what is left, until the end */
    close(t.fd);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", t.buf);
    cr_expect(t.len >= 2 && !memcmp(t.buf + t.len - 2, "\r\n", 2), "no newline after the text: %s", t.buf);
    char *const chat[] = {"zinc", "chat", (char *)plan, NULL};
    term_exec(&t, chat);
    cr_assert(term_wait(&t, 0, "> "), "%s", t.buf);
    size_t mark = t.len;
    term_send(&t, "\x03"); /* at once: even before libedit reads */
    cr_assert(term_wait(&t, mark, DISCARDED), "Ctrl-C at the prompt: %s", t.buf + mark);
    cr_assert(term_wait(&t, mark, "\n> "), "no prompt after Ctrl-C: %s", t.buf + mark);
    mark = t.len;
    term_send(&t, "\x04");
    st = term_exit(&t, "\x04");
    term_wait(&t, mark, "\x01");
    close(t.fd);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", t.buf);
    cr_expect(strchr(t.buf + mark, '\n'), "no newline after Ctrl-D at the prompt: %s", t.buf + mark);
}
