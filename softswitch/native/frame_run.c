/* One frame through a program's native pipeline alone, no ports, queues or replication:
 * what packet_path.py does to a packet on its straight path (arrival metadata, parse, checksum
 * check, ingress; egress as the packet departs at once, checksum update, deparse and the
 * payload after it). Tests compare it with the Python path step by step; the benchmark times it
 * (CPU per packet without I/O). Timestamps and queueing metadata stay 0 on both sides. */
#include <string.h>
#include <time.h>

#include "abi.h"

#define SS_DROP_PORT 511
#define SS_NO_TRUNCATION (1ull << 62)

enum { SS_FRAME_SENT = 0, SS_FRAME_DROPPED_INGRESS = 1, SS_FRAME_DROPPED_EGRESS = 2, SS_FRAME_AFTER_INGRESS = 3,
       SS_FRAME_MULTICAST = 4 };
#define SS_INSTANCE_REPLICATION 5      /* packet_path.REPLICATION */

/* returns SS_FRAME_* (>= 0) or -status of the step that failed; *outlen: the frame sent. A packet
 * ingress gives a multicast group goes on as its one copy to replica_port with egress_rid
 * replica_rid (replica_port < 0: SS_FRAME_MULTICAST after ingress) */
int ss_run_frame(ss_objects *o, void *st, const uint8_t *frame, uint32_t len, uint32_t port,
                 int stop_after_ingress, int replica_port, uint32_t replica_rid,
                 uint8_t *out, uint32_t cap, uint32_t *outlen)
{
    uint32_t consumed = 0;
    int ok = 1, r;
    *outlen = 0;
    ss_state_init(st);
    ss_set(st, SS_INGRESS_PORT, port);
    ss_set(st, SS_PACKET_LENGTH, len);
    ss_set(st, SS_HIDDEN_PACKET_LENGTH, len);
    ss_set(st, SS_INGRESS_LENGTH, len);
    ss_set(st, SS_TRUNCATE_LENGTH, SS_NO_TRUNCATION);
    if ((r = ss_parse(o, st, frame, len, &consumed))) return -r;
    if ((r = ss_verify_checksums(o, st, &ok))) return -r;
    if (ss_has(SS_CHECKSUM_ERROR)) ss_set(st, SS_CHECKSUM_ERROR, ok ? 0 : 1);
    if ((r = ss_ingress(o, st))) return -r;
    if (stop_after_ingress) return SS_FRAME_AFTER_INGRESS;
    uint64_t egress;
    if (ss_has(SS_MCAST_GRP) && ss_get(st, SS_MCAST_GRP)) {
        if (replica_port < 0) return SS_FRAME_MULTICAST;
        ss_set(st, SS_INSTANCE_TYPE, SS_INSTANCE_REPLICATION);
        ss_set(st, SS_EGRESS_RID, replica_rid);
        ss_set(st, SS_TRUNCATE_LENGTH, SS_NO_TRUNCATION);
        egress = (uint64_t)replica_port;
    } else {
        egress = ss_get(st, SS_EGRESS_SPEC);
        if (egress == SS_DROP_PORT) return SS_FRAME_DROPPED_INGRESS;
        ss_set(st, SS_INSTANCE_TYPE, 0);
    }
    ss_set(st, SS_EGRESS_PORT, egress);
    ss_set(st, SS_EGRESS_SPEC, (SS_DROP_PORT + 1) & 0x1FF);
    ss_set(st, SS_PACKET_LENGTH, ss_get(st, SS_HIDDEN_PACKET_LENGTH));
    if ((r = ss_egress(o, st))) return -r;
    if (ss_get(st, SS_EGRESS_SPEC) == SS_DROP_PORT) return SS_FRAME_DROPPED_EGRESS;
    if ((r = ss_update_checksums(o, st))) return -r;
    uint32_t n = 0;
    if ((r = ss_deparse(o, st, out, cap, &n))) return -r;
    if (len - consumed > cap - n) return -SS_ERR_TOO_LONG;
    memcpy(out + n, frame + consumed, len - consumed);
    *outlen = n + (len - consumed);
    return SS_FRAME_SENT;
}

/* the benchmark: the same frame n times; CPU nanoseconds of this thread in all */
uint64_t ss_time_frames(ss_objects *o, void *st, const uint8_t *frame, uint32_t len, uint32_t port, uint32_t n,
                        int replica_port, uint8_t *out, uint32_t cap, int *last)
{
    struct timespec a, b;
    uint32_t outlen;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (uint32_t i = 0; i < n; i++)
        *last = ss_run_frame(o, st, frame, len, port, 0, replica_port, 1, out, cap, &outlen);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    return (uint64_t)(b.tv_sec - a.tv_sec) * 1000000000u + (uint64_t)(b.tv_nsec - a.tv_nsec);
}
