"""Loading the hosts' PFC programs (bpf/pause.c) once for a lab and attaching them to each host's
interface, in the host's network namespace, with bcc and pyroute2 (as hostagent.agent.bpf.loader
attaches the host agent's, which run after these: a PFC frame never reaches them)."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from pyroute2 import IPRoute, NetNS

from hostagent.agent.bpf.inventory import object_id
from hostagent.lossless.pause import CLASSES, PauseCounters

SOURCE = Path(__file__).resolve().parent / "bpf" / "pause.c"
PARENTS = {"ingress": "ffff:fff2", "egress": "ffff:fff3"}
FUNCTIONS = {"ingress": b"lossless_ingress", "egress": b"lossless_egress"}
FILTER_PRIO = 0x1F00          # before the host agent's filters (0xA6E0): lower runs first
FILTER_HANDLE = 1


@dataclass(frozen=True)
class Attached:
    ifname: str
    ifindex: int
    netns: str | None
    made_qdisc: bool


def _netlink(netns: str | None):
    return NetNS(netns) if netns else IPRoute()


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

    def sender_arg(self, ifindex: int) -> str:
        """A sender's ``--pause`` for the host of ``ifindex``."""
        return f"{self.map_id}:{ifindex}"

    def attach(self, ifname: str, netns: str | None, bitrate: int, dscp_class: dict[int, int]) -> int:
        """Both programs on ``ifname`` (in the namespace at path or name ``netns``; None: this
        process's), the host's link at ``bitrate`` bits/s, its DSCPs' classes; the ifindex. A
        second host with the same ifindex is refused (the maps are keyed by it)."""
        if bitrate <= 0:
            raise ValueError(f"{ifname}: a host's link rate must be positive to time a pause, not {bitrate}")
        with _netlink(netns) as ipr:
            found = ipr.link_lookup(ifname=ifname)
            if not found:
                raise OSError(f"no interface {ifname}{f' in {netns}' if netns else ''} to take PFC frames on")
            idx = found[0]
            if idx in self.attached:
                raise OSError(f"{ifname} has ifindex {idx}, as {self.attached[idx].ifname} has: the hosts' pause "
                              f"state is kept by ifindex")
            made = not any(q.get_attr("TCA_KIND") == "clsact" for q in ipr.get_qdiscs(idx))
            if made:
                ipr.tc("add", "clsact", idx)
            for hook, fn in self.functions.items():
                ipr.tc("add-filter", "bpf", idx, FILTER_HANDLE, fd=fn.fd, name=fn.name, parent=PARENTS[hook],
                       prio=FILTER_PRIO, classid=1, direct_action=True)
        hosts = self.bpf[b"lossless_hosts"]
        cfg = hosts.Leaf()
        cfg.bitrate = int(bitrate)
        for dscp, klass in dscp_class.items():
            if not 0 <= dscp < 64 or not 0 <= klass < CLASSES:
                raise ValueError(f"{ifname}: DSCP {dscp} -> class {klass}: DSCP 0..63, class 0..{CLASSES - 1}")
            cfg.dscp_class[dscp] = klass
        hosts[ctypes.c_uint32(idx)] = cfg
        self.attached[idx] = Attached(ifname, idx, netns, made)
        return idx

    def set_bitrate(self, ifindex: int, bitrate: int) -> None:
        """The host's link rate (what a quantum lasts) from now on."""
        hosts = self.bpf[b"lossless_hosts"]
        cfg = hosts[ctypes.c_uint32(ifindex)]
        cfg.bitrate = int(bitrate)
        hosts[ctypes.c_uint32(ifindex)] = cfg

    def counters(self, ifindex: int) -> dict[int, PauseCounters]:
        """{class: counters} of one host (classes that saw neither a PAUSE nor a frame left out)."""
        table = self.bpf[b"lossless_pause"]
        out = {}
        for c in range(CLASSES):
            key = table.Key()
            key.ifindex, key.priority = ifindex, c
            try:
                v = table[key]
            except KeyError:
                continue
            out[c] = PauseCounters(v.until_ns, v.since_ns, v.paused_ns, v.pauses, v.xons, v.tx, v.tx_paused)
        return out

    def malformed(self, ifindex: int) -> int:
        """MAC control frames the host took that were not PFC frames."""
        try:
            return self.bpf[b"lossless_hosts"][ctypes.c_uint32(ifindex)].malformed
        except KeyError:
            return 0

    def detach(self, ifindex: int) -> None:
        a = self.attached.pop(ifindex, None)
        if a is None:
            return
        try:
            with _netlink(a.netns) as ipr:
                if not ipr.link_lookup(ifname=a.ifname):
                    return
                if a.made_qdisc:
                    ipr.tc("del", "clsact", a.ifindex)
                    return
                for parent in PARENTS.values():
                    ipr.tc("del-filter", "bpf", a.ifindex, FILTER_HANDLE, parent=parent, prio=FILTER_PRIO)
        except FileNotFoundError:        # the namespace went first: it took the filters
            pass

    def close(self) -> None:
        errors = []
        for idx in list(self.attached):
            try:
                self.detach(idx)
            except Exception as err:     # noqa: BLE001 - detach the others whatever one does
                errors.append(f"ifindex {idx}: {err}")
        self.bpf.cleanup()
        if errors:
            raise OSError(f"host PFC detach failed: {'; '.join(errors)}")

