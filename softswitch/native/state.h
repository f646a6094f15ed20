/* What the native data plane's own parts share (dataplane.c: the loop, the packet path, ports and
 * control; classes.c: a port's link and its traffic classes' queues, and their settings; pfc.c:
 * priority flow control; replication.c: multicast groups and clone sessions; cpu_port.c:
 * packet-outs and packet-ins): the data plane's state, the packet, the clock. Not for the
 * generated pipeline, which sees abi.h alone. dataplane.c calls the others; they call nothing of it. */
#ifndef SOFTSWITCH_NATIVE_STATE_H
#define SOFTSWITCH_NATIVE_STATE_H

/* struct mmsghdr: a file including this defines _GNU_SOURCE before any system header */

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "abi.h"
#include "xsk.h"

#define RX_BATCH 64                /* frames one recvmmsg reads (port_io.BATCH) */
#define TX_BATCH 32                /* frames held before they are sent back to back */
#define PACKET_IN_RING 1024        /* packet-ins waiting for the Python side */
#define MAX_GROUP 0xFFFF
#define MAX_SESSION 0x7FFF
#define RECENT 16                  /* departures a queue remembers (queues.RECENT) */

/* counters are written by the loop alone and read by the control side without the lock */
#define COUNT(field, n) __atomic_store_n(&(field), (field) + (n), __ATOMIC_RELAXED)
#define READ(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

struct pfc_class;

/* A packet: its state (abi.h, flat) and the frame it was parsed from; its payload is the
 * frame's bytes after the parsed headers. One allocation: header, state, frame; the header is
 * a multiple of 16 bytes so the state is as aligned as malloc's block (its 128-bit fields are
 * read with aligned SSE loads). */
typedef struct __attribute__((aligned(16))) packet {
    struct packet *next;
    double queued;                 /* µs since start, when it was queued */
    uint32_t len, consumed;        /* frame bytes; bytes the headers took */
    uint32_t wire_len;             /* bytes the link carries: its length, truncated (queues.py) */
    struct pfc_class *buffer;      /* the lossless ingress buffer that counts it while queued (pfc.c) */
    uint8_t *state, *frame;
} packet;

/* a queue's own pace: packets/s (BMv2's) or bits/s (a shaper), the other 0; both 0: none */
typedef struct pace { uint32_t rate_pps; uint64_t bitrate; } pace;

/* a class's settings, as queues.QueueSettings.class_settings gives them (bitrate: the shaper) */
typedef struct class_cfg { uint32_t depth, rate_pps, weight; uint64_t bitrate; } class_cfg;

struct port_link;

/* one traffic class's queue of an egress port (queues.EgressQueue) */
typedef struct queue {
    int port, priority;
    uint32_t depth, count, weight;
    pace pace;
    double delay_us;               /* 1/rate_pps */
    double last_departure, free;   /* µs; its own pace is busy until free */
    uint32_t last_len;             /* bytes of the packet that departed last */
    uint64_t drops, tx_packets, tx_bytes, watchdog_drops;
    double paused_until, pause_start, paused_us;   /* 802.1Qbb (queues.EgressQueue.pause) */
    int dropping;                  /* the PFC watchdog drops what comes */
    double recent_at[RECENT];      /* the last departures, a ring */
    uint32_t recent_len[RECENT], recent_n;
    packet *head, *tail;
    struct port_link *link;
    struct queue *next_in_link;    /* the link's queues, highest priority first */
} queue;

/* an egress port's link, which its classes share (classes.PortLink) */
typedef struct port_link {
    int port;
    uint64_t bitrate;              /* 0: unlimited */
    double last_departure, next_free;
    uint32_t last_len;
    uint32_t queued;               /* packets in its queues */
    queue *queues;                 /* highest priority first */
    queue *turn;                   /* the weighted class whose turn it is, and what it may still send */
    uint32_t left;
    struct port_link *next;        /* every link made, in the order made */
} port_link;

typedef struct replicas { uint32_t n, truncate; uint32_t *ports, *rids; } replicas;

typedef struct tx_slot { int port; uint32_t len; } tx_slot;

/* a port's AF_XDP socket: open, or closed when its interface was removed (ss_dp_port_io) */
enum { PORT_PACKET, PORT_XSK, PORT_XSK_GONE };

typedef struct ring_frame { uint32_t len; uint8_t *data; } ring_frame;

/* PFC's state of one (port, class) (pfc.PfcClass): the port's ingress buffer of the class and
 * what came for its egress queue; made when the class is first made lossless there, kept */
typedef struct pfc_class {
    int port, priority;
    int lossless;                  /* configured (else: lossy again, the packets counted still released) */
    uint32_t xoff, xon, headroom, quanta;
    uint64_t used, frames, peak;
    int pausing;
    double refresh_at, pausing_since, pausing_us;
    uint64_t pause_sent, xon_sent, lossless_drops, at_xoff_bytes, at_xoff_frames;
    uint64_t pause_received, xon_received, storms, restores;
    int storm;
    double last_pause_rx, detected_after_us;     /* detected_after_us < 0: no storm yet */
    struct pfc_class *next;        /* every class made, in the order made */
} pfc_class;

/* the PFC watchdog (pfc.Watchdog): off while detect_us is 0 */
typedef struct watchdog { uint64_t detect_us, restore_us, poll_us; int drop; } watchdog;

/* a PFC frame pfc.c asks to send: class priority of port, quanta (0: XON) */
typedef struct pfc_out { int port, priority; uint32_t quanta; } pfc_out;

struct ss_dataplane {
    pthread_mutex_t lock;
    int writers;                   /* control threads waiting for the lock: the loop lets them in */
    pthread_t thread;
    int running, stopping;
    int epfd, wakefd;
    struct timespec start;
    int cpu_port, drop_port, priority_queues;
    int fds[SS_MAX_PORTS];         /* -1: no interface behind the number */
    ss_port_counters port_counters[SS_MAX_PORTS];
    class_cfg classes[SS_MAX_PORTS][SS_MAX_PRIORITY_QUEUES];   /* what a class's queue is made with */
    uint64_t link_bitrate[SS_MAX_PORTS];
    queue *queues[SS_MAX_PORTS][SS_MAX_PRIORITY_QUEUES];
    port_link *links[SS_MAX_PORTS];
    port_link *link_list;          /* every link made */
    uint32_t queued;               /* packets in all the queues */
    packet *internal_head, *internal_tail;
    uint32_t internal_count;
    replicas *groups[MAX_GROUP + 1];
    replicas *sessions[MAX_SESSION + 1];
    ss_objects *objects;
    size_t state_size, state_alloc;
    uint8_t *template_state;
    ss_counters counters;
    /* PFC (pfc.c) */
    pfc_class *pfc[SS_MAX_PORTS][SS_MAX_PRIORITY_QUEUES];
    pfc_class *pfc_list;
    pfc_out *pfc_outbox;           /* frames to send, in order: the loop sends them (ss_pfc_pop_frame) */
    uint32_t pfc_out_head, pfc_out_count, pfc_out_cap;
    uint32_t lossless, refreshing;
    watchdog wd;
    double next_poll;
    uint8_t macs[SS_MAX_PORTS][6];
    uint64_t malformed[SS_MAX_PORTS][SS_PFC_MALFORMED_REASONS];
    /* port I/O */
    struct mmsghdr rx_msgs[RX_BATCH];
    struct iovec rx_iov[RX_BATCH];
    uint8_t *rx_buf;               /* RX_BATCH frames of SS_MAX_FRAME */
    struct mmsghdr tx_msgs[TX_BATCH];
    struct iovec tx_iov[TX_BATCH];
    uint8_t *tx_buf;               /* TX_BATCH frames of SS_MAX_FRAME, deparsed into in place */
    tx_slot tx[TX_BATCH];
    uint32_t tx_count;
    ss_xsk_frame rx_frames[RX_BATCH];  /* a batch read from either socket */
    /* a run to send by AF_XDP: apart from rx_frames, since a run is sent while a batch is read
     * (each arrival lets egress send what may leave) */
    ss_xsk_frame tx_frames[TX_BATCH];
    ss_xsk *xsks[SS_MAX_PORTS];    /* the ports' AF_XDP sockets, where open */
    uint8_t port_io[SS_MAX_PORTS]; /* PORT_PACKET, PORT_XSK, PORT_XSK_GONE */
    int xsk_ports[SS_MAX_PORTS];   /* the numbers of the ports with one, xsk_count of them */
    uint32_t xsk_count;
    int check_xsks;                /* a socket reported its interface down: is one gone? */
    uint64_t xsk_recheck_until;    /* and until then (us), every loop turn: a removed interface
                                    * reads down before it leaves the kernel's list of interfaces */
    /* the CPU port (guarded by io_lock, not lock: Python drains it while the loop runs) */
    pthread_mutex_t io_lock;
    int packet_in_fd;
    ring_frame ring[PACKET_IN_RING];
    uint32_t ring_head, ring_count;
    ring_frame *outs;              /* packet-outs waiting for the loop */
    uint32_t outs_count, outs_cap;
    /* meta slots the program has, resolved once */
    int has_ingress_ts, has_egress_ts, has_queueing, has_qid, has_checksum_error, has_mcast,
        has_priority, has_rid;
    uint64_t mask_ingress_ts, mask_egress_ts, mask_enq_ts, mask_deq_timedelta;
};

/* time in microseconds since the data plane started, as BMv2 reports it */
static inline uint64_t now_us(const ss_dataplane *dp) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    int64_t ns = (int64_t)(t.tv_sec - dp->start.tv_sec) * 1000000000 + (t.tv_nsec - dp->start.tv_nsec);
    return (uint64_t)(ns / 1000);
}

/* the loop looks again at once (its wait may now be shorter, or it has frames to send) */
static inline void wake(ss_dataplane *dp) {
    uint64_t one = 1;
    if (write(dp->wakefd, &one, sizeof one) < 0) { /* full: readable anyway */ }
}

/* classes.c: the ports' links and class queues (queues.py, classes.py) */
queue *ss_queue_get(ss_dataplane *dp, int port, int priority);         /* made when first needed */
void ss_queue_configure(queue *q, class_cfg cfg);
void ss_link_set_bitrate(port_link *l, uint64_t bits_per_s);
int ss_queue_push(queue *q, packet *p, double now);                    /* 0: full, a drop counted */
int ss_queue_leaves_now(queue *q, uint32_t len, double now);           /* departs now, recorded */
queue *ss_link_pick(port_link *l, double now, double *departure);      /* the class to send now, or NULL */
packet *ss_queue_take(queue *q, double departure);                     /* its head, departing then */
double ss_link_next_event(const port_link *l);                          /* -1: nothing queued */
packet *ss_queue_clear(queue *q);                                       /* its packets, a list, taken out */
void ss_queue_pause(queue *q, double now, double until);
double ss_queue_paused_total(const queue *q, double now);
double ss_queue_next_free(const queue *q);

/* pfc.c: priority flow control (pfc.py) */
#define PFC_DROP ((pfc_class *)1)
pfc_class *ss_pfc_admit(ss_dataplane *dp, int port, int priority, uint32_t len);   /* NULL lossy, PFC_DROP */
void ss_pfc_add(ss_dataplane *dp, pfc_class *c, uint32_t len, double now);
void ss_pfc_release(ss_dataplane *dp, pfc_class *c, uint32_t len, double now);
void ss_pfc_receive(ss_dataplane *dp, int port, const uint8_t *frame, uint32_t len, double now);
void ss_pfc_tick(ss_dataplane *dp, double now);
double ss_pfc_next_timer(const ss_dataplane *dp);                          /* -1: none */
void ss_pfc_drop_queued(ss_dataplane *dp, queue *q, double now);
/* the next PFC frame to send into frame[0:PFC_FRAME_LENGTH], out of *port: its length, 0 none */
#define PFC_FRAME_LENGTH 60
uint32_t ss_pfc_pop_frame(ss_dataplane *dp, int *port, uint8_t *frame);
void ss_pfc_free(ss_dataplane *dp);

#endif
