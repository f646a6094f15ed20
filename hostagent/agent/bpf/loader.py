"""Compiling the agent's TC programs with bcc, attaching them to an interface (clsact,
direct-action, in the manner of bcc's examples/networking) and reading and writing their maps.

    program = TcProgram()                      # compiles tc_agent.c (clang, about a second)
    program.attach("h1-eth0")                  # ingress and egress; netns="name" for another namespace
    program.configure(cnp_interval_ns=..., report_interval_ns=..., set_ect=True)
    program.set_path(key, label=0x12345, sport=50123)
    program.tx()                               # {FlowKey: TxCounters}
    program.close()                            # filters removed (and the clsact qdisc, if it made it)

bcc rewrites map accesses only in the source it is given, not in included files, so the
loader inlines the ``#include "..."`` lines of tc_agent.c itself (each file once). Maps live
as long as this process holds them or a filter holds a program: `close` (or the process's
exit after it) leaves nothing behind.
"""
from __future__ import annotations

import ctypes
import re
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable, Iterable, Iterator, TypeVar

from pyroute2 import IPRoute, NetNS

from hostagent.agent.bpf.inventory import object_id
from hostagent.agent.flowkey import FlowKey

BPF_DIR = Path(__file__).resolve().parent
MAIN_SOURCE = "tc_agent.c"
INGRESS, EGRESS = "ingress", "egress"
PARENTS = {INGRESS: "ffff:fff2", EGRESS: "ffff:fff3"}     # clsact's two hooks
FUNCTIONS = {INGRESS: b"ha_ingress", EGRESS: b"ha_egress"}     # bcc wants bytes
FILTER_PRIO = 0xA6E0                                      # the agent's filters, told apart from others'
FILTER_HANDLE = 1
MAPS = (b"ha_paths", b"ha_tx", b"ha_ack", b"ha_rx", b"ha_fb", b"ha_config")

# indices into ha_config (bpf/flows.h)
CFG_CNP_INTERVAL_NS, CFG_REPORT_INTERVAL_NS, CFG_FLAGS = 0, 1, 2
FLAG_SET_ECT = 1
PATH_LABEL, PATH_SPORT = 1, 2
FLOW_LABEL_MAX = (1 << 20) - 1
_INCLUDE = re.compile(r'^#include "([^"]+)"\s*$')


@dataclass(frozen=True)
class TxCounters:
    """ha_tx: what this host sent on a flow (bytes: Ethernet frames)."""

    packets: int
    bytes: int
    last_ns: int        # CLOCK_MONOTONIC ns of the last packet
    seq_next: int       # TCP: highest sequence number sent + 1
    label: int          # IPv6 flow label on the wire
    sport: int          # source port on the wire


@dataclass(frozen=True)
class AckCounters:
    """ha_ack: ACKs (and ECN-Echo among them) received for a TCP flow this host sends."""

    acks: int
    ece: int
    last_ns: int
    ack_seq: int


@dataclass(frozen=True)
class RxCounters:
    """ha_rx: what this host received on a flow, and the feedback it sent for it."""

    packets: int
    bytes: int
    ce: int
    cnps: int
    reports: int
    last_cnp_ns: int
    last_report_ns: int


@dataclass(frozen=True)
class FeedbackCounters:
    """ha_fb: CNPs and receiver reports that came back for a RoCEv2 flow this host sends."""

    cnps: int
    reports: int
    rx_packets: int     # the latest report's counters
    rx_ce: int
    last_cnp_ns: int


@dataclass(frozen=True)
class Attachment:
    ifname: str
    ifindex: int
    netns: str | None
    made_qdisc: bool    # the clsact qdisc was made here (and goes at detach)


R = TypeVar("R")
T = TypeVar("T")


def program_text(main: str = MAIN_SOURCE, directory: Path = BPF_DIR) -> str:
    """The C source with its local includes inlined, each file once."""
    seen: set[str] = set()

    def inline(name: str) -> str:
        if name in seen:
            return ""
        seen.add(name)
        path = directory / name
        if not path.is_file():
            raise FileNotFoundError(f"BPF source {path} (included from {main}) is missing")
        out = []
        for line in path.read_text().splitlines():
            m = _INCLUDE.match(line)
            out.append(inline(m.group(1)) if m else line)
        return "\n".join(out)

    return inline(main)


@contextmanager
def _netlink(netns: str | None) -> Iterator[IPRoute]:
    ipr = NetNS(netns) if netns else IPRoute()
    try:
        yield ipr
    finally:
        ipr.close()


class TcProgram:
    """One compiled copy of the programs and their maps (one per host agent)."""

    def __init__(self) -> None:
        from bcc import BPF     # imported here: bcc needs root and kernel headers, the rest of the package does not

        self._bcc = BPF
        self.bpf = BPF(text=program_text().encode(), cflags=["-Wno-incompatible-pointer-types-discards-qualifiers"])
        self.functions = {hook: self.bpf.load_func(name, BPF.SCHED_CLS) for hook, name in FUNCTIONS.items()}
        self.attachments: list[Attachment] = []
        self._key = self.bpf[b"ha_paths"].Key

    # -- attaching -------------------------------------------------------------------
    def attach(self, ifname: str, netns: str | None = None) -> Attachment:
        """Both programs on ``ifname`` (in namespace ``netns``, default this process's), under a
        clsact qdisc made if the interface has none."""
        with _netlink(netns) as ipr:
            found = ipr.link_lookup(ifname=ifname)
            if not found:
                where = f" in namespace {netns}" if netns else ""
                raise OSError(f"no interface {ifname}{where} to attach the host agent to")
            idx = found[0]
            made = not _has_clsact(ipr, idx)
            if made:
                ipr.tc("add", "clsact", idx)
            try:
                for hook, fn in self.functions.items():
                    ipr.tc("add-filter", "bpf", idx, FILTER_HANDLE, fd=fn.fd, name=fn.name, parent=PARENTS[hook],
                           prio=FILTER_PRIO, classid=1, direct_action=True)
            except Exception:
                _remove(ipr, idx, made)
                raise
        attachment = Attachment(ifname, idx, netns, made)
        self.attachments.append(attachment)
        return attachment

    def detach(self, attachment: Attachment) -> None:
        """The filters (and the clsact qdisc, if it was made here) off the interface; an
        interface that is gone (its namespace deleted) took them with it."""
        if attachment in self.attachments:
            self.attachments.remove(attachment)
        try:
            with _netlink(attachment.netns) as ipr:
                if ipr.link_lookup(ifname=attachment.ifname):
                    _remove(ipr, attachment.ifindex, attachment.made_qdisc)
        except FileNotFoundError:          # the namespace went first
            pass

    def close(self) -> None:
        """Detach everywhere and release the programs and maps."""
        detach_all(self.attachments, self.detach, lambda a: a.ifname, self.bpf, "host agent")

    def object_ids(self) -> dict[str, list[int]]:
        """Kernel ids of the programs and maps (`hostagent.agent.bpf.inventory`)."""
        return {"prog": sorted(object_id(fn.fd) for fn in self.functions.values()),
                "map": sorted(object_id(self.bpf[name].map_fd) for name in MAPS)}

    # -- maps ------------------------------------------------------------------------
    def configure(self, *, cnp_interval_ns: int = 0, report_interval_ns: int = 0, set_ect: bool = False) -> None:
        table = self.bpf[b"ha_config"]
        for index, value in ((CFG_CNP_INTERVAL_NS, cnp_interval_ns), (CFG_REPORT_INTERVAL_NS, report_interval_ns),
                             (CFG_FLAGS, FLAG_SET_ECT if set_ect else 0)):
            if value < 0:
                raise ValueError(f"host agent configuration entry {index}: {value} is negative")
            table[ctypes.c_int(index)] = ctypes.c_ulonglong(value)

    def set_path(self, key: FlowKey, *, label: int | None = None, sport: int | None = None) -> None:
        """Make ``key``'s packets leave with flow label ``label`` (IPv6) and UDP source port
        ``sport`` (None: leave that field as the socket sends it)."""
        if label is not None and not 0 <= label <= FLOW_LABEL_MAX:
            raise ValueError(f"{key.describe()}: flow label {label} is not in 0..{FLOW_LABEL_MAX}")
        if sport is not None and not 1 <= sport <= 65535:
            raise ValueError(f"{key.describe()}: source port {sport} is not in 1..65535")
        table = self.bpf[b"ha_paths"]
        leaf = table.Leaf()
        leaf.label, leaf.sport = label or 0, sport or 0
        leaf.flags = (PATH_LABEL if label is not None else 0) | (PATH_SPORT if sport is not None else 0)
        table[key.to_c(self._key)] = leaf

    def clear_path(self, key: FlowKey) -> None:
        try:
            del self.bpf[b"ha_paths"][key.to_c(self._key)]
        except KeyError:
            pass

    def paths(self) -> dict[FlowKey, tuple[int | None, int | None]]:
        """{flow: (label or None, sport or None)} as the agent set them."""
        out = {}
        for k, v in self.bpf[b"ha_paths"].items():
            out[FlowKey.from_c(k)] = (v.label if v.flags & PATH_LABEL else None, v.sport if v.flags & PATH_SPORT else None)
        return out

    def forget(self, key: FlowKey) -> None:
        """Drop every record of ``key`` (a flow that ended)."""
        c = key.to_c(self._key)
        for name in (b"ha_paths", b"ha_tx", b"ha_ack", b"ha_fb"):
            try:
                del self.bpf[name][c]
            except KeyError:
                pass

    def tx(self) -> dict[FlowKey, TxCounters]:
        return self._read(b"ha_tx", TxCounters)

    def acks(self) -> dict[FlowKey, AckCounters]:
        return self._read(b"ha_ack", AckCounters)

    def rx(self) -> dict[FlowKey, RxCounters]:
        return self._read(b"ha_rx", RxCounters)

    def feedback(self) -> dict[FlowKey, FeedbackCounters]:
        return self._read(b"ha_fb", FeedbackCounters)

    def _read(self, name: bytes, record: type[R]) -> dict[FlowKey, R]:
        names = [f.name for f in fields(record)]  # type: ignore[arg-type]
        return {FlowKey.from_c(k): record(*(getattr(v, n) for n in names)) for k, v in self.bpf[name].items()}


def detach_all(items: Iterable[T], detach: Callable[[T], None], name: Callable[[T], str], bpf, what: str) -> None:
    """``detach`` each of ``items``, whatever another does, then release ``bpf``'s programs and
    maps (bcc's cleanup); OSError naming every item whose detach failed (``name(item)``)."""
    errors = []
    for item in list(items):
        try:
            detach(item)
        except Exception as err:       # noqa: BLE001 - detach the others whatever one does
            errors.append(f"{name(item)}: {err}")
    bpf.cleanup()
    if errors:
        raise OSError(f"{what} detach failed: {'; '.join(errors)}")


def _has_clsact(ipr: IPRoute, idx: int) -> bool:
    return any(q.get_attr("TCA_KIND") == "clsact" for q in ipr.get_qdiscs(idx))


def _remove(ipr: IPRoute, idx: int, made_qdisc: bool) -> None:
    if made_qdisc:
        ipr.tc("del", "clsact", idx)       # takes every filter under it
        return
    for parent in PARENTS.values():
        try:
            ipr.tc("del-filter", "bpf", idx, FILTER_HANDLE, parent=parent, prio=FILTER_PRIO)
        except Exception as err:           # noqa: BLE001 - the filter may be gone already
            if "No such file" not in str(err) and "ENOENT" not in str(err):
                raise


def agent_filters(ifname: str, netns: str | None = None) -> list[str]:
    """The agent's filters (by priority) on ``ifname``: what `close` must leave as []."""
    with _netlink(netns) as ipr:
        found = ipr.link_lookup(ifname=ifname)
        if not found:
            return []
        return sorted({f"{ifname} {hook} prio {FILTER_PRIO:#x}" for hook, parent in PARENTS.items()
                       for f in ipr.get_filters(found[0], parent=parent) if f.get("info", 0) >> 16 == FILTER_PRIO})
