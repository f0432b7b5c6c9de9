/* Chat formats: detection by markers and rendering, as llama.cpp's
 * llama-chat.cpp does for the two formats zinc supports. See chat.h. */
#include "chat.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *const NAMES[ZRT_CHAT_COUNT] = {"chatml", "llama3"};

const char *zrt_chat_name(zrt_chat_format f) {
    return (unsigned)f < ZRT_CHAT_COUNT ? NAMES[f] : "?";
}

const char *zrt_chat_marker(zrt_chat_format f) {
    static const char *const MARKERS[ZRT_CHAT_COUNT] = {"<|im_start|>", "<|start_header_id|>"};
    return (unsigned)f < ZRT_CHAT_COUNT ? MARKERS[f] : "";
}

zstatus zrt_chat_parse(const char *name, zrt_chat_format *out, zdiag *d) {
    for (int f = 0; f < ZRT_CHAT_COUNT; f++)
        if (!strcmp(name, NAMES[f])) {
            *out = (zrt_chat_format)f;
            return ZOK;
        }
    return zdiag_set(d, ZE_INVALID, "--template '%s': expected chatml or llama3", name);
}

static bool has(const char *s, const char *marker) {
    return strstr(s, marker) != NULL;
}

/* The families llama.cpp checks before Llama 3, in its order, by their
 * markers: a template that matches one of these is that family there, so it
 * must not be taken for Llama 3 here. Only used to name it in the error. */
typedef struct family {
    const char *name, *a, *b; /* b: a second marker that must also be present, or NULL */
} family;

static const family BEFORE_LLAMA3[] = {
    {"mistral / llama2 ([INST])", "[INST]", NULL},
    {"phi3", "<|assistant|>", "<|end|>"},
    {"chatglm4", "[gMASK]<sop>", NULL},
    {"glm-edge / falcon3", "<|assistant|>", "<|user|>"},
    {"zephyr", "<|user|>", "<|endoftext|>"},
    {"monarch", "bos_token + message['role']", NULL},
    {"gemma", "<start_of_turn>", NULL},
    {"orion", "'\\n\\nAssistant: ' + eos_token", NULL},
    {"openchat", "GPT4 Correct ", NULL},
    {"vicuna", "USER: ", "ASSISTANT: "},
    {"deepseek", "### Instruction:", "<|EOT|>"},
    {"command-r", "<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"},
};

/* The family a template belongs to, when it is one zinc cannot render. */
static const char *other_family(const char *t) {
    if (has(t, "<|im_start|>")) return has(t, "<|im_sep|>") ? "phi4" : "smolvlm";
    if (!strncmp(t, "mistral", 7)) return "mistral";
    for (size_t i = 0; i < sizeof BEFORE_LLAMA3 / sizeof BEFORE_LLAMA3[0]; i++)
        if (has(t, BEFORE_LLAMA3[i].a) && (!BEFORE_LLAMA3[i].b || has(t, BEFORE_LLAMA3[i].b)))
            return BEFORE_LLAMA3[i].name;
    return NULL;
}

/* The template's opening, one line, for the error message. */
static void excerpt(const char *t, char out[48]) {
    size_t i = 0;
    for (; t[i] && i < 40; i++)
        out[i] = isprint((unsigned char)t[i]) ? t[i] : ' ';
    strcpy(out + i, t[i] ? "..." : "");
}

zstatus zrt_chat_detect(const char *tmpl, zrt_chat_format *out, zdiag *d) {
    for (int f = 0; f < ZRT_CHAT_COUNT; f++)
        if (!strcmp(tmpl, NAMES[f])) return *out = (zrt_chat_format)f, ZOK;
    if (has(tmpl, "<|im_start|>") && !has(tmpl, "<|im_sep|>") && !has(tmpl, "<end_of_utterance>")) {
        *out = ZRT_CHAT_CHATML;
        return ZOK;
    }
    const char *other = other_family(tmpl);
    if (!other && has(tmpl, "<|start_header_id|>") && has(tmpl, "<|end_header_id|>")) {
        *out = ZRT_CHAT_LLAMA3;
        return ZOK;
    }
    char start[48];
    excerpt(tmpl, start);
    if (other)
        return zdiag_set(
            d, ZE_UNSUPPORTED,
            "tokenizer.chat_template is a %s template, which zinc does not render: expected ChatML "
            "(<|im_start|>) or Llama 3 (<|start_header_id|>); pass --template chatml or --template "
            "llama3 to use one of those anyway",
            other);
    return zdiag_set(
        d, ZE_UNSUPPORTED,
        "tokenizer.chat_template (\"%s\") is not a template zinc recognises: expected ChatML "
        "(<|im_start|>) or Llama 3 (<|start_header_id|>); pass --template chatml or --template llama3 "
        "to choose the format",
        start);
}

zstatus zrt_chat_for_gguf(const gguf_file *f, const char *override, zrt_chat_format *out, zdiag *d) {
    if (override) return zrt_chat_parse(override, out, d);
    const char *tmpl = NULL;
    int r = gguf_opt_str(f, "tokenizer.chat_template", &tmpl, d);
    if (r < 0) return d ? d->code : ZE_FORMAT;
    if (r == 0)
        return zdiag_set(
            d, ZE_INVALID,
            "%s: no tokenizer.chat_template: pass --template chatml or --template llama3 to choose the "
            "chat format",
            f->path);
    zstatus s = zrt_chat_detect(tmpl, out, d);
    if (s) zdiag_prefix(d, "%s", f->path);
    return s;
}

/* ---- rendering ---------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    zarena *a;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = zarena_alloc(b->a, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(sbuf *b, const char *s) {
    put(b, s, strlen(s));
}

/* llama.cpp's trim: C isspace at both ends. */
static void put_trimmed(sbuf *b, const char *s) {
    size_t start = 0, end = strlen(s);
    while (start < end && isspace((unsigned char)s[start]))
        start++;
    while (end > start && isspace((unsigned char)s[end - 1]))
        end--;
    put(b, s + start, end - start);
}

zstatus zrt_chat_render(zrt_chat_format f, const zrt_chat_msg *msgs, size_t n, bool add_generation_prompt,
                        zarena *a, char **text, size_t *len, zdiag *d) {
    return zrt_chat_render_spans(f, msgs, n, add_generation_prompt, a, text, len, NULL, d);
}

zstatus zrt_chat_render_spans(zrt_chat_format f, const zrt_chat_msg *msgs, size_t n,
                              bool add_generation_prompt, zarena *a, char **text, size_t *len,
                              zrt_tok_span *content, zdiag *d) {
    *text = NULL, *len = 0;
    if ((unsigned)f >= ZRT_CHAT_COUNT) return zdiag_set(d, ZE_INVALID, "chat: unknown format %d", (int)f);
    sbuf b = {.a = a};
    puts_(&b, ""); /* an empty conversation still gives a string */
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return zdiag_set(d, ZE_INVALID, "chat: message %zu has no %s", i,
                             msgs[i].role ? "content" : "role");
        size_t at;
        if (f == ZRT_CHAT_CHATML) {
            puts_(&b, "<|im_start|>"), puts_(&b, msgs[i].role), puts_(&b, "\n");
            at = b.n;
            puts_(&b, msgs[i].content);
        } else {
            puts_(&b, "<|start_header_id|>"), puts_(&b, msgs[i].role), puts_(&b, "<|end_header_id|>\n\n");
            at = b.n;
            put_trimmed(&b, msgs[i].content);
        }
        if (content) content[i] = (zrt_tok_span){at, b.n - at};
        puts_(&b, f == ZRT_CHAT_CHATML ? "<|im_end|>\n" : "<|eot_id|>");
    }
    if (add_generation_prompt)
        puts_(&b, f == ZRT_CHAT_CHATML ? "<|im_start|>assistant\n"
                                       : "<|start_header_id|>assistant<|end_header_id|>\n\n");
    if (b.oom) return zdiag_set(d, ZE_NOMEM, "chat: out of memory");
    *text = b.p, *len = b.n;
    return ZOK;
}
