/* softswitch's native data plane: the loop of softswitch/dataplane.py and packet_path.py in C.
 *
 * One thread waits on the ports' sockets (epoll): each port's AF_PACKET socket (the Python side
 * opens them, ports.py, and hands their fds), read with recvmmsg and written with sendmmsg, and
 * where one is open, the port's AF_XDP socket (xsk.c: the interface's frames redirected to it by
 * XDP, read and written through rings), which then carries the port's frames while the AF_PACKET
 * socket stays to read whatever XDP passes on. Each frame runs through the
 * program's pipeline (abi.h: parse, verify, ingress), hands copies to the replication engine
 * (multicast groups, clone sessions), puts packets in per-port, per-class egress queues (classes.c:
 * depth, a pace in packets or bits per second, a link per port its classes share, served by strict
 * priority or weighted round robin), takes them off when their port serves them, runs egress,
 * deparses and sends them with sendmmsg. A MAC control frame (EtherType 0x8808) that comes in is
 * the MAC's, never the pipeline's: pfc.c takes it (802.1Qbb PFC), and counts the lossless classes'
 * buffers, whose PAUSE frames the loop sends with its turn's others. The order of steps, the instance
 * types and the metadata a copy keeps are the Python path's (which follows BMv2's
 * simple_switch.cpp); so are the loop's bounds (bursts, drain rounds, the internal queue).
 *
 * The loop holds `lock` while it processes a burst; the control side (Python, ctypes) takes it
 * around a write batch, so a packet sees a batch whole or not at all. A pipeline step's failure
 * drops that packet and counts it by the status's name; nothing a frame holds stops the loop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "state.h"

#define RX_BURST 128               /* frames read from one port before looking at the others */
#define INTERNAL_CAPACITY 1024     /* resubmitted/recirculated packets waiting (simple_switch's) */
#define DRAIN_ROUNDS 64            /* rounds of egress + internal per loop turn */
#define MAX_TIMEOUT_MS 500
#define XSK_RECHECK_US 5000000     /* after a port's socket read "down": how long the loop looks for its interface gone */
#define XSK_EVENT 0x10000          /* epoll data: a port's AF_XDP socket (else its AF_PACKET socket) */
#define NO_TRUNCATION (1ULL << 62)
#define MIRROR_SESSION_ID_MASK 0x7FFF

enum { NORMAL, INGRESS_CLONE, EGRESS_CLONE, COALESCED, RECIRC, REPLICATION, RESUBMIT };

__attribute__((weak)) const char *ss_status_name(int status) {
    static const char *names[SS_STATUS_COUNT] = {
        "ok", "abort", "bad_index", "div_zero", "too_long", "unsupported" };
    return status >= 0 && status < SS_STATUS_COUNT ? names[status] : "unknown";
}

uint64_t ss_now_us(const ss_dataplane *dp) { return now_us(dp); }

/* ---- packets ------------------------------------------------------------------------ */
static packet *packet_new(ss_dataplane *dp, const uint8_t *frame, uint32_t len) {
    packet *p = malloc(sizeof(packet) + dp->state_alloc + len);
    if (!p) return NULL;
    p->next = NULL;
    p->state = (uint8_t *)(p + 1);
    p->frame = p->state + dp->state_alloc;
    p->len = len;
    p->consumed = 0;
    p->buffer = NULL;
    if (len) memcpy(p->frame, frame, len);
    return p;
}

/* a copy: same state, same frame and payload */
static packet *packet_copy(ss_dataplane *dp, const packet *src) {
    packet *p = packet_new(dp, src->frame, src->len);
    if (!p) return NULL;
    memcpy(p->state, src->state, dp->state_size);
    p->consumed = src->consumed;
    return p;
}

static void failed(ss_dataplane *dp, int status) {
    COUNT(dp->counters.errors, 1);
    COUNT(dp->counters.by_status[status > 0 && status < SS_STATUS_COUNT ? status : SS_ERR_UNSUPPORTED], 1);
}

static inline uint64_t get(const packet *p, int meta) { return ss_get(p->state, meta); }
static inline void set(packet *p, int meta, uint64_t v) { ss_set(p->state, meta, v); }

/* the bytes the link will carry: the packet's length, truncated (queues.py) */
static uint32_t wire_length(const packet *p) {
    uint64_t truncate = get(p, SS_TRUNCATE_LENGTH);
    return truncate < p->len ? (uint32_t)truncate : p->len;
}

/* ---- the packet path (packet_path.py) ------------------------------------------------ */
static int ingress_state(ss_dataplane *dp, packet *p);
static void enqueue(ss_dataplane *dp, int port, packet *p, int straight);
static void drain_queues(ss_dataplane *dp);
static void send_waiting(ss_dataplane *dp);

static void push_internal(ss_dataplane *dp, packet *p) {
    if (dp->internal_count >= INTERNAL_CAPACITY) {
        COUNT(dp->counters.queue_drops, 1);
        free(p);
        return;
    }
    p->next = NULL;
    if (dp->internal_tail) dp->internal_tail->next = p; else dp->internal_head = p;
    dp->internal_tail = p;
    dp->internal_count++;
}

/* copies to a group's or session's (port, rid) targets; a copy is a new packet in BMv2: only
 * the session's truncation applies to it */
static void replicate(ss_dataplane *dp, const packet *p, const replicas *r, uint64_t truncate) {
    if (!r) return;
    for (uint32_t i = 0; i < r->n; i++) {
        packet *c = packet_copy(dp, p);
        if (!c) { failed(dp, SS_ERR_UNSUPPORTED); continue; }
        if (dp->has_rid) set(c, SS_EGRESS_RID, r->rids[i]);
        set(c, SS_TRUNCATE_LENGTH, truncate);
        enqueue(dp, (int)r->ports[i], c, 0);
    }
}

static uint64_t session_truncation(const replicas *r) {
    return r->truncate ? r->truncate : NO_TRUNCATION;
}

/* BMv2 parses the original frame again (with its ingress port), then resets the metadata and
 * copies in only the preserved field list */
static int clone_ingress(ss_dataplane *dp, const packet *p, uint32_t session, uint64_t ingress_port) {
    const replicas *r = dp->sessions[session];
    if (!r) return SS_OK;
    packet *c = packet_new(dp, p->frame, p->len);
    if (!c) return SS_ERR_UNSUPPORTED;
    memcpy(c->state, dp->template_state, dp->state_size);
    set(c, SS_INGRESS_PORT, ingress_port);
    int st = ss_parse(dp->objects, c->state, c->frame, c->len, &c->consumed);
    if (st == SS_OK) {
        ss_clear_metadata(c->state);
        ss_copy_field_list((int)get(p, SS_CLONE_FIELD_LIST), p->state, c->state);
        set(c, SS_INSTANCE_TYPE, INGRESS_CLONE);
        set(c, SS_HIDDEN_PACKET_LENGTH, p->len);
        set(c, SS_INGRESS_LENGTH, p->len);
        replicate(dp, c, r, session_truncation(r));
    }
    free(c);
    return st;
}

static void clone_egress(ss_dataplane *dp, const packet *p, uint32_t session) {
    const replicas *r = dp->sessions[session];
    if (!r) return;
    packet *c = packet_copy(dp, p);       /* headers as egress left them, metadata reset */
    if (!c) { failed(dp, SS_ERR_UNSUPPORTED); return; }
    ss_clear_metadata(c->state);
    ss_copy_field_list((int)get(p, SS_CLONE_FIELD_LIST), p->state, c->state);
    set(c, SS_INSTANCE_TYPE, EGRESS_CLONE);
    set(c, SS_RESUBMIT_FIELD_LIST, 0);
    set(c, SS_RECIRCULATE_FIELD_LIST, 0);
    set(c, SS_CLONE_FIELD_LIST, 0);
    set(c, SS_LEARN_ID, 0);
    replicate(dp, c, r, session_truncation(r));
    free(c);
}

/* frame as a new packet of p's (resubmitted or recirculated): fresh metadata but the fields of
 * p's field list, queued to run again; a status */
static int push_again(ss_dataplane *dp, const packet *p, const uint8_t *frame, uint32_t len, uint64_t field_list,
                      uint64_t instance_type) {
    packet *r = packet_new(dp, frame, len);
    if (!r) return SS_ERR_UNSUPPORTED;
    memcpy(r->state, dp->template_state, dp->state_size);
    ss_copy_field_list((int)field_list, p->state, r->state);
    set(r, SS_INSTANCE_TYPE, instance_type);
    push_internal(dp, r);
    return SS_OK;
}

/* a packet whose metadata is set (a new arrival, resubmitted, recirculated): parse, verify,
 * ingress, then where it goes. Takes p (frees or queues it); a status on failure. */
static int ingress_state(ss_dataplane *dp, packet *p) {
    set(p, SS_PACKET_LENGTH, p->len);
    set(p, SS_HIDDEN_PACKET_LENGTH, p->len);
    set(p, SS_INGRESS_LENGTH, p->len);
    set(p, SS_TRUNCATE_LENGTH, NO_TRUNCATION);
    int st = ss_parse(dp->objects, p->state, p->frame, p->len, &p->consumed);
    if (st) goto out;
    int ok = 1;
    if ((st = ss_verify_checksums(dp->objects, p->state, &ok))) goto out;
    if (dp->has_checksum_error) set(p, SS_CHECKSUM_ERROR, ok ? 0 : 1);
    if ((st = ss_ingress(dp->objects, p->state))) goto out;

    uint64_t clone = get(p, SS_CLONE_SESSION);
    if (clone) {
        set(p, SS_CLONE_SESSION, 0);
        if ((st = clone_ingress(dp, p, (uint32_t)(clone & MIRROR_SESSION_ID_MASK), get(p, SS_INGRESS_PORT))))
            goto out;
    }
    uint64_t resubmit = get(p, SS_RESUBMIT_FIELD_LIST);
    if (resubmit) {
        st = push_again(dp, p, p->frame, p->len, resubmit, RESUBMIT);
        goto out;
    }
    if (dp->has_mcast) {
        uint64_t grp = get(p, SS_MCAST_GRP);
        if (grp) {
            set(p, SS_INSTANCE_TYPE, REPLICATION);
            replicate(dp, p, grp <= MAX_GROUP ? dp->groups[grp] : NULL, NO_TRUNCATION);
            goto out;
        }
    }
    uint64_t port = get(p, SS_EGRESS_SPEC);
    if (port == (uint64_t)dp->drop_port) {
        COUNT(dp->counters.dropped, 1);
        goto out;
    }
    set(p, SS_INSTANCE_TYPE, NORMAL);
    enqueue(dp, (int)port, p, 1);
    return SS_OK;
out:
    free(p);
    return st;
}

static void arrival(ss_dataplane *dp, int port, const uint8_t *frame, uint32_t len) {
    packet *p = packet_new(dp, frame, len);
    if (!p) { failed(dp, SS_ERR_UNSUPPORTED); return; }
    memcpy(p->state, dp->template_state, dp->state_size);
    set(p, SS_INGRESS_PORT, (uint64_t)port);
    if (dp->has_ingress_ts)                 /* only on arrival, as in BMv2 */
        set(p, SS_INGRESS_GLOBAL_TIMESTAMP, now_us(dp) & dp->mask_ingress_ts);
    int st = ingress_state(dp, p);
    if (st) failed(dp, st);
}

/* frame bytes go to a tx slot; sent with the loop turn's others (at once when TX_BATCH wait) */
static uint8_t *tx_next(ss_dataplane *dp) {
    if (dp->tx_count == TX_BATCH) send_waiting(dp);
    return dp->tx_buf + (size_t)dp->tx_count * SS_MAX_FRAME;
}

static void transmit(ss_dataplane *dp, int port, uint32_t len) {
    dp->tx[dp->tx_count].port = port;
    dp->tx[dp->tx_count].len = len;
    dp->tx_count++;
    if (dp->tx_count == TX_BATCH) send_waiting(dp);
}

/* the PFC frames pfc.c asked for, with the turn's others (MAC control frames skip the queues) */
static void send_pfc_frames(ss_dataplane *dp) {
    int port;
    uint32_t len;
    while ((len = ss_pfc_pop_frame(dp, &port, tx_next(dp)))) transmit(dp, port, len);
}

/* a packet whose departure time has come: egress, deparse, send (or recirculate). Takes p. */
static int depart(ss_dataplane *dp, queue *q, packet *p, uint64_t now) {
    int st;
    if (dp->has_egress_ts) set(p, SS_EGRESS_GLOBAL_TIMESTAMP, now & dp->mask_egress_ts);
    if (dp->has_queueing) {         /* as BMv2: now less the truncated enqueue time */
        set(p, SS_DEQ_TIMEDELTA, (now - get(p, SS_ENQ_TIMESTAMP)) & dp->mask_deq_timedelta);
        set(p, SS_DEQ_QDEPTH, q->count);
        if (dp->has_qid) set(p, SS_QID, (uint64_t)q->priority);
    }
    set(p, SS_EGRESS_PORT, (uint64_t)q->port);
    set(p, SS_EGRESS_SPEC, (uint64_t)((dp->drop_port + 1) & 0x1FF));   /* not dropped, as BMv2 */
    set(p, SS_PACKET_LENGTH, get(p, SS_HIDDEN_PACKET_LENGTH));
    if ((st = ss_egress(dp->objects, p->state))) goto out;

    uint64_t clone = get(p, SS_CLONE_SESSION);
    if (clone) {
        set(p, SS_CLONE_SESSION, 0);
        clone_egress(dp, p, (uint32_t)(clone & MIRROR_SESSION_ID_MASK));
    }
    if (get(p, SS_EGRESS_SPEC) == (uint64_t)dp->drop_port) {
        COUNT(dp->counters.dropped, 1);
        goto out;
    }
    if ((st = ss_update_checksums(dp->objects, p->state))) goto out;
    uint8_t *out = tx_next(dp);
    uint32_t written = 0, payload = p->len - p->consumed;
    if ((st = ss_deparse(dp->objects, p->state, out, SS_MAX_FRAME, &written))) goto out;
    if (written + payload > SS_MAX_FRAME) { st = SS_ERR_TOO_LONG; goto out; }
    memcpy(out + written, p->frame + p->consumed, payload);
    uint32_t len = written + payload;
    uint64_t recirculate = get(p, SS_RECIRCULATE_FIELD_LIST);
    if (recirculate) {    /* a new packet in BMv2, of the whole deparsed frame (not truncated) */
        st = push_again(dp, p, out, len, recirculate, RECIRC);
        goto out;
    }
    uint64_t truncate = get(p, SS_TRUNCATE_LENGTH);
    if (truncate < len) len = (uint32_t)truncate;
    transmit(dp, q->port, len);
out:
    free(p);
    return st;
}

/* to the egress queue of port (and the packet's priority). A packet on the straight path (not
 * a copy) skips a queue that would hold only it, due at once, when no packet waits anywhere
 * in the switch: it departs now, with the same metadata. A packet of a lossless class is counted
 * in its ingress port's buffer while it waits (pfc.c). Takes p. */
static void enqueue(ss_dataplane *dp, int port, packet *p, int straight) {
    uint64_t prio = dp->has_priority ? get(p, SS_PRIORITY) : 0;
    if (port < 0 || port >= SS_MAX_PORTS || prio >= (uint64_t)dp->priority_queues) {
        COUNT(dp->counters.dropped, 1);      /* as simple_switch: a queue the port lacks */
        free(p);
        return;
    }
    queue *q = ss_queue_get(dp, port, (int)prio);
    if (!q) { failed(dp, SS_ERR_UNSUPPORTED); free(p); return; }
    if (q->dropping) {                       /* the PFC watchdog's: a storm on this queue */
        q->watchdog_drops++;
        COUNT(dp->counters.watchdog_drops, 1);
        free(p);
        return;
    }
    uint64_t now = now_us(dp);
    if (dp->has_queueing) {
        set(p, SS_ENQ_TIMESTAMP, now & dp->mask_enq_ts);
        set(p, SS_ENQ_QDEPTH, q->count);
    }
    p->wire_len = wire_length(p);
    if (straight && !dp->queued && ss_queue_leaves_now(q, p->wire_len, (double)now)) {
        int st = depart(dp, q, p, now);
        if (st) failed(dp, st);
        return;
    }
    pfc_class *c = dp->lossless ? ss_pfc_admit(dp, (int)get(p, SS_INGRESS_PORT), (int)prio, p->wire_len) : NULL;
    if (c == PFC_DROP) {
        COUNT(dp->counters.lossless_drops, 1);
        free(p);
    } else if (ss_queue_push(q, p, (double)now)) {
        dp->queued++;
        if (c) {
            p->buffer = c;
            ss_pfc_add(dp, c, p->wire_len, (double)now);
        }
    } else {
        COUNT(dp->counters.queue_drops, 1);
        if (c) {                             /* a lossless class lost to a queue too shallow */
            c->lossless_drops++;
            COUNT(dp->counters.lossless_drops, 1);
        }
        free(p);
    }
}

static void run_internal(ss_dataplane *dp) {
    int budget = INTERNAL_CAPACITY;
    while (dp->internal_head && budget--) {
        packet *p = dp->internal_head;
        dp->internal_head = p->next;
        if (!dp->internal_head) dp->internal_tail = NULL;
        dp->internal_count--;
        int st = ingress_state(dp, p);
        if (st) failed(dp, st);
    }
}

static void drain_queues(ss_dataplane *dp) {
    if (!dp->queued && !dp->internal_head && !dp->refreshing && !dp->wd.detect_us) return;
    uint64_t now = now_us(dp);
    if (dp->refreshing || dp->wd.detect_us) ss_pfc_tick(dp, (double)now);
    if (!dp->queued && !dp->internal_head) return;
    for (int round = 0; round < DRAIN_ROUNDS; round++) {   /* a program that recirculates forever must not wedge the loop */
        int progress = 0;
        for (port_link *l = dp->link_list; l; l = l->next) {
            double departure;
            queue *q;
            if (l->queued && (q = ss_link_pick(l, (double)now, &departure))) {  /* the link says which class sends */
                progress = 1;
                dp->queued--;
                packet *p = ss_queue_take(q, departure);
                if (p->buffer) ss_pfc_release(dp, p->buffer, p->wire_len, (double)now);
                int st = depart(dp, q, p, now);
                if (st) failed(dp, st);
            }
        }
        if (dp->internal_head) {
            run_internal(dp);
            progress = 1;
        }
        if (!progress) return;
    }
}

/* ---- port I/O ----------------------------------------------------------------------- */
static void packet_in(ss_dataplane *dp, const uint8_t *frame, uint32_t len) {
    COUNT(dp->counters.packet_in, 1);
    pthread_mutex_lock(&dp->io_lock);
    if (dp->ring_count == PACKET_IN_RING) {
        pthread_mutex_unlock(&dp->io_lock);
        COUNT(dp->counters.packet_in_lost, 1);
        return;
    }
    uint8_t *copy = malloc(len ? len : 1);
    if (copy) {
        memcpy(copy, frame, len);
        ring_frame *slot = &dp->ring[(dp->ring_head + dp->ring_count) % PACKET_IN_RING];
        slot->len = len;
        slot->data = copy;
        dp->ring_count++;
    }
    pthread_mutex_unlock(&dp->io_lock);
    if (!copy) { COUNT(dp->counters.packet_in_lost, 1); return; }
    uint64_t one = 1;
    if (write(dp->packet_in_fd, &one, sizeof one) < 0) { /* the counter is full: still readable */ }
}

/* a run of one port's held frames (tx slots first..first+count) by its AF_PACKET socket, a
 * sendmmsg at a time: a frame the kernel refused is lost; the rest go */
static void send_packet_socket(ss_dataplane *dp, int fd, uint32_t first, uint32_t count, uint32_t *ok,
                               uint32_t *lost) {
    for (uint32_t k = 0; k < count; k++) {
        dp->tx_iov[k].iov_base = dp->tx_buf + (size_t)(first + k) * SS_MAX_FRAME;
        dp->tx_iov[k].iov_len = dp->tx[first + k].len;
    }
    uint32_t k = 0;
    *ok = *lost = 0;
    while (k < count) {
        int done = sendmmsg(fd, dp->tx_msgs + k, count - k, 0);
        if (done < 0) done = 0;
        *ok += done;
        k += done;
        if (k < count) { (*lost)++; k++; }
    }
}

/* the same run by its AF_XDP socket (copied into its UMEM; what it cannot take now waits there) */
static void send_xsk(ss_dataplane *dp, ss_xsk *x, uint32_t first, uint32_t count, uint32_t *ok, uint32_t *lost) {
    for (uint32_t k = 0; k < count; k++)
        dp->tx_frames[k] = (ss_xsk_frame){ dp->tx_buf + (size_t)(first + k) * SS_MAX_FRAME, dp->tx[first + k].len };
    ss_xsk_tx(x, dp->tx_frames, count, ok, lost);
}

static void count_sent(ss_dataplane *dp, int port, uint32_t ok, uint32_t lost) {
    COUNT(dp->port_counters[port].tx, ok);
    COUNT(dp->port_counters[port].tx_errors, lost);
    COUNT(dp->counters.tx, ok + lost);
}

/* the held frames, back to back: a run of one port's frames at a time */
static void send_waiting(ss_dataplane *dp) {
    uint32_t n = dp->tx_count, i = 0;
    while (i < n) {
        int port = dp->tx[i].port;
        int fd = dp->fds[port];
        if (fd < 0 || port == dp->cpu_port) {
            if (port == dp->cpu_port) packet_in(dp, dp->tx_buf + (size_t)i * SS_MAX_FRAME, dp->tx[i].len);
            else COUNT(dp->counters.dropped, 1);      /* no interface behind the number: lost, as on BMv2 */
            i++;
            continue;
        }
        uint32_t count = 0, ok, lost;
        while (i + count < n && dp->tx[i + count].port == port) count++;
        if (dp->xsks[port]) send_xsk(dp, dp->xsks[port], i, count, &ok, &lost);
        else send_packet_socket(dp, fd, i, count, &ok, &lost);
        count_sent(dp, port, ok, lost);
        i += count;
    }
    dp->tx_count = 0;
}

/* frames an AF_XDP socket's kernel could not take when they were sent: again, 1 ms later at most */
static int xsks_waiting(const ss_dataplane *dp) {
    for (uint32_t i = 0; i < dp->xsk_count; i++)
        if (ss_xsk_tx_waiting(dp->xsks[dp->xsk_ports[i]])) return 1;
    return 0;
}

static void flush_xsks(ss_dataplane *dp) {
    for (uint32_t i = 0; i < dp->xsk_count; i++) {
        int port = dp->xsk_ports[i];
        uint32_t ok, lost;
        if (!ss_xsk_tx_waiting(dp->xsks[port])) continue;
        ss_xsk_tx(dp->xsks[port], NULL, 0, &ok, &lost);
        count_sent(dp, port, ok, lost);
    }
}

/* A port's interface removed under the running switch: the kernel took its XDP program and
 * unbound its AF_XDP socket; the socket goes too (the port's frames, from now on, to its
 * AF_PACKET socket, as dead as the interface). Looked at when a socket says its interface is down,
 * and every loop turn (at least every MAX_TIMEOUT_MS) for XSK_RECHECK_US after: the socket can
 * read "down" while the interface is still being removed, and nothing wakes the loop again. */
static void close_gone_xsks(ss_dataplane *dp) {
    dp->check_xsks = 0;
    for (uint32_t i = 0; i < dp->xsk_count;) {
        int port = dp->xsk_ports[i];
        if (!ss_xsk_gone(dp->xsks[port])) { i++; continue; }
        epoll_ctl(dp->epfd, EPOLL_CTL_DEL, ss_xsk_fd(dp->xsks[port]), NULL);
        ss_xsk_close(dp->xsks[port]);
        dp->xsks[port] = NULL;
        dp->port_io[port] = PORT_XSK_GONE;
        dp->xsk_ports[i] = dp->xsk_ports[--dp->xsk_count];
    }
}

/* up to RX_BATCH frames waiting on a port's AF_PACKET socket into dp->frames (data NULL: longer
 * than SS_MAX_FRAME, cut by the kernel) */
static uint32_t read_packet_socket(ss_dataplane *dp, int port) {
    for (int i = 0; i < RX_BATCH; i++) dp->rx_msgs[i].msg_hdr.msg_flags = 0;
    int got = recvmmsg(dp->fds[port], dp->rx_msgs, RX_BATCH, MSG_DONTWAIT, NULL);
    if (got < 0 && (errno == ENETDOWN || errno == ENXIO) && dp->xsk_count) {
        dp->check_xsks = 1;
        dp->xsk_recheck_until = now_us(dp) + XSK_RECHECK_US;
    }
    for (int i = 0; i < got; i++)
        dp->rx_frames[i] = (ss_xsk_frame){ dp->rx_msgs[i].msg_hdr.msg_flags & MSG_TRUNC ? NULL
                                        : dp->rx_buf + (size_t)i * SS_MAX_FRAME, dp->rx_msgs[i].msg_len };
    return got > 0 ? (uint32_t)got : 0;
}

/* a port's waiting frames, from its AF_XDP socket (x) or its AF_PACKET socket (x NULL) */
static void receive_burst(ss_dataplane *dp, int port, ss_xsk *x) {
    uint32_t received = 0;
    while (received < RX_BURST) {
        uint32_t got = x ? ss_xsk_rx(x, dp->rx_frames, RX_BATCH) : read_packet_socket(dp, port);
        if (!got) break;
        received += got;
        for (uint32_t i = 0; i < got; i++) {
            if (!dp->rx_frames[i].data) {         /* longer than SS_MAX_FRAME, or not a whole frame */
                failed(dp, SS_ERR_TOO_LONG);
                continue;
            }
            const uint8_t *f = dp->rx_frames[i].data;
            if (dp->rx_frames[i].len >= 14 && f[12] == 0x88 && f[13] == 0x08) {   /* MAC control: the MAC's (pfc.c) */
                COUNT(dp->counters.mac_control, 1);
                ss_pfc_receive(dp, port, f, dp->rx_frames[i].len, (double)now_us(dp));
                continue;
            }
            arrival(dp, port, f, dp->rx_frames[i].len);
            /* BMv2's egress runs while ingress takes the next packet: what may leave now leaves
             * before the next arrival is queued */
            if (dp->queued || dp->internal_head) drain_queues(dp);
        }
        if (x) ss_xsk_rx_done(x, got);
        if (got < RX_BATCH) break;
    }
    COUNT(dp->port_counters[port].rx, received);
    COUNT(dp->counters.rx, received);
}

static void take_packet_outs(ss_dataplane *dp) {
    uint64_t v;
    if (read(dp->wakefd, &v, sizeof v) < 0) { /* nothing: EAGAIN */ }
    pthread_mutex_lock(&dp->io_lock);
    ring_frame *outs = dp->outs;
    uint32_t n = dp->outs_count;
    dp->outs = NULL;
    dp->outs_count = dp->outs_cap = 0;
    pthread_mutex_unlock(&dp->io_lock);
    for (uint32_t i = 0; i < n; i++) {
        COUNT(dp->counters.packet_out, 1);
        if (dp->cpu_port >= 0) arrival(dp, dp->cpu_port, outs[i].data, outs[i].len);
        free(outs[i].data);
    }
    free(outs);
}

static int timeout_ms(ss_dataplane *dp) {
    if (dp->internal_head) return 0;
    if (xsks_waiting(dp)) return 1;
    double next = ss_pfc_next_timer(dp);
    for (const port_link *l = dp->link_list; l; l = l->next) {
        double at = ss_link_next_event(l);
        if (at >= 0 && (next < 0 || at < next)) next = at;
    }
    if (next < 0) return MAX_TIMEOUT_MS;
    double wait = next - (double)now_us(dp);
    if (wait <= 0) return 0;
    double ms = ceil(wait / 1000.0);
    return ms > MAX_TIMEOUT_MS ? MAX_TIMEOUT_MS : (int)ms;
}

static void *loop(void *arg) {
    ss_dataplane *dp = arg;
    struct epoll_event events[64];
    while (!__atomic_load_n(&dp->stopping, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&dp->lock);
        int timeout = timeout_ms(dp);
        pthread_mutex_unlock(&dp->lock);
        int n = epoll_wait(dp->epfd, events, 64, timeout);
        if (n < 0 && errno != EINTR) break;
        pthread_mutex_lock(&dp->lock);
        for (int i = 0; i < n; i++) {
            uint32_t what = events[i].data.u32;
            int port = (int)(what & ~XSK_EVENT);
            if (what == SS_MAX_PORTS) take_packet_outs(dp);
            else receive_burst(dp, port, what & XSK_EVENT ? dp->xsks[port] : NULL);
        }
        run_internal(dp);
        drain_queues(dp);
        send_pfc_frames(dp);
        send_waiting(dp);
        flush_xsks(dp);
        if (dp->check_xsks || (dp->xsk_count && now_us(dp) < dp->xsk_recheck_until)) close_gone_xsks(dp);
        pthread_mutex_unlock(&dp->lock);
        /* a control thread waiting for the lock gets it before the next burst (a mutex is not
         * fair: at saturation the loop would take it back at once) */
        while (__atomic_load_n(&dp->writers, __ATOMIC_ACQUIRE)) sched_yield();
    }
    return NULL;
}

/* ---- control ------------------------------------------------------------------------ */
/* message i of a recvmmsg/sendmmsg batch reads or writes iov[i] */
static void one_iovec_each(struct mmsghdr *msgs, struct iovec *iov, int n) {
    for (int i = 0; i < n; i++) {
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
}

ss_dataplane *ss_dp_new(int cpu_port, int drop_port, int priority_queues,
                        uint32_t queue_depth, uint32_t queue_rate_pps, uint64_t queue_bitrate) {
    if (priority_queues < 1 || priority_queues > SS_MAX_PRIORITY_QUEUES) return NULL;
    ss_dataplane *dp = calloc(1, sizeof *dp);
    if (!dp) return NULL;
    pthread_mutex_init(&dp->lock, NULL);
    pthread_mutex_init(&dp->io_lock, NULL);
    clock_gettime(CLOCK_MONOTONIC, &dp->start);
    dp->cpu_port = cpu_port;
    dp->drop_port = drop_port;
    dp->priority_queues = priority_queues;
    for (int i = 0; i < SS_MAX_PORTS; i++) {
        dp->fds[i] = -1;
        dp->link_bitrate[i] = queue_bitrate;
        for (int c = 0; c < SS_MAX_PRIORITY_QUEUES; c++)
            dp->classes[i][c] = (class_cfg){ queue_depth, queue_bitrate ? 0 : queue_rate_pps, 0, 0 };
    }
    dp->state_size = ss_state_size();
    dp->state_alloc = (dp->state_size + 15) & ~(size_t)15;
    dp->template_state = calloc(1, dp->state_alloc ? dp->state_alloc : 16);
    dp->rx_buf = malloc((size_t)RX_BATCH * SS_MAX_FRAME);     /* pages touched only as frames come */
    dp->tx_buf = malloc((size_t)TX_BATCH * SS_MAX_FRAME);
    dp->epfd = epoll_create1(EPOLL_CLOEXEC);
    dp->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    dp->packet_in_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    dp->objects = ss_objects_new();
    if (!dp->template_state || !dp->rx_buf || !dp->tx_buf || dp->epfd < 0 || dp->wakefd < 0
        || dp->packet_in_fd < 0 || !dp->objects) {
        ss_dp_free(dp);
        return NULL;
    }
    ss_state_init(dp->template_state);
    for (int i = 0; i < RX_BATCH; i++) {
        dp->rx_iov[i].iov_base = dp->rx_buf + (size_t)i * SS_MAX_FRAME;
        dp->rx_iov[i].iov_len = SS_MAX_FRAME;
    }
    one_iovec_each(dp->rx_msgs, dp->rx_iov, RX_BATCH);
    one_iovec_each(dp->tx_msgs, dp->tx_iov, TX_BATCH);
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = SS_MAX_PORTS };
    epoll_ctl(dp->epfd, EPOLL_CTL_ADD, dp->wakefd, &ev);
    dp->has_ingress_ts = ss_has(SS_INGRESS_GLOBAL_TIMESTAMP);
    dp->has_egress_ts = ss_has(SS_EGRESS_GLOBAL_TIMESTAMP);
    dp->has_queueing = ss_has(SS_ENQ_TIMESTAMP);
    dp->has_qid = ss_has(SS_QID);
    dp->has_checksum_error = ss_has(SS_CHECKSUM_ERROR);
    dp->has_mcast = ss_has(SS_MCAST_GRP);
    dp->has_priority = ss_has(SS_PRIORITY);
    dp->has_rid = ss_has(SS_EGRESS_RID);
    dp->mask_ingress_ts = ss_meta_mask(SS_INGRESS_GLOBAL_TIMESTAMP);
    dp->mask_egress_ts = ss_meta_mask(SS_EGRESS_GLOBAL_TIMESTAMP);
    dp->mask_enq_ts = ss_meta_mask(SS_ENQ_TIMESTAMP);
    dp->mask_deq_timedelta = ss_meta_mask(SS_DEQ_TIMEDELTA);
    return dp;
}

int ss_dp_add_port(ss_dataplane *dp, int number, int fd) {
    if (number < 0 || number >= SS_MAX_PORTS || dp->fds[number] >= 0 || fd < 0) return -1;
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)number };
    if (epoll_ctl(dp->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) return -1;
    dp->fds[number] = fd;
    return 0;
}

int ss_dp_open_xsk(ss_dataplane *dp, int port, int ifindex, char *why, uint32_t cap) {
    if (port < 0 || port >= SS_MAX_PORTS || dp->fds[port] < 0 || dp->xsks[port] || dp->running) {
        snprintf(why, cap, "port %d: no such port, an AF_XDP socket already, or the loop running", port);
        return EINVAL;
    }
    int err;
    ss_xsk *x = ss_xsk_open(ifindex, why, cap, &err);
    if (!x) return err;
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = XSK_EVENT | (uint32_t)port };
    if (epoll_ctl(dp->epfd, EPOLL_CTL_ADD, ss_xsk_fd(x), &ev) < 0) {
        err = errno;
        snprintf(why, cap, "epoll: %s", strerror(err));
        ss_xsk_close(x);
        return err;
    }
    dp->xsks[port] = x;
    dp->port_io[port] = PORT_XSK;
    dp->xsk_ports[dp->xsk_count++] = port;
    return 0;
}

void ss_dp_close_xsks(ss_dataplane *dp) {
    if (dp->running) return;
    for (uint32_t i = 0; i < dp->xsk_count; i++) {
        int port = dp->xsk_ports[i];
        epoll_ctl(dp->epfd, EPOLL_CTL_DEL, ss_xsk_fd(dp->xsks[port]), NULL);
        ss_xsk_close(dp->xsks[port]);
        dp->xsks[port] = NULL;
        dp->port_io[port] = PORT_PACKET;
    }
    dp->xsk_count = 0;
}

int ss_dp_port_io(const ss_dataplane *dp, int port, ss_xsk_info *out) {
    if (port < 0 || port >= SS_MAX_PORTS) return -1;
    if (dp->xsks[port]) ss_xsk_info_get(dp->xsks[port], out);
    return dp->port_io[port];
}

ss_objects *ss_dp_objects(ss_dataplane *dp) { return dp->objects; }

int ss_dp_start(ss_dataplane *dp) {
    if (dp->running) return EBUSY;
    int err = pthread_create(&dp->thread, NULL, loop, dp);
    if (!err) {
        dp->running = 1;
        pthread_setname_np(dp->thread, "ss-dataplane");    /* top, perf: the loop by its name */
    }
    return err;
}

void ss_dp_stop(ss_dataplane *dp) {
    if (!dp->running) return;
    __atomic_store_n(&dp->stopping, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    if (write(dp->wakefd, &one, sizeof one) < 0) { /* full: readable anyway */ }
    pthread_join(dp->thread, NULL);
    dp->running = 0;
}

void ss_dp_free(ss_dataplane *dp) {
    if (!dp) return;
    ss_dp_stop(dp);
    for (port_link *l = dp->link_list, *nl; l; l = nl) {
        nl = l->next;
        for (queue *q = l->queues, *nq; q; q = nq) {
            nq = q->next_in_link;
            for (packet *p = ss_queue_clear(q), *np; p; p = np) { np = p->next; free(p); }
            free(q);
        }
        free(l);
    }
    ss_pfc_free(dp);
    for (packet *p = dp->internal_head, *next; p; p = next) { next = p->next; free(p); }
    ss_dp_clear_replication(dp);
    ss_dp_close_xsks(dp);
    for (uint32_t i = 0; i < dp->ring_count; i++) free(dp->ring[(dp->ring_head + i) % PACKET_IN_RING].data);
    for (uint32_t i = 0; i < dp->outs_count; i++) free(dp->outs[i].data);
    free(dp->outs);
    if (dp->objects) ss_objects_free(dp->objects);
    if (dp->epfd >= 0) close(dp->epfd);
    if (dp->wakefd >= 0) close(dp->wakefd);
    if (dp->packet_in_fd >= 0) close(dp->packet_in_fd);
    free(dp->template_state);
    free(dp->rx_buf);
    free(dp->tx_buf);
    pthread_mutex_destroy(&dp->lock);
    pthread_mutex_destroy(&dp->io_lock);
    free(dp);
}

void ss_dp_lock(ss_dataplane *dp) {
    __atomic_add_fetch(&dp->writers, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&dp->lock);
    __atomic_sub_fetch(&dp->writers, 1, __ATOMIC_ACQ_REL);
}

void ss_dp_unlock(ss_dataplane *dp) { pthread_mutex_unlock(&dp->lock); }

void ss_dp_counters(const ss_dataplane *dp, ss_counters *out) {
    const uint64_t *src = (const uint64_t *)&dp->counters;
    uint64_t *dst = (uint64_t *)out;
    for (size_t i = 0; i < sizeof(ss_counters) / sizeof(uint64_t); i++) dst[i] = READ(src[i]);
}

int ss_dp_port_counters(const ss_dataplane *dp, int port, ss_port_counters *out) {
    if (port < 0 || port >= SS_MAX_PORTS) return -1;
    out->rx = READ(dp->port_counters[port].rx);
    out->tx = READ(dp->port_counters[port].tx);
    out->tx_errors = READ(dp->port_counters[port].tx_errors);
    return 0;
}
