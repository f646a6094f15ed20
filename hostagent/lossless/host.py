"""Loading the hosts' PFC programs (bpf/pause.c) once for a lab and attaching them to each host's
interface, in the host's network namespace, with bcc and pyroute2 (as hostagent.agent.bpf.loader
attaches the host agent's, which run after these: a PFC frame never reaches them)."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

from pyroute2 import IPRoute, NetNS

from hostagent.agent.bpf.inventory import object_id
from hostagent.agent.bpf.loader import detach_all
from hostagent.lossless.pause import CLASSES, PauseCounters
from hostagent.netns import run_in_netns

SOURCE = Path(__file__).resolve().parent / "bpf" / "pause.c"
PARENTS = {"ingress": "ffff:fff2", "egress": "ffff:fff3"}
FUNCTIONS = {"ingress": b"lossless_ingress", "egress": b"lossless_egress"}
FILTER_PRIO = 0x1F00          # before the host agent's filters (0xA6E0): lower runs first
FILTER_HANDLE = 1


@dataclass(frozen=True)
class Attached:
    host: int                 # the id the maps know the host by
    ifname: str
    ifindex: int
    netns: str | None
    made_qdisc: bool


def mac_key(mac: str | bytes) -> int:
    """A MAC address as the programs' map key (its six bytes, big-endian)."""
    raw = bytes.fromhex(mac.replace(":", "")) if isinstance(mac, str) else mac
    if len(raw) != 6:
        raise ValueError(f"MAC address {mac!r}: six bytes")
    return int.from_bytes(raw, "big")


T = TypeVar("T")


def _in_namespace(path: str, work: Callable[[IPRoute], T]) -> T:
    """``work(netlink)`` in the namespace at ``path`` (a Mininet host's /proc/PID/ns/net), its
    netlink socket opened there."""
    def run() -> T:
        with IPRoute() as ipr:
            return work(ipr)
    return run_in_netns(path, run)


def _netlink_do(netns: str | None, work: Callable[[IPRoute], T]) -> T:
    """``work(netlink)`` in ``netns``: a path (/proc/PID/ns/net), a name (ip netns), or None (ours)."""
    if netns and netns.startswith("/"):
        return _in_namespace(netns, work)
    with (NetNS(netns) if netns else IPRoute()) as ipr:
        return work(ipr)


class HostPause:
    """One compiled copy of the programs for every host of a lab."""

    def __init__(self) -> None:
        from bcc import BPF     # here: bcc needs root and kernel headers, the reader does not

        self.bpf = BPF(text=SOURCE.read_text().encode())
        self.functions = {hook: self.bpf.load_func(name, BPF.SCHED_CLS) for hook, name in FUNCTIONS.items()}
        self.attached: dict[int, Attached] = {}

    @property
    def map_id(self) -> int:
        """The kernel id of the pause map (what the senders open)."""
        return object_id(self.bpf[b"lossless_pause"].map_fd)

    def sender_arg(self, host: int) -> str:
        """A sender's ``--pause`` on ``host`` (an id `attach` gave)."""
        return f"{self.map_id}:{host}"

    def attach(self, ifname: str, netns: str | None, bitrate: int, dscp_class: dict[int, int],
               peer_mac: str | bytes) -> int:
        """Both programs on ``ifname`` (in the namespace at path or name ``netns``; None: this
        process's), whose far end, the switch port that sends the host's PFC frames, has address
        ``peer_mac``; the host's link at ``bitrate`` bits/s, its DSCPs' classes. The host's id."""
        if bitrate <= 0:
            raise ValueError(f"{ifname}: a host's link rate must be positive to time a pause, not {bitrate}")
        peer = mac_key(peer_mac)
        if self.bpf[b"lossless_peers"].get(ctypes.c_uint64(peer)) is not None:
            raise ValueError(f"{ifname}: switch port {peer_mac!r} already faces another host of ours")

        def attach(ipr: IPRoute) -> tuple[int, bytes, bool]:
            found = ipr.link_lookup(ifname=ifname)
            if not found:
                raise OSError(f"no interface {ifname}{f' in {netns}' if netns else ''} to take PFC frames on")
            idx = found[0]
            mac = ipr.get_links(idx)[0].get_attr("IFLA_ADDRESS")
            made = not any(q.get_attr("TCA_KIND") == "clsact" for q in ipr.get_qdiscs(idx))
            if made:
                ipr.tc("add", "clsact", idx)
            for hook, fn in self.functions.items():
                ipr.tc("add-filter", "bpf", idx, FILTER_HANDLE, fd=fn.fd, name=fn.name, parent=PARENTS[hook],
                       prio=FILTER_PRIO, classid=1, direct_action=True)
            return idx, mac, made

        idx, mac, made = _netlink_do(netns, attach)
        host = len(self.attached) + 1
        self.attached[host] = Attached(host, ifname, idx, netns, made)
        hosts = self.bpf[b"lossless_hosts"]
        cfg = hosts.Leaf()
        cfg.bitrate = int(bitrate)
        for dscp, klass in dscp_class.items():
            if not 0 <= dscp < 64 or not 0 <= klass < CLASSES:
                raise ValueError(f"{ifname}: DSCP {dscp} -> class {klass}: DSCP 0..63, class 0..{CLASSES - 1}")
            cfg.dscp_class[dscp] = klass
        hosts[ctypes.c_uint32(host)] = cfg
        self.bpf[b"lossless_peers"][ctypes.c_uint64(peer)] = ctypes.c_uint32(host)
        self.bpf[b"lossless_macs"][ctypes.c_uint64(mac_key(mac))] = ctypes.c_uint32(host)
        return host

    def set_bitrate(self, host: int, bitrate: int) -> None:
        """The host's link rate (what a quantum lasts) from now on."""
        hosts = self.bpf[b"lossless_hosts"]
        cfg = hosts[ctypes.c_uint32(host)]
        cfg.bitrate = int(bitrate)
        hosts[ctypes.c_uint32(host)] = cfg

    def counters(self, host: int) -> dict[int, PauseCounters]:
        """{class: counters} of one host (classes that saw neither a PAUSE nor a frame left out)."""
        table = self.bpf[b"lossless_pause"]
        out = {}
        for c in range(CLASSES):
            key = table.Key()
            key.host, key.priority = host, c
            try:
                v = table[key]
            except KeyError:
                continue
            out[c] = PauseCounters(v.until_ns, v.since_ns, v.paused_ns, v.pauses, v.xons, v.tx, v.tx_paused)
        return out

    def malformed(self, host: int) -> int:
        """MAC control frames the host took that were not PFC frames."""
        try:
            return self.bpf[b"lossless_hosts"][ctypes.c_uint32(host)].malformed
        except KeyError:
            return 0

    def detach(self, host: int) -> None:
        a = self.attached.pop(host, None)
        if a is None:
            return

        def remove(ipr: IPRoute) -> None:
            if not ipr.link_lookup(ifname=a.ifname):
                return
            if a.made_qdisc:
                ipr.tc("del", "clsact", a.ifindex)
                return
            for parent in PARENTS.values():
                ipr.tc("del-filter", "bpf", a.ifindex, FILTER_HANDLE, parent=parent, prio=FILTER_PRIO)

        try:
            _netlink_do(a.netns, remove)
        except FileNotFoundError:        # the namespace went first: it took the filters
            pass

    def close(self) -> None:
        detach_all(self.attached, self.detach, lambda host: str(self.attached.get(host, host)), self.bpf, "host PFC")
