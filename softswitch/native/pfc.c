/* softswitch's native priority flow control (IEEE 802.1Qbb): lossless classes' ingress buffers,
 * the PAUSE frames sent and taken, the watchdog. The rules, constants and arithmetic are the
 * Python path's (softswitch/pfc.py says what they are); everything here runs in the loop's
 * thread, or under its lock. */
#define _GNU_SOURCE                /* struct mmsghdr (dataplane.h) */
#include <stdlib.h>
#include <string.h>

#include "state.h"

#define OPCODE_PFC 0x0101
#define PFC_LENGTH 34                 /* header, opcode, class-enable vector, 8 quanta */
#define QUANTUM_BITS 512.0
#define NOMINAL_BITRATE 1000000000ULL /* quanta of a port with no bit rate: at 1 Gbit/s */
#define CLASSES 8

enum { MALFORMED_SHORT, MALFORMED_DESTINATION, MALFORMED_OPCODE, MALFORMED_RESERVED };   /* pfc.MALFORMED */

static const uint8_t PFC_DESTINATION[6] = { 0x01, 0x80, 0xc2, 0x00, 0x00, 0x01 };

/* pfc.pause_us */
static double pause_us(uint32_t quanta, uint64_t bits_per_s) {
    return quanta * QUANTUM_BITS * 1e6 / (double)(bits_per_s ? bits_per_s : NOMINAL_BITRATE);
}

/* the PFC frame that pauses (quanta > 0) or lets go (0) class c->priority alone, out of c->port:
 * to the outbox, which the loop empties (ss_pfc_pop_frame) before it sends its turn's frames */
static void send_pfc(ss_dataplane *dp, pfc_class *c, uint32_t quanta, double now) {
    if (quanta) {
        c->pause_sent++;
        c->refresh_at = now + pause_us(quanta, dp->link_bitrate[c->port]) / 2;
    } else {
        c->xon_sent++;
    }
    if (dp->pfc_out_count == dp->pfc_out_cap) {
        uint32_t cap = dp->pfc_out_cap ? 2 * dp->pfc_out_cap : 16;
        pfc_out *grown = realloc(dp->pfc_outbox, cap * sizeof *grown);
        if (!grown) return;                  /* out of memory: the refresh resends it */
        dp->pfc_outbox = grown;
        dp->pfc_out_cap = cap;
    }
    dp->pfc_outbox[dp->pfc_out_count++] = (pfc_out){ c->port, c->priority, quanta };
}

uint32_t ss_pfc_pop_frame(ss_dataplane *dp, int *port, uint8_t *f) {
    if (dp->pfc_out_head == dp->pfc_out_count) {
        dp->pfc_out_head = dp->pfc_out_count = 0;
        return 0;
    }
    pfc_out o = dp->pfc_outbox[dp->pfc_out_head++];
    memset(f, 0, PFC_FRAME_LENGTH);
    memcpy(f, PFC_DESTINATION, 6);
    memcpy(f + 6, dp->macs[o.port], 6);
    f[12] = 0x88, f[13] = 0x08;
    f[14] = OPCODE_PFC >> 8, f[15] = OPCODE_PFC & 0xFF;
    f[17] = (uint8_t)(1u << o.priority);
    f[18 + 2 * o.priority] = (uint8_t)(o.quanta >> 8);
    f[19 + 2 * o.priority] = (uint8_t)o.quanta;
    *port = o.port;
    return PFC_FRAME_LENGTH;
}

static void let_go(ss_dataplane *dp, pfc_class *c, double now) {
    if (!c->pausing) return;
    c->pausing = 0;
    c->pausing_us += now - c->pausing_since;
    dp->refreshing--;
    send_pfc(dp, c, 0, now);
}

static void restore(ss_dataplane *dp, pfc_class *c) {
    if (!c->storm) return;
    c->storm = 0;
    c->restores++;
    queue *q = dp->queues[c->port][c->priority];
    if (q) q->dropping = 0;
}

/* ---- control (pfc.Pfc.configure, set_watchdog) ------------------------------------------ */
void ss_dp_set_lossless(ss_dataplane *dp, int port, int priority, uint32_t xoff, uint32_t xon, uint32_t headroom,
                        uint32_t quanta) {
    if (port < 0 || port >= SS_MAX_PORTS || priority < 0 || priority >= SS_MAX_PRIORITY_QUEUES) return;
    double now = (double)now_us(dp);
    pfc_class *c = dp->pfc[port][priority];
    if (!c) {
        if (!xoff) return;
        c = calloc(1, sizeof *c);
        if (!c) return;
        c->port = port;
        c->priority = priority;
        c->detected_after_us = -1;
        pfc_class **at = &dp->pfc_list;
        while (*at) at = &(*at)->next;
        *at = c;
        dp->pfc[port][priority] = c;
    } else if (!xoff) {
        if (c->lossless) {
            let_go(dp, c, now);          /* the neighbour is not left paused */
            restore(dp, c);
            dp->lossless--;
            queue *q = dp->queues[port][priority];
            if (q) ss_queue_pause(q, now, now);
            c->lossless = 0;
            wake(dp);                    /* its XON goes out now */
        }
        return;
    }
    if (!c->lossless) dp->lossless++;
    c->lossless = 1;
    c->xoff = xoff, c->xon = xon, c->headroom = headroom, c->quanta = quanta;
}

void ss_dp_set_pfc_watchdog(ss_dataplane *dp, uint64_t detect_us, uint64_t restore_us, uint64_t poll_us, int drop) {
    dp->wd = (watchdog){ detect_us, restore_us, poll_us ? poll_us : 1, drop };
    dp->next_poll = (double)now_us(dp) + (double)dp->wd.poll_us;
    wake(dp);
    if (!detect_us)
        for (pfc_class *c = dp->pfc_list; c; c = c->next) restore(dp, c);
}

void ss_dp_set_port_mac(ss_dataplane *dp, int port, const uint8_t *mac) {
    if (port >= 0 && port < SS_MAX_PORTS) memcpy(dp->macs[port], mac, 6);
}

int ss_dp_pfc_malformed(ss_dataplane *dp, int port, uint64_t *out) {
    if (port < 0 || port >= SS_MAX_PORTS) return -1;
    for (int i = 0; i < SS_PFC_MALFORMED_REASONS; i++) out[i] = READ(dp->malformed[port][i]);
    return 0;
}

void ss_pfc_free(ss_dataplane *dp) {
    for (pfc_class *c = dp->pfc_list, *next; c; c = next) { next = c->next; free(c); }
    dp->pfc_list = NULL;
    free(dp->pfc_outbox);
    dp->pfc_outbox = NULL;
}

/* ---- the packet path (pfc.Pfc.admit, add, release) --------------------------------------- */
pfc_class *ss_pfc_admit(ss_dataplane *dp, int port, int priority, uint32_t len) {
    if (port < 0 || port >= SS_MAX_PORTS) return NULL;
    pfc_class *c = dp->pfc[port][priority];
    if (!c || !c->lossless) return NULL;
    if (c->used + len <= (uint64_t)c->xoff + c->headroom) return c;
    c->lossless_drops++;
    return PFC_DROP;
}

void ss_pfc_add(ss_dataplane *dp, pfc_class *c, uint32_t len, double now) {
    c->used += len;
    c->frames++;
    if (c->used > c->peak) c->peak = c->used;
    if (!c->pausing && c->used >= c->xoff) {
        c->pausing = 1;
        c->pausing_since = now;
        c->at_xoff_bytes = c->used;
        c->at_xoff_frames = c->frames;
        dp->refreshing++;
        send_pfc(dp, c, c->quanta, now);
    }
}

void ss_pfc_release(ss_dataplane *dp, pfc_class *c, uint32_t len, double now) {
    c->used -= len;
    c->frames--;
    if (c->pausing && c->used <= c->xon) let_go(dp, c, now);
}

/* a MAC control frame that came in on port (pfc.Pfc.receive) */
void ss_pfc_receive(ss_dataplane *dp, int port, const uint8_t *frame, uint32_t len, double now) {
    int reason = -1;
    if (len < PFC_LENGTH) reason = MALFORMED_SHORT;
    else if (memcmp(frame, PFC_DESTINATION, 6)) reason = MALFORMED_DESTINATION;
    else if (((frame[14] << 8) | frame[15]) != OPCODE_PFC) reason = MALFORMED_OPCODE;
    else if (frame[16]) reason = MALFORMED_RESERVED;
    if (reason >= 0) {
        COUNT(dp->malformed[port][reason], 1);
        return;
    }
    uint8_t enable = frame[17];
    int classes = dp->priority_queues < CLASSES ? dp->priority_queues : CLASSES;
    for (int prio = 0; prio < classes; prio++) {
        pfc_class *c = dp->pfc[port][prio];
        if (!(enable >> prio & 1) || !c || !c->lossless) continue;     /* not lossless here: not honoured */
        uint32_t quanta = (uint32_t)frame[18 + 2 * prio] << 8 | frame[19 + 2 * prio];
        if (quanta) {
            c->pause_received++;
            c->last_pause_rx = now;
        } else {
            c->xon_received++;
        }
        if (c->storm) continue;                     /* the watchdog holds it: PFC is off for it */
        queue *q = ss_queue_get(dp, port, prio);
        if (q) ss_queue_pause(q, now, quanta ? now + pause_us(quanta, dp->link_bitrate[port]) : now);
    }
}

/* ---- the loop's timers (pfc.Pfc.tick, next_timer, the watchdog's poll) -------------------- */
void ss_pfc_drop_queued(ss_dataplane *dp, queue *q, double now) {
    uint32_t n = q->count;
    packet *p = ss_queue_clear(q);
    q->watchdog_drops += n;
    dp->queued -= n;
    COUNT(dp->counters.watchdog_drops, n);
    while (p) {
        packet *next = p->next;
        if (p->buffer) ss_pfc_release(dp, p->buffer, p->wire_len, now);
        free(p);
        p = next;
    }
}

static void poll_watchdog(ss_dataplane *dp, double now) {
    const watchdog *wd = &dp->wd;
    for (pfc_class *c = dp->pfc_list; c; c = c->next) {
        if (!c->lossless) continue;
        queue *q = dp->queues[c->port][c->priority];
        if (c->storm) {
            if (now - c->last_pause_rx >= (double)wd->restore_us) restore(dp, c);
        } else if (q && q->head && q->paused_until > now && now - q->pause_start >= (double)wd->detect_us) {
            c->storm = 1;
            c->storms++;
            c->detected_after_us = now - q->pause_start;
            ss_queue_pause(q, now, now);
            if (wd->drop) {
                q->dropping = 1;
                ss_pfc_drop_queued(dp, q, now);
            }
        }
    }
}

void ss_pfc_tick(ss_dataplane *dp, double now) {
    if (dp->refreshing)
        for (pfc_class *c = dp->pfc_list; c; c = c->next)
            if (c->pausing && c->refresh_at <= now) send_pfc(dp, c, c->quanta, now);
    if (dp->wd.detect_us && now >= dp->next_poll) {
        dp->next_poll = now + (double)dp->wd.poll_us;
        poll_watchdog(dp, now);
    }
}

double ss_pfc_next_timer(const ss_dataplane *dp) {
    double next = -1;
    if (dp->refreshing)
        for (const pfc_class *c = dp->pfc_list; c; c = c->next)
            if (c->pausing && (next < 0 || c->refresh_at < next)) next = c->refresh_at;
    if (dp->wd.detect_us && dp->lossless && (next < 0 || dp->next_poll < next)) next = dp->next_poll;
    return next;
}
