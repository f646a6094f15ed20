/* A host's NIC honouring 802.1Qbb priority flow control, as eBPF TC programs (clsact,
 * direct-action) on the host's interface: one compiled copy serves every host of a lab, its maps
 * keyed by a host id the loader gives each host. A program cannot tell which host it runs for by
 * the interface (every Mininet host's is ifindex 2, in a namespace of its own) nor by the netns
 * cookie (without a socket, TC ingress sees the root namespace's): the ingress program knows the
 * host by the PFC frame's source, the switch port facing it (lossless_peers), the egress one by
 * the frame's source, the host's own address (lossless_macs).
 *
 * lossless_ingress: a PFC frame (EtherType 0x8808, opcode 0x0101) is the MAC's: its class-enable
 * vector and quanta pause the host's sending of each class for quanta x 512 bit times at the
 * host's link rate (quanta 0: XON, at once), in lossless_pause (until_ns on CLOCK_MONOTONIC, which
 * the host's senders read before each datagram and hold the class while it is in the future); the
 * frame is consumed (TC_ACT_SHOT), as a NIC consumes it. Other MAC control frames are consumed
 * too, and counted malformed. Every other frame goes on (TC_ACT_UNSPEC).
 *
 * lossless_egress: counts what the host sends in each class (its DSCP, mapped as the switches map
 * it), and what it sent of a class while that class was paused: the proof that the hold holds. */
#include <uapi/linux/bpf.h>
#include <uapi/linux/pkt_cls.h>
#include <uapi/linux/if_ether.h>

#define ETH_P_MAC_CONTROL 0x8808
#define OPCODE_PFC 0x0101
#define QUANTUM_BITS 512ULL
#define CLASSES 8

struct pause_key {
    u32 host;
    u32 priority;
};

struct pause_val {
    u64 until_ns;       /* not sending the class before this (CLOCK_MONOTONIC) */
    u64 since_ns;       /* the pause under way (or the last) began then */
    u64 paused_ns;      /* pauses that ended, in all */
    u64 pauses, xons;   /* PFC frames with the class's bit: quanta > 0, quanta 0 */
    u64 tx, tx_paused;  /* frames the host sent in the class; of them, while it was paused */
};

struct host_cfg {
    u64 bitrate;        /* the host's link, bits/s: what a quantum lasts */
    u8 dscp_class[64];  /* DSCP -> class, as the switches' dscp_class table maps it */
    u64 malformed;      /* MAC control frames that are not PFC frames */
};

BPF_HASH(lossless_pause, struct pause_key, struct pause_val, 8192);
BPF_HASH(lossless_hosts, u32, struct host_cfg, 1024);    /* host id -> its link and DSCPs */
BPF_HASH(lossless_peers, u64, u32, 1024);                /* the switch port's MAC facing a host -> host id */
BPF_HASH(lossless_macs, u64, u32, 1024);                 /* a host's MAC -> its id */

/* the 6 bytes of a MAC address at offset at of the frame, as a map key; 0: not readable */
static __always_inline u64 mac_at(struct __sk_buff *skb, u32 at)
{
    u8 m[6];
    u64 k = 0;
    if (bpf_skb_load_bytes(skb, at, m, 6) < 0)
        return 0;
#pragma unroll
    for (int i = 0; i < 6; i++)
        k = k << 8 | m[i];
    return k;
}

/* queues.EgressQueue.pause's arithmetic: the interval [since, until], earlier ones in paused_ns */
static __always_inline void pause(struct pause_val *v, u64 now, u64 until)
{
    if (v->until_ns > now) {
        if (until > now) {
            v->until_ns = until;
            return;
        }
        v->paused_ns += now - v->since_ns;
    } else {
        v->paused_ns += v->until_ns - v->since_ns;
    }
    v->since_ns = now;
    v->until_ns = until > now ? until : now;
}

int lossless_ingress(struct __sk_buff *skb)
{
    u8 f[20];           /* opcode, class-enable vector, eight quanta */
    __be16 proto;
    u64 peer;
    u32 *host;
    struct host_cfg *cfg;
    u64 now;

    if (bpf_skb_load_bytes(skb, 12, &proto, 2) < 0 || proto != htons(ETH_P_MAC_CONTROL))
        return TC_ACT_UNSPEC;
    peer = mac_at(skb, 6);
    host = lossless_peers.lookup(&peer);
    cfg = host ? lossless_hosts.lookup(host) : 0;
    if (!host || !cfg)
        return TC_ACT_UNSPEC;                 /* not from a switch port facing a host of ours */
    if (bpf_skb_load_bytes(skb, 14, f, sizeof f) < 0 || f[0] != (OPCODE_PFC >> 8) || f[1] != (OPCODE_PFC & 0xFF)
            || f[2] || !cfg->bitrate) {
        __sync_fetch_and_add(&cfg->malformed, 1);
        return TC_ACT_SHOT;
    }
    now = bpf_ktime_get_ns();
#pragma unroll
    for (int prio = 0; prio < CLASSES; prio++) {
        struct pause_key k = { *host, prio };
        struct pause_val zero = {}, *v;
        u64 quanta;
        if (!(f[3] & (1 << prio)))
            continue;
        v = lossless_pause.lookup_or_try_init(&k, &zero);
        if (!v)
            continue;
        quanta = ((u64)f[4 + 2 * prio] << 8) | f[5 + 2 * prio];
        if (quanta) {
            v->pauses++;
            pause(v, now, now + quanta * QUANTUM_BITS * 1000000000ULL / cfg->bitrate);
        } else {
            v->xons++;
            pause(v, now, now);
        }
    }
    return TC_ACT_SHOT;                       /* the MAC's, as a NIC's */
}

int lossless_egress(struct __sk_buff *skb)
{
    u64 mac = mac_at(skb, 6);
    u32 *host = lossless_macs.lookup(&mac);
    struct host_cfg *cfg = host ? lossless_hosts.lookup(host) : 0;
    struct pause_key k = { 0, 0 };
    struct pause_val zero = {}, *v;
    __be16 proto;
    u8 b[2];

    if (!host || !cfg || bpf_skb_load_bytes(skb, 12, &proto, 2) < 0)
        return TC_ACT_UNSPEC;
    k.host = *host;
    if (proto == htons(ETH_P_IP)) {
        if (bpf_skb_load_bytes(skb, 15, b, 1) < 0)        /* the TOS byte */
            return TC_ACT_UNSPEC;
        k.priority = cfg->dscp_class[(b[0] >> 2) & 63];
    } else if (proto == htons(ETH_P_IPV6)) {
        if (bpf_skb_load_bytes(skb, 14, b, 2) < 0)        /* version, traffic class */
            return TC_ACT_UNSPEC;
        k.priority = cfg->dscp_class[((b[0] << 4 | b[1] >> 4) >> 2) & 63];
    } else {
        return TC_ACT_UNSPEC;
    }
    k.priority &= CLASSES - 1;
    v = lossless_pause.lookup_or_try_init(&k, &zero);
    if (v) {
        __sync_fetch_and_add(&v->tx, 1);
        if (v->until_ns > bpf_ktime_get_ns())
            __sync_fetch_and_add(&v->tx_paused, 1);
    }
    return TC_ACT_UNSPEC;
}
