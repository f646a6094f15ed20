/* softswitch's native egress ports: a port's link and its traffic classes' queues, served by
 * strict priority and weighted round robin. The rules, constants and arithmetic are the Python
 * path's (softswitch/queues.py: depth, paces, departure times; softswitch/classes.py: which class
 * sends next); departures are decided when the port serves a packet, at max(link free, class ready). */
#define _GNU_SOURCE                /* struct mmsghdr (dataplane.h) */
#include <stdlib.h>

#include "state.h"

/* what an Ethernet link spends on a frame beyond its bytes (queues.MIN_FRAME, queues.WIRE_OVERHEAD:
 * FCS 4 + preamble and SFD 8 + inter-frame gap 12) */
#define MIN_FRAME 60
#define WIRE_OVERHEAD 24

/* queues.wire_us: µs a frame of len bytes holds a link of bits_per_s */
static inline double wire_us(uint32_t len, uint64_t bits_per_s) {
    return (double)((len > MIN_FRAME ? len : MIN_FRAME) + WIRE_OVERHEAD) * 8e6 / (double)bits_per_s;
}

/* µs a queue's own pace holds it after a packet of len bytes (EgressQueue._pace_us) */
static inline double pace_us(const queue *q, uint32_t len) {
    return q->pace.bitrate ? wire_us(len, q->pace.bitrate) : q->delay_us;
}

static port_link *link_get(ss_dataplane *dp, int port) {
    port_link *l = dp->links[port];
    if (l) return l;
    l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->port = port;
    ss_link_set_bitrate(l, dp->link_bitrate[port]);
    port_link **at = &dp->link_list;
    while (*at) at = &(*at)->next;
    *at = l;
    dp->links[port] = l;
    return l;
}

void ss_link_set_bitrate(port_link *l, uint64_t bits_per_s) {
    l->bitrate = bits_per_s;
    l->next_free = l->last_departure + (bits_per_s ? wire_us(l->last_len, bits_per_s) : 0.0);
}

/* from the last departure, as BMv2 adds a new rate's delay to its last departure */
void ss_queue_configure(queue *q, class_cfg cfg) {
    q->depth = cfg.depth;
    q->weight = cfg.weight;
    q->pace = cfg.bitrate ? (pace){ 0, cfg.bitrate } : (pace){ cfg.rate_pps, 0 };
    q->delay_us = q->pace.rate_pps ? 1e6 / q->pace.rate_pps : 0.0;
    q->free = q->last_departure + pace_us(q, q->last_len);
}

queue *ss_queue_get(ss_dataplane *dp, int port, int priority) {
    queue *q = dp->queues[port][priority];
    if (q) return q;
    port_link *l = link_get(dp, port);
    if (!l) return NULL;
    q = calloc(1, sizeof(queue));
    if (!q) return NULL;
    q->port = port;
    q->priority = priority;
    q->link = l;
    ss_queue_configure(q, dp->classes[port][priority]);
    queue **at = &l->queues;        /* highest priority first */
    while (*at && (*at)->priority > priority) at = &(*at)->next_in_link;
    q->next_in_link = *at;
    *at = q;
    dp->queues[port][priority] = q;
    return q;
}

int ss_queue_push(queue *q, packet *p, double now) {
    if (q->count >= q->depth) { q->drops++; return 0; }
    p->queued = now;
    p->next = NULL;
    if (q->tail) q->tail->next = p; else q->head = p;
    q->tail = p;
    q->count++;
    q->link->queued++;
    return 1;
}

/* when the head may leave as far as the class goes: queued, its pace free, not paused */
static inline double ready(const queue *q) {
    double r = q->head->queued;
    if (q->free > r) r = q->free;
    return q->paused_until > r ? q->paused_until : r;
}

double ss_queue_next_free(const queue *q) {
    return q->free > q->link->next_free ? q->free : q->link->next_free;
}

static void departs(queue *q, double departure, uint32_t len) {
    port_link *l = q->link;
    q->last_departure = departure;
    q->last_len = len;
    q->free = departure + pace_us(q, len);
    l->last_departure = departure;
    l->last_len = len;
    l->next_free = l->bitrate ? departure + wire_us(len, l->bitrate) : departure;
    q->tx_packets++;
    q->tx_bytes += len;
    q->recent_at[q->recent_n % RECENT] = departure;
    q->recent_len[q->recent_n % RECENT] = len;
    q->recent_n++;
}

int ss_queue_leaves_now(queue *q, uint32_t len, double now) {
    if (q->head || q->free > now || q->link->next_free > now || q->paused_until > now) return 0;
    departs(q, now, len);
    return 1;
}

packet *ss_queue_take(queue *q, double departure) {
    packet *p = q->head;
    q->head = p->next;
    if (!q->head) q->tail = NULL;
    q->count--;
    q->link->queued--;
    departs(q, departure, p->wire_len);
    return p;
}

packet *ss_queue_clear(queue *q) {
    packet *all = q->head;
    q->link->queued -= q->count;
    q->head = q->tail = NULL;
    q->count = 0;
    return all;
}

double ss_link_next_event(const port_link *l) {
    if (!l->queued) return -1;
    double soonest = -1;
    for (const queue *q = l->queues; q; q = q->next_in_link)
        if (q->head) {
            double r = ready(q);
            if (soonest < 0 || r < soonest) soonest = r;
        }
    return soonest > l->next_free ? soonest : l->next_free;
}

/* the weighted classes (classes.PortLink._round_robin): the one whose turn it is while it may
 * send, else the next one in the ring with a packet ready */
static queue *round_robin(port_link *l, double now) {
    queue *turn = l->turn;
    if (turn && turn->weight && l->left && turn->head && ready(turn) <= now) {
        l->left--;
        return turn;
    }
    queue *start = turn && turn->weight ? turn->next_in_link : l->queues;
    for (int wrapped = 0; wrapped < 2; wrapped++) {
        for (queue *q = wrapped ? l->queues : start; q && (!wrapped || q != start); q = q->next_in_link) {
            if (!q->weight || !q->head || ready(q) > now) continue;
            l->turn = q;
            l->left = q->weight - 1;
            return q;
        }
    }
    return NULL;
}

queue *ss_link_pick(port_link *l, double now, double *departure) {
    double free = l->next_free;
    if (free > now || !l->queued) return NULL;
    int weighted = 0;
    queue *q = NULL;
    for (queue *c = l->queues; c; c = c->next_in_link) {
        if (!c->head) continue;
        if (c->weight) { weighted = 1; continue; }
        if (ready(c) <= now) { q = c; break; }
    }
    if (!q && weighted) q = round_robin(l, now);
    if (!q) return NULL;
    double r = ready(q);
    *departure = r > free ? r : free;
    return q;
}

/* queues.EgressQueue.pause */
void ss_queue_pause(queue *q, double now, double until) {
    if (q->paused_until > now) {
        if (until > now) { q->paused_until = until; return; }
        q->paused_us += now - q->pause_start;
    } else {
        q->paused_us += q->paused_until - q->pause_start;
    }
    q->pause_start = now;
    q->paused_until = until > now ? until : now;
}

double ss_queue_paused_total(const queue *q, double now) {
    double end = now < q->paused_until ? now : q->paused_until;
    return q->paused_us + (end > q->pause_start ? end - q->pause_start : 0.0);
}
