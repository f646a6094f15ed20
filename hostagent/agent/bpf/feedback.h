/* Congestion feedback from a receiver to a sender, both RoCEv2-shaped (UDP to port 4791):
 *
 *   CNP     BTH opcode 0x81, BECN set, destination QP = the flow's, 16 reserved bytes (zero),
 *           ICRC (zero: nothing here checks it); at most one per flow per CNP interval, sent
 *           when a CE-marked packet of the flow arrives (DCQCN's notification point).
 *   report  BTH opcode 0xC0 (manufacturer-specific), the reserved bytes hold the flow's packets
 *           and CE marks received so far (two big-endian u64); one per flow per report
 *           interval while packets arrive: the per-round CE fraction PLB needs, which a
 *           RoCE receiver never echoes otherwise.
 *
 * How a packet is made in TC: ingress cannot send a packet of its own, so it marks the skb
 * (HA_MARK_*), clones it to the same device's egress (bpf_clone_redirect) and restores the
 * mark; the egress program recognises the mark and turns that clone of the data packet into
 * the feedback packet in place: addresses and ports swapped, the frame cut to size, IP and
 * UDP headers (with their checksums) and the BTH written whole. */
#ifndef HA_FEEDBACK_H
#define HA_FEEDBACK_H

#include "parse.h"

struct feedback_tail {
    struct udphdr udp;
    __u8 bth[BTH_BYTES];
    __u64 rx_packets;            /* big-endian; zero in a CNP */
    __u64 rx_ce;
    __u32 icrc;
} __attribute__((packed));

struct feedback4 {
    struct iphdr ip;
    struct feedback_tail t;
} __attribute__((packed));

struct feedback6 {
    struct ipv6hdr ip;
    struct feedback_tail t;
} __attribute__((packed));

struct pseudo4 {
    __be32 src, dst;
    __u8 zero, proto;
    __be16 len;
};

struct pseudo6 {
    __u8 src[16], dst[16];
    __be32 len;
    __u8 zero[3], next;
};

static __always_inline __u16 csum_fold(__s64 sum)
{
    __u32 s = (__u32)sum;
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    return (__u16)~s;
}

/* Ingress: have the egress program send a feedback packet built from this one. */
static __always_inline void emit_feedback(struct __sk_buff *skb, __u32 mark)
{
    __u32 saved = skb->mark;
    skb->mark = mark;
    bpf_clone_redirect(skb, skb->ifindex, 0);
    skb->mark = saved;
}

static __always_inline void fill_tail(struct feedback_tail *t, const struct pkt *p, __u8 opcode,
                                      __u64 packets, __u64 ce)
{
    t->udp.source = htons(p->sport);
    t->udp.dest = htons(ROCEV2_PORT);
    t->udp.len = htons(sizeof(struct feedback_tail));
    t->udp.check = 0;
    t->bth[0] = opcode;
    t->bth[1] = 0;
    t->bth[2] = 0xff;            /* P_Key 0xFFFF */
    t->bth[3] = 0xff;
    t->bth[4] = opcode == BTH_OPCODE_CNP ? BTH_BECN : 0;
    t->bth[5] = (p->qp >> 16) & 0xff;
    t->bth[6] = (p->qp >> 8) & 0xff;
    t->bth[7] = p->qp & 0xff;
    t->bth[8] = t->bth[9] = t->bth[10] = t->bth[11] = 0;
    t->rx_packets = __builtin_bswap64(packets);
    t->rx_ce = __builtin_bswap64(ce);
    t->icrc = 0;
}

/* The UDP checksum over the pseudo header ``ph`` and the tail, then the frame cut to size and
 * the IP header and tail ``f`` written after the Ethernet header. */
static __always_inline int put_feedback(struct __sk_buff *skb, void *f, __u32 size, struct feedback_tail *t,
                                        void *ph, __u32 ph_size)
{
    __s64 sum = bpf_csum_diff(0, 0, (__be32 *)ph, ph_size, 0);
    sum = bpf_csum_diff(0, 0, (__be32 *)t, sizeof(*t), (__u32)sum);
    t->udp.check = csum_fold(sum) ?: 0xffff;
    if (bpf_skb_change_tail(skb, 14 + size, 0) < 0)
        return -1;
    return bpf_skb_store_bytes(skb, 14, f, size, 0);
}

/* Egress: turn the marked clone of a received RoCEv2 data packet into a CNP or a report. */
static __always_inline int build_feedback(struct __sk_buff *skb)
{
    struct pkt p = {};
    struct flow_key k;
    struct rx_val *rx;
    __u8 macs[12];
    __u8 opcode = skb->mark == HA_MARK_CNP ? BTH_OPCODE_CNP : BTH_OPCODE_REPORT;
    __u64 packets = 0, ce = 0;

    skb->mark = 0;
    if (parse(skb, &p) < 0 || !p.roce)
        return TC_ACT_SHOT;
    if (bpf_skb_load_bytes(skb, 0, macs, 12) < 0)
        return TC_ACT_SHOT;
    if (opcode == BTH_OPCODE_REPORT) {
        key_sent(&k, &p);
        rx = ha_rx.lookup(&k);
        if (!rx)
            return TC_ACT_SHOT;
        packets = rx->packets;
        ce = rx->ce;
    }
    if (p.family == 4) {
        struct feedback4 f = {};
        struct pseudo4 ph = {};
        f.ip.version = 4;
        f.ip.ihl = 5;
        f.ip.tot_len = htons(sizeof(f));
        f.ip.frag_off = htons(0x4000);              /* DF */
        f.ip.ttl = 64;
        f.ip.protocol = IPPROTO_UDP;
        __builtin_memcpy(&f.ip.saddr, &p.dst[12], 4);
        __builtin_memcpy(&f.ip.daddr, &p.src[12], 4);
        f.ip.check = csum_fold(bpf_csum_diff(0, 0, (__be32 *)&f.ip, sizeof(f.ip), 0));
        fill_tail(&f.t, &p, opcode, packets, ce);
        ph.src = f.ip.saddr;
        ph.dst = f.ip.daddr;
        ph.proto = IPPROTO_UDP;
        ph.len = f.t.udp.len;
        if (put_feedback(skb, &f, sizeof(f), &f.t, &ph, sizeof(ph)) < 0)
            return TC_ACT_SHOT;
    } else {
        struct feedback6 f = {};
        struct pseudo6 ph = {};
        f.ip.version = 6;
        f.ip.payload_len = htons(sizeof(f.t));
        f.ip.nexthdr = IPPROTO_UDP;
        f.ip.hop_limit = 64;
        __builtin_memcpy(&f.ip.saddr, p.dst, 16);
        __builtin_memcpy(&f.ip.daddr, p.src, 16);
        fill_tail(&f.t, &p, opcode, packets, ce);
        __builtin_memcpy(ph.src, p.dst, 16);
        __builtin_memcpy(ph.dst, p.src, 16);
        ph.len = htonl(sizeof(f.t));
        ph.next = IPPROTO_UDP;
        if (put_feedback(skb, &f, sizeof(f), &f.t, &ph, sizeof(ph)) < 0)
            return TC_ACT_SHOT;
    }
    /* Ethernet: back to where the data packet came from */
    if (bpf_skb_store_bytes(skb, 0, &macs[6], 6, 0) < 0 || bpf_skb_store_bytes(skb, 6, macs, 6, 0) < 0)
        return TC_ACT_SHOT;
    return TC_ACT_OK;
}

/* Ingress, receiver side: after counting a RoCEv2 data packet, the CNP and report it is due. */
static __always_inline void notify_sender(struct __sk_buff *skb, struct rx_val *rx, int ce, __u64 now)
{
    __u64 interval = config(CFG_CNP_INTERVAL_NS);
    __u64 last;

    /* compare-and-swap: of two CPUs seeing the flow's packets at once, only one sends */
    if (ce && interval) {
        last = rx->last_cnp_ns;
        if (now - last >= interval && __sync_val_compare_and_swap(&rx->last_cnp_ns, last, now) == last) {
            __sync_fetch_and_add(&rx->cnps, 1);
            emit_feedback(skb, HA_MARK_CNP);
        }
    }
    interval = config(CFG_REPORT_INTERVAL_NS);
    if (interval) {
        last = rx->last_report_ns;
        if (now - last >= interval && __sync_val_compare_and_swap(&rx->last_report_ns, last, now) == last) {
            __sync_fetch_and_add(&rx->reports, 1);
            emit_feedback(skb, HA_MARK_REPORT);
        }
    }
}

/* Ingress, sender side: a CNP or report for a flow this host sends. */
static __always_inline void take_feedback(struct __sk_buff *skb, const struct pkt *p, __u64 now)
{
    struct flow_key k;
    struct fb_val zero = {}, *fb;
    __u64 counts[2];

    key_answered(&k, p);
    fb = ha_fb.lookup_or_try_init(&k, &zero);
    if (!fb)
        return;
    if (p->opcode == BTH_OPCODE_CNP) {
        __sync_fetch_and_add(&fb->cnps, 1);
        fb->last_cnp_ns = now;
        return;
    }
    if (bpf_skb_load_bytes(skb, p->l4 + sizeof(struct udphdr) + BTH_BYTES, counts, sizeof(counts)) < 0)
        return;
    fb->rx_packets = __builtin_bswap64(counts[0]);
    fb->rx_ce = __builtin_bswap64(counts[1]);
    __sync_fetch_and_add(&fb->reports, 1);
}

#endif
