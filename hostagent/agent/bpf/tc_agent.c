/* The host agent's two TC (clsact, direct-action) programs.
 *
 * ha_egress: counts what the host sends per flow (ha_tx), makes RoCEv2 data ECN-capable
 * (FLAG_SET_ECT), rewrites the IPv6 flow label and, for RoCEv2, the UDP source port of the
 * flows the agent has moved (ha_paths; the UDP checksum is updated, a zero IPv4 UDP checksum
 * stays zero), and turns marked clones into CNPs and reports (feedback.h).
 *
 * ha_ingress: receiver side, counts packets and CE marks per flow (ha_rx) and sends what
 * DCQCN and PLB need back (CNP on CE, at most once per flow per interval; reports); sender
 * side, counts ACKs and ECN-Echo of TCP flows it sends (ha_ack) and takes CNPs and reports
 * for its RoCEv2 flows (ha_fb), which end here as they would in a RoCE NIC.
 *
 * Both hand every other packet on with TC_ACT_UNSPEC (the next filter, if any, decides). */
#include "feedback.h"

static __always_inline int serial_after(__u32 a, __u32 b)
{
    return (__s32)(a - b) > 0;
}

static __always_inline void count_sent(struct __sk_buff *skb, struct flow_key *k, const struct pkt *p,
                                       const struct path_val *path, __u64 now)
{
    struct tx_val zero = {}, *tx = ha_tx.lookup_or_try_init(k, &zero);
    if (!tx)
        return;
    __sync_fetch_and_add(&tx->packets, 1);
    __sync_fetch_and_add(&tx->bytes, skb->len);
    tx->last_ns = now;
    tx->label = path && (path->flags & PATH_LABEL) ? path->label : p->label;
    tx->sport = path && (path->flags & PATH_SPORT) ? path->sport : p->sport;
    if (p->proto == IPPROTO_TCP) {
        __u32 end = p->seq + p->tcp_payload + ((p->tcp_flags & (TCPF_SYN | TCPF_FIN)) ? 1 : 0);
        if (!tx->seq_next || serial_after(end, tx->seq_next))
            tx->seq_next = end;
    }
}

/* IPv6: the first word holds version, traffic class (ECN in its low bits) and flow label. */
static __always_inline void rewrite_ip6_word(struct __sk_buff *skb, const struct pkt *p, int set_ect,
                                             const struct path_val *path)
{
    __be32 word;
    __u32 w;
    if (bpf_skb_load_bytes(skb, p->l3, &word, 4) < 0)
        return;
    w = ntohl(word);
    if (set_ect)
        w |= (__u32)ECN_ECT0 << 20;
    if (path && (path->flags & PATH_LABEL))
        w = (w & 0xfff00000) | (path->label & 0xfffff);
    word = htonl(w);
    bpf_skb_store_bytes(skb, p->l3, &word, 4, 0);
}

static __always_inline void set_ect4(struct __sk_buff *skb, const struct pkt *p)
{
    __be16 old, new;
    if (bpf_skb_load_bytes(skb, p->l3, &old, 2) < 0)      /* version/IHL and TOS */
        return;
    new = old | htons(ECN_ECT0);
    bpf_l3_csum_replace(skb, p->l3 + offsetof(struct iphdr, check), old, new, 2);
    bpf_skb_store_bytes(skb, p->l3, &new, 2, 0);
}

static __always_inline void set_udp_sport(struct __sk_buff *skb, const struct pkt *p, __u16 sport)
{
    __be16 old = htons(p->sport), new = htons(sport);
    bpf_l4_csum_replace(skb, p->l4 + offsetof(struct udphdr, check), old, new, BPF_F_MARK_MANGLED_0 | 2);
    bpf_skb_store_bytes(skb, p->l4 + offsetof(struct udphdr, source), &new, 2, 0);
}

int ha_egress(struct __sk_buff *skb)
{
    struct pkt p = {};
    struct flow_key k;
    struct path_val *path;
    int set_ect;
    __u64 now;

    if (skb->mark == HA_MARK_CNP || skb->mark == HA_MARK_REPORT)
        return build_feedback(skb);
    if (parse(skb, &p) < 0)
        return TC_ACT_UNSPEC;
    if (p.roce && (p.opcode == BTH_OPCODE_CNP || p.opcode == BTH_OPCODE_REPORT))
        return TC_ACT_UNSPEC;
    now = bpf_ktime_get_ns();
    key_sent(&k, &p);
    path = ha_paths.lookup(&k);
    count_sent(skb, &k, &p, path, now);
    set_ect = p.roce && p.ecn == 0 && (config(CFG_FLAGS) & FLAG_SET_ECT);
    if (p.family == 6) {
        if (set_ect || (path && (path->flags & PATH_LABEL)))
            rewrite_ip6_word(skb, &p, set_ect, path);
    } else if (set_ect) {
        set_ect4(skb, &p);
    }
    if (path && (path->flags & PATH_SPORT) && p.proto == IPPROTO_UDP && path->sport != p.sport)
        set_udp_sport(skb, &p, path->sport);
    return TC_ACT_UNSPEC;
}

static __always_inline void count_ack(const struct pkt *p, __u64 now)
{
    struct flow_key k;
    struct ack_val zero = {}, *ack;

    key_answered(&k, p);
    if (!ha_tx.lookup(&k))                    /* not a flow this host sends */
        return;
    ack = ha_ack.lookup_or_try_init(&k, &zero);
    if (!ack)
        return;
    __sync_fetch_and_add(&ack->acks, 1);
    if ((p->tcp_flags & TCPF_ECE) && !(p->tcp_flags & TCPF_SYN))
        __sync_fetch_and_add(&ack->ece, 1);
    ack->last_ns = now;
    if (!ack->ack_seq || serial_after(p->ack, ack->ack_seq))
        ack->ack_seq = p->ack;
}

int ha_ingress(struct __sk_buff *skb)
{
    struct pkt p = {};
    struct flow_key k;
    struct rx_val zero = {}, *rx;
    int ce;
    __u64 now;

    if (parse(skb, &p) < 0)
        return TC_ACT_UNSPEC;
    now = bpf_ktime_get_ns();
    if (p.roce && (p.opcode == BTH_OPCODE_CNP || p.opcode == BTH_OPCODE_REPORT)) {
        take_feedback(skb, &p, now);
        return TC_ACT_SHOT;                   /* consumed, as by a RoCE NIC */
    }
    if (p.proto == IPPROTO_TCP) {
        if (p.tcp_flags & TCPF_ACK)
            count_ack(&p, now);
        if (!p.tcp_payload)                   /* the receiver side counts data segments */
            return TC_ACT_UNSPEC;
    }
    ce = p.ecn == ECN_CE;
    key_sent(&k, &p);
    rx = ha_rx.lookup_or_try_init(&k, &zero);
    if (!rx)
        return TC_ACT_UNSPEC;
    __sync_fetch_and_add(&rx->packets, 1);
    __sync_fetch_and_add(&rx->bytes, skb->len);
    if (ce)
        __sync_fetch_and_add(&rx->ce, 1);
    if (p.roce)
        notify_sender(skb, rx, ce, now);
    return TC_ACT_UNSPEC;
}
