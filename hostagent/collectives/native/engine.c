/* The native transport engine's life: hp_open (its peers, buffers and loop thread), its counters
 * (hp_stats), hp_close (the loop stopped once every caller is out) and hp_free. */
#define _GNU_SOURCE
#include "engine.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct hp_engine *hp_open(const struct hp_config *config, int fd, const uint32_t *peer_ip, const uint16_t *peer_port,
                          char *error, uint32_t error_len)
{
    if (config->world < 1 || config->rank < 0 || config->rank >= config->world || config->world > 65536 ||
        config->window < 1 || !(config->rto_s > 0)) {
        snprintf(error, error_len, "bad configuration: rank %d of %d, window %d, rto %g s", config->rank,
                 config->world, config->window, config->rto_s);
        return NULL;
    }
    struct hp_engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(error, error_len, "no memory for the engine");
        return NULL;
    }
    e->cfg = *config;
    e->fd = fd;
    e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    e->peers = calloc((size_t)config->world, sizeof *e->peers);
    e->table = calloc(BUCKETS, sizeof *e->table);
    e->rx = malloc((size_t)HP_RX_BATCH * RX_BYTES);     /* touched only as far as datagrams fill it */
    uint32_t world = (uint32_t)config->world, window = (uint32_t)config->window;
    int bad = e->wake_fd < 0 || !e->peers || !e->table || !e->rx ||
              out_init(&e->out, 2 * world * window + HP_RX_BATCH + 2 * world + 8, HP_RX_BATCH + world + 8) < 0;
    uint32_t cap = 16;
    while (cap < 2 * window)
        cap <<= 1;
    for (int32_t r = 0; !bad && r < config->world; r++) {
        struct peer *p = &e->peers[r];
        p->addr = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = peer_port[r], .sin_addr.s_addr = peer_ip[r]};
        p->loopback = (ntohl(peer_ip[r]) >> 24) == 127;
        p->mask = cap - 1;
        p->jobs_tail = &p->jobs;
        p->rto = (struct rto){.floor = config->rto_s, .cap = HP_MAX_RTO_S, .rto = config->rto_s};
        p->heard = -1;
        p->seen = calloc(HP_REORDER / 64, sizeof *p->seen);
        p->qp = rv_qp(config->group, (uint32_t)r);
        rv_bth(p->bth, p->qp);
        p->held_since = -1;
        bad = !p->seen;
    }
    for (int i = 0; !bad && i < HP_RX_BATCH; i++) {
        e->rx_iov[i] = (struct iovec){.iov_base = e->rx + (size_t)i * RX_BYTES, .iov_len = RX_BYTES};
        e->rx_mm[i].msg_hdr = (struct msghdr){.msg_iov = &e->rx_iov[i], .msg_iovlen = 1, .msg_control = e->rx_ctl[i]};
    }
    int on = 1;
    setsockopt(fd, IPPROTO_UDP, UDP_GRO, &on, sizeof on);   /* where the kernel has it: trains of datagrams */
    e->gso = 1;
    e->rng = config->drop_seed;
    e->ack_delay_s = config->rto_s / 3;          /* well inside the sender's timeout */
    e->next_resend = INFINITY;
    e->last_beat = -1e9;                          /* the first heartbeat at once */
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&e->mu, NULL);
    if (bad) {
        snprintf(error, error_len, "no memory or no eventfd for the engine: %s", strerror(errno));
        e->fd = -1;                               /* the caller still owns it */
        hp_free(e);
        return NULL;
    }
    if (config->rocev2 && (!(e->inbox = rv_inbox_new(INBOX_DATAGRAMS, e->wake_fd)) ||
                           !(e->port = rv_port_join(config->bind_ip, config->group, e->inbox, error, error_len)) ||
                           (config->rate_port && !(e->rates = rv_rates_join((uint16_t)config->rate_port, error,
                                                                             error_len))))) {
        if (!e->inbox)
            snprintf(error, error_len, "no memory for the engine's RoCEv2 inbox");
        e->fd = -1;
        hp_free(e);
        return NULL;
    }
    int err = pthread_create(&e->thread, NULL, hp_engine_loop, e);
    if (err) {
        snprintf(error, error_len, "cannot start the engine's thread: %s", strerror(err));
        e->fd = -1;
        hp_free(e);
        return NULL;
    }
    e->started = 1;
    return e;
}

void hp_stats_locked(struct hp_engine *e, struct hp_stats *out)
{
    *out = e->stats;
    out->send_errors = __atomic_load_n(&e->stats.send_errors, __ATOMIC_RELAXED);
    if (e->port)
        rv_port_counts(e->port, &out->rocev2_malformed, &out->rocev2_unknown_group);
    if (e->rates)
        out->rocev2_rate_messages = rv_rate_messages(e->rates);
    if (e->inbox)
        out->rocev2_inbox_dropped = rv_inbox_dropped(e->inbox);
}

void hp_stats(struct hp_engine *e, struct hp_stats *out)
{
    pthread_mutex_lock(&e->mu);
    hp_stats_locked(e, out);
    pthread_mutex_unlock(&e->mu);
}

void hp_close(struct hp_engine *e)
{
    pthread_mutex_lock(&e->mu);
    if (e->closing) {
        pthread_mutex_unlock(&e->mu);
        return;
    }
    e->closing = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    uint64_t one = 1;
    if (write(e->wake_fd, &one, sizeof one) < 0) { /* the loop sees closing at its next wake anyway */ }
    if (e->started)
        pthread_join(e->thread, NULL);
    e->started = 0;
    pthread_mutex_lock(&e->mu);
    while (e->callers)
        pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_lock(&e->mu);
    hp_stats_locked(e, &e->stats);              /* the shared counters as they were when we left */
    pthread_mutex_unlock(&e->mu);
    if (e->port)
        rv_port_leave(e->port, e->cfg.group);    /* its reader hands us nothing more */
    e->port = NULL;
    if (e->rates)
        rv_rates_leave(e->rates);
    e->rates = NULL;
    if (e->fd >= 0)
        close(e->fd);
    e->fd = -1;
}

void hp_free(struct hp_engine *e)
{
    if (!e)
        return;
    hp_close(e);
    if (e->wake_fd >= 0)
        close(e->wake_fd);
    for (int32_t r = 0; e->peers && r < e->cfg.world; r++) {
        free(e->peers[r].slots);
        free(e->peers[r].seen);
    }
    free(e->peers);
    for (uint32_t b = 0; e->table && b < BUCKETS; b++)
        for (struct msg *m = e->table[b], *next; m; m = next) {
            next = m->next;
            msg_free(m);
        }
    free(e->table);
    free(e->aborts);
    out_release(&e->out);
    free(e->rx);
    rv_inbox_free(e->inbox);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}
