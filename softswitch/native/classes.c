/* softswitch's native egress ports: a port's link and its traffic classes' queues, served by
 * strict priority and weighted round robin. The rules, constants and arithmetic are the Python
 * path's (softswitch/queues.py: depth, paces, departure times; softswitch/classes.py: which class
 * sends next); departures are decided when the port serves a packet, at max(link free, class ready). */
#define _GNU_SOURCE                /* struct mmsghdr (dataplane.h) */
#include <stdlib.h>
#include <string.h>

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

/* ---- the control side: settings and what a class reports (abi.h) ---------------------- */
#define MAX_DEPTH 100000           /* queues.MAX_DEPTH */
#define MAX_BITRATE 400000000000ULL  /* queues.MAX_BITRATE */

static void set_class(ss_dataplane *dp, int port, int priority, class_cfg cfg) {
    dp->classes[port][priority] = cfg;
    if (dp->queues[port][priority]) ss_queue_configure(dp->queues[port][priority], cfg);
}

void ss_dp_set_class(ss_dataplane *dp, int port, int priority, uint32_t depth, uint32_t rate_pps, uint64_t bitrate,
                     uint32_t weight) {
    if (port < SS_NO_PORT || port >= SS_MAX_PORTS || priority < -1 || priority >= SS_MAX_PRIORITY_QUEUES) return;
    if (depth < 1 || depth > MAX_DEPTH || bitrate > MAX_BITRATE) return;
    class_cfg cfg = { depth, bitrate ? 0 : rate_pps, weight, bitrate };
    for (int p = port == SS_NO_PORT ? 0 : port; p < (port == SS_NO_PORT ? SS_MAX_PORTS : port + 1); p++)
        for (int c = priority < 0 ? 0 : priority; c < (priority < 0 ? SS_MAX_PRIORITY_QUEUES : priority + 1); c++)
            set_class(dp, p, c, cfg);
    wake(dp);               /* the loop's timeout may now be shorter */
}

void ss_dp_set_link(ss_dataplane *dp, int port, uint64_t bits_per_s) {
    if (port < SS_NO_PORT || port >= SS_MAX_PORTS || bits_per_s > MAX_BITRATE) return;
    for (int p = port == SS_NO_PORT ? 0 : port; p < (port == SS_NO_PORT ? SS_MAX_PORTS : port + 1); p++) {
        dp->link_bitrate[p] = bits_per_s;
        if (dp->links[p]) ss_link_set_bitrate(dp->links[p], bits_per_s);
    }
    wake(dp);
}

uint32_t ss_dp_queue_length(ss_dataplane *dp, int port, int priority) {
    if (port < 0 || port >= SS_MAX_PORTS || priority < 0 || priority >= SS_MAX_PRIORITY_QUEUES) return 0;
    queue *q = dp->queues[port][priority];
    return q ? q->count : 0;
}

int ss_dp_class_info(ss_dataplane *dp, int port, int priority, ss_class_info *out) {
    if (port < 0 || port >= SS_MAX_PORTS || priority < 0 || priority >= SS_MAX_PRIORITY_QUEUES) return -1;
    memset(out, 0, sizeof *out);
    double now = (double)now_us(dp);
    class_cfg cfg = dp->classes[port][priority];
    const queue *q = dp->queues[port][priority];
    out->depth = cfg.depth, out->rate_pps = cfg.rate_pps, out->weight = cfg.weight, out->bitrate = cfg.bitrate;
    out->link_bitrate = dp->link_bitrate[port];
    if (q) {         /* else: not made yet, what it would be made with */
        out->made = 1;
        out->length = q->count;
        out->drops = q->drops, out->tx_packets = q->tx_packets, out->tx_bytes = q->tx_bytes;
        out->watchdog_drops = q->watchdog_drops;
        out->last_departure = q->last_departure;
        out->next_free = ss_queue_next_free(q);
        out->paused_us = ss_queue_paused_total(q, now);
        out->paused = q->paused_until > now;
        out->dropping = q->dropping;
        uint32_t n = q->recent_n < RECENT ? q->recent_n : RECENT;
        out->recent_n = (int32_t)n;
        for (uint32_t i = 0; i < n; i++) {       /* oldest first */
            uint32_t k = (q->recent_n - n + i) % RECENT;
            out->recent_at[i] = q->recent_at[k];
            out->recent_len[i] = q->recent_len[k];
        }
    } else {
        queue made = { .last_len = 0 };
        port_link link = { .bitrate = dp->link_bitrate[port] };
        ss_link_set_bitrate(&link, link.bitrate);
        made.link = &link;
        ss_queue_configure(&made, cfg);
        out->next_free = ss_queue_next_free(&made);
    }
    const pfc_class *c = dp->pfc[port][priority];
    out->detected_after_us = -1;
    if (c) {
        out->pfc = 1;
        out->lossless = c->lossless;
        out->xoff = c->xoff, out->xon = c->xon, out->headroom = c->headroom, out->quanta = c->quanta;
        out->buffer_bytes = c->used, out->buffer_frames = c->frames, out->buffer_peak = c->peak;
        out->pausing = c->pausing;
        out->pause_sent = c->pause_sent, out->xon_sent = c->xon_sent, out->lossless_drops = c->lossless_drops;
        out->at_xoff_bytes = c->at_xoff_bytes, out->at_xoff_frames = c->at_xoff_frames;
        out->pause_received = c->pause_received, out->xon_received = c->xon_received;
        out->storm = c->storm, out->storms = c->storms, out->restores = c->restores;
        out->pausing_us = c->pausing_us + (c->pausing ? now - c->pausing_since : 0.0);
        out->detected_after_us = c->detected_after_us;
    }
    return 0;
}
