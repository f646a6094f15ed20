"""Test bench for the host agents: two network namespaces joined by a veth pair, each end with
IPv4 and IPv6 addresses and offloads off (as a Mininet host of the fabric has them), a
congested hop between them (`CeMarker`, a small cls_bpf program marking CE), and captures.
"""
from __future__ import annotations

import ctypes
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyroute2 import IPRoute, NetNS, netns

from hostagent.agent.requirements import bcc_missing  # noqa: F401 - tests import it from here

REPO = Path(__file__).resolve().parent.parent
ETH_P_ALL = 0x0003
SO_RCVBUFFORCE = 33
CAPTURE_BUFFER = 64 << 20        # a few seconds of a test's traffic, read at the end


needs_bcc = pytest.mark.skipif(bcc_missing() is not None, reason=str(bcc_missing()))


@dataclass
class NsHost:
    """One end: its namespace, interface, addresses; ``popen`` as a Mininet host's."""

    name: str
    ns: str
    iface: str
    ip4: str
    ip6: str

    def IP(self) -> str:
        return self.ip4

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen(["ip", "netns", "exec", self.ns, *argv], cwd=REPO, **kwargs)

    def socket(self, family: int, kind: int, proto: int = 0) -> socket.socket:
        return netns.create_socket(self.ns, family, kind, proto)

    def sh(self, *argv: str) -> str:
        return subprocess.run(["ip", "netns", "exec", self.ns, *argv], capture_output=True, text=True,
                              check=True).stdout

    def capture(self) -> "Capture":
        return Capture(self)


class NsPair:
    """Hosts ``a`` and ``b``: 10.251.0.1/24 + fd00:251::1/64 and .2 / ::2."""

    def __init__(self, tag: str):
        self.tag = tag
        self.a = NsHost("a", f"{tag}a", f"{tag}a0", "10.251.0.1", "fd00:251::1")
        self.b = NsHost("b", f"{tag}b", f"{tag}b0", "10.251.0.2", "fd00:251::2")

    def __enter__(self) -> "NsPair":
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _make(self) -> None:
        for h in (self.a, self.b):
            if h.ns in netns.listnetns():
                netns.remove(h.ns)
            netns.create(h.ns)
        with IPRoute() as ipr:
            ipr.link("add", ifname=self.a.iface, kind="veth", peer=self.b.iface)
            for h in (self.a, self.b):
                ipr.link("set", index=ipr.link_lookup(ifname=h.iface)[0], net_ns_fd=h.ns)
        for h in (self.a, self.b):
            h.sh("sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
                 f"net.ipv6.conf.{h.iface}.accept_dad=0")
            with NetNS(h.ns) as n:
                n.link("set", index=n.link_lookup(ifname="lo")[0], state="up")
                idx = n.link_lookup(ifname=h.iface)[0]
                n.addr("add", index=idx, address=h.ip4, prefixlen=24)
                n.addr("add", index=idx, address=h.ip6, prefixlen=64, flags=0x02)    # IFA_F_NODAD
                n.link("set", index=idx, state="up")
            if shutil.which("ethtool"):
                subprocess.run(["ip", "netns", "exec", h.ns, "ethtool", "-K", h.iface, "tx", "off", "rx", "off",
                                "gso", "off", "tso", "off", "gro", "off"], capture_output=True, check=False)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:          # both ends up, IPv6 usable
            if "tentative" not in self.a.sh("ip", "-6", "addr") + self.b.sh("ip", "-6", "addr"):
                break
            time.sleep(0.05)

    def close(self) -> None:
        for h in (self.a, self.b):
            if h.ns in netns.listnetns():
                netns.remove(h.ns)


class Capture:
    """Every frame arriving on (or leaving) a host's interface, raw, from creation on."""

    def __init__(self, host: NsHost):
        self.sock = host.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, CAPTURE_BUFFER)
        self.sock.bind((host.iface, 0))
        self.sock.setblocking(False)

    def frames(self, settle: float = 0.2) -> list[bytes]:
        """What arrived, after waiting ``settle`` seconds for stragglers."""
        time.sleep(settle)
        out = []
        while True:
            try:
                out.append(self.sock.recv(65536))
            except BlockingIOError:
                return out

    def close(self) -> None:
        self.sock.close()


MARKER_SOURCE = r"""
#include <uapi/linux/bpf.h>
#include <uapi/linux/pkt_cls.h>
#include <uapi/linux/if_ether.h>
#include <uapi/linux/in.h>
#include <uapi/linux/ip.h>
#include <uapi/linux/ipv6.h>
#include <uapi/linux/udp.h>
#include <uapi/linux/tcp.h>

struct frac { u32 num; u32 den; u64 seen; u64 marked; u32 drop; u32 pad; };
BPF_HASH(marker_frac, u32, struct frac, 64);   /* selector -> mark num of every den ECT packets (or drop all) */

int marker(struct __sk_buff *skb)
{
    void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
    struct ethhdr *eth = data;
    u32 sel = 0, l3 = sizeof(*eth), l4;
    u8 proto, ecn;
    if ((void *)(eth + 1) > end) return TC_ACT_UNSPEC;
    if (eth->h_proto == htons(ETH_P_IP)) {
        struct iphdr *ip = data + l3;
        if ((void *)(ip + 1) > end || ip->ihl != 5) return TC_ACT_UNSPEC;
        proto = ip->protocol; ecn = ip->tos & 3; l4 = l3 + 20;
    } else if (eth->h_proto == htons(ETH_P_IPV6)) {
        struct ipv6hdr *ip6 = data + l3;
        if ((void *)(ip6 + 1) > end) return TC_ACT_UNSPEC;
        proto = ip6->nexthdr; ecn = (ip6->flow_lbl[0] >> 4) & 3; l4 = l3 + 40;
    } else return TC_ACT_UNSPEC;
    if (proto == IPPROTO_UDP) {
        struct udphdr *udp = data + l4;
        u8 *bth = (u8 *)(udp + 1);
        if ((void *)(bth + 8) > end || udp->dest != htons(4791)) return TC_ACT_UNSPEC;
        sel = ((u32)bth[5] << 16) | ((u32)bth[6] << 8) | bth[7];
    } else if (proto == IPPROTO_TCP) {
        struct tcphdr *tcp = data + l4;
        if ((void *)(tcp + 1) > end) return TC_ACT_UNSPEC;
        sel = 0x10000 | ntohs(tcp->dest);
    } else return TC_ACT_UNSPEC;
    struct frac *f = marker_frac.lookup(&sel);
    if (!f) return TC_ACT_UNSPEC;
    if (f->drop) return TC_ACT_SHOT;
    if (!f->den || ecn == 0 || ecn == 3) return TC_ACT_UNSPEC;
    u64 n = __sync_fetch_and_add(&f->seen, 1);
    if (n % f->den >= f->num) return TC_ACT_UNSPEC;
    __sync_fetch_and_add(&f->marked, 1);
    if (eth->h_proto == htons(ETH_P_IP)) {
        u16 old, new;
        if (bpf_skb_load_bytes(skb, l3, &old, 2) < 0) return TC_ACT_UNSPEC;
        new = old | htons(3);
        bpf_l3_csum_replace(skb, l3 + 10, old, new, 2);
        bpf_skb_store_bytes(skb, l3, &new, 2, 0);
    } else {
        u8 b;
        if (bpf_skb_load_bytes(skb, l3 + 1, &b, 1) < 0) return TC_ACT_UNSPEC;
        b |= 0x30;
        bpf_skb_store_bytes(skb, l3 + 1, &b, 1, 0);
    }
    return TC_ACT_UNSPEC;
}
"""
MARKER_PRIO = 1          # before the agent's filters


def tcp_selector(dport: int) -> int:
    return 0x10000 | dport


class CeMarker:
    """A congested hop at a host's ingress: of the ECT packets of a RoCEv2 queue pair (selector:
    the QP) or to a TCP port (`tcp_selector`), marks ``num`` of every ``den`` CE, in order; or a
    black hole for them."""

    def __init__(self, host: NsHost):
        from bcc import BPF

        self.bpf = BPF(text=MARKER_SOURCE.encode())
        self.fn = self.bpf.load_func(b"marker", BPF.SCHED_CLS)
        self.host = host
        with NetNS(host.ns) as n:
            idx = n.link_lookup(ifname=host.iface)[0]
            if not any(q.get_attr("TCA_KIND") == "clsact" for q in n.get_qdiscs(idx)):
                n.tc("add", "clsact", idx)
            n.tc("add-filter", "bpf", idx, 1, fd=self.fn.fd, name=self.fn.name, parent="ffff:fff2",
                 prio=MARKER_PRIO, classid=1, direct_action=True)

    def mark(self, selector: int, num: int, den: int, drop: bool = False) -> None:
        """From now on mark ``num`` of every ``den`` ECT packets of ``selector`` (``drop``: drop
        all its packets instead, a black hole)."""
        t = self.bpf[b"marker_frac"]
        leaf = t.Leaf()
        leaf.num, leaf.den, leaf.drop = num, den, int(drop)
        t[ctypes.c_uint(selector)] = leaf

    def counts(self, selector: int) -> tuple[int, int]:
        """(ECT packets seen, marked) for ``selector``."""
        t = self.bpf[b"marker_frac"]
        try:
            v = t[ctypes.c_uint(selector)]
        except KeyError:
            return 0, 0
        return v.seen, v.marked

    def close(self) -> None:
        try:
            with NetNS(self.host.ns) as n:
                idx = n.link_lookup(ifname=self.host.iface)[0]
                n.tc("del-filter", "bpf", idx, 1, parent="ffff:fff2", prio=MARKER_PRIO)
        except Exception:       # noqa: BLE001 - the namespace may be gone
            pass
        self.bpf.cleanup()
