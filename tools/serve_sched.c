/* The slots and the scheduler. One thread drives the device: each round it
 * gives free slots the oldest queued requests, runs one decode step for every
 * slot that is generating, then one prefill chunk for one slot that is still
 * reading its prompt (taking turns), so that a long prompt delays the streams
 * already running by one chunk per token, not by its whole length. Each slot
 * is a zrt sequence (its own KV cache) with its own sampler, and steps run
 * one at a time, so a request gets the same tokens alone as among others.
 *
 * Locking: one mutex guards the queue, every job's shared fields (text,
 * done, cancelled) and the counters; device work runs without it. A job has
 * two owners, the HTTP side and the scheduler (refs), and is freed by the
 * last to let go. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../runtime/tokenizer.h"
#include "../runtime/zrt.h"
#include "gen.h"
#include "serve.h"

struct srv_job {
    /* set at submit, then read-only */
    int32_t *prompt;
    size_t n_prompt;
    zrt_sample_params sp;
    int64_t max_tokens;
    bool ignore_eos;
    char *stop[SRV_MAX_STOPS];
    int n_stop;
    /* under srv.mu */
    struct srv *srv;
    srv_job *next; /* in the queue */
    int refs;
    bool cancelled, done;
    const char *finish;
    char error[256];
    char *text; /* generated so far; [0, ready) may be sent, the rest could still start a stop string */
    size_t len, ready, cap;
    int64_t n_gen;
    pthread_cond_t cv;
};

typedef struct slot {
    zrt_seq *seq;
    srv_job *job; /* NULL: free */
    zarena *a;    /* the job's sampler and text stream */
    zrt_sampler *smp;
    zrt_tok_stream *ts;
    size_t fed;   /* prompt tokens prefilled */
    int64_t pos;  /* the sequence's position, for /metrics (under mu) */
    int32_t next; /* the last sampled token, fed by the next decode step */
} slot;

typedef struct counter {
    char key[48]; /* endpoint="...",status="..." */
    uint64_t n;
} counter;

struct srv {
    zrt *r;
    const zrt_tok *tok;
    srv_opts o;
    slot *slots;
    float *logits; /* [n_vocab], for samplers that need the whole row; [parallel][n_vocab] with a batch schedule */
    bool batched;  /* the plan has a batch schedule: decode steps run all generating slots at once */
    pthread_t thread;
    bool started, stop;
    pthread_mutex_t mu;
    pthread_cond_t work;      /* the scheduler waits here when idle */
    srv_job *queue, **q_tail; /* FIFO */
    int queued, next_prefill;
    /* metrics, under mu */
    uint64_t prompt_tokens, gen_tokens, finished, cancelled_jobs;
    double prompt_s, decode_s;
    counter counters[64];
    int n_counters;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- jobs ---------------------------------------------------------------- */

static void job_unref(srv_job *j) { /* under mu */
    if (--j->refs) return;
    pthread_cond_destroy(&j->cv);
    for (int i = 0; i < j->n_stop; i++)
        free(j->stop[i]);
    free(j->prompt);
    free(j->text);
    free(j);
}

static srv_job *job_new(const int32_t *prompt, size_t n, const srv_req *rq) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->prompt = malloc(n * sizeof *prompt);
    bool ok = j->prompt != NULL;
    if (ok) memcpy(j->prompt, prompt, n * sizeof *prompt);
    j->n_prompt = n, j->sp = rq->sp, j->max_tokens = rq->max_tokens;
    j->ignore_eos = rq->ignore_eos;
    for (int i = 0; ok && i < rq->n_stop; i++)
        ok = (j->stop[j->n_stop++] = strdup(rq->stop[i])) != NULL;
    if (!ok) job_unref(j);
    return ok ? j : NULL;
}

/* Appends generated text (under mu); false when out of memory. */
static bool job_append(srv_job *j, const char *p, size_t n) {
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 256;
        while (cap < j->len + n + 1)
            cap *= 2;
        char *t = realloc(j->text, cap);
        if (!t) return false;
        j->text = t, j->cap = cap;
    }
    memcpy(j->text + j->len, p, n);
    j->len += n;
    j->text[j->len] = 0;
    return true;
}

static const char *find(const char *hay, size_t n, const char *needle, size_t m) {
    for (size_t i = 0; i + m <= n; i++)
        if (hay[i] == needle[0] && !memcmp(hay + i, needle, m)) return hay + i;
    return NULL;
}

/* After new text: true when a stop string has appeared (the text is cut
 * where it starts); else marks as ready what can no longer begin one. */
static bool job_check_stops(srv_job *j, size_t added) {
    size_t hold = 0;
    for (int k = 0; k < j->n_stop; k++) {
        size_t n = strlen(j->stop[k]), from = j->len > added + n ? j->len - added - n : 0;
        const char *at = find(j->text + from, j->len - from, j->stop[k], n);
        if (at) {
            j->len = (size_t)(at - j->text);
            j->text[j->len] = 0;
            j->ready = j->len < j->ready ? j->ready : j->len;
            return true;
        }
        for (size_t m = n - 1; m > hold; m--) /* the longest end of the text that starts the stop */
            if (m <= j->len && !memcmp(j->text + j->len - m, j->stop[k], m)) hold = m;
    }
    if (j->len - hold > j->ready) j->ready = j->len - hold; /* what was handed out stays */
    return false;
}

static void job_finish(srv_job *j, const char *finish, const char *error) { /* under mu */
    if (j->done) return;
    j->done = true;
    j->finish = finish;
    if (error) snprintf(j->error, sizeof j->error, "%s", error);
    j->ready = j->len;
    pthread_cond_broadcast(&j->cv);
}

/* ---- slots --------------------------------------------------------------- */

static void slot_free(srv *s, slot *sl) { /* under mu */
    if (!sl->job) return;
    if (!sl->job->done) s->cancelled_jobs++;
    job_unref(sl->job);
    sl->job = NULL;
    zarena_free(sl->a);
    sl->a = NULL;
}

/* A random seed for "seed": -1 (or none), different for each request. */
static uint64_t draw_seed(void) {
    struct timespec ts;
    static unsigned n;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15u ^ (uint64_t)ts.tv_sec ^ ++n) & INT64_MAX;
}

static zstatus slot_start(srv *s, slot *sl, srv_job *j, zdiag *d) {
    zrt_sample_params sp = j->sp;
    if (sp.seed == ZRT_SAMPLE_SEED_RANDOM) sp.seed = draw_seed();
    sl->job = j, sl->fed = 0;
    sl->a = zarena_new();
    if (!sl->a) return zdiag_set(d, ZE_NOMEM, "out of memory");
    zstatus st = zrt_sample_new(&sp, zrt_plan(s->r)->n_vocab, s->o.ctx, sl->a, &sl->smp, d);
    if (!st && j->ignore_eos) gen_ban_eog(sl->smp, s->tok);
    if (!st && !(sl->ts = zrt_tok_stream_new(s->tok, 0, sl->a))) st = zdiag_set(d, ZE_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < j->n_prompt;
         i++) /* the prompt counts for the repeat penalty, as in llama.cpp */
        zrt_sample_accept(sl->smp, j->prompt[i]);
    zrt_seq_use(s->r, sl->seq);
    zrt_reset(s->r);
    sl->pos = 0;
    return st;
}

/* A sampled token: the end of the reply, or text for the job. Under mu. */
static void slot_take(srv *s, slot *sl, int32_t id) {
    srv_job *j = sl->job;
    if (zrt_tok_is_eog(s->tok, id)) {
        size_t n;
        const char *rest = zrt_tok_stream_flush(sl->ts, &n);
        if (n && job_append(j, rest, n)) job_check_stops(j, n);
        job_finish(j, "stop", NULL);
        return;
    }
    zrt_sample_accept(sl->smp, id);
    j->n_gen++;
    s->gen_tokens++;
    size_t n;
    const char *text = zrt_tok_stream_push(sl->ts, id, &n);
    if (!job_append(j, text, n)) return job_finish(j, NULL, "out of memory");
    if (job_check_stops(j, n)) return job_finish(j, "stop", NULL);
    if ((j->max_tokens >= 0 && j->n_gen >= j->max_tokens) || (uint64_t)zrt_pos(s->r) + 1 > s->o.ctx) {
        text = zrt_tok_stream_flush(sl->ts, &n);
        if (n && job_append(j, text, n) && job_check_stops(j, n)) return job_finish(j, "stop", NULL);
        return job_finish(j, "length", NULL);
    }
    sl->next = id;
    pthread_cond_broadcast(&j->cv);
}

/* One step of a slot: a prefill chunk, or a decode step; then, when the
 * prompt is read, the next token. Runs without the lock. */
static void slot_step(srv *s, slot *sl) {
    srv_job *j = sl->job;
    zdiag d = {0};
    zrt_seq_use(s->r, sl->seq);
    double t0 = now_s();
    bool prefill = sl->fed < j->n_prompt;
    zstatus st;
    if (prefill) {
        size_t chunk = zrt_plan(s->r)->sched[ZPLAN_PREFILL].max_tokens, m = j->n_prompt - sl->fed;
        m = m < chunk ? m : chunk;
        st = zrt_eval(s->r, j->prompt + sl->fed, (int)m, NULL, &d);
        sl->fed += m;
    } else
        st = zrt_eval(s->r, &sl->next, 1, NULL, &d);
    int32_t id = -1;
    bool ready = sl->fed == j->n_prompt;
    if (!st && ready) st = gen_pick(s->r, sl->smp, s->logits, &id, &d);
    double dt = now_s() - t0;
    pthread_mutex_lock(&s->mu);
    if (prefill)
        s->prompt_s += dt;
    else
        s->decode_s += dt;
    sl->pos = zrt_pos(s->r);
    if (st)
        job_finish(j, NULL, d.msg);
    else if (ready && !j->cancelled)
        slot_take(s, sl, id);
    pthread_mutex_unlock(&s->mu);
}

/* ---- the scheduler ------------------------------------------------------- */

/* Frees the slots of finished or cancelled jobs and fills free slots from
 * the queue. Under mu; true when some slot has work. */
static bool assign(srv *s) {
    bool busy = false;
    for (int i = 0; i < s->o.parallel; i++) {
        slot *sl = &s->slots[i];
        if (sl->job && (sl->job->done || sl->job->cancelled)) {
            if (sl->job->done) s->finished++;
            slot_free(s, sl);
        }
        while (!sl->job && s->queue) {
            srv_job *j = s->queue;
            s->queue = j->next;
            if (!s->queue) s->q_tail = &s->queue;
            s->queued--;
            if (j->cancelled) { /* gone while it waited */
                s->cancelled_jobs++;
                job_unref(j);
                continue;
            }
            zdiag d = {0};
            s->prompt_tokens += j->n_prompt;
            if (slot_start(s, sl, j, &d)) {
                job_finish(j, NULL, d.msg);
                slot_free(s, sl);
            }
        }
        busy |= sl->job != NULL;
    }
    return busy;
}

/* One batch step for every generating slot (even one alone: a request's
 * arithmetic is then the same whoever else runs), each sampled from its row:
 * from the row's top-k candidates the GPU selected where the sampler needs
 * no more (gen_pick), else from the row's logits, read back for it alone. */
static void batch_step(srv *s) {
    slot *rows[ZPLAN_MAX_SEQS];
    zrt_seq *seqs[ZPLAN_MAX_SEQS];
    int32_t tok[ZPLAN_MAX_SEQS];
    int n = 0;
    for (int i = 0; i < s->o.parallel; i++) {
        slot *sl = &s->slots[i];
        if (sl->job && !sl->job->done && sl->fed == sl->job->n_prompt)
            rows[n] = sl, seqs[n] = sl->seq, tok[n++] = sl->next;
    }
    if (!n) return;
    zdiag d = {0};
    double t0 = now_s();
    zstatus st = zrt_run_batch(s->r, seqs, tok, n, NULL, &d);
    int32_t id[ZPLAN_MAX_SEQS];
    for (int i = 0; i < n && !st; i++) {
        zrt_seq_use(s->r, seqs[i]);
        st = gen_pick(s->r, rows[i]->smp, s->logits, &id[i], &d);
    }
    double dt = now_s() - t0;
    pthread_mutex_lock(&s->mu);
    s->decode_s += dt;
    for (int i = 0; i < n; i++) {
        slot *sl = rows[i];
        zrt_seq_use(s->r, sl->seq);
        sl->pos = zrt_pos(s->r);
        if (st)
            job_finish(sl->job, NULL, d.msg);
        else if (!sl->job->cancelled)
            slot_take(s, sl, id[i]);
    }
    pthread_mutex_unlock(&s->mu);
}

/* One round: a decode step for every generating slot (one batch step where
 * the plan has a batch schedule), then one prefill chunk for the next slot
 * still reading its prompt. */
static void round_once(srv *s) {
    int n = s->o.parallel;
    if (s->batched) batch_step(s);
    for (int i = 0; i < n && !s->batched; i++) {
        slot *sl = &s->slots[i];
        if (sl->job && !sl->job->done && sl->fed == sl->job->n_prompt) slot_step(s, sl);
    }
    for (int k = 0; k < n; k++) {
        slot *sl = &s->slots[(s->next_prefill + k) % n];
        if (sl->job && !sl->job->done && sl->fed < sl->job->n_prompt) {
            slot_step(s, sl);
            s->next_prefill = (s->next_prefill + k + 1) % n;
            break;
        }
    }
}

static void *scheduler(void *arg) {
    srv *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        if (!assign(s)) {
            pthread_cond_wait(&s->work, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        round_once(s); /* reads slot fields only this thread writes; jobs' shared ones under mu */
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

zstatus srv_open(zrt *r, const zrt_tok *tok, const srv_opts *o, srv **out, zdiag *d) {
    *out = NULL;
    srv *s = calloc(1, sizeof *s);
    if (!s) return zdiag_set(d, ZE_NOMEM, "out of memory");
    s->r = r, s->tok = tok, s->o = *o;
    s->q_tail = &s->queue;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work, NULL);
    s->batched = o->batch && zrt_batch_rows(r) >= o->parallel;
    s->slots = calloc((size_t)o->parallel, sizeof *s->slots);
    s->logits = malloc(sizeof(float) * zrt_plan(r)->n_vocab); /* a row at a time (gen_pick) */
    zstatus st = s->slots && s->logits ? ZOK : zdiag_set(d, ZE_NOMEM, "out of memory");
    /* A plan with sequence slots holds the zrt's own sequence in slot 0. */
    for (int i = zrt_plan(r)->n_seqs > 1 ? 1 : 0; !st && i < o->parallel; i++)
        if ((st = zrt_seq_new(r, &s->slots[i].seq, d))) zdiag_prefix(d, "slot %d of %d", i, o->parallel);
    if (!st && pthread_create(&s->thread, NULL, scheduler, s))
        st = zdiag_set(d, ZE_NOMEM, "cannot start the scheduler thread");
    s->started = !st;
    if (st) {
        srv_close(s);
        return st;
    }
    *out = s;
    return ZOK;
}

void srv_close(srv *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    if (s->started) pthread_join(s->thread, NULL);
    pthread_mutex_lock(&s->mu);
    while (s->queue) {
        srv_job *j = s->queue;
        s->queue = j->next;
        job_finish(j, NULL, "the server is shutting down");
        job_unref(j);
    }
    for (int i = 0; s->slots && i < s->o.parallel; i++) {
        if (s->slots[i].job) job_finish(s->slots[i].job, NULL, "the server is shutting down");
        slot_free(s, &s->slots[i]);
        zrt_seq_free(s->r, s->slots[i].seq);
    }
    pthread_mutex_unlock(&s->mu);
    zrt_seq_use(s->r, NULL);
    free(s->slots);
    free(s->logits);
    free(s);
}

bool srv_ready(const srv *s) {
    return s && s->started;
}

srv_job *srv_submit(srv *s, const int32_t *prompt, size_t n, const srv_req *rq, srv_err *e) {
    if (n + 1 > s->o.ctx) {
        srv_fail(e, 400, "invalid_request_error", "context_length_exceeded",
                 "the prompt is %zu tokens, and a slot holds %u (prompt and reply): expected at most %u "
                 "prompt tokens (shorten it, or start the server with a larger --ctx-per-slot)",
                 n, s->o.ctx, s->o.ctx - 1);
        return NULL;
    }
    srv_job *j = job_new(prompt, n, rq);
    if (!j) return srv_fail(e, 500, "server_error", NULL, "out of memory"), NULL;
    pthread_mutex_lock(&s->mu);
    if (s->queued >= s->o.queue_max || s->stop) {
        job_unref(j);
        pthread_mutex_unlock(&s->mu);
        srv_fail(e, 503, "server_error", "queue_full",
                 "all %d slots are busy and %d requests are waiting (the queue's limit): try again later",
                 s->o.parallel, s->o.queue_max);
        return NULL;
    }
    j->srv = s;
    j->refs = 2; /* the caller's and the scheduler's */
    *s->q_tail = j, s->q_tail = &j->next;
    s->queued++;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    return j;
}

void srv_wait(srv_job *j, int timeout_ms, size_t *taken, srv_news *n) {
    srv *s = j->srv;
    memset(n, 0, sizeof *n);
    pthread_mutex_lock(&s->mu);
    if (j->ready == *taken && !j->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&j->cv, &s->mu, &ts);
    }
    if (j->ready > *taken && (n->text = malloc(j->ready - *taken + 1))) {
        n->len = j->ready - *taken;
        memcpy(n->text, j->text + *taken, n->len);
        n->text[n->len] = 0;
        *taken = j->ready;
    }
    n->done = j->done && *taken == j->ready;
    n->finish = j->finish;
    n->error = j->done && !j->finish ? j->error : NULL;
    n->n_prompt = (int64_t)j->n_prompt, n->n_gen = j->n_gen;
    pthread_mutex_unlock(&s->mu);
}

void srv_release(srv_job *j) {
    srv *s = j->srv;
    pthread_mutex_lock(&s->mu);
    j->cancelled = true;
    pthread_cond_signal(&s->work);
    job_unref(j);
    pthread_mutex_unlock(&s->mu);
}

void srv_count_request(srv *s, const char *endpoint, int status) {
    char key[48];
    snprintf(key, sizeof key, "endpoint=\"%s\",status=\"%d\"", endpoint, status);
    pthread_mutex_lock(&s->mu);
    int i = 0;
    while (i < s->n_counters && strcmp(s->counters[i].key, key))
        i++;
    if (i == s->n_counters && i < (int)(sizeof s->counters / sizeof *s->counters))
        snprintf(s->counters[s->n_counters++].key, sizeof key, "%s", key);
    if (i < s->n_counters) s->counters[i].n++;
    pthread_mutex_unlock(&s->mu);
}

/* A growing text for /metrics. */
typedef struct strbuf {
    char *p;
    size_t len, cap;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) ZPRINTF(2, 3);
static void sb_printf(strbuf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return;
        b->p = q, b->cap = cap;
    }
}

static void metric(strbuf *b, const char *name, const char *type, const char *help) {
    sb_printf(b, "# HELP zinc_%s %s\n# TYPE zinc_%s %s\n", name, help, name, type);
}

char *srv_metrics(srv *s) {
    strbuf b = {0};
    pthread_mutex_lock(&s->mu);
    metric(&b, "requests_total", "counter", "HTTP requests answered, by endpoint and status.");
    for (int i = 0; i < s->n_counters; i++)
        sb_printf(&b, "zinc_requests_total{%s} %llu\n", s->counters[i].key,
                  (unsigned long long)s->counters[i].n);
    metric(&b, "prompt_tokens_total", "counter", "Prompt tokens prefilled.");
    sb_printf(&b, "zinc_prompt_tokens_total %llu\n", (unsigned long long)s->prompt_tokens);
    metric(&b, "tokens_generated_total", "counter", "Tokens generated.");
    sb_printf(&b, "zinc_tokens_generated_total %llu\n", (unsigned long long)s->gen_tokens);
    metric(&b, "generations_finished_total", "counter", "Generations that ran to their end.");
    sb_printf(&b, "zinc_generations_finished_total %llu\n", (unsigned long long)s->finished);
    metric(&b, "generations_cancelled_total", "counter", "Generations cancelled (the client went away).");
    sb_printf(&b, "zinc_generations_cancelled_total %llu\n", (unsigned long long)s->cancelled_jobs);
    metric(&b, "prompt_tokens_per_second", "gauge", "Prompt tokens per second of prefill time, since start.");
    sb_printf(&b, "zinc_prompt_tokens_per_second %.3f\n",
              s->prompt_s > 0 ? s->prompt_tokens / s->prompt_s : 0.0);
    metric(&b, "tokens_per_second", "gauge",
           "Generated tokens per second of decode time, all slots, since start.");
    sb_printf(&b, "zinc_tokens_per_second %.3f\n", s->decode_s > 0 ? s->gen_tokens / s->decode_s : 0.0);
    metric(&b, "queue_depth", "gauge", "Requests waiting for a slot.");
    sb_printf(&b, "zinc_queue_depth %d\n", s->queued);
    metric(&b, "slots", "gauge", "Slots (--parallel).");
    sb_printf(&b, "zinc_slots %d\n", s->o.parallel);
    int busy = 0;
    for (int i = 0; i < s->o.parallel; i++)
        busy += s->slots[i].job != NULL;
    metric(&b, "slots_busy", "gauge", "Slots holding a request.");
    sb_printf(&b, "zinc_slots_busy %d\n", busy);
    metric(&b, "kv_cache_used_ratio", "gauge", "Share of each slot's context in use.");
    for (int i = 0; i < s->o.parallel; i++)
        sb_printf(&b, "zinc_kv_cache_used_ratio{slot=\"%d\"} %.4f\n", i,
                  s->slots[i].job ? (double)s->slots[i].pos / s->o.ctx : 0.0);
    pthread_mutex_unlock(&s->mu);
    return b.p;
}
