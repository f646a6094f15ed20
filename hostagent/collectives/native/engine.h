/* What the parts of the native transport share (hostpath.c: the wire, peers and their windows,
 * timers and the loop; messages.c: the message table; calls.c: the callers' side; engine.c: the
 * engine's life, open to free): their limits, their structs and the functions one part calls in
 * another. Internal: the binding sees hostpath.h alone. */
#ifndef AIFABRIC_HOSTPATH_ENGINE_H
#define AIFABRIC_HOSTPATH_ENGINE_H

/* struct mmsghdr: a file including this defines _GNU_SOURCE before any system header */
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "hostpath.h"
#include "rocev2.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103                 /* linux/udp.h: a send cut into datagrams by the kernel (GSO) */
#endif
#ifndef UDP_GRO
#define UDP_GRO 104                     /* linux/udp.h: datagrams handed up joined, with their size (GRO) */
#endif
#define BUCKETS 4096                    /* the message table's chains */
#define RX_BYTES 65536                  /* a receive buffer: one datagram, or one GRO train of them */
#define GSO_MAX 64                      /* datagrams in one GSO send at most (the kernel's UDP_MAX_SEGMENTS) */
#define INBOX_DATAGRAMS 4096            /* rocev2: what the shared port may queue for a group */
#define PACE_SLACK_S 50e-6              /* rocev2: a paced packet may leave this early (the loop's wake is no finer) */
#define LONGEST_WAIT_S 0.25             /* the loop looks at its timers at least this often */
#define RECV_RECHECK_S 0.1              /* a waiting recv looks for aborts and silence this often (reliable.py's) */

/* ---- the wire (hostpath.c) ---- */

struct header {
    uint8_t kind;
    uint32_t group;
    uint16_t src;
    uint32_t seq;
    uint64_t tag;
    uint32_t frag, count;
};

void wire_pack(uint8_t *p, const struct header *h);

/* ---- peers and their windows (hostpath.c) ---- */

struct slot {                   /* a packet in flight, kept for its resend */
    uint8_t live;
    uint16_t len;
    uint32_t seq, retries;
    double sent_at;
    uint8_t packet[HP_HEADER_BYTES + HP_PAYLOAD];
};

struct job {                    /* a caller's message whose packets are not all in flight yet */
    struct job *next;
    const uint8_t *data;        /* the caller's buffer: read under the lock only, while it waits */
    uint64_t len, tag;
    uint32_t count, next_frag;
    int done;
};

struct rto {                    /* RFC 6298 (transport.RtoEstimator) */
    double floor, cap, srtt, rttvar, rto;
    int sampled;
};

struct peer {
    struct sockaddr_in addr;
    /* as a destination */
    struct slot *slots;         /* by seq & mask; made at the first message to this peer */
    uint32_t mask, next_seq, low, pending;   /* every live slot's seq is in [low, next_seq) */
    struct job *jobs, **jobs_tail;
    struct rto rto;
    /* as a source */
    uint32_t floor, top, above; /* every seq below floor taken; `above` more, all below top */
    uint64_t *seen;             /* seqs taken above floor: bit seq % HP_REORDER */
    uint32_t owed;              /* packets taken since our last acknowledgement */
    double owed_since;
    double heard;               /* when last heard from; < 0: never */
    int loopback;               /* on 127/8: GSO trains never meet a packet socket there */
    /* rocev2 */
    uint8_t bth[RV_BTH_BYTES];  /* before every datagram to this peer: its queue pair */
    uint32_t qp;
    double next_free;           /* its queue pair's rate lets the next datagram go then */
    double held_since;          /* < 0: not held back by the rate now */
};

/* ---- messages by (source, tag) (messages.c) ---- */

struct msg {
    struct hp_message pub;      /* first: what hp_recv hands out */
    struct msg *next;
    int32_t src;
    uint64_t tag;
    uint32_t count, got, room;  /* fragments: in the message, taken, the buffer's room */
    uint32_t last_len;
    uint64_t *have;             /* fragments taken, one bit each (room of them) */
    int complete;
};

void msg_free(struct msg *m);
struct msg *msg_for(struct msg **table, int32_t src, uint64_t tag, uint32_t frag, uint32_t count);
int msg_put(struct msg *m, uint32_t frag, const uint8_t *body, size_t len);
struct msg *msg_take(struct msg **table, int32_t src, uint64_t tag);

/* ---- the engine (hostpath.c) ---- */

struct abort_note {
    uint64_t call;
    int32_t by;
    uint32_t len;
    char reason[HP_PAYLOAD];
};

struct out {                    /* datagrams built under the lock, sent after it in one sendmmsg */
    uint32_t n, cap, scratch_used, scratch_cap;
    struct iovec *iov;          /* two a datagram: its BTH (rocev2; else empty), the transport's packet */
    int32_t *dst;
    struct mmsghdr *mm;         /* one a send: a datagram, or a GSO train of them to one loopback peer */
    uint32_t *first;            /* a send's first datagram */
    char (*ctl)[CMSG_SPACE(sizeof(uint16_t))];
    uint8_t *scratch;           /* scratch_cap buffers of HP_MAX_DATAGRAM: acknowledgements, heartbeats */
};

struct hp_engine {
    struct hp_config cfg;
    int fd, wake_fd;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;         /* everything below; a caller's job buffer too */
    pthread_cond_t cv;          /* callers wait here */
    int closing, asleep, wake_callers, pump_again;
    uint32_t callers, waiters;
    struct peer *peers;
    struct msg **table;
    struct abort_note *aborts;
    uint32_t naborts, aborts_cap;
    struct hp_stats stats;
    uint64_t rng;
    double ack_delay_s, next_resend, last_beat;
    struct out out;
    int gso;                    /* GSO sends to loopback peers: on until the kernel refuses one */
    double now;                 /* the loop's iteration's time */
    struct rv_inbox *inbox;     /* rocev2: what the shared port read for this group */
    struct rv_port *port;
    struct rv_rates *rates;     /* rocev2 with a rate port: the queue pairs' rates */
    struct mmsghdr rx_mm[HP_RX_BATCH];
    struct iovec rx_iov[HP_RX_BATCH];
    char rx_ctl[HP_RX_BATCH][CMSG_SPACE(sizeof(int))];
    uint8_t *rx;                /* HP_RX_BATCH buffers of RX_BYTES */
};

struct timespec abs_time(double t);
void note_abort(struct hp_engine *e, uint64_t call, int32_t by, const char *reason, uint32_t len);
void out_add(struct hp_engine *e, struct out *o, int32_t dst, const uint8_t *data, uint32_t len);
int out_init(struct out *o, uint32_t cap, uint32_t scratch_cap);
void out_release(struct out *o);
void out_send(struct hp_engine *e, struct out *o);

/* the loop thread (hostpath.c), started by hp_open (engine.c) */
void *hp_engine_loop(void *arg);
/* the counters, the engine's lock held (engine.c) */
void hp_stats_locked(struct hp_engine *e, struct hp_stats *out);

#endif
