/* RoCEv2 framing for the native host path, as hostagent/collectives/rocev2.py does it: each
 * datagram goes to the peer's UDP 4791 behind a 12-byte BTH (SEND_ONLY, P_Key 0xFFFF, the
 * destination queue pair group << 10 | rank, PSN 0), ECN-capable, from the group's own port. A queue
 * pair is paced to the rate last given for it by hostagent.traffic.ratecontrol messages (one
 * listener per port in the process).
 *
 * What arrives on a host's 4791 is read by the engines of the process's groups on that address
 * themselves (no thread of its own): each takes its own group's datagrams at once and queues
 * another group's in that group's inbox, so the usual case (one group an address) costs nothing
 * more than plain UDP. */
#ifndef AIFABRIC_ROCEV2_H
#define AIFABRIC_ROCEV2_H

#include <stddef.h>
#include <stdint.h>

#define RV_PORT 4791
#define RV_BTH_BYTES 12
#define RV_OPCODE_SEND_ONLY 0x04
#define RV_GROUP_BITS 14
#define RV_RANK_BITS 10
#define RV_GROUP_OFFSET 3               /* the group id (u32) in the transport's header */
#define RV_RATE_POLL_S 0.001            /* rate messages read at most this often */
#define RV_FRAME_OVERHEAD (8 + 20 + 14) /* UDP, IPv4, Ethernet: what a NIC's limiter counts besides the payload */

uint32_t rv_qp(uint32_t group, uint32_t rank);
void rv_bth(uint8_t bth[RV_BTH_BYTES], uint32_t qp);

/* ---- an engine's inbox: datagrams other engines read from the shared port for its group ---- */
struct rv_inbox;
struct rv_inbox *rv_inbox_new(uint32_t capacity, int wake_fd);
void rv_inbox_free(struct rv_inbox *in);
/* the engine: each queued datagram to take(ctx, ...); how many there were */
uint32_t rv_inbox_drain(struct rv_inbox *in, void (*take)(void *ctx, const uint8_t *data, size_t len), void *ctx);
int rv_inbox_sleep(struct rv_inbox *in);        /* 1: empty, and the reader will write wake_fd */
void rv_inbox_awake(struct rv_inbox *in);
uint64_t rv_inbox_dropped(struct rv_inbox *in); /* datagrams that found it full */

/* ---- the process's socket on (ip, 4791), shared by its groups ---- */
struct rv_port;
struct rv_port *rv_port_join(uint32_t ip, uint32_t group, struct rv_inbox *inbox, char *error, uint32_t error_len);
void rv_port_leave(struct rv_port *port, uint32_t group);   /* after the engine stopped reading it */
int rv_port_fd(struct rv_port *port);
/* a datagram the engine of group `own` read from the port (under rv_port_lock): its own to
 * take(ctx, packet, len), the transport's packet unframed; another group's to that group's inbox */
void rv_port_lock(struct rv_port *port);
void rv_port_unlock(struct rv_port *port);
void rv_port_dispatch(struct rv_port *port, uint32_t own, const uint8_t *data, size_t len,
                      void (*take)(void *ctx, const uint8_t *data, size_t len), void *ctx);
void rv_port_counts(struct rv_port *port, uint64_t *malformed, uint64_t *unknown_group);

/* ---- the rates DCQCN sets, per queue pair ---- */
struct rv_rates;
struct rv_rates *rv_rates_join(uint16_t port, char *error, uint32_t error_len);
void rv_rates_leave(struct rv_rates *r);
double rv_rate(struct rv_rates *r, uint32_t qp, double now);     /* bits/s; 0: none given */
uint64_t rv_rate_messages(struct rv_rates *r);

#endif
