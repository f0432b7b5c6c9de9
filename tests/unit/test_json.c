/* Every JSON writer goes through ir/json.h and jansson; here each output is
 * read back with jansson's strict parser and its key fields checked:
 *
 * 1. zjson_strn / zjson_num: bytes that are not UTF-8 become U+FFFD, NaN and
 *    infinity become null, and what is written always parses again.
 * 2. zincc --report=json for a model whose path holds quotes, backslashes,
 *    control characters and invalid UTF-8 (run without a shell).
 * 3. zinc bench -o json on a real plan, and bench_print with a hostile model
 *    name and t/s that are not finite (a repetition timed at 0 s).
 * 4. zinc serve's bodies (srv_response_body, srv_chunk_event) for a model
 *    named with the same bytes and a reply cut inside a UTF-8 sequence.
 *
 * zinc info has no JSON output (it prints text), so it is not here. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "frontend/mkmodel.h"
#include "ir/json.h"
#include "testutil.h"
#include "tools/bench.h"
#include "tools/serve.h"

#define FFFD "\xEF\xBF\xBD"
/* A name with what JSON must escape and what is not UTF-8: a lone
 * continuation byte, 0xFF, an overlong NUL, an encoded surrogate, a cut
 * 3-byte sequence; the euro sign is valid and stays. */
#define HOSTILE "we\"ird\\na\x01me\t\x1f\xff\x80 \xc0\x80 \xed\xa0\x80 \xe2\x82 \xe2\x82\xac"
#define HOSTILE_AS_JSON                                                                                      \
    "we\"ird\\na\x01me\t\x1f" FFFD FFFD " " FFFD FFFD " " FFFD FFFD FFFD " " FFFD FFFD " \xe2\x82\xac"

extern char **environ;

/* Parses text strictly (one value, nothing after it) or fails the test. */
static json_t *parse(const char *text, size_t n, const char *what) {
    json_error_t e;
    json_t *v = json_loadb(text, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    cr_assert(v, "%s is not JSON: %s at line %d column %d: %.300s", what, e.text, e.line, e.column, text);
    return v;
}

static json_t *parse_file(const char *path, const char *what) {
    size_t n;
    char *text = tu_read_file(path, &n);
    cr_assert(text, "no output in %s", path);
    json_t *v = parse(text, n, what);
    free(text);
    return v;
}

static json_t *get(json_t *o, const char *key, json_type type) {
    json_t *v = json_object_get(o, key);
    cr_assert(v, "missing key \"%s\"", key);
    cr_assert(json_typeof(v) == type || (type == JSON_REAL && json_is_number(v)), "\"%s\": type %d, not %d",
              key, json_typeof(v), type);
    return v;
}

/* argv[0] run without a shell (the path is passed as it is), stdout to out. */
static int run(char *const argv[], const char *out) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), st = -1;
    posix_spawn_file_actions_destroy(&fa);
    cr_assert_eq(rc, 0, "cannot start %s", argv[0]);
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- 1. the helpers ---------------------------------------------------------- */

static char *dump(json_t *v) {
    cr_assert(v);
    char *s = json_dumps(v, JSON_ENCODE_ANY);
    json_decref(v);
    cr_assert(s, "jansson refused to write it");
    return s;
}

Test(json, strings_become_utf8_and_round_trip) {
    char *s = dump(zjson_str(HOSTILE));
    json_t *back = parse(s, strlen(s), "a hostile string");
    cr_expect_str_eq(json_string_value(back), HOSTILE_AS_JSON);
    json_decref(back);
    free(s);
    /* a NUL inside the bytes is kept (\u0000), NULL is "" */
    s = dump(zjson_strn("a\0b", 3));
    cr_expect_str_eq(s, "\"a\\u0000b\"");
    free(s);
    s = dump(zjson_str(NULL));
    cr_expect_str_eq(s, "\"\"");
    free(s);
    /* 4-byte sequences: U+10FFFF is the last valid one */
    s = dump(zjson_str("\xf4\x8f\xbf\xbf|\xf4\x90\x80\x80|\xf0\x8f\xbf\xbf"));
    cr_expect_str_eq(s, "\"\xf4\x8f\xbf\xbf|" FFFD FFFD FFFD FFFD "|" FFFD FFFD FFFD FFFD "\"");
    free(s);
}

Test(json, numbers_that_are_not_finite_are_null) {
    json_t *a = json_array();
    double v[] = {NAN, INFINITY, -INFINITY, 1.5, 1e300};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        json_array_append_new(a, zjson_num(v[i]));
    char *s = dump(a);
    cr_expect_str_eq(s, "[null, null, null, 1.5, 1.0000000000000001e300]");
    free(s);
}

/* ---- 2. zincc --report=json -------------------------------------------------- */

static const char *hostile_model(void) {
    static char path[512];
    snprintf(path, sizeof path, "%s", tu_tmp(HOSTILE ".gguf"));
    zmk_opts o;
    zmk_defaults(&o);
    zdiag d = {0};
    cr_assert_eq(zmk_write(&o, path, NULL, &d), ZOK, "%s", d.msg);
    return path;
}

Test(json, report_with_a_hostile_model_path) {
    const char *gguf = hostile_model(), *out = tu_tmp("r.json");
    char *const argv[] = {ZINC_BINARY_DIR "/zincc", (char *)gguf, "--target", "h200", "--report=json", NULL};
    cr_assert_eq(run(argv, out), 0, "zincc --report=json failed");
    json_t *r = parse_file(out, "--report=json");
    char want[600];
    snprintf(want, sizeof want, "%.*s" HOSTILE_AS_JSON ".gguf", (int)(strlen(gguf) - strlen(HOSTILE ".gguf")),
             gguf);
    cr_expect_str_eq(json_string_value(get(r, "model", JSON_STRING)), want);
    cr_expect_str_eq(json_string_value(get(r, "arch", JSON_STRING)), "qwen3");
    cr_expect_eq(json_integer_value(get(r, "layers", JSON_INTEGER)), 2);
    json_t *tg = get(r, "target", JSON_OBJECT);
    cr_expect_str_eq(json_string_value(get(tg, "name", JSON_STRING)), "h200");
    cr_expect_float_eq(json_number_value(get(tg, "bandwidth_gbs", JSON_REAL)), 4000, 1e-9);
    json_t *groups = get(r, "groups", JSON_ARRAY);
    cr_expect_eq(json_array_size(groups), 2 * 2 * 2, "layers x (attn, mlp) x phases");
    size_t i;
    json_t *g;
    json_array_foreach(groups, i, g) {
        get(g, "wide_values", JSON_ARRAY);
        get(g, "reason", JSON_STRING);
        cr_expect(json_is_boolean(json_object_get(g, "fused")), "\"fused\" is not a boolean");
        json_t *tb = get(g, "traffic_before", JSON_OBJECT);
        cr_expect(json_number_value(get(tb, "bytes_per_token", JSON_REAL)) > 0);
    }
    json_t *dec = get(get(r, "totals", JSON_OBJECT), "decode", JSON_OBJECT);
    double before =
        json_number_value(get(get(dec, "before", JSON_OBJECT), "dispatches_per_token", JSON_REAL));
    double after = json_number_value(get(get(dec, "after", JSON_OBJECT), "dispatches_per_token", JSON_REAL));
    cr_expect(after < before, "dispatches %g -> %g", before, after);
    json_decref(r);
}

/* ---- 3. zinc bench -o json --------------------------------------------------- */

Test(json, bench_on_a_real_plan) {
    const char *gguf = hostile_model(), *plan = tu_tmp("b.zplan"), *out = tu_tmp("b.json");
    char *const compile[] = {ZINC_BINARY_DIR "/zincc", (char *)gguf, "-o", (char *)plan, "--ctx", "64", NULL};
    cr_assert_eq(run(compile, tu_tmp("zincc.log")), 0, "zincc failed");
    char *const bench[] = {
        ZINC_BINARY_DIR "/zinc", "bench", (char *)plan, "-p", "8", "-n", "4", "-r", "2", "-o", "json", NULL};
    cr_assert_eq(run(bench, out), 0, "zinc bench -o json failed");
    json_t *all = parse_file(out, "zinc bench -o json");
    cr_assert(json_is_array(all) && json_array_size(all) == 2, "one object per test");
    const char *tests[2] = {"pp8", "tg4"};
    for (size_t i = 0; i < 2; i++) {
        json_t *t = json_array_get(all, i);
        cr_expect_str_eq(json_string_value(get(t, "test", JSON_STRING)), tests[i]);
        cr_expect_str_eq(json_string_value(get(t, "backend", JSON_STRING)), "Vulkan");
        cr_expect(strstr(json_string_value(get(t, "model", JSON_STRING)), "qwen3"));
        cr_expect_eq(json_integer_value(get(t, "n_prompt", JSON_INTEGER)), i ? 0 : 8);
        cr_expect_eq(json_integer_value(get(t, "n_gen", JSON_INTEGER)), i ? 4 : 0);
        cr_expect(json_integer_value(get(t, "size", JSON_INTEGER)) > 0);
        cr_expect(json_number_value(get(t, "avg_ts", JSON_REAL)) > 0);
        cr_expect_eq(json_array_size(get(t, "samples_ts", JSON_ARRAY)), 2);
    }
    json_decref(all);
}

Test(json, bench_print_with_hostile_names_and_no_finite_rate) {
    double samples[3] = {INFINITY, 123.4567894, NAN};
    bench_result res = {
        .test = "tg" HOSTILE, .n = 4, .mean = NAN, .sd = 0.1234564, .samples = samples, .reps = 3};
    bench_model m = {.name = HOSTILE, .size = 1, .params = 2, .device = "dev\"\x7f\xfe"};
    const char *out = tu_tmp("p.json");
    FILE *f = fopen(out, "w");
    cr_assert(f);
    zdiag d = {0};
    cr_assert_eq(bench_print("json", &m, &res, 1, f, &d), ZOK, "%s", d.msg);
    fclose(f);
    json_t *all = parse_file(out, "bench_print json"), *t = json_array_get(all, 0);
    cr_assert(t);
    cr_expect_str_eq(json_string_value(get(t, "model", JSON_STRING)), HOSTILE_AS_JSON);
    cr_expect_str_eq(json_string_value(get(t, "test", JSON_STRING)), "tg" HOSTILE_AS_JSON);
    cr_expect_str_eq(json_string_value(get(t, "device", JSON_STRING)), "dev\"\x7f" FFFD);
    get(t, "avg_ts", JSON_NULL);
    cr_expect_float_eq(json_number_value(get(t, "stddev_ts", JSON_REAL)), 0.123456, 1e-12, "6 decimals");
    json_t *s = get(t, "samples_ts", JSON_ARRAY);
    cr_expect(json_is_null(json_array_get(s, 0)) && json_is_null(json_array_get(s, 2)));
    cr_expect_float_eq(json_number_value(json_array_get(s, 1)), 123.456789, 1e-12);
    json_decref(all);
}

/* ---- 4. zinc serve's bodies --------------------------------------------------- */

Test(json, serve_bodies_with_a_hostile_model_name) {
    srv_ident id = {.id = "chatcmpl-1", .created = 1700000000, .model = HOSTILE};
    srv_result r = {.text = "ok \xe2\x82", .len = 5, .finish = "length", .n_prompt = 3, .n_gen = 2};
    char *body = srv_response_body(SRV_CHAT, &id, &r);
    cr_assert(body, "no body");
    json_t *v = parse(body, strlen(body), "a chat response");
    cr_expect_str_eq(json_string_value(get(v, "model", JSON_STRING)), HOSTILE_AS_JSON);
    json_t *msg = get(json_array_get(get(v, "choices", JSON_ARRAY), 0), "message", JSON_OBJECT);
    cr_expect_str_eq(json_string_value(get(msg, "content", JSON_STRING)), "ok " FFFD FFFD);
    cr_expect_eq(json_integer_value(get(get(v, "usage", JSON_OBJECT), "total_tokens", JSON_INTEGER)), 5);
    json_decref(v);
    free(body);
    char *ev = srv_chunk_event(SRV_COMPLETION, &id, "\xff", 1, NULL);
    cr_assert(ev && !strncmp(ev, "data: ", 6), "%s", ev ? ev : "(none)");
    v = parse(ev + 6, strlen(ev + 6), "a stream chunk");
    json_t *choice = json_array_get(get(v, "choices", JSON_ARRAY), 0);
    cr_expect_str_eq(json_string_value(get(choice, "text", JSON_STRING)), FFFD);
    json_decref(v);
    free(ev);
}
