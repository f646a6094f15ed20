/* The native transport's callers' side: hp_send, hp_recv, hp_flush and aborts, each taking the
 * engine's lock, handing its work to the loop (hostpath.c) and waiting on the condition variable
 * until its message is in, in flight or acknowledged, or the call failed; stats, close, free. */
#define _GNU_SOURCE
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int enter(struct hp_engine *e)
{
    pthread_mutex_lock(&e->mu);
    if (e->closing) {
        pthread_mutex_unlock(&e->mu);
        return HP_CLOSED;
    }
    e->callers++;
    return HP_OK;
}

static int leave(struct hp_engine *e, int status)
{
    if (--e->callers == 0 && e->closing)
        pthread_cond_broadcast(&e->cv);           /* hp_close waits for the last caller out */
    pthread_mutex_unlock(&e->mu);
    return status;
}

static void wait_until(struct hp_engine *e, double until)
{
    struct timespec ts = abs_time(until);
    e->waiters++;
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    e->waiters--;
}

/* reliable.py's _check: another rank aborted this call (or an earlier one of its (sub)group), or
 * a watched rank went silent */
static int check(struct hp_engine *e, uint64_t tag, int32_t peer, const int32_t *watch, int32_t nwatch,
                 struct hp_failure *f, double now)
{
    uint64_t call = tag >> 32;
    for (uint32_t i = 0; i < e->naborts; i++) {
        const struct abort_note *a = &e->aborts[i];
        if (a->call >> HP_CALL_NUMBER_BITS == call >> HP_CALL_NUMBER_BITS && a->call <= call && a->by != e->cfg.rank) {
            f->peer = a->by;
            f->reason_len = a->len;
            memcpy(f->reason, a->reason, a->len);
            return HP_ABORTED;
        }
    }
    for (int32_t i = -1; i < nwatch; i++) {
        int32_t r = i < 0 ? peer : watch[i];
        if (r < 0 || r >= e->cfg.world || r == e->cfg.rank)
            continue;
        double heard = e->peers[r].heard;
        if (heard >= 0 && now - heard > e->cfg.silent_after_s) {
            f->peer = r;
            f->waited_s = now - heard;
            return HP_SILENT;
        }
    }
    return HP_OK;
}

/* reliable.py's _late: the deadline passed waiting on `peer`, silent or alive */
static int late(struct hp_engine *e, int32_t peer, struct hp_failure *f, double now)
{
    double heard = e->peers[peer].heard;
    f->peer = peer;
    f->never_heard = heard < 0;
    f->waited_s = heard < 0 ? INFINITY : now - heard;
    return heard < 0 || now - heard > e->cfg.silent_after_s ? HP_LATE_SILENT : HP_LATE_ALIVE;
}

static void unlink_job(struct peer *p, struct job *j)
{
    for (struct job **at = &p->jobs; *at; at = &(*at)->next)
        if (*at == j) {
            *at = j->next;
            break;
        }
    p->jobs_tail = &p->jobs;
    while (*p->jobs_tail)
        p->jobs_tail = &(*p->jobs_tail)->next;
}

/* What a caller waits for: done, or else the rank it waits on; `checked`: aborts of the call of
 * `tag` and silence of `watch` looked for (reliable.py's _check) at every wake, `recheck_s` apart
 * at most. */
struct waiting {
    int (*done)(struct hp_engine *e, struct waiting *w, int32_t *peer);
    int checked;
    uint64_t tag;
    const int32_t *watch;
    int32_t nwatch;
    double deadline, recheck_s;
    struct job *job;                    /* hp_send's */
    int32_t src;                        /* hp_recv's */
    struct msg *message;
};

static int wait_for(struct hp_engine *e, struct waiting *w, struct hp_failure *f)
{
    for (;;) {
        int32_t peer = -1;
        if (w->done(e, w, &peer))
            return HP_OK;
        double now = hp_now();
        if (e->closing)
            return HP_CLOSED;
        int status = w->checked ? check(e, w->tag, peer, w->watch, w->nwatch, f, now) : HP_OK;
        if (status != HP_OK)
            return status;
        if (w->deadline - now <= 0)
            return late(e, peer, f, now);
        wait_until(e, fmin(w->deadline, now + w->recheck_s));
    }
}

static int sent(struct hp_engine *e, struct waiting *w, int32_t *peer)
{
    (void)e;
    *peer = w->src;
    return w->job->done;
}

int hp_send(struct hp_engine *e, int32_t dst, uint64_t tag, const uint8_t *data, uint64_t len, double deadline,
            const int32_t *watch, int32_t nwatch, struct hp_failure *failure)
{
    if (enter(e) != HP_OK)
        return HP_CLOSED;
    struct peer *p = &e->peers[dst];
    if (!p->slots && !(p->slots = calloc((size_t)p->mask + 1, sizeof *p->slots)))
        return leave(e, HP_CLOSED);
    uint64_t count = len ? (len + HP_PAYLOAD - 1) / HP_PAYLOAD : 1;
    struct job j = {.data = data, .len = len, .tag = tag, .count = (uint32_t)count};
    *p->jobs_tail = &j;
    p->jobs_tail = &j.next;
    if (e->asleep) {
        uint64_t one = 1;
        if (write(e->wake_fd, &one, sizeof one) < 0) { /* already readable */ }
    }
    struct waiting w = {.done = sent, .checked = 1, .tag = tag, .watch = watch, .nwatch = nwatch,
                        .deadline = deadline, .recheck_s = e->cfg.rto_s, .job = &j, .src = dst};
    int status = wait_for(e, &w, failure);
    if (status != HP_OK)
        unlink_job(p, &j);              /* its packets already in flight stay there */
    return leave(e, status);
}

static int received(struct hp_engine *e, struct waiting *w, int32_t *peer)
{
    *peer = w->src;
    return (w->message = msg_take(e->table, w->src, w->tag)) != NULL;
}

int hp_recv(struct hp_engine *e, int32_t src, uint64_t tag, double deadline, const int32_t *watch, int32_t nwatch,
            struct hp_failure *failure, struct hp_message **message)
{
    if (enter(e) != HP_OK)
        return HP_CLOSED;
    struct waiting w = {.done = received, .checked = 1, .tag = tag, .watch = watch, .nwatch = nwatch,
                        .deadline = deadline, .recheck_s = RECV_RECHECK_S, .src = src};
    int status = wait_for(e, &w, failure);
    if (status == HP_OK)
        *message = &w.message->pub;
    return leave(e, status);
}

void hp_message_free(struct hp_message *message)
{
    if (message)
        msg_free((struct msg *)message);
}

static int acknowledged(struct hp_engine *e, struct waiting *w, int32_t *peer)
{
    (void)w;
    for (int32_t r = 0; r < e->cfg.world; r++)
        if (e->peers[r].pending || e->peers[r].jobs) {
            *peer = r;
            return 0;
        }
    return 1;
}

int hp_flush(struct hp_engine *e, double deadline, struct hp_failure *failure)
{
    if (enter(e) != HP_OK)
        return HP_CLOSED;
    struct waiting w = {.done = acknowledged, .deadline = deadline, .recheck_s = e->cfg.rto_s};
    return leave(e, wait_for(e, &w, failure));
}

void hp_abort(struct hp_engine *e, uint64_t call, const char *reason, uint32_t reason_len)
{
    if (enter(e) != HP_OK)
        return;
    if (reason_len > HP_PAYLOAD)
        reason_len = HP_PAYLOAD;
    struct out o = {0};
    uint8_t *pkt = malloc(HP_HEADER_BYTES + HP_PAYLOAD);
    if (!pkt || out_init(&o, HP_ABORT_COPIES * (uint32_t)e->cfg.world, 0) < 0) {
        free(pkt);
        out_release(&o);
        leave(e, HP_OK);
        return;
    }
    note_abort(e, call, e->cfg.rank, reason, reason_len);
    struct header h = {.kind = HP_ABORT, .group = e->cfg.group, .src = (uint16_t)e->cfg.rank, .tag = call, .count = 1};
    wire_pack(pkt, &h);
    memcpy(pkt + HP_HEADER_BYTES, reason, reason_len);
    for (int copy = 0; copy < HP_ABORT_COPIES; copy++)
        for (int32_t r = 0; r < e->cfg.world; r++)
            if (r != e->cfg.rank)
                out_add(e, &o, r, pkt, HP_HEADER_BYTES + reason_len);
    pthread_mutex_unlock(&e->mu);                 /* still counted as a caller: hp_close waits for us */
    out_send(e, &o);
    pthread_mutex_lock(&e->mu);
    free(pkt);
    out_release(&o);
    leave(e, HP_OK);
}

int hp_abort_at(struct hp_engine *e, uint32_t i, uint64_t *call, int32_t *by, char *reason, uint32_t *reason_len)
{
    pthread_mutex_lock(&e->mu);
    int there = i < e->naborts;
    if (there) {
        *call = e->aborts[i].call;
        *by = e->aborts[i].by;
        *reason_len = e->aborts[i].len;
        memcpy(reason, e->aborts[i].reason, e->aborts[i].len);
    }
    pthread_mutex_unlock(&e->mu);
    return there;
}
