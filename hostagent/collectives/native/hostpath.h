/* The collectives' reliable transport on a native engine (hostagent.collectives.reliable's
 * protocol, byte for byte): one thread per transport receives, acknowledges, sends the callers'
 * messages as their windows open, resends and beats; the callers (Python threads, the GIL let
 * go by ctypes) wait on a condition variable and wake when a whole message is in, their whole
 * message is in flight, or the call failed.
 *
 * Parts: hostpath.c, the wire (HEADER's 29 bytes), peers and their windows, timers (RFC 6298
 * per peer, Karn, doubling; delayed acknowledgements; heartbeats) and the loop; messages.c, the
 * message table (reassembly by source and tag); calls.c, the callers' side; engine.c, the
 * engine's life (open, counters, close, free); engine.h, what they share; rocev2.c: RoCEv2
 * framing (the shared port 4791, the rates of queue pairs).
 */
#ifndef AIFABRIC_HOSTPATH_H
#define AIFABRIC_HOSTPATH_H

#include <stdint.h>

#define HP_VERSION 2                    /* bump when a struct below changes (the binding checks it) */

/* reliable.py's constants: the wire and its timing */
#define HP_HEADER_BYTES 29              /* "!2sBIHIQII": magic, kind, group, source, seq, tag, fragment, fragments */
#define HP_PAYLOAD 1400                 /* message bytes a packet carries at most */
#define HP_MAX_DATAGRAM 2048
#define HP_SACK_BYTES 4
#define HP_MAX_SACKS ((HP_PAYLOAD - 4) / HP_SACK_BYTES)
#define HP_ACK_EVERY 8
#define HP_ABORT_COPIES 3
#define HP_HEARTBEAT_S 0.25
#define HP_MAX_RTO_S 2.0
#define HP_CALL_NUMBER_BITS 24

/* this engine's own limits */
#define HP_REORDER (1u << 16)           /* seqs above a source's floor it can hold; past it a packet waits for its resend */
#define HP_RX_BATCH 64                  /* datagrams per recvmmsg */
#define HP_EAGER_FRAGMENTS 16384        /* a message up to this many packets gets its whole buffer at its first */

enum hp_kind { HP_DATA = 1, HP_ACK = 2, HP_ABORT = 3, HP_HEARTBEAT = 4 };

/* What a caller's wait ended with. */
enum hp_status {
    HP_OK = 0,
    HP_ABORTED = 1,          /* another rank aborted this call (or an earlier one): failure.peer, .reason */
    HP_SILENT = 2,           /* a watched rank stopped: failure.peer, .waited_s */
    HP_LATE_SILENT = 3,      /* the deadline passed waiting on failure.peer, silent (or never heard: .never_heard) */
    HP_LATE_ALIVE = 4,       /* the deadline passed waiting on failure.peer, which is alive */
    HP_CLOSED = 5,           /* the transport was closed meanwhile */
};

struct hp_config {
    int32_t rank, world;
    uint32_t group;
    int32_t window;          /* unacknowledged packets per peer */
    double rto_s;            /* the first and least retransmission timeout */
    double silent_after_s;
    double drop_outgoing;    /* share of datagrams dropped on purpose (tests) */
    uint64_t drop_seed;
    int32_t rocev2;          /* RoCEv2 framing (rocev2.h): the peers' ports are then 4791 */
    uint32_t bind_ip;        /* this rank's address (network order): its shared port 4791 */
    int32_t rate_port;       /* with rocev2: where rate messages arrive (127.0.0.1); 0: not paced */
};

/* TransferStats' counters, and the engine's own */
struct hp_stats {
    uint64_t packets_sent, bytes_sent, packets_received, bytes_received;
    uint64_t retransmissions, duplicates, stale, dropped_on_purpose, send_errors;
    uint64_t out_of_reach;   /* DATA more than HP_REORDER above its source's floor: not taken, resent later */
    uint64_t wakeups;        /* times waiting callers were woken */
    uint64_t loops;          /* the engine's iterations */
    /* rocev2 */
    uint64_t rocev2_malformed, rocev2_unknown_group;   /* at the shared port: all its groups' */
    uint64_t rocev2_rate_messages;                     /* heard by the process's listener */
    uint64_t rocev2_inbox_dropped;                     /* datagrams that found this group's inbox full */
    double rocev2_paced_s;                             /* data held back by its queue pairs' rates */
};

struct hp_failure {
    int32_t peer;
    int32_t never_heard;
    double waited_s;
    uint32_t reason_len;
    char reason[HP_PAYLOAD];
};

/* A whole message, handed to the caller by hp_recv: read data[0:len], then hp_message_free. */
struct hp_message {
    uint8_t *data;
    uint64_t len;
};

struct hp_engine;

int hp_version(void);
double hp_now(void);         /* CLOCK_MONOTONIC, as Python's time.monotonic() */
/* fd: a bound UDP socket, the engine's from now on. peer_ip, peer_port: network order, per rank. */
struct hp_engine *hp_open(const struct hp_config *config, int fd, const uint32_t *peer_ip,
                          const uint16_t *peer_port, char *error, uint32_t error_len);
int hp_send(struct hp_engine *e, int32_t dst, uint64_t tag, const uint8_t *data, uint64_t len, double deadline,
            const int32_t *watch, int32_t nwatch, struct hp_failure *failure);
int hp_recv(struct hp_engine *e, int32_t src, uint64_t tag, double deadline, const int32_t *watch, int32_t nwatch,
            struct hp_failure *failure, struct hp_message **message);
void hp_message_free(struct hp_message *message);
int hp_flush(struct hp_engine *e, double deadline, struct hp_failure *failure);
void hp_abort(struct hp_engine *e, uint64_t call, const char *reason, uint32_t reason_len);
/* The i-th abort recorded (calls in the order first heard of); 0 past the last. */
int hp_abort_at(struct hp_engine *e, uint32_t i, uint64_t *call, int32_t *by, char *reason, uint32_t *reason_len);
void hp_stats(struct hp_engine *e, struct hp_stats *out);
void hp_close(struct hp_engine *e);      /* stop the thread, wake the callers, close the socket */
void hp_free(struct hp_engine *e);       /* after hp_close, once nothing can call in any more */

#endif
