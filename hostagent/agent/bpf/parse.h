/* Parsing one Ethernet frame (IPv4 or IPv6 without extension headers, TCP or UDP) into a
 * `struct pkt`, and the flow keys of a packet. Offsets, not pointers, leave this file: the
 * programs rewrite packets with helpers, which invalidate packet pointers. */
#ifndef HA_PARSE_H
#define HA_PARSE_H

#include <uapi/linux/if_ether.h>
#include <uapi/linux/in.h>
#include <uapi/linux/ip.h>
#include <uapi/linux/ipv6.h>
#include <uapi/linux/tcp.h>
#include <uapi/linux/udp.h>

#include "flows.h"

#define ECN_MASK 3
#define ECN_ECT0 2
#define ECN_CE 3
#define TCPF_FIN 0x01
#define TCPF_SYN 0x02
#define TCPF_ACK 0x10
#define TCPF_ECE 0x40

struct pkt {
    __u8 src[16];
    __u8 dst[16];
    __u32 l3;                    /* offset of the IP header */
    __u32 l4;                    /* offset of the TCP/UDP header */
    __u32 label;                 /* IPv6 flow label */
    __u32 seq, ack;              /* TCP, host order */
    __u32 tcp_payload;           /* TCP payload bytes */
    __u32 qp;                    /* RoCEv2 BTH destination QP */
    __u16 sport, dport;          /* host order */
    __u8 family;                 /* 4 or 6 */
    __u8 proto;
    __u8 ecn;
    __u8 tcp_flags;
    __u8 roce;                   /* UDP to ROCEV2_PORT with a whole BTH */
    __u8 opcode;                 /* RoCEv2 BTH opcode */
};

static __always_inline int parse(struct __sk_buff *skb, struct pkt *p)
{
    void *data = (void *)(long)skb->data;
    void *end = (void *)(long)skb->data_end;
    struct ethhdr *eth = data;
    __u32 l4_len;

    if ((void *)(eth + 1) > end)
        return -1;
    p->l3 = sizeof(*eth);
    if (eth->h_proto == htons(ETH_P_IP)) {
        struct iphdr *ip = data + sizeof(*eth);
        if ((void *)(ip + 1) > end || ip->ihl < 5)
            return -1;
        if (ip->frag_off & htons(0x3fff))        /* a fragment: no (whole) L4 header */
            return -1;
        p->family = 4;
        p->proto = ip->protocol;
        p->ecn = ip->tos & ECN_MASK;
        p->src[10] = p->src[11] = p->dst[10] = p->dst[11] = 0xff;
        __builtin_memcpy(&p->src[12], &ip->saddr, 4);
        __builtin_memcpy(&p->dst[12], &ip->daddr, 4);
        p->l4 = p->l3 + ip->ihl * 4;
        l4_len = ntohs(ip->tot_len) - ip->ihl * 4;
    } else if (eth->h_proto == htons(ETH_P_IPV6)) {
        struct ipv6hdr *ip6 = data + sizeof(*eth);
        if ((void *)(ip6 + 1) > end)
            return -1;
        p->family = 6;
        p->proto = ip6->nexthdr;
        p->ecn = (ip6->flow_lbl[0] >> 4) & ECN_MASK;
        p->label = ((__u32)(ip6->flow_lbl[0] & 0x0f) << 16) | ((__u32)ip6->flow_lbl[1] << 8) | ip6->flow_lbl[2];
        __builtin_memcpy(p->src, &ip6->saddr, 16);
        __builtin_memcpy(p->dst, &ip6->daddr, 16);
        p->l4 = p->l3 + sizeof(*ip6);
        l4_len = ntohs(ip6->payload_len);
    } else {
        return -1;
    }
    if (p->l4 > 14 + 60)
        return -1;
    if (p->proto == IPPROTO_TCP) {
        struct tcphdr *tcp = data + p->l4;
        __u32 hdr;
        if ((void *)(tcp + 1) > end)
            return -1;
        p->sport = ntohs(tcp->source);
        p->dport = ntohs(tcp->dest);
        p->seq = ntohl(tcp->seq);
        p->ack = ntohl(tcp->ack_seq);
        p->tcp_flags = ((__u8 *)tcp)[13];
        hdr = tcp->doff * 4;
        p->tcp_payload = l4_len > hdr ? l4_len - hdr : 0;
        return 0;
    }
    if (p->proto == IPPROTO_UDP) {
        struct udphdr *udp = data + p->l4;
        __u8 *bth;
        if ((void *)(udp + 1) > end)
            return -1;
        p->sport = ntohs(udp->source);
        p->dport = ntohs(udp->dest);
        bth = (__u8 *)(udp + 1);
        if (p->dport == ROCEV2_PORT && (void *)(bth + BTH_BYTES) <= end) {
            p->roce = 1;
            p->opcode = bth[0];
            p->qp = ((__u32)bth[5] << 16) | ((__u32)bth[6] << 8) | bth[7];
        }
        return 0;
    }
    return -1;
}

/* The flow this packet belongs to, named as its sender sends it. */
static __always_inline void key_sent(struct flow_key *k, const struct pkt *p)
{
    __builtin_memset(k, 0, sizeof(*k));
    __builtin_memcpy(k->src, p->src, 16);
    __builtin_memcpy(k->dst, p->dst, 16);
    k->proto = p->proto;
    k->family = p->family;
    k->dport = p->dport;
    if (p->roce)
        k->qp = p->qp;
    else
        k->sport = p->sport;
}

/* The flow this packet answers (an ACK, a CNP, a report): addresses and ports swapped. */
static __always_inline void key_answered(struct flow_key *k, const struct pkt *p)
{
    __builtin_memset(k, 0, sizeof(*k));
    __builtin_memcpy(k->src, p->dst, 16);
    __builtin_memcpy(k->dst, p->src, 16);
    k->proto = p->proto;
    k->family = p->family;
    if (p->roce) {
        k->dport = ROCEV2_PORT;
        k->qp = p->qp;
    } else {
        k->sport = p->dport;
        k->dport = p->sport;
    }
}

#endif
