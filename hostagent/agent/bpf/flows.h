/* Flow keys, per-flow records and the maps shared by the TC programs of one host agent.
 *
 * A flow is named as its sender sends it (src = the sending host). RoCEv2-like flows (UDP to
 * port 4791) are named by their BTH destination queue pair instead of the UDP source port:
 * the source port is entropy the agent may change mid-flow, the queue pair is the flow.
 *
 * Maps (names start with ha_ so a leftover is easy to find; see bpf/inventory.py):
 *   ha_paths   written by the agent: the flow label / UDP source port a flow must carry
 *   ha_tx      egress: what this host sent per flow (sender side)
 *   ha_ack     ingress: ACKs and ECN-Echo received for a flow this host sends (TCP sender side)
 *   ha_rx      ingress: what this host received per flow, CE marks, CNPs and reports it sent
 *   ha_fb      ingress: CNPs and receiver reports that came back for a flow this host sends
 *   ha_config  written by the agent: intervals and flags (CFG_*)
 */
#ifndef HA_FLOWS_H
#define HA_FLOWS_H

#include <uapi/linux/bpf.h>
#include <uapi/linux/pkt_cls.h>

#define ROCEV2_PORT 4791
#define BTH_BYTES 12
#define BTH_OPCODE_CNP 0x81      /* RoCEv2 Congestion Notification Packet */
#define BTH_OPCODE_REPORT 0xC0   /* manufacturer-specific opcode: receiver counters for PLB */
#define BTH_BECN 0x40            /* byte 4 of a CNP's BTH */
#define FEEDBACK_PAYLOAD 32      /* BTH 12 + 16 reserved (report: packets, CE) + ICRC 4 */

/* skb->mark of a clone on its way from ingress to egress, where it becomes a CNP or report */
#define HA_MARK_CNP 0x0C4E0081
#define HA_MARK_REPORT 0x0C4E00C0

#define CFG_CNP_INTERVAL_NS 0    /* 0: no CNPs (DCQCN notification point off) */
#define CFG_REPORT_INTERVAL_NS 1 /* 0: no receiver reports (PLB for RoCEv2 flows off) */
#define CFG_FLAGS 2
#define CFG_ENTRIES 4
#define FLAG_SET_ECT 1           /* RoCEv2 data leaves ECT(0) when it was Not-ECT, as a RoCE NIC sends it */

#define PATH_LABEL 1             /* ha_paths: rewrite the IPv6 flow label */
#define PATH_SPORT 2             /* ha_paths: rewrite the UDP source port (RoCEv2) */

#define FLOWS_MAX 8192

struct flow_key {
    __u8 src[16];                /* IPv4 as ::ffff:a.b.c.d */
    __u8 dst[16];
    __u16 sport;                 /* host byte order; 0 for RoCEv2 */
    __u16 dport;
    __u32 qp;                    /* RoCEv2: BTH destination QP; 0 otherwise */
    __u8 proto;
    __u8 family;                 /* 4 or 6 */
    __u8 pad[2];
};

struct path_val {
    __u32 label;
    __u16 sport;
    __u16 flags;                 /* PATH_LABEL | PATH_SPORT */
};

struct tx_val {
    __u64 packets;
    __u64 bytes;                 /* skb->len: Ethernet frames */
    __u64 last_ns;               /* bpf_ktime_get_ns (CLOCK_MONOTONIC) */
    __u32 seq_next;              /* TCP: highest sequence number sent + 1 */
    __u32 label;                 /* IPv6 flow label on the wire (after any rewrite) */
    __u16 sport;                 /* source port on the wire (after any rewrite) */
    __u16 pad[3];
};

struct ack_val {
    __u64 acks;
    __u64 ece;                   /* ACKs with ECN-Echo (SYN-ACKs not counted: their ECE negotiates) */
    __u64 last_ns;
    __u32 ack_seq;               /* highest cumulative ACK */
    __u32 pad;
};

struct rx_val {
    __u64 packets;
    __u64 bytes;
    __u64 ce;
    __u64 cnps;                  /* CNPs sent for the flow */
    __u64 reports;               /* receiver reports sent for the flow */
    __u64 last_cnp_ns;
    __u64 last_report_ns;
};

struct fb_val {
    __u64 cnps;                  /* CNPs received */
    __u64 reports;               /* receiver reports received */
    __u64 rx_packets;            /* the latest report's cumulative counters */
    __u64 rx_ce;
    __u64 last_cnp_ns;
};

BPF_HASH(ha_paths, struct flow_key, struct path_val, FLOWS_MAX);
BPF_TABLE("lru_hash", struct flow_key, struct tx_val, ha_tx, FLOWS_MAX);
BPF_TABLE("lru_hash", struct flow_key, struct ack_val, ha_ack, FLOWS_MAX);
BPF_TABLE("lru_hash", struct flow_key, struct rx_val, ha_rx, FLOWS_MAX);
BPF_TABLE("lru_hash", struct flow_key, struct fb_val, ha_fb, FLOWS_MAX);
BPF_ARRAY(ha_config, __u64, CFG_ENTRIES);

static __always_inline __u64 config(__u32 index)
{
    __u64 *value = ha_config.lookup(&index);
    return value ? *value : 0;
}

#endif
